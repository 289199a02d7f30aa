//! What the renderers show, read leniently from any v1 report: seed fields
//! are expected, additions used when present, and nothing missing is fatal
//! (a renderer shows "—" instead).

use std::cmp::Ordering;

use serde_json::Value;

use crate::stats::{Direction, Interval};

use super::super::checker::Disagreement;
use super::super::gate::non_inferior_gate;
use super::super::model::{
    Decision, FailureRate, Gate, Gates, ProvenancePair, RowsPair, Side, SloComparison, Statistics,
    TurnoverComparison, parse_regression_flag, parse_turnover_key,
};
use super::super::policy::{DEFAULT_METRICS, infer_direction, split_quantile};
use crate::agreement::{DivergenceClass, TokenLogprob};
use crate::artifact::{ServerTimingCheck, SloAttainment};
use crate::quality::QualityComparison;
use crate::reference::ReferenceComparison;
use crate::server_metrics::{QUEUE_GAUGES, ServerMetrics};
use crate::stats;

/// Computed from a report for its view before it is built: `verify`'s
/// disagreements (by the caller) and the turnover comparison (`checks.rs`).
pub struct Checks {
    pub disagreements: Vec<Disagreement>,
    pub turnover: TurnoverComparison,
    /// True when the report had no `turnover_comparison` and one was
    /// computed from the runs' counts.
    pub turnover_computed: bool,
}

pub struct View {
    pub schema: Option<String>,
    pub baseline_image: Option<String>,
    pub candidate_image: Option<String>,
    pub cells: Vec<CellView>,
    pub performance_gate_passed: Option<bool>,
    pub strict_turnover_gate_passed: Option<bool>,
    pub qualification: Option<String>,
    pub promotion: Option<String>,
    pub human_decision: Option<String>,
    pub runs: Vec<RunView>,
    pub turnover: TurnoverComparison,
    /// True when the report had no `turnover_comparison` and the renderer
    /// computed one from the runs' counts.
    pub turnover_computed: bool,
    pub gates: Option<Gates>,
    pub statistics: Option<Statistics>,
    /// [`evidence_decides`] of the report as read.
    pub decides_by_evidence: bool,
    /// [`non_inferior_turnover`] of the report as read.
    pub non_inferior: bool,
    pub decision: Option<Decision>,
    pub provenance: Option<ProvenancePair>,
    pub warnings: Vec<String>,
    pub disagreements: Vec<Disagreement>,
    /// The cross-runtime reference pairs, when the report classified them.
    pub references: Option<ReferenceComparison>,
    /// Output quality (hard-divergence share, task accuracy), when judged.
    pub quality: Option<QualityComparison>,
}

impl View {
    /// The heading every renderer leads with: the qualification, unless the
    /// report fails verification — then that failure, since none of the
    /// report's own claims (its qualification included) can be trusted.
    pub fn headline(&self) -> String {
        let q = self.qualification.as_deref().unwrap_or("no qualification");
        if self.disagreements.is_empty() {
            q.to_string()
        } else {
            format!(
                "VERIFICATION FAILED ({} disagreement(s)): this report contradicts itself; its qualification ({q}) is not to be trusted",
                self.disagreements.len()
            )
        }
    }
}

pub struct CellView {
    pub name: String,
    pub baseline_requests: Option<u64>,
    pub candidate_requests: Option<u64>,
    pub baseline_eligible: Option<bool>,
    pub candidate_eligible: Option<bool>,
    pub median_prompt_tokens: Option<f64>,
    pub baseline_reasons: Vec<String>,
    pub candidate_reasons: Vec<String>,
    pub metrics: Vec<MetricView>,
    /// SLO attainment of both sides, when the cell has SLOs.
    pub slo: Option<SloComparison>,
    /// Every recorded request of each side, in request order, when kept.
    pub rows: Option<RowsPair>,
    pub baseline_server: Option<ServerTimingCheck>,
    pub candidate_server: Option<ServerTimingCheck>,
    /// Each side's metrics endpoints over the cell.
    pub baseline_metrics: Vec<ServerMetrics>,
    pub candidate_metrics: Vec<ServerMetrics>,
    /// Each side's requests by turn or prompt length (workload cells).
    pub baseline_slices: Vec<crate::artifact::Slice>,
    pub candidate_slices: Vec<crate::artifact::Slice>,
    /// Each side's conversation sessions.
    pub baseline_sessions: Option<crate::artifact::Sessions>,
    pub candidate_sessions: Option<crate::artifact::Sessions>,
    /// Each side's speculative decoding, as its server counted it.
    pub baseline_speculative: Option<crate::artifact::Speculative>,
    pub candidate_speculative: Option<crate::artifact::Speculative>,
}

impl CellView {
    /// One line per turn (or prompt-length bucket) with both sides' medians
    /// beside each other; empty for a cell of one kind of request.
    pub fn slice_lines(&self) -> Vec<String> {
        let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
        let change = |b: Option<f64>, c: Option<f64>| match (b, c) {
            (Some(b), Some(c)) if b > 0.0 => format!(" ({:+.1}%)", (c / b - 1.0) * 100.0),
            _ => String::new(),
        };
        let share = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{:.0}%", v * 100.0));
        let sessions = self.baseline_sessions.as_ref().map(|b| {
            let c = self.candidate_sessions.as_ref();
            let cf = |f: fn(&crate::artifact::Sessions) -> Option<f64>| c.and_then(f);
            format!(
                "sessions of {} turns: {}/{} complete baseline, {}/{} candidate; duration p50 {} → {} ms{}; TTFTs summed per session p50 {} → {} ms{}",
                b.turns,
                b.complete,
                b.sessions,
                c.map_or(0, |c| c.complete),
                c.map_or(0, |c| c.sessions),
                ms(b.duration_p50_ms),
                ms(cf(|c| c.duration_p50_ms)),
                change(b.duration_p50_ms, cf(|c| c.duration_p50_ms)),
                ms(b.ttft_sum_p50_ms),
                ms(cf(|c| c.ttft_sum_p50_ms)),
                change(b.ttft_sum_p50_ms, cf(|c| c.ttft_sum_p50_ms)),
            )
        });
        let slices = self.baseline_slices.iter().map(|b| {
                let c = self
                    .candidate_slices
                    .iter()
                    .find(|c| c.by == b.by && c.label == b.label);
                let cf = |f: fn(&crate::artifact::Slice) -> Option<f64>| c.and_then(f);
                format!(
                    "{} {}: {}/{} requests, prompt p50 {} tokens; TTFT p50 {} → {} ms{}; e2e p50 {} → {} ms{}; cached {} → {}",
                    if b.by == "turn" { "turn" } else { "prompt" },
                    b.label,
                    b.requests,
                    c.map_or(0, |c| c.requests),
                    ms(b.prompt_tokens_p50),
                    ms(b.ttft_p50_ms),
                    ms(cf(|c| c.ttft_p50_ms)),
                    change(b.ttft_p50_ms, cf(|c| c.ttft_p50_ms)),
                    ms(b.e2e_p50_ms),
                    ms(cf(|c| c.e2e_p50_ms)),
                    change(b.e2e_p50_ms, cf(|c| c.e2e_p50_ms)),
                    share(b.cached_share),
                    share(cf(|c| c.cached_share)),
                )
            });
        sessions.into_iter().chain(slices).collect()
    }

