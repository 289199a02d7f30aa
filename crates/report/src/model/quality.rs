//! The quality gate's data (computed by `crate::quality`): the
//! hard-divergence share, each task's accuracy, each feature's delivered
//! share and the embeddings' agreement.

use serde::{Deserialize, Serialize};

use crate::stats::GateOutcome;

// ---- the quality gate's data (computed by `quality`) ----

/// Everything the quality gate is decided from, and its parts' outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualityComparison {
    /// The cross-runtime share of hard divergences (absent without
    /// reference pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_divergence: Option<HardDivergence>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskAccuracy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<FeatureRate>,
    /// Per embeddings workload both sides ran, the agreement of their vectors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub embeddings: Vec<crate::embedding::EmbeddingAgreement>,
}

/// One feature's delivered share on one workload, paired by request and
/// decided like a task's accuracy: `*_correct` counts the answers that
/// delivered the feature (mark `1`), `*_answers` are the marks themselves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureRate {
    /// `structured_output`.
    pub feature: String,
    /// Per side, how many answers carried each mark, by its name (`valid`,
    /// `schema_invalid`, `invalid_json`, `cut_off`, `no_answer`).
    pub baseline_marks: std::collections::BTreeMap<String, u64>,
    pub candidate_marks: std::collections::BTreeMap<String, u64>,
    #[serde(flatten)]
    pub rate: TaskAccuracy,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardDivergence {
    pub pairs: u64,
    /// Hard divergences and differing pairs without logprobs (not shown benign).
    pub hard: u64,
    pub percent: f64,
    pub lower_bound_percent: f64,
    pub upper_bound_percent: f64,
    pub margin_percent: f64,
    /// Whether the quality gate counts it (`cross_runtime = "rate"`).
    pub gating: bool,
    pub outcome: GateOutcome,
    /// Inconclusive: reference pairs at which the bounds would decide, the
    /// share held as observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_to_resolve: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskAccuracy {
    /// The task workload (its turnover name).
    pub name: String,
    pub items: u64,
    pub baseline_correct: u64,
    pub candidate_correct: u64,
    /// Items each side did not answer (a failed request): counted wrong.
    pub baseline_unanswered: u64,
    pub candidate_unanswered: u64,
    pub table: crate::stats::PairedCounts,
    /// (baseline − candidate accuracy) × 100: positive is worse.
    pub drop_points: f64,
    pub lower_bound_points: f64,
    pub upper_bound_points: f64,
    pub margin_points: f64,
    pub outcome: GateOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_to_resolve: Option<u64>,
    /// Per item, in order: `1` right, `0` wrong, `-` unanswered. What the
    /// table is counted from, so `verify` can count it again.
    pub baseline_answers: String,
    pub candidate_answers: String,
}
