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

use super::evidence::Spending;
use super::memo::Memo;
use super::special::normal_cdf;
use std::sync::Arc;

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
    if looks.is_empty() {
        return 0.0;
    }
    // Every run of a design asks for the levels of the same schedules:
    // each is integrated once.
    LEVELS.get_or(key(looks), || computed_level(looks))
}

/// Schedules whose levels are kept (twice this at most).
static LEVELS: Memo<Vec<[u64; 2]>, f64> = Memo::new(4096);

/// The paths through schedules' looks, kept: a run's next look extends
/// the schedule of this one, so each look's step is integrated once. A
/// density is at most [`MAX_POINTS`] pairs of `f64` (64 KB), most a few
/// hundred; twice this many are kept at most.
static PATHS: Memo<Vec<[u64; 2]>, Arc<Paths>> = Memo::new(256);

/// A schedule as the memos know it: its looks' bits.
fn key(looks: &[LookSpend]) -> Vec<[u64; 2]> {
    looks
        .iter()
        .map(|l| [l.fraction.to_bits(), l.spent.to_bits()])
        .collect()
}

/// The last look and the error it adds to what the looks before it spent;
/// None when it adds nothing (no look, or a share not above 0).
fn last_share(looks: &[LookSpend]) -> Option<(&LookSpend, f64)> {
    let last = looks.last()?;
    let before = looks[..looks.len() - 1]
        .iter()
        .map(|l| l.spent)
        .fold(0.0, f64::max);
    let share = last.spent - before;
    (share > 0.0 && share.is_finite()).then_some((last, share))
}

/// [`nominal_level`] integrated.
fn computed_level(looks: &[LookSpend]) -> f64 {
    let Some((last, share)) = last_share(looks) else {
        return 0.0;
    };
    let paths = paths_through(&looks[..looks.len() - 1]);
    // Where this look's level is the boundary the paths through it are cut
    // at (it spends the same share), the two are made at once, and the
    // paths kept for the next look of the run.
    let same_share = (last.spent - paths.spent_before).to_bits() == share.to_bits();
    let cut = if same_share {
        paths.through(last)
    } else {
        None
    };
    let level = match cut {
        Some((next, level)) => {
            PATHS.insert(key(looks), Arc::new(next));
            level
        }
        None => match paths.last {
            None => share,
            Some(_) => level_after(
                paths.carried_to(last.fraction).as_ref(),
                last.fraction,
                share,
            ),
        },
    };
    level.max(share).min(1.0)
}

/// The exact level of the last look of one side of a gate spending
/// `alpha`'s spending function over `share` (1 for a pass side, the pairs
/// for a fail side that splits its error over them) at `fractions`, every
/// look's in order (a fraction below an earlier one counts as that one; a
/// fraction of 1 spends all that is left, and after it a side has nothing:
/// level 0, drawn at the smallest positive).
pub fn side_level(alpha: f64, share: f64, fractions: &[f64], spending: Spending) -> f64 {
    let mut reached = 0.0f64;
    let looks: Vec<LookSpend> = fractions
        .iter()
        .map(|&t| {
            reached = reached.max(t.clamp(0.0, 1.0));
            let spent = if reached >= 1.0 {
                alpha
            } else {
                spending.spent(alpha, reached)
            } / share;
            LookSpend {
                fraction: reached,
                spent,
            }
        })
        .collect();
    nominal_level(&looks).max(f64::MIN_POSITIVE)
}

/// An earlier look that truncates the paths: its fraction and its boundary
/// on the score scale, `c = z·√t`.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    fraction: f64,
    score: f64,
}

/// The paths through every one of `looks` (each a boundary, in turn;
/// looks that spend nothing or do not advance the fraction are left out),
/// from the longest of its schedules memoized.
fn paths_through(looks: &[LookSpend]) -> Arc<Paths> {
    let mut known = looks.len();
    let mut paths = loop {
        if known == 0 {
            break Arc::new(Paths::default());
        }
        if let Some(p) = PATHS.get(&key(&looks[..known])) {
            break p;
        }
        known -= 1;
    };
    for k in known..looks.len() {
        if let Some((next, _)) = paths.through(&looks[k]) {
            paths = Arc::new(next);
        }
        PATHS.insert(key(&looks[..=k]), paths.clone());
    }
    paths
}

