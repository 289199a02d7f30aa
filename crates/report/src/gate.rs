//! Every gate rule in one place: the turnover gates (strict, non-inferior),
//! the evidence gate over the (cell, metric) pairs and an ineligible cell's
//! part of it, the qualification text
//! and whether it qualifies, the one-line summary `decide` records, and the
//! process exit code. `compare` builds gates with these, `verify` recomputes
//! them with these, `qualify` and `decide` read them through these; the
//! per-metric verdict of an interval is math and stays in `stats`.

use crate::artifact::{CellResult, TurnoverSkip, is_unmet_expectation};
use crate::stats::GateOutcome;
use crate::stats::evidence as ev;

use super::model::{EvidenceGate, EvidencePart, Gate, GatePart, Report, TurnoverComparison};
use super::policy::TurnoverGateMode;
use super::turnover_rates::{MAX_EXACT_REQUESTS, RunCounts};

pub const QUAL_PASS: &str = "pass";
/// The seed's wording: performance passed, strict turnover failed.
pub const QUAL_NOT_BLANKET: &str = "not a blanket deterministic pass";
pub const QUAL_PASS_NON_INFERIOR: &str =
    "pass with non-inferior turnover; not a blanket deterministic pass";
pub const QUAL_FAIL_TURNOVER: &str = "fail: turnover worse than baseline";
pub const QUAL_FAIL_PERFORMANCE: &str = "fail: performance gate";
pub const QUAL_FAIL_BOTH: &str = "fail: performance and turnover gates";
pub const QUAL_INCONCLUSIVE: &str =
    "inconclusive: the performance gate could not be decided from this data";
pub const QUAL_FAIL_TURNOVER_INCONCLUSIVE: &str = "fail: turnover gate; performance inconclusive";
pub const QUAL_FAIL_QUALITY: &str = "fail: quality gate";
pub const QUAL_INCONCLUSIVE_QUALITY: &str =
    "inconclusive: the quality gate could not be decided from this data";
/// Every gate that ran passed, and the turnover gates did not run: the
/// start of the qualification [`with_turnover_not_run`] writes.
pub const QUAL_PASS_GATES_RAN: &str = "pass on every gate that ran";
/// What follows a qualification whose turnover gates did not run, before
/// who skipped them and a closing parenthesis.
pub const TURNOVER_NOT_RUN: &str = "; turnover not run (";
pub const EVIDENCE_RULE: &str = "per gating (cell, metric): fail if the one-sided lower confidence bound of the worse-direction change exceeds the margin T; pass if the one-sided upper bound is at most T; inconclusive otherwise. The gate fails if any pair fails, passes if every pair passes, else is inconclusive. Bounds are bootstrap percentiles of the design's resampling, widened for few resampling units (sqrt(B/(B-1)) and t_{B-1}/z) and, where the design cannot see drift between runs, by the drift floor in quadrature (sqrt(2) x pass s.d.)";

/// The qualification under the evidence rule, from the performance outcome
/// and the turnover gate the policy counts:
///
/// | performance | turnover | qualification |
/// |---|---|---|
/// | pass | – | as [`qualification`] with performance passed |
/// | fail | – | as [`qualification`] with performance failed |
/// | inconclusive | passes | `inconclusive: …` (not qualified) |
/// | inconclusive | fails | `fail: turnover gate; performance inconclusive` |
pub fn evidence_qualification(
    performance: GateOutcome,
    strict: bool,
    non_inferior: bool,
    mode: TurnoverGateMode,
) -> (&'static str, bool) {
    match performance {
        GateOutcome::Pass => qualification(true, strict, non_inferior, mode),
        GateOutcome::Fail => qualification(false, strict, non_inferior, mode),
        GateOutcome::Inconclusive => {
            if turnover_ok(strict, non_inferior, mode) {
                (QUAL_INCONCLUSIVE, false)
            } else {
                (QUAL_FAIL_TURNOVER_INCONCLUSIVE, false)
            }
        }
    }
}

pub const PERFORMANCE_RULE: &str = "at least one cell; every cell performance-eligible on both sides; every gating metric present on both sides with its no_more_than_<T>_percent_regression flag true";

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
    let turnover_ok = turnover_ok(strict, non_inferior, mode);
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

