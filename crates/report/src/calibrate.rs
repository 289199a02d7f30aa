//! `infergate calibrate`: several runs of ONE runtime with one suite in, its
//! noise out. For each cell and gating metric: the per-request spread, the
//! within-run standard error, the drift between runs (what a one-pass-per-side
//! comparison cannot see), the false-alarm rates the point rule and the
//! evidence gate have on every A/A pair of the runs, and the requests per
//! side an interleaved comparison needs to decide the policy's margins.
//! Pure: artifacts and a policy in, a calibration out.

use serde::{Deserialize, Serialize};

use crate::artifact::RunArtifact;
use crate::design::fixed_levels;
use crate::stats::evidence::{self as ev, Clustered, Resampling};
use crate::stats::special::normal_quantile;
use crate::stats::{self, GateOutcome};

use super::compare::{CompareError, compare};
use super::policy::{MetricSpec, Policy};

pub const CALIBRATION_SCHEMA: &str = "infergate-calibration/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub schema: String,
    pub created_at: String,
    pub model: String,
    pub runtime: Option<String>,
    pub suite: String,
    pub suite_sha256: Option<String>,
    /// The run artifacts read, in order.
    pub runs: Vec<String>,
    pub cells: Vec<CellNoise>,
    /// Every pair of runs compared as baseline vs candidate (i < j).
    pub aa_pairs: AaPairs,
    /// The minutes of requests a request-paired interleaved qualification
    /// of the whole suite needs at the policy's margins (every cell's
    /// [`CellNoise::minutes`], summed); `None` when a cell's could not be predicted.
    #[serde(default)]
    pub minutes: Option<f64>,
    /// The largest between-run drift (s.d., percent) over gating metrics:
    /// the value for a policy's `[gate] drift_sd_percent`.
    pub drift_sd_percent: f64,
    /// A policy fragment carrying the measured drift, dated.
    pub policy_snippet: String,
    pub method: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellNoise {
    pub cell: String,
    pub metrics: Vec<MetricNoise>,
    /// Seconds one request of this cell holds the runtime: the mean
    /// end-to-end latency of its successful requests over the runs, over its
    /// concurrency (closed loop). Warmups and the gaps between blocks are not
    /// in it (`docs/gate-calibration.md` measures them).
    #[serde(default)]
    pub seconds_per_request: Option<f64>,
    /// What a request-paired interleaved qualification (the default) of
    /// this cell needs to decide at the policy's margins: the dearest
    /// metric's [`MetricNoise::oracle_requests_per_side_paired`].
    #[serde(default)]
    pub requests_per_side: Option<usize>,
    /// The minutes those requests take, both runtimes in one timeline:
    /// 2 × requests per side × seconds per request.
    #[serde(default)]
    pub minutes: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricNoise {
    pub metric: String,
    pub margin_percent: f64,
    /// The metric's statistic in each run.
    pub per_run: Vec<f64>,
    /// Requests per run (the smallest).
    pub requests_per_run: usize,
    /// Per-request coefficient of variation within a run, percent (median over runs).
    pub per_request_cv_percent: f64,
    /// Standard error of one run's statistic from its own requests, percent
    /// (bootstrap; root mean square over runs).
    pub within_run_se_percent: f64,
    /// S.d. of the runs' statistics around their mean, percent.
    pub between_runs_sd_percent: f64,
    /// The part of that the within-run error does not explain:
    /// `√max(0, between² − within²)`. The drift a one-pass comparison cannot see.
    pub drift_sd_percent: f64,
    /// Requests per side an interleaved comparison (drift cancels) needs to
    /// pass an unchanged runtime with 80 % and fail a 2×margin regression
    /// with 95 %, at the policy's alpha over this suite's gating pairs.
    pub requests_per_side_interleaved: Option<usize>,
    /// Requests per side a paired comparison needs if it knew the spread:
    /// the known-variance oracle ([`ev::oracle_requests`], request k of one
    /// run against request k of another, the same prompt) for passing an
    /// unchanged runtime and for failing a 2×margin regression, the larger,
    /// at 80 % power; the median over every pair of runs. What a request-
    /// paired interleaved run (the default) starts from: drift between the
    /// runs and what the prompts vary by cancel in the pairs; the within-block
    /// correlation and the looks of an adaptive run come on top
    /// (`docs/gate-calibration.md` measures how much).
    #[serde(default)]
    pub oracle_requests_per_side_paired: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AaPairs {
    pub pairs: usize,
    /// Pairs whose seed-style point gate (`performance_gate_passed`) failed.
    pub point_rule_failed: usize,
    /// Evidence outcomes with the policy as given.
    pub evidence_pass: usize,
    pub evidence_fail: usize,
    pub evidence_inconclusive: usize,
}

fn pct_sd(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean != 0.0).then(|| 100.0 * var.sqrt() / mean.abs())
}

/// Bootstrap s.e. (percent) of one run's statistic: the s.d. of the deltas
/// of two independent resamples of the run, over √2.
fn within_se(values: &[f64], q: f64, policy: &Policy) -> Option<f64> {
    let iterations = policy.bootstrap.iterations.min(2000);
    let d = ev::bootstrap_deltas(
        Clustered::flat(values),
        Clustered::flat(values),
        q,
        Resampling::Independent,
        iterations,
        policy.bootstrap.seed,
    )?;
    let spread =
        stats::percentile_sorted(&d, 0.841_344_746)? - stats::percentile_sorted(&d, 0.158_655_254)?;
    Some(spread / 2.0 / std::f64::consts::SQRT_2)
}

/// Calibrate from `runs` (at least two, one runtime, one suite).
pub fn calibrate(
    runs: &[(String, RunArtifact)],
    policy: &Policy,
    created_at: &str,
) -> Result<Calibration, CompareError> {
    let first = check_runs(runs)?;
    let aa = aa_pairs(runs, policy)?;
    let pairs_in_family = first.cells.len() * policy.metrics.len();
    let levels = fixed_levels(policy.gate.alpha, pairs_in_family);
    let cells: Vec<CellNoise> = first
        .cells
        .iter()
        .map(|cell| {
            let metrics: Vec<MetricNoise> = policy
                .metrics
                .iter()
                .filter_map(|spec| metric_noise(runs, &cell.name, spec, policy, levels))
                .collect();
            cell_cost(&cell.name, metrics, seconds_per_request(runs, &cell.name))
        })
        .collect();
    let minutes = cells.iter().map(|c| c.minutes).sum::<Option<f64>>();
    let drift_max = cells
        .iter()
        .flat_map(|c| &c.metrics)
        .fold(0.0_f64, |max, m| max.max(m.drift_sd_percent));
    let p = &first.provenance;
    let drift_sd_percent = (drift_max * 100.0).ceil() / 100.0;
    Ok(Calibration {
        schema: CALIBRATION_SCHEMA.into(),
        created_at: created_at.to_string(),
        model: p.model.clone(),
        runtime: p.runtime.clone(),
        suite: p.suite.clone(),
        suite_sha256: p.suite_sha256.clone(),
        runs: runs.iter().map(|(n, _)| n.clone()).collect(),
        cells,
        minutes,
        aa_pairs: aa,
        drift_sd_percent,
        policy_snippet: format!(
            "[gate]\n# calibrated {created_at} from {} runs of {} (suite {}); infergate calibrate\ndrift_sd_percent = {drift_sd_percent}\n",
            runs.len(),
            p.runtime.as_deref().unwrap_or(&p.target),
            p.suite
        ),
        method: "per metric: the policy's quantile in each run; within-run s.e. by bootstrap of each run's requests; between-run s.d. of the runs' values; drift = sqrt(max(0, between^2 - within^2)); A/A pairs compared with the policy as given; requests per side for an interleaved comparison: max(n passing an unchanged runtime with 80%, n failing a 2x margin regression with 95%) at alpha over the suite's gating pairs; the paired known-variance oracle per metric: request k of one run against request k of another, robust SD of the log ratios, pi/2 for a median, the larger of passing an unchanged runtime and failing a 2x margin regression at 80% power, the median over pairs of runs; a cell's requests per side are its dearest metric's paired oracle, its minutes 2 x those x the seconds per request (mean e2e of its successful requests over its concurrency), the suite's minutes every cell's summed".into(),
    })
}

/// What a request-paired interleaved qualification of `cell` costs: its
/// dearest metric's paired oracle (unknown if any metric's is), and the
/// minutes both runtimes spend on those requests.
fn cell_cost(cell: &str, metrics: Vec<MetricNoise>, seconds: Option<f64>) -> CellNoise {
    let requests = metrics
        .iter()
        .map(|m| m.oracle_requests_per_side_paired)
        .collect::<Option<Vec<usize>>>()
        .and_then(|n| n.into_iter().max());
    let minutes = requests
        .zip(seconds)
        .map(|(n, s)| 2.0 * n as f64 * s / 60.0);
    CellNoise {
        cell: cell.to_string(),
        metrics,
        seconds_per_request: seconds,
        requests_per_side: requests,
        minutes,
    }
}

/// Seconds one request of `cell` holds the runtime: the mean end-to-end
/// latency of its successful requests over every run, over its concurrency.
/// From the latencies, not the runs' clocks: an interleaved run's request
/// offsets restart with every block.
fn seconds_per_request(runs: &[(String, RunArtifact)], cell: &str) -> Option<f64> {
    let (mut total_ms, mut n, mut concurrency) = (0.0, 0usize, 1usize);
    for c in runs
        .iter()
        .filter_map(|(_, a)| a.cells.iter().find(|c| c.name == cell))
    {
        concurrency = c.shape.concurrency.max(1);
        for e in c
            .request_rows
            .iter()
            .filter(|r| r.ok)
            .filter_map(|r| r.e2e_ms)
        {
            total_ms += e;
            n += 1;
        }
    }
    (n > 0).then(|| total_ms / n as f64 / concurrency as f64 / 1000.0)
}

/// The first run, when there are at least two and no run is given twice.
fn check_runs(runs: &[(String, RunArtifact)]) -> Result<&RunArtifact, CompareError> {
    let Some((_, first)) = runs.first() else {
        return Err(CompareError::Incomparable {
            differences: vec!["no runs given".into()],
        });
    };
    if runs.len() < 2 {
        return Err(CompareError::Incomparable {
            differences: vec!["calibration needs at least two runs of the runtime".into()],
        });
    }
    // A run given twice would be an A/A pair with no drift at all.
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            if let Some(why) = super::compare::same_run(&runs[i].1, &runs[j].1) {
                return Err(CompareError::Incomparable {
                    differences: vec![format!(
                        "{} and {} are the same run ({why}): calibration needs distinct runs, or its drift floor is 0",
                        runs[i].0, runs[j].0
                    )],
                });
            }
        }
    }
    Ok(first)
}

