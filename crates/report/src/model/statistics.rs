//! The report's `statistics` block: how every number in it was made (the
//! percentile method, the bootstrap, the rules), the family-wise error
//! control over pairs and looks, and the design the evidence was computed by.

use serde::{Deserialize, Serialize};

use crate::stats::{DriftFloor, Resampling};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootstrapSettings {
    pub iterations: usize,
    pub confidence: f64,
    pub seed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statistics {
    pub percentile_method: String,
    pub delta_percent: String,
    pub bootstrap: BootstrapSettings,
    pub bootstrap_statistic: String,
    pub verdict_rule: String,
    pub regression_flag_rule: String,
    pub turnover_test: String,
    pub turnover_interval: String,
    // ---- evidence gate ----
    /// Which rule decides the qualification: `evidence` or `point`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_decides: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_rule: Option<String>,
    /// Family-wise error control across gating metrics × cells and looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_wise: Option<FamilyWise>,
    /// How the two sides were scheduled, and how the bootstrap resampled them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<Design>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnover_margin: Option<f64>,
    /// The policy's drift floor, applied where the design cannot see drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_floor: Option<DriftFloor>,
    /// Every cell carries the per-request samples of its gating metrics
    /// (`cells.<cell>.samples`), so `verify` can recompute them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_kept: Option<bool>,
    /// How SLO attainment is gated, when any cell has SLOs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment_rule: Option<String>,
}

/// `statistics.family_wise`: how the gate's alpha is spread over its
/// gating pairs and its looks, written from the comparison's
/// [`crate::design::Look`] and read back into one by `verify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyWise {
    pub method: String,
    /// One-sided error of the gate as a whole.
    pub alpha: f64,
    /// Gating (cell, metric) pairs in the family.
    pub gating_pairs: usize,
    /// Planned maximum looks at the data (1: fixed size).
    pub looks: usize,
    /// Which look this report is (1-based); `compare` writes it at every look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look: Option<usize>,
    /// This look closed the run before its planned last (time budget) and
    /// spent what the earlier looks left; absent: it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closing: Option<bool>,
    /// The information fraction this look was made at, and the previous
    /// look's (0 for the first): the share of the budget the run measured
    /// it will have; the last two of `information_fractions`, with which
    /// they are present. Absent: `look / looks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub information_fraction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_information_fraction: Option<f64>,
    /// Every look's information fraction, this one last, when the levels
    /// are exact group-sequential boundaries over them (`boundaries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub information_fractions: Option<Vec<f64>>,
    /// The pass bounds' own fractions, every look's, this one last, when
    /// the pass side's error is spent by its own information (the design
    /// needs less to pass than to fail: `stats::evidence::pass_design_share`);
    /// absent: the pass side spends over `information_fractions` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_information_fractions: Option<Vec<f64>>,
    /// How the levels follow from the looks' shares of alpha; absent: the
    /// share is the level (union bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundaries: Option<crate::stats::evidence::Boundaries>,
    /// How alpha is shared between looks; `compare` writes it at every look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spending: Option<crate::stats::evidence::Spending>,
    /// The scale the evidence bounds were built on (the method's,
    /// [`crate::design::Method`]); `compare` always writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_scale: Option<crate::stats::evidence::BoundScale>,
    /// Level of each pair's pass bound and fail bound.
    pub alpha_pass: f64,
    pub alpha_fail: f64,
}

/// `statistics.design`: the schedule, its resampling and the method the
/// evidence was computed by ([`crate::design::Method::design`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// `single`, `alternating_passes` or `interleaved` (baseline's; both must agree).
    pub schedule: String,
    pub resampling: Resampling,
    pub resampling_method: String,
    /// Why the drift floor applies, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_floor_reason: Option<String>,
    /// Interleaved: request k of a block resampled on both sides together
    /// where every request has its value (`paired_requests` in a metric's
    /// evidence); absent: blocks only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_requests: Option<bool>,
    /// Paired designs: how the blocks' log ratios combine; present exactly
    /// for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_mean: Option<crate::stats::BlockMean>,
    /// What an adaptive run's design plans from (each evidence part's
    /// `design_requests_per_side`); `compare` always writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_spread: Option<crate::stats::DesignSpread>,
}
