//! A stream of builds, each qualified against the one before it: how far
//! the stream has drifted since an anchor, and which builds changed it.
//!
//! Each qualification pairs build k (candidate) with build k − 1
//! (baseline) and gives, per cell and metric, a [`Step`]: the paired log
//! ratio ln(candidate/baseline), its standard error and degrees of
//! freedom, unadjusted for the gate's sequential looks. A step within its
//! ±5 % margin passes its own gate, so a drift of −2 % per build passes
//! every gate while ten builds lose a fifth; `chain` sums the steps since
//! the anchor and gates the sum, `change` finds the build that shifted the
//! level and where a drift began. Pure functions of the steps: no I/O, no
//! clock, no randomness. docs/history.md says what each result claims.
//!
//! Build numbering: the anchor is build 0 and `steps[k]` qualifies build
//! k + 1 against build k.

pub mod chain;
pub mod change;
#[cfg(test)]
mod simulation;

pub use chain::{Cumulative, Worse, cumulative, direct_remeasure_is_tighter, drift_gate};
pub use change::{
    ChangeKind, ChangePoint, ChangePointRule, DEFAULT_HORIZON, HistoryError, change_points,
    change_points_with,
};

use serde::{Deserialize, Serialize};

/// One qualification's paired estimate for one cell and metric:
/// ln(candidate/baseline), its standard error (log scale) and degrees of
/// freedom (`f64::INFINITY` for a normal one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub log_ratio: f64,
    pub standard_error: f64,
    pub df: f64,
}

impl Step {
    /// A finite log ratio, a finite positive standard error and `df > 0`
    /// (infinite allowed): what every function here needs of a step.
    pub fn is_valid(&self) -> bool {
        self.log_ratio.is_finite()
            && self.standard_error.is_finite()
            && self.standard_error > 0.0
            && self.df > 0.0
    }

    /// Two-sided p-value of "no change" (log ratio 0), from Student's t.
    pub fn p_value(&self) -> f64 {
        two_sided_p(self.log_ratio / self.standard_error, self.df)
    }
}

/// `P(|T| ≥ |t|)` for Student's t with `df` degrees of freedom (normal at
/// `df = ∞`): `I_{df/(df+t²)}(df/2, 1/2)`.
pub(crate) fn two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    if df.is_infinite() {
        return libm::erfc(t.abs() / std::f64::consts::SQRT_2).min(1.0);
    }
    crate::stats::special::regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values: scipy.stats.t.sf(|t|, df) * 2 and norm.
    #[test]
    fn two_sided_p_matches_reference_values() {
        for (t, df, want) in [
            (2.042_272_456_301_238, 30.0, 0.05),
            (-2.042_272_456_301_238, 30.0, 0.05),
            (3.0, 10.0, 0.013_343_655_022_570_9),
            (1.959_963_984_540_054, f64::INFINITY, 0.05),
        ] {
            let got = two_sided_p(t, df);
            assert!((got - want).abs() < 1e-9, "t={t} df={df}: {got}");
        }
        assert_eq!(two_sided_p(0.0, 5.0), 1.0);
    }

    #[test]
    fn a_step_needs_a_positive_standard_error() {
        let ok = Step {
            log_ratio: -0.01,
            standard_error: 0.01,
            df: 30.0,
        };
        assert!(ok.is_valid());
        for bad in [
            Step {
                standard_error: 0.0,
                ..ok
            },
            Step {
                log_ratio: f64::NAN,
                ..ok
            },
            Step { df: 0.0, ..ok },
            Step { df: f64::NAN, ..ok },
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
        assert!(
            Step {
                df: f64::INFINITY,
                ..ok
            }
            .is_valid()
        );
    }
}
