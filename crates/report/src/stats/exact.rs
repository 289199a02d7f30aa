//! Exact small-count statistics for failure proportions (turnover runs).

use serde::{Deserialize, Serialize};

use super::Interval;
use super::special::{beta_quantile, ln_factorial};

/// Fisher's exact test of candidate vs baseline failure proportions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExactTest {
    /// Sum of the probabilities of all tables no more likely than the observed
    /// one (R's `fisher.test` and scipy's convention).
    pub p_two_sided: f64,
    /// One-sided p for "the candidate fails more often" (scipy `alternative="greater"`
    /// on `[[cand_failed, cand_passed], [base_failed, base_passed]]`).
    pub p_candidate_worse: f64,
    /// One-sided p for "the candidate fails less often" (`alternative="less"`).
    pub p_candidate_better: f64,
}

/// Fisher's exact test on the 2×2 table
/// `[[cand_failed, cand_n − cand_failed], [base_failed, base_n − base_failed]]`.
///
/// Conditional on the margins, the candidate's failure count is
/// hypergeometric; each p-value sums its probabilities over the relevant
/// tables. A table with an empty row or column has one possible arrangement,
/// so every p is 1. If a failure count exceeds its n, the table is impossible
/// and every p is NaN. Time is linear in the number of possible tables.
pub fn fisher_exact(cand_failed: u64, cand_n: u64, base_failed: u64, base_n: u64) -> ExactTest {
    if cand_failed > cand_n || base_failed > base_n {
        return ExactTest {
            p_two_sided: f64::NAN,
            p_candidate_worse: f64::NAN,
            p_candidate_better: f64::NAN,
        };
    }
    // Work in u128 so that no realistic count can overflow the margins.
    let (n_row, total) = (cand_n as u128, cand_n as u128 + base_n as u128);
    let k_col = cand_failed as u128 + base_failed as u128;
    let lo = n_row.saturating_sub(total - k_col) as u64;
    let hi = k_col.min(n_row) as u64;
    let (n_row, total, k_col) = (n_row as u64, total as u64, k_col as u64);

    // ln P(X = x) up to a constant shared by all x; the constant cancels when
    // we normalise by the total below, which also absorbs ln Γ's rounding.
    let ln_w = |x: u64| {
        -(ln_factorial(x)
            + ln_factorial(k_col - x)
            + ln_factorial(n_row - x)
            // In this order: `total - k_col - n_row` alone can be negative.
            + ln_factorial(total - k_col + x - n_row))
    };
    let ln_obs = ln_w(cand_failed);
    let ln_max = (lo..=hi).map(ln_w).fold(f64::NEG_INFINITY, f64::max);
    // Tables within a relative 1e-7 of the observed probability count as
    // "as extreme", so exact ties are not lost to rounding (R uses the same).
    let tie = ln_obs + 1e-7;

    let (mut all, mut le, mut ge, mut two) = (0.0, 0.0, 0.0, 0.0);
    for x in lo..=hi {
        let lw = ln_w(x);
        let w = (lw - ln_max).exp();
        all += w;
        if x <= cand_failed {
            le += w;
        }
        if x >= cand_failed {
            ge += w;
        }
        if lw <= tie {
            two += w;
        }
    }
    ExactTest {
        p_two_sided: (two / all).min(1.0),
        p_candidate_worse: (ge / all).min(1.0),
        p_candidate_better: (le / all).min(1.0),
    }
}