/// The turnover gate the policy counts: strict, or non-inferior (which a
/// strict pass implies).
pub fn turnover_ok(strict: bool, non_inferior: bool, mode: TurnoverGateMode) -> bool {
    match mode {
        TurnoverGateMode::Strict => strict,
        TurnoverGateMode::NonInferior => non_inferior || strict,
    }
}

/// The qualification with the quality gate's outcome folded in (None: no
/// quality gate, the qualification as it is). A failed quality gate fails
/// a qualification that would have passed or been undecided, and is named
/// beside other failures; an undecided one holds back a pass.
pub fn with_quality(qual: &str, qualified: bool, quality: Option<GateOutcome>) -> (String, bool) {
    let undecided_or_passing = qualified || qual == QUAL_INCONCLUSIVE || qual == QUAL_NOT_BLANKET;
    match quality {
        None | Some(GateOutcome::Pass) => (qual.to_string(), qualified),
        Some(GateOutcome::Fail) if undecided_or_passing => (QUAL_FAIL_QUALITY.to_string(), false),
        Some(GateOutcome::Fail) => (format!("{qual}; quality gate failed"), false),
        Some(GateOutcome::Inconclusive) if qualified => {
            (QUAL_INCONCLUSIVE_QUALITY.to_string(), false)
        }
        Some(GateOutcome::Inconclusive) => (qual.to_string(), false),
    }
}

/// The qualification when the candidate's turnover was skipped (`skip`
/// Some), from the qualification of the gates that ran (turnover counted
/// as passed): it never qualifies, since exactness under churn was not
/// checked, and it says so after the gates' own verdict. A pass becomes
/// `pass on every gate that ran; turnover not run (skipped by the plan)`
/// (exit [`EXIT_GATES_NOT_RUN`]); a fail or an undecided verdict keeps
/// its words (and exit code) with the same note after it. None: as it is.
pub fn with_turnover_not_run(
    qual: String,
    qualified: bool,
    skip: Option<TurnoverSkip>,
) -> (String, bool) {
    let Some(skip) = skip else {
        return (qual, qualified);
    };
    let gates = if qualified {
        QUAL_PASS_GATES_RAN
    } else {
        &qual
    };
    (
        format!("{gates}{TURNOVER_NOT_RUN}{})", skip.describe()),
        false,
    )
}

/// The qualification before [`with_turnover_not_run`]'s note.
fn gates_verdict(qualification: &str) -> &str {
    qualification
        .split_once(TURNOVER_NOT_RUN)
        .map_or(qualification, |(q, _)| q)
}

pub(crate) fn evidence_gate(parts: Vec<EvidencePart>) -> EvidenceGate {
    gate_of_parts(EVIDENCE_RULE, parts)
}

