//! One cell of both runs: each side's eligibility, every policy metric, the
//! SLOs, the samples the report keeps and the cell's warnings; and every
//! cell in turn, into the performance gates.

use crate::artifact::{CellResult, RunArtifact, metric};
use crate::gate::{PERFORMANCE_RULE, evidence_gate};
use crate::model::{
    CellComparison, EvidenceGate, EvidencePart, Gate, GatePart, MetricComparison, OrderedMap,
    RowsPair, SamplePair, Side,
};
use crate::policy::{MetricSpec, Policy};
use crate::slo::comparison::compare_slo;
use crate::stats::evidence as ev;
use crate::stats::{self, GateOutcome};

use super::capacity::compare_capacity;
use super::metric::{
    block_oracle_of, bootstrap_units, clustered, compare_metric, evidence_part, oracles_of, samples,
};
use super::{CompareError, DesignChoice};

/// Open loop: client queue time and latency from the scheduled send go into
/// the report beside the gating samples, whether or not the policy gates on them.
fn add_schedule_samples(pairs: &mut Vec<(String, SamplePair)>, bc: &CellResult, cc: &CellResult) {
    for key in [
        metric::QUEUE_MS,
        metric::TTFT_SCHED_MS,
        metric::E2E_SCHED_MS,
    ] {
        if pairs.iter().any(|(k, _)| k == key) {
            continue;
        }
        if let (Some(b), Some(c)) = (bc.samples.get(key), cc.samples.get(key)) {
            pairs.push((
                key.to_string(),
                SamplePair {
                    baseline: b.clone(),
                    candidate: c.clone(),
                    baseline_clusters: bc.sample_clusters.get(key).cloned(),
                    candidate_clusters: cc.sample_clusters.get(key).cloned(),
                },
            ));
        }
    }
}

fn median_completion(c: &CellResult) -> Option<f64> {
    c.metrics.get(metric::COMPLETION_TOKENS).map(|s| s.p50)
}

/// Sides that decoded different lengths do not compare on speed: a runtime
/// that stops early "wins" e2e. The cell's prompt tolerance is the bound.
fn output_length_mismatch(bc: &CellResult, cc: &CellResult) -> Option<String> {
    let (b, c) = (median_completion(bc)?, median_completion(cc)?);
    let tol = bc.shape.tolerance_percent;
    let d = stats::delta_percent(b, c)?;
    (d.abs() > tol).then(|| {
        format!(
            "not performance-comparable: median completion tokens differ by {d:+.1}% (baseline {b}, candidate {c}), more than the cell's {tol}% tolerance"
        )
    })
}

/// What comparing the cells one by one gives the report.
#[derive(Default)]
struct Accumulated {
    cells: Vec<(String, CellComparison)>,
    perf_parts: Vec<GatePart>,
    evidence_parts: Vec<EvidencePart>,
    warnings: Vec<String>,
}

/// One cell of both runs: eligibility, every policy metric, the SLOs; its
/// comparison, gate parts and warnings go into `acc`.
fn compare_cell(
    bc: &CellResult,
    cc: &CellResult,
    design: &DesignChoice,
    policy: &Policy,
    acc: &mut Accumulated,
) -> Result<(), CompareError> {
    if bc.capacity.is_some() || cc.capacity.is_some() {
        capacity_cell(bc, cc, design, policy, acc);
        return Ok(());
    }
    let mismatch = output_length_mismatch(bc, cc);
    if let Some(why) = &mismatch {
        acc.warnings.push(format!("cell `{}`: {why}", bc.name));
    }
    let sides = eligibility(bc, cc, mismatch.as_ref(), acc);
    let eligible = sides.baseline.0 && sides.candidate.0;
    let (metrics, mut sample_pairs) =
        cell_metrics(bc, cc, eligible, mismatch.as_deref(), design, policy, acc)?;
    let slo = compare_slo(
        bc,
        cc,
        eligible,
        policy,
        (design.alpha_pass, design.alpha_fail),
    )
    .map(|(cmp, part)| {
        acc.evidence_parts.extend(part);
        cmp
    });
    let request_rows =
        (!bc.request_rows.is_empty() && !cc.request_rows.is_empty()).then(|| RowsPair {
            baseline: bc.request_rows.clone(),
            candidate: cc.request_rows.clone(),
        });
    add_schedule_samples(&mut sample_pairs, bc, cc);
    warn_prompt_mismatch(bc, cc, acc);
    let comparison = CellComparison {
        metrics: OrderedMap(metrics),
        samples: Some(OrderedMap(sample_pairs)),
        not_comparable: mismatch,
        slo,
        request_rows,
        ..cell_comparison(bc, cc, sides)
    };
    acc.cells.push((bc.name.clone(), comparison));
    Ok(())
}