/// The last boundary so far, with the density carried through every one
/// before it (whose grid depends on the step to this one), and what the
/// boundaries have spent. Carrying it look by look keeps a schedule's cost
/// linear in its looks.
#[derive(Default)]
struct Paths {
    last: Option<Boundary>,
    density: Option<Density>,
    spent_before: f64,
    t_before: f64,
}

impl Paths {
    /// These paths cut at `look`'s boundary too, with its level; `None`
    /// when the look is left out (it spends nothing or does not advance
    /// the fraction).
    fn through(&self, look: &LookSpend) -> Option<(Paths, f64)> {
        let share = look.spent - self.spent_before;
        if share <= 0.0 || look.fraction <= self.t_before || look.fraction > 1.0 {
            return None;
        }
        let density = self.carried_to(look.fraction);
        let level = match self.last {
            None => share,
            Some(_) => level_after(density.as_ref(), look.fraction, share),
        };
        let next = Paths {
            last: Some(Boundary {
                fraction: look.fraction,
                score: z_of(level) * look.fraction.sqrt(),
            }),
            density,
            spent_before: look.spent,
            t_before: look.fraction,
        };
        Some((next, level))
    }

    /// The sub-density at the last boundary, on a grid fine enough for the
    /// step to `t`: what [`level_after`] integrates. None: no look
    /// truncated the paths.
    fn carried_to(&self, t: f64) -> Option<Density> {
        match &self.last {
            None => None,
            Some(b) => Density::step(self.density.as_ref(), b, t),
        }
    }
}

/// The nominal level at fraction `t` that crosses with probability `share`
/// beyond the boundaries `density` was carried through.
fn level_after(density: Option<&Density>, t: f64, share: f64) -> f64 {
    // No boundary could be integrated: the paths are untouched, and the
    // level is the share itself.
    let Some(density) = density else {
        return share;
    };
    bisect_level(|c| density.beyond(c, t), t, share)
}

