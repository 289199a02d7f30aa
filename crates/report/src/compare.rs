//! `compare`: two run artifacts and a policy in, a report out.
//!
//! Rules (also written into the report's `statistics` and `gates` blocks):
//! - The runs must be comparable: same model, same suite (name; sha256 when
//!   both have it), the same cell names with equal shapes, and turnover runs
//!   of one name with the same contract, concurrency and request count.
//!   Otherwise `compare` refuses and lists every difference.
//! - Cells are never pooled; each gating metric is the policy's quantile of
//!   that cell's per-request samples on each side.
//! - `performance_gate_passed`: at least one cell, every cell eligible on both
//!   sides, and every gating metric of every cell present on both sides with
//!   its regression flag true (point delta within threshold).
//! - `strict_turnover_gate_passed`: see [`super::gate::STRICT_RULE`].
//! - `qualification`: see [`qualification`].
//! - `median_prompt_tokens`: the baseline run's median prompt tokens (the
//!   workload as measured on the runtime in service), the candidate's when the
//!   baseline has none; both sides are kept as added fields.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::artifact::{
    CellResult, CellShape, RUN_SCHEMA, RunArtifact, Schedule, Slo, TurnoverRun,
    is_unmet_expectation, metric,
};
use crate::design::{self, Look, Method, SINGLE_PASS_DRIFT};
use crate::slo;
use crate::stats::evidence::{self as ev, MIN_CLUSTERS};
use crate::stats::{self, BlockMean, Clustered, DriftFloor, GateOutcome, Resampling};

use super::gate::{
    self, EVIDENCE_RULE, PERFORMANCE_RULE, evidence_gate, evidence_qualification, qualification,
    turnover_ok,
};
use super::model::{
    BootstrapSettings, CellComparison, Decision, EvidenceGate, EvidencePart, Gate, GatePart, Gates,
    MetricComparison, OrderedMap, PENDING, ProvenancePair, QualityComparison, REPORT_SCHEMA,
    Report, RowsPair, SamplePair, Side, SloComparison, Statistics, TurnoverComparison,
    TurnoverGateResult, TurnoverRunReport, TurnoverRuns, turnover_key,
};
use super::policy::{DEFAULT_SLO_MARGIN_POINTS, GateRule, MetricSpec, Policy};
use super::quality;
use super::reference::{self, ReferenceComparison};
use super::turnover_rates::{self, RunCounts};

pub const ATTAINMENT_RULE: &str = "a request meets a cell's SLOs when it succeeded and every target holds (TTFT and e2e from the scheduled send, TPOT as measured; one output token has no TPOT); attainment = met / recorded requests, failures included, with a 95% Wilson interval per side; the gate reads the drop (baseline - candidate, percentage points) with Newcombe's hybrid score interval at the evidence levels: fail if its lower bound > margin_points, pass if its upper bound <= margin_points, else inconclusive; each cell with SLOs from the policy is one gating pair of the family (SLOs from the suite are reported with the same bounds, gating: false); requests are taken as independent";

pub const VERDICT_RULE: &str = "map the CI of delta_percent to the change in the worse direction [w_lo, w_hi] (latency: as is; throughput: negated) and take the first that holds, T the threshold: regressed if w_lo > T; improved if w_hi < 0; equivalent if -T <= w_lo and w_hi <= T; inconclusive otherwise";

#[derive(Debug, Error)]
pub enum CompareError {
    #[error("{side} run artifact has schema {found:?}, expected {RUN_SCHEMA:?}")]
    Schema { side: Side, found: String },
    #[error("baseline and candidate runs are not comparable:\n  - {}", .differences.join("\n  - "))]
    Incomparable { differences: Vec<String> },
    #[error("{side} run artifact contradicts itself:\n  - {}", .problems.join("\n  - "))]
    Inconsistent { side: Side, problems: Vec<String> },
    #[error("{side} cell `{cell}`: sample `{sample}` has a non-finite value at position {index}")]
    NonFiniteSample {
        side: Side,
        cell: String,
        sample: String,
        index: usize,
    },
}

