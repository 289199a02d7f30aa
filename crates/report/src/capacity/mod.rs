//! Capacity at the SLO: the highest load one runtime holds with its
//! attainment at or above the cell's minimum, found by a search that
//! spends its requests near the edge, bounded by a fitted attainment curve,
//! and compared between two runtimes by a tri-state gate on the ratio.
//!
//! `spec` is the cell's table, `level` one level's decision, `search` where
//! to measure next, `estimate` the capacity and the ratio with their
//! intervals, `run` one side's search as a run records it. Running a level is the measuring stage's; everything here is
//! a pure function of the segments' counts, so `verify` remakes it.

pub mod estimate;
pub mod level;
pub mod run;
pub mod search;
pub mod shared;
#[cfg(test)]
mod simulation;
pub mod spec;
pub mod words;

pub use estimate::{CapacityEstimate, CapacityRatio, IntervalMethod, LogCapacity, estimate, ratio};
pub use level::{LevelDecision, LevelEvidence, Segment};
pub use run::{CapacityRun, LevelRun, SegmentRun, Stopped};
pub use search::{Ended, Next, SearchRule, Tried};
pub use spec::{CapacitySpec, LoadAxis};

use crate::stats::GateOutcome;

/// The policy's capacity margin unless it says otherwise, in percent.
pub const DEFAULT_MARGIN_PERCENT: f64 = 5.0;

/// Fail when the whole ratio interval is below `1 − margin`, pass when all
/// of it is at or above, else inconclusive. The interval's confidence is
/// `1 − 2α` for a one-sided error `α` at each end.
pub fn gate(r: &CapacityRatio, margin_percent: f64) -> GateOutcome {
    let floor = 1.0 - margin_percent / 100.0;
    match r.interval {
        Some([_, hi]) if hi < floor => GateOutcome::Fail,
        Some([lo, _]) if lo >= floor => GateOutcome::Pass,
        _ => GateOutcome::Inconclusive,
    }
}
