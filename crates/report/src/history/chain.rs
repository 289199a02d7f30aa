//! The drift since an anchor: the steps' log ratios summed, and a gate on
//! the sum.
//!
//! Each qualification measures both of its builds afresh, so the steps'
//! errors are independent and the sum's variance is the sum of theirs:
//! over k steps of standard error `s` the chain's is `√k · s`. Ten steps
//! of 1 % give a chain of 3.2 %; a direct re-measurement of the newest
//! build against the anchor has about one step's error, so past a few
//! steps it is the tighter check ([`direct_remeasure_is_tighter`]), and it
//! also sees what the chain cannot (docs/history.md).

use super::Step;
use crate::stats::GateOutcome;
use crate::stats::special::t_quantile;
use serde::{Deserialize, Serialize};

/// The chain of steps since the anchor: the log ratio newest/anchor, its
/// standard error, Welch–Satterthwaite degrees of freedom, and a two-sided
/// t interval at `confidence`; `ratio`, `low`, `high` are exp of the
/// estimate and the interval's ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cumulative {
    pub steps: usize,
    pub log_ratio: f64,
    pub standard_error: f64,
    pub df: f64,
    pub confidence: f64,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

/// Which way a metric gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Worse {
    /// Rates (decode tokens/s): worse when the ratio falls.
    Lower,
    /// Latencies (TTFT): worse when the ratio rises.
    Higher,
}

impl From<crate::stats::Direction> for Worse {
    fn from(d: crate::stats::Direction) -> Self {
        match d {
            crate::stats::Direction::HigherIsBetter => Worse::Lower,
            crate::stats::Direction::LowerIsBetter => Worse::Higher,
        }
    }
}

/// The sum of `steps` (every one [`Step::is_valid`]) with its interval at
/// `confidence` in (0, 1). None for no steps, an invalid step or
/// confidence.
pub fn cumulative(steps: &[Step], confidence: f64) -> Option<Cumulative> {
    if steps.is_empty() || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    if !steps.iter().all(Step::is_valid) {
        return None;
    }
    let log_ratio: f64 = steps.iter().map(|s| s.log_ratio).sum();
    let variance: f64 = steps.iter().map(|s| s.standard_error.powi(2)).sum();
    // Welch–Satterthwaite: a step of infinite df adds nothing below.
    let per_df: f64 = steps
        .iter()
        .filter(|s| s.df.is_finite())
        .map(|s| s.standard_error.powi(4) / s.df)
        .sum();
    let df = if per_df > 0.0 {
        variance * variance / per_df
    } else {
        f64::INFINITY
    };
    let standard_error = variance.sqrt();
    let half = t_quantile(0.5 + confidence / 2.0, df) * standard_error;
    Some(Cumulative {
        steps: steps.len(),
        log_ratio,
        standard_error,
        df,
        confidence,
        ratio: log_ratio.exp(),
        low: (log_ratio - half).exp(),
        high: (log_ratio + half).exp(),
    })
}

