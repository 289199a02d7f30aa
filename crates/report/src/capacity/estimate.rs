//! A side's capacity with a confidence interval, and the candidate's over
//! the baseline's with one.
//!
//! The search's bracket (the highest level that held, the lowest that did
//! not) is its resolution, not an interval: it is shown beside. The
//! interval comes from a probit curve of attainment against log load,
//! fitted to the levels near the crossing (`local`), where it crosses the
//! minimum attainment: Fieller's interval for that crossing, the curve's
//! covariance scaled by the dispersion the segments show (requests share a
//! queue). The ratio's is the difference of the two log crossings with the
//! sum of their variances (the two searches are independent draws).
//!
//! When the curve cannot be read (it does not fall with load, or its
//! interval reaches past the levels tried), the interval is the bracket of
//! *decided* levels instead: a level shown to hold and one shown not to,
//! judged with the whole search's dispersion, bound a monotone curve's
//! crossing; none is given when there is no such pair.
//!
//! The coverage the simulation (`capacity::simulation`) measures of these
//! intervals is in docs/capacity.md.

use serde::{Deserialize, Serialize};

use super::level::{LevelDecision, pooled};
use super::search::{Ended, SearchRule, Tried, pooled_dispersion};
use crate::stats::probit::{Group, Probit, covariance, fit};
use crate::stats::special::{normal_quantile, t_quantile};

/// How far from the minimum, in probit units, a level's attainment may be
/// and still be fitted.
pub const LOCAL_PROBITS: f64 = 2.0;

/// How an interval was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalMethod {
    /// Fieller's interval for where the probit curve crosses the minimum,
    /// its covariance scaled by the segments' dispersion.
    CurveFieller,
    /// The highest level decided to hold and the lowest decided not to.
    DecidedBracket,
}

/// One side's capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityEstimate {
    pub ended: Ended,
    /// The highest level that held, every level below it having held.
    pub held: Option<f64>,
    /// The lowest level that did not hold (or stayed unsure).
    pub not_held: Option<f64>,
    /// Where the fitted curve crosses the minimum attainment.
    pub fitted: Option<f64>,
    /// Two-sided interval at `confidence`, by `method`.
    pub interval: Option<[f64; 2]>,
    pub method: Option<IntervalMethod>,
    pub confidence: f64,
    /// Between-segment variance over the binomial's, pooled over the levels
    /// with some requests met and some not (at least 1).
    pub dispersion: f64,
    /// Measured requests and warm-up requests over every level.
    pub requests: u64,
    pub warmup_requests: u64,
}

/// The fitted log capacity and its delta-method variance, for the ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogCapacity {
    pub ln: f64,
    pub var: f64,
    /// Degrees of freedom behind the dispersion (0: taken as binomial).
    pub df: f64,
}

/// The estimate of one side from its finished search.
pub fn estimate(
    rule: &SearchRule,
    tried: &[Tried],
    ended: Ended,
    confidence: f64,
) -> (CapacityEstimate, Option<LogCapacity>) {
    let (held, not_held) = rule.bracket(tried);
    let z = normal_quantile(rule.min_attainment);
    let near = local(tried, z, (held, not_held));
    let (dispersion, df) = pooled_dispersion(&near);
    let groups = groups(&near);
    let model = fit(&groups).filter(|m| m.b < 0.0);

    let log = model.and_then(|m| {
        let cov = covariance(&groups, m)?.map(|v| v * dispersion);
        let ln = m.crossing(z)?;
        let grad = [-1.0 / m.b, -ln / m.b];
        let var = grad[0] * grad[0] * cov[0]
            + 2.0 * grad[0] * grad[1] * cov[1]
            + grad[1] * grad[1] * cov[2];
        within_tried(tried, ln.exp()).then_some((LogCapacity { ln, var, df }, m, cov))
    });
    let fitted = log.map(|l| l.0.ln.exp());

    let q = quantile(1.0 - (1.0 - confidence) / 2.0, df);
    let curve = log
        .filter(|_| ended == Ended::Resolved)
        .and_then(|(_, m, cov)| fieller(m, cov, z, q))
        .filter(|[l, h]| within_tried(tried, l.exp()) && within_tried(tried, h.exp()))
        .map(|[l, h]| [l.exp(), h.exp()]);
    let (interval, method) = match (curve, decided_bracket(rule, tried, dispersion)) {
        (Some(i), _) => (Some(i), Some(IntervalMethod::CurveFieller)),
        (None, Some(b)) if ended == Ended::Resolved => {
            (Some(b), Some(IntervalMethod::DecidedBracket))
        }
        _ => (None, None),
    };
    let requests = tried.iter().flat_map(|t| &t.segments).map(|s| s.of).sum();
    let warmup_requests = tried
        .iter()
        .flat_map(|t| &t.segments)
        .map(|s| s.warmup)
        .sum();
    let est = CapacityEstimate {
        ended,
        held,
        not_held,
        fitted,
        interval,
        method,
        confidence,
        dispersion,
        requests,
        warmup_requests,
    };
    (
        est,
        log.filter(|_| method == Some(IntervalMethod::CurveFieller))
            .map(|l| l.0),
    )
}