fn shape_differences(a: &CellShape, b: &CellShape) -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! field {
        ($($f:ident),*) => {$(
            if a.$f != b.$f {
                out.push(format!("{} {:?} vs {:?}", stringify!($f), a.$f, b.$f));
            }
        )*};
    }
    field!(
        prompt_tokens,
        tolerance_percent,
        max_tokens,
        concurrency,
        requests,
        warmup,
        cache,
        arrival,
        temperature,
        seed,
        workload,
        endpoint
    );
    out
}

/// Every reason the two runs cannot be compared; empty when they can.
fn differences(b: &RunArtifact, c: &RunArtifact) -> Vec<String> {
    let mut out = Vec::new();
    let (bp, cp) = (&b.provenance, &c.provenance);
    if bp.model != cp.model {
        out.push(format!(
            "model: baseline {:?} vs candidate {:?}",
            bp.model, cp.model
        ));
    }
    if bp.suite != cp.suite {
        out.push(format!(
            "suite: baseline {:?} vs candidate {:?}",
            bp.suite, cp.suite
        ));
    }
    if let (Some(x), Some(y)) = (&bp.suite_sha256, &cp.suite_sha256)
        && x != y
    {
        out.push(format!("suite_sha256: baseline {x} vs candidate {y}"));
    }
    for (side, art) in [(Side::Baseline, b), (Side::Candidate, c)] {
        let mut seen = BTreeSet::new();
        for cell in &art.cells {
            if !seen.insert(cell.name.as_str()) {
                out.push(format!("{side} has two cells named `{}`", cell.name));
            }
        }
    }
    for cell in &b.cells {
        match c.cells.iter().find(|x| x.name == cell.name) {
            None => out.push(format!("cell `{}` is in the baseline run only", cell.name)),
            Some(other) => {
                let slo = |c: &CellResult| c.slo.as_ref().map(|a| a.targets);
                if slo(cell) != slo(other) {
                    out.push(format!(
                        "cell `{}` SLOs differ: baseline {:?} vs candidate {:?}",
                        cell.name,
                        slo(cell).map(|s| s.describe()),
                        slo(other).map(|s| s.describe())
                    ));
                }
                let d = shape_differences(&cell.shape, &other.shape);
                if !d.is_empty() {
                    out.push(format!(
                        "cell `{}` shape differs (baseline vs candidate): {}",
                        cell.name,
                        d.join(", ")
                    ));
                }
            }
        }
    }
    for cell in &c.cells {
        if !b.cells.iter().any(|x| x.name == cell.name) {
            out.push(format!("cell `{}` is in the candidate run only", cell.name));
        }
    }
    // Turnover runs of one name are one workload on both sides.
    for run in &c.turnover {
        for base in b.turnover.iter().filter(|x| x.name == run.name) {
            let mut d = Vec::new();
            if base.contract != run.contract {
                d.push(format!(
                    "contract {:?} vs {:?}",
                    base.contract, run.contract
                ));
            }
            if base.concurrency != run.concurrency {
                d.push(format!(
                    "concurrency {} vs {}",
                    base.concurrency, run.concurrency
                ));
            }
            if base.requests != run.requests {
                d.push(format!("requests {} vs {}", base.requests, run.requests));
            }
            if let (Some(x), Some(y)) = (&base.task_set_sha256, &run.task_set_sha256)
                && x != y
            {
                d.push(format!("task items (sha256) {x} vs {y}"));
            }
            if !d.is_empty() {
                let msg = format!(
                    "turnover `{}` differs (baseline vs candidate): {}",
                    run.name,
                    d.join(", ")
                );
                if !out.contains(&msg) {
                    out.push(msg);
                }
            }
        }
    }
    for e in &c.embeddings {
        for base in b.embeddings.iter().filter(|x| x.name == e.name) {
            out.extend(crate::embedding::mismatch(base, e));
        }
    }
    out
}

