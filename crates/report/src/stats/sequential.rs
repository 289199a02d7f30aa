//! Group-sequential boundaries by the Lan–DeMets method: the one-sided
//! nominal level of a look that spends exactly its share of alpha, given
//! the information fractions of every look before it.
//!
//! Spending a look's share `α(tₖ) − α(tₖ₋₁)` as its nominal level (the
//! union bound over looks) is valid but ignores that successive looks share
//! their data; with 15 looks the last one's level is 3–6 times too strict.
//! Here the share is the probability, under the null, of crossing at this
//! look having crossed at none before: on the score scale `S(t) = Z·√t` the
//! statistic is a Brownian motion in the information fraction, and the
//! density of `S` on the region not yet crossed is carried from look to look
//! by numerical integration (Armitage, McPherson and Rowe; Jennison and
//! Turnbull, *Group Sequential Methods*, ch. 19). Written here: no crate
//! offers it, and the gate's levels are the product's core.
//!
//! Pure functions of the fractions and the cumulative spending; no clock,
//! no randomness.

use super::special::normal_cdf;

/// Grid points never exceed this (a look this close to the next is left
/// out of the recursion instead, which only makes later boundaries stricter).
const MAX_POINTS: usize = 4001;
/// Half-width of the grid below zero, in standard deviations of `S(t)`.
const SPAN_SD: f64 = 8.0;

/// One look: its information fraction in (0, 1] and the error spent by it
/// (cumulative, `α(t)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LookSpend {
    pub fraction: f64,
    pub spent: f64,
}

/// The one-sided nominal level of the last of `looks` (in order): the
/// p-value threshold at which its bound, tested alone, crosses with
/// probability exactly its share `spent − spent before` on top of the
/// earlier looks' boundaries, under the null. Looks that spend nothing (or
/// do not advance the fraction) have no boundary and are skipped. A share
/// of zero is level 0. Never below the share itself: the first look's level
/// is its share, and a later look's is at least its share, since the
/// earlier boundaries only take paths away.
pub fn nominal_level(looks: &[LookSpend]) -> f64 {
    let Some(last) = looks.last() else {
        return 0.0;
    };
    let before = looks[..looks.len() - 1]
        .iter()
        .map(|l| l.spent)
        .fold(0.0, f64::max);
    let share = last.spent - before;
    if share <= 0.0 || !share.is_finite() {
        return 0.0;
    }
    let earlier = boundaries_before(looks);
    let level = match earlier.last() {
        None => share,
        Some(_) => level_after(&earlier, last.fraction, share),
    };
    level.max(share).min(1.0)
}

/// An earlier look that truncates the paths: its fraction and its boundary
/// on the score scale, `c = z·√t`.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    fraction: f64,
    score: f64,
}

/// The boundaries of every look before the last, computed in turn; looks
/// that spend nothing or do not advance the fraction are left out.
fn boundaries_before(looks: &[LookSpend]) -> Vec<Boundary> {
    let mut done: Vec<Boundary> = Vec::new();
    let mut spent_before = 0.0f64;
    let mut t_before = 0.0f64;
    for look in &looks[..looks.len().saturating_sub(1)] {
        let share = look.spent - spent_before;
        if share <= 0.0 || look.fraction <= t_before || look.fraction > 1.0 {
            continue;
        }
        let level = match done.last() {
            None => share,
            Some(_) => level_after(&done, look.fraction, share),
        };
        done.push(Boundary {
            fraction: look.fraction,
            score: z_of(level) * look.fraction.sqrt(),
        });
        spent_before = look.spent;
        t_before = look.fraction;
    }
    done
}