    /// Each side's client-minus-server overhead, then what each metrics
    /// endpoint said, in words; empty when the server said nothing.
    pub fn server_lines(&self) -> Vec<String> {
        self.server_entries().into_iter().map(|l| l.text).collect()
    }

    fn server_entries(&self) -> Vec<ServerLine> {
        let mut out = self.timing_lines();
        out.extend(self.speculative_line());
        for (side, all) in [
            ("baseline", &self.baseline_metrics),
            ("candidate", &self.candidate_metrics),
        ] {
            for m in all {
                out.extend(metrics_lines(side, m));
            }
        }
        out
    }

    /// Both sides' speculative decoding side by side; an alarm when the
    /// baseline drafted and the candidate did not.
    fn speculative_line(&self) -> Option<ServerLine> {
        let (b, c) = (
            self.baseline_speculative.as_ref(),
            self.candidate_speculative.as_ref(),
        );
        if b.is_none() && c.is_none() {
            return None;
        }
        let show = |s: Option<&crate::artifact::Speculative>| match s {
            Some(s) if s.drafted > 0 => format!(
                "{} of {} drafted tokens accepted ({:.1} %), {:.1} % of {} output tokens{}",
                s.accepted,
                s.drafted,
                s.acceptance().unwrap_or(0.0) * 100.0,
                s.accepted_share().unwrap_or(0.0) * 100.0,
                s.predicted,
                s.mean_accepted_length().map_or(String::new(), |l| format!(
                    ", {l:.2} tokens per verification step"
                ))
            ),
            Some(s) => format!("nothing drafted over {} requests", s.reported),
            None => "nothing reported".to_string(),
        };
        let drafted = |s: Option<&crate::artifact::Speculative>| s.is_some_and(|s| s.drafted > 0);
        Some(ServerLine {
            text: format!(
                "speculative decoding: baseline {}; candidate {}",
                show(b),
                show(c)
            ),
            alarm: drafted(b) && !drafted(c),
        })
    }

    fn timing_lines(&self) -> Vec<ServerLine> {
        let summary = |s: &Option<crate::stats::Summary>| {
            s.as_ref().map_or("—".to_string(), |s| {
                format!("p50 {:.1} ms [{:.1}, {:.1}]", s.p50, s.min, s.max)
            })
        };
        [
            ("baseline", &self.baseline_server, &self.baseline_metrics),
            ("candidate", &self.candidate_server, &self.candidate_metrics),
        ]
        .into_iter()
        .filter_map(|(side, t, metrics)| {
            let t = t.as_ref()?;
            let error = if t.client_below_server > 0 {
                format!(
                    "; MEASUREMENT ERROR: {} requests with client TTFT below the server's prompt time",
                    t.client_below_server
                )
            } else {
                String::new()
            };
            // The server's prompt time starts when a slot takes the request:
            // with requests waiting for a slot, the rest is mostly queueing.
            let what = match queued(metrics) {
                Some((key, most)) if most > 0.0 => format!(
                    "queueing + client overhead (requests waited for a slot: {key} reached {most}; the server does not time each request's wait, so the two are not split): client TTFT − server prompt time"
                ),
                Some((key, _)) => format!(
                    "client overhead ({key} stayed 0: nothing queued): client TTFT − server prompt time"
                ),
                None => "client overhead, or queueing (no queue gauge read to tell): client TTFT − server prompt time".to_string(),
            };
            Some(ServerLine {
                text: format!(
                    "server timings, {side} ({} requests): {what} {}; client e2e − server time {}{error}",
                    t.requests,
                    summary(&t.ttft_overhead_ms),
                    summary(&t.e2e_overhead_ms)
                ),
                alarm: t.client_below_server > 0,
            })
        })
        .collect()
    }

    /// [`Self::server_lines`] for a reader in a hurry: one line when every
    /// check holds, and in full whatever does not (a counter that disagrees
    /// with the journal, a measurement error, an endpoint not read); `where_`
    /// says where the rest is ("with --verbose", "below").
    pub fn server_summary_lines(&self, where_: &str) -> Vec<String> {
        let all = self.server_entries();
        let mut out: Vec<String> = all
            .iter()
            .filter(|l| l.alarm)
            .map(|l| l.text.clone())
            .collect();
        // What drafting did is shown whether or not it alarms.
        if let Some(l) = self.speculative_line().filter(|l| !l.alarm) {
            out.insert(0, l.text);
        }
        let agreeing: Vec<&str> = [
            ("baseline", &self.baseline_metrics),
            ("candidate", &self.candidate_metrics),
        ]
        .into_iter()
        .filter(|(_, ms)| {
            !ms.is_empty()
                && ms.iter().all(|m| {
                    m.check
                        .as_ref()
                        .is_some_and(|c| c.agrees && !c.lines.is_empty())
                })
        })
        .map(|(side, _)| side)
        .collect();
        let hidden = all.len() - out.len();
        if hidden > 0 {
            let agree = if agreeing.is_empty() {
                String::new()
            } else {
                format!(
                    "counters agree with the journal ({}); ",
                    agreeing.join(", ")
                )
            };
            out.push(format!(
                "server: {agree}{hidden} line(s) of server timings and metrics {where_}"
            ));
        }
        out
    }

