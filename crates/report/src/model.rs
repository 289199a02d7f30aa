//! Serde types of a `runtime-profile-comparison/v1` report.
//!
//! The seed's fields keep their names and meanings; everything else is an
//! addition and optional on read, so the seed itself deserializes. Two seed
//! fields have names that carry data, and get hand-written (de)serialization:
//! the per-metric flag `no_more_than_<T>_percent_regression` embeds the
//! threshold, and turnover runs are spread over `<side>_turnover`,
//! `<side>_turnover_repeat`, `<side>_turnover_repeat_2`, ….

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::artifact::{Provenance, TurnoverFailure};
use crate::stats::{
    Direction, DriftFloor, Evidence, ExactTest, GateOutcome, Interval, Resampling, Verdict,
};

pub const REPORT_SCHEMA: &str = "runtime-profile-comparison/v1";

/// Written to `promotion` and `human_decision` until someone decides.
pub const PENDING: &str = "pending";

/// A JSON object whose key order is kept (serde_json here sorts its maps, and
/// the order of cells and metrics is the order a reader expects).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> Default for OrderedMap<V> {
    fn default() -> Self {
        OrderedMap(Vec::new())
    }
}

impl<V> OrderedMap<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
            type Value = OrderedMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, V)> = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, V>()? {
                    if out.iter().any(|(seen, _)| *seen == k) {
                        return Err(de::Error::custom(format!("duplicate key `{k}`")));
                    }
                    out.push((k, v));
                }
                Ok(OrderedMap(out))
            }
        }
        d.deserialize_map(V_(PhantomData))
    }
}

/// The whole report. Field order follows the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub baseline_image: String,
    pub candidate_image: String,
    pub cells: OrderedMap<CellComparison>,
    /// Every gating metric of every cell within its threshold, and every cell
    /// performance-eligible on both sides.
    pub performance_gate_passed: bool,
    /// Every candidate turnover run: zero failed requests (and, where counted,
    /// zero contaminated answers). False when the candidate has no turnover run.
    pub strict_turnover_gate_passed: bool,
    pub qualification: String,
    pub promotion: String,
    #[serde(flatten)]
    pub turnover: TurnoverRuns,
    pub human_decision: String,

    // ---- additions ----
    /// The performance gate decided from confidence bounds (pass, fail,
    /// inconclusive); see `statistics.evidence_rule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_outcome: Option<GateOutcome>,
    /// Which turnover gate the policy counts toward qualification, and its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnover_gate: Option<TurnoverGateResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnover_comparison: Option<TurnoverComparison>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<Statistics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<Gates>,
    /// The gating metrics and thresholds used, so a reader (and `verify`) knows
    /// which metrics every cell should have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenancePair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Things a reader should know that are not gate failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The candidate's reference texts against the baseline's, per prompt:
    /// identical, near-tie or hard divergence, from per-token logprobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_comparison: Option<crate::reference::ReferenceComparison>,
    /// Output quality across runtimes, decided by evidence: the share of
    /// hard divergences and each task's accuracy drop (`gates.quality`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<QualityComparison>,
}

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

/// One turnover run in the seed's shape, plus optional additions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverRunReport {
    pub requests: usize,
    pub exact_output_passed: usize,
    pub failed: usize,
    pub responses_received: usize,
    pub performance_eligible: bool,
    pub failures: Vec<TurnoverFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Answers that carried another request's canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contaminated: Option<usize>,
    /// A schema's first request's TTFT and the later ones' median (the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_ttft_p50_ms: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Baseline,
    Candidate,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The key of a side's `ordinal`-th turnover run: `candidate_turnover`,
/// `candidate_turnover_repeat`, `candidate_turnover_repeat_2`, ….
pub fn turnover_key(side: Side, ordinal: usize) -> String {
    match ordinal {
        0 => format!("{side}_turnover"),
        1 => format!("{side}_turnover_repeat"),
        k => format!("{side}_turnover_repeat_{k}"),
    }
}

/// Inverse of [`turnover_key`].
pub fn parse_turnover_key(key: &str) -> Option<(Side, usize)> {
    let (side, rest) = if let Some(r) = key.strip_prefix("baseline_turnover") {
        (Side::Baseline, r)
    } else {
        (Side::Candidate, key.strip_prefix("candidate_turnover")?)
    };
    let ordinal = match rest {
        "" => 0,
        "_repeat" => 1,
        r => {
            let k: usize = r.strip_prefix("_repeat_")?.parse().ok()?;
            // `_repeat_1` and `_repeat_01` would alias other spellings.
            if k < 2 || r != format!("_repeat_{k}") {
                return None;
            }
            k
        }
    };
    Some((side, ordinal))
}