/// The drift gate on a chain: with the one-sided `1 − alpha` bounds of the
/// log ratio and the margin as a ratio (`1 − m/100` for [`Worse::Lower`],
/// `1 + m/100` for [`Worse::Higher`]), **fail** when even the bound on the
/// better side is beyond the margin, **pass** when the bound on the worse
/// side is within it (boundary included), else **inconclusive**. Each
/// error is at most `alpha` for a chain whose steps are unbiased (see
/// docs/history.md for when they are not). A margin not in (0, 100) for
/// `Lower` (or not above 0 for `Higher`) or `alpha` not in (0, 0.5) is
/// inconclusive, with the reason.
pub fn drift_gate(
    c: &Cumulative,
    margin_percent: f64,
    worse: Worse,
    alpha: f64,
) -> (GateOutcome, String) {
    if !(alpha > 0.0 && alpha < 0.5) {
        return (
            GateOutcome::Inconclusive,
            format!("alpha {alpha} is not in (0, 0.5)"),
        );
    }
    let limit = match worse {
        Worse::Lower if margin_percent > 0.0 && margin_percent < 100.0 => {
            (1.0 - margin_percent / 100.0).ln()
        }
        Worse::Higher if margin_percent > 0.0 && margin_percent.is_finite() => {
            (1.0 + margin_percent / 100.0).ln()
        }
        _ => {
            return (
                GateOutcome::Inconclusive,
                format!("margin {margin_percent} % is not a margin for this direction"),
            );
        }
    };
    let half = t_quantile(1.0 - alpha, c.df) * c.standard_error;
    let (lo, hi) = (c.log_ratio - half, c.log_ratio + half);
    // In worse terms: the change toward worse, its bound nearest better
    // (best case) and nearest worse (worst case), and the margin.
    let (best, worst, margin) = match worse {
        Worse::Lower => (-hi, -lo, -limit),
        Worse::Higher => (lo, hi, limit),
    };
    let pct = |x: f64| (x.exp() - 1.0) * 100.0;
    let what = format!(
        "{:+.2} % over {} step{} (one-sided {:.0} % bounds {:+.2} % to {:+.2} %) against a {margin_percent} % margin",
        pct(c.log_ratio),
        c.steps,
        if c.steps == 1 { "" } else { "s" },
        (1.0 - alpha) * 100.0,
        pct(lo),
        pct(hi),
    );
    if best > margin {
        (
            GateOutcome::Fail,
            format!("{what}: even the best case is worse than the margin"),
        )
    } else if worst <= margin {
        (
            GateOutcome::Pass,
            format!("{what}: even the worst case is within the margin"),
        )
    } else {
        (
            GateOutcome::Inconclusive,
            format!("{what}: the bounds straddle the margin"),
        )
    }
}

