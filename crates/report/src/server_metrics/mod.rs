//! The server's own view of a cell: what its Prometheus endpoint said over
//! the cell's measured requests (window deltas of counters and histograms,
//! gauges over the window), the engine's known metrics picked out, and its
//! token counters checked against the client's journal. Pure: scrapes in
//! (taken by the main crate), a summary out.
//!
//! Here the types a run and a report keep; the engines' metric names in
//! `catalogue`, the scrapes summed over a cell's windows in `window`, the
//! counters against the journal in `counters`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod catalogue;
mod counters;
mod window;

pub use catalogue::{
    QUEUE_GAUGES, VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS, VLLM_GENERATED, engine_of,
};
pub use counters::check_counters;
pub use window::{quantile, series_key, summarize};

/// A sample's family type, from its `# TYPE` line (`untyped` without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// One sample of one scrape. Non-finite values are dropped when scraped
/// (JSON cannot hold them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub kind: Kind,
    pub value: f64,
}

/// One scrape: when (ms from the start of its run) and what it read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    pub offset_ms: f64,
    pub samples: Vec<MetricSample>,
}

/// The scrapes of one window, in time order: the first taken just before a
/// cell's measured requests (after its warmup), the last just after them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    pub scrapes: Vec<Scrape>,
}

/// What the client's journal says the server should have counted in a
/// window: its requests' usage, summed. Additive over windows.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ClientTotals {
    /// Requests sent in the window (failures included).
    pub requests: usize,
    pub failed: usize,
    /// Σ usage.prompt_tokens.
    pub prompt_tokens: u64,
    /// Σ usage.completion_tokens.
    pub completion_tokens: u64,
    /// Σ cached prompt tokens (llama.cpp `timings.cache_n`, else
    /// `usage.prompt_tokens_details.cached_tokens`).
    pub cached_tokens: u64,
    /// Requests that lacked usage or a cached count: their share is unknown.
    pub missing_usage: usize,
    pub missing_cached: usize,
}

impl ClientTotals {
    pub fn add(&mut self, o: &ClientTotals) {
        self.requests += o.requests;
        self.failed += o.failed;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.cached_tokens += o.cached_tokens;
        self.missing_usage += o.missing_usage;
        self.missing_cached += o.missing_cached;
    }
}

/// A gauge over every scrape of a cell's windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GaugeStats {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub last: f64,
}

/// A histogram's increase over a cell's windows, and quantiles estimated from
/// it as Prometheus's `histogram_quantile` does (linear within a bucket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramDelta {
    pub count: f64,
    pub sum: f64,
    /// (upper bound, cumulative count), ascending; `+Inf` as `f64::MAX`.
    pub buckets: Vec<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
}

/// One of the engine's metrics worth reading beside the client's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnownMetric {
    /// Series key: name and labels, as in `counters`/`gauges`/`histograms`.
    pub key: String,
    pub meaning: String,
    pub kind: Kind,
    /// Counter: its increase; gauge: its mean; histogram: its mean (sum / count).
    pub value: f64,
    /// Gauge: its maximum over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Histogram: observations in the window, and estimated quantiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
}

impl KnownMetric {
    /// One line for a reader.
    pub fn text(&self) -> String {
        let v = |x: f64| {
            if x.fract() == 0.0 && x.abs() < 1e15 {
                format!("{x:.0}")
            } else {
                format!("{x:.4}")
            }
        };
        match self.kind {
            Kind::Histogram => {
                let mut s = format!(
                    "{}: {} observed, mean {}",
                    self.meaning,
                    v(self.count.unwrap_or(0.0)),
                    v(self.value)
                );
                if let (Some(p50), Some(p99)) = (self.p50, self.p99) {
                    s.push_str(&format!(", p50 ≈{} p99 ≈{}", v(p50), v(p99)));
                }
                s
            }
            Kind::Counter => format!("{}: +{} in the window", self.meaning, v(self.value)),
            _ => format!(
                "{}: mean {}, max {}",
                self.meaning,
                v(self.value),
                v(self.max.unwrap_or(self.value))
            ),
        }
    }
}

/// The server's counters against the client's journal over the same window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterCheck {
    /// Requests in the checked windows.
    pub requests: usize,
    pub lines: Vec<CheckLine>,
    /// Every line agrees exactly (token counts are integers on both sides).
    pub agrees: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckLine {
    pub what: String,
    pub server_metric: String,
    pub server: f64,
    pub client: f64,
    pub agrees: bool,
}

/// What one metrics endpoint said over one cell's measured requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    /// `target` (the target's own `/metrics`) or the name of an extra endpoint.
    pub endpoint: String,
    /// Where it was read (credentials redacted).
    pub url: String,
    /// The engine family its metric names say: llama.cpp, vllm, sglang, tgi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Why nothing was read (no `/metrics`, not the Prometheus format, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Complete windows (one per run or block of the cell).
    pub windows: usize,
    /// Windows begun and never ended (an interrupted run): left out, and
    /// their requests with them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incomplete_windows: usize,
    pub scrapes: usize,
    /// Seconds the complete windows cover, summed.
    pub window_s: f64,
    /// Series key → increase over the windows (a reset counts from zero).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges: BTreeMap<String, GaugeStats>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, HistogramDelta>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<KnownMetric>,
    /// The known gauges over time: (ms from the start of the run, value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub series: BTreeMap<String, Vec<[f64; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CounterCheck>,
}

fn is_zero(x: &usize) -> bool {
    *x == 0
}

impl ServerMetrics {
    /// An endpoint that answered nothing usable.
    pub fn unavailable(endpoint: &str, url: &str, why: &str) -> ServerMetrics {
        ServerMetrics {
            endpoint: endpoint.to_string(),
            url: url.to_string(),
            engine: None,
            unavailable: Some(why.to_string()),
            windows: 0,
            incomplete_windows: 0,
            scrapes: 0,
            window_s: 0.0,
            counters: BTreeMap::new(),
            gauges: BTreeMap::new(),
            histograms: BTreeMap::new(),
            known: Vec::new(),
            series: BTreeMap::new(),
            check: None,
        }
    }

    /// What a report keeps: the known metrics, series and check, not the raw
    /// series (those stay in the run artifact).
    pub fn for_report(&self) -> ServerMetrics {
        ServerMetrics {
            counters: BTreeMap::new(),
            gauges: BTreeMap::new(),
            histograms: BTreeMap::new(),
            ..self.clone()
        }
    }
}

impl ServerMetrics {
    /// A counter family's increase, summed over its series; none when the
    /// endpoint has no series of it.
    pub fn counter_sum(&self, family: &str) -> Option<f64> {
        let mut found = None;
        for (key, v) in &self.counters {
            if key.split('{').next() == Some(family) {
                *found.get_or_insert(0.0) += v;
            }
        }
        found
    }
}

#[cfg(test)]
mod tests;
