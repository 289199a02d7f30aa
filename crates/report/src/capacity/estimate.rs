//! A side's capacity with a confidence interval, and the candidate's over
//! the baseline's with one.
//!
//! The search's bracket (the highest level that held, the lowest that did
//! not) is its resolution, not an interval: it is shown beside. The
//! interval comes from a probit curve of attainment against log load fitted
//! to every level tried (`stats::probit`), where it crosses the minimum
//! attainment; its spread is a bootstrap that resamples each level's
//! segments (the units requests are correlated within), refitting each
//! time. The ratio's interval takes the two sides' replicates pairwise: the
//! two searches are independent draws, and any drift the interleaving leaves
//! common to both would only narrow the true spread of the ratio, so the
//! interval errs wide.
//!
//! When the curve cannot be read (it does not fall with load, it crosses
//! outside the levels tried, or too many replicates cannot be fitted), the
//! interval is the bracket of *decided* levels instead: a level shown to
//! hold and one shown not to, each at the search's error, bound a monotone
//! curve's crossing with at least the search's confidence.

use serde::{Deserialize, Serialize};

use super::level::LevelDecision;
use super::search::{Ended, SearchRule, Tried};
use crate::stats::Xoshiro256;
use crate::stats::probit::{Group, fit};
use crate::stats::special::normal_quantile;

/// Bootstrap replicates behind an interval.
pub const REPLICATES: usize = 1000;
/// Share of replicates that may fail to give a crossing before the curve is
/// set aside for the decided bracket.
pub const MAX_FAILED_SHARE: f64 = 0.05;

/// How an interval was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalMethod {
    /// Percentiles of the probit crossing over segment-bootstrap replicates.
    CurveBootstrap,
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
    /// Measured requests and warm-up requests over every level.
    pub requests: u64,
    pub warmup_requests: u64,
}

/// The log-capacity bootstrap of one side, kept for the ratio.
#[derive(Debug, Clone)]
pub struct Replicates {
    /// ln capacity per replicate; NaN where a replicate gave no crossing.
    pub ln: Vec<f64>,
}

impl Replicates {
    fn usable(&self) -> bool {
        let failed = self.ln.iter().filter(|v| !v.is_finite()).count();
        !self.ln.is_empty() && (failed as f64) <= MAX_FAILED_SHARE * self.ln.len() as f64
    }
}

/// The estimate of one side from its finished search, and its replicates.
pub fn estimate(
    rule: &SearchRule,
    tried: &[Tried],
    ended: Ended,
    confidence: f64,
    seed: u64,
) -> (CapacityEstimate, Replicates) {
    let (held, not_held) = rule.bracket(tried);
    let z = normal_quantile(rule.min_attainment);
    let fitted = crossing(&groups(tried, None), z).filter(|c| within_tried(tried, *c));
    let reps = bootstrap(tried, z, seed);
    let alpha = 1.0 - confidence;
    let curve = (ended == Ended::Resolved && fitted.is_some() && reps.usable())
        .then(|| percentile_interval(&reps.ln, alpha))
        .flatten()
        .map(|[l, h]| [l.exp(), h.exp()]);
    let (interval, method) = match (curve, decided_bracket(rule, tried)) {
        (Some(i), _) => (Some(i), Some(IntervalMethod::CurveBootstrap)),
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
        requests,
        warmup_requests,
    };
    (est, reps)
}

/// Per level: ln load, met, measured; with `pick`, the segments of each
/// level drawn by index.
fn groups(tried: &[Tried], pick: Option<&[Vec<usize>]>) -> Vec<Group> {
    tried
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (met, of) = match pick {
                None => t
                    .segments
                    .iter()
                    .fold((0, 0), |(m, n), s| (m + s.met, n + s.of)),
                Some(p) => p[i]
                    .iter()
                    .map(|&j| &t.segments[j])
                    .fold((0, 0), |(m, n), s| (m + s.met, n + s.of)),
            };
            Group {
                t: t.load.ln(),
                successes: met as f64,
                trials: of as f64,
            }
        })
        .collect()
}