/// Student's t quantile at `df` degrees of freedom, the normal's at none.
fn quantile(p: f64, df: f64) -> f64 {
    if df >= 1.0 {
        t_quantile(p, df)
    } else {
        normal_quantile(p)
    }
}

/// The levels the curve is fitted to: those whose attainment lies within
/// `LOCAL_PROBITS` of the minimum on the probit scale (for a 90 % minimum,
/// 16 % to 99.97 %), and at least the bracket's two ends. Far
/// levels (all met at a tenth of the load, none met at twice it) say
/// little about where the curve crosses and much about a shape the probit
/// only approximates there.
fn local(tried: &[Tried], z: f64, bracket: (Option<f64>, Option<f64>)) -> Vec<Tried> {
    let p = |t: &Tried| {
        let (m, n) = pooled(&t.segments);
        (m as f64 + 0.5) / (n as f64 + 1.0)
    };
    let mut near: Vec<Tried> = tried
        .iter()
        .filter(|t| (normal_quantile(p(t)) - z).abs() <= LOCAL_PROBITS)
        .cloned()
        .collect();
    for end in [bracket.0, bracket.1].into_iter().flatten() {
        if !near.iter().any(|t| t.load == end)
            && let Some(t) = tried.iter().find(|t| t.load == end)
        {
            near.push(t.clone());
        }
    }
    near
}

/// Per level: ln load, met, measured.
fn groups(tried: &[Tried]) -> Vec<Group> {
    tried
        .iter()
        .map(|t| {
            let (met, of) = pooled(&t.segments);
            Group {
                t: t.load.ln(),
                successes: met as f64,
                trials: of as f64,
            }
        })
        .collect()
}

/// Fieller's interval for `(z − a) / b` at quantile `q`: the crossings not
/// rejected; None when the slope itself is not told from flat (the set is
/// then unbounded).
fn fieller(m: Probit, cov: [f64; 3], z: f64, q: f64) -> Option<[f64; 2]> {
    let u = z - m.a;
    let q2 = q * q;
    let qa = m.b * m.b - q2 * cov[2];
    if qa <= 0.0 {
        return None;
    }
    let qb = -2.0 * (u * m.b + q2 * cov[1]);
    let qc = u * u - q2 * cov[0];
    let disc = qb * qb - 4.0 * qa * qc;
    if disc < 0.0 {
        return None;
    }
    let r = disc.sqrt();
    let (x1, x2) = ((-qb - r) / (2.0 * qa), (-qb + r) / (2.0 * qa));
    Some([x1.min(x2), x1.max(x2)])
}

fn within_tried(tried: &[Tried], c: f64) -> bool {
    let lo = tried.iter().map(|t| t.load).fold(f64::INFINITY, f64::min);
    let hi = tried.iter().map(|t| t.load).fold(0.0, f64::max);
    c >= lo && c <= hi
}

/// The highest level decided to hold and the lowest decided not to, each
/// judged again with the dispersion of the whole search (a level decided
/// early, on less of it, may not stand).
fn decided_bracket(rule: &SearchRule, tried: &[Tried], dispersion: f64) -> Option<[f64; 2]> {
    let decided = |d: LevelDecision| {
        tried
            .iter()
            .filter(move |t| rule.judge_with(t, dispersion).decision == d)
            .map(|t| t.load)
    };
    let lo = decided(LevelDecision::Holds).reduce(f64::max)?;
    let hi = decided(LevelDecision::DoesNotHold).reduce(f64::min)?;
    (lo < hi).then_some([lo, hi])
}

/// Candidate capacity over the baseline's, with a two-sided interval at
/// `confidence`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CapacityRatio {
    /// Fitted candidate / fitted baseline (the searches' held levels when a
    /// side has no fit).
    pub ratio: Option<f64>,
    pub interval: Option<[f64; 2]>,
    pub confidence: f64,
}

/// The ratio of two sides' estimates: on the log scale, the difference of
/// the fitted crossings with the sum of their variances (the two searches
/// are independent draws), when both sides have a curve; else bounds from
/// the two intervals, each side's miss adding to the ratio's.
pub fn ratio(
    baseline: (&CapacityEstimate, Option<LogCapacity>),
    candidate: (&CapacityEstimate, Option<LogCapacity>),
    confidence: f64,
) -> CapacityRatio {
    let (b, c) = (baseline.0, candidate.0);
    let point = |e: &CapacityEstimate| e.fitted.or(e.held);
    let ratio = point(c).zip(point(b)).map(|(c, b)| c / b);
    let (interval, confidence) = match (baseline.1, candidate.1) {
        (Some(lb), Some(lc)) => {
            let d = lc.ln - lb.ln;
            let se = (lb.var + lc.var).sqrt();
            let q = quantile(1.0 - (1.0 - confidence) / 2.0, lb.df.min(lc.df));
            (Some([(d - q * se).exp(), (d + q * se).exp()]), confidence)
        }
        _ => {
            let i = b
                .interval
                .zip(c.interval)
                .map(|([bl, bh], [cl, ch])| [cl / bh, ch / bl]);
            (i, 1.0 - (1.0 - b.confidence) - (1.0 - c.confidence))
        }
    };
    CapacityRatio {
        ratio,
        interval,
        confidence,
    }
}
