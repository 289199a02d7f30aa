//! The gates in words: the verdict first, the gate table (deciding gates
//! with their outcome, the others marked as not deciding), and every failed
//! gate part, from the `gates` block or else the seed's fields.

use serde_json::Value;

use crate::gate::non_inferior_gate;
use crate::model::{Gate, Side};

use super::View;

/// Whether a report's performance gate is decided by evidence (its
/// `statistics.gate_decides` says so and it has the evidence gate), read
/// from the JSON as is: the renderers and the JUnit export share this rule.
pub(in crate::render) fn evidence_decides(root: &Value) -> bool {
    root.pointer("/statistics/gate_decides")
        .and_then(Value::as_str)
        == Some("evidence")
        && root
            .pointer("/gates/performance_evidence")
            .is_some_and(Value::is_object)
}

/// Whether the policy's turnover gate is the non-inferior one (else strict).
pub(in crate::render) fn non_inferior_turnover(root: &Value) -> bool {
    root.pointer("/turnover_gate/mode").and_then(Value::as_str) == Some("non_inferior")
}

/// One row of the gate table.
pub struct GateRow {
    pub name: &'static str,
    /// "pass", "fail", "inconclusive" or "unknown".
    pub outcome: String,
    /// False for a gate shown beside the verdict, not deciding it.
    pub deciding: bool,
    pub note: String,
}

impl GateRow {
    fn deciding(name: &'static str, outcome: String, note: &str) -> GateRow {
        GateRow {
            name,
            outcome,
            deciding: true,
            note: note.to_string(),
        }
    }

    fn beside(name: &'static str, outcome: String, why: &str) -> GateRow {
        GateRow {
            name,
            outcome,
            deciding: false,
            note: format!("not deciding: {why}"),
        }
    }

    /// ✓, ✗ or ? for a deciding gate, – for one that did not run; · for
    /// one that decides nothing.
    pub fn mark(&self) -> &'static str {
        match (self.deciding, self.outcome.as_str()) {
            (false, _) => "·",
            (true, "pass") => "✓",
            (true, "fail") => "✗",
            (true, o) if o.starts_with(NOT_RUN) => "–",
            _ => "?",
        }
    }
}

/// How a gate that did not run reads in every view: `not run (skipped by
/// the plan)`.
pub const NOT_RUN: &str = "not run";

fn not_run(why: &str) -> String {
    format!("{NOT_RUN} ({why})")
}

impl GateRow {
    /// Whether the gate did not run.
    pub fn not_run(&self) -> bool {
        self.outcome.starts_with(NOT_RUN)
    }
}

/// Most metrics named one by one in the verdict before the rest is counted.
const VERDICT_NAMED: usize = 6;

impl View {
    /// The verdict first, in a few lines: the qualification, what decided it
    /// (the metrics confidently worse, else those still undecided and the
    /// requests that would decide them), the turnover and output-quality
    /// findings, and what was measured. The tables below give the detail.
    pub fn verdict_lines(&self) -> Vec<String> {
        let mut out = vec![format!("verdict      {}", self.headline())];
        let short = |subject: &str| {
            subject
                .strip_prefix("cells.")
                .map_or(subject.to_string(), |s| s.replacen(".metrics.", " ", 1))
        };
        if let Some(e) = self.evidence() {
            let count = |o: &str| e.parts.iter().filter(|p| p.1 == o).count();
            out.push(format!(
                "performance  {} by evidence: {} metric(s) confidently worse than their margin, {} confidently within it, {} undecided",
                e.outcome,
                count("fail"),
                count("pass"),
                count("inconclusive")
            ));
            let decisive = if e.outcome == "fail" {
                "fail"
            } else {
                "inconclusive"
            };
            let named: Vec<&(String, String, String)> =
                e.parts.iter().filter(|p| p.1 == decisive).collect();
            for (subject, _, reason) in named.iter().take(VERDICT_NAMED) {
                let mark = if decisive == "fail" { "✗" } else { "?" };
                out.push(format!("  {mark} {}: {reason}", short(subject)));
            }
            if named.len() > VERDICT_NAMED {
                out.push(format!(
                    "  … and {} more below",
                    named.len() - VERDICT_NAMED
                ));
            }
            if let (Some(n), "inconclusive") = (e.requests_to_resolve, e.outcome.as_str()) {
                out.push(format!(
                    "  about {n} requests per side would decide every undecided metric"
                ));
            }
            for c in &e.cost {
                out.push(format!("  {c}"));
            }
        }
        // The policy's turnover gate, as `failed_parts` names it.
        let policy_gate = self.policy_turnover_gate();
        let turnover: Vec<(String, String, String)> = self
            .failed_parts()
            .into_iter()
            .filter(|(gate, _, _)| gate == policy_gate)
            .collect();
        for (gate, subject, reason) in turnover.iter().take(3) {
            out.push(format!("turnover     ✗ {gate}: {subject}: {reason}"));
        }
        if let Some(why) = &self.turnover_not_run {
            out.push(format!(
                "turnover     {}: failures under model turnover were not checked",
                not_run(why)
            ));
        }
        if let Some(g) = self.gates.as_ref().and_then(|g| g.quality.as_ref()) {
            out.push(format!("quality      {} by evidence", g.outcome.as_str()));
            for p in g
                .parts
                .iter()
                .filter(|p| p.outcome != crate::stats::GateOutcome::Pass)
            {
                let mark = if p.outcome == crate::stats::GateOutcome::Fail {
                    "✗"
                } else {
                    "?"
                };
                out.push(format!(
                    "  {mark} {}: {}",
                    p.subject.trim_start_matches("quality: "),
                    p.reason
                ));
            }
        }
        if let Some(rc) = &self.references {
            out.push(format!(
                "output       reference pairs {}",
                Self::reference_summary(rc)
            ));
        }
        let (mut b, mut c) = (0, 0);
        for cell in &self.cells {
            b += cell.baseline_requests.unwrap_or(0);
            c += cell.candidate_requests.unwrap_or(0);
        }
        out.push(format!(
            "measured     {b} baseline / {c} candidate requests in {} cell(s)",
            self.cells.len()
        ));
        out
    }

