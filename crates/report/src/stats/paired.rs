//! The difference of two proportions measured on the same items: task
//! accuracy, where both runtimes answer the same questions. Pairing is what
//! makes a small task set decisive: two runtimes that agree on every item
//! differ by exactly zero, and only the discordant items carry variance.
//!
//! The gate's bounds invert Tango's score test ([`drop_bounds_score`]).
//! Newcombe's hybrid score interval for paired proportions (1998, method
//! 10; `paired_difference`, kept for the tests) is the other standard choice; it undercovers
//! where all discordance runs one way (a runtime that only loses answers,
//! the case the gate is for): simulated at the margin its one-sided
//! 98.75 % bound covered 97.1 %. Bonferroni-combined Clopper–Pearson bounds
//! of the lost and gained shares hold their level but had 10 % power where
//! the score bounds have 75 % (60 items, a 19.5-point drop). The simulation
//! in `quality` compares them.

use serde::{Deserialize, Serialize};

#[cfg(test)]
use super::evidence::wilson;
use super::special::normal_quantile;

/// The 2×2 table of paired outcomes: item by item, was each side right?
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairedCounts {
    /// Both right.
    pub both: u64,
    /// The baseline right, the candidate wrong (a loss).
    pub baseline_only: u64,
    /// The candidate right, the baseline wrong (a gain).
    pub candidate_only: u64,
    /// Both wrong.
    pub neither: u64,
}

impl PairedCounts {
    pub fn from_pairs(pairs: impl IntoIterator<Item = (bool, bool)>) -> PairedCounts {
        let mut t = PairedCounts::default();
        for (b, c) in pairs {
            match (b, c) {
                (true, true) => t.both += 1,
                (true, false) => t.baseline_only += 1,
                (false, true) => t.candidate_only += 1,
                (false, false) => t.neither += 1,
            }
        }
        t
    }

    pub fn n(&self) -> u64 {
        self.both + self.baseline_only + self.candidate_only + self.neither
    }

    pub fn baseline_correct(&self) -> u64 {
        self.both + self.baseline_only
    }

    pub fn candidate_correct(&self) -> u64 {
        self.both + self.candidate_only
    }

    /// Baseline accuracy − candidate accuracy (positive is worse).
    pub fn drop(&self) -> f64 {
        let n = self.n();
        if n == 0 {
            return 0.0;
        }
        (self.baseline_only as f64 - self.candidate_only as f64) / n as f64
    }

    /// The table scaled to `n` items, proportions held (for "how many items
    /// would decide"); rounding keeps it approximate by an item or two.
    pub fn scaled(&self, n: u64) -> PairedCounts {
        let m = self.n().max(1) as f64;
        let at = |k: u64| ((k as f64) * n as f64 / m).round() as u64;
        PairedCounts {
            both: at(self.both),
            baseline_only: at(self.baseline_only),
            candidate_only: at(self.candidate_only),
            neither: at(self.neither),
        }
    }
}

/// One-sided bounds of the accuracy drop p_baseline − p_candidate: the
/// lower at level `alpha_lower`, the upper at `alpha_upper`, by inverting
/// Tango's score test for paired proportions (Tango 1998, "Equivalence test
/// and confidence interval for the difference in proportions for the paired
/// -sample design"): Z(Δ) = (b − c − nΔ) / sqrt(n (2 q̃ + Δ (1 − Δ))), q̃ the
/// gains' share restricted to Δ, solved by bisection.
pub fn drop_bounds_score(t: &PairedCounts, alpha_lower: f64, alpha_upper: f64) -> (f64, f64) {
    if t.n() == 0 {
        return (-1.0, 1.0);
    }
    let z = |a: f64| normal_quantile(1.0 - a);
    // Z falls as Δ rises: the lower bound is where Z = z, the upper where Z = −z.
    let lower = solve_decreasing(|d| tango_z(t, d), z(alpha_lower));
    let upper = solve_decreasing(|d| tango_z(t, d), -z(alpha_upper));
    (lower, upper)
}

/// Tango's score statistic at drop `d`.
fn tango_z(t: &PairedCounts, d: f64) -> f64 {
    let n = t.n() as f64;
    let (b, c) = (t.baseline_only as f64, t.candidate_only as f64);
    let a2 = 2.0 * n;
    let bb = -b - c + (2.0 * n - b + c) * d;
    let cc = -c * d * (1.0 - d);
    let q = ((bb * bb - 4.0 * a2 * cc).max(0.0).sqrt() - bb) / (2.0 * a2);
    let var = n * (2.0 * q + d * (1.0 - d));
    let num = b - c - n * d;
    if var <= 0.0 {
        // Only at d = ±1 or an empty discordance at d = 0: the sign decides.
        return if num > 0.0 {
            f64::INFINITY
        } else if num < 0.0 {
            f64::NEG_INFINITY
        } else {
            0.0
        };
    }
    num / var.sqrt()
}