/// A side's turnover runs in report order: grouped by name in first-appearance
/// order, repeats ascending. The index in this list is the key's ordinal.
fn ordered_turnover(runs: &[TurnoverRun]) -> Vec<&TurnoverRun> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    let mut out = Vec::with_capacity(runs.len());
    for n in names {
        let mut group: Vec<&TurnoverRun> = runs.iter().filter(|r| r.name == n).collect();
        group.sort_by_key(|r| r.repeat);
        out.extend(group);
    }
    out
}

fn turnover_report(r: &TurnoverRun) -> TurnoverRunReport {
    TurnoverRunReport {
        requests: r.requests,
        exact_output_passed: r.exact_output_passed,
        failed: r.failed,
        responses_received: r.responses_received,
        performance_eligible: r.performance_eligible,
        failures: r.failures.clone(),
        name: Some(r.name.clone()),
        repeat: Some(r.repeat),
        contract: Some(r.contract.clone()),
        concurrency: Some(r.concurrency),
        contaminated: Some(r.contaminated),
        first_ttft_ms: r.first_ttft_ms,
        later_ttft_p50_ms: r.later_ttft_p50_ms,
    }
}

fn run_counts(side: Side, runs: &[&TurnoverRun]) -> Vec<RunCounts> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| RunCounts {
            key: turnover_key(side, i),
            name: r.name.clone(),
            requests: r.requests as u64,
            failed: r.failed as u64,
            contaminated: Some(r.contaminated as u64),
        })
        .collect()
}

/// Image reference of a run: the pinned image, else the runtime label, else the target.
fn image_ref(a: &RunArtifact) -> String {
    let p = &a.provenance;
    p.image
        .clone()
        .or_else(|| p.runtime.clone())
        .unwrap_or_else(|| p.target.clone())
}

fn samples<'a>(
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

/// How one comparison resamples, and what it assumes about drift.
#[derive(Debug, Clone)]
struct DesignChoice {
    pub schedule: Schedule,
    pub resampling: Resampling,
    pub method: Method,
    /// Levels of the pass and fail bounds.
    pub alpha_pass: f64,
    pub alpha_fail: f64,
    /// The one-look levels (pass, fail) the fixed-n oracle is held to.
    pub oracle_levels: (f64, f64),
    pub drift: DriftFloor,
}

/// The design both artifacts declare: interleaved on both sides → paired
/// blocks; alternating passes → clustered; else one pass per side.
fn design_of(b: &RunArtifact, c: &RunArtifact) -> (Schedule, Resampling) {
    let sb = b.schedule.unwrap_or(Schedule::Single);
    let sc = c.schedule.unwrap_or(Schedule::Single);
    match (sb, sc) {
        (Schedule::Interleaved, Schedule::Interleaved) => {
            (Schedule::Interleaved, Resampling::Paired)
        }
        (Schedule::Single, _) | (_, Schedule::Single) => {
            (Schedule::Single, Resampling::Independent)
        }
        _ => (Schedule::AlternatingPasses, Resampling::Clustered),
    }
}

