//! SLO attainment as a proportion. A request meets its SLOs or it does not,
//! so attainment is a binomial and is compared as one (Wilson score bounds
//! per side, Newcombe's hybrid score interval for the difference), not as a
//! quantile of a bootstrap.
//!
//! The gate reads the *drop* in attainment, baseline − candidate, in
//! percentage points, against a non-inferiority margin, with the evidence
//! rule of the latency metrics: *fail* if the drop's lower bound (one-sided,
//! `alpha_fail`) is above the margin, *pass* if its upper bound (one-sided,
//! `alpha_pass`) is at most the margin, *inconclusive* otherwise.
//!
//! The binomial treats requests as independent: drift between blocks moves
//! both sides of an interleaved design alike, which the difference cancels
//! to first order; a single-pass design is not corrected here (the report
//! says so in its method text).

use serde::{Deserialize, Serialize};

use super::delta::GateOutcome;
use super::evidence::{newcombe_difference, wilson};
use super::special::normal_quantile;

/// Most requests per side `requests_to_resolve` will name.
pub const MAX_RESOLVE_REQUESTS: usize = 1_000_000;

/// Two-sided Wilson interval of `met / of` at `confidence`.
pub fn attainment_interval(met: u64, of: u64, confidence: f64) -> (f64, f64) {
    wilson(met, of, normal_quantile(1.0 - (1.0 - confidence) / 2.0))
}

/// The evidence on one cell's attainment drop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttainmentEvidence {
    /// (baseline − candidate attainment) × 100: positive is worse.
    pub drop_points: f64,
    /// One-sided lower bound of the drop at level `alpha_fail`.
    pub lower_bound_points: f64,
    /// One-sided upper bound of the drop at level `alpha_pass`.
    pub upper_bound_points: f64,
    pub margin_points: f64,
    pub outcome: GateOutcome,
    /// Inconclusive: requests per side (proportions held as observed) at
    /// which the bounds would decide; None when resolved, or when the drop
    /// sits on the margin and no n decides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_to_resolve: Option<usize>,
}

/// Bounds and outcome for `b = (met, of)` against `c = (met, of)`.
/// None when a side has no requests.
pub fn attainment_evidence(
    b: (u64, u64),
    c: (u64, u64),
    margin_points: f64,
    alpha_pass: f64,
    alpha_fail: f64,
) -> Option<AttainmentEvidence> {
    if b.1 == 0 || c.1 == 0 {
        return None;
    }
    let (lower, upper, outcome) = bounds(b, c, margin_points, alpha_pass, alpha_fail);
    let drop_points = (b.0 as f64 / b.1 as f64 - c.0 as f64 / c.1 as f64) * 100.0;
    let requests_to_resolve = (outcome == GateOutcome::Inconclusive)
        .then(|| resolve_n(b, c, margin_points, alpha_pass, alpha_fail))
        .flatten();
    Some(AttainmentEvidence {
        drop_points,
        lower_bound_points: lower,
        upper_bound_points: upper,
        margin_points,
        outcome,
        requests_to_resolve,
    })
}

fn bounds(
    b: (u64, u64),
    c: (u64, u64),
    margin_points: f64,
    alpha_pass: f64,
    alpha_fail: f64,
) -> (f64, f64, GateOutcome) {
    // A two-sided interval at 1 − 2α has one-sided bounds at α.
    let (lower, _) = newcombe_difference(b.0, b.1, c.0, c.1, 1.0 - 2.0 * alpha_fail);
    let (_, upper) = newcombe_difference(b.0, b.1, c.0, c.1, 1.0 - 2.0 * alpha_pass);
    let (lower, upper) = (lower * 100.0, upper * 100.0);
    let outcome = if lower > margin_points {
        GateOutcome::Fail
    } else if upper <= margin_points {
        GateOutcome::Pass
    } else {
        GateOutcome::Inconclusive
    };
    (lower, upper, outcome)
}

/// Smallest n per side, both sides' proportions held as observed, at which
/// the bounds resolve (rounding the counts makes the search approximate by
/// a request or two, never by a factor).
fn resolve_n(
    b: (u64, u64),
    c: (u64, u64),
    margin_points: f64,
    alpha_pass: f64,
    alpha_fail: f64,
) -> Option<usize> {
    let (pb, pc) = (b.0 as f64 / b.1 as f64, c.0 as f64 / c.1 as f64);
    let resolves = |n: u64| {
        let at = |p: f64| ((p * n as f64).round() as u64, n);
        bounds(at(pb), at(pc), margin_points, alpha_pass, alpha_fail).2 != GateOutcome::Inconclusive
    };
    smallest_deciding_n(b.1.max(c.1), MAX_RESOLVE_REQUESTS as u64, resolves).map(|n| n as usize)
}

