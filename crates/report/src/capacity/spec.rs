//! What a capacity cell asks: the load axis, the range to search, the
//! resolution wanted, and how many requests one measured segment of a level
//! holds. Read from a suite's cell (`capacity = { by = "rate", low = 0.5,
//! high = 8, precision_percent = 10 }`) and checked before anything runs.

use serde::{Deserialize, Serialize};

/// Which load the search moves: the open-loop arrival rate (requests per
/// second, Poisson arrivals) or the closed-loop concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadAxis {
    Rate,
    Concurrency,
}

impl LoadAxis {
    /// The axis as the cell's `by` names it.
    pub fn name(self) -> &'static str {
        match self {
            LoadAxis::Rate => "rate",
            LoadAxis::Concurrency => "concurrency",
        }
    }

    /// The unit a level is shown in.
    pub fn unit(self) -> &'static str {
        match self {
            LoadAxis::Rate => "req/s",
            LoadAxis::Concurrency => "concurrent",
        }
    }
}

/// Measured requests of one segment unless the cell says otherwise.
pub const DEFAULT_SEGMENT_REQUESTS: usize = 16;
/// Most segments one side measures at one level unless the cell says otherwise.
pub const DEFAULT_MAX_SEGMENTS: usize = 8;
/// Highest `high / low` a search takes: past it, the range is a guess.
pub const MAX_RANGE_RATIO: f64 = 1000.0;
/// Most requests one segment may hold.
pub const MAX_SEGMENT_REQUESTS: usize = 10_000;
/// Most segments per level and side.
pub const MAX_SEGMENTS: usize = 64;

/// A cell's `capacity` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySpec {
    pub by: LoadAxis,
    /// The lowest load tried (the search reports "below the range" when
    /// even this does not hold).
    pub low: f64,
    /// The highest load tried ("above the range" when even this holds).
    pub high: f64,
    /// The search stops narrowing when the next level up is within this
    /// many percent of the highest level that held: its resolution.
    pub precision_percent: f64,
    /// Measured requests per segment (one block of a level on one side,
    /// after its warm-up).
    #[serde(default = "default_segment_requests")]
    pub segment_requests: usize,
    /// Requests sent before each segment's measured ones and left out of
    /// its attainment (journaled, and counted in what was spent): an open
    /// queue needs them to fill. Absent: the cell's concurrency at a
    /// concurrency level, twice the level's rate in seconds' worth at a
    /// rate level (at least 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_requests: Option<usize>,
    /// Most segments per level and side before the level is left "not yet
    /// sure".
    #[serde(default = "default_max_segments")]
    pub max_segments: usize,
}

fn default_segment_requests() -> usize {
    DEFAULT_SEGMENT_REQUESTS
}

fn default_max_segments() -> usize {
    DEFAULT_MAX_SEGMENTS
}

impl CapacitySpec {
    /// The first problem with the table, naming its field; None when it can run.
    pub fn problem(&self) -> Option<String> {
        let (low, high) = (self.low, self.high);
        if !(low.is_finite() && low > 0.0) {
            return Some(format!("low {low} is not a positive number"));
        }
        if !(high.is_finite() && high > low) {
            return Some(format!("high {high} is not above low {low}"));
        }
        if high / low > MAX_RANGE_RATIO {
            return Some(format!(
                "high / low is {:.0}, above the {MAX_RANGE_RATIO:.0} a search takes: narrow the range",
                high / low
            ));
        }
        if self.by == LoadAxis::Concurrency && (low.fract() != 0.0 || high.fract() != 0.0) {
            return Some(format!(
                "by = \"concurrency\" needs whole low and high, not {low} and {high}"
            ));
        }
        let p = self.precision_percent;
        if !(p.is_finite() && p > 0.0 && p < 100.0) {
            return Some(format!("precision_percent {p} is not in (0, 100)"));
        }
        if !(1..=MAX_SEGMENT_REQUESTS).contains(&self.segment_requests) {
            return Some(format!(
                "segment_requests {} is not in 1..={MAX_SEGMENT_REQUESTS}",
                self.segment_requests
            ));
        }
        if !(2..=MAX_SEGMENTS).contains(&self.max_segments) {
            return Some(format!(
                "max_segments {} is not in 2..={MAX_SEGMENTS} (a level's spread needs two)",
                self.max_segments
            ));
        }
        if self
            .warmup_requests
            .is_some_and(|w| w > MAX_SEGMENT_REQUESTS)
        {
            return Some(format!("warmup_requests is above {MAX_SEGMENT_REQUESTS}"));
        }
        None
    }

    /// Warm-up requests of a segment at `level`.
    pub fn warmup_at(&self, level: f64) -> usize {
        self.warmup_requests.unwrap_or(match self.by {
            LoadAxis::Concurrency => level.round() as usize,
            LoadAxis::Rate => ((2.0 * level).ceil() as usize).max(4),
        })
    }

