//! One cell's SLO attainment on both sides, as `compare` judges it: which
//! SLOs apply (the policy's gate; the suite's are reported beside the
//! gate), each side's attainment, and the evidence on its drop, one part of
//! the evidence gate when the policy gives the SLOs.

use crate::artifact::{CellResult, Slo};
use crate::gate::ineligible_part;
use crate::model::{EvidencePart, SloComparison};
use crate::policy::{DEFAULT_SLO_MARGIN_POINTS, Policy};
use crate::stats::{self, GateOutcome};

use super::attainment;

pub(crate) const ATTAINMENT_RULE: &str = "a request meets a cell's SLOs when it succeeded and every target holds (TTFT and e2e from the scheduled send, TPOT as measured; one output token has no TPOT); attainment = met / recorded requests, failures included, with a 95% Wilson interval per side; the gate reads the drop (baseline - candidate, percentage points) with Newcombe's hybrid score interval at the evidence levels: fail if its lower bound > margin_points, pass if its upper bound <= margin_points, else inconclusive; each cell with SLOs from the policy is one gating pair of the family (SLOs from the suite are reported with the same bounds, gating: false); requests are taken as independent";

/// A cell's SLOs: the policy's for it, which gate, else the suite's (both
/// runs carry the same ones, or `differences` refused them), which are
/// reported beside the gate: the policy decides what gates.
pub(crate) struct CellSlo {
    pub(crate) targets: Slo,
    pub(crate) source: &'static str,
    pub(crate) margin_points: f64,
    pub(crate) gating: bool,
}

pub(crate) fn slo_of(policy: &Policy, bc: &CellResult) -> Option<CellSlo> {
    if let Some(s) = policy.slo_for(&bc.name) {
        return Some(CellSlo {
            targets: s.targets,
            source: "policy",
            margin_points: s.margin_points,
            gating: true,
        });
    }
    let a = bc.slo.as_ref()?;
    Some(CellSlo {
        targets: a.targets,
        source: "suite",
        margin_points: DEFAULT_SLO_MARGIN_POINTS,
        gating: false,
    })
}

/// One cell's SLO attainment on both sides, and its gate part when it
/// gates, its bounds at this look's levels `(alpha_pass, alpha_fail)`.
pub(crate) fn compare_slo(
    bc: &CellResult,
    cc: &CellResult,
    eligible: bool,
    policy: &Policy,
    (alpha_pass, alpha_fail): (f64, f64),
) -> Option<(SloComparison, Option<EvidencePart>)> {
    let CellSlo {
        targets,
        source,
        margin_points: margin,
        gating,
    } = slo_of(policy, bc)?;
    let subject = format!("cells.{}.slo_attainment", bc.name);
    let b = attainment(&targets, &bc.request_rows);
    let c = attainment(&targets, &cc.request_rows);
    let evidence = stats::attainment_evidence(
        (b.met as u64, b.of as u64),
        (c.met as u64, c.of as u64),
        margin,
        alpha_pass,
        alpha_fail,
    );
    let part = match &evidence {
        _ if !eligible => ineligible_part(&subject, bc, cc),
        None => EvidencePart::new(
            subject,
            GateOutcome::Inconclusive,
            "a side has no request rows (a run from before they were kept)",
        ),
        Some(e) => {
            let more = e
                .requests_to_resolve
                .map(|n| format!("; about {n} requests per side would decide it"))
                .unwrap_or_default();
            EvidencePart {
                requests_to_resolve: e.requests_to_resolve,
                ..EvidencePart::new(
                    subject,
                    e.outcome,
                    format!(
                        "SLO attainment ({}) {:.1}% -> {:.1}%, drop {:+.2} points, bounds [{:+.2}, {:+.2}] (fail if lower > {margin}, pass if upper <= {margin}){more}",
                        targets.describe(),
                        b.attainment * 100.0,
                        c.attainment * 100.0,
                        e.drop_points,
                        e.lower_bound_points,
                        e.upper_bound_points,
                    ),
                )
            }
        }
    };
    let cmp = SloComparison {
        targets,
        source: source.to_string(),
        gating,
        margin_points: margin,
        baseline: b,
        candidate: c,
        evidence,
    };
    Some((cmp, gating.then_some(part)))
}