/// The load where the fitted curve crosses `z`; None for a curve that does
/// not fall with load.
fn crossing(groups: &[Group], z: f64) -> Option<f64> {
    let m = fit(groups)?;
    (m.b < 0.0).then(|| m.crossing(z)).flatten().map(f64::exp)
}

fn within_tried(tried: &[Tried], c: f64) -> bool {
    let lo = tried.iter().map(|t| t.load).fold(f64::INFINITY, f64::min);
    let hi = tried.iter().map(|t| t.load).fold(0.0, f64::max);
    c >= lo && c <= hi
}

fn bootstrap(tried: &[Tried], z: f64, seed: u64) -> Replicates {
    let mut rng = Xoshiro256::new(seed);
    let mut pick: Vec<Vec<usize>> = tried.iter().map(|t| vec![0; t.segments.len()]).collect();
    let ln = (0..REPLICATES)
        .map(|_| {
            for (p, t) in pick.iter_mut().zip(tried) {
                for slot in p.iter_mut() {
                    *slot = rng.below(t.segments.len() as u64) as usize;
                }
            }
            crossing(&groups(tried, Some(&pick)), z)
                .filter(|c| within_tried(tried, *c))
                .map_or(f64::NAN, f64::ln)
        })
        .collect();
    Replicates { ln }
}

/// Percentiles `alpha/2` and `1 − alpha/2` of the finite values, failed
/// replicates placed at both ends (they widen the interval, never narrow it).
fn percentile_interval(ln: &[f64], alpha: f64) -> Option<[f64; 2]> {
    let mut ok: Vec<f64> = ln.iter().copied().filter(|v| v.is_finite()).collect();
    if ok.is_empty() {
        return None;
    }
    ok.sort_by(f64::total_cmp);
    let failed = ln.len() - ok.len();
    let n = ln.len() as f64;
    // Failed replicates count as below the lowest and above the highest.
    let lo_rank = ((alpha / 2.0) * n).floor() as usize;
    let hi_rank = ((1.0 - alpha / 2.0) * n).ceil() as usize;
    let lo = lo_rank
        .checked_sub(failed)
        .map(|r| ok[r.min(ok.len() - 1)])?;
    let hi = ok.get(hi_rank.saturating_sub(1)).copied()?;
    Some([lo, hi])
}

/// The highest level decided to hold and the lowest decided not to.
fn decided_bracket(rule: &SearchRule, tried: &[Tried]) -> Option<[f64; 2]> {
    let decided = |d: LevelDecision| {
        tried
            .iter()
            .filter(move |t| rule.judge(t).decision == d)
            .map(|t| t.load)
    };
    let lo = decided(LevelDecision::Holds)
        .fold(None, |a: Option<f64>, l| Some(a.map_or(l, |a| a.max(l))))?;
    let hi = decided(LevelDecision::DoesNotHold)
        .fold(None, |a: Option<f64>, l| Some(a.map_or(l, |a| a.min(l))))?;
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

/// The ratio of two sides' estimates.
pub fn ratio(
    baseline: (&CapacityEstimate, &Replicates),
    candidate: (&CapacityEstimate, &Replicates),
    confidence: f64,
) -> CapacityRatio {
    let (b, c) = (baseline.0, candidate.0);
    let point = |e: &CapacityEstimate| e.fitted.or(e.held);
    let ratio = point(c).zip(point(b)).map(|(c, b)| c / b);
    let both_curves = b.method == Some(IntervalMethod::CurveBootstrap)
        && c.method == Some(IntervalMethod::CurveBootstrap);
    let (interval, confidence) = if both_curves {
        let diffs: Vec<f64> = candidate
            .1
            .ln
            .iter()
            .zip(&baseline.1.ln)
            .map(|(c, b)| c - b)
            .collect();
        let i = percentile_interval(&diffs, 1.0 - confidence).map(|[l, h]| [l.exp(), h.exp()]);
        (i, confidence)
    } else {
        // Bounds from bounds: each side's miss adds to the ratio's.
        let i = b
            .interval
            .zip(c.interval)
            .map(|([bl, bh], [cl, ch])| [cl / bh, ch / bl]);
        (i, 1.0 - (1.0 - b.confidence) - (1.0 - c.confidence))
    };
    CapacityRatio {
        ratio,
        interval,
        confidence,
    }
}
