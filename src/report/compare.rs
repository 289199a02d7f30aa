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
//! - `strict_turnover_gate_passed`: see [`super::turnover::STRICT_RULE`].
//! - `qualification`: see [`qualification`].
//! - `median_prompt_tokens`: the baseline run's median prompt tokens (the
//!   workload as measured on the runtime in service), the candidate's when the
//!   baseline has none; both sides are kept as added fields.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::artifact::{CellResult, CellShape, RUN_SCHEMA, RunArtifact, TurnoverRun};
use crate::stats::{self, Verdict};

use super::model::{
    BootstrapSettings, CellComparison, Decision, Gate, GatePart, Gates, MetricComparison,
    OrderedMap, PENDING, ProvenancePair, REPORT_SCHEMA, Report, SamplePair, Side, Statistics,
    TurnoverGateResult, TurnoverRunReport, TurnoverRuns, turnover_key,
};
use super::policy::{MetricSpec, Policy, TurnoverGateMode};
use super::turnover::{self, RunCounts};

pub const QUAL_PASS: &str = "pass";
/// The seed's wording: performance passed, strict turnover failed.
pub const QUAL_NOT_BLANKET: &str = "not a blanket deterministic pass";
pub const QUAL_PASS_NON_INFERIOR: &str =
    "pass with non-inferior turnover; not a blanket deterministic pass";
pub const QUAL_FAIL_TURNOVER: &str = "fail: turnover worse than baseline";
pub const QUAL_FAIL_PERFORMANCE: &str = "fail: performance gate";
pub const QUAL_FAIL_BOTH: &str = "fail: performance and turnover gates";

pub const PERFORMANCE_RULE: &str = "at least one cell; every cell performance-eligible on both sides; every gating metric present on both sides with its no_more_than_<T>_percent_regression flag true";

pub const VERDICT_RULE: &str = "map the CI of delta_percent to the change in the worse direction [w_lo, w_hi] (latency: as is; throughput: negated) and take the first that holds, T the threshold: regressed if w_lo > T; improved if w_hi < 0; equivalent if -T <= w_lo and w_hi <= T; inconclusive otherwise";

/// The qualification text, from the gates and the policy's turnover mode:
///
/// | performance | strict | non-inferior | mode         | qualification |
/// |-------------|--------|--------------|--------------|---------------|
/// | pass        | pass   | –            | any          | `pass` |
/// | pass        | fail   | –            | strict       | `not a blanket deterministic pass` (the seed's) |
/// | pass        | fail   | pass         | non_inferior | `pass with non-inferior turnover; not a blanket deterministic pass` |
/// | pass        | fail   | fail         | non_inferior | `fail: turnover worse than baseline` |
/// | fail        | the mode's turnover gate passes      || any | `fail: performance gate` |
/// | fail        | the mode's turnover gate fails       || any | `fail: performance and turnover gates` |
///
/// Only `pass` and the non-inferior pass count as qualified (`gates.qualified`).
pub fn qualification(
    performance: bool,
    strict: bool,
    non_inferior: bool,
    mode: TurnoverGateMode,
) -> (&'static str, bool) {
    let turnover_ok = match mode {
        TurnoverGateMode::Strict => strict,
        TurnoverGateMode::NonInferior => non_inferior || strict,
    };
    match (performance, strict, mode) {
        (true, true, _) => (QUAL_PASS, true),
        (true, false, TurnoverGateMode::Strict) => (QUAL_NOT_BLANKET, false),
        (true, false, TurnoverGateMode::NonInferior) if turnover_ok => {
            (QUAL_PASS_NON_INFERIOR, true)
        }
        (true, false, TurnoverGateMode::NonInferior) => (QUAL_FAIL_TURNOVER, false),
        (false, _, _) if turnover_ok => (QUAL_FAIL_PERFORMANCE, false),
        (false, _, _) => (QUAL_FAIL_BOTH, false),
    }
}

#[derive(Debug, Error)]
pub enum CompareError {
    #[error("{side} run artifact has schema {found:?}, expected {RUN_SCHEMA:?}")]
    Schema { side: Side, found: String },
    #[error("baseline and candidate runs are not comparable:\n  - {}", .differences.join("\n  - "))]
    Incomparable { differences: Vec<String> },
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
        seed
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

/// One metric of one cell (both sides non-empty and finite), or the failed
/// gate part saying why it could not be computed.
fn compare_metric(
    spec: &MetricSpec,
    cell: &str,
    b: &[f64],
    c: &[f64],
    policy: &Policy,
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
    // The bootstrap is of medians only; other quantiles get no CI.
    let ci = (spec.quantile == 0.5)
        .then(|| stats::bootstrap_delta_ci(b, c, &policy.bootstrap))
        .flatten();
    let verdict = ci.map(|ci| stats::verdict(spec.direction, &ci, spec.threshold_percent));
    let requests_to_resolve = match (ci, verdict) {
        (Some(ci), Some(Verdict::Inconclusive)) => {
            stats::requests_to_resolve(b, c, &ci, spec.threshold_percent)
        }
        _ => None,
    };
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
    };
    let part = GatePart {
        subject,
        passed: within,
        reason,
    };
    Ok((m, part))
}