    /// Every failed gate part, for the summary: from the `gates` block when
    /// present, else reconstructed from the seed fields.
    pub fn failed_parts(&self) -> Vec<(String, String, String)> {
        if let Some(g) = &self.gates {
            return [
                ("performance", &g.performance),
                ("strict turnover", &g.strict_turnover),
                ("non-inferior turnover", &g.non_inferior_turnover),
            ]
            .into_iter()
            .flat_map(|(gate, gt)| {
                gt.parts.iter().filter(|p| !p.passed).map(move |p| {
                    let reason = if gate == "performance" {
                        crate::render::estimate::point_reason(&p.reason)
                    } else {
                        p.reason.clone()
                    };
                    (gate.to_string(), p.subject.clone(), reason)
                })
            })
            .collect();
        }
        let mut out = Vec::new();
        for c in &self.cells {
            for (side, e) in [
                ("baseline", c.baseline_eligible),
                ("candidate", c.candidate_eligible),
            ] {
                if e != Some(true) {
                    out.push((
                        "performance".into(),
                        format!("cells.{}.{side}_performance_eligible", c.name),
                        format!("{side} cell is not performance-eligible"),
                    ));
                }
            }
            for m in &c.metrics {
                if m.within_threshold == Some(false) {
                    out.push((
                        "performance".into(),
                        format!("cells.{}.metrics.{}", c.name, m.name),
                        format!(
                            "point delta {} beyond the {}% threshold",
                            m.delta_percent.map_or("—".into(), |d| format!("{d:+.2}%")),
                            m.threshold_percent.map_or("?".into(), |t| t.to_string())
                        ),
                    ));
                }
            }
        }
        for r in self.runs.iter().filter(|r| r.side == Side::Candidate) {
            if r.failed != Some(0) {
                out.push((
                    "strict turnover".into(),
                    r.key.clone(),
                    format!(
                        "{} of {} failed",
                        r.failed.map_or("?".into(), |x| x.to_string()),
                        r.requests.map_or("?".into(), |x| x.to_string())
                    ),
                ));
            }
        }
        out
    }

    /// Whether the evidence gate decides performance: then the seed's
    /// point-delta gate is a flag beside it, never a second verdict.
    pub fn evidence_decides(&self) -> bool {
        self.decides_by_evidence && self.evidence().is_some()
    }

