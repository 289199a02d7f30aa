//! Where the search measures next, from what it has measured: bracket the
//! edge between `low` and `high`, then halve the bracket on a log scale
//! until its ends are within the cell's precision. A level far from the edge
//! is decided in a few segments (an overloaded one in two); one near it takes
//! up to `max_segments` and, still unsure, is placed by its point estimate
//! (the search's capacity is the highest level that held, every level below
//! it having held too, as a rate sweep's is). The decisions only steer and
//! make far levels cheap: the interval is the fitted curve's
//! (`estimate`).
//!
//! Pure: the same levels give the same next step, so `verify` remakes every
//! step from the journals.

use serde::{Deserialize, Serialize};

use super::level::{LevelDecision, LevelEvidence, Segment, alpha_per_look, judge, pearson};
use super::spec::{CapacitySpec, LoadAxis};

/// How far the shoulders sit from the bracket, in steps of the precision.
pub const SHOULDER_STEPS: i32 = 3;

/// One level the search measured, its segments in the order run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    pub load: f64,
    pub segments: Vec<Segment>,
}

impl Tried {
    /// Add a segment measured at `load` to a search's levels: to the last
    /// level when it is at that load, else as a new level.
    pub fn record(tried: &mut Vec<Tried>, load: f64, segment: Segment) {
        match tried.last_mut() {
            Some(t) if t.load == load => t.segments.push(segment),
            _ => tried.push(Tried {
                load,
                segments: vec![segment],
            }),
        }
    }
}

/// The rule a search follows: the cell's table, its minimum attainment and
/// the error its level decisions share.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRule {
    pub spec: CapacitySpec,
    pub min_attainment: f64,
    /// Error shared by every level decision of one side's search
    /// (Bonferroni over `max_levels`, then over each level's looks).
    pub alpha_search: f64,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// One more segment at this load.
    Measure(f64),
    Done(Ended),
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// Even `low` did not hold.
    BelowRange,
    /// Even `high` held.
    AboveRange,
    /// A level that held and one that did not, within the precision.
    Resolved,
}

impl SearchRule {
    /// Most levels a search can try: both ends, the halvings between and
    /// the two shoulders.
    pub fn max_levels(&self) -> usize {
        let steps = (self.spec.high / self.spec.low).ln() / self.spec.step().ln();
        4 + steps.max(1.0).log2().ceil() as usize
    }

    /// The error of one look at one level.
    pub fn alpha_look(&self) -> f64 {
        alpha_per_look(
            self.alpha_search / self.max_levels() as f64,
            self.spec.max_segments,
        )
    }

    /// Level `i`'s evidence as the search read it: its design effect at
    /// least the dispersion pooled over the levels tried up to it, so a
    /// decision, once made, stays made.
    pub fn judge(&self, tried: &[Tried], i: usize) -> LevelEvidence {
        let (floor, _) = pooled_dispersion(&tried[..=i]);
        self.judge_with(&tried[i], floor)
    }

    /// A level's evidence with the design effect at least `floor`.
    pub fn judge_with(&self, t: &Tried, floor: f64) -> LevelEvidence {
        judge(&t.segments, self.min_attainment, self.alpha_look(), floor)
    }

    fn finished(&self, tried: &[Tried], i: usize) -> bool {
        self.judge(tried, i).decision != LevelDecision::NotYetSure
            || tried[i].segments.len() >= self.spec.max_segments
    }

    /// The next step after `tried`.
    pub fn next(&self, tried: &[Tried]) -> Next {
        let Some(last) = tried.last() else {
            return Next::Measure(self.spec.low);
        };
        if !self.finished(tried, tried.len() - 1) {
            return Next::Measure(last.load);
        }
        let (lo, hi) = self.bracket(tried);
        match (lo, hi) {
            (None, _) => Next::Done(Ended::BelowRange),
            (Some(_), None) if tried.iter().any(|t| t.load >= self.spec.high) => {
                Next::Done(Ended::AboveRange)
            }
            (Some(_), None) => Next::Measure(self.spec.high),
            (Some(lo), Some(hi)) => match self.between(lo, hi) {
                Some(mid) => Next::Measure(mid),
                None => match self.shoulder(tried, lo, hi) {
                    Some(load) => Next::Measure(load),
                    None => Next::Done(Ended::Resolved),
                },
            },
        }
    }

    /// Once bracketed: a level `SHOULDER_STEPS` steps below the bracket and
    /// one as far above, each measured once, so the curve's slope is read
    /// over a span wider than the bracket (two levels one step apart
    /// cannot tell it from flat at the counts a level has).
    fn shoulder(&self, tried: &[Tried], lo: f64, hi: f64) -> Option<f64> {
        let span = self.spec.step().powi(SHOULDER_STEPS);
        let snap = |x: f64| match self.spec.by {
            LoadAxis::Rate => x,
            LoadAxis::Concurrency => x.round(),
        };
        [snap(lo / span), snap(hi * span)]
            .into_iter()
            .filter(|&x| x >= self.spec.low && x <= self.spec.high && x != lo && x != hi)
            .find(|&x| !tried.iter().any(|t| (t.load / x - 1.0).abs() < 1e-9))
    }

