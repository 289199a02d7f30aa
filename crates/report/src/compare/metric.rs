//! One gating metric of one cell: its quantile on each side, the point
//! delta and its regression flag, the bootstrap under the design (paired
//! where the blocks allow), the evidence bounds against its margin, the
//! gate part it makes, and the oracles its cost is held against.

use crate::artifact::{CellResult, Schedule};
use crate::design::SINGLE_PASS_DRIFT;
use crate::gate::ineligible_part;
use crate::model::{EvidencePart, GatePart, MetricComparison, Side};
use crate::policy::{MetricSpec, Policy};
use crate::stats::evidence::{self as ev, MIN_CLUSTERS};
use crate::stats::{self, BlockMean, Clustered, DriftFloor, GateOutcome, Resampling};

use super::{CompareError, DesignChoice};

pub(super) fn samples<'a>(
    side: Side,
    cell: &'a CellResult,
    sample: &str,
) -> Result<Option<&'a [f64]>, CompareError> {
    let Some(v) = cell.samples.get(sample) else {
        return Ok(None);
    };
    if let Some(index) = v.iter().position(|x| !x.is_finite()) {
        return Err(CompareError::NonFiniteSample {
            side,
            cell: cell.name.clone(),
            sample: sample.to_string(),
            index,
        });
    }
    Ok((!v.is_empty()).then_some(v.as_slice()))
}

fn fmt_pct(x: f64) -> String {
    format!("{x:+.2}%")
}

fn direction_word(d: stats::Direction) -> &'static str {
    match d {
        stats::Direction::LowerIsBetter => "lower is better",
        stats::Direction::HigherIsBetter => "higher is better",
    }
}

/// One side's samples with their clusters, as the bootstrap takes them.
pub(crate) fn clustered<'a>(v: &'a [f64], clusters: Option<&'a [u32]>) -> Clustered<'a> {
    Clustered {
        values: v,
        clusters: clusters.filter(|c| c.len() == v.len()),
    }
}

/// Whether the drift floor applies to this pair of samples, and why.
/// `clusters`: the smaller side's cluster count.
fn drift_floor_reason(design: &DesignChoice, clusters: usize, used: Resampling) -> Option<String> {
    match used {
        Resampling::Paired | Resampling::PairedRequests => None,
        Resampling::Independent => Some(match design.schedule {
            Schedule::Single => SINGLE_PASS_DRIFT.into(),
            _ => "clusters could not be paired or resampled; requests were resampled as independent".into(),
        }),
        Resampling::Clustered => (clusters < MIN_CLUSTERS).then(|| {
            format!("{clusters} cluster(s) on a side: fewer than {MIN_CLUSTERS} passes cannot measure the drift between them")
        }),
    }
}

/// The resampling units behind a pair's bounds: requests, or clusters
/// (blocks, passes; a trimmed mean's middle). Few clusters widen the bounds
/// a lot (t with B−1 degrees of freedom): that is the price of not knowing
/// the between-block variance, so designs should give each cell several blocks.
pub(crate) fn bootstrap_units(
    used: Resampling,
    b: Clustered,
    c: Clustered,
    block_mean: BlockMean,
) -> usize {
    let clusters = b.cluster_count().min(c.cluster_count());
    match used {
        Resampling::Independent => b.values.len().min(c.values.len()),
        Resampling::Paired | Resampling::PairedRequests => block_mean.units(clusters),
        Resampling::Clustered => clusters,
    }
}