/// The d in [−1, 1] where the decreasing `f` crosses `target` (bisection to 1e-9).
fn solve_decreasing(f: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (-1.0f64, 1.0f64);
    if f(lo) <= target {
        return lo;
    }
    if f(hi) >= target {
        return hi;
    }
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Two-sided interval of the accuracy drop p_baseline − p_candidate at
/// `confidence`; (−1, 1) for an empty table. Newcombe's method 10: the
/// reference the gate's bounds were chosen against (tests only).
#[cfg(test)]
pub(crate) fn paired_difference(t: &PairedCounts, confidence: f64) -> (f64, f64) {
    let n = t.n();
    if n == 0 {
        return (-1.0, 1.0);
    }
    let z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    let (x1, x2) = (t.baseline_correct(), t.candidate_correct());
    let (p1, p2) = (x1 as f64 / n as f64, x2 as f64 / n as f64);
    let (l1, u1) = wilson(x1, n, z);
    let (l2, u2) = wilson(x2, n, z);
    let phi = phi(t);
    let d = p1 - p2;
    let (a1, b2) = (p1 - l1, u2 - p2);
    let (c1, e2) = (u1 - p1, p2 - l2);
    let lo = d - (a1 * a1 - 2.0 * phi * a1 * b2 + b2 * b2).max(0.0).sqrt();
    let hi = d + (c1 * c1 - 2.0 * phi * c1 * e2 + e2 * e2).max(0.0).sqrt();
    (lo.max(-1.0), hi.min(1.0))
}

/// The phi coefficient of the table with Newcombe's continuity correction
/// (a positive ad − bc is shrunk by n/2, to 0 at most: without it the
/// interval undercovers at small n); 0 where a margin is empty (the
/// correlation is undefined and the unpaired interval is the safe side).
#[cfg(test)]
fn phi(t: &PairedCounts) -> f64 {
    let (a, b, c, d) = (
        t.both as f64,
        t.baseline_only as f64,
        t.candidate_only as f64,
        t.neither as f64,
    );
    let denom = ((a + b) * (c + d) * (a + c) * (b + d)).sqrt();
    if denom == 0.0 {
        return 0.0;
    }
    let (ad_bc, half_n) = (a * d - b * c, (a + b + c + d) / 2.0);
    let corrected = if ad_bc > half_n {
        ad_bc - half_n
    } else if ad_bc < 0.0 {
        ad_bc
    } else {
        0.0
    };
    corrected / denom
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;

    #[test]
    fn matches_an_independent_implementation() {
        // Newcombe's method 10 as R's biostatUZH::confIntPairedProportion
        // writes it, evaluated separately (Python): 12, 5, 2, 21 at 95 %
        // gives −0.05942 to 0.20462; 30, 9, 3, 18 at 90 % 0.00344 to 0.19313.
        let t = PairedCounts {
            both: 12,
            baseline_only: 5,
            candidate_only: 2,
            neither: 21,
        };
        let (lo, hi) = paired_difference(&t, 0.95);
        assert!((t.drop() - 0.075).abs() < 1e-12);
        assert!((lo - -0.059_418).abs() < 1e-5, "{lo}");
        assert!((hi - 0.204_623).abs() < 1e-5, "{hi}");
        let t = PairedCounts {
            both: 30,
            baseline_only: 9,
            candidate_only: 3,
            neither: 18,
        };
        let (lo, hi) = paired_difference(&t, 0.90);
        assert!((lo - 0.003_441).abs() < 1e-5, "{lo}");
        assert!((hi - 0.193_133).abs() < 1e-5, "{hi}");
    }

    #[test]
    fn score_bounds_solve_tangos_equation_and_bracket_the_drop() {
        let t = PairedCounts {
            both: 30,
            baseline_only: 9,
            candidate_only: 3,
            neither: 18,
        };
        let (lo, hi) = drop_bounds_score(&t, 0.05, 0.05);
        assert!(lo < t.drop() && t.drop() < hi);
        let z = normal_quantile(0.95);
        assert!((tango_z(&t, lo) - z).abs() < 1e-4);
        assert!((tango_z(&t, hi) + z).abs() < 1e-4);
        // No discordant item: the upper bound is z² / (n + z²).
        let t = PairedCounts {
            both: 60,
            neither: 40,
            ..Default::default()
        };
        let (lo, hi) = drop_bounds_score(&t, 0.0125, 0.0125);
        let z2 = normal_quantile(1.0 - 0.0125).powi(2);
        assert!((hi - z2 / (100.0 + z2)).abs() < 1e-6, "{hi}");
        assert!((lo + z2 / (100.0 + z2)).abs() < 1e-6, "{lo}");
    }

    #[test]
    fn identical_answers_give_a_narrow_interval_around_zero() {
        let t = PairedCounts {
            both: 40,
            neither: 20,
            ..Default::default()
        };
        let (lo, hi) = paired_difference(&t, 0.90);
        assert!(lo <= 0.0 && hi >= 0.0);
        assert!((hi - 0.030_430).abs() < 1e-5, "{hi}");
        // The unpaired interval on the same margins is several times wider.
        let (_, uhi) = crate::stats::newcombe_difference(40, 60, 40, 60, 0.90);
        assert!(uhi > 3.0 * hi, "{uhi} vs {hi}");
    }

    /// Coverage of the two-sided 90 % interval, seeded: items with a
    /// per-item ability, two runtimes that flip a share of answers.
    #[test]
    fn coverage_is_near_nominal_in_a_simulation() {
        let mut rng = Xoshiro256::new(11);
        for (n, flip_loss, flip_gain) in [(60, 0.05, 0.02), (100, 0.10, 0.0), (200, 0.02, 0.02)] {
            let trials = 2000;
            let mut covered = 0;
            for _ in 0..trials {
                let mut pairs = Vec::new();
                for _ in 0..n {
                    let b = rng.next_f64() < 0.6;
                    let u = rng.next_f64();
                    let c = if b { u >= flip_loss } else { u < flip_gain };
                    pairs.push((b, c));
                }
                let t = PairedCounts::from_pairs(pairs);
                let truth = 0.6 * flip_loss - 0.4 * flip_gain;
                let (lo, hi) = paired_difference(&t, 0.90);
                covered += usize::from(lo <= truth && truth <= hi);
            }
            let cov = covered as f64 / trials as f64;
            assert!(
                cov >= 0.87,
                "n={n} loss={flip_loss} gain={flip_gain}: {cov}"
            );
        }
    }
}