    /// One step of the resolution: levels closer than this ratio are one.
    pub fn step(&self) -> f64 {
        1.0 + self.precision_percent / 100.0
    }
}

/// What a search may spend per side, from its table alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchCost {
    /// The most levels it tries: the two ends, the halvings on the log
    /// scale until the bracket is within the precision, the two shoulders.
    pub levels: usize,
    /// Measured requests when every level is decided in two segments, and
    /// when every level runs all of its segments; both capped at the budget.
    pub fewest: usize,
    pub most: usize,
}

impl CapacitySpec {
    /// [`SearchCost`] of this table under a budget of `budget` measured
    /// requests per side (the cell's `requests`). Each segment's warm-up
    /// comes on top.
    pub fn cost(&self, budget: usize) -> SearchCost {
        let snap = |x: f64| match self.by {
            LoadAxis::Rate => x,
            LoadAxis::Concurrency => x.round(),
        };
        // The halvings, the longer of the two ways the edge may lie.
        let halvings = |toward_low: bool| {
            let (mut lo, mut hi, mut n) = (self.low, self.high, 0);
            while hi / lo > self.step() {
                let mid = snap((lo * hi).sqrt());
                if mid <= lo || mid >= hi {
                    break;
                }
                if toward_low {
                    hi = mid
                } else {
                    lo = mid
                }
                n += 1;
            }
            n
        };
        let levels = 4 + halvings(true).max(halvings(false));
        let per = |segments: usize| (levels * segments * self.segment_requests).min(budget);
        SearchCost {
            levels,
            fewest: per(2.min(self.max_segments)),
            most: per(self.max_segments),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> CapacitySpec {
        toml::from_str(text).expect("capacity table")
    }

    #[test]
    fn a_search_costs_its_levels_times_its_segments_within_the_budget() {
        // ln(16) / ln(1.1) = 29.1 steps: 5 halvings, the two ends, two shoulders.
        let s = spec(
            "by = \"rate\"\nlow = 1\nhigh = 16\nprecision_percent = 10\nsegment_requests = 10\n",
        );
        let c = s.cost(100_000);
        assert_eq!((c.levels, c.fewest, c.most), (9, 180, 9 * 8 * 10));
        assert_eq!(s.cost(500).most, 500, "the budget caps it");
        // By concurrency the halvings stop at whole levels: after 1 and 8,
        // 3, 5, 6, 7 when the edge is high (3, 2 when it is low).
        let s = spec(
            "by = \"concurrency\"\nlow = 1\nhigh = 8\nprecision_percent = 15\nsegment_requests = 8\nmax_segments = 4\n",
        );
        assert_eq!(
            s.cost(10_000),
            SearchCost {
                levels: 8,
                fewest: 128,
                most: 256
            }
        );
    }

    #[test]
    fn a_sound_table_has_no_problem_and_takes_its_defaults() {
        let s = spec("by = \"rate\"\nlow = 0.5\nhigh = 8\nprecision_percent = 10\n");
        assert_eq!(s.problem(), None);
        assert_eq!(s.segment_requests, DEFAULT_SEGMENT_REQUESTS);
        assert_eq!(s.max_segments, DEFAULT_MAX_SEGMENTS);
        assert_eq!(s.warmup_at(1.0), 4);
        assert_eq!(s.warmup_at(6.0), 12);
    }

    #[test]
    fn each_bad_field_is_named() {
        let base = "by = \"rate\"\nlow = 1\nhigh = 8\nprecision_percent = 10\n";
        for (from, to, says) in [
            ("low = 1", "low = 0", "low 0"),
            ("high = 8", "high = 1", "high 1 is not above low 1"),
            ("high = 8", "high = 2000", "narrow the range"),
            (
                "precision_percent = 10",
                "precision_percent = 0",
                "precision_percent 0",
            ),
            (
                "precision_percent = 10",
                "precision_percent = 100",
                "precision_percent 100",
            ),
            (
                "by = \"rate\"\nlow = 1",
                "by = \"concurrency\"\nlow = 1.5",
                "whole low",
            ),
        ] {
            let s = spec(&base.replace(from, to));
            let p = s.problem().unwrap_or_default();
            assert!(p.contains(says), "{to}: {p}");
        }
        let mut s = spec(base);
        s.max_segments = 1;
        assert!(s.problem().unwrap().contains("max_segments 1"));
        s.max_segments = 4;
        s.segment_requests = 0;
        assert!(s.problem().unwrap().contains("segment_requests 0"));
        assert!(
            toml::from_str::<CapacitySpec>(
                "by = \"tokens\"\nlow = 1\nhigh = 2\nprecision_percent = 5\n"
            )
            .is_err()
        );
    }
}