    /// The cell's SLO attainment in words, one line per fact; empty without SLOs.
    pub fn slo_lines(&self) -> Vec<String> {
        let Some(slo) = &self.slo else {
            return Vec::new();
        };
        let side = |name: &str, a: &SloAttainment| {
            let rate = |v: Option<f64>, unit: &str| {
                v.map_or(String::new(), |v| format!(", {v:.2} {unit}"))
            };
            format!(
                "{name}: {}/{} met = {:.1}% [{:.1}%, {:.1}%]; goodput{}{} over {:.1} s",
                a.met,
                a.of,
                a.attainment * 100.0,
                a.interval[0] * 100.0,
                a.interval[1] * 100.0,
                rate(a.goodput_rps, "req/s"),
                rate(a.goodput_tok_s, "tok/s"),
                a.window_s
            )
        };
        let verdict = match &slo.evidence {
            Some(e) => {
                let more = e.requests_to_resolve.map_or(String::new(), |n| {
                    format!("; ~{n} requests/side would decide it")
                });
                format!(
                    "drop {:+.2} points, bounds [{:+.2}, {:+.2}] against a {}-point margin: {}{more}",
                    e.drop_points,
                    e.lower_bound_points,
                    e.upper_bound_points,
                    e.margin_points,
                    e.outcome.as_str()
                )
            }
            None => "no attainment evidence (a side has no requests)".to_string(),
        };
        vec![
            format!(
                "SLO ({}, from the {}{}): {verdict}",
                slo.targets.describe(),
                slo.source,
                if slo.gating {
                    ""
                } else {
                    "; reported, not gated: the policy's [[slo]] gates"
                }
            ),
            side("baseline", &slo.baseline),
            side("candidate", &slo.candidate),
        ]
    }
}

pub struct MetricView {
    pub name: String,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    pub delta_percent: Option<f64>,
    pub threshold_percent: Option<f64>,
    pub within_threshold: Option<bool>,
    pub direction: Option<Direction>,
    pub ci: Option<Interval>,
    pub verdict: Option<String>,
    pub baseline_n: Option<u64>,
    pub candidate_n: Option<u64>,
    pub requests_to_resolve: Option<u64>,
    /// Sample name and (baseline, candidate) per-request values.
    pub samples: Option<(String, Vec<f64>, Vec<f64>)>,
    /// The evidence gate's bounds and outcome for this metric, where the
    /// evidence decides.
    pub evidence: Option<crate::stats::Evidence>,
    /// The metric's evidence as the report records it, deciding or not:
    /// what the evidence section's line for it reads from.
    pub recorded_evidence: Option<crate::stats::Evidence>,
}

/// What one metric's row says, one statement per column: the interval
/// and the decision come from the same procedure (the evidence gate's
/// where the report has it, else the CI and its verdict), and the seed's
/// fixed-threshold flag is shown as the fact it is (a point change against
/// T), never as a second verdict.
pub struct DecisionCells {
    pub interval: String,
    pub decision: String,
    pub resolve: Option<u64>,
    pub seed_flag: String,
}

impl MetricView {
    pub fn decision_cells(&self) -> DecisionCells {
        let t = format!("{}%", super::fmt_threshold(self.threshold_percent));
        let seed_flag = match (self.delta_percent, self.direction, self.within_threshold) {
            (Some(d), Some(dir), Some(within)) => {
                let w = dir.worse_change_percent(d);
                format!("{w:+.2}% {} {t}", if within { "≤" } else { ">" })
            }
            (_, _, Some(within)) => format!("{} {t}", if within { "within" } else { "beyond" }),
            _ => super::DASH.to_string(),
        };
        match &self.evidence {
            Some(e) => DecisionCells {
                interval: super::estimate::bounds_cell(e, self.direction),
                decision: e.outcome.as_str().to_string(),
                resolve: e.requests_to_resolve.map(|n| n as u64),
                seed_flag,
            },
            None => DecisionCells {
                interval: super::fmt_ci(self.ci.as_ref()),
                decision: self
                    .verdict
                    .clone()
                    .unwrap_or_else(|| super::DASH.to_string()),
                resolve: self.requests_to_resolve,
                seed_flag,
            },
        }
    }
}

impl CellView {
    /// The row headings: (interval, decision) for this cell's metrics; a
    /// rate's evidence bounds are the candidate's speed over the baseline's.
    pub fn decision_headings(&self, ci_head: &str) -> (String, &'static str) {
        let with_evidence = || self.metrics.iter().filter(|m| m.evidence.is_some());
        if with_evidence().next().is_some() {
            let rates = with_evidence().any(|m| m.direction == Some(Direction::HigherIsBetter));
            let head = if rates {
                "evidence bounds, worse-direction (rates: speed)"
            } else {
                "evidence bounds, worse-direction"
            };
            (head.to_string(), "decision")
        } else {
            (ci_head.to_string(), "verdict")
        }
    }
}

pub struct RunView {
    pub key: String,
    pub side: Side,
    pub requests: Option<u64>,
    pub exact_output_passed: Option<u64>,
    pub failed: Option<u64>,
    pub responses_received: Option<u64>,
    pub contaminated: Option<u64>,
    pub failures: Vec<FailureView>,
    /// A structured-output or tool workload: its first request's TTFT, and
    /// the later ones' median.
    pub first_ttft_ms: Option<f64>,
    pub later_ttft_p50_ms: Option<f64>,
}

pub struct FailureView {
    pub request_index: Option<u64>,
    pub failure_class: Option<String>,
    pub words: Option<u64>,
    pub finish_reasons: Vec<String>,
    pub canary_passed: Option<bool>,
}

/// The evidence gate in words: outcome, each pair, what would decide it.
pub struct EvidenceView {
    pub outcome: String,
    pub parts: Vec<(String, String, String)>,
    pub requests_to_resolve: Option<usize>,
    /// The design in full: schedule, resampling, family-wise levels.
    pub design: Option<String>,
    /// The design in one line, for the default views.
    pub design_summary: Option<String>,
    /// Why a paired estimate differs from the tables' point delta, when a
    /// part's bounds surround a paired estimate.
    pub estimates: Option<&'static str>,
    /// What the verdict cost against the known-variance oracle, in words.
    pub cost: Option<String>,
}

/// The gate's cost line: the requests per side its deciding pairs used
/// against what a known-variance oracle needs on the same data.
fn cost_line(g: &crate::model::EvidenceGate) -> Option<String> {
    let used = g.requests_per_side?;
    let what = match g.outcome {
        crate::stats::GateOutcome::Inconclusive => "so far",
        _ => "decided it",
    };
    let learning = g
        .learning_oracle_requests_per_side
        .map_or(String::new(), |l| {
            format!(
                "; one that learns the spread, {l} ({:.1}×)",
                used as f64 / l as f64
            )
        });
    Some(match g.oracle_requests_per_side {
        Some(o) => format!(
            "cost: {used} requests per side {what}; a known-variance oracle on the same data needs {o} ({:.1}× the oracle){learning}",
            used as f64 / o as f64
        ),
        None => format!(
            "cost: {used} requests per side {what}; no oracle figure (a point on its margin, or no spread)"
        ),
    })
}