/// The evidence of one gating metric: the sorted bootstrap distribution
/// under the design (paired falls back to clustered when blocks do not
/// match), then the bounds.
fn metric_evidence(
    spec: &MetricSpec,
    b: Clustered,
    c: Clustered,
    point_delta: f64,
    design: &DesignChoice,
    policy: &Policy,
    every_request: bool,
) -> Option<(Vec<f64>, stats::Evidence)> {
    let bs = &policy.bootstrap;
    let block_mean = design.method.block_mean;
    let run = |r| {
        stats::bootstrap_deltas_by(b, c, spec.quantile, (r, block_mean), bs.iterations, bs.seed)
    };
    // Interleaved, with every request's value on both sides: request k of
    // a block is the same request on both, so pair them; else pair blocks;
    // else the clusters of each side.
    let mut tries = vec![design.resampling];
    if design.resampling == Resampling::Paired {
        if every_request && design.method.pair_requests {
            tries.insert(0, Resampling::PairedRequests);
        }
        tries.push(Resampling::Clustered);
    }
    let (deltas, used) = tries.into_iter().find_map(|r| Some((run(r)?, r)))?;
    // Paired: the evidence is about the per-block ratios (see
    // `paired_point_delta`); its point estimate is theirs.
    let point_delta = match used {
        Resampling::Paired | Resampling::PairedRequests => {
            stats::paired_point_delta_by(b, c, spec.quantile, block_mean)?
        }
        _ => point_delta,
    };
    let clusters = b.cluster_count().min(c.cluster_count());
    let units = bootstrap_units(used, b, c, block_mean);
    let floor = drift_floor_reason(design, clusters, used).map(|why| DriftFloor {
        pass_sd_percent: design.drift.pass_sd_percent,
        source: format!("{}; applied because {why}", design.drift.source),
    });
    let e = ev::evidence(
        &deltas,
        &stats::EvidenceInput {
            direction: spec.direction,
            margin_percent: spec.threshold_percent,
            point_delta_percent: point_delta,
            alpha_pass: design.alpha_pass,
            alpha_fail: design.alpha_fail,
            resampling: used,
            drift_floor: floor.as_ref(),
            n_eff: ev::n_eff(b.values.len(), c.values.len()),
            units,
            scale: design.method.bound_scale,
        },
    )?;
    Some((deltas, e))
}

/// One metric of one cell (both sides non-empty and finite), or the failed
/// gate part saying why it could not be computed.
#[allow(clippy::too_many_arguments)]
pub(super) fn compare_metric(
    spec: &MetricSpec,
    cell: &str,
    b: &[f64],
    c: &[f64],
    clusters: (Option<&[u32]>, Option<&[u32]>),
    design: &DesignChoice,
    policy: &Policy,
    every_request: bool,
) -> Result<(MetricComparison, GatePart), GatePart> {
    let subject = format!("cells.{cell}.metrics.{}", spec.name);
    let q = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        stats::percentile_sorted(&s, spec.quantile)
    };
    let (Some(bv), Some(cv)) = (q(b), q(c)) else {
        return Err(GatePart {
            subject,
            passed: false,
            reason: format!("quantile {} is outside [0, 1]", spec.quantile),
        });
    };
    let delta = stats::delta_percent(bv, cv);
    let within = delta.is_some_and(|d| {
        stats::within_regression_threshold(spec.direction, d, spec.threshold_percent)
    });
    let found = delta.and_then(|d| {
        metric_evidence(
            spec,
            clustered(b, clusters.0),
            clustered(c, clusters.1),
            d,
            design,
            policy,
            every_request,
        )
    });
    let conf = policy.bootstrap.confidence;
    let ci = found.as_ref().and_then(|(deltas, _)| {
        Some(stats::Interval {
            low: stats::percentile_sorted(deltas, (1.0 - conf) / 2.0)?,
            high: stats::percentile_sorted(deltas, 1.0 - (1.0 - conf) / 2.0)?,
            confidence: conf,
        })
    });
    let evidence = found.map(|(_, e)| e);
    let verdict = ci.map(|ci| stats::verdict(spec.direction, &ci, spec.threshold_percent));
    // Requests to resolve the gate (not the descriptive verdict): the evidence's figure.
    let requests_to_resolve = evidence.as_ref().and_then(|e| e.requests_to_resolve);
    let reason = match delta {
        Some(d) => format!(
            "delta {} ({}); worse-direction change {} {} threshold {}%",
            fmt_pct(d),
            direction_word(spec.direction),
            fmt_pct(spec.direction.worse_change_percent(d)),
            if within { "<=" } else { ">" },
            spec.threshold_percent
        ),
        None => "delta undefined: baseline value is 0".to_string(),
    };
    let m = MetricComparison {
        baseline: bv,
        candidate: cv,
        delta_percent: delta,
        within_threshold: within,
        threshold_percent: spec.threshold_percent,
        direction: Some(spec.direction),
        sample: Some(spec.sample.clone()),
        quantile: Some(spec.quantile),
        baseline_n: Some(b.len()),
        candidate_n: Some(c.len()),
        ci_delta_percent: ci,
        verdict,
        requests_to_resolve,
        evidence,
    };
    let part = GatePart {
        subject,
        passed: within,
        reason,
    };
    Ok((m, part))
}