/// A capacity cell: gated on its capacity ratio alone (its requests span
/// the search's levels, so it has no metrics to gate and no one SLO
/// attainment), at the pair's share of the gate's error.
fn capacity_cell(
    bc: &CellResult,
    cc: &CellResult,
    design: &DesignChoice,
    policy: &Policy,
    acc: &mut Accumulated,
) {
    let alpha = design.alpha_pass.min(design.alpha_fail);
    let (capacity, ep, gp) = compare_capacity(bc, cc, alpha, policy.capacity.margin_percent);
    acc.evidence_parts.push(ep);
    acc.perf_parts.push(gp);
    let sides = SideEligibility {
        baseline: (bc.performance_eligible, bc.ineligible_reasons.clone()),
        candidate: (cc.performance_eligible, cc.ineligible_reasons.clone()),
    };
    let comparison = CellComparison {
        samples: Some(OrderedMap(Vec::new())),
        capacity,
        ..cell_comparison(bc, cc, sides)
    };
    acc.cells.push((bc.name.clone(), comparison));
}

/// Each side's performance eligibility and its reasons.
struct SideEligibility {
    baseline: (bool, Vec<String>),
    candidate: (bool, Vec<String>),
}

/// Each side's eligibility gate part and warnings go into `acc`.
fn eligibility(
    bc: &CellResult,
    cc: &CellResult,
    mismatch: Option<&String>,
    acc: &mut Accumulated,
) -> SideEligibility {
    let name = &bc.name;
    // Not comparable reads as ineligible on both sides, so the gate (and
    // `verify`, which recomputes it from the eligibilities) holds it back.
    let side_view = |cell: &CellResult| {
        let mut reasons = cell.ineligible_reasons.clone();
        reasons.extend(mismatch.cloned());
        (cell.performance_eligible && mismatch.is_none(), reasons)
    };
    let sides = SideEligibility {
        baseline: side_view(bc),
        candidate: side_view(cc),
    };
    for (side, cell, (eligible, reasons)) in [
        (Side::Baseline, bc, &sides.baseline),
        (Side::Candidate, cc, &sides.candidate),
    ] {
        acc.perf_parts.push(GatePart {
            subject: format!("cells.{name}.{side}_performance_eligible"),
            passed: *eligible,
            reason: if *eligible {
                "eligible".to_string()
            } else if reasons.is_empty() {
                format!("{side} cell is not performance-eligible")
            } else {
                format!(
                    "{side} cell is not performance-eligible: {}",
                    reasons.join("; ")
                )
            },
        });
        if cell.tokens_estimated {
            acc.warnings.push(format!(
                "cell `{name}`: {side} completion tokens were counted client-side (server sent no usage)"
            ));
        }
        for w in &cell.warnings {
            acc.warnings.push(format!("cell `{name}`: {side}: {w}"));
        }
    }
    sides
}

/// A warning when the sides' median prompts differ beyond the cell's tolerance.
fn warn_prompt_mismatch(bc: &CellResult, cc: &CellResult, acc: &mut Accumulated) {
    if let (Some(b), Some(c)) = (bc.median_prompt_tokens, cc.median_prompt_tokens) {
        let tol = bc.shape.tolerance_percent;
        if stats::delta_percent(b, c).is_some_and(|d| d.abs() > tol) {
            acc.warnings.push(format!(
                "cell `{}`: median prompt tokens differ by more than the cell's {tol}% tolerance (baseline {b}, candidate {c})",
                bc.name
            ));
        }
    }
}