/// One side's samples with their clusters, as the bootstrap takes them.
fn clustered<'a>(v: &'a [f64], clusters: Option<&'a [u32]>) -> Clustered<'a> {
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
fn bootstrap_units(used: Resampling, b: Clustered, c: Clustered, block_mean: BlockMean) -> usize {
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
fn compare_metric(
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
fn evidence_part(
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
fn oracles_of(
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

/// An ineligible cell's part: inconclusive, or a fail when candidate
/// requests failed where the baseline's did not.
fn ineligible_part(subject: &str, bc: &CellResult, cc: &CellResult) -> EvidencePart {
    fn unmet(c: &CellResult) -> Vec<&str> {
        c.ineligible_reasons
            .iter()
            .map(String::as_str)
            .filter(|r| is_unmet_expectation(r))
            .collect()
    }
    let (outcome, reason) = if !unmet(cc).is_empty() && unmet(bc).is_empty() {
        (
            GateOutcome::Fail,
            format!(
                "the candidate did not do what the cell expects, where the baseline did: {}",
                unmet(cc).join("; ")
            ),
        )
    } else if cc.failed > 0 && bc.failed == 0 {
        (
            GateOutcome::Fail,
            format!(
                "{} candidate requests failed, none of the baseline's",
                cc.failed
            ),
        )
    } else {
        (
            GateOutcome::Inconclusive,
            "the cell is not performance-eligible on both sides".to_string(),
        )
    };
    EvidencePart::new(subject.to_string(), outcome, reason)
}

/// A cell's SLOs: the policy's for it, which gate, else the suite's (both
/// runs carry the same ones, or `differences` refused them), which are
/// reported beside the gate: the policy decides what gates.
struct CellSlo {
    targets: Slo,
    source: &'static str,
    margin_points: f64,
    gating: bool,
}

fn slo_of(policy: &Policy, bc: &CellResult) -> Option<CellSlo> {
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

/// One cell's SLO attainment on both sides, and its gate part when it gates.
fn compare_slo(
    bc: &CellResult,
    cc: &CellResult,
    eligible: bool,
    policy: &Policy,
    design: &DesignChoice,
) -> Option<(SloComparison, Option<EvidencePart>)> {
    let CellSlo {
        targets,
        source,
        margin_points: margin,
        gating,
    } = slo_of(policy, bc)?;
    let subject = format!("cells.{}.slo_attainment", bc.name);
    let b = slo::attainment(&targets, &bc.request_rows);
    let c = slo::attainment(&targets, &cc.request_rows);
    let evidence = stats::attainment_evidence(
        (b.met as u64, b.of as u64),
        (c.met as u64, c.of as u64),
        margin,
        design.alpha_pass,
        design.alpha_fail,
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
    let mismatch = output_length_mismatch(bc, cc);
    if let Some(why) = &mismatch {
        acc.warnings.push(format!("cell `{}`: {why}", bc.name));
    }
    let sides = eligibility(bc, cc, mismatch.as_ref(), acc);
    let eligible = sides.baseline.0 && sides.candidate.0;
    let (metrics, mut sample_pairs) =
        cell_metrics(bc, cc, eligible, mismatch.as_deref(), design, policy, acc)?;
    let slo = compare_slo(bc, cc, eligible, policy, design).map(|(cmp, part)| {
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
        let levels = (design.alpha_pass, design.alpha_fail);
        let mut ep = evidence_part(&subject, &m, eligible, bc, cc, levels);
        if let (Some(why), GateOutcome::Inconclusive) = (mismatch, ep.outcome) {
            ep.reason = why.to_string();
        }
        if let (true, Some(e)) = (eligible, &m.evidence) {
            ep.requests_per_side = Some(b.len().min(c.len()));
            (
                ep.oracle_requests_per_side,
                ep.learning_oracle_requests_per_side,
            ) = oracles_of(e, spec, (b, bcl), (c, ccl), design);
            let units = bootstrap_units(
                e.resampling,
                clustered(b, bcl),
                clustered(c, ccl),
                design.method.block_mean,
            );
            ep.design_requests_per_side = ev::design_requests(
                design.method.design_spread.of(e, units),
                b.len().min(c.len()),
                e.margin_percent,
                design.oracle_levels.1,
            );
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

/// Why `a` and `b` are one run given twice, if they are: the same journal
/// of records (by sha256), or the same artifact in every field. Compared
/// with itself a run shows no difference by construction. Two empty
/// journals (a suite of embeddings only) say nothing of it.
pub fn same_run(a: &RunArtifact, b: &RunArtifact) -> Option<String> {
    if let (Some(x), Some(y)) = (&a.provenance.journal, &b.provenance.journal)
        && x.sha256 == y.sha256
        && x.records > 0
    {
        return Some(format!(
            "both were aggregated from the journal with sha256 {}",
            x.sha256
        ));
    }
    (a == b).then(|| "the two artifacts are identical".to_string())
}

/// The report of `candidate` against `baseline` under `policy`, as a
/// fixed-size run's one look.
pub fn compare(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
) -> Result<Report, CompareError> {
    compare_with_look(baseline, candidate, policy, None)
}

/// [`compare`] at `look` of a sequential run (None: a fixed-size run's one
/// look, spending by the policy's `gate.spending`).
pub fn compare_with_look(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    look: Option<&Look>,
) -> Result<Report, CompareError> {
    compare_by(baseline, candidate, policy, &Method::default(), look)
}

/// [`compare_with_look`] computed by `method`: the one a report records,
/// when `verify` makes it again.
pub fn compare_by(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    method: &Method,
    look: Option<&Look>,
) -> Result<Report, CompareError> {
    compare_given(
        baseline,
        candidate,
        policy,
        (method, look),
        Given::default(),
    )
}

/// What `verify` gives `compare` instead of what the runs would hold: a
/// report keeps neither reference texts nor embedding vectors, only what
/// was judged from them.
#[derive(Default)]
pub(crate) struct Given<'a> {
    pub references: Option<&'a ReferenceComparison>,
    pub embeddings: Option<Vec<crate::embedding::EmbeddingPair>>,
}

/// `compare`, with the cross-runtime reference comparison and the
/// embeddings' cosines given instead of made from the runs' texts and
/// vectors: `verify` recomputes a report, which keeps neither.
pub(crate) fn compare_given(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    (method, look): (&Method, Option<&Look>),
    given: Given,
) -> Result<Report, CompareError> {
    check_comparable(baseline, candidate)?;
    let (schedule, resampling) = design_of(baseline, candidate);
    // The candidate's reference texts held against the baseline's: changed
    // greedy output the quality policy does not pass fails those requests,
    // and a warning says where.
    let (c_turnover, reference_notes, reference_comparison) =
        reference::against_baseline(&baseline.turnover, &candidate.turnover, &policy.quality);
    let quality_refs = given.references.or(reference_comparison.as_ref());
    let embeddings = given
        .embeddings
        .unwrap_or_else(|| crate::embedding::pairs(&baseline.embeddings, &candidate.embeddings));
    let tasks = quality::task_pairs(&baseline.turnover, &candidate.turnover);
    let features = quality::feature_pairs(&baseline.turnover, &candidate.turnover);
    let quality_pairs =
        quality::gating_parts(tasks.len() + features.len(), quality_refs, &policy.quality);
    let fixed = Look::fixed(policy.gate.spending);
    let family = Family {
        pairs: (gating_pairs(baseline, policy, quality_pairs), quality_pairs),
        look: look.unwrap_or(&fixed),
    };
    let design = design_choice(schedule, resampling, &family, policy, method);
    let cells = compare_cells(baseline, candidate, &design, policy)?;
    let turnover = TurnoverGates::of(&baseline.turnover, &c_turnover, policy);
    let quality = quality::judge(
        quality_refs,
        &tasks,
        &features,
        &embeddings,
        &policy.quality,
        design.alpha_pass,
        design.alpha_fail,
    );
    let quality_gate = quality.as_ref().and_then(|(_, g)| g.clone());
    let (qualification, qualified) = decide(
        policy,
        &cells,
        &turnover,
        quality_gate.as_ref().map(|g| g.outcome),
    );
    let warnings = warnings(
        cells.warnings,
        reference_notes,
        baseline,
        candidate,
        schedule,
        policy,
    );
    let judged = Judged {
        cells: cells.cells,
        performance: cells.performance,
        evidence: cells.evidence,
        turnover,
        qualification,
        qualified,
        quality_gate,
        warnings,
        reference_comparison,
        quality: quality.map(|(q, _)| q),
    };
    Ok(assemble(
        baseline, candidate, policy, &design, &family, judged,
    ))
}

/// Both runs are of this schema, consistent in themselves, and comparable.
fn check_comparable(baseline: &RunArtifact, candidate: &RunArtifact) -> Result<(), CompareError> {
    for (side, a) in [(Side::Baseline, baseline), (Side::Candidate, candidate)] {
        if a.schema != RUN_SCHEMA {
            return Err(CompareError::Schema {
                side,
                found: a.schema.clone(),
            });
        }
    }
    // A report made from a self-contradicting artifact would not verify.
    for (side, a) in [(Side::Baseline, baseline), (Side::Candidate, candidate)] {
        let problems = super::consistency::artifact_problems(a);
        if !problems.is_empty() {
            return Err(CompareError::Inconsistent {
                side,
                problems: problems.iter().map(ToString::to_string).collect(),
            });
        }
    }
    let diffs = differences(baseline, candidate);
    if !diffs.is_empty() {
        return Err(CompareError::Incomparable { differences: diffs });
    }
    Ok(())
}

/// The gating pairs the gate's alpha is spread over (all of them, and the
/// quality parts among them), and which look of the sequential design
/// this comparison is.
struct Family<'a> {
    pairs: (usize, usize),
    look: &'a Look,
}

/// Every (cell, policy metric), each cell the policy gives SLOs (its
/// attainment), and each gating quality part.
fn gating_pairs(baseline: &RunArtifact, policy: &Policy, quality_pairs: usize) -> usize {
    let slo_cells = baseline
        .cells
        .iter()
        .filter(|c| slo_of(policy, c).is_some_and(|s| s.gating))
        .count();
    baseline.cells.len() * policy.metrics.len() + slo_cells + quality_pairs
}

/// The design and the levels of this look's pass and fail bounds.
fn design_choice(
    schedule: Schedule,
    resampling: Resampling,
    family: &Family,
    policy: &Policy,
    method: &Method,
) -> DesignChoice {
    let pairs = family.pairs.0;
    let (alpha_pass, alpha_fail) = family.look.levels(policy.gate.alpha, pairs);
    DesignChoice {
        oracle_levels: design::fixed_levels(policy.gate.alpha, pairs),
        schedule,
        resampling,
        method: *method,
        alpha_pass,
        alpha_fail,
        drift: DriftFloor {
            pass_sd_percent: policy.gate.drift_sd_percent,
            source: policy.gate.drift_source.clone(),
        },
    }
}

/// The cells compared, and the performance gates they make.
struct ComparedCells {
    cells: Vec<(String, CellComparison)>,
    performance: Gate,
    evidence: EvidenceGate,
    warnings: Vec<String>,
}

/// Every baseline cell against the candidate's of that name; no cells at all
/// fails the point gate and leaves the evidence inconclusive.
fn compare_cells(
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

/// Both sides' turnover runs in report order, their comparison and gates.
struct TurnoverGates<'a> {
    baseline: Vec<&'a TurnoverRun>,
    candidate: Vec<&'a TurnoverRun>,
    comparison: TurnoverComparison,
    strict: Gate,
    non_inferior: Gate,
}

impl<'a> TurnoverGates<'a> {
    /// `candidate` is the candidate's turnover as the reference texts left it.
    fn of(
        baseline: &'a [TurnoverRun],
        candidate: &'a [TurnoverRun],
        policy: &Policy,
    ) -> TurnoverGates<'a> {
        let b_runs = ordered_turnover(baseline);
        let c_runs = ordered_turnover(candidate);
        let b_counts = run_counts(Side::Baseline, &b_runs);
        let c_counts = run_counts(Side::Candidate, &c_runs);
        let comparison = turnover_rates::compare_turnover(
            &b_counts,
            &c_counts,
            policy.turnover.alpha,
            policy.turnover.confidence,
            Some(policy.turnover.margin),
        );
        let strict = gate::strict_gate(&c_counts);
        let non_inferior = gate::non_inferior_gate(&comparison);
        TurnoverGates {
            baseline: b_runs,
            candidate: c_runs,
            comparison,
            strict,
            non_inferior,
        }
    }
}

/// The qualification and whether it qualifies: performance by the policy's
/// rule, turnover by its mode, then the quality gate over both.
fn decide(
    policy: &Policy,
    cells: &ComparedCells,
    turnover: &TurnoverGates,
    quality: Option<GateOutcome>,
) -> (String, bool) {
    let (strict, non_inferior) = (turnover.strict.passed, turnover.non_inferior.passed);
    let mode = policy.turnover.gate;
    let (qual, qualified) = match policy.gate.decide {
        GateRule::Point => qualification(cells.performance.passed, strict, non_inferior, mode),
        GateRule::Evidence => {
            evidence_qualification(cells.evidence.outcome, strict, non_inferior, mode)
        }
    };
    gate::with_quality(qual, qualified, quality)
}

/// The cells' warnings, then the reference texts' notes; a run given twice
/// first, and a one-pass design's drift floor last.
fn warnings(
    mut warnings: Vec<String>,
    reference_notes: Vec<String>,
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    schedule: Schedule,
    policy: &Policy,
) -> Vec<String> {
    warnings.extend(reference_notes);
    if let Some(why) = same_run(baseline, candidate) {
        warnings.insert(
            0,
            format!(
                "baseline and candidate are the same run ({why}): every difference is zero by construction, so this report compares nothing"
            ),
        );
    }
    if schedule == Schedule::Single {
        warnings.push(format!(
            "one pass per side at different times: the drift between the runs is not in the data, so the evidence bounds include a drift floor of {}% per pass ({}); interleave the runtimes (`infergate qualify` with schedule = \"interleaved\") to decide small effects",
            policy.gate.drift_sd_percent, policy.gate.drift_source
        ));
    }
    warnings.extend(unmatched_policy_names(baseline, candidate, policy));
    warnings
}

/// Policy entries naming a cell or an embeddings workload the runs do not
/// both have: most likely a typo, which would leave the defaults judging
/// it. (Both runs have the same cells, or they were refused.)
fn unmatched_policy_names(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
) -> Vec<String> {
    let cells = policy
        .slo
        .iter()
        .filter_map(|s| s.cell.as_deref())
        .filter(|c| !baseline.cells.iter().any(|b| b.name == *c))
        .map(|c| {
            format!("policy: the SLO for cell `{c}` names no cell of these runs: it judged nothing")
        });
    let workloads = policy
        .quality
        .embedding_floors
        .iter()
        .filter(|f| {
            let ran = |a: &RunArtifact| a.embeddings.iter().any(|e| e.name == f.workload);
            !(ran(baseline) && ran(candidate))
        })
        .map(|f| {
            format!(
                "policy: the embedding floors for workload `{}` name no embeddings workload both runs have: they judged nothing",
                f.workload
            )
        });
    cells.chain(workloads).collect()
}

/// What the comparison decided, for the report.
struct Judged<'a> {
    cells: Vec<(String, CellComparison)>,
    performance: Gate,
    evidence: EvidenceGate,
    turnover: TurnoverGates<'a>,
    qualification: String,
    qualified: bool,
    quality_gate: Option<EvidenceGate>,
    warnings: Vec<String>,
    reference_comparison: Option<ReferenceComparison>,
    quality: Option<QualityComparison>,
}

/// The report of what was judged.
fn assemble(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    design: &DesignChoice,
    family: &Family,
    judged: Judged,
) -> Report {
    let Judged {
        cells,
        performance,
        evidence,
        turnover,
        qualification,
        qualified,
        quality_gate,
        warnings,
        reference_comparison,
        quality,
    } = judged;
    let mode = policy.turnover.gate;
    let any_slo = cells.iter().any(|(_, c)| c.slo.is_some());
    Report {
        schema: REPORT_SCHEMA.to_string(),
        baseline_image: image_ref(baseline),
        candidate_image: image_ref(candidate),
        cells: OrderedMap(cells),
        performance_gate_passed: performance.passed,
        strict_turnover_gate_passed: turnover.strict.passed,
        qualification,
        promotion: PENDING.to_string(),
        turnover: TurnoverRuns {
            baseline: turnover
                .baseline
                .iter()
                .map(|r| turnover_report(r))
                .collect(),
            candidate: turnover
                .candidate
                .iter()
                .map(|r| turnover_report(r))
                .collect(),
        },
        human_decision: PENDING.to_string(),
        performance_outcome: Some(evidence.outcome),
        turnover_gate: Some(TurnoverGateResult {
            mode,
            passed: turnover_ok(turnover.strict.passed, turnover.non_inferior.passed, mode),
        }),
        turnover_comparison: Some(turnover.comparison),
        statistics: Some(statistics(policy, design, family, any_slo)),
        gates: Some(Gates {
            performance,
            performance_evidence: Some(evidence),
            strict_turnover: turnover.strict,
            non_inferior_turnover: turnover.non_inferior,
            quality: quality_gate,
            qualified,
        }),
        policy: Some(policy.summary()),
        provenance: Some(ProvenancePair {
            baseline: baseline.provenance.clone(),
            candidate: candidate.provenance.clone(),
            inputs: Vec::new(),
        }),
        decision: Some(Decision::pending()),
        warnings,
        reference_comparison,
        quality,
    }
}

/// The report's `statistics` block: how every number in it was made.
fn statistics(
    policy: &Policy,
    design: &DesignChoice,
    family: &Family,
    any_slo: bool,
) -> Statistics {
    let bs = &policy.bootstrap;
    Statistics {
        percentile_method: stats::PERCENTILE_METHOD.to_string(),
        delta_percent: "(candidate - baseline) / baseline * 100, signed".to_string(),
        bootstrap: BootstrapSettings {
            iterations: bs.iterations,
            confidence: bs.confidence,
            seed: bs.seed,
        },
        bootstrap_statistic: format!(
            "percentile bootstrap CI of delta_percent of each metric's quantile; {}",
            design.resampling.describe()
        ),
        verdict_rule: VERDICT_RULE.to_string(),
        regression_flag_rule: "no_more_than_<T>_percent_regression is true when the point delta_percent in the worse direction (latency: as is; throughput: negated) is at most T; false when delta_percent is undefined".to_string(),
        turnover_test: "Fisher's exact test on failed/requests of each candidate turnover run, and of the candidate's runs pooled, against the baseline's runs of the same name pooled; p_candidate_worse is one-sided (candidate failure rate higher)".to_string(),
        turnover_interval: format!(
            "Clopper-Pearson exact binomial interval of failed/requests at confidence {}",
            policy.turnover.confidence
        ),
        gate_decides: Some(policy.gate.decide.as_str().to_string()),
        evidence_rule: Some(EVIDENCE_RULE.to_string()),
        family_wise: Some(family.look.family_wise(
            policy.gate.alpha,
            family.pairs,
            &design.method,
            (design.alpha_pass, design.alpha_fail),
        )),
        design: Some(design.method.design(design.schedule, design.resampling)),
        turnover_margin: Some(policy.turnover.margin),
        drift_floor: Some(DriftFloor {
            pass_sd_percent: policy.gate.drift_sd_percent,
            source: policy.gate.drift_source.clone(),
        }),
        samples_kept: Some(true),
        attainment_rule: any_slo.then(|| ATTAINMENT_RULE.to_string()),
    }
}