/// One pair's evidence outcome. An ineligible cell decides nothing, except
/// that candidate requests failing where the baseline's did not is a fail.
pub(super) fn evidence_part(
    subject: &str,
    m: &MetricComparison,
    eligible: bool,
    bc: &CellResult,
    cc: &CellResult,
    (alpha_pass, alpha_fail): (f64, f64),
) -> EvidencePart {
    let part = |outcome, reason| EvidencePart::new(subject, outcome, reason);
    if !eligible {
        return ineligible_part(subject, bc, cc);
    }
    let Some(e) = &m.evidence else {
        // An early look's share of α can be below what a double holds
        // apart from 1 (1 − α == 1): no bound exists at that level yet.
        let why = if ev::no_bound_at(alpha_pass) {
            format!(
                "this look's share of alpha ({alpha_pass:.1e}) is too small for any bound: the spending rule keeps nearly all of alpha for the later looks, so more requests (later looks) decide it"
            )
        } else if ev::no_bound_at(alpha_fail) {
            format!(
                "this look's share of alpha for the fail bound ({alpha_fail:.1e}) is too small for any bound: the spending rule keeps nearly all of it for the later looks, so more requests (later looks) decide it"
            )
        } else {
            "no interval could be computed (a baseline value of 0, or too few values)".into()
        };
        return part(GateOutcome::Inconclusive, why);
    };
    let bounds = format!(
        "worse-direction change {:+.2}%, bounds [{:+.2}%, {:+.2}%] (fail if lower > {}%, pass if upper <= {}%)",
        e.worse_change_percent,
        e.lower_bound_percent,
        e.upper_bound_percent,
        e.margin_percent,
        e.margin_percent
    );
    let more = match (e.requests_to_resolve, &e.unresolvable) {
        (Some(n), _) => format!("; about {n} requests per side would decide it"),
        (None, Some(why)) => format!("; {why}"),
        _ => String::new(),
    };
    EvidencePart {
        requests_to_resolve: e.requests_to_resolve,
        ..part(e.outcome, format!("{bounds}{more}"))
    }
}

/// What the known-variance oracle and the one that learns the spread need
/// on this pair's data to decide what its evidence shows, at the
/// fixed-size run's level for the side its point lies on.
pub(super) fn oracles_of(
    e: &stats::Evidence,
    spec: &MetricSpec,
    b: (&[f64], Option<&[u32]>),
    c: (&[f64], Option<&[u32]>),
    design: &DesignChoice,
) -> (Option<usize>, Option<usize>) {
    let (pass, fail) = design.oracle_levels;
    let alpha = if e.worse_change_percent > e.margin_percent {
        fail
    } else {
        pass
    };
    ev::oracles(
        clustered(b.0, b.1),
        clustered(c.0, c.1),
        e.resampling == Resampling::PairedRequests,
        (
            spec.direction,
            e.margin_percent,
            e.worse_change_percent,
            alpha,
        ),
    )
}

/// What the known-variance oracle on the blocks needs on this pair's data
/// (`ev::block_oracle`), for a design that pairs blocks: requests per side.
pub(super) fn block_oracle_of(
    e: &stats::Evidence,
    spec: &MetricSpec,
    b: (&[f64], Option<&[u32]>),
    c: (&[f64], Option<&[u32]>),
    design: &DesignChoice,
) -> Option<usize> {
    if !matches!(
        e.resampling,
        Resampling::Paired | Resampling::PairedRequests
    ) {
        return None;
    }
    ev::block_oracle(
        clustered(b.0, b.1),
        clustered(c.0, c.1),
        spec.quantile,
        spec.direction,
        e.margin_percent,
        design.oracle_levels,
    )
    .map(|o| o.requests_per_side)
}