/// Whether a report's performance gate is decided by evidence (its
/// `statistics.gate_decides` says so and it has the evidence gate), read
/// from the JSON as is: the renderers and the JUnit export share this rule.
pub(super) fn evidence_decides(root: &Value) -> bool {
    root.pointer("/statistics/gate_decides")
        .and_then(Value::as_str)
        == Some("evidence")
        && root
            .pointer("/gates/performance_evidence")
            .is_some_and(Value::is_object)
}

/// Whether the policy's turnover gate is the non-inferior one (else strict).
pub(super) fn non_inferior_turnover(root: &Value) -> bool {
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

    /// ✓, ✗ or ? for a deciding gate; · for one that decides nothing.
    pub fn mark(&self) -> &'static str {
        match (self.deciding, self.outcome.as_str()) {
            (false, _) => "·",
            (true, "pass") => "✓",
            (true, "fail") => "✗",
            _ => "?",
        }
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
            if let Some(c) = &e.cost {
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

    pub fn evidence(&self) -> Option<EvidenceView> {
        let g = self.gates.as_ref()?.performance_evidence.as_ref()?;
        let parts: Vec<(String, String, String)> = g
            .parts
            .iter()
            .map(|p| {
                (
                    p.subject.clone(),
                    p.outcome.as_str().to_string(),
                    shown_reason(&self.cells, &p.subject, &p.reason),
                )
            })
            .collect();
        let paired = g.parts.iter().any(|p| {
            recorded_evidence(&self.cells, &p.subject).is_some_and(|(e, _)| {
                matches!(
                    e.resampling,
                    stats::Resampling::Paired | stats::Resampling::PairedRequests
                )
            })
        });
        Some(EvidenceView {
            outcome: g.outcome.as_str().to_string(),
            parts,
            requests_to_resolve: g.requests_to_resolve,
            design: self.statistics.as_ref().and_then(design_text),
            design_summary: self.statistics.as_ref().and_then(design_summary),
            estimates: paired.then_some(super::estimate::PAIRED_VS_POINT),
            cost: cost_line(g),
        })
    }
}

/// The design in full: the schedule, the resampling method and the
/// family-wise levels with this look's share of the budget.
fn design_text(s: &Statistics) -> Option<String> {
    let d = s.design.as_ref()?;
    let fw = s.family_wise.as_ref();
    Some(format!(
        "schedule {}, {}; {}",
        d.schedule,
        d.resampling_method,
        fw.map_or(String::new(), |f| format!(
            "alpha {} over {} gating pair(s) and {} look(s){}: pass bound at {:.4}, fail bound at {:.4}",
            f.alpha,
            f.gating_pairs,
            f.looks,
            match (f.previous_information_fraction, f.information_fraction) {
                (Some(b), Some(t)) => format!(
                    ", this look at {t:.2} of the budget the run had (the previous at {b:.2}){}{}",
                    if f.boundaries == Some(crate::stats::evidence::Boundaries::GroupSequential) {
                        ", group-sequential boundaries"
                    } else {
                        ""
                    },
                    f.pass_information_fractions
                        .as_ref()
                        .and_then(|p| p.last())
                        .map_or(String::new(), |p| format!(
                            ", the pass bound at {p:.2} of the information it needs"
                        ))
                ),
                _ => String::new(),
            },
            f.alpha_pass,
            f.alpha_fail
        ))
    ))
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// The design in one line, from the same fields as [`design_text`]: how
/// the sides were scheduled, how the bootstrap resampled them, and the
/// family-wise alpha over the gating pairs and looks.
fn design_summary(s: &Statistics) -> Option<String> {
    let d = s.design.as_ref()?;
    let schedule = match d.schedule.as_str() {
        "interleaved" => "interleaved blocks",
        "alternating_passes" => "alternating passes",
        "single" => "one pass per side",
        other => other,
    };
    let resampling = match d.resampling {
        stats::Resampling::Independent => "independent bootstrap",
        stats::Resampling::Clustered => "cluster bootstrap",
        stats::Resampling::Paired if d.pairs_requests != Some(true) => "paired block bootstrap",
        stats::Resampling::Paired | stats::Resampling::PairedRequests => {
            "paired bootstrap of request pairs"
        }
    };
    let mut out = format!("{schedule}, {resampling}");
    if d.block_mean == Some(stats::BlockMean::Trimmed) {
        out.push_str(" (trimmed block mean)");
    }
    if d.drift_floor_reason.is_some() {
        out.push_str(", drift floor added");
    }
    if let Some(f) = &s.family_wise {
        out.push_str(&format!(
            ", alpha {} over {} and {}",
            f.alpha,
            count(f.gating_pairs, "pair"),
            count(f.looks, "look")
        ));
    }
    Some(out)
}

/// The evidence a gate part's subject (`cells.<cell>.metrics.<metric>`)
/// records, with the metric's direction.
fn recorded_evidence<'a>(
    cells: &'a [CellView],
    subject: &str,
) -> Option<(&'a stats::Evidence, Option<Direction>)> {
    cells.iter().find_map(|c| {
        let metric = subject
            .strip_prefix("cells.")?
            .strip_prefix(c.name.as_str())?
            .strip_prefix(".metrics.")?;
        let m = c.metrics.iter().find(|m| m.name == metric)?;
        Some((m.recorded_evidence.as_ref()?, m.direction))
    })
}

/// An evidence part's reason as the views show it: a metric's bounds read
/// from its recorded evidence with the estimate named and a rate's bounds
/// as speeds ([`super::estimate::evidence_reason`]); any other reason (an
/// ineligible cell, no bound yet) as the report states it.
pub(super) fn shown_reason(cells: &[CellView], subject: &str, reason: &str) -> String {
    recorded_evidence(cells, subject)
        .and_then(|(e, direction)| super::estimate::evidence_reason(e, direction, reason))
        .unwrap_or_else(|| reason.to_string())
}

pub(super) fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(String::from)
}
fn f(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite())
}
pub(super) fn u(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}
fn b(v: Option<&Value>) -> Option<bool> {
    v.and_then(Value::as_bool)
}
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
fn floats(v: Option<&Value>) -> Option<Vec<f64>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|x| x.as_f64())
            .filter(|x| x.is_finite())
            .collect()
    })
}
/// A side's queue gauge over the cell with its largest value (the first
/// above 0, else the first read); `None` when no endpoint has one.
fn queued(metrics: &[ServerMetrics]) -> Option<(String, f64)> {
    let gauges: Vec<(String, f64)> = metrics
        .iter()
        .flat_map(|m| &m.known)
        // By family: vLLM's and SGLang's series carry labels (model, engine).
        .filter(|k| QUEUE_GAUGES.contains(&k.key.split('{').next().unwrap_or(&k.key)))
        .map(|k| (k.key.clone(), k.max.unwrap_or(k.value)))
        .collect();
    gauges
        .iter()
        .find(|(_, most)| *most > 0.0)
        .or(gauges.first())
        .cloned()
}