/// Every pair of runs compared as baseline vs candidate, and what the gates
/// said. Every pair must be comparable; compare() says why not.
fn aa_pairs(runs: &[(String, RunArtifact)], policy: &Policy) -> Result<AaPairs, CompareError> {
    let mut aa = AaPairs {
        pairs: 0,
        point_rule_failed: 0,
        evidence_pass: 0,
        evidence_fail: 0,
        evidence_inconclusive: 0,
    };
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            let r = compare(&runs[i].1, &runs[j].1, policy)?;
            aa.pairs += 1;
            aa.point_rule_failed += usize::from(!r.performance_gate_passed);
            match r.performance_outcome {
                Some(GateOutcome::Pass) => aa.evidence_pass += 1,
                Some(GateOutcome::Fail) => aa.evidence_fail += 1,
                _ => aa.evidence_inconclusive += 1,
            }
        }
    }
    Ok(aa)
}

/// One metric of one cell over the runs (None when fewer than two runs have
/// its samples); `(alpha_pass, alpha_fail)` are the levels over the suite's
/// gating pairs.
fn metric_noise(
    runs: &[(String, RunArtifact)],
    cell: &str,
    spec: &MetricSpec,
    policy: &Policy,
    (alpha_pass, alpha_fail): (f64, f64),
) -> Option<MetricNoise> {
    let per_run_samples: Vec<&[f64]> = runs
        .iter()
        .filter_map(|(_, a)| a.cells.iter().find(|c| c.name == cell))
        .filter_map(|c| c.samples.get(&spec.sample).map(Vec::as_slice))
        .filter(|v| !v.is_empty())
        .collect();
    if per_run_samples.len() < 2 {
        return None;
    }
    let per_run: Vec<f64> = per_run_samples
        .iter()
        .filter_map(|v| stats::percentile(v, spec.quantile))
        .collect();
    let n = per_run_samples.iter().map(|v| v.len()).min().unwrap_or(0);
    let mut cvs: Vec<f64> = per_run_samples.iter().filter_map(|v| pct_sd(v)).collect();
    cvs.sort_by(f64::total_cmp);
    let ses: Vec<f64> = per_run_samples
        .iter()
        .filter_map(|v| within_se(v, spec.quantile, policy))
        .collect();
    let within = (ses.iter().map(|s| s * s).sum::<f64>() / ses.len().max(1) as f64).sqrt();
    let between = pct_sd(&per_run).unwrap_or(0.0);
    let drift = (between.powi(2) - within.powi(2)).max(0.0).sqrt();
    let t = spec.threshold_percent;
    // Interleaved: the delta's s.e. is √2 × within at n per side.
    let se_delta = std::f64::consts::SQRT_2 * within;
    let (zp, zb) = (normal_quantile(1.0 - alpha_pass), normal_quantile(0.8));
    let for_pass =
        (t > 0.0).then(|| (n as f64 * (se_delta * (zp + zb) / t).powi(2)).ceil() as usize);
    let for_fail = ev::requests_to_detect(se_delta, 0.0, n as f64, t, 2.0 * t, alpha_fail, 0.95);
    Some(MetricNoise {
        metric: spec.name.clone(),
        margin_percent: t,
        per_run,
        requests_per_run: n,
        per_request_cv_percent: stats::median(&cvs).unwrap_or(f64::NAN),
        within_run_se_percent: within,
        between_runs_sd_percent: between,
        drift_sd_percent: drift,
        requests_per_side_interleaved: match (for_pass, for_fail) {
            (Some(a), Some(b)) => Some(a.max(b).max(2)),
            (a, b) => a.or(b),
        },
        oracle_requests_per_side_paired: paired_oracle(runs, cell, spec, (alpha_pass, alpha_fail)),
    })
}