/// The cell comparison's fields taken from the two cells as they are (the
/// metrics, samples, SLOs and request rows are left empty for the caller).
fn cell_comparison(bc: &CellResult, cc: &CellResult, sides: SideEligibility) -> CellComparison {
    let SideEligibility {
        baseline: (b_eligible, b_reasons),
        candidate: (c_eligible, c_reasons),
    } = sides;
    CellComparison {
        baseline_requests: bc.requests,
        candidate_requests: cc.requests,
        baseline_performance_eligible: b_eligible,
        candidate_performance_eligible: c_eligible,
        median_prompt_tokens: bc.median_prompt_tokens.or(cc.median_prompt_tokens),
        metrics: OrderedMap(Vec::new()),
        baseline_median_prompt_tokens: bc.median_prompt_tokens,
        candidate_median_prompt_tokens: cc.median_prompt_tokens,
        baseline_ineligible_reasons: b_reasons,
        candidate_ineligible_reasons: c_reasons,
        baseline_failed: Some(bc.failed),
        candidate_failed: Some(cc.failed),
        samples: None,
        not_comparable: None,
        baseline_median_completion_tokens: median_completion(bc),
        candidate_median_completion_tokens: median_completion(cc),
        output_tolerance_percent: Some(bc.shape.tolerance_percent),
        slo: None,
        request_rows: None,
        baseline_server_timings: bc.server_timings.clone(),
        candidate_server_timings: cc.server_timings.clone(),
        baseline_slices: bc.slices.clone(),
        candidate_slices: cc.slices.clone(),
        baseline_sessions: bc.sessions.clone(),
        candidate_sessions: cc.sessions.clone(),
        baseline_server_metrics: bc.server_metrics.iter().map(|m| m.for_report()).collect(),
        candidate_server_metrics: cc.server_metrics.iter().map(|m| m.for_report()).collect(),
        baseline_speculative: bc.speculative.clone(),
        candidate_speculative: cc.speculative.clone(),
        capacity: None,
    }
}

/// Every policy metric of one cell: its comparison and the per-request
/// samples the report keeps; each metric's gate parts go into `acc`.
#[allow(clippy::type_complexity)]
fn cell_metrics(
    bc: &CellResult,
    cc: &CellResult,
    eligible: bool,
    mismatch: Option<&str>,
    design: &DesignChoice,
    policy: &Policy,
    acc: &mut Accumulated,
) -> Result<(Vec<(String, MetricComparison)>, Vec<(String, SamplePair)>), CompareError> {
    let name = &bc.name;
    let mut metrics = Vec::new();
    let mut sample_pairs: Vec<(String, SamplePair)> = Vec::new();
    for spec in &policy.metrics {
        let subject = format!("cells.{name}.metrics.{}", spec.name);
        let b = samples(Side::Baseline, bc, &spec.sample)?;
        let c = samples(Side::Candidate, cc, &spec.sample)?;
        let (Some(b), Some(c)) = (b, c) else {
            let missing: Vec<&str> = [(b.is_none(), "baseline"), (c.is_none(), "candidate")]
                .into_iter()
                .filter_map(|(m, s)| m.then_some(s))
                .collect();
            let reason = format!(
                "no `{}` samples in the {} run",
                spec.sample,
                missing.join(" and ")
            );
            acc.evidence_parts.push(EvidencePart::new(
                subject.clone(),
                GateOutcome::Inconclusive,
                reason.clone(),
            ));
            acc.perf_parts.push(GatePart {
                subject,
                passed: false,
                reason,
            });
            continue;
        };
        let bcl = bc.sample_clusters.get(&spec.sample).map(Vec::as_slice);
        let ccl = cc.sample_clusters.get(&spec.sample).map(Vec::as_slice);
        // Every recorded request has a value on both sides, in request order.
        let every_request = b.len() == bc.requests && c.len() == cc.requests;
        let (m, part) =
            match compare_metric(spec, name, b, c, (bcl, ccl), design, policy, every_request) {
                Ok(x) => x,
                Err(part) => {
                    acc.evidence_parts.push(EvidencePart::new(
                        part.subject.clone(),
                        GateOutcome::Inconclusive,
                        part.reason.clone(),
                    ));
                    acc.perf_parts.push(part);
                    continue;
                }
            };
        let sides = ((b, bcl), (c, ccl));
        let mut ep = metric_part(&subject, &m, spec, sides, (bc, cc), eligible, design);
        if let (Some(why), GateOutcome::Inconclusive) = (mismatch, ep.outcome) {
            ep.reason = why.to_string();
        }
        acc.evidence_parts.push(ep);
        metrics.push((spec.name.clone(), m));
        acc.perf_parts.push(part);
        if !sample_pairs.iter().any(|(k, _)| *k == spec.sample) {
            sample_pairs.push((
                spec.sample.clone(),
                SamplePair {
                    baseline: b.to_vec(),
                    candidate: c.to_vec(),
                    baseline_clusters: bcl.map(<[u32]>::to_vec),
                    candidate_clusters: ccl.map(<[u32]>::to_vec),
                },
            ));
        }
    }
    Ok((metrics, sample_pairs))
}

