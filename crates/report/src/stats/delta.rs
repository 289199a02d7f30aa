//! Deltas, directions, the regression threshold and per-metric verdicts.

use serde::{Deserialize, Serialize};

/// `(candidate − baseline) / baseline × 100`, signed as in the seed report.
///
/// `None` when the baseline is 0 or either input (or the result) is not finite:
/// a relative change from nothing has no meaning.
pub fn delta_percent(baseline: f64, candidate: f64) -> Option<f64> {
    if baseline == 0.0 || !baseline.is_finite() || !candidate.is_finite() {
        return None;
    }
    let d = (candidate - baseline) / baseline * 100.0;
    d.is_finite().then_some(d)
}

/// Which way a metric gets better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Latencies (TTFT, e2e, TPOT, ITL, queue time).
    LowerIsBetter,
    /// Rates (decode and prefill tokens/s).
    HigherIsBetter,
}

impl Direction {
    /// The change in the worse direction, in percent: positive means worse by
    /// that much, negative means better.
    pub fn worse_change_percent(self, delta_percent: f64) -> f64 {
        match self {
            Direction::LowerIsBetter => delta_percent,
            Direction::HigherIsBetter => -delta_percent,
        }
    }

    /// A CI of `delta_percent` as `(w_lo, w_hi)` in worse-change terms, `w_lo <= w_hi`.
    pub fn worse_interval(self, ci: &Interval) -> (f64, f64) {
        match self {
            Direction::LowerIsBetter => (ci.low, ci.high),
            Direction::HigherIsBetter => (-ci.high, -ci.low),
        }
    }

    /// Direction of the per-request metrics named in `artifact::metric`, by
    /// unit suffix: `*_ms` are latencies, `*_tok_s` are rates. Token counts and
    /// unknown names have no better side and give `None`.
    pub fn of_metric(name: &str) -> Option<Direction> {
        if name.ends_with("_ms") {
            Some(Direction::LowerIsBetter)
        } else if name.ends_with("_tok_s") {
            Some(Direction::HigherIsBetter)
        } else {
            None
        }
    }
}

/// The seed's `no_more_than_5_percent_regression` with a configurable
/// threshold: true when the change in the worse direction is at most
/// `threshold_percent` (boundary included). Improvements always pass; NaN fails.
pub fn within_regression_threshold(
    direction: Direction,
    delta_percent: f64,
    threshold_percent: f64,
) -> bool {
    direction.worse_change_percent(delta_percent) <= threshold_percent
}

/// A two-sided confidence interval; for deltas, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// Nominal coverage, e.g. 0.95.
    pub confidence: f64,
}

impl Interval {
    /// Whether `x` lies in `[low, high]`.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }

    /// Half the interval's width: its precision, in the interval's units.
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }
}

/// A gate decided by evidence: three outcomes, never a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateOutcome {
    /// Confidently no worse than the margin.
    Pass,
    /// Confidently worse than the margin.
    Fail,
    /// Neither: more data would decide it.
    Inconclusive,
}

impl GateOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            GateOutcome::Pass => "pass",
            GateOutcome::Fail => "fail",
            GateOutcome::Inconclusive => "inconclusive",
        }
    }
}

/// What the evidence says about one metric of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    Equivalent,
    Inconclusive,
}