/// [`MetricNoise::oracle_requests_per_side_paired`]: the median over every
/// pair of runs of the known-variance oracle for the larger of passing an
/// unchanged runtime and failing a 2×margin regression; requests paired by
/// their index over the runs' common length.
fn paired_oracle<'r>(
    runs: &'r [(String, RunArtifact)],
    cell: &str,
    spec: &MetricSpec,
    (alpha_pass, alpha_fail): (f64, f64),
) -> Option<usize> {
    let sides: Vec<(&[f64], Option<&[u32]>)> = runs
        .iter()
        .filter_map(|(_, a)| a.cells.iter().find(|c| c.name == cell))
        .filter_map(|c| {
            let v = c.samples.get(&spec.sample)?;
            let k = c.sample_clusters.get(&spec.sample).map(Vec::as_slice);
            Some((v.as_slice(), k.filter(|k| k.len() == v.len())))
        })
        .collect();
    let n = sides.iter().map(|(v, _)| v.len()).min()?;
    let prefix = |(v, k): (&'r [f64], Option<&'r [u32]>)| Clustered {
        values: &v[..n],
        clusters: k.map(|k| &k[..n]),
    };
    let t = spec.threshold_percent;
    let mut needs = Vec::new();
    for i in 0..sides.len() {
        for j in i + 1..sides.len() {
            let (b, c) = (prefix(sides[i]), prefix(sides[j]));
            let need =
                |worse, alpha| ev::oracle_requests(b, c, true, spec.direction, t, worse, alpha);
            if let (Some(pass), Some(fail)) = (need(0.0, alpha_pass), need(2.0 * t, alpha_fail)) {
                needs.push(pass.max(fail) as f64);
            }
        }
    }
    stats::median(&needs).map(|m| m.ceil() as usize)
}