/// The nominal level at fraction `t` that crosses with probability `share`
/// beyond the boundaries `earlier`.
fn level_after(earlier: &[Boundary], t: f64, share: f64) -> f64 {
    // No boundary could be integrated: the paths are untouched, and the
    // level is the share itself.
    let Some(density) = Density::through(earlier, t) else {
        return share;
    };
    let crossing = |c: f64| density.beyond(c, t);
    // Bisection on the z scale: crossing(c) falls as c rises.
    let (mut lo, mut hi) = (-10.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if crossing(mid * t.sqrt()) > share {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-10 {
            break;
        }
    }
    normal_cdf(-hi)
}

/// `z` with upper tail `p`.
fn z_of(p: f64) -> f64 {
    -super::special::normal_quantile(p)
}

/// The sub-density of `S` at the last of the `earlier` looks on the region
/// below its boundary (mass not yet crossed), on a Simpson grid.
struct Density {
    fraction: f64,
    points: Vec<f64>,
    /// Density × Simpson weight at each point.
    weighted: Vec<f64>,
}

impl Density {
    /// Carried through every look of `earlier`, on grids fine enough for the
    /// step to the next look (the last one's step is to `t`). A look whose
    /// step is too short for [`MAX_POINTS`] is left out: its paths are
    /// carried on untruncated, which overstates later crossings and so only
    /// makes later boundaries stricter. None: no look truncated the paths.
    fn through(earlier: &[Boundary], t: f64) -> Option<Density> {
        let mut density: Option<Density> = None;
        for (i, b) in earlier.iter().enumerate() {
            let next = earlier.get(i + 1).map_or(t, |n| n.fraction);
            let Some(points) = grid(b, next - b.fraction) else {
                continue;
            };
            let values: Vec<f64> = match &density {
                None => points.iter().map(|&s| normal_pdf(s, b.fraction)).collect(),
                Some(d) => points.iter().map(|&s| d.carried(s, b.fraction)).collect(),
            };
            let weighted = simpson_weights(&points)
                .zip(values)
                .map(|(w, v)| w * v)
                .collect();
            density = Some(Density {
                fraction: b.fraction,
                points,
                weighted,
            });
        }
        density
    }

    /// The density at `s` at fraction `t` of paths that stayed below this
    /// look's boundary.
    fn carried(&self, s: f64, t: f64) -> f64 {
        let var = t - self.fraction;
        self.points
            .iter()
            .zip(&self.weighted)
            .map(|(&u, &w)| w * normal_pdf(s - u, var))
            .sum()
    }

    /// Probability of being at or above `c` at fraction `t`, having stayed
    /// below every earlier boundary.
    fn beyond(&self, c: f64, t: f64) -> f64 {
        let sd = (t - self.fraction).sqrt();
        self.points
            .iter()
            .zip(&self.weighted)
            .map(|(&u, &w)| w * normal_cdf((u - c) / sd))
            .sum()
    }
}

/// Points from `SPAN_SD` standard deviations below zero to the boundary
/// (or as far above zero), spaced at most a quarter of the next step's
/// standard deviation; an odd count for Simpson's rule.
fn grid(b: &Boundary, step: f64) -> Option<Vec<f64>> {
    if step <= 0.0 {
        return None;
    }
    let sd = b.fraction.sqrt();
    let (lo, hi) = (-SPAN_SD * sd, b.score.min(SPAN_SD * sd));
    if hi <= lo {
        return Some(vec![lo, lo, lo]);
    }
    let h = (step.sqrt() / 4.0).min(sd / 20.0);
    let mut n = ((hi - lo) / h).ceil() as usize + 1;
    if n > MAX_POINTS {
        return None;
    }
    n = n.max(101) | 1;
    Some(
        (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
            .collect(),
    )
}

/// Simpson's weights over an evenly spaced grid of odd length.
fn simpson_weights(points: &[f64]) -> impl Iterator<Item = f64> + '_ {
    let n = points.len();
    let h = if n > 1 {
        (points[n - 1] - points[0]) / (n - 1) as f64
    } else {
        0.0
    };
    (0..n).map(move |i| {
        let k = if i == 0 || i == n - 1 {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        k * h / 3.0
    })
}

/// The normal density with mean 0 and variance `var` at `x`.
fn normal_pdf(x: f64, var: f64) -> f64 {
    (-0.5 * x * x / var).exp() / (2.0 * std::f64::consts::PI * var).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;
    use crate::stats::special::normal_quantile;

    /// The two Lan–DeMets spending functions, written out here as the
    /// published tables define them (`evidence::Spending` is the product's
    /// copy; importing it would make this leaf depend on its user).
    #[derive(Debug, Clone, Copy)]
    enum Spending {
        OBrienFleming,
        Pocock,
    }

    impl Spending {
        fn spent(self, alpha: f64, t: f64) -> f64 {
            match self {
                Spending::OBrienFleming => {
                    2.0 * (1.0 - normal_cdf(normal_quantile(1.0 - alpha / 2.0) / t.sqrt()))
                }
                Spending::Pocock => alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            }
        }
    }

    fn looks(alpha: f64, fractions: &[f64], spending: Spending) -> Vec<LookSpend> {
        fractions
            .iter()
            .map(|&t| LookSpend {
                fraction: t,
                spent: spending.spent(alpha, t),
            })
            .collect()
    }

    fn normal(r: &mut Xoshiro256) -> f64 {
        let u1 = 1.0 - r.next_f64();
        let u2 = r.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn z_bounds(alpha: f64, fractions: &[f64], spending: Spending) -> Vec<f64> {
        let all = looks(alpha, fractions, spending);
        (1..=all.len())
            .map(|k| z_of(nominal_level(&all[..k])))
            .collect()
    }

    /// The published boundaries (gsDesign's `sfLDOF` and `sfLDPocock`, and
    /// ldbounds, for five equally spaced looks at one-sided 0.025): an
    /// independent implementation of the same method.
    #[test]
    fn boundaries_match_the_published_tables() {
        let t = [0.2, 0.4, 0.6, 0.8, 1.0];
        let obf = z_bounds(0.025, &t, Spending::OBrienFleming);
        for (got, want) in obf.iter().zip([4.877, 3.357, 2.680, 2.290, 2.031]) {
            assert!((got - want).abs() < 2e-3, "OBF {obf:?}");
        }
        let pocock = z_bounds(0.025, &t, Spending::Pocock);
        for (got, want) in pocock.iter().zip([2.438, 2.427, 2.410, 2.397, 2.386]) {
            assert!((got - want).abs() < 2e-3, "Pocock {pocock:?}");
        }
    }

    /// One look is a fixed-size test; every level is at least its share,
    /// and the last of 15 is far above it (what the union bound wasted).
    #[test]
    fn a_level_is_never_below_its_share() {
        let one = nominal_level(&looks(0.05, &[1.0], Spending::OBrienFleming));
        assert!((one - 0.05).abs() < 1e-12, "{one}");
        let t: Vec<f64> = (1..=15).map(|k| k as f64 / 15.0).collect();
        for spending in [Spending::OBrienFleming, Spending::Pocock] {
            let all = looks(0.05, &t, spending);
            for k in 1..=t.len() {
                let share = all[k - 1].spent - if k > 1 { all[k - 2].spent } else { 0.0 };
                let level = nominal_level(&all[..k]);
                assert!(level >= share, "{spending:?} look {k}: {level} < {share}");
            }
            let last = nominal_level(&all);
            let share = all[14].spent - all[13].spent;
            assert!(last > 3.0 * share, "{spending:?}: {last} vs {share}");
        }
        // A look too close to the next to integrate is left out of the
        // recursion: the next look's level stays finite, at least its share,
        // and no looser than with that look truly taken into account.
        let close = looks(0.05, &[0.5, 0.5 + 1e-7, 1.0], Spending::OBrienFleming);
        let (with, without) = (nominal_level(&close), nominal_level(&[close[0], close[2]]));
        let share = close[2].spent - close[1].spent;
        assert!(with.is_finite() && with >= share, "{with} vs {share}");
        assert!(with <= without + 1e-9, "{with} vs {without}");
        // Nothing spent: level 0; a look that does not advance is skipped.
        assert_eq!(nominal_level(&[]), 0.0);
        let stuck = [
            LookSpend {
                fraction: 0.5,
                spent: 0.01,
            },
            LookSpend {
                fraction: 0.5,
                spent: 0.01,
            },
        ];
        assert_eq!(nominal_level(&stuck), 0.0);
    }

    /// Brownian paths at the looks' fractions cross the boundaries with
    /// probability α in all (and each look with its share): the levels
    /// spend what they claim, for uneven, re-planned fractions too.
    #[test]
    fn simulated_paths_cross_with_the_spent_probability() {
        let alpha = 0.05;
        let schedules: [&[f64]; 3] = [
            &[0.2, 0.4, 0.6, 0.8, 1.0],
            &[
                1.0 / 15.0,
                2.0 / 15.0,
                3.0 / 14.0,
                4.0 / 14.0,
                5.0 / 13.0,
                6.0 / 12.0,
                1.0,
            ],
            &[
                0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 1.0,
            ],
        ];
        let trials = 200_000;
        let mut r = Xoshiro256::new(2031);
        for (i, t) in schedules.iter().enumerate() {
            for spending in [Spending::OBrienFleming, Spending::Pocock] {
                let all = looks(alpha, t, spending);
                let bounds: Vec<f64> = (1..=t.len())
                    .map(|k| z_of(nominal_level(&all[..k])))
                    .collect();
                let mut crossed = 0usize;
                for _ in 0..trials {
                    let (mut s, mut before) = (0.0f64, 0.0f64);
                    for (k, &tk) in t.iter().enumerate() {
                        s += (tk - before).sqrt() * normal(&mut r);
                        before = tk;
                        if s / tk.sqrt() >= bounds[k] {
                            crossed += 1;
                            break;
                        }
                    }
                }
                let rate = crossed as f64 / trials as f64;
                // Three standard errors of a 200k-trial binomial at 0.05.
                assert!(
                    (rate - alpha).abs()
                        < 3.0 * (alpha * (1.0 - alpha) / trials as f64).sqrt() + 1e-3,
                    "schedule {i} {spending:?}: {rate}"
                );
            }
        }
    }
}