/// Smallest n above `lo` at which `resolves(n)` (monotone in n): doubling
/// from `lo`, then bisection; None when even `max` does not. The search
/// behind every "about N more would decide it" of a proportion.
pub fn smallest_deciding_n(lo: u64, max: u64, resolves: impl Fn(u64) -> bool) -> Option<u64> {
    let mut lo = lo;
    let mut hi = lo.max(1) * 2;
    while !resolves(hi) {
        if hi >= max {
            return None;
        }
        lo = hi;
        hi = (hi * 2).min(max);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if resolves(mid) { hi = mid } else { lo = mid }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;

    fn binomial(rng: &mut Xoshiro256, n: u64, p: f64) -> u64 {
        (0..n).filter(|_| rng.next_f64() < p).count() as u64
    }

    #[test]
    fn wilson_interval_matches_a_known_binomial_case() {
        // 81 of 263 (Wilson 1927 / Newcombe 1998 table I): 0.2553 to 0.3662.
        let (lo, hi) = attainment_interval(81, 263, 0.95);
        assert!(
            (lo - 0.2553).abs() < 5e-4 && (hi - 0.3662).abs() < 5e-4,
            "{lo} {hi}"
        );
        // 15 of 15 met: the interval is not the point [1, 1].
        let (lo, hi) = attainment_interval(15, 15, 0.95);
        assert!((lo - 0.7961).abs() < 5e-4 && hi > 1.0 - 1e-12, "{lo} {hi}");
    }

    #[test]
    fn outcome_follows_the_bounds_and_names_the_n_that_decides() {
        // Everything met on both sides, 16 each: the upper bound is far above 5 points.
        let e = attainment_evidence((16, 16), (16, 16), 5.0, 0.025, 0.025).unwrap();
        assert_eq!(e.outcome, GateOutcome::Inconclusive);
        let n = e
            .requests_to_resolve
            .expect("all met resolves with more requests");
        let at_n = attainment_evidence(
            (n as u64, n as u64),
            (n as u64, n as u64),
            5.0,
            0.025,
            0.025,
        );
        assert_eq!(at_n.unwrap().outcome, GateOutcome::Pass);
        let before = attainment_evidence(
            ((n - 1) as u64, (n - 1) as u64),
            ((n - 1) as u64, (n - 1) as u64),
            5.0,
            0.025,
            0.025,
        );
        assert_eq!(
            before.unwrap().outcome,
            GateOutcome::Inconclusive,
            "n={n} is the smallest"
        );
        // A 40-point drop on 100 requests is a fail.
        let e = attainment_evidence((95, 100), (55, 100), 5.0, 0.025, 0.025).unwrap();
        assert_eq!(e.outcome, GateOutcome::Fail);
        assert!((e.drop_points - 40.0).abs() < 1e-9);
        assert!(e.lower_bound_points > 5.0 && e.lower_bound_points < e.upper_bound_points);
    }

    /// Error rates of the attainment gate by simulation: A/A false fails,
    /// passes of a runtime worse than the margin, power against a known
    /// drop, and coverage of the 95 % Newcombe interval.
    #[test]
    fn attainment_gate_error_rates_by_simulation() {
        let mut rng = Xoshiro256::new(17);
        let (n, trials, alpha) = (400u64, 2000, 0.025);
        let mut aa_fail = 0;
        let mut aa_pass = 0;
        let mut at_margin_pass = 0;
        let mut shift_fail = 0;
        let mut covered = 0;
        for _ in 0..trials {
            let (b, c) = (binomial(&mut rng, n, 0.9), binomial(&mut rng, n, 0.9));
            let e = attainment_evidence((b, n), (c, n), 5.0, alpha, alpha).unwrap();
            aa_fail += (e.outcome == GateOutcome::Fail) as usize;
            aa_pass += (e.outcome == GateOutcome::Pass) as usize;
            // Candidate exactly 5 points worse: passing it is the error.
            let c5 = binomial(&mut rng, n, 0.85);
            let e = attainment_evidence((b, n), (c5, n), 5.0, alpha, alpha).unwrap();
            at_margin_pass += (e.outcome == GateOutcome::Pass) as usize;
            // 15 points worse: should fail.
            let c15 = binomial(&mut rng, n, 0.75);
            let e = attainment_evidence((b, n), (c15, n), 5.0, alpha, alpha).unwrap();
            shift_fail += (e.outcome == GateOutcome::Fail) as usize;
            let (lo, hi) = newcombe_difference(b, n, c5, n, 0.95);
            covered += (lo <= 0.05 && 0.05 <= hi) as usize;
        }
        let rate = |k: usize| k as f64 / trials as f64;
        eprintln!(
            "attainment gate, n={n}/side, {trials} trials: A/A fail {:.4} pass {:.3}; at margin pass {:.4}; -15 points fail {:.3}; 95% coverage {:.3}",
            rate(aa_fail),
            rate(aa_pass),
            rate(at_margin_pass),
            rate(shift_fail),
            rate(covered)
        );
        assert!(rate(aa_fail) <= 0.005, "A/A false fails");
        assert!(
            rate(at_margin_pass) <= alpha + 0.01,
            "passes of a runtime at the margin"
        );
        assert!(rate(aa_pass) >= 0.5, "A/A passes at n={n}");
        assert!(rate(shift_fail) >= 0.95, "power against a 15-point drop");
        assert!(
            (0.93..=0.97).contains(&rate(covered)),
            "coverage {}",
            rate(covered)
        );
    }
}