/// The nominal level whose boundary at fraction `t` (on the score scale)
/// is crossed with probability `share`: bisection on the z scale, since
/// `crossing(c)` falls as `c` rises.
fn bisect_level(crossing: impl Fn(f64) -> f64, t: f64, share: f64) -> f64 {
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
#[derive(Clone)]
struct Density {
    fraction: f64,
    points: Vec<f64>,
    /// Density × Simpson weight at each point.
    weighted: Vec<f64>,
}

impl Density {
    /// `before` (None: no look before `b` truncated the paths) carried to
    /// look `b` and truncated at its boundary, on a grid fine enough for the
    /// step to `next`. A look whose step is too short for [`MAX_POINTS`] is
    /// left out: its paths are carried on untruncated, which overstates
    /// later crossings and so only makes later boundaries stricter.
    fn step(before: Option<&Density>, b: &Boundary, next: f64) -> Option<Density> {
        let Some(points) = grid(b, next - b.fraction) else {
            return before.cloned();
        };
        let values: Vec<f64> = match before {
            None => points.iter().map(|&s| normal_pdf(s, b.fraction)).collect(),
            Some(d) => points.iter().map(|&s| d.carried(s, b.fraction)).collect(),
        };
        let weighted = simpson_weights(&points)
            .zip(values)
            .map(|(w, v)| w * v)
            .collect();
        Some(Density {
            fraction: b.fraction,
            points,
            weighted,
        })
    }

    /// The density at `s` at fraction `t` of paths that stayed below this
    /// look's boundary.
    fn carried(&self, s: f64, t: f64) -> f64 {
        let var = t - self.fraction;
        let near = self.within(s, KERNEL_SD * var.sqrt());
        self.points[near.clone()]
            .iter()
            .zip(&self.weighted[near])
            .map(|(&u, &w)| w * normal_pdf(s - u, var))
            .sum()
    }

    /// The indices of the grid points within `reach` of `s` (a point more
    /// beyond it may be included; none nearer is left out).
    fn within(&self, s: f64, reach: f64) -> std::ops::Range<usize> {
        let n = self.points.len();
        let (first, last) = (self.points[0], self.points[n - 1]);
        let h = (last - first) / (n - 1) as f64;
        if !h.is_finite() || h <= 0.0 || !reach.is_finite() {
            return 0..n;
        }
        let index = |x: f64| ((x - first) / h).clamp(0.0, (n - 1) as f64);
        // One point of slack each side for the grid's rounding.
        let lo = (index(s - reach).floor() as usize).saturating_sub(1);
        let hi = (index(s + reach).ceil() as usize + 2).min(n);
        lo..hi
    }

    /// Probability of being at or above `c` at fraction `t`, having stayed
    /// below every earlier boundary.
    fn beyond(&self, c: f64, t: f64) -> f64 {
        let sd = (t - self.fraction).sqrt();
        self.points
            .iter()
            .zip(&self.weighted)
            .map(|(&u, &w)| w * saturated_normal_cdf((u - c) / sd))
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

/// [`normal_cdf`] without calling `erfc` where its value in `f64` is exactly
/// 0 or 1 (most of a grid lies there, and `beyond` runs once per bisection
/// step): the same values, so the same sums.
fn saturated_normal_cdf(z: f64) -> f64 {
    if z >= CDF_IS_ONE {
        1.0
    } else if z <= -CDF_IS_ZERO {
        0.0
    } else {
        normal_cdf(z)
    }
}

/// `normal_cdf(z)` is exactly 1 in `f64` from here up (`erfc(-z/√2)` rounds
/// to 2 once `erfc(z/√2)` is below half an ulp of 2).
const CDF_IS_ONE: f64 = 9.0;
/// `normal_cdf(-z)` is exactly 0 from here up (`erfc` underflows).
const CDF_IS_ZERO: f64 = 40.0;

/// The density carried from a grid point to another further than this many
/// standard deviations of the step is below `e^-72` of its peak, beneath
/// `f64`'s resolution of the sum it would join; such pairs are skipped.
const KERNEL_SD: f64 = 12.0;

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
    /// The levels as first written: every boundary's density carried again
    /// from the first look, every grid point to every other, `erfc` at every
    /// point (the same bisection). The product's shortcuts (the density carried look by look,
    /// the kernel cut at [`KERNEL_SD`], the saturated CDF) must agree.
    fn plain_level(looks: &[LookSpend]) -> f64 {
        fn through(earlier: &[Boundary], t: f64) -> Option<(f64, Vec<f64>, Vec<f64>)> {
            let mut density: Option<(f64, Vec<f64>, Vec<f64>)> = None;
            for (i, b) in earlier.iter().enumerate() {
                let next = earlier.get(i + 1).map_or(t, |n| n.fraction);
                let Some(points) = grid(b, next - b.fraction) else {
                    continue;
                };
                let values: Vec<f64> = points
                    .iter()
                    .map(|&s| match &density {
                        None => normal_pdf(s, b.fraction),
                        Some((f, p, w)) => p
                            .iter()
                            .zip(w)
                            .map(|(&u, &w)| w * normal_pdf(s - u, b.fraction - f))
                            .sum(),
                    })
                    .collect();
                let weighted = simpson_weights(&points)
                    .zip(values)
                    .map(|(w, v)| w * v)
                    .collect();
                density = Some((b.fraction, points, weighted));
            }
            density
        }
        fn level(earlier: &[Boundary], t: f64, share: f64) -> f64 {
            let Some((f, p, w)) = through(earlier, t) else {
                return share;
            };
            let sd = (t - f).sqrt();
            let crossing = |c: f64| -> f64 {
                p.iter()
                    .zip(&w)
                    .map(|(&u, &w)| w * normal_cdf((u - c) / sd))
                    .sum()
            };
            bisect_level(crossing, t, share)
        }
        let mut done: Vec<Boundary> = Vec::new();
        let (mut spent_before, mut t_before) = (0.0f64, 0.0f64);
        let last = looks.len() - 1;
        for (k, look) in looks.iter().enumerate() {
            let share = look.spent - spent_before;
            if k == last {
                return level(&done, look.fraction, share).max(share).min(1.0);
            }
            if share <= 0.0 || look.fraction <= t_before || look.fraction > 1.0 {
                continue;
            }
            let level = level(&done, look.fraction, share);
            done.push(Boundary {
                fraction: look.fraction,
                score: z_of(level) * look.fraction.sqrt(),
            });
            spent_before = look.spent;
            t_before = look.fraction;
        }
        unreachable!()
    }

    /// The level integrated afresh, nothing memoized: every look before the
    /// last cuts the paths in turn.
    fn fresh_level(looks: &[LookSpend]) -> f64 {
        let Some((last, share)) = last_share(looks) else {
            return 0.0;
        };
        let mut paths = Paths::default();
        for look in &looks[..looks.len() - 1] {
            if let Some((next, _)) = paths.through(look) {
                paths = next;
            }
        }
        let level = match paths.last {
            None => share,
            Some(_) => level_after(
                paths.carried_to(last.fraction).as_ref(),
                last.fraction,
                share,
            ),
        };
        level.max(share).min(1.0)
    }

    /// The memoized levels are the fresh integration's, bit for bit, in
    /// whatever order schedules are asked for: a run's looks one after
    /// another, schedules re-planned from a look on (sharing a prefix),
    /// a look too close to the next, one that does not advance, and a
    /// side splitting its error (pass and fail sides share fractions but
    /// not spending).
    #[test]
    fn memoized_levels_are_the_fresh_integration_bit_for_bit() {
        let schedules: [&[f64]; 6] = [
            &[0.2, 0.4, 0.6, 0.8, 1.0],
            &[0.2, 0.4, 0.5, 0.75, 1.0],
            &[0.2, 0.3, 0.5, 0.75, 1.0],
            &[
                1.0 / 15.0,
                2.0 / 15.0,
                3.0 / 14.0,
                4.0 / 14.0,
                5.0 / 13.0,
                6.0 / 12.0,
                1.0,
            ],
            &[0.3, 0.5, 0.5 + 1e-7, 0.9, 1.0],
            &[0.25, 0.25, 0.5, 1.0],
        ];
        for spending in [Spending::OBrienFleming, Spending::Pocock] {
            for split in [1.0, 3.0] {
                let all: Vec<Vec<LookSpend>> = schedules
                    .iter()
                    .map(|t| {
                        looks(0.05, t, spending)
                            .into_iter()
                            .map(|l| LookSpend {
                                spent: l.spent / split,
                                ..l
                            })
                            .collect()
                    })
                    .collect();
                // As a run asks (each look after the one before), then the
                // longest first, then again from the memo.
                for order in 0..3 {
                    for looks in &all {
                        let mut ks: Vec<usize> = (1..=looks.len()).collect();
                        if order == 1 {
                            ks.reverse();
                        }
                        for k in ks {
                            let (memo, fresh) =
                                (nominal_level(&looks[..k]), fresh_level(&looks[..k]));
                            assert_eq!(
                                memo.to_bits(),
                                fresh.to_bits(),
                                "{spending:?} /{split} {:?} look {k}: {memo} vs {fresh}",
                                looks.iter().map(|l| l.fraction).collect::<Vec<_>>()
                            );
                        }
                    }
                }
            }
        }
    }

    /// The shortcuts change no level beyond the bisection's own tolerance,
    /// on even, uneven and re-planned schedules, including a look too close
    /// to the next to integrate.
    #[test]
    fn the_carried_density_gives_the_levels_of_the_plain_integration() {
        let schedules: [&[f64]; 4] = [
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
            &[0.3, 0.5, 0.5 + 1e-7, 0.9, 1.0],
        ];
        for t in schedules {
            for spending in [Spending::OBrienFleming, Spending::Pocock] {
                let all = looks(0.05, t, spending);
                for k in 1..=all.len() {
                    let (fast, plain) = (nominal_level(&all[..k]), plain_level(&all[..k]));
                    assert!(
                        fast == plain || (z_of(fast) - z_of(plain)).abs() < 1e-8,
                        "{t:?} {spending:?} look {k}: {fast} vs {plain}"
                    );
                }
            }
        }
    }

    /// Where [`saturated_normal_cdf`] skips `erfc`, `erfc` gives exactly what
    /// it returns instead.
    #[test]
    fn the_normal_cdf_is_saturated_where_the_shortcut_says() {
        let mut z = CDF_IS_ONE;
        while z < 60.0 {
            assert_eq!(normal_cdf(z), 1.0, "{z}");
            z += 1.0 / 64.0;
        }
        let mut z = CDF_IS_ZERO;
        while z < 80.0 {
            assert_eq!(normal_cdf(-z), 0.0, "{z}");
            z += 1.0 / 64.0;
        }
        assert!(normal_cdf(CDF_IS_ONE - 1.5) < 1.0 && normal_cdf(3.0 - CDF_IS_ZERO) > 0.0);
    }
}