/// All turnover runs of both sides, in ordinal order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnoverRuns {
    pub baseline: Vec<TurnoverRunReport>,
    pub candidate: Vec<TurnoverRunReport>,
}

impl TurnoverRuns {
    pub fn side(&self, side: Side) -> &[TurnoverRunReport] {
        match side {
            Side::Baseline => &self.baseline,
            Side::Candidate => &self.candidate,
        }
    }
}

impl Serialize for TurnoverRuns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for side in [Side::Baseline, Side::Candidate] {
            for (i, run) in self.side(side).iter().enumerate() {
                m.serialize_entry(&turnover_key(side, i), run)?;
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for TurnoverRuns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Receives every key the Report does not name; keeps the turnover ones
        // and ignores the rest (fields added by later versions).
        let all = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
        let mut found: BTreeMap<(Side, usize), TurnoverRunReport> = BTreeMap::new();
        for (k, v) in all {
            if let Some(pos) = parse_turnover_key(&k) {
                let run = TurnoverRunReport::deserialize(v)
                    .map_err(|e| de::Error::custom(format!("`{k}`: {e}")))?;
                found.insert(pos, run);
            }
        }
        let mut out = TurnoverRuns::default();
        for ((side, ordinal), run) in found {
            let list = match side {
                Side::Baseline => &mut out.baseline,
                Side::Candidate => &mut out.candidate,
            };
            if ordinal != list.len() {
                return Err(de::Error::custom(format!(
                    "`{}` is missing before `{}`",
                    turnover_key(side, list.len()),
                    turnover_key(side, ordinal)
                )));
            }
            list.push(run);
        }
        Ok(out)
    }
}

/// Failure counts of one or more turnover runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureRate {
    /// Report keys of the runs counted (more than one when pooled).
    pub runs: Vec<String>,
    pub requests: u64,
    pub failed: u64,
    /// failed / requests; None when there were no requests.
    pub failure_rate: Option<f64>,
    /// Clopper–Pearson interval of the failure rate.
    pub failure_rate_ci: Option<Interval>,
    /// Answers carrying another request's canary; None when not counted.
    pub contaminated: Option<u64>,
}

/// A candidate run (or the pooled candidate runs) against the pooled baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateTurnover {
    #[serde(flatten)]
    pub counts: FailureRate,
    /// Fisher's exact test of candidate vs baseline failure proportions.
    pub vs_baseline: Option<ExactTest>,
    /// Not significantly worse than the baseline (p_candidate_worse ≥ alpha)
    /// and zero contamination. None when there is no baseline to compare with.
    pub non_inferior: Option<bool>,
    /// One-sided upper bound (at 1 − alpha) of the failure-rate difference
    /// candidate − baseline (Newcombe), when the policy sets a margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference_upper_bound: Option<f64>,
}

/// Turnover runs that share a name (one workload), compared side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverGroup {
    pub name: String,
    /// The baseline's runs of this name, pooled.
    pub baseline: Option<FailureRate>,
    pub candidate_runs: Vec<CandidateTurnover>,
    /// The candidate's runs of this name, pooled.
    pub candidate_pooled: Option<CandidateTurnover>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverComparison {
    pub alpha: f64,
    pub confidence: f64,
    /// Non-inferiority margin on the failure-rate difference; absent in
    /// reports made before margins (their rule was Fisher p ≥ alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    pub groups: Vec<TurnoverGroup>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverGateResult {
    pub mode: TurnoverGateMode,
    pub passed: bool,
}

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
}

impl Gate {
    pub fn new(rule: &str, parts: Vec<GatePart>) -> Gate {
        Gate {
            passed: parts.iter().all(|p| p.passed),
            rule: rule.to_string(),
            parts,
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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyMetric {
    pub name: String,
    pub sample: String,
    pub quantile: f64,
    pub direction: Direction,
    pub threshold_percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    /// Where the policy came from: a file path, or "defaults".
    pub source: String,
    pub metrics: Vec<PolicyMetric>,
    pub turnover_gate: TurnoverGateMode,
    pub alpha: f64,
    /// SLO attainment gates, per cell (absent in reports from before them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<PolicySlo>,
}

/// One SLO gate of the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySlo {
    /// The cell it applies to; absent: every cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    pub targets: crate::artifact::Slo,
    /// How far (percentage points) the candidate's attainment may fall below the baseline's.
    pub margin_points: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenancePair {
    pub baseline: Provenance,
    pub candidate: Provenance,
    /// Every file `compare` read, with its sha256 (`compare_files` records them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputDigest>,
}

/// One file a report was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputDigest {
    pub side: Side,
    /// `run_artifact` or `journal`.
    pub role: String,
    /// As given to `compare`.
    pub path: String,
    pub sha256: String,
}

pub const INPUT_RUN_ARTIFACT: &str = "run_artifact";
pub const INPUT_JOURNAL: &str = "journal";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecisionAction {
    #[serde(rename = "promote")]
    Promote,
    #[serde(rename = "retain-baseline")]
    RetainBaseline,
    #[serde(rename = "pending")]
    Pending,
}

impl DecisionAction {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionAction::Promote => "promote",
            DecisionAction::RetainBaseline => "retain-baseline",
            DecisionAction::Pending => PENDING,
        }
    }
}