    /// Every gate the report holds, in one order for all renderers: the
    /// deciding ones with their outcome, the others marked as not deciding
    /// (the seed's point gate under evidence, the turnover gate of the other
    /// mode), so no view shows two verdicts for one thing.
    pub fn gate_rows(&self) -> Vec<GateRow> {
        let word = |p: Option<bool>| crate::render::pass_word(p).to_string();
        let mut rows = Vec::new();
        match self.evidence().filter(|_| self.evidence_decides()) {
            Some(e) => {
                rows.push(GateRow::deciding("performance (evidence)", e.outcome, ""));
                rows.push(GateRow::beside(
                    "seed point gate",
                    word(self.performance_gate_passed),
                    "the seed's fixed-threshold flag on point deltas; the evidence decides",
                ));
            }
            None => rows.push(GateRow::deciding(
                "performance",
                word(self.performance_gate_passed),
                "",
            )),
        }
        let (strict, ni) = match &self.turnover_not_run {
            Some(why) => (not_run(why), not_run(why)),
            None => (
                word(self.strict_turnover_gate_passed),
                word(Some(self.non_inferior_gate().passed)),
            ),
        };
        let alpha = format!("alpha {}", self.turnover.alpha);
        if self.non_inferior {
            rows.push(GateRow::beside(
                "strict turnover",
                strict,
                "the policy's turnover gate is non-inferior",
            ));
            rows.push(GateRow::deciding("non-inferior turnover", ni, &alpha));
        } else {
            rows.push(GateRow::deciding("strict turnover", strict, ""));
            rows.push(GateRow::beside(
                "non-inferior turnover",
                ni,
                &format!("{alpha}; the policy's turnover gate is strict"),
            ));
        }
        if let Some(q) = self.gates.as_ref().and_then(|g| g.quality.as_ref()) {
            rows.push(GateRow::deciding(
                "output quality (evidence)",
                q.outcome.as_str().to_string(),
                "",
            ));
        }
        rows
    }

    /// The policy's turnover gate, as [`Self::failed_parts`] names it.
    fn policy_turnover_gate(&self) -> &'static str {
        if self.non_inferior {
            "non-inferior turnover"
        } else {
            "strict turnover"
        }
    }

    /// [`Self::failed_parts`] of the gates that decide: what a reader must
    /// act on. The evidence gate's own parts are listed with the evidence.
    pub fn deciding_failed_parts(&self) -> Vec<(String, String, String)> {
        let skip_performance = self.evidence_decides();
        let policy_turnover = self.policy_turnover_gate();
        self.failed_parts()
            .into_iter()
            .filter(|(gate, _, _)| match gate.as_str() {
                "performance" => !skip_performance,
                "strict turnover" | "non-inferior turnover" => gate == policy_turnover,
                _ => true,
            })
            .collect()
    }

    /// The non-inferiority gate: the report's, else computed from the counts.
    pub fn non_inferior_gate(&self) -> Gate {
        match &self.gates {
            Some(g) => g.non_inferior_turnover.clone(),
            None => non_inferior_gate(&self.turnover),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A report decided by evidence where the seed's point gate failed: the
    /// gate table shows the evidence outcome as the deciding one, the point
    /// gate as not deciding, and lists none of its point deltas as failures.
    fn point_gate_failed_evidence_undecided() -> Value {
        json!({
            "performance_gate_passed": false,
            "strict_turnover_gate_passed": true,
            "turnover_gate": {"mode": "strict", "passed": true},
            "statistics": {"gate_decides": "evidence"},
            "gates": {
                "qualified": false,
                "performance": {"passed": false, "rule": "r", "parts": [
                    {"subject": "cells.c.metrics.ttft_p50_ms", "passed": false, "reason": "+13.61 % > threshold 5 %"}]},
                "performance_evidence": {"outcome": "inconclusive", "rule": "r", "parts": [
                    {"subject": "cells.c.metrics.ttft_p50_ms", "outcome": "inconclusive", "reason": "bounds [-26.75%, +31.03%]"}]},
                "strict_turnover": {"passed": true, "rule": "r", "parts": []},
                "non_inferior_turnover": {"passed": false, "rule": "r", "parts": [
                    {"subject": "t", "passed": false, "reason": "upper bound 0.10 >= 0.05"}]}
            }
        })
    }

    #[test]
    fn only_deciding_gates_carry_a_verdict() {
        let v = crate::render::view_of(&point_gate_failed_evidence_undecided(), Vec::new());
        assert!(v.evidence_decides());
        let rows = v.gate_rows();
        let deciding: Vec<(&str, &str)> = rows
            .iter()
            .filter(|g| g.deciding)
            .map(|g| (g.name, g.outcome.as_str()))
            .collect();
        assert_eq!(
            deciding,
            [
                ("performance (evidence)", "inconclusive"),
                ("strict turnover", "pass")
            ]
        );
        let beside: Vec<(&str, &str, &str)> = rows
            .iter()
            .filter(|g| !g.deciding)
            .map(|g| (g.name, g.outcome.as_str(), g.mark()))
            .collect();
        assert_eq!(
            beside,
            [
                ("seed point gate", "fail", "·"),
                ("non-inferior turnover", "fail", "·")
            ]
        );
        assert!(
            v.deciding_failed_parts().is_empty(),
            "{:?}",
            v.deciding_failed_parts()
        );
        assert_eq!(v.failed_parts().len(), 2);
    }
}
