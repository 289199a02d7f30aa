//! A cell's comparison: both sides' requests and eligibility, each gating
//! metric (its seed flag `no_more_than_<T>_percent_regression` written by
//! hand, since its name carries the threshold), the samples and request
//! rows kept, the SLO attainment and the server's view of both sides.

use std::collections::BTreeMap;

use serde::de;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::stats::{Direction, Evidence, Interval, Verdict};

use super::OrderedMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellComparison {
    pub baseline_requests: usize,
    pub candidate_requests: usize,
    pub baseline_performance_eligible: bool,
    pub candidate_performance_eligible: bool,
    /// The baseline run's median prompt tokens (the workload as measured on
    /// the runtime in service); the candidate's when the baseline has none.
    pub median_prompt_tokens: Option<f64>,
    pub metrics: OrderedMap<MetricComparison>,

    // ---- additions ----
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_median_prompt_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_median_prompt_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_ineligible_reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_ineligible_reasons: Vec<String>,
    /// Failed requests per side (an ineligible cell's evidence depends on them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_failed: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_failed: Option<usize>,
    /// Per-request values of the gating metrics' samples, keyed by sample name
    /// (`ttft_ms`, …), in request order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<OrderedMap<SamplePair>>,
    /// Why the two sides' measurements do not compare (e.g. different output
    /// lengths); both sides then read as ineligible, with this among the reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_comparable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_median_completion_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_median_completion_tokens: Option<f64>,
    /// The cell's tolerance the completion-token medians are held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tolerance_percent: Option<f64>,
    /// SLO attainment of both sides and the evidence on its drop, when the
    /// policy or the suite gives the cell SLOs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloComparison>,
    /// Every recorded request of each side (what `slo` is computed from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rows: Option<RowsPair>,
    /// Each side's client latency against the server's own timings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_server_timings: Option<crate::artifact::ServerTimingCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_server_timings: Option<crate::artifact::ServerTimingCheck>,
    /// Each side's requests by conversation turn, or by prompt length where
    /// lengths vary (workload cells): what a pooled median hides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_slices: Vec<crate::artifact::Slice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_slices: Vec<crate::artifact::Slice>,
    /// Each side's conversation sessions (workload cells with turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_sessions: Option<crate::artifact::Sessions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_sessions: Option<crate::artifact::Sessions>,
    /// Each side's server metrics over the cell (known metrics, gauges over
    /// time, the counter check; the raw series stay in the runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_server_metrics: Vec<crate::server_metrics::ServerMetrics>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_server_metrics: Vec<crate::server_metrics::ServerMetrics>,
    /// Each side's speculative decoding over the cell, as its server counted
    /// it (drafted and accepted tokens), when it said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_speculative: Option<crate::artifact::Speculative>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_speculative: Option<crate::artifact::Speculative>,
    /// A capacity cell: both sides' searches, the candidate's capacity over
    /// the baseline's and its gate (the cell has no gating metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityComparison>,
}

/// A capacity cell of both runs, gated on the ratio of their capacities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityComparison {
    pub baseline: crate::capacity::CapacityRun,
    pub candidate: crate::capacity::CapacityRun,
    /// Candidate over baseline, its interval two-sided at `1 − 2α`, α this
    /// pair's share of the gate's error.
    pub ratio: crate::capacity::CapacityRatio,
    pub margin_percent: f64,
    /// `1 − margin_percent / 100`: the ratio the whole interval must reach.
    pub floor: f64,
    pub outcome: crate::stats::GateOutcome,
    pub reason: String,
    /// Each side's goodput at its capacity, by rate
    /// (`CapacityRun::goodput_rps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_goodput_rps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_goodput_rps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowsPair {
    pub baseline: Vec<crate::artifact::RequestRow>,
    pub candidate: Vec<crate::artifact::RequestRow>,
}

/// One cell's SLO attainment on both sides, gated as a proportion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloComparison {
    pub targets: crate::artifact::Slo,
    /// "policy" (the policy's `[[slo]]`) or "suite" (the cell's own `slo`).
    pub source: String,
    /// Whether the attainment is a part of the evidence gate: the policy's
    /// SLOs gate, the suite's are reported beside the gate.
    pub gating: bool,
    pub margin_points: f64,
    pub baseline: crate::artifact::SloAttainment,
    pub candidate: crate::artifact::SloAttainment,
    /// Absent when a side has no requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::stats::AttainmentEvidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplePair {
    pub baseline: Vec<f64>,
    pub candidate: Vec<f64>,
    /// Cluster of each value (same order), when a side has more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_clusters: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_clusters: Option<Vec<u32>>,
}

