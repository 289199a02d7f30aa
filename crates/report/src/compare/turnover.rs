//! Both sides' turnover runs in report order, their failure rates compared
//! and the strict and non-inferior turnover gates: not run when the
//! candidate's run skipped its turnover as asked.

use crate::artifact::{TurnoverRun, TurnoverSkip};
use crate::gate;
use crate::model::{Gate, Side, TurnoverComparison, TurnoverRunReport, turnover_key};
use crate::policy::Policy;
use crate::turnover_rates::{self, RunCounts};

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

pub(super) fn turnover_report(r: &TurnoverRun) -> TurnoverRunReport {
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

/// Both sides' turnover runs in report order, their comparison and gates.
pub(super) struct TurnoverGates<'a> {
    pub(super) baseline: Vec<&'a TurnoverRun>,
    pub(super) candidate: Vec<&'a TurnoverRun>,
    pub(super) comparison: TurnoverComparison,
    pub(super) strict: Gate,
    pub(super) non_inferior: Gate,
    /// The candidate's run skipped its turnover: both gates did not run.
    pub(super) not_run: Option<TurnoverSkip>,
}

impl<'a> TurnoverGates<'a> {
    /// `candidate` is the candidate's turnover as the reference texts left
    /// it; `not_run`, the candidate run's skip (a run that skipped holds no
    /// turnover runs: `consistency` refuses one that does).
    pub(super) fn of(
        baseline: &'a [TurnoverRun],
        candidate: &'a [TurnoverRun],
        not_run: Option<TurnoverSkip>,
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
        let (strict, non_inferior) = match not_run {
            Some(skip) => (
                Gate::not_run(gate::STRICT_RULE, skip.describe()),
                Gate::not_run(gate::NON_INFERIOR_RULE, skip.describe()),
            ),
            None => (
                gate::strict_gate(&c_counts),
                gate::non_inferior_gate(&comparison),
            ),
        };
        TurnoverGates {
            baseline: b_runs,
            candidate: c_runs,
            comparison,
            strict,
            non_inferior,
            not_run,
        }
    }
}