    /// The highest finished level that held with every finished level
    /// below it holding, and the lowest finished level that did not hold.
    /// A level that held above one that did not (an inversion: a noisy
    /// curve is not monotone) does not count as held.
    pub fn bracket(&self, tried: &[Tried]) -> (Option<f64>, Option<f64>) {
        let mut finished: Vec<(f64, bool)> = (0..tried.len())
            .filter(|&i| self.finished(tried, i))
            .map(|i| (tried[i].load, self.held(tried, i)))
            .collect();
        finished.sort_by(|a, b| a.0.total_cmp(&b.0));
        let hi = finished.iter().find(|l| !l.1).map(|l| l.0);
        let lo = finished.iter().take_while(|l| l.1).last().map(|l| l.0);
        (lo, hi)
    }

    /// Whether finished level `i` counts as holding.
    fn held(&self, tried: &[Tried], i: usize) -> bool {
        let e = self.judge(tried, i);
        match e.decision {
            LevelDecision::Holds => true,
            LevelDecision::DoesNotHold => false,
            // Run to its last segment: the edge is near; its point
            // estimate steers, as a rate sweep's does.
            LevelDecision::NotYetSure => e.attainment >= self.min_attainment,
        }
    }

    /// The log-scale middle of `lo` and `hi`, or None when they are within
    /// one step (or, by concurrency, no whole level lies between).
    fn between(&self, lo: f64, hi: f64) -> Option<f64> {
        if hi / lo <= self.spec.step() {
            return None;
        }
        let mid = (lo * hi).sqrt();
        match self.spec.by {
            LoadAxis::Rate => Some(mid),
            LoadAxis::Concurrency => {
                let m = mid.round();
                (m > lo && m < hi).then_some(m)
            }
        }
    }
}

/// Pearson's χ² of each level's segments about the level's own attainment,
/// pooled over the levels with some requests met and some not, over its
/// degrees of freedom (at least 1), and those degrees of freedom: how much
/// more the segments vary than independent requests would. Requests share a
/// queue, so near the edge this is well above 1.
pub fn pooled_dispersion(tried: &[Tried]) -> (f64, f64) {
    let (chi2, df) = tried
        .iter()
        .filter_map(|t| pearson(&t.segments))
        .fold((0.0, 0.0), |(c, d), (chi2, df)| (c + chi2, d + df));
    if df == 0.0 {
        (1.0, 0.0)
    } else {
        ((chi2 / df).max(1.0), df)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> SearchRule {
        SearchRule {
            spec: toml::from_str("by = \"rate\"\nlow = 1\nhigh = 16\nprecision_percent = 10\n")
                .unwrap(),
            min_attainment: 0.9,
            alpha_search: 0.05,
        }
    }

    /// Runs the rule against a step curve: every level at or below `edge`
    /// meets all its requests, every level above meets none.
    fn run_against_a_step(rule: &SearchRule, edge: f64) -> (Vec<Tried>, Ended) {
        let mut tried: Vec<Tried> = Vec::new();
        loop {
            match rule.next(&tried) {
                Next::Done(e) => return (tried, e),
                Next::Measure(load) => {
                    let met = if load <= edge { 16 } else { 0 };
                    let s = Segment {
                        met,
                        of: 16,
                        warmup: 4,
                    };
                    Tried::record(&mut tried, load, s);
                }
            }
        }
    }

    #[test]
    fn a_step_edge_is_bracketed_within_the_precision() {
        let r = rule();
        for edge in [1.3, 2.0, 5.5, 11.0] {
            let (tried, ended) = run_against_a_step(&r, edge);
            assert_eq!(ended, Ended::Resolved, "{edge}");
            let (lo, hi) = r.bracket(&tried);
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(
                lo <= edge && edge < hi && hi / lo <= 1.1,
                "{edge}: {lo} {hi}"
            );
            assert!(tried.len() <= r.max_levels(), "{} levels", tried.len());
            // Overloaded levels stop at two segments.
            for t in tried.iter().filter(|t| t.load > edge) {
                assert_eq!(t.segments.len(), 2);
            }
        }
    }

    #[test]
    fn an_edge_outside_the_range_is_named() {
        let r = rule();
        assert_eq!(run_against_a_step(&r, 0.5).1, Ended::BelowRange);
        assert_eq!(run_against_a_step(&r, 40.0).1, Ended::AboveRange);
    }

    #[test]
    fn concurrency_levels_are_whole() {
        let mut r = rule();
        r.spec.by = LoadAxis::Concurrency;
        r.spec.high = 64.0;
        let (tried, ended) = run_against_a_step(&r, 9.0);
        assert_eq!(ended, Ended::Resolved);
        assert!(tried.iter().all(|t| t.load.fract() == 0.0));
        assert_eq!(r.bracket(&tried), (Some(9.0), Some(10.0)));
    }
}