/// Exact (Clopper-Pearson) two-sided interval for a proportion `failed / n`.
///
/// Bounds are Beta quantiles: low = B⁻¹(α/2; k, n−k+1) (0 when k = 0),
/// high = B⁻¹(1−α/2; k+1, n−k) (1 when k = n), α = 1 − confidence. It is
/// conservative: coverage is at least `confidence` for every true proportion.
/// n = 0 gives [0, 1]; `failed > n` or a confidence outside (0, 1) gives NaN bounds.
pub fn clopper_pearson(failed: u64, n: u64, confidence: f64) -> Interval {
    let nan = Interval {
        low: f64::NAN,
        high: f64::NAN,
        confidence,
    };
    if failed > n || !(confidence > 0.0 && confidence < 1.0) {
        return nan;
    }
    let alpha = 1.0 - confidence;
    let all_failed = failed == n;
    let (k, n) = (failed as f64, n as f64);
    let low = if failed == 0 {
        0.0
    } else {
        beta_quantile(alpha / 2.0, k, n - k + 1.0)
    };
    let high = if all_failed {
        1.0
    } else {
        beta_quantile(1.0 - alpha / 2.0, k + 1.0, n - k)
    };
    Interval {
        low,
        high,
        confidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_failed_on_both_sides() {
        // Found building the `verify --runs` test (a turnover both sides failed entirely):
        // the margin arithmetic underflowed (a panic in debug builds).
        let t = fisher_exact(4, 4, 4, 4);
        assert_eq!(
            (t.p_two_sided, t.p_candidate_worse, t.p_candidate_better),
            (1.0, 1.0, 1.0)
        );
    }

    fn assert_fisher(args: (u64, u64, u64, u64), want: [f64; 3]) {
        let t = fisher_exact(args.0, args.1, args.2, args.3);
        let got = [t.p_two_sided, t.p_candidate_worse, t.p_candidate_better];
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-9,
                "{args:?}: got {got:?}, scipy {want:?}"
            );
        }
    }

    /// Reference: scipy 1.17.1 `scipy.stats.fisher_exact([[cf, cn-cf], [bf, bn-bf]],
    /// alternative=...)` for two-sided, "greater", "less".
    #[test]
    fn fisher_matches_scipy() {
        // Fisher's tea-tasting table [[3, 1], [1, 3]]: 0.4857 / 0.2429.
        assert_fisher(
            (3, 4, 1, 4),
            [0.48571428571428565, 0.24285714285714283, 0.9857142857142858],
        );
        // The seed: baseline 7/60 failed; candidate 2/60, then 3/60 on repeat.
        assert_fisher(
            (2, 60, 7, 60),
            [0.16293771185924277, 0.9839048532663724, 0.0814688559296214],
        );
        assert_fisher(
            (3, 60, 7, 60),
            [0.32234747722605045, 0.9526903795061231, 0.16117373861302525],
        );
        // Roles swapped: the one-sided values swap too.
        assert_fisher(
            (7, 60, 2, 60),
            [0.16293771185924277, 0.0814688559296214, 0.9839048532663724],
        );
        assert_fisher(
            (5, 1000, 30, 1000),
            [
                1.915557557143737e-05,
                0.9999985531440511,
                9.577787785718685e-06,
            ],
        );
        assert_fisher(
            (10, 10, 0, 10),
            [1.082508822446903e-05, 5.412544112234515e-06, 1.0],
        );
        // Degenerate margins: one possible table.
        assert_fisher((0, 60, 0, 60), [1.0, 1.0, 1.0]);
        assert_fisher((0, 0, 3, 10), [1.0, 1.0, 1.0]);
    }

    #[test]
    fn fisher_small_p_values_keep_relative_precision() {
        // 10/10 vs 0/10: P = 1 / C(20, 10) exactly for the one-sided test.
        let t = fisher_exact(10, 10, 0, 10);
        let want = 1.0 / 184_756.0;
        assert!(((t.p_candidate_worse - want) / want).abs() < 1e-12);
    }

    #[test]
    fn fisher_impossible_table_is_nan() {
        let t = fisher_exact(5, 4, 0, 4);
        assert!(t.p_two_sided.is_nan() && t.p_candidate_worse.is_nan());
    }

    /// Reference: scipy 1.17.1 `scipy.stats.binomtest(k, n).proportion_ci(
    /// confidence_level=c, method="exact")`.
    #[test]
    fn clopper_pearson_matches_scipy() {
        let cases = [
            (0, 60, 0.95, 0.0, 0.05962949228633472),
            (0, 60, 0.99, 0.0, 0.08451865273336906),
            (2, 60, 0.95, 0.004062624642031927, 0.11528104441925217),
            (2, 60, 0.99, 0.0017379556873904616, 0.14549496233725864),
            (3, 60, 0.95, 0.010432329644348218, 0.13924324672110006),
            (7, 60, 0.95, 0.048214841871314335, 0.2257161531456925),
            (7, 60, 0.99, 0.03513821081321912, 0.2621215419405143),
            (60, 60, 0.95, 0.9403705077136653, 1.0),
            (1, 1, 0.95, 0.025000000000000022, 1.0),
            (5, 1000, 0.95, 0.001625419517373302, 0.011629470559812206),
            (50, 100, 0.95, 0.39832112950330095, 0.6016788704966991),
            (50, 100, 0.99, 0.36886143735890525, 0.6311385626410948),
        ];
        for (k, n, c, lo, hi) in cases {
            let ci = clopper_pearson(k, n, c);
            assert!(
                (ci.low - lo).abs() <= 1e-12,
                "{k}/{n} @{c}: low {} vs {lo}",
                ci.low
            );
            assert!(
                (ci.high - hi).abs() <= 1e-12,
                "{k}/{n} @{c}: high {} vs {hi}",
                ci.high
            );
            assert_eq!(ci.confidence, c);
        }
        // Closed form for k = 0: upper = 1 − (α/2)^(1/n).
        let ci = clopper_pearson(0, 60, 0.95);
        assert!((ci.high - (1.0 - 0.025f64.powf(1.0 / 60.0))).abs() < 1e-12);
    }

    #[test]
    fn clopper_pearson_edges() {
        let ci = clopper_pearson(0, 0, 0.95);
        assert_eq!((ci.low, ci.high), (0.0, 1.0));
        assert!(clopper_pearson(3, 2, 0.95).low.is_nan());
        assert!(clopper_pearson(1, 2, 1.0).high.is_nan());
        assert!(clopper_pearson(1, 2, f64::NAN).high.is_nan());
    }
}
