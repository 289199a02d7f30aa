//! Turnover runs as proportions: failure rates with Clopper–Pearson
//! intervals, each candidate run (and the candidate's runs pooled) against the
//! baseline's pooled runs of the same name with Fisher's exact test, and the
//! two turnover gates. Pure functions of counts, shared by `compare`,
//! `verify` and the renderers.

use crate::stats;

use super::model::{CandidateTurnover, FailureRate, TurnoverComparison, TurnoverGroup};

/// Counts of one turnover run as the comparison needs them.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCounts {
    /// Report key (`candidate_turnover_repeat`).
    pub key: String,
    /// Workload name; runs of one name are repeats of one workload.
    pub name: String,
    pub requests: u64,
    pub failed: u64,
    /// None when the run did not count contamination (e.g. the seed).
    pub contaminated: Option<u64>,
}

/// Most requests a pool of turnover runs can hold: one workload's requests ×
/// repeats never exceed the distinct canary markers. Counts above it come
/// from a hand-made or corrupted report; Fisher's test, linear in the failure
/// counts, is not run on them (10^12 of each kept `verify` busy for minutes).
/// The main crate's `turnover::canary::MARKER_SPACE` (22 letters × 90 000
/// numbers); a test there keeps the two equal.
pub const MAX_EXACT_REQUESTS: u64 = 22 * 90_000;

fn rate(runs: &[&RunCounts], confidence: f64) -> FailureRate {
    // Saturating: a report's counts are untrusted, and a plain sum panics on overflow.
    let requests = runs.iter().fold(0u64, |a, r| a.saturating_add(r.requests));
    let failed = runs.iter().fold(0u64, |a, r| a.saturating_add(r.failed));
    // Contamination is known for the pool only when every run counted it.
    let contaminated = runs
        .iter()
        .try_fold(0u64, |a, r| r.contaminated.map(|c| a.saturating_add(c)));
    FailureRate {
        runs: runs.iter().map(|r| r.key.clone()).collect(),
        requests,
        failed,
        failure_rate: (requests > 0).then(|| failed as f64 / requests as f64),
        failure_rate_ci: (requests > 0)
            .then(|| stats::clopper_pearson(failed, requests, confidence)),
        contaminated,
    }
}

fn against(
    counts: FailureRate,
    baseline: Option<&FailureRate>,
    alpha: f64,
    margin: Option<f64>,
) -> CandidateTurnover {
    let comparable = baseline
        .filter(|b| b.requests > 0 && counts.requests > 0)
        .filter(|b| b.requests.max(counts.requests) <= MAX_EXACT_REQUESTS);
    let vs_baseline = comparable
        .map(|b| stats::fisher_exact(counts.failed, counts.requests, b.failed, b.requests));
    let clean = counts.contaminated.unwrap_or(0) == 0;
    // With a margin: non-inferiority proper (an upper bound below it).
    // Without (older reports): the absence-of-evidence rule they were made with.
    let upper = margin.and(comparable).map(|b| {
        stats::newcombe_difference(
            counts.failed,
            counts.requests,
            b.failed,
            b.requests,
            1.0 - 2.0 * alpha,
        )
        .1
    });
    let non_inferior = match margin {
        Some(m) => upper.map(|u| u < m && clean),
        None => vs_baseline.map(|t| t.p_candidate_worse >= alpha && clean),
    };
    CandidateTurnover {
        counts,
        vs_baseline,
        non_inferior,
        difference_upper_bound: upper,
    }
}

/// Group runs by name (first appearance order, baseline first) and compare.
pub fn compare_turnover(
    baseline: &[RunCounts],
    candidate: &[RunCounts],
    alpha: f64,
    confidence: f64,
    margin: Option<f64>,
) -> TurnoverComparison {
    let mut names: Vec<&str> = Vec::new();
    for r in baseline.iter().chain(candidate) {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    let groups = names
        .into_iter()
        .map(|name| {
            let b: Vec<&RunCounts> = baseline.iter().filter(|r| r.name == name).collect();
            let c: Vec<&RunCounts> = candidate.iter().filter(|r| r.name == name).collect();
            let base = (!b.is_empty()).then(|| rate(&b, confidence));
            TurnoverGroup {
                name: name.to_string(),
                candidate_runs: c
                    .iter()
                    .map(|r| against(rate(&[*r], confidence), base.as_ref(), alpha, margin))
                    .collect(),
                candidate_pooled: (!c.is_empty())
                    .then(|| against(rate(&c, confidence), base.as_ref(), alpha, margin)),
                baseline: base,
            }
        })
        .collect();
    TurnoverComparison {
        alpha,
        confidence,
        margin,
        groups,
    }
}