/// One line of a cell's server detail; `alarm` when it reports a check
/// that failed (never folded away).
struct ServerLine {
    text: String,
    alarm: bool,
}

impl ServerLine {
    fn fact(text: String) -> ServerLine {
        ServerLine { text, alarm: false }
    }
}

/// One endpoint of one side in words: where and how long it was read, its
/// counters against the journal, then its known metrics.
fn metrics_lines(side: &str, m: &ServerMetrics) -> Vec<ServerLine> {
    let head = format!("server metrics, {side} ({}", m.endpoint);
    if let Some(why) = &m.unavailable {
        return vec![ServerLine {
            text: format!("{head}): not read: {why}"),
            alarm: true,
        }];
    }
    let mut out = vec![ServerLine::fact(format!(
        "{head}, {}): {} window(s), {} scrapes over {:.1} s{}",
        m.engine.as_deref().unwrap_or("engine not recognized"),
        m.windows,
        m.scrapes,
        m.window_s,
        if m.incomplete_windows > 0 {
            format!(
                "; {} window(s) without an end left out, their requests with them",
                m.incomplete_windows
            )
        } else {
            String::new()
        }
    ))];
    if let Some(c) = &m.check {
        let lines: Vec<String> = c
            .lines
            .iter()
            .map(|l| {
                format!(
                    "{} {} {} {} {}",
                    l.server_metric,
                    l.server,
                    if l.agrees { "=" } else { "≠" },
                    l.what,
                    l.client
                )
            })
            .collect();
        let verdict = if c.lines.is_empty() {
            "not checked"
        } else if c.agrees {
            "agree with the journal"
        } else {
            "DISAGREE with the journal"
        };
        let mut s = format!(
            "server counters, {side}: {verdict} over {} requests: {}",
            c.requests,
            lines.join("; ")
        );
        if !c.notes.is_empty() {
            s.push_str(&format!(" ({})", c.notes.join("; ")));
        }
        out.push(ServerLine {
            text: s,
            alarm: !c.lines.is_empty() && !c.agrees,
        });
    }
    if !m.known.is_empty() {
        let known: Vec<String> = m.known.iter().map(|k| k.text()).collect();
        out.push(ServerLine::fact(format!(
            "server, {side}: {}",
            known.join("; ")
        )));
    }
    out
}

pub(super) fn typed<T: serde::de::DeserializeOwned>(v: Option<&Value>) -> Option<T> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// Order names so that `capacity-4k` comes before `capacity-120k`: digit runs
/// compare as numbers (JSON objects read here lose the file's key order).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.chars().peekable(), b.chars().peekable());
    loop {
        match (x.peek().copied(), y.peek().copied()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let take = |it: &mut std::iter::Peekable<std::str::Chars>| {
                    let mut d = String::new();
                    while let Some(c) = it.peek().copied().filter(char::is_ascii_digit) {
                        d.push(c);
                        it.next();
                    }
                    d
                };
                let (m, n) = (take(&mut x), take(&mut y));
                let (mt, nt) = (m.trim_start_matches('0'), n.trim_start_matches('0'));
                let o = mt.len().cmp(&nt.len()).then_with(|| mt.cmp(nt));
                if o != Ordering::Equal {
                    return o;
                }
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(&q);
                }
                x.next();
                y.next();
            }
        }
    }
}

fn metric_view(name: &str, m: &Value, samples: Option<&Value>) -> MetricView {
    let flag = m.as_object().and_then(|o| {
        o.iter()
            .find_map(|(k, v)| parse_regression_flag(k).map(|t| (t, v)))
    });
    let inferred = split_quantile(name);
    let direction = typed(m.get("direction"))
        .or_else(|| infer_direction(inferred.as_ref().map_or(name, |(s, _)| s.as_str())));
    let sample_key = s(m.get("sample")).or_else(|| inferred.map(|(s, _)| s));
    let evidence: Option<crate::stats::Evidence> = typed(m.get("evidence"));
    let samples = sample_key.and_then(|k| {
        let pair = samples?.get(&k)?;
        Some((
            k,
            floats(pair.get("baseline"))?,
            floats(pair.get("candidate"))?,
        ))
    });
    MetricView {
        name: name.to_string(),
        baseline: f(m.get("baseline")),
        candidate: f(m.get("candidate")),
        delta_percent: f(m.get("delta_percent")),
        threshold_percent: flag
            .map(|(t, _)| t)
            .or_else(|| f(m.get("threshold_percent"))),
        within_threshold: flag.and_then(|(_, v)| v.as_bool()),
        direction,
        ci: typed(m.get("ci_delta_percent")),
        verdict: s(m.get("verdict")),
        baseline_n: u(m.get("baseline_n")),
        candidate_n: u(m.get("candidate_n")),
        requests_to_resolve: u(m.get("requests_to_resolve")),
        samples,
        recorded_evidence: evidence.clone(),
        evidence,
    }
}

fn metric_rank(name: &str, policy_order: &[String]) -> (usize, usize) {
    if let Some(i) = policy_order.iter().position(|n| n == name) {
        return (0, i);
    }
    match DEFAULT_METRICS.iter().position(|n| *n == name) {
        Some(i) => (1, i),
        None => (2, 0),
    }
}

/// The report's cells in natural name order, each's metrics in the policy's.
pub(super) fn cell_views(root: &Value) -> Vec<CellView> {
    let policy_order: Vec<String> = root
        .get("policy")
        .and_then(|p| p.get("metrics"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|m| s(m.get("name"))).collect())
        .unwrap_or_default();
    let by_evidence = root
        .pointer("/statistics/gate_decides")
        .and_then(Value::as_str)
        == Some("evidence");
    let mut cells: Vec<CellView> = root
        .get("cells")
        .and_then(Value::as_object)
        .map(|cells| {
            cells
                .iter()
                .map(|(name, c)| cell_view(name, c, &policy_order, by_evidence))
                .collect()
        })
        .unwrap_or_default();
    cells.sort_by(|x, y| natural_cmp(&x.name, &y.name));
    cells
}

