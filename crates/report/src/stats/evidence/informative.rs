//! Whether a pair's bounds say anything a reader can use: the one rule the
//! report's `informative` flag, `verify` and the views all follow.
//!
//! The bounds are honest arithmetic at any size: with two blocks t has one
//! degree of freedom and a bound can sit at `0.010×` or `3.7e18×`. Numbers
//! like those decide nothing and read as nonsense, so where the evidence is
//! this thin the views say so in words and the JSON keeps the numbers.

use super::{Evidence, Resampling, worse_log};
use crate::stats::{Direction, GateOutcome};

/// Fewest resampling units (blocks, clusters, requests) a bound needs to
/// inform. The bounds widen by `√(B/(B−1))·t_{B−1}/z` for B units: at
/// the fixed-size fail level of three pairs (α = 0.05/3) that is 12.7×
/// a normal bound's distance with 2 units, 3.1× with 3, 2.0× with 4 and
/// 1.7× with 5 (`the_minimum_is_where_t_stops_dominating`). From 4 the
/// data, not the widening, set a bound's width; it is also where an
/// adaptive run's design first plans (`crate::design::DESIGN_FIRST_BLOCKS`).
pub const MIN_UNITS_TO_BOUND: usize = 4;

/// The widest a bound may reach and still inform: a candidate-over-baseline
/// ratio of 10× either way (a latency's worse change from −90 % to +900 %,
/// a rate's speed from 0.1× to 10×). A bound past it, or one outside a
/// ratio's domain (a percent-scale bound past −100 %), says only that the
/// data cannot bound the metric yet.
pub const MAX_INFORMATIVE_RATIO: f64 = 10.0;

/// Why the bounds of `e` (a pair of `direction`, its bootstrap over
/// `units` resampling units) are not informative, in words; `Ok` when they
/// are. A decided pair is always informative: its deciding bound cleared
/// the margin at the gate's error rate, which the widening for few units
/// is part of. An undecided one is not when it rests on fewer than
/// [`MIN_UNITS_TO_BOUND`] units, or when a bound lies beyond
/// [`MAX_INFORMATIVE_RATIO`] either way.
pub fn informative(e: &Evidence, direction: Direction, units: usize) -> Result<(), String> {
    if e.outcome != GateOutcome::Inconclusive {
        return Ok(());
    }
    if units < MIN_UNITS_TO_BOUND {
        let what = match e.resampling {
            Resampling::Paired | Resampling::PairedRequests => "blocks",
            Resampling::Clustered => "clusters",
            Resampling::Independent => "requests",
        };
        return Err(format!(
            "too few {what} to bound: {units} of the {MIN_UNITS_TO_BOUND} a bound needs"
        ));
    }
    let limit = MAX_INFORMATIVE_RATIO.ln();
    let within = |bound: f64| worse_log(direction, bound).is_some_and(|l| l.abs() <= limit);
    if !(within(e.lower_bound_percent) && within(e.upper_bound_percent)) {
        return Err(format!(
            "bounds wider than {MAX_INFORMATIVE_RATIO}× either way: the data cannot bound this metric yet"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::special::{normal_quantile, t_quantile};

    fn undecided(resampling: Resampling, lower: f64, upper: f64) -> Evidence {
        Evidence {
            outcome: GateOutcome::Inconclusive,
            margin_percent: 5.0,
            worse_change_percent: (lower + upper) / 2.0,
            upper_bound_percent: upper,
            lower_bound_percent: lower,
            alpha_pass: 0.05,
            alpha_fail: 0.05 / 3.0,
            resampling,
            drift_floor: None,
            standard_error_percent: 10.0,
            detectable_regression_percent: 30.0,
            requests_to_resolve: Some(100),
            unresolvable: None,
        }
    }

    use Direction::{HigherIsBetter, LowerIsBetter};

    #[test]
    fn too_few_units_are_said_in_words() {
        let e = undecided(Resampling::PairedRequests, -3.0, 12.0);
        assert_eq!(
            informative(&e, LowerIsBetter, 2),
            Err("too few blocks to bound: 2 of the 4 a bound needs".into())
        );
        let e = undecided(Resampling::Clustered, -3.0, 12.0);
        assert_eq!(
            informative(&e, LowerIsBetter, 3),
            Err("too few clusters to bound: 3 of the 4 a bound needs".into())
        );
        assert_eq!(informative(&e, LowerIsBetter, 4), Ok(()));
    }

    /// The bounds: a rate's `0.010×–3.7e18× as fast` and a
    /// latency's `[−100.00 %, +2341.71 %]`; just inside 10× either way
    /// reads as numbers, just beyond it does not.
    #[test]
    fn bounds_beyond_ten_times_either_way_are_not_informative() {
        let wide = Err(
            "bounds wider than 10× either way: the data cannot bound this metric yet".to_string(),
        );
        // A rate: speed = 1 − worse/100, so 0.010× is a worse change of +99 %
        // and 3.7e18× one of −3.7e20 %.
        let rate = undecided(Resampling::PairedRequests, -3.7e20, 99.0);
        assert_eq!(informative(&rate, HigherIsBetter, 8), wide);
        let latency = undecided(Resampling::Paired, -100.0, 2341.71);
        assert_eq!(informative(&latency, LowerIsBetter, 8), wide);
        // Past −100 % (a percent-scale bound): no ratio at all.
        let past = undecided(Resampling::Independent, -130.0, 20.0);
        assert_eq!(informative(&past, LowerIsBetter, 30), wide);
        // A latency from 0.1× to 10×: −90 % and +900 %.
        let edge = undecided(Resampling::Paired, -89.9, 899.0);
        assert_eq!(informative(&edge, LowerIsBetter, 8), Ok(()));
        let beyond = undecided(Resampling::Paired, -89.9, 901.0);
        assert_eq!(informative(&beyond, LowerIsBetter, 8), wide);
        // A rate from 0.1× to 10× as fast: worse +90 % and −900 %.
        let edge = undecided(Resampling::Paired, -899.0, 89.9);
        assert_eq!(informative(&edge, HigherIsBetter, 8), Ok(()));
        let beyond = undecided(Resampling::Paired, -899.0, 90.1);
        assert_eq!(informative(&beyond, HigherIsBetter, 8), wide);
    }

    /// A decided pair's deciding bound cleared the margin: it informs,
    /// however few units or however far its other bound.
    #[test]
    fn a_decided_pair_is_informative() {
        let mut e = undecided(Resampling::PairedRequests, 6.0, 3.7e6);
        e.outcome = GateOutcome::Fail;
        assert_eq!(informative(&e, LowerIsBetter, 2), Ok(()));
        e.outcome = GateOutcome::Pass;
        assert_eq!(informative(&e, LowerIsBetter, 2), Ok(()));
    }

    /// The numbers [`MIN_UNITS_TO_BOUND`]'s comment gives: how far t with
    /// B − 1 degrees of freedom (and the bootstrap's √(B/(B−1))) widens a
    /// bound over a normal one at α = 0.05/3.
    #[test]
    fn the_minimum_is_where_t_stops_dominating() {
        let a: f64 = 0.05 / 3.0;
        let widening = |b: usize| {
            let df = (b - 1) as f64;
            (b as f64 / df).sqrt() * t_quantile(1.0 - a, df) / normal_quantile(1.0 - a)
        };
        let got: Vec<f64> = (2..=5)
            .map(|b| (widening(b) * 10.0).round() / 10.0)
            .collect();
        assert_eq!(got, [12.7, 3.1, 2.0, 1.7]);
    }
}