/// Whether measuring the newest build against the anchor directly, with
/// about one step's standard error `typical_step_se`, would be tighter
/// than the chain (whose error grows as `√k` × a step's).
pub fn direct_remeasure_is_tighter(c: &Cumulative, typical_step_se: f64) -> bool {
    typical_step_se.is_finite() && typical_step_se > 0.0 && c.standard_error > typical_step_se
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(log_ratio: f64) -> Step {
        Step {
            log_ratio,
            standard_error: 0.01,
            df: 30.0,
        }
    }

    #[test]
    fn the_chain_sums_logs_and_variances() {
        let steps: Vec<Step> = (0..10).map(|_| step((0.98f64).ln())).collect();
        let c = cumulative(&steps, 0.95).unwrap();
        assert_eq!(c.steps, 10);
        assert!((c.ratio - 0.98f64.powi(10)).abs() < 1e-12, "{c:?}");
        assert!((c.standard_error - 0.01 * 10f64.sqrt()).abs() < 1e-15);
        // Equal steps: Welch–Satterthwaite gives the sum of their df.
        assert!((c.df - 300.0).abs() < 1e-9, "{}", c.df);
        let half = t_quantile(0.975, 300.0) * c.standard_error;
        assert!((c.low - (c.log_ratio - half).exp()).abs() < 1e-15);
        assert!((c.high - (c.log_ratio + half).exp()).abs() < 1e-15);
        assert!(c.low < c.ratio && c.ratio < c.high);
        // One step of 3 df among big ones pulls the df down.
        let mut mixed = steps.clone();
        mixed[0].df = 3.0;
        mixed[0].standard_error = 0.05;
        assert!(cumulative(&mixed, 0.95).unwrap().df < 20.0);
        let inf: Vec<Step> = steps
            .iter()
            .map(|s| Step {
                df: f64::INFINITY,
                ..*s
            })
            .collect();
        assert_eq!(cumulative(&inf, 0.95).unwrap().df, f64::INFINITY);
        assert!(cumulative(&[], 0.95).is_none());
        assert!(cumulative(&steps, 1.0).is_none());
        let mut bad = steps.clone();
        bad[3].standard_error = f64::NAN;
        assert!(cumulative(&bad, 0.95).is_none());
    }

    #[test]
    fn a_boiling_frog_fails_the_drift_gate_while_each_step_passes_its_own() {
        // −2 % per build: each step is well inside a 5 % margin.
        let one = cumulative(&[step((0.98f64).ln())], 0.9).unwrap();
        assert_eq!(
            drift_gate(&one, 5.0, Worse::Lower, 0.05).0,
            GateOutcome::Pass
        );
        let ten = cumulative(&[step((0.98f64).ln()); 10], 0.9).unwrap();
        let (o, why) = drift_gate(&ten, 5.0, Worse::Lower, 0.05);
        assert_eq!(o, GateOutcome::Fail, "{why}");
        assert!(why.contains("-18.29 %"), "{why}");
        // The same drift on a latency is an improvement: it passes.
        assert_eq!(
            drift_gate(&ten, 5.0, Worse::Higher, 0.05).0,
            GateOutcome::Pass
        );
        // Three steps of −2 %: −5.9 % with a 1.7 % error straddles 5 %.
        let three = cumulative(&[step((0.98f64).ln()); 3], 0.9).unwrap();
        assert_eq!(
            drift_gate(&three, 5.0, Worse::Lower, 0.05).0,
            GateOutcome::Inconclusive
        );
        assert_eq!(
            drift_gate(&ten, 0.0, Worse::Lower, 0.05).0,
            GateOutcome::Inconclusive
        );
        assert_eq!(
            drift_gate(&ten, 5.0, Worse::Lower, 0.7).0,
            GateOutcome::Inconclusive
        );
    }

    #[test]
    fn the_gate_bounds_are_one_sided_at_alpha() {
        // A latency up 5 % exactly at its margin, with the worst-case bound
        // just inside or just outside.
        let t = t_quantile(0.95, 30.0);
        let at = |log_ratio: f64| Cumulative {
            steps: 1,
            log_ratio,
            standard_error: 0.01,
            df: 30.0,
            confidence: 0.9,
            ratio: log_ratio.exp(),
            low: f64::NAN,
            high: f64::NAN,
        };
        let limit = 1.05f64.ln();
        let o = |x: f64| drift_gate(&at(x), 5.0, Worse::Higher, 0.05).0;
        assert_eq!(o(limit - t * 0.01 - 1e-9), GateOutcome::Pass);
        assert_eq!(o(limit - t * 0.01 + 1e-9), GateOutcome::Inconclusive);
        assert_eq!(o(limit + t * 0.01 + 1e-9), GateOutcome::Fail);
        assert_eq!(o(limit + t * 0.01 - 1e-9), GateOutcome::Inconclusive);
    }

    #[test]
    fn a_chain_of_two_steps_is_already_wider_than_one_direct_measurement() {
        let one = cumulative(&[step(0.0)], 0.95).unwrap();
        assert!(!direct_remeasure_is_tighter(&one, 0.01));
        let two = cumulative(&[step(0.0), step(0.0)], 0.95).unwrap();
        assert!(direct_remeasure_is_tighter(&two, 0.01));
        assert!(!direct_remeasure_is_tighter(&two, 0.02));
        assert!(!direct_remeasure_is_tighter(&two, f64::NAN));
    }

    #[test]
    fn past_nine_steps_of_one_percent_the_chain_cannot_pass_a_five_percent_margin() {
        // The worst-case bound is 1.7 × √k × 1 % from the estimate: at k =
        // 10 it is 5.2 %, so even a chain at exactly 0 is inconclusive.
        let nine = cumulative(&[step(0.0); 9], 0.9).unwrap();
        assert_eq!(
            drift_gate(&nine, 5.0, Worse::Lower, 0.05).0,
            GateOutcome::Pass
        );
        let ten = cumulative(&[step(0.0); 10], 0.9).unwrap();
        assert_eq!(
            drift_gate(&ten, 5.0, Worse::Lower, 0.05).0,
            GateOutcome::Inconclusive
        );
    }
}