fn cell_view(name: &str, c: &Value, policy_order: &[String], by_evidence: bool) -> CellView {
    let samples = c.get("samples").filter(|v| v.is_object());
    let mut metrics: Vec<MetricView> = c
        .get("metrics")
        .and_then(Value::as_object)
        .map(|ms| ms.iter().map(|(n, m)| metric_view(n, m, samples)).collect())
        .unwrap_or_default();
    // Stable: ties keep the JSON (alphabetical) order.
    metrics.sort_by_key(|m| metric_rank(&m.name, policy_order));
    // The evidence decides only where the report says so:
    // otherwise its bounds would be a second verdict.
    if !by_evidence {
        for m in &mut metrics {
            m.evidence = None;
        }
    }
    CellView {
        name: name.to_string(),
        baseline_requests: u(c.get("baseline_requests")),
        candidate_requests: u(c.get("candidate_requests")),
        baseline_eligible: b(c.get("baseline_performance_eligible")),
        candidate_eligible: b(c.get("candidate_performance_eligible")),
        median_prompt_tokens: f(c.get("median_prompt_tokens")),
        baseline_reasons: strings(c.get("baseline_ineligible_reasons")),
        candidate_reasons: strings(c.get("candidate_ineligible_reasons")),
        metrics,
        slo: typed(c.get("slo")),
        rows: typed(c.get("request_rows")),
        baseline_server: typed(c.get("baseline_server_timings")),
        candidate_server: typed(c.get("candidate_server_timings")),
        baseline_metrics: typed(c.get("baseline_server_metrics")).unwrap_or_default(),
        candidate_metrics: typed(c.get("candidate_server_metrics")).unwrap_or_default(),
        baseline_slices: typed(c.get("baseline_slices")).unwrap_or_default(),
        candidate_slices: typed(c.get("candidate_slices")).unwrap_or_default(),
        baseline_sessions: typed(c.get("baseline_sessions")),
        candidate_sessions: typed(c.get("candidate_sessions")),
        baseline_speculative: typed(c.get("baseline_speculative")),
        candidate_speculative: typed(c.get("candidate_speculative")),
    }
}

/// The report's turnover run keys (`baseline_turnover_run_1`, ...) in side
/// and index order.
pub(super) fn turnover_entries(root: &Value) -> Vec<TurnoverEntry<'_>> {
    let mut keyed: Vec<TurnoverEntry<'_>> = root
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| parse_turnover_key(k).map(|p| (p, k.as_str(), v)))
                .collect()
        })
        .unwrap_or_default();
    keyed.sort_by_key(|(p, _, _)| *p);
    keyed
}