pub fn compare(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
) -> Result<Report, CompareError> {
    for (side, a) in [(Side::Baseline, baseline), (Side::Candidate, candidate)] {
        if a.schema != RUN_SCHEMA {
            return Err(CompareError::Schema {
                side,
                found: a.schema.clone(),
            });
        }
    }
    let diffs = differences(baseline, candidate);
    if !diffs.is_empty() {
        return Err(CompareError::Incomparable { differences: diffs });
    }

    let mut cells = Vec::new();
    let mut perf_parts = Vec::new();
    let mut warnings = Vec::new();
    for bc in &baseline.cells {
        // differences() guarantees the candidate has this cell.
        let Some(cc) = candidate.cells.iter().find(|c| c.name == bc.name) else {
            continue;
        };
        let name = &bc.name;
        for (side, cell) in [(Side::Baseline, bc), (Side::Candidate, cc)] {
            perf_parts.push(GatePart {
                subject: format!("cells.{name}.{side}_performance_eligible"),
                passed: cell.performance_eligible,
                reason: if cell.performance_eligible {
                    "eligible".to_string()
                } else if cell.ineligible_reasons.is_empty() {
                    format!("{side} cell is not performance-eligible")
                } else {
                    format!(
                        "{side} cell is not performance-eligible: {}",
                        cell.ineligible_reasons.join("; ")
                    )
                },
            });
            if cell.tokens_estimated {
                warnings.push(format!(
                    "cell `{name}`: {side} completion tokens were counted client-side (server sent no usage)"
                ));
            }
        }

        let mut metrics = Vec::new();
        let mut sample_pairs: Vec<(String, SamplePair)> = Vec::new();
        for spec in &policy.metrics {
            let b = samples(Side::Baseline, bc, &spec.sample)?;
            let c = samples(Side::Candidate, cc, &spec.sample)?;
            let (Some(b), Some(c)) = (b, c) else {
                let missing: Vec<&str> = [(b.is_none(), "baseline"), (c.is_none(), "candidate")]
                    .into_iter()
                    .filter_map(|(m, s)| m.then_some(s))
                    .collect();
                perf_parts.push(GatePart {
                    subject: format!("cells.{name}.metrics.{}", spec.name),
                    passed: false,
                    reason: format!(
                        "no `{}` samples in the {} run",
                        spec.sample,
                        missing.join(" and ")
                    ),
                });
                continue;
            };
            let (m, part) = match compare_metric(spec, name, b, c, policy) {
                Ok(x) => x,
                Err(part) => {
                    perf_parts.push(part);
                    continue;
                }
            };
            metrics.push((spec.name.clone(), m));
            perf_parts.push(part);
            if !sample_pairs.iter().any(|(k, _)| *k == spec.sample) {
                sample_pairs.push((
                    spec.sample.clone(),
                    SamplePair {
                        baseline: b.to_vec(),
                        candidate: c.to_vec(),
                    },
                ));
            }
        }

        if let (Some(b), Some(c)) = (bc.median_prompt_tokens, cc.median_prompt_tokens) {
            let tol = bc.shape.tolerance_percent;
            if stats::delta_percent(b, c).is_some_and(|d| d.abs() > tol) {
                warnings.push(format!(
                    "cell `{name}`: median prompt tokens differ by more than the cell's {tol}% tolerance (baseline {b}, candidate {c})"
                ));
            }
        }
        cells.push((
            name.clone(),
            CellComparison {
                baseline_requests: bc.requests,
                candidate_requests: cc.requests,
                baseline_performance_eligible: bc.performance_eligible,
                candidate_performance_eligible: cc.performance_eligible,
                median_prompt_tokens: bc.median_prompt_tokens.or(cc.median_prompt_tokens),
                metrics: OrderedMap(metrics),
                baseline_median_prompt_tokens: bc.median_prompt_tokens,
                candidate_median_prompt_tokens: cc.median_prompt_tokens,
                baseline_ineligible_reasons: bc.ineligible_reasons.clone(),
                candidate_ineligible_reasons: cc.ineligible_reasons.clone(),
                samples: Some(OrderedMap(sample_pairs)),
            },
        ));
    }
    if cells.is_empty() {
        perf_parts.push(GatePart {
            subject: "cells".into(),
            passed: false,
            reason: "no cells: nothing was measured".into(),
        });
    }
    let performance = Gate::new(PERFORMANCE_RULE, perf_parts);

    let b_runs = ordered_turnover(&baseline.turnover);
    let c_runs = ordered_turnover(&candidate.turnover);
    let b_counts = run_counts(Side::Baseline, &b_runs);
    let c_counts = run_counts(Side::Candidate, &c_runs);
    let tcmp = turnover::compare_turnover(
        &b_counts,
        &c_counts,
        policy.turnover.alpha,
        policy.turnover.confidence,
    );
    let strict = turnover::strict_gate(&c_counts);
    let non_inferior = turnover::non_inferior_gate(&tcmp);
    let mode = policy.turnover.gate;
    let (qual, qualified) =
        qualification(performance.passed, strict.passed, non_inferior.passed, mode);
    let turnover_gate_passed = match mode {
        TurnoverGateMode::Strict => strict.passed,
        TurnoverGateMode::NonInferior => non_inferior.passed || strict.passed,
    };

    let bs = &policy.bootstrap;
    Ok(Report {
        schema: REPORT_SCHEMA.to_string(),
        baseline_image: image_ref(baseline),
        candidate_image: image_ref(candidate),
        cells: OrderedMap(cells),
        performance_gate_passed: performance.passed,
        strict_turnover_gate_passed: strict.passed,
        qualification: qual.to_string(),
        promotion: PENDING.to_string(),
        turnover: TurnoverRuns {
            baseline: b_runs.iter().map(|r| turnover_report(r)).collect(),
            candidate: c_runs.iter().map(|r| turnover_report(r)).collect(),
        },
        human_decision: PENDING.to_string(),
        performance_outcome: None,
        turnover_gate: Some(TurnoverGateResult {
            mode,
            passed: turnover_gate_passed,
        }),
        turnover_comparison: Some(tcmp),
        statistics: Some(Statistics {
            percentile_method: stats::PERCENTILE_METHOD.to_string(),
            delta_percent: "(candidate - baseline) / baseline * 100, signed".to_string(),
            bootstrap: BootstrapSettings {
                iterations: bs.iterations,
                confidence: bs.confidence,
                seed: bs.seed,
            },
            bootstrap_statistic: "percentile bootstrap CI of delta_percent of the medians, baseline and candidate requests resampled independently; p50 metrics only".to_string(),
            verdict_rule: VERDICT_RULE.to_string(),
            regression_flag_rule: "no_more_than_<T>_percent_regression is true when the point delta_percent in the worse direction (latency: as is; throughput: negated) is at most T; false when delta_percent is undefined".to_string(),
            turnover_test: "Fisher's exact test on failed/requests of each candidate turnover run, and of the candidate's runs pooled, against the baseline's runs of the same name pooled; p_candidate_worse is one-sided (candidate failure rate higher)".to_string(),
            turnover_interval: format!(
                "Clopper-Pearson exact binomial interval of failed/requests at confidence {}",
                policy.turnover.confidence
            ),
        }),
        gates: Some(Gates {
            performance,
            strict_turnover: strict,
            non_inferior_turnover: non_inferior,
            qualified,
        }),
        policy: Some(policy.summary()),
        provenance: Some(ProvenancePair {
            baseline: baseline.provenance.clone(),
            candidate: candidate.provenance.clone(),
        }),
        decision: Some(Decision::pending()),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use TurnoverGateMode::{NonInferior, Strict};

    #[test]
    fn qualification_table() {
        let q = |p, s, n, m| qualification(p, s, n, m);
        assert_eq!(q(true, true, true, Strict), (QUAL_PASS, true));
        assert_eq!(q(true, false, true, Strict), (QUAL_NOT_BLANKET, false));
        assert_eq!(
            q(true, false, true, NonInferior),
            (QUAL_PASS_NON_INFERIOR, true)
        );
        assert_eq!(
            q(true, false, false, NonInferior),
            (QUAL_FAIL_TURNOVER, false)
        );
        assert_eq!(q(false, true, true, Strict), (QUAL_FAIL_PERFORMANCE, false));
        assert_eq!(q(false, false, true, Strict), (QUAL_FAIL_BOTH, false));
        assert_eq!(
            q(false, false, true, NonInferior),
            (QUAL_FAIL_PERFORMANCE, false)
        );
        assert_eq!(q(false, false, false, NonInferior), (QUAL_FAIL_BOTH, false));
    }
}
