//! One load level of one side: its segments (each a warm-up left out, then
//! measured requests) and what they say about the level's attainment
//! against the cell's minimum.
//!
//! Requests inside a segment share a queue, so they are not independent:
//! the pooled count's binomial variance is scaled by the dispersion the
//! segments show between them (a quasi-binomial design effect, never below
//! 1), and the Wilson bound is taken on the effective count. A level is
//! looked at after each segment from the second on; each look spends an
//! equal share of the level's error (Bonferroni over `max_segments − 1`
//! looks), so repeated looks do not inflate it.

use serde::{Deserialize, Serialize};

use crate::stats::evidence::{wilson, wilson_share};
use crate::stats::special::normal_quantile;

/// Segments a level needs before it can be decided: one segment says
/// nothing about how its requests vary together.
pub const MIN_SEGMENTS: usize = 2;

/// One measured segment: requests that met every SLO target, of those measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub met: u64,
    pub of: u64,
    /// Requests sent first and left out of `met / of`.
    pub warmup: u64,
}

/// What a level's segments say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelDecision {
    /// Attainment's lower bound is at or above the minimum.
    Holds,
    /// Attainment's upper bound is below the minimum.
    DoesNotHold,
    /// Neither yet (or not after `max_segments`: the level is close to the edge).
    NotYetSure,
}

/// The level's attainment with its bounds at one look.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LevelEvidence {
    pub attainment: f64,
    pub lower: f64,
    pub upper: f64,
    /// The design effect applied (1 when the segments vary as a binomial would).
    pub design_effect: f64,
    pub decision: LevelDecision,
}

/// Pooled attainment, its one-sided bounds at level `alpha_look` each, and
/// the decision against `min_attainment`. The design effect is the level's
/// own or `dispersion_floor`, whichever is larger: segments that all met
/// (or all missed) cannot show how their requests vary together, so a
/// search reads that from its other levels (`search::pooled_dispersion`).
pub fn judge(
    segments: &[Segment],
    min_attainment: f64,
    alpha_look: f64,
    dispersion_floor: f64,
) -> LevelEvidence {
    let (met, of) = pooled(segments);
    let attainment = if of == 0 { 0.0 } else { met as f64 / of as f64 };
    let design_effect = design_effect(segments).max(dispersion_floor);
    let n_eff = of as f64 / design_effect;
    let z = normal_quantile(1.0 - alpha_look);
    // A whole effective count takes the integer form, its successes rounded.
    let (lower, upper) = if n_eff.fract() == 0.0 {
        wilson((attainment * n_eff).round() as u64, n_eff as u64, z)
    } else {
        wilson_share(attainment, n_eff, z)
    };
    let decision = if segments.len() < MIN_SEGMENTS || of == 0 {
        LevelDecision::NotYetSure
    } else if lower >= min_attainment {
        LevelDecision::Holds
    } else if upper < min_attainment {
        LevelDecision::DoesNotHold
    } else {
        LevelDecision::NotYetSure
    };
    LevelEvidence {
        attainment,
        lower,
        upper,
        design_effect,
        decision,
    }
}

/// The per-look error of a level allowed `alpha_level` over `max_segments`.
pub fn alpha_per_look(alpha_level: f64, max_segments: usize) -> f64 {
    alpha_level / (max_segments.saturating_sub(MIN_SEGMENTS - 1)).max(1) as f64
}

/// Met and measured, summed over `segments`.
pub fn pooled(segments: &[Segment]) -> (u64, u64) {
    segments
        .iter()
        .fold((0, 0), |(m, n), s| (m + s.met, n + s.of))
}

/// Pearson's χ² of `segments` about their pooled attainment and its degrees
/// of freedom; None with fewer than two segments that measured anything or
/// a pooled attainment of 0 or 1 (no spread to read).
pub fn pearson(segments: &[Segment]) -> Option<(f64, f64)> {
    let used: Vec<&Segment> = segments.iter().filter(|s| s.of > 0).collect();
    let (met, of) = pooled(segments);
    let p = met as f64 / of.max(1) as f64;
    if used.len() < 2 || p <= 0.0 || p >= 1.0 {
        return None;
    }
    let chi2 = used
        .iter()
        .map(|s| {
            let e = s.of as f64 * p;
            (s.met as f64 - e).powi(2) / (e * (1.0 - p))
        })
        .sum();
    Some((chi2, (used.len() - 1) as f64))
}

/// Between-segment dispersion over the binomial's (Pearson's χ² over its
/// degrees of freedom), at least 1; 1 when the segments cannot show it.
fn design_effect(segments: &[Segment]) -> f64 {
    pearson(segments).map_or(1.0, |(chi2, df)| (chi2 / df).max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(met: u64, of: u64) -> Segment {
        Segment { met, of, warmup: 0 }
    }

    #[test]
    fn one_segment_never_decides() {
        let e = judge(&[seg(0, 16)], 0.9, 0.01, 1.0);
        assert_eq!(e.decision, LevelDecision::NotYetSure);
    }

    #[test]
    fn an_overloaded_level_fails_in_two_segments_and_a_light_one_needs_more_to_hold() {
        assert_eq!(
            judge(&[seg(0, 16), seg(1, 16)], 0.9, 0.001, 1.0).decision,
            LevelDecision::DoesNotHold
        );
        // All met: the bound reaches 0.9 only when n ≥ z²·0.9/0.1 (≈ 86 at z = 3.09).
        let all = |k: usize| judge(&vec![seg(16, 16); k], 0.9, 0.001, 1.0).decision;
        assert_eq!(all(5), LevelDecision::NotYetSure);
        assert_eq!(all(6), LevelDecision::Holds);
    }

    #[test]
    fn segments_that_disagree_more_than_a_binomial_widen_the_bounds() {
        let even = judge(
            &[seg(14, 16), seg(14, 16), seg(14, 16), seg(14, 16)],
            0.5,
            0.01,
            1.0,
        );
        let spread = judge(
            &[seg(16, 16), seg(12, 16), seg(16, 16), seg(12, 16)],
            0.5,
            0.01,
            1.0,
        );
        assert_eq!(even.attainment, spread.attainment);
        assert_eq!(even.design_effect, 1.0);
        assert!(spread.design_effect > 1.0);
        assert!(spread.lower < even.lower && spread.upper > even.upper);
        // A floor from elsewhere widens segments that cannot show their own.
        let all = vec![seg(16, 16); 6];
        assert_eq!(judge(&all, 0.9, 0.001, 1.0).decision, LevelDecision::Holds);
        assert_eq!(
            judge(&all, 0.9, 0.001, 3.0).decision,
            LevelDecision::NotYetSure
        );
    }
}
