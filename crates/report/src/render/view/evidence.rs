//! The evidence gate in words: its outcome, each pair's bounds as the views
//! show them, the design it was computed by, and what it cost against the
//! known-variance oracle.

use crate::model::Statistics;
use crate::stats::{self, Direction};

use super::{CellView, View};

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
            estimates: paired.then_some(crate::render::estimate::PAIRED_VS_POINT),
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
/// as speeds ([`crate::render::estimate::evidence_reason`]); any other reason (an
/// ineligible cell, no bound yet) as the report states it.
pub(in crate::render) fn shown_reason(cells: &[CellView], subject: &str, reason: &str) -> String {
    recorded_evidence(cells, subject)
        .and_then(|(e, direction)| crate::render::estimate::evidence_reason(e, direction, reason))
        .unwrap_or_else(|| reason.to_string())
}