/// One side's samples of a metric and their clusters (blocks), if any.
type Samples<'a> = (&'a [f64], Option<&'a [u32]>);

/// One compared metric's evidence part: its outcome, whether its bounds
/// inform a reader, and what each oracle and the design need on its data.
fn metric_part(
    subject: &str,
    m: &MetricComparison,
    spec: &MetricSpec,
    ((b, bcl), (c, ccl)): (Samples<'_>, Samples<'_>),
    (bc, cc): (&CellResult, &CellResult),
    eligible: bool,
    design: &DesignChoice,
) -> EvidencePart {
    let levels = (design.alpha_pass, design.alpha_fail);
    let mut ep = evidence_part(subject, m, eligible, bc, cc, levels);
    let units = |e: &stats::Evidence| {
        bootstrap_units(
            e.resampling,
            clustered(b, bcl),
            clustered(c, ccl),
            design.method.block_mean,
        )
    };
    // Whether the bounds the report records for the metric inform a
    // reader, whatever the part says (the metric tables show them too).
    if let Some(e) = &m.evidence
        && let Err(why) = ev::informative(e, spec.direction, units(e))
    {
        (ep.informative, ep.not_informative) = (false, Some(why));
    }
    if let (true, Some(e)) = (eligible, &m.evidence) {
        ep.requests_per_side = Some(b.len().min(c.len()));
        (
            ep.oracle_requests_per_side,
            ep.learning_oracle_requests_per_side,
        ) = oracles_of(e, spec, (b, bcl), (c, ccl), design);
        ep.block_oracle_requests_per_side = block_oracle_of(e, spec, (b, bcl), (c, ccl), design);
        ep.design_effect = ep
            .block_oracle_requests_per_side
            .zip(ep.oracle_requests_per_side)
            .map(|(block, request)| block as f64 / request as f64);
        let units = units(e);
        ep.design_requests_per_side = ev::design_requests(
            design.method.design_spread.of(e, units),
            b.len().min(c.len()),
            e.margin_percent,
            design.oracle_levels.1,
        );
    }
    ep
}

/// The cells compared, and the performance gates they make.
pub(super) struct ComparedCells {
    pub(super) cells: Vec<(String, CellComparison)>,
    pub(super) performance: Gate,
    pub(super) evidence: EvidenceGate,
    pub(super) warnings: Vec<String>,
}

/// Every baseline cell against the candidate's of that name; no cells at all
/// fails the point gate and leaves the evidence inconclusive.
pub(super) fn compare_cells(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    design: &DesignChoice,
    policy: &Policy,
) -> Result<ComparedCells, CompareError> {
    let mut acc = Accumulated::default();
    for bc in &baseline.cells {
        // differences() guarantees the candidate has this cell.
        let Some(cc) = candidate.cells.iter().find(|c| c.name == bc.name) else {
            continue;
        };
        compare_cell(bc, cc, design, policy, &mut acc)?;
    }
    let Accumulated {
        cells,
        mut perf_parts,
        mut evidence_parts,
        warnings,
    } = acc;
    if cells.is_empty() {
        perf_parts.push(GatePart {
            subject: "cells".into(),
            passed: false,
            reason: "no cells: nothing was measured".into(),
        });
    }
    let performance = Gate::new(PERFORMANCE_RULE, perf_parts);
    if cells.is_empty() {
        evidence_parts.push(EvidencePart::new(
            "cells",
            GateOutcome::Inconclusive,
            "no cells: nothing was measured",
        ));
    }
    Ok(ComparedCells {
        cells,
        performance,
        evidence: evidence_gate(evidence_parts),
        warnings,
    })
}