/// The human decision, typed. `human_decision` and `promotion` carry it as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub action: DecisionAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub who: Option<String>,
    /// RFC 3339 time of the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Decision {
    pub fn pending() -> Decision {
        Decision {
            action: DecisionAction::Pending,
            who: None,
            when: None,
            note: None,
        }
    }
}

impl Report {
    pub fn to_value(&self) -> serde_json::Value {
        // A Report holds only finite numbers and string keys, so this cannot fail;
        // Null keeps the signature simple should that ever change.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Record a human decision: the typed `decision` and the seed's text
    /// field `human_decision` (`retain-baseline; <note>`). `promotion` says
    /// what was done about it and is set by whoever carries it out
    /// ([`Report::set_promotion`]).
    pub fn record_decision(&mut self, decision: Decision) {
        self.human_decision = match &decision.note {
            Some(n) if !n.is_empty() => format!("{}; {n}", decision.action.as_str()),
            _ => decision.action.as_str().to_string(),
        };
        self.decision = Some(decision);
    }

    pub fn set_promotion(&mut self, what_was_done: impl Into<String>) {
        self.promotion = what_was_done.into();
    }
}

/// How turnover runs gate qualification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnoverGateMode {
    /// Every candidate turnover run: zero failures and zero contamination.
    Strict,
    /// The candidate's failure rate is not significantly worse than the
    /// baseline's (one-sided Fisher p ≥ alpha), and zero contamination always.
    NonInferior,
}

impl TurnoverGateMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnoverGateMode::Strict => "strict",
            TurnoverGateMode::NonInferior => "non_inferior",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_carry_the_threshold() {
        assert_eq!(
            regression_flag_name(5.0),
            "no_more_than_5_percent_regression"
        );
        assert_eq!(
            regression_flag_name(2.5),
            "no_more_than_2.5_percent_regression"
        );
        for t in [0.0, 3.0, 2.5, 10.0, 0.25] {
            assert_eq!(parse_regression_flag(&regression_flag_name(t)), Some(t));
        }
        assert_eq!(
            parse_regression_flag("no_more_than_x_percent_regression"),
            None
        );
        assert_eq!(
            parse_regression_flag("no_more_than_-1_percent_regression"),
            None
        );
        assert_eq!(parse_regression_flag("delta_percent"), None);
    }

    #[test]
    fn turnover_keys_round_trip() {
        for side in [Side::Baseline, Side::Candidate] {
            for k in 0..5 {
                assert_eq!(parse_turnover_key(&turnover_key(side, k)), Some((side, k)));
            }
        }
        assert_eq!(
            turnover_key(Side::Candidate, 2),
            "candidate_turnover_repeat_2"
        );
        for bad in [
            "candidate_turnover_repeat_1",
            "candidate_turnover_repeat_02",
            "candidate_turnovers",
            "turnover",
        ] {
            assert_eq!(parse_turnover_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn metric_needs_exactly_one_consistent_flag() {
        let ok = serde_json::json!({"baseline": 1.0, "candidate": 1.0, "delta_percent": 0.0,
            "no_more_than_3_percent_regression": true});
        let m: MetricComparison = serde_json::from_value(ok.clone()).expect("valid");
        assert_eq!(m.threshold_percent, 3.0);
        let mut two = ok.clone();
        two["no_more_than_5_percent_regression"] = true.into();
        assert!(serde_json::from_value::<MetricComparison>(two).is_err());
        let mut clash = ok;
        clash["threshold_percent"] = 5.0.into();
        assert!(serde_json::from_value::<MetricComparison>(clash).is_err());
    }

    #[test]
    fn decision_text() {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schema": REPORT_SCHEMA, "baseline_image": "a", "candidate_image": "b", "cells": {},
            "performance_gate_passed": false, "strict_turnover_gate_passed": false,
            "qualification": "q", "promotion": "pending", "human_decision": "pending"
        }))
        .expect("minimal report");
        r.record_decision(Decision {
            action: DecisionAction::RetainBaseline,
            who: Some("ops".into()),
            when: None,
            note: Some("no-promotion".into()),
        });
        assert_eq!(r.human_decision, "retain-baseline; no-promotion");
        assert_eq!(r.to_value()["decision"]["action"], "retain-baseline");
    }
}

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
