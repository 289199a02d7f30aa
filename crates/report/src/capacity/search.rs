//! Where the search measures next, from what it has measured: bracket the
//! edge between `low` and `high`, then halve the bracket on a log scale
//! until its ends are within the cell's precision. A level far from the edge
//! is decided in a few segments (an overloaded one in two); one near it takes
//! up to `max_segments` and, still unsure, counts as not holding (the
//! search's capacity is the highest level that held, every level below it
//! having held too, as a rate sweep's is).
//!
//! Pure: the same levels give the same next step, so `verify` remakes every
//! step from the journals.

use serde::{Deserialize, Serialize};

use super::level::{LevelDecision, LevelEvidence, Segment, alpha_per_look, judge};
use super::spec::{CapacitySpec, LoadAxis};

/// One level the search measured, its segments in the order run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    pub load: f64,
    pub segments: Vec<Segment>,
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
    /// Most levels a search can try: both ends and the halvings between.
    pub fn max_levels(&self) -> usize {
        let steps = (self.spec.high / self.spec.low).ln() / self.spec.step().ln();
        2 + steps.max(1.0).log2().ceil() as usize
    }

    /// The error of one look at one level.
    pub fn alpha_look(&self) -> f64 {
        alpha_per_look(
            self.alpha_search / self.max_levels() as f64,
            self.spec.max_segments,
        )
    }

    /// A level's evidence and its decision, a level at `max_segments`
    /// still unsure staying so.
    pub fn judge(&self, t: &Tried) -> LevelEvidence {
        judge(&t.segments, self.min_attainment, self.alpha_look())
    }

    /// Whether a level counts as holding once it is finished.
    fn held(&self, t: &Tried) -> bool {
        self.judge(t).decision == LevelDecision::Holds
    }

    fn finished(&self, t: &Tried) -> bool {
        self.judge(t).decision != LevelDecision::NotYetSure
            || t.segments.len() >= self.spec.max_segments
    }

    /// The next step after `tried`.
    pub fn next(&self, tried: &[Tried]) -> Next {
        let Some(last) = tried.last() else {
            return Next::Measure(self.spec.low);
        };
        if !self.finished(last) {
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
                None => Next::Done(Ended::Resolved),
            },
        }
    }

    /// The highest finished level that held and the lowest that did not.
    pub fn bracket(&self, tried: &[Tried]) -> (Option<f64>, Option<f64>) {
        let done = tried.iter().filter(|t| self.finished(t));
        let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
        for t in done {
            if self.held(t) {
                lo = Some(lo.map_or(t.load, |l| l.max(t.load)));
            } else {
                hi = Some(hi.map_or(t.load, |h| h.min(t.load)));
            }
        }
        (lo, hi)
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
                    match tried.last_mut() {
                        Some(t) if t.load == load => t.segments.push(s),
                        _ => tried.push(Tried {
                            load,
                            segments: vec![s],
                        }),
                    }
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