/// One gating metric of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricComparison {
    pub baseline: f64,
    pub candidate: f64,
    /// (candidate − baseline) / baseline × 100; None when the baseline is 0.
    pub delta_percent: Option<f64>,
    /// Serialized as `no_more_than_<threshold>_percent_regression`: the change
    /// in the worse direction is at most the threshold.
    pub within_threshold: bool,
    /// The threshold the flag's name carries (also written as a field).
    pub threshold_percent: f64,
    pub direction: Option<Direction>,
    /// Sample the statistic is taken of (`ttft_ms`), and which quantile.
    pub sample: Option<String>,
    pub quantile: Option<f64>,
    pub baseline_n: Option<usize>,
    pub candidate_n: Option<usize>,
    /// Bootstrap CI of delta_percent (p50 metrics only).
    pub ci_delta_percent: Option<Interval>,
    pub verdict: Option<Verdict>,
    /// Requests per side that should resolve an inconclusive verdict; only
    /// written for inconclusive verdicts.
    pub requests_to_resolve: Option<usize>,
    /// The gate's evidence for this metric: one-sided bounds against the
    /// margin and the outcome they give.
    pub evidence: Option<Evidence>,
}

const FLAG_PREFIX: &str = "no_more_than_";
const FLAG_SUFFIX: &str = "_percent_regression";

/// `no_more_than_5_percent_regression` for 5, `…_2.5_percent_…` for 2.5.
pub fn regression_flag_name(threshold_percent: f64) -> String {
    // f64's Display prints 5.0 as "5", which is the seed's spelling.
    format!("{FLAG_PREFIX}{threshold_percent}{FLAG_SUFFIX}")
}

/// The threshold a flag name carries, or None when `key` is not a flag name.
pub fn parse_regression_flag(key: &str) -> Option<f64> {
    let t: f64 = key
        .strip_prefix(FLAG_PREFIX)?
        .strip_suffix(FLAG_SUFFIX)?
        .parse()
        .ok()?;
    (t.is_finite() && t >= 0.0).then_some(t)
}

impl Serialize for MetricComparison {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("baseline", &self.baseline)?;
        m.serialize_entry("candidate", &self.candidate)?;
        m.serialize_entry("delta_percent", &self.delta_percent)?;
        m.serialize_entry(
            &regression_flag_name(self.threshold_percent),
            &self.within_threshold,
        )?;
        m.serialize_entry("threshold_percent", &self.threshold_percent)?;
        macro_rules! opt {
            ($($f:ident),*) => {$(
                if let Some(v) = &self.$f {
                    m.serialize_entry(stringify!($f), v)?;
                }
            )*};
        }
        opt!(
            direction,
            sample,
            quantile,
            baseline_n,
            candidate_n,
            ci_delta_percent,
            verdict,
            requests_to_resolve,
            evidence
        );
        m.end()
    }
}

impl<'de> Deserialize<'de> for MetricComparison {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Repr {
            baseline: f64,
            candidate: f64,
            delta_percent: Option<f64>,
            #[serde(default)]
            threshold_percent: Option<f64>,
            #[serde(default)]
            direction: Option<Direction>,
            #[serde(default)]
            sample: Option<String>,
            #[serde(default)]
            quantile: Option<f64>,
            #[serde(default)]
            baseline_n: Option<usize>,
            #[serde(default)]
            candidate_n: Option<usize>,
            #[serde(default)]
            ci_delta_percent: Option<Interval>,
            #[serde(default)]
            verdict: Option<Verdict>,
            #[serde(default)]
            requests_to_resolve: Option<usize>,
            #[serde(default)]
            evidence: Option<Evidence>,
            // Catches the flag, whose name is not known in advance.
            #[serde(flatten)]
            rest: BTreeMap<String, serde_json::Value>,
        }
        let r = Repr::deserialize(d)?;
        let mut flags = r
            .rest
            .iter()
            .filter_map(|(k, v)| parse_regression_flag(k).map(|t| (k, t, v)));
        let (key, threshold, value) = flags.next().ok_or_else(|| {
            de::Error::custom("missing field `no_more_than_<T>_percent_regression`")
        })?;
        if let Some((other, _, _)) = flags.next() {
            return Err(de::Error::custom(format!(
                "two regression flags: `{key}` and `{other}`"
            )));
        }
        let within_threshold = value
            .as_bool()
            .ok_or_else(|| de::Error::custom(format!("`{key}` must be a boolean")))?;
        if let Some(t) = r.threshold_percent
            && t != threshold
        {
            return Err(de::Error::custom(format!(
                "threshold_percent {t} disagrees with the flag `{key}`"
            )));
        }
        Ok(MetricComparison {
            baseline: r.baseline,
            candidate: r.candidate,
            delta_percent: r.delta_percent,
            within_threshold,
            threshold_percent: threshold,
            direction: r.direction,
            sample: r.sample,
            quantile: r.quantile,
            baseline_n: r.baseline_n,
            candidate_n: r.candidate_n,
            ci_delta_percent: r.ci_delta_percent,
            verdict: r.verdict,
            requests_to_resolve: r.requests_to_resolve,
            evidence: r.evidence,
        })
    }
}