/// `base` with the calibration's `[gate]` lines: appended as a table, or
/// inserted under an existing `[gate]` header. `None` when the policy sets
/// `drift_sd_percent` itself already.
pub fn policy_with_drift(base: &str, snippet: &str) -> Option<String> {
    let sets_it = base
        .lines()
        .any(|l| l.trim_start().starts_with("drift_sd_percent"));
    if sets_it {
        return None;
    }
    let Some(at) = base.find("\n[gate]\n") else {
        return Some(format!("{}\n\n{snippet}", base.trim_end()));
    };
    let body = snippet.strip_prefix("[gate]\n").unwrap_or(snippet);
    let split = at + "\n[gate]\n".len();
    Some(format!("{}{body}{}", &base[..split], &base[split..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::{CellShape, Provenance};
    use crate::fixtures;
    use crate::stats::Xoshiro256;
    use std::collections::BTreeMap;

    fn run(shift: f64, seed: u64) -> RunArtifact {
        let mut r = Xoshiro256::new(seed);
        let mut samples = BTreeMap::new();
        for (k, base) in [
            ("ttft_ms", 1000.0),
            ("e2e_ms", 3000.0),
            ("decode_tok_s", 200.0),
        ] {
            let v: Vec<f64> = (0..40)
                .map(|_| base * (1.0 + shift) * (1.0 + 0.1 * (2.0 * r.next_f64() - 1.0)))
                .collect();
            samples.insert(k.to_string(), v);
        }
        let shape = CellShape {
            max_tokens: 8,
            warmup: 0,
            seed: None,
            ..fixtures::shape(100, 1, 40)
        };
        let provenance = Provenance {
            model: "m".into(),
            suite: "s".into(),
            ..Default::default()
        };
        let cell = fixtures::cell("c", shape, samples, Some(100.0));
        fixtures::artifact(provenance, vec![cell], vec![])
    }

    #[test]
    fn drift_between_runs_is_measured_beyond_the_within_run_error() {
        let mut p = Policy::default();
        p.bootstrap.iterations = 500;
        // Run-level shifts of ±8 %: far more than 40 requests' own error (~1 %).
        let runs: Vec<(String, RunArtifact)> = [0.0, 0.08, -0.06, 0.03, -0.08]
            .iter()
            .enumerate()
            .map(|(i, &s)| (format!("r{i}"), run(s, i as u64 + 1)))
            .collect();
        let c = calibrate(&runs, &p, "2026-12-01T00:00:00Z").unwrap();
        let m = &c.cells[0].metrics[0];
        assert_eq!(m.metric, "ttft_p50_ms");
        assert!((5.0..9.0).contains(&m.drift_sd_percent), "{m:?}");
        assert!(m.within_run_se_percent < 2.0, "{m:?}");
        assert_eq!(c.aa_pairs.pairs, 10);
        // Point deltas of ±8 % drift fail the 5 % rule in most pairs; the
        // evidence gate with its drift floor does not call them failures.
        assert!(c.aa_pairs.point_rule_failed >= 5, "{:?}", c.aa_pairs);
        assert!(c.aa_pairs.evidence_fail <= 1, "{:?}", c.aa_pairs);
        assert!(c.policy_snippet.contains("drift_sd_percent ="));
        assert!(m.requests_per_side_interleaved.is_some_and(|n| n >= 2));
        // Unchanged runs: what is left beyond the requests' own error is
        // sampling noise of a few runs, far below the real drift above.
        let same: Vec<(String, RunArtifact)> = (0..8)
            .map(|i| (format!("s{i}"), run(0.0, 10 + i)))
            .collect();
        let c = calibrate(&same, &p, "t").unwrap();
        assert!(
            c.cells[0].metrics[0].drift_sd_percent < 2.5,
            "{:?}",
            c.cells[0]
        );
        assert!(calibrate(&same[..1], &p, "t").is_err());
    }

    #[test]
    fn a_cell_costs_its_dearest_metric_at_the_pace_its_requests_ran() {
        let mut p = Policy::default();
        p.bootstrap.iterations = 300;
        // 3 s per request, two in flight: 1.5 s of the runtime each.
        let with_rows = |shift, seed| {
            let mut a = run(shift, seed);
            let c = &mut a.cells[0];
            c.shape.concurrency = 2;
            c.request_rows = (0..40)
                .map(|i| crate::artifact::RequestRow {
                    ok: i != 0,
                    send_offset_ms: 0.0,
                    queue_ms: 0.0,
                    ttft_ms: None,
                    tpot_ms: None,
                    // A failed request's latency is not the pace.
                    e2e_ms: Some(if i == 0 { 60_000.0 } else { 3000.0 }),
                    completion_tokens: None,
                    cluster: 0,
                })
                .collect();
            a
        };
        let runs: Vec<(String, RunArtifact)> = (0..4)
            .map(|i| (format!("r{i}"), with_rows(0.0, 20 + i)))
            .collect();
        let c = calibrate(&runs, &p, "t").unwrap();
        let cell = &c.cells[0];
        assert!(
            (cell.seconds_per_request.unwrap() - 1.5).abs() < 1e-9,
            "{cell:?}"
        );
        let dearest = cell
            .metrics
            .iter()
            .filter_map(|m| m.oracle_requests_per_side_paired)
            .max()
            .unwrap();
        assert_eq!(cell.requests_per_side, Some(dearest));
        let minutes = 2.0 * dearest as f64 * 1.5 / 60.0;
        assert!((cell.minutes.unwrap() - minutes).abs() < 1e-9);
        assert_eq!(c.minutes, cell.minutes);
        // Without request rows there is no pace, so no minutes.
        let bare: Vec<(String, RunArtifact)> = (0..3)
            .map(|i| (format!("b{i}"), run(0.0, 40 + i)))
            .collect();
        let c = calibrate(&bare, &p, "t").unwrap();
        assert_eq!(c.cells[0].seconds_per_request, None);
        assert_eq!(c.minutes, None);
        assert!(c.cells[0].requests_per_side.is_some());
    }

    #[test]
    fn the_paired_need_cancels_what_the_prompts_vary_by() {
        let mut p = Policy::default();
        p.bootstrap.iterations = 200;
        // Request k costs f_k (lognormal, σ 0.5: prompts differ a lot) in
        // every run, times its own noise (lognormal, σ 0.05) and the run's
        // drift. Paired by k, only the noise is left: √2 × 0.05 per ratio.
        let n = 400;
        let mut r = Xoshiro256::new(7);
        let mut normal = move || {
            // Box-Muller.
            let (u, v) = (r.next_f64().max(1e-12), r.next_f64());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let prompt: Vec<f64> = (0..n).map(|_| (0.5 * normal()).exp()).collect();
        let runs: Vec<(String, RunArtifact)> = (0..4)
            .map(|i| {
                let mut a = run(0.0, 60 + i);
                let cell = &mut a.cells[0];
                (cell.requests, cell.succeeded, cell.shape.requests) = (n, n, n);
                let drift = 1.0 + 0.03 * i as f64;
                for (key, base) in [
                    ("ttft_ms", 1000.0),
                    ("e2e_ms", 3000.0),
                    ("decode_tok_s", 200.0),
                ] {
                    let v: Vec<f64> = prompt
                        .iter()
                        .map(|f| base * drift * f * (0.05 * normal()).exp())
                        .collect();
                    a.cells[0].samples.insert(key.into(), v);
                }
                (format!("r{i}"), a)
            })
            .collect();
        let c = calibrate(&runs, &p, "t").unwrap();
        let m = &c.cells[0].metrics[0];
        // The closed form at the levels calibrate uses (3 pairs, one look).
        let (ap, af) = fixed_levels(p.gate.alpha, 3);
        let sd = std::f64::consts::SQRT_2 * 0.05;
        let need = |alpha: f64, delta: f64| {
            let z = normal_quantile(1.0 - alpha) + normal_quantile(0.8);
            std::f64::consts::FRAC_PI_2 * (sd * z / delta).powi(2)
        };
        let t = m.margin_percent / 100.0;
        let want = need(ap, (1.0 + t).ln()).max(need(af, ((1.0 + 2.0 * t) / (1.0 + t)).ln()));
        let got = m.oracle_requests_per_side_paired.unwrap() as f64;
        assert!(
            (got / want - 1.0).abs() < 0.25,
            "paired {got}, closed form {want:.1}"
        );
        // Unpaired, the prompts' spread stays in: ten times the requests and more.
        let unpaired = m.requests_per_side_interleaved.unwrap() as f64;
        assert!(unpaired > 10.0 * got, "unpaired {unpaired}, paired {got}");
    }

    #[test]
    fn drift_goes_under_the_gate_header_or_in_a_new_table() {
        let snip = "[gate]\n# calibrated\ndrift_sd_percent = 3.2\n";
        let under = policy_with_drift("a = 1\n[gate]\nalpha = 0.05\n", snip).unwrap();
        assert_eq!(
            under,
            "a = 1\n[gate]\n# calibrated\ndrift_sd_percent = 3.2\nalpha = 0.05\n"
        );
        let appended = policy_with_drift("a = 1\n", snip).unwrap();
        assert!(appended.ends_with("\n\n[gate]\n# calibrated\ndrift_sd_percent = 3.2\n"));
        assert!(policy_with_drift("[gate]\ndrift_sd_percent = 1\n", snip).is_none());
        // The default policy takes it and still parses.
        let text = policy_with_drift(include_str!("../../../policies/default.toml"), snip).unwrap();
        let p = Policy::from_toml_str(&text, "t").unwrap();
        assert_eq!(p.gate.drift_sd_percent, 3.2);
    }

    #[test]
    fn one_run_given_twice_is_refused_and_a_self_compare_says_so() {
        let p = Policy::default();
        let twice = vec![
            ("a".to_string(), run(0.0, 1)),
            ("b".to_string(), run(0.0, 1)),
        ];
        let e = calibrate(&twice, &p, "t").unwrap_err().to_string();
        assert!(e.contains("a and b are the same run"), "{e}");
        // Different samples, one journal: the same run.
        let mut other = run(0.05, 2);
        let journal = crate::artifact::JournalDigest {
            file: "journal.jsonl".into(),
            sha256: "ab".repeat(32),
            records: 40,
        };
        other.provenance.journal = Some(journal.clone());
        let mut first = run(0.0, 1);
        first.provenance.journal = Some(journal);
        let e = calibrate(
            &[
                ("x".into(), first.clone()),
                ("y".into(), other),
                ("z".into(), run(0.0, 3)),
            ],
            &p,
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("x and y are the same run") && e.contains("journal"),
            "{e}"
        );
        let r = compare(&first, &first, &p).unwrap();
        assert!(r.warnings[0].contains("the same run"), "{:?}", r.warnings);
        let r = compare(&first, &run(0.0, 3), &p).unwrap();
        assert!(!r.warnings.iter().any(|w| w.contains("the same run")));
    }
}