fn run_view(((side, _), key, r): &TurnoverEntry<'_>) -> RunView {
    RunView {
        key: key.to_string(),
        side: *side,
        requests: u(r.get("requests")),
        exact_output_passed: u(r.get("exact_output_passed")),
        failed: u(r.get("failed")),
        responses_received: u(r.get("responses_received")),
        contaminated: u(r.get("contaminated")),
        first_ttft_ms: f(r.get("first_ttft_ms")),
        later_ttft_p50_ms: f(r.get("later_ttft_p50_ms")),
        failures: r
            .get("failures")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|x| FailureView {
                        request_index: u(x.get("request_index")),
                        failure_class: s(x.get("failure_class")),
                        words: u(x.get("words")),
                        finish_reasons: strings(x.get("finish_reasons")),
                        canary_passed: b(x.get("canary_passed")),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A report's turnover runs: (side, index) from the key, the key, the run.
pub(super) type TurnoverEntry<'a> = ((Side, usize), &'a str, &'a Value);

impl View {
    /// The report's fields as read, and what the caller computed from them.
    pub fn from_value(root: &Value, checks: Checks) -> View {
        let cells = cell_views(root);
        let runs = turnover_entries(root).iter().map(run_view).collect();
        let Checks {
            disagreements,
            turnover,
            turnover_computed,
        } = checks;
        View {
            schema: s(root.get("schema")),
            baseline_image: s(root.get("baseline_image")),
            candidate_image: s(root.get("candidate_image")),
            cells,
            performance_gate_passed: b(root.get("performance_gate_passed")),
            strict_turnover_gate_passed: b(root.get("strict_turnover_gate_passed")),
            qualification: s(root.get("qualification")),
            promotion: s(root.get("promotion")),
            human_decision: s(root.get("human_decision")),
            runs,
            turnover,
            turnover_computed,
            gates: typed(root.get("gates")),
            decides_by_evidence: evidence_decides(root),
            non_inferior: non_inferior_turnover(root),
            statistics: typed(root.get("statistics")),
            decision: typed(root.get("decision")),
            provenance: typed(root.get("provenance")),
            warnings: strings(root.get("warnings")),
            disagreements,
            references: typed(root.get("reference_comparison")),
            quality: typed(root.get("quality")),
        }
    }

    /// One line per quality part, with its outcome: the hard-divergence
    /// share (saying when it is reported only), each task's accuracy and
    /// each feature's delivered share.
    pub fn quality_lines(q: &QualityComparison) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(h) = &q.hard_divergence {
            let how = if h.gating {
                ""
            } else {
                " (reported; gates under cross_runtime = \"rate\")"
            };
            let mut line = format!("hard divergences: {}{how}", h.reason());
            if let Some(n) = h.pairs_to_resolve {
                line.push_str(&format!("; about {n} reference pairs would decide it"));
            }
            out.push((h.outcome.as_str().to_string(), line));
        }
        for t in &q.tasks {
            let mut line = format!("task {}: {}", t.name, t.reason());
            line.push_str(&format!(
                "; {} lost, {} gained",
                t.table.baseline_only, t.table.candidate_only
            ));
            if t.baseline_unanswered + t.candidate_unanswered > 0 {
                line.push_str(&format!(
                    "; unanswered (counted wrong): baseline {}, candidate {}",
                    t.baseline_unanswered, t.candidate_unanswered
                ));
            }
            if let Some(n) = t.items_to_resolve {
                line.push_str(&format!("; about {n} items would decide it"));
            }
            out.push((t.outcome.as_str().to_string(), line));
        }
        for f in &q.features {
            let mut line = format!("{} {}: {}", f.feature, f.rate.name, f.reason());
            if let Some(n) = f.rate.items_to_resolve {
                line.push_str(&format!("; about {n} requests would decide it"));
            }
            out.push((f.rate.outcome.as_str().to_string(), line));
        }
        out
    }

    /// The reference pairs' summary line.
    pub fn reference_summary(rc: &ReferenceComparison) -> String {
        format!(
            "{} pairs: {} identical, {} near-tie, {} hard, {} without logprobs (exact text); cross_runtime = \"{}\", near-tie within {} nats",
            rc.pairs,
            rc.identical,
            rc.near_tie,
            rc.hard,
            rc.text_only,
            rc.cross_runtime.as_str(),
            rc.near_tie_nats
        )
    }

    /// One line per differing pair with its [`PairMark`]: where it
    /// diverges, both tokens with their logprobs, the gaps, and the
    /// agreement before it.
    pub fn divergence_lines(rc: &ReferenceComparison) -> Vec<(PairMark, String)> {
        let nats = |g: Option<f64>| g.map_or("not in top-k".to_string(), |g| format!("{g:.3}"));
        let side = |t: Option<&TokenLogprob>| {
            t.map_or("(ended)".to_string(), |t| {
                format!("{:?} {:.3}", t.token, t.logprob)
            })
        };
        rc.prompts
            .iter()
            .filter(|p| p.comparison.class != DivergenceClass::Identical)
            .map(|p| {
                let c = &p.comparison;
                let head = format!(
                    "{} {} repeat {} request {}",
                    c.class.as_str(),
                    p.turnover,
                    p.repeat,
                    p.request_index
                );
                let line = match &c.divergence {
                    None => format!("{head}: the texts differ; no per-token logprobs to weigh it"),
                    Some(d) => format!(
                        "{head} at token {}: baseline {} vs candidate {}; gaps {} / {} nats; {} tokens before it, top-1 agreed on {}, max |Δ logprob| {}",
                        d.position,
                        side(d.baseline.as_ref()),
                        side(d.candidate.as_ref()),
                        nats(d.baseline_gap_nats),
                        nats(d.candidate_gap_nats),
                        c.agreement.tokens,
                        c.agreement.top1_agree,
                        c.agreement.max_abs_dlogprob.map_or("–".into(), |x| format!("{x:.3}")),
                    ),
                };
                (PairMark::of(p), line)
            })
            .collect()
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
                        super::estimate::point_reason(&p.reason)
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
}

/// How a differing reference pair is listed. A hard divergence (or a
/// difference without logprobs to weigh it) that the policy passes, as
/// `cross_runtime = "rate"` does, is still a divergence: it counts towards
/// the hard-divergence share, and is never marked as fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairMark {
    /// A near-tie the policy passes.
    Pass,
    /// A pair the policy fails.
    Fail,
    /// A hard divergence the policy passes on its own, counted by the quality gate.
    Counted,
}

impl PairMark {
    fn of(p: &crate::reference::ReferencePair) -> PairMark {
        match (p.passed, p.comparison.class) {
            (false, _) => PairMark::Fail,
            (true, DivergenceClass::Hard | DivergenceClass::TextOnly) => PairMark::Counted,
            (true, _) => PairMark::Pass,
        }
    }

    /// The word the Markdown and HTML lists lead with.
    pub fn word(self) -> &'static str {
        match self {
            PairMark::Pass => "pass",
            PairMark::Fail => "fail",
            PairMark::Counted => "counted",
        }
    }
}

/// One row of the turnover table: a run, or a side's runs pooled.
pub struct TurnoverRow {
    pub label: String,
    pub side: Side,
    pub pooled: bool,
    pub requests: Option<u64>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub received: Option<u64>,
    pub contaminated: Option<u64>,
    pub rate: Option<f64>,
    pub rate_ci: Option<Interval>,
    pub p_candidate_worse: Option<f64>,
    pub p_candidate_better: Option<f64>,
    pub p_two_sided: Option<f64>,
    pub non_inferior: Option<bool>,
}

impl View {
    fn run(&self, key: &str) -> Option<&RunView> {
        self.runs.iter().find(|r| r.key == key)
    }

    fn row_from_rate(
        &self,
        label: String,
        side: Side,
        pooled: bool,
        r: &FailureRate,
    ) -> TurnoverRow {
        let run = (!pooled)
            .then(|| r.runs.first().and_then(|k| self.run(k)))
            .flatten();
        TurnoverRow {
            label,
            side,
            pooled,
            requests: Some(r.requests),
            passed: run
                .and_then(|x| x.exact_output_passed)
                .or(r.requests.checked_sub(r.failed)),
            failed: Some(r.failed),
            received: run.and_then(|x| x.responses_received),
            contaminated: r.contaminated,
            rate: r.failure_rate,
            rate_ci: r.failure_rate_ci,
            p_candidate_worse: None,
            p_candidate_better: None,
            p_two_sided: None,
            non_inferior: None,
        }
    }

    /// Rows per workload: each baseline run, the baseline pooled (when more
    /// than one), each candidate run with its exact test against the pooled
    /// baseline, the candidate pooled (when more than one).
    pub fn turnover_rows(&self) -> Vec<TurnoverRow> {
        let conf = self.turnover.confidence;
        let mut rows = Vec::new();
        let many_groups = self.turnover.groups.len() > 1;
        for g in &self.turnover.groups {
            let suffix = if many_groups {
                format!(" ({})", g.name)
            } else {
                String::new()
            };
            if let Some(base) = &g.baseline {
                for key in &base.runs {
                    let Some(run) = self.run(key) else { continue };
                    let (Some(n), Some(f)) = (run.requests, run.failed) else {
                        continue;
                    };
                    let single = FailureRate {
                        runs: vec![key.clone()],
                        requests: n,
                        failed: f,
                        failure_rate: (n > 0).then(|| f as f64 / n as f64),
                        failure_rate_ci: (n > 0).then(|| stats::clopper_pearson(f, n, conf)),
                        contaminated: run.contaminated,
                    };
                    rows.push(self.row_from_rate(key.clone(), Side::Baseline, false, &single));
                }
                if base.runs.len() > 1 {
                    rows.push(self.row_from_rate(
                        format!("baseline pooled{suffix}"),
                        Side::Baseline,
                        true,
                        base,
                    ));
                }
            }
            let cands = g
                .candidate_runs
                .iter()
                .map(|c| (c.counts.runs.join("+"), false, c))
                .chain(
                    g.candidate_pooled
                        .iter()
                        .filter(|_| g.candidate_runs.len() > 1)
                        .map(|c| (format!("candidate pooled{suffix}"), true, c)),
                );
            for (label, pooled, c) in cands {
                let mut row = self.row_from_rate(label, Side::Candidate, pooled, &c.counts);
                row.p_candidate_worse = c.vs_baseline.map(|t| t.p_candidate_worse);
                row.p_candidate_better = c.vs_baseline.map(|t| t.p_candidate_better);
                row.p_two_sided = c.vs_baseline.map(|t| t.p_two_sided);
                row.non_inferior = c.non_inferior;
                rows.push(row);
            }
        }
        rows
    }

    /// The non-inferiority gate: the report's, else computed from the counts.
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
        let word = |p: Option<bool>| super::pass_word(p).to_string();
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
        let strict = word(self.strict_turnover_gate_passed);
        let ni = word(Some(self.non_inferior_gate().passed));
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

    pub fn non_inferior_gate(&self) -> Gate {
        match &self.gates {
            Some(g) => g.non_inferior_turnover.clone(),
            None => non_inferior_gate(&self.turnover),
        }
    }

    /// Turnover failures of a run, one line per failure class:
    /// `controlled_output_failed ×2: #2 (33 words, stop), #35 (31 words, stop)`.
    /// What a run's failures and, for a schema's workload, its first
    /// request say: one line each.
    pub fn run_lines(run: &RunView) -> Vec<String> {
        let mut out = Self::failure_summary(run);
        if let Some(first) = run.first_ttft_ms {
            let later = run
                .later_ttft_p50_ms
                .map_or("—".to_string(), |l| format!("{l:.1} ms"));
            out.push(format!(
                "first request on its schema (where a grammar is compiled): TTFT {first:.1} ms; later requests p50 {later}"
            ));
        }
        out
    }

    pub fn failure_summary(run: &RunView) -> Vec<String> {
        let mut classes: Vec<(String, Vec<String>)> = Vec::new();
        for f in &run.failures {
            let class = f.failure_class.clone().unwrap_or_else(|| "unknown".into());
            let mut detail = Vec::new();
            if let Some(w) = f.words {
                detail.push(format!("{w} words"));
            }
            if !f.finish_reasons.is_empty() {
                detail.push(f.finish_reasons.join("+"));
            }
            if f.canary_passed == Some(false) {
                detail.push("canary failed".into());
            }
            let item = format!(
                "#{} ({})",
                f.request_index.map_or("?".into(), |i| i.to_string()),
                detail.join(", ")
            );
            match classes.iter_mut().find(|(c, _)| *c == class) {
                Some((_, v)) => v.push(item),
                None => classes.push((class, vec![item])),
            }
        }
        classes
            .into_iter()
            .map(|(c, items)| format!("{c} ×{}: {}", items.len(), items.join(", ")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A side's endpoint: its counters checked against the journal
    /// (`agrees`), and a queue gauge whose largest value was `queued`.
    fn endpoint(agrees: bool, queued: f64) -> Value {
        json!({
            "endpoint": "target", "url": "http://127.0.0.1:1/metrics", "engine": "llama.cpp",
            "windows": 1, "scrapes": 4, "window_s": 3.0,
            "known": [{"key": "llamacpp:requests_deferred", "meaning": "requests deferred",
                       "kind": "gauge", "value": queued / 2.0, "max": queued}],
            "check": {"requests": 3, "agrees": agrees, "lines": [{
                "what": "Σ usage.completion_tokens", "server_metric": "llamacpp:tokens_predicted_total",
                "server": 12.0, "client": if agrees { 12.0 } else { 11.0 }, "agrees": agrees}]}
        })
    }

    fn cell(b: Value, c: Value) -> CellView {
        let timings = json!({"requests": 3, "client_below_server": 0,
            "ttft_overhead_ms": {"n": 3, "mean": 20.0, "p50": 20.0, "p90": 30.0, "p99": 30.0, "min": 10.0, "max": 30.0}});
        let v = json!({"baseline_server_metrics": [b], "candidate_server_metrics": [c],
                       "baseline_server_timings": timings, "candidate_server_timings": timings});
        cell_view("c", &v, &[], true)
    }

    #[test]
    fn server_detail_folds_to_one_line_unless_a_check_fails() {
        let quiet = cell(endpoint(true, 0.0), endpoint(true, 0.0));
        let all = quiet.server_lines();
        assert!(all.len() >= 4, "{all:?}");
        assert_eq!(
            quiet.server_summary_lines("with --verbose"),
            [format!(
                "server: counters agree with the journal (baseline, candidate); {} line(s) of server timings and metrics with --verbose",
                all.len()
            )]
        );
        // A disagreeing counter is shown in full, never folded away.
        let loud = cell(endpoint(true, 0.0), endpoint(false, 0.0));
        let short = loud.server_summary_lines("with --verbose");
        assert!(
            short[0].starts_with("server counters, candidate: DISAGREE with the journal"),
            "{short:?}"
        );
        assert!(
            short[1].contains("agree with the journal (baseline)"),
            "{short:?}"
        );
    }

    #[test]
    fn client_minus_server_time_is_named_queueing_when_requests_waited() {
        let v = cell(endpoint(true, 2.0), endpoint(true, 0.0));
        let lines = v.server_lines();
        assert!(
            lines[0].contains("baseline")
                && lines[0].contains("queueing + client overhead")
                && lines[0].contains("llamacpp:requests_deferred reached 2"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("candidate")
                && lines[1].contains("client overhead (llamacpp:requests_deferred stayed 0"),
            "{}",
            lines[1]
        );
        // No gauge read: neither claim is made.
        let bare = cell(
            json!({"endpoint": "target", "url": "u", "windows": 1, "scrapes": 1, "window_s": 1.0}),
            json!({"endpoint": "target", "url": "u", "windows": 1, "scrapes": 1, "window_s": 1.0}),
        );
        assert!(bare.server_lines()[0].contains("no queue gauge read"));
        // SGLang's (and vLLM's) queue gauge carries labels: found by its family.
        let key = r#"sglang:num_queue_reqs{engine_type="unified",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"}"#;
        let mut sglang = endpoint(true, 1.0);
        sglang["engine"] = json!("sglang");
        sglang["known"][0]["key"] = json!(key);
        let line = &cell(sglang, endpoint(true, 0.0)).server_lines()[0];
        assert!(
            line.contains("queueing + client overhead")
                && line.contains(&format!("{key} reached 1")),
            "{line}"
        );
    }

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
        let v = super::super::view_of(&point_gate_failed_evidence_undecided(), Vec::new());
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
