//! The gates: each checked condition of the point and turnover gates, and
//! each (cell, metric) pair's evidence outcome with what its verdict cost.

use serde::{Deserialize, Serialize};

use crate::stats::GateOutcome;

/// One checked condition of a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatePart {
    /// JSON path of what was checked (`cells.capacity-4k.metrics.ttft_p50_ms`).
    pub subject: String,
    pub passed: bool,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub passed: bool,
    pub rule: String,
    pub parts: Vec<GatePart>,
    /// Present when the gate did not run, saying why ("skipped by the
    /// plan"): then it has no parts and `passed` is false, since nothing passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

impl Gate {
    pub fn new(rule: &str, parts: Vec<GatePart>) -> Gate {
        Gate {
            passed: parts.iter().all(|p| p.passed),
            rule: rule.to_string(),
            parts,
            not_run: None,
        }
    }

    /// A gate that did not run, and `why`.
    pub fn not_run(rule: &str, why: &str) -> Gate {
        Gate {
            passed: false,
            rule: rule.to_string(),
            parts: Vec::new(),
            not_run: Some(why.to_string()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    pub performance: Gate,
    /// The performance gate decided by confidence bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_evidence: Option<EvidenceGate>,
    pub strict_turnover: Gate,
    pub non_inferior_turnover: Gate,
    /// Output quality (task accuracy; hard divergences under
    /// `cross_runtime = "rate"`), when the runs hold something it gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<EvidenceGate>,
    /// Performance gate and the policy's turnover gate both passed (and the
    /// quality gate, where there is one).
    pub qualified: bool,
}

/// One gating (cell, metric) pair's evidence outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidencePart {
    pub subject: String,
    pub outcome: GateOutcome,
    pub reason: String,
    /// Requests per side that would decide an inconclusive pair, when more
    /// requests can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_to_resolve: Option<usize>,
    /// Requests per side the pair's evidence rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_side: Option<usize>,
    /// What a known-variance oracle needs on the same data to decide what
    /// the pair shows (`stats::evidence::oracle_requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_requests_per_side: Option<usize>,
    /// The same for a fixed-size t test that learns the spread from its own
    /// requests (`stats::evidence::learning_oracle_requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_oracle_requests_per_side: Option<usize>,
    /// Requests per side at which the pair's bounds reach the design's
    /// power at a margin's distance (`stats::evidence::design_requests`),
    /// from its standard error at this look: what an adaptive run plans
    /// its looks by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_requests_per_side: Option<usize>,
    /// The known-variance oracle on an interleaved design's blocks: each
    /// block's log ratio of the two sides' quantiles, its SD taken as
    /// known, blocks rounded up to whole rounds, times the cell's window
    /// (`stats::evidence::block_oracle`). Requests inside a block are
    /// correlated (one batch at a concurrency above 1): this is the oracle
    /// to hold such a design's cost against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_oracle_requests_per_side: Option<usize>,
    /// The design effect: `block_oracle_requests_per_side` over
    /// `oracle_requests_per_side`, what the blocks' correlation (and their
    /// rounding to whole rounds) costs over independent request pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_effect: Option<f64>,
    /// Whether the pair's bounds inform a reader
    /// (`stats::evidence::informative`): false for an undecided pair on
    /// fewer than 4 resampling units or with a bound beyond 10× either way.
    /// The bounds stay in the report; the views print `not_informative`
    /// instead of them. True where the pair has no bounds. A report
    /// without the field reads as true.
    #[serde(default = "informative_by_default")]
    pub informative: bool,
    /// Why the bounds are not informative, in words, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_informative: Option<String>,
}

fn informative_by_default() -> bool {
    true
}

impl EvidencePart {
    /// A part with no request figures (undecided by more requests, or not a
    /// performance pair); set the ones that apply with struct update syntax.
    pub fn new(
        subject: impl Into<String>,
        outcome: GateOutcome,
        reason: impl Into<String>,
    ) -> Self {
        EvidencePart {
            subject: subject.into(),
            outcome,
            reason: reason.into(),
            requests_to_resolve: None,
            requests_per_side: None,
            oracle_requests_per_side: None,
            learning_oracle_requests_per_side: None,
            design_requests_per_side: None,
            block_oracle_requests_per_side: None,
            design_effect: None,
            informative: true,
            not_informative: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceGate {
    pub outcome: GateOutcome,
    pub rule: String,
    pub parts: Vec<EvidencePart>,
    /// For an inconclusive gate: the largest requests-per-side any
    /// undecided pair needs (None when some pair cannot be decided by more requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_to_resolve: Option<usize>,
    /// What the verdict cost: the most requests per side any deciding pair
    /// used, and what the oracle needs on the same data for the same
    /// verdict (a pass: the most any pair needs, all must pass; a fail: the
    /// fewest a failing pair needs; undecided: the most an undecided pair
    /// needs). Absent where a pair has no such number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_side: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_requests_per_side: Option<usize>,
    /// The same verdict's need for the oracle that learns the spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_oracle_requests_per_side: Option<usize>,
    /// The same verdict's need for the block-level oracle (each part's
    /// `block_oracle_requests_per_side`): a fail, the cheapest failing
    /// pair's; a pass, the dearest pair's; undecided, the dearest
    /// undecided pair's (what would decide them all). Absent where a pair
    /// it would take has none (a design without shared blocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_oracle_requests_per_side: Option<usize>,
    /// The design effect of the pair `block_oracle_requests_per_side` is taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_effect: Option<f64>,
}
