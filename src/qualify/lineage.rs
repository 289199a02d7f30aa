//! What a build's history needs from one qualification, kept in its
//! `compare` ledger entry: a report file may be moved or deleted, the ledger
//! is not. Per cell and gated metric: both sides' values, and the gate's
//! unadjusted paired estimate as a log ratio with its standard error and
//! degrees of freedom. Unadjusted: the point and standard error the evidence
//! rule started from, before any sequential look widened the bounds, since a
//! chain of steps stopped early is biased when read through their bounds.

use serde_json::{Value, json};

use crate::report::Report;

/// `LINEAGE_SCHEMA`'s version of a qualification's steps.
pub const LINEAGE_SCHEMA: &str = "infergate-lineage/1";

/// The `lineage` object of a `compare` entry.
pub fn lineage(report: &Report) -> Value {
    let mut steps = Vec::new();
    for (cell, c) in report.cells.iter() {
        for (metric, m) in c.metrics.iter() {
            let (Some(ev), Some(direction)) = (&m.evidence, m.direction) else {
                continue;
            };
            // The gate's point as a ratio candidate/baseline.
            let delta = match direction {
                crate::report::stats::Direction::LowerIsBetter => ev.worse_change_percent,
                crate::report::stats::Direction::HigherIsBetter => -ev.worse_change_percent,
            };
            let ratio = 1.0 + delta / 100.0;
            if !(ratio > 0.0 && ratio.is_finite() && ev.standard_error_percent.is_finite()) {
                continue;
            }
            // d ln r = dr / r, and r moves by a hundredth of the percent change.
            let se = ev.standard_error_percent / 100.0 / ratio;
            let n = m.baseline_n.min(m.candidate_n).unwrap_or(0);
            steps.push(json!({
                "cell": cell,
                "metric": metric,
                "direction": direction,
                "baseline": m.baseline,
                "candidate": m.candidate,
                "log_ratio": ratio.ln(),
                "standard_error": se,
                "df": n.saturating_sub(1),
                "outcome": ev.outcome,
                "margin_percent": ev.margin_percent,
            }));
        }
    }
    json!({
        "schema": LINEAGE_SCHEMA,
        "baseline_image": report.baseline_image,
        "candidate_image": report.candidate_image,
        "steps": steps,
    })
}
