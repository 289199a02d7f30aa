//! The evidence gate in words: its outcome, each pair's bounds as the views
//! show them, the design it was computed by, and what it cost against the
//! known-variance oracle.

use crate::model::Statistics;
use crate::stats::{self, GateOutcome};

use super::{CellView, MetricView, View};

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
    /// What the verdict cost against the known-variance oracle, in one or
    /// two lines; none where the gate records no cost.
    pub cost: Vec<String>,
}

/// The gate's cost in one or two lines: the requests per side it spent,
/// and what a known-variance oracle on the same data needs, undecided, to
/// decide the metric closest to deciding and to decide them all. Where the
/// design pairs blocks the oracle is the one on the blocks (requests inside
/// a block can run concurrently and be correlated: an oracle on independent
/// requests would flatter it), the request-level one and the design effect
/// beside it.
fn cost_lines(g: &crate::model::EvidenceGate) -> Vec<String> {
    let Some(used) = g.requests_per_side else {
        return Vec::new();
    };
    let (all, on) = match (g.block_oracle_requests_per_side, g.oracle_requests_per_side) {
        (Some(b), _) => (b, "on the blocks"),
        (None, Some(o)) => (o, "on independent requests"),
        (None, None) => {
            let what = match g.outcome {
                GateOutcome::Inconclusive => "so far",
                _ => "decided it",
            };
            return vec![format!(
                "cost: {used} requests per side {what}; no oracle figure (a point on its margin, or no spread)"
            )];
        }
    };
    let mut out = vec![match g.outcome {
        GateOutcome::Inconclusive => {
            let figure = |p: &crate::model::EvidencePart| {
                if g.block_oracle_requests_per_side.is_some() {
                    p.block_oracle_requests_per_side
                } else {
                    p.oracle_requests_per_side
                }
            };
            let closest = g
                .parts
                .iter()
                .filter(|p| p.outcome == GateOutcome::Inconclusive)
                .filter_map(figure)
                .min()
                .filter(|&c| c < all);
            match closest {
                Some(c) => format!(
                    "cost: {used} requests per side so far; a known-variance oracle {on} needs {c} to decide the metric closest to deciding, {all} to decide all"
                ),
                None => format!(
                    "cost: {used} requests per side so far; a known-variance oracle {on} needs {all} to decide it"
                ),
            }
        }
        _ => format!(
            "cost: {used} requests per side decided it, {} the {all} a known-variance oracle {on} needs",
            fmt_times(used as f64 / all as f64)
        ),
    }];
    let learning = g
        .learning_oracle_requests_per_side
        .map(|l| format!("one that learns the spread, {l}"));
    match (g.block_oracle_requests_per_side, g.oracle_requests_per_side) {
        (Some(_), Some(o)) => {
            let effect = g.design_effect.map_or(String::new(), |d| {
                format!(" (design effect {})", fmt_times(d))
            });
            let learning = learning.map_or(String::new(), |l| format!("; {l}"));
            out.push(format!(
                "  on independent requests it needs {o}{effect}{learning}"
            ));
        }
        _ => {
            if let Some(l) = learning {
                out[0].push_str(&format!("; {l}"));
            }
        }
    }
    out
}

/// A ratio of requests: two significant digits below 1, so a small one
/// never rounds to a `0.0×` that reads as free.
fn fmt_times(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 {
        "—×".to_string()
    } else if x >= 10.0 {
        format!("{x:.0}×")
    } else if x >= 1.0 {
        format!("{x:.1}×")
    } else if x >= 0.001 {
        let decimals = (1.0 - x.log10().floor()) as usize;
        format!("{x:.decimals$}×")
    } else {
        "under 0.001×".to_string()
    }
}

impl View {
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
            recorded_metric(&self.cells, &p.subject)
                .and_then(|m| m.recorded_evidence.as_ref())
                .is_some_and(|e| {
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
            estimates: paired.then_some(crate::render::estimate::PAIRED_VS_POINT),
            cost: cost_lines(g),
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

/// The metric a gate part's subject (`cells.<cell>.metrics.<metric>`)
/// names, when it records evidence.
fn recorded_metric<'a>(cells: &'a [CellView], subject: &str) -> Option<&'a MetricView> {
    cells.iter().find_map(|c| {
        let metric = subject
            .strip_prefix("cells.")?
            .strip_prefix(c.name.as_str())?
            .strip_prefix(".metrics.")?;
        c.metrics
            .iter()
            .find(|m| m.name == metric && m.recorded_evidence.is_some())
    })
}

/// An evidence part's reason as the views show it: a metric's bounds read
/// from its recorded evidence with the estimate named and a rate's bounds
/// as speeds ([`crate::render::estimate::evidence_reason`]), or the words
/// saying why they inform no one where its part says so; any other reason
/// (an ineligible cell, no bound yet) as the report states it.
pub(in crate::render) fn shown_reason(cells: &[CellView], subject: &str, reason: &str) -> String {
    recorded_metric(cells, subject)
        .and_then(|m| {
            crate::render::estimate::evidence_reason(
                m.recorded_evidence.as_ref()?,
                m.direction,
                m.not_informative.as_deref(),
                reason,
            )
        })
        .unwrap_or_else(|| reason.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EvidenceGate, EvidencePart};

    fn part(outcome: GateOutcome, used: usize, block: usize, request: usize) -> EvidencePart {
        EvidencePart {
            requests_per_side: Some(used),
            block_oracle_requests_per_side: Some(block),
            oracle_requests_per_side: Some(request),
            design_effect: Some(block as f64 / request as f64),
            ..EvidencePart::new("cells.c.metrics.m", outcome, "")
        }
    }

    fn gate(parts: Vec<EvidencePart>) -> EvidenceGate {
        crate::gate::gate_of_parts("rule", parts)
    }

    /// Spent a sliver of what the oracle needs, decided or not: no ratio
    /// reads `0.0×` (free); an undecided gate says what would decide the
    /// closest metric and what all, on the blocks, with the request-level
    /// oracle and the design effect beside them.
    #[test]
    fn the_cost_never_reads_as_free() {
        use GateOutcome::{Fail, Inconclusive};
        let g = gate(vec![
            part(Inconclusive, 6, 48, 30),
            part(Inconclusive, 6, 5000, 2100),
        ]);
        assert_eq!(
            cost_lines(&g),
            [
                "cost: 6 requests per side so far; a known-variance oracle on the blocks needs 48 to decide the metric closest to deciding, 5000 to decide all",
                "  on independent requests it needs 2100 (design effect 2.4×)"
            ]
        );
        let g = gate(vec![part(Fail, 6, 5000, 2100)]);
        let lines = cost_lines(&g);
        assert_eq!(
            lines[0],
            "cost: 6 requests per side decided it, 0.0012× the 5000 a known-variance oracle on the blocks needs"
        );
        for used in [1, 3, 49, 499, 4999] {
            let g = gate(vec![part(Fail, used, 100_000, 2100)]);
            let text = cost_lines(&g).join("\n");
            assert!(!text.contains("0.0×") && !text.contains(" 0×"), "{text}");
        }
        assert_eq!(fmt_times(0.0496), "0.050×");
        assert_eq!(fmt_times(0.5), "0.50×");
        assert_eq!(fmt_times(1.94), "1.9×");
        assert_eq!(fmt_times(12.4), "12×");
        assert_eq!(fmt_times(1e-5), "under 0.001×");
    }
}
