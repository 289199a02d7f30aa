//! A probit curve fitted to grouped binomial counts: `P(success at t) =
//! Φ(a + b·t)`, by maximum likelihood (Fisher scoring with step halving).
//! Capacity reads the attainment curve against log load with it
//! (`capacity::estimate`).
//!
//! Separated data (every group all successes below some `t`, all failures
//! above) have no finite maximum; each group gets `PSEUDO_COUNT` successes
//! and failures added (a Haldane-style correction), so the fit is always
//! finite and a group of 96 of 96 reads as about 0.997, not 1.

use super::special::normal_cdf;

/// Successes and failures added to every group before the fit.
pub const PSEUDO_COUNT: f64 = 0.25;
const MAX_ITERATIONS: usize = 100;

/// One group: its covariate, its successes, its trials.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    pub t: f64,
    pub successes: f64,
    pub trials: f64,
}

/// `Φ(a + b·t)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probit {
    pub a: f64,
    pub b: f64,
}

impl Probit {
    pub fn at(&self, t: f64) -> f64 {
        normal_cdf(self.a + self.b * t)
    }

    /// The `t` at which the curve crosses `z = Φ⁻¹(p)`; None for a flat curve.
    pub fn crossing(&self, z: f64) -> Option<f64> {
        (self.b != 0.0).then(|| (z - self.a) / self.b)
    }
}

fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

fn log_likelihood(g: &[Group], m: Probit) -> f64 {
    g.iter()
        .map(|g| {
            let p = m.at(g.t).clamp(1e-300, 1.0 - 1e-16);
            let q = normal_cdf(-(m.a + m.b * g.t)).max(1e-300);
            (g.successes + PSEUDO_COUNT) * p.ln() + (g.trials - g.successes + PSEUDO_COUNT) * q.ln()
        })
        .sum()
}

/// The maximum-likelihood probit of `groups`; None with fewer than two
/// distinct covariates or when scoring does not converge.
pub fn fit(groups: &[Group]) -> Option<Probit> {
    let first = groups.first()?.t;
    if groups.iter().all(|g| g.t == first) {
        return None;
    }
    let mut m = start(groups);
    let mut ll = log_likelihood(groups, m);
    for _ in 0..MAX_ITERATIONS {
        let step = scoring_step(groups, m)?;
        let mut scale = 1.0;
        let mut next;
        loop {
            next = Probit {
                a: m.a + scale * step.0,
                b: m.b + scale * step.1,
            };
            let nll = log_likelihood(groups, next);
            if nll >= ll - 1e-12 || scale < 1e-6 {
                ll = nll.max(ll);
                break;
            }
            scale /= 2.0;
        }
        let moved = (next.a - m.a).abs() + (next.b - m.b).abs();
        m = next;
        if moved < 1e-10 {
            return Some(m);
        }
    }
    (m.a.is_finite() && m.b.is_finite()).then_some(m)
}

/// A least-squares line through the groups' probits, as a start.
fn start(groups: &[Group]) -> Probit {
    let pts: Vec<(f64, f64)> = groups
        .iter()
        .map(|g| {
            let p = (g.successes + PSEUDO_COUNT) / (g.trials + 2.0 * PSEUDO_COUNT);
            (g.t, super::special::normal_quantile(p))
        })
        .collect();
    let n = pts.len() as f64;
    let (mt, mz) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mt).powi(2)).sum();
    let sxz: f64 = pts.iter().map(|p| (p.0 - mt) * (p.1 - mz)).sum();
    let b = if sxx > 0.0 { sxz / sxx } else { 0.0 };
    Probit { a: mz - b * mt, b }
}

/// The inverse of the expected information at `m`: the binomial covariance
/// of (a, b), `[Var a, Cov ab, Var b]`.
pub fn covariance(groups: &[Group], m: Probit) -> Option<[f64; 3]> {
    let (_, _, i00, i01, i11) = sums(groups, m);
    let det = i00 * i11 - i01 * i01;
    (det.is_finite() && det > 0.0).then(|| [i11 / det, -i01 / det, i00 / det])
}

/// Score and expected information at `m`.
fn sums(groups: &[Group], m: Probit) -> (f64, f64, f64, f64, f64) {
    let (mut s0, mut s1, mut i00, mut i01, mut i11) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for g in groups {
        let eta = m.a + m.b * g.t;
        let p = m.at(g.t).clamp(1e-12, 1.0 - 1e-12);
        let phi = normal_pdf(eta);
        let y = g.successes + PSEUDO_COUNT;
        let n = g.trials + 2.0 * PSEUDO_COUNT;
        let score = phi * (y - n * p) / (p * (1.0 - p));
        let w = n * phi * phi / (p * (1.0 - p));
        s0 += score;
        s1 += score * g.t;
        i00 += w;
        i01 += w * g.t;
        i11 += w * g.t * g.t;
    }
    (s0, s1, i00, i01, i11)
}

/// Fisher scoring's step (Δa, Δb): the expected information's inverse times the score.
fn scoring_step(groups: &[Group], m: Probit) -> Option<(f64, f64)> {
    let (s0, s1, i00, i01, i11) = sums(groups, m);
    let det = i00 * i11 - i01 * i01;
    if !(det.is_finite() && det > 0.0) {
        return None;
    }
    Some(((i11 * s0 - i01 * s1) / det, (i00 * s1 - i01 * s0) / det))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;
    use crate::stats::special::normal_quantile;

    #[test]
    fn a_known_curve_is_recovered_from_many_draws() {
        let truth = Probit { a: 3.0, b: -2.0 };
        let mut rng = Xoshiro256::new(7);
        let groups: Vec<Group> = (0..9)
            .map(|i| {
                let t = 0.5 + 0.25 * i as f64;
                let p = truth.at(t);
                let n = 4000;
                let s = (0..n).filter(|_| rng.next_f64() < p).count();
                Group {
                    t,
                    successes: s as f64,
                    trials: n as f64,
                }
            })
            .collect();
        let m = fit(&groups).expect("a fit");
        assert!((m.a - 3.0).abs() < 0.1 && (m.b + 2.0).abs() < 0.07, "{m:?}");
        let z = normal_quantile(0.9);
        let t = m.crossing(z).unwrap();
        assert!((t - truth.crossing(z).unwrap()).abs() < 0.02, "{t}");
    }

    #[test]
    fn separated_groups_still_fit_with_a_crossing_between_them() {
        let groups = [
            Group {
                t: 0.0,
                successes: 64.0,
                trials: 64.0,
            },
            Group {
                t: 0.1,
                successes: 64.0,
                trials: 64.0,
            },
            Group {
                t: 0.3,
                successes: 0.0,
                trials: 32.0,
            },
        ];
        let m = fit(&groups).expect("finite with the pseudo-counts");
        assert!(m.b < 0.0);
        let t = m.crossing(normal_quantile(0.9)).unwrap();
        assert!(t > 0.1 && t < 0.3, "{t}");
    }

    #[test]
    fn one_covariate_has_no_curve() {
        let g = Group {
            t: 1.0,
            successes: 3.0,
            trials: 4.0,
        };
        assert_eq!(fit(&[g, g]), None);
    }
}
