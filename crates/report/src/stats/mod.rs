//! The statistics behind `compare`: percentiles, deltas, bootstrap confidence
//! intervals, per-metric verdicts and exact tests on failure counts.
//!
//! Everything here is a pure function of its inputs: no I/O, no clocks, and
//! randomness only from an explicit seed, so a report can be recomputed bit
//! for bit from its artifacts.
//!
//! Conventions:
//! - Non-finite sample values (NaN, ±inf) are excluded before any statistic;
//!   `Summary::n` counts only the values used.
//! - Deltas and thresholds are in percent: `delta_percent(100, 105) == 5.0`.
//! - Percentiles use [`PERCENTILE_METHOD`] throughout, including inside the
//!   bootstrap, so a CI brackets exactly the median delta the report prints.

pub mod attainment;
mod bootstrap;
mod delta;
pub mod evidence;
mod exact;
mod memo;
pub mod paired;
mod percentile;
pub mod probit;
pub mod sequential;
pub mod special;

pub use attainment::{
    AttainmentEvidence, attainment_evidence, attainment_interval, smallest_deciding_n,
};
pub use bootstrap::{
    BootstrapConfig, DEFAULT_BOOTSTRAP_SEED, SplitMix64, Xoshiro256, bootstrap_delta_ci,
    median_delta_percent, requests_to_resolve,
};
pub use delta::{
    Direction, GateOutcome, Interval, Verdict, delta_percent, verdict, within_regression_threshold,
};
pub use evidence::{
    BlockMean, BoundScale, Boundaries, Clustered, DesignSpread, DriftFloor, Evidence,
    EvidenceInput, Resampling, Spending, bootstrap_deltas, bootstrap_deltas_by, combine,
    newcombe_difference, paired_point_delta, paired_point_delta_by, pass_design_share,
};
pub use exact::{ExactTest, clopper_pearson, fisher_exact};
#[cfg(test)]
pub(crate) use paired::paired_difference;
pub use paired::{PairedCounts, drop_bounds_score};
pub use percentile::{
    PERCENTILE_METHOD, Summary, median, percentile, percentile_sorted, sorted_finite, summarize,
};
