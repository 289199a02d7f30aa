//! The comparison policy: which metrics gate, their thresholds and
//! directions, the turnover gate mode and the bootstrap settings. Read from a
//! TOML file (see `policies/default.toml`) or built from defaults.
//!
//! ```toml
//! threshold_percent = 5            # default for every metric
//!
//! [[metric]]
//! name = "ttft_p50_ms"             # sample `ttft_ms`, quantile 0.5 and
//! threshold_percent = 3            # lower-is-better follow from the name
//!
//! [turnover]
//! gate = "non_inferior"            # or "strict"
//! alpha = 0.05
//!
//! [bootstrap]
//! iterations = 10000
//! confidence = 0.95
//! seed = 7
//!
//! [[slo]]                          # gate on SLO attainment (a binomial)
//! cell = "c1-256"                  # absent: every cell
//! ttft_ms = 1500                   # any subset of ttft_ms, tpot_ms, e2e_ms
//! tpot_ms = 80
//! margin_points = 5                # the attainment may drop at most 5 points
//!
//! [quality]
//! cross_runtime = "near_tie"       # or "exact" (the default), or "rate"
//! near_tie_nats = 0.5              # tolerance of a near-tie divergence
//! hard_margin_percent = 10         # "rate": the hard-divergence share's margin
//! accuracy_margin_points = 5       # task accuracy may drop at most 5 points
//! feature_margin_points = 5        # a feature's delivered share (valid JSON, …) likewise
//! embedding_cosine_min = 0.85      # embeddings: every input's cosine across runtimes at least
//! embedding_cosine_mean_min = 0.97 # and their mean at least
//!
//! [[quality.embeddings]]           # one embeddings workload's own floors
//! workload = "alone"
//! cosine_min = 0.999
//! ```
//!
//! Here the typed policy and its defaults; the TOML as serde reads it, and
//! its checks with the file, line and field of each error, in `raw`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;

use crate::stats::evidence::Spending;
use crate::stats::{BootstrapConfig, Direction};

pub use super::model::PolicySlo as SloSpec;
pub use super::model::TurnoverGateMode;
use super::model::{PolicyMetric, PolicySummary};

mod raw;

pub const DEFAULT_THRESHOLD_PERCENT: f64 = 5.0;
pub const DEFAULT_METRICS: [&str; 3] = ["ttft_p50_ms", "e2e_p50_ms", "decode_tok_s_p50"];
pub const DEFAULT_ALPHA: f64 = 0.05;
pub const DEFAULT_TURNOVER_CONFIDENCE: f64 = 0.95;

/// One gating metric: the `quantile` of per-request `sample` values.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// Name in the report (`ttft_p50_ms`).
    pub name: String,
    /// Per-request sample key in the run artifact (`ttft_ms`).
    pub sample: String,
    pub quantile: f64,
    pub direction: Direction,
    pub threshold_percent: f64,
}

impl MetricSpec {
    /// A metric whose sample, quantile and direction follow from its name.
    pub fn from_name(name: &str, threshold_percent: f64) -> Option<MetricSpec> {
        let (sample, quantile) = split_quantile(name)?;
        Some(MetricSpec {
            name: name.to_string(),
            direction: infer_direction(&sample)?,
            sample,
            quantile,
            threshold_percent,
        })
    }
}

/// `ttft_p50_ms` → (`ttft_ms`, 0.5); `decode_tok_s_p99` → (`decode_tok_s`,
/// 0.99); `e2e_p999_ms` → (`e2e_ms`, 0.999). None without a `_pNN` part.
pub fn split_quantile(name: &str) -> Option<(String, f64)> {
    let parts: Vec<&str> = name.split('_').collect();
    let (i, digits) = parts.iter().enumerate().find_map(|(i, p)| {
        let d = p.strip_prefix('p')?;
        (i > 0 && !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())).then_some((i, d))
    })?;
    // pNN is NN percent, so the quantile is "0.NN" (p5 → 0.05, p999 → 0.999),
    // parsed from text to avoid a rounding step; p100 is the maximum.
    let quantile: f64 = match digits {
        "100" => 1.0,
        d if d.len() == 1 => format!("0.0{d}").parse().ok()?,
        d => format!("0.{d}").parse().ok()?,
    };
    let mut rest = parts;
    rest.remove(i);
    Some((rest.join("_"), quantile))
}

/// Throughputs (`tok_s` anywhere in the name) are better higher; latencies
/// (ending `_ms`) better lower. None when the name says neither.
pub fn infer_direction(name: &str) -> Option<Direction> {
    if name.contains("tok_s") {
        Some(Direction::HigherIsBetter)
    } else if name.ends_with("_ms") {
        Some(Direction::LowerIsBetter)
    } else {
        None
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnoverPolicy {
    pub gate: TurnoverGateMode,
    /// Significance level of the one-sided test in `non_inferior` mode.
    pub alpha: f64,
    /// Confidence of the Clopper–Pearson failure-rate intervals.
    pub confidence: f64,
    /// Non-inferiority margin on the failure-rate difference (candidate −
    /// baseline): the one-sided upper bound at `1 − alpha` must be below it.
    pub margin: f64,
}

// Defined beside the classifier (no import cycle through the report model).
pub use crate::agreement::{CrossRuntime, EmbeddingFloors, QualityPolicy};

/// Which rule decides the qualification's performance part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    /// Confidence bounds against each margin: pass, fail or inconclusive.
    Evidence,
    /// The seed's point-delta flags (`no_more_than_<T>_percent_regression`).
    Point,
}

impl GateRule {
    pub fn as_str(self) -> &'static str {
        match self {
            GateRule::Evidence => "evidence",
            GateRule::Point => "point",
        }
    }
}