/// Verdict for one metric from the CI of its `delta_percent`: a symmetric
/// description of the change against the band ±T.
///
/// Map the CI into worse-change terms `[w_lo, w_hi]` (see
/// [`Direction::worse_interval`]; positive = worse), `T = threshold_percent`:
///
/// 1. **Regressed** if `w_lo > T`: confidently worse by more than T.
/// 2. **Improved** if `w_hi < -T`: confidently better by more than T.
/// 3. **Equivalent** if `-T <= w_lo` and `w_hi <= T`: inside ±T either way.
/// 4. **Inconclusive** otherwise: the interval crosses `T` or `-T`.
///
/// The two directions are mirror images (a CI of [+6, +9] is regressed
/// exactly when [−9, −6] is improved), so an A/A comparison is as likely to
/// be called one as the other. The gate is decided apart from this, by
/// one-sided bounds (`evidence`): a confident 2–8 % improvement is
/// inconclusive here but passes the gate.
///
/// A CI with a non-finite bound or `low > high`, or a negative or non-finite
/// `T`, gives Inconclusive: such inputs carry no usable evidence.
pub fn verdict(direction: Direction, ci: &Interval, threshold_percent: f64) -> Verdict {
    let t = threshold_percent;
    let usable = ci.low.is_finite() && ci.high.is_finite() && ci.low <= ci.high;
    if !(usable && t.is_finite() && t >= 0.0) {
        return Verdict::Inconclusive;
    }
    let (w_lo, w_hi) = direction.worse_interval(ci);
    if w_lo > t {
        Verdict::Regressed
    } else if w_hi < -t {
        Verdict::Improved
    } else if -t <= w_lo && w_hi <= t {
        Verdict::Equivalent
    } else {
        Verdict::Inconclusive
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{HigherIsBetter, LowerIsBetter};

    fn ci(low: f64, high: f64) -> Interval {
        Interval {
            low,
            high,
            confidence: 0.95,
        }
    }

    #[test]
    fn delta_percent_is_signed_relative_change() {
        assert_eq!(delta_percent(100.0, 105.0), Some(5.0));
        assert_eq!(delta_percent(100.0, 95.0), Some(-5.0));
        assert_eq!(delta_percent(200.0, 200.0), Some(0.0));
        assert_eq!(delta_percent(0.0, 1.0), None);
        assert_eq!(delta_percent(f64::NAN, 1.0), None);
        assert_eq!(delta_percent(1.0, f64::INFINITY), None);
        // Overflowing result.
        assert_eq!(delta_percent(1e-308, 1e300), None);
    }

    #[test]
    fn worse_change_follows_direction() {
        assert_eq!(LowerIsBetter.worse_change_percent(5.0), 5.0);
        assert_eq!(HigherIsBetter.worse_change_percent(5.0), -5.0);
        assert_eq!(HigherIsBetter.worse_change_percent(-3.0), 3.0);
        assert_eq!(HigherIsBetter.worse_interval(&ci(-4.0, 2.0)), (-2.0, 4.0));
    }

    #[test]
    fn regression_threshold_boundary_is_inclusive() {
        // Latency: +5% passes, a hair more fails, improvements pass.
        assert!(within_regression_threshold(LowerIsBetter, 5.0, 5.0));
        assert!(!within_regression_threshold(LowerIsBetter, 5.000001, 5.0));
        assert!(within_regression_threshold(LowerIsBetter, -40.0, 5.0));
        // Throughput: a 5% drop passes, a 5.1% drop fails, a gain passes.
        assert!(within_regression_threshold(HigherIsBetter, -5.0, 5.0));
        assert!(!within_regression_threshold(HigherIsBetter, -5.1, 5.0));
        assert!(within_regression_threshold(HigherIsBetter, 12.0, 5.0));
        assert!(!within_regression_threshold(LowerIsBetter, f64::NAN, 5.0));
    }

    #[test]
    fn verdict_examples_lower_is_better() {
        let v = |l, h| verdict(LowerIsBetter, &ci(l, h), 5.0);
        assert_eq!(v(6.0, 9.0), Verdict::Regressed);
        assert_eq!(v(5.0, 9.0), Verdict::Inconclusive); // w_lo == T: not beyond
        assert_eq!(v(1.0, 8.0), Verdict::Inconclusive); // worse, maybe within T
        assert_eq!(v(-10.0, -6.0), Verdict::Improved); // mirror of [6, 9]... beyond -T
        assert_eq!(v(-10.0, -2.0), Verdict::Inconclusive); // mirror of [2, 10]
        assert_eq!(v(-3.0, -1.0), Verdict::Equivalent); // inside ±T
        assert_eq!(v(-3.0, 0.0), Verdict::Equivalent);
        assert_eq!(v(1.0, 3.0), Verdict::Equivalent); // tolerated regression
        assert_eq!(v(-5.0, 5.0), Verdict::Equivalent); // boundaries inclusive
        assert_eq!(v(-6.0, 4.0), Verdict::Inconclusive);
        assert_eq!(v(-10.0, 2.0), Verdict::Inconclusive);
        assert_eq!(v(-10.0, 10.0), Verdict::Inconclusive);
        assert_eq!(v(0.0, 0.0), Verdict::Equivalent);
    }

    #[test]
    fn verdict_examples_higher_is_better() {
        let v = |l, h| verdict(HigherIsBetter, &ci(l, h), 5.0);
        assert_eq!(v(-9.0, -6.0), Verdict::Regressed); // throughput down 6..9%
        assert_eq!(v(6.0, 10.0), Verdict::Improved);
        assert_eq!(v(2.0, 10.0), Verdict::Inconclusive);
        assert_eq!(v(-3.0, 3.0), Verdict::Equivalent);
        assert_eq!(v(-8.0, -1.0), Verdict::Inconclusive);
    }

    #[test]
    fn verdict_rejects_unusable_inputs() {
        let v = |c: Interval, t| verdict(LowerIsBetter, &c, t);
        assert_eq!(v(ci(f64::NAN, 1.0), 5.0), Verdict::Inconclusive);
        assert_eq!(v(ci(6.0, f64::INFINITY), 5.0), Verdict::Inconclusive);
        assert_eq!(v(ci(9.0, 6.0), 5.0), Verdict::Inconclusive);
        assert_eq!(v(ci(6.0, 9.0), -5.0), Verdict::Inconclusive);
        assert_eq!(v(ci(6.0, 9.0), f64::NAN), Verdict::Inconclusive);
        // Zero threshold is legal: any confident worsening is a regression.
        assert_eq!(v(ci(0.1, 0.2), 0.0), Verdict::Regressed);
        assert_eq!(v(ci(0.0, 0.0), 0.0), Verdict::Equivalent);
    }

    /// On a grid of intervals, each verdict's defining statement holds, the
    /// statement of every verdict ranked before it does not, and flipping the
    /// direction together with the sign of the CI changes nothing.
    #[test]
    fn verdict_rule_is_consistent_on_a_grid() {
        let t = 5.0;
        let pts: Vec<f64> = (-24..=24).map(|i| i as f64 * 0.5).collect();
        for &lo in &pts {
            for &hi in pts.iter().filter(|&&h| h >= lo) {
                let got = verdict(LowerIsBetter, &ci(lo, hi), t);
                let regressed = lo > t;
                let improved = hi < -t;
                let equivalent = -t <= lo && hi <= t;
                let want = if regressed {
                    Verdict::Regressed
                } else if improved {
                    Verdict::Improved
                } else if equivalent {
                    Verdict::Equivalent
                } else {
                    Verdict::Inconclusive
                };
                assert_eq!(got, want, "[{lo}, {hi}]");
                assert!(!(regressed && (improved || equivalent)));
                assert!(!(improved && equivalent));
                assert_eq!(verdict(HigherIsBetter, &ci(-hi, -lo), t), got);
                // Symmetry: the mirrored interval swaps regressed and improved.
                let mirrored = verdict(LowerIsBetter, &ci(-hi, -lo), t);
                let swap = |v| match v {
                    Verdict::Regressed => Verdict::Improved,
                    Verdict::Improved => Verdict::Regressed,
                    v => v,
                };
                assert_eq!(mirrored, swap(got), "[{lo}, {hi}] mirrored");
            }
        }
    }

    #[test]
    fn serde_names_are_snake_case() {
        let j = serde_json::to_string(&(Direction::LowerIsBetter, Verdict::Inconclusive)).unwrap();
        assert_eq!(j, r#"["lower_is_better","inconclusive"]"#);
    }
}