/// An ineligible cell's part: inconclusive, or a fail when candidate
/// requests failed where the baseline's did not.
pub(crate) fn ineligible_part(subject: &str, bc: &CellResult, cc: &CellResult) -> EvidencePart {
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

/// An evidence gate over `parts` under `rule`: fails if any part fails,
/// passes if every part passes; undecided, it names the most requests any
/// undecided part needs (unknown if one cannot be decided by more).
pub(crate) fn gate_of_parts(rule: &str, parts: Vec<EvidencePart>) -> EvidenceGate {
    let outcome = ev::combine(parts.iter().map(|p| p.outcome));
    // The most any undecided pair needs; unknown if one cannot be decided by more.
    let requests_to_resolve = (outcome == GateOutcome::Inconclusive)
        .then(|| {
            parts
                .iter()
                .filter(|p| p.outcome == GateOutcome::Inconclusive)
                .try_fold(0usize, |most, p| Some(most.max(p.requests_to_resolve?)))
        })
        .flatten()
        .filter(|&n| n > 0);
    let (requests_per_side, oracle_requests_per_side, learning_oracle_requests_per_side) =
        cost(outcome, &parts);
    let block = block_cost(outcome, &parts);
    EvidenceGate {
        outcome,
        rule: rule.to_string(),
        requests_to_resolve,
        requests_per_side,
        oracle_requests_per_side,
        learning_oracle_requests_per_side,
        block_oracle_requests_per_side: block.map(|p| p.0),
        design_effect: block.and_then(|p| p.1),
        parts,
    }
}

/// What the gate's verdict cost, and what each oracle (the known-variance
/// one, the one that learns the spread) needs on the same data for it: the
/// pairs that decide it (a pass: all, each must pass; a fail: the failing
/// ones, the cheapest decides; undecided: the undecided ones, the dearest).
/// Any is None when a deciding pair lacks it.
fn cost(
    outcome: GateOutcome,
    parts: &[EvidencePart],
) -> (Option<usize>, Option<usize>, Option<usize>) {
    let deciding = deciding(outcome, parts);
    if deciding.is_empty() {
        return (None, None, None);
    }
    let used = deciding
        .iter()
        .try_fold(0usize, |most, p| Some(most.max(p.requests_per_side?)));
    let need = |of: fn(&EvidencePart) -> Option<usize>| {
        let mut needs = deciding.iter().map(|p| of(p));
        match outcome {
            GateOutcome::Fail => needs.flatten().min(),
            _ => needs.try_fold(0usize, |most, n| Some(most.max(n?))),
        }
    };
    (
        used,
        need(|p| p.oracle_requests_per_side),
        need(|p| p.learning_oracle_requests_per_side),
    )
}

/// The pairs that decide a gate of `outcome`: every pair for a pass,
/// else the pairs of that outcome.
fn deciding(outcome: GateOutcome, parts: &[EvidencePart]) -> Vec<&EvidencePart> {
    parts
        .iter()
        .filter(|p| outcome == GateOutcome::Pass || p.outcome == outcome)
        .collect()
}

/// The block-level oracle's need for the verdict, and the design effect of
/// the pair it is taken from: a fail, the cheapest failing pair (any one
/// fails the gate); a pass, the dearest pair (all must pass); undecided,
/// the dearest undecided pair (what would decide them all), as [`cost`]
/// takes the other oracles. None when a pass or an undecided gate has a
/// deciding pair without the figure, or no failing pair has it.
fn block_cost(outcome: GateOutcome, parts: &[EvidencePart]) -> Option<(usize, Option<f64>)> {
    let deciding = deciding(outcome, parts);
    let figure = |p: &&EvidencePart| Some((p.block_oracle_requests_per_side?, p.design_effect));
    match outcome {
        GateOutcome::Fail => deciding.iter().filter_map(figure).min_by_key(|f| f.0),
        _ if deciding.is_empty() => None,
        _ => deciding
            .iter()
            .map(figure)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max_by_key(|f| f.0),
    }
}

/// The strict turnover rule. It fails a candidate with no turnover run, so
/// that a turnover the suite declares is never passed by not running it.
/// A run that skipped its turnover as asked (`RunArtifact::turnover_not_run`)
/// is not judged by this rule at all: both turnover gates are "not run",
/// and the qualification is capped by [`with_turnover_not_run`] (never
/// qualified, exit [`EXIT_GATES_NOT_RUN`] when the gates that ran passed),
/// because a check that did not run cannot vouch for the candidate and a
/// skip the plan asked for is not the candidate's failure either.
pub const STRICT_RULE: &str = "every candidate turnover run has zero failed requests and zero contaminated answers; fails when the candidate has no turnover run";

pub const NON_INFERIOR_RULE: &str = "for each turnover workload, every candidate run and the candidate's runs pooled: the one-sided upper confidence bound (at 1 - alpha; Newcombe hybrid score interval) of the failure-rate difference candidate - baseline is below the margin, and zero contaminated answers; Fisher's exact test is reported beside it";

fn counts_reason(r: &RunCounts) -> String {
    let mut s = format!("{} of {} failed", r.failed, r.requests);
    if let Some(c) = r.contaminated {
        s.push_str(&format!(", {c} contaminated"));
    }
    s
}

/// Strict gate: every candidate run with zero failures and zero contamination.
pub fn strict_gate(candidate: &[RunCounts]) -> Gate {
    let mut parts: Vec<GatePart> = candidate
        .iter()
        .map(|r| GatePart {
            subject: r.key.clone(),
            passed: r.failed == 0 && r.contaminated.unwrap_or(0) == 0,
            reason: counts_reason(r),
        })
        .collect();
    if parts.is_empty() {
        parts.push(GatePart {
            subject: "candidate_turnover".into(),
            passed: false,
            reason: "the candidate has no turnover run".into(),
        });
    }
    Gate::new(STRICT_RULE, parts)
}

/// Non-inferiority gate over a comparison built by [`compare_turnover`].
pub fn non_inferior_gate(cmp: &TurnoverComparison) -> Gate {
    let mut parts = Vec::new();
    for (gi, g) in cmp.groups.iter().enumerate() {
        let entries = g
            .candidate_runs
            .iter()
            .map(|c| (c.counts.runs.join("+"), c))
            .chain(
                g.candidate_pooled
                    .iter()
                    .filter(|_| g.candidate_runs.len() > 1)
                    .map(|c| {
                        (
                            format!("turnover_comparison.groups[{gi}].candidate_pooled"),
                            c,
                        )
                    }),
            );
        for (subject, c) in entries {
            let reason = match (
                &c.vs_baseline,
                &g.baseline,
                c.difference_upper_bound,
                cmp.margin,
            ) {
                (Some(t), Some(b), Some(u), Some(m)) => format!(
                    "{} of {} failed vs baseline {} of {}: upper bound of the failure-rate difference {:+.4} {} margin {}; Fisher p_candidate_worse = {:.4}; {} contaminated",
                    c.counts.failed,
                    c.counts.requests,
                    b.failed,
                    b.requests,
                    u,
                    if u < m { "<" } else { ">=" },
                    m,
                    t.p_candidate_worse,
                    c.counts
                        .contaminated
                        .map_or_else(|| "not counted".to_string(), |n| n.to_string()),
                ),
                (Some(t), Some(b), _, _) => format!(
                    "{} of {} failed vs baseline {} of {}: p_candidate_worse = {:.4} {} alpha {}; {} contaminated",
                    c.counts.failed,
                    c.counts.requests,
                    b.failed,
                    b.requests,
                    t.p_candidate_worse,
                    if t.p_candidate_worse >= cmp.alpha {
                        ">="
                    } else {
                        "<"
                    },
                    cmp.alpha,
                    c.counts
                        .contaminated
                        .map_or_else(|| "not counted".to_string(), |n| n.to_string()),
                ),
                (None, Some(b), _, _) => format!(
                    "{} of {} failed vs baseline {} of {}: no exact test (a side without requests, or more than {MAX_EXACT_REQUESTS})",
                    c.counts.failed, c.counts.requests, b.failed, b.requests,
                ),
                _ => format!(
                    "no baseline turnover run named `{}` to compare with",
                    g.name
                ),
            };
            parts.push(GatePart {
                subject,
                passed: c.non_inferior == Some(true),
                reason,
            });
        }
    }
    if parts.is_empty() {
        parts.push(GatePart {
            subject: "candidate_turnover".into(),
            passed: false,
            reason: "the candidate has no turnover run".into(),
        });
    }
    Gate::new(NON_INFERIOR_RULE, parts)
}

/// Exit code of a compared qualification: every gate passed.
pub const EXIT_PASS: u8 = 0;

/// A gate failed.
pub const EXIT_FAIL: u8 = 1;

/// The evidence could not decide the performance gate (turnover did not fail).
pub const EXIT_INCONCLUSIVE: u8 = 3;

/// Every gate that ran passed, but the turnover gates did not run (the
/// plan skipped them): not qualified, and not a failure either; a person
/// decides (`decide --promote --force`).
pub const EXIT_GATES_NOT_RUN: u8 = 4;

/// [`EXIT_PASS`], [`EXIT_FAIL`], [`EXIT_INCONCLUSIVE`] or
/// [`EXIT_GATES_NOT_RUN`] for a report. A failure or an undecided verdict
/// keeps its code when turnover did not run as well.
pub fn exit_code(r: &Report) -> u8 {
    let gates = gates_verdict(&r.qualification);
    if qualified(r) {
        EXIT_PASS
    } else if gates == QUAL_INCONCLUSIVE || gates == QUAL_INCONCLUSIVE_QUALITY {
        EXIT_INCONCLUSIVE
    } else if gates == QUAL_PASS_GATES_RAN && gates != r.qualification {
        EXIT_GATES_NOT_RUN
    } else {
        EXIT_FAIL
    }
}

/// Whether the report qualifies the candidate: its `gates.qualified`, or for
/// a report without a `gates` block (the seed), both seed gates passed.
pub fn qualified(r: &Report) -> bool {
    r.gates.as_ref().map_or(
        r.performance_gate_passed && r.strict_turnover_gate_passed,
        |g| g.qualified,
    )
}

fn decides_by_evidence(r: &Report) -> bool {
    r.statistics
        .as_ref()
        .and_then(|s| s.gate_decides.as_deref())
        == Some("evidence")
}

/// One line for the decision ledger: which gates held, worded as the seed
/// words them ("failed strict turnover"), and a turnover gate that did not run.
pub fn summary(r: &Report) -> String {
    if let Some(skip) = r.turnover_gate.as_ref().and_then(|g| g.not_run) {
        let performance = match r.performance_outcome {
            Some(o) if decides_by_evidence(r) => format!("performance evidence {}", o.as_str()),
            _ if r.performance_gate_passed => "performance gate passed".into(),
            _ => "failed performance gate".into(),
        };
        return format!("{performance}, turnover not run ({})", skip.describe());
    }
    if decides_by_evidence(r)
        && let Some(o) = r.performance_outcome
    {
        return format!(
            "performance evidence {}, strict turnover {}",
            o.as_str(),
            if r.strict_turnover_gate_passed {
                "passed"
            } else {
                "failed"
            }
        );
    }
    match (r.performance_gate_passed, r.strict_turnover_gate_passed) {
        (true, true) => "all gates passed".into(),
        (true, false) => "failed strict turnover".into(),
        (false, true) => "failed performance gate".into(),
        (false, false) => "failed performance gate and strict turnover".into(),
    }
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

    /// The verdict's cost against each oracle: a pass needs every pair
    /// (the most any needs), a fail the cheapest failing pair; the two
    /// oracles are rolled up alike, each from its own figures.
    #[test]
    fn the_gate_rolls_up_both_oracles_by_the_pairs_that_decide() {
        let part = |outcome, used, known, learning| EvidencePart {
            requests_per_side: Some(used),
            oracle_requests_per_side: Some(known),
            learning_oracle_requests_per_side: learning,
            ..EvidencePart::new("p", outcome, "")
        };
        use GateOutcome::{Fail, Inconclusive, Pass};
        let g = gate_of_parts(
            "",
            vec![part(Pass, 8, 1, Some(4)), part(Pass, 8, 2, Some(5))],
        );
        assert_eq!(g.outcome, Pass);
        assert_eq!(
            (
                g.requests_per_side,
                g.oracle_requests_per_side,
                g.learning_oracle_requests_per_side
            ),
            (Some(8), Some(2), Some(5))
        );
        let g = gate_of_parts(
            "",
            vec![
                part(Fail, 16, 3, Some(7)),
                part(Fail, 16, 2, Some(6)),
                part(Inconclusive, 16, 90, Some(95)),
            ],
        );
        assert_eq!(
            (
                g.oracle_requests_per_side,
                g.learning_oracle_requests_per_side
            ),
            (Some(2), Some(6))
        );
        // A pass with a pair lacking the learning figure: none for the gate.
        let g = gate_of_parts("", vec![part(Pass, 8, 1, Some(4)), part(Pass, 8, 2, None)]);
        assert_eq!(
            (
                g.oracle_requests_per_side,
                g.learning_oracle_requests_per_side
            ),
            (Some(2), None)
        );
    }
}

#[cfg(test)]
mod turnover_gate_tests {
    use super::*;
    use crate::turnover_rates::compare_turnover;

    /// Baseline 0/60, candidate 4/60: Fisher's test alone passes it (p 0.059
    /// ≥ 0.05), which is absence of evidence, not evidence of non-inferiority.
    /// With a 5-point margin the upper bound of the difference (≈ 0.16) is far
    /// above it: not non-inferior.
    #[test]
    fn margin_rule_refuses_absence_of_evidence() {
        let b = [run("baseline_turnover", 60, 0)];
        let c = [run("candidate_turnover", 60, 4)];
        let without_margin = compare_turnover(&b, &c, 0.05, 0.95, None);
        assert_eq!(
            without_margin.groups[0].candidate_runs[0].non_inferior,
            Some(true)
        );
        let with_margin = compare_turnover(&b, &c, 0.05, 0.95, Some(0.05));
        let r = &with_margin.groups[0].candidate_runs[0];
        assert_eq!(r.non_inferior, Some(false));
        let u = r.difference_upper_bound.unwrap();
        assert!((0.10..0.20).contains(&u), "{u}");
        // Many clean requests on both sides do show non-inferiority.
        let b = [run("baseline_turnover", 600, 3)];
        let c = [run("candidate_turnover", 600, 2)];
        let ok = compare_turnover(&b, &c, 0.05, 0.95, Some(0.05));
        assert_eq!(ok.groups[0].candidate_runs[0].non_inferior, Some(true));
        assert!(!non_inferior_gate(&with_margin).passed);
        assert!(non_inferior_gate(&ok).passed);
    }

    fn run(key: &str, requests: u64, failed: u64) -> RunCounts {
        RunCounts {
            key: key.into(),
            name: "turnover".into(),
            requests,
            failed,
            contaminated: Some(0),
        }
    }

    #[test]
    fn seed_counts_fail_strict_but_are_non_inferior() {
        let b = [run("baseline_turnover", 60, 7)];
        let c = [
            run("candidate_turnover", 60, 2),
            run("candidate_turnover_repeat", 60, 3),
        ];
        let cmp = compare_turnover(&b, &c, 0.05, 0.95, None);
        assert_eq!(cmp.groups.len(), 1);
        let g = &cmp.groups[0];
        let pooled = g.candidate_pooled.as_ref().expect("pooled");
        assert_eq!((pooled.counts.failed, pooled.counts.requests), (5, 120));
        let base_rate = g
            .baseline
            .as_ref()
            .and_then(|b| b.failure_rate)
            .expect("rate");
        for c in g.candidate_runs.iter().chain([pooled]) {
            assert!(c.counts.failure_rate.expect("rate") < base_rate);
            let t = c.vs_baseline.expect("test");
            assert!(t.p_candidate_worse > t.p_candidate_better);
            assert_eq!(c.non_inferior, Some(true));
        }
        assert!(!strict_gate(&c).passed);
        assert!(non_inferior_gate(&cmp).passed);
    }

    #[test]
    fn contamination_fails_both_gates() {
        let b = [run("baseline_turnover", 60, 0)];
        let mut c = [run("candidate_turnover", 60, 0)];
        c[0].contaminated = Some(1);
        let cmp = compare_turnover(&b, &c, 0.05, 0.95, None);
        assert!(!strict_gate(&c).passed);
        assert!(!non_inferior_gate(&cmp).passed);
    }

    #[test]
    fn untrusted_counts_neither_overflow_nor_hang() {
        // Found by review, then replayed through `fuzzing::report`: two runs of
        // 2^63 requests overflowed the pooled sum (a panic in debug builds).
        let huge = run("baseline_turnover_repeat", 1 << 63, 0);
        let b = [run("baseline_turnover", 1 << 63, 0), huge];
        let c = [run("candidate_turnover", 60, 1)];
        let cmp = compare_turnover(&b, &c, 0.05, 0.95, None);
        let base = cmp.groups[0].baseline.as_ref().expect("pooled baseline");
        assert_eq!(base.requests, u64::MAX);
        // Found by review, confirmed with the report fuzz target (past its
        // timeout): Fisher's test over 10^12 requests and 5·10^11 failures per
        // side ran for minutes. Beyond MAX_EXACT_REQUESTS there is no test, and
        // the gate says why instead of passing.
        let big = 1_000_000_000_000;
        let b = [run("baseline_turnover", big, big / 2)];
        let c = [run("candidate_turnover", big, big / 2)];
        let cmp = compare_turnover(&b, &c, 0.05, 0.95, None);
        let cand = &cmp.groups[0].candidate_runs[0];
        assert_eq!((cand.vs_baseline, cand.non_inferior), (None, None));
        let gate = non_inferior_gate(&cmp);
        assert!(!gate.passed);
        assert!(
            gate.parts[0].reason.contains("no exact test"),
            "{}",
            gate.parts[0].reason
        );
        // At the bound the test still runs.
        let n = MAX_EXACT_REQUESTS;
        let cmp = compare_turnover(
            &[run("baseline_turnover", n, 1)],
            &[run("candidate_turnover", n, 0)],
            0.05,
            0.95,
            None,
        );
        assert_eq!(cmp.groups[0].candidate_runs[0].non_inferior, Some(true));
    }

    #[test]
    fn no_candidate_runs_fails_both_gates() {
        let cmp = compare_turnover(&[run("baseline_turnover", 60, 0)], &[], 0.05, 0.95, None);
        assert!(!strict_gate(&[]).passed);
        assert!(!non_inferior_gate(&cmp).passed);
    }
}