/// The evidence gate's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GatePolicy {
    pub decide: GateRule,
    /// One-sided error of the gate: the chance of failing a runtime no worse
    /// than its margins (family-wise), and of passing one that is worse.
    pub alpha: f64,
    /// Between-pass s.d. (percent) assumed when the design cannot measure
    /// drift (one pass per side at different times) and no calibration is given.
    pub drift_sd_percent: f64,
    /// Where `drift_sd_percent` came from.
    pub drift_source: String,
    /// How an adaptive run shares `alpha` between its looks.
    pub spending: Spending,
}

pub const DEFAULT_GATE_ALPHA: f64 = 0.05;
/// ±12 % run-to-run range of p50 TTFT measured on the reference engine ≈ ±2 s.d.
pub const DEFAULT_DRIFT_SD_PERCENT: f64 = 6.0;
/// Default non-inferiority margin on SLO attainment, in percentage points.
pub const DEFAULT_SLO_MARGIN_POINTS: f64 = 5.0;
/// Default turnover non-inferiority margin: 5 percentage points of failure rate.
pub const DEFAULT_TURNOVER_MARGIN: f64 = 0.05;

impl Default for GatePolicy {
    fn default() -> Self {
        GatePolicy {
            decide: GateRule::Evidence,
            alpha: DEFAULT_GATE_ALPHA,
            drift_sd_percent: DEFAULT_DRIFT_SD_PERCENT,
            drift_source: "policy default (6%: the ±12% run-to-run range measured on the reference engine); run `infergate calibrate` for this runtime and suite".into(),
            spending: Spending::OBrienFleming,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// "defaults" or the file it was read from.
    pub source: String,
    pub metrics: Vec<MetricSpec>,
    pub turnover: TurnoverPolicy,
    pub bootstrap: BootstrapConfig,
    pub gate: GatePolicy,
    /// SLOs to gate on, per cell (a spec without a cell applies to every
    /// cell; a cell's own spec wins over it).
    pub slo: Vec<SloSpec>,
    pub quality: QualityPolicy,
    /// How capacity cells are gated (`[capacity]`).
    pub capacity: CapacityPolicy,
}

/// `[capacity]`: a capacity cell fails when the whole interval of the
/// candidate's capacity over the baseline's is below `1 − margin_percent /
/// 100`, passes when all of it is at or above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityPolicy {
    pub margin_percent: f64,
}

impl Default for CapacityPolicy {
    fn default() -> Self {
        CapacityPolicy {
            margin_percent: crate::capacity::DEFAULT_MARGIN_PERCENT,
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            source: "defaults".to_string(),
            metrics: DEFAULT_METRICS
                .iter()
                .filter_map(|n| MetricSpec::from_name(n, DEFAULT_THRESHOLD_PERCENT))
                .collect(),
            turnover: TurnoverPolicy {
                gate: TurnoverGateMode::Strict,
                alpha: DEFAULT_ALPHA,
                confidence: DEFAULT_TURNOVER_CONFIDENCE,
                margin: DEFAULT_TURNOVER_MARGIN,
            },
            bootstrap: BootstrapConfig::default(),
            gate: GatePolicy::default(),
            slo: Vec::new(),
            quality: QualityPolicy::default(),
            capacity: CapacityPolicy::default(),
        }
    }
}

impl Policy {
    /// Every metric with the same threshold (e.g. to name the flag
    /// `no_more_than_3_percent_regression`).
    pub fn with_threshold(mut self, threshold_percent: f64) -> Policy {
        // No longer what its source says (`verify` holds "defaults" to the defaults).
        self.source = format!("{} with threshold_percent {threshold_percent}", self.source);
        for m in &mut self.metrics {
            m.threshold_percent = threshold_percent;
        }
        self
    }

    /// The SLO spec that applies to `cell`: its own, else the one for every cell.
    pub fn slo_for(&self, cell: &str) -> Option<&SloSpec> {
        let own = self.slo.iter().find(|s| s.cell.as_deref() == Some(cell));
        own.or_else(|| self.slo.iter().find(|s| s.cell.is_none()))
    }

    pub fn summary(&self) -> PolicySummary {
        PolicySummary {
            source: self.source.clone(),
            metrics: self
                .metrics
                .iter()
                .map(|m| PolicyMetric {
                    name: m.name.clone(),
                    sample: m.sample.clone(),
                    quantile: m.quantile,
                    direction: m.direction,
                    threshold_percent: m.threshold_percent,
                })
                .collect(),
            turnover_gate: self.turnover.gate,
            alpha: self.turnover.alpha,
            slo: self.slo.clone(),
        }
    }

    pub fn from_file(path: &Path) -> Result<Policy, ConfigError> {
        let text = crate::files::read_regular(path)
            .and_then(|b| {
                String::from_utf8(b)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|e| {
                ConfigError::file(path.display().to_string(), format!("cannot read: {e}"))
            })?;
        Policy::from_toml_str(&text, &path.display().to_string())
    }

    /// Parse policy text; `file` names it in errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Policy, ConfigError> {
        let raw: raw::RawPolicy =
            toml::from_str(text).map_err(|e| ConfigError::toml(file, text, &e))?;
        raw.into_policy(text, file)
    }
}

/// Most bootstrap resamples a policy may ask for: 100 × the default, far past
/// any gain in precision; beyond it `compare` would run for hours (and hold
/// one f64 per resample).
pub const MAX_BOOTSTRAP_ITERATIONS: usize = 1_000_000;

/// Largest regression threshold a metric may have, percent: 1000 % is an
/// eleven-fold slowdown, already past any gate worth the name; beyond it a
/// threshold (1e308) only overflows the arithmetic made of it.
pub const MAX_THRESHOLD_PERCENT: f64 = 1000.0;

#[cfg(test)]
mod tests;
