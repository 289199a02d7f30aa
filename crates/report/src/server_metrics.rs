//! The server's own view of a cell: what its Prometheus endpoint said over
//! the cell's measured requests (window deltas of counters and histograms,
//! gauges over the window), the engine's known metrics picked out, and its
//! token counters checked against the client's journal. Pure: scrapes in
//! (taken by the main crate), a summary out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

/// vLLM's speculative-decoding counters (`artifact::Speculative` reads them).
pub const VLLM_DRAFTS: &str = "vllm:spec_decode_num_drafts_total";
pub const VLLM_DRAFT_TOKENS: &str = "vllm:spec_decode_num_draft_tokens_total";
pub const VLLM_ACCEPTED: &str = "vllm:spec_decode_num_accepted_tokens_total";
pub const VLLM_GENERATED: &str = "vllm:generation_tokens_total";

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

/// Engine families by metric-name prefix.
const ENGINES: [(&str, &str); 4] = [
    ("llamacpp:", "llama.cpp"),
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
];

/// Per engine: the metrics worth reading beside the client's (family names;
/// a histogram by its base name), and what each means.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "llama.cpp",
        "llamacpp:prompt_tokens_total",
        "prompt tokens evaluated (not cached)",
    ),
    (
        "llama.cpp",
        "llamacpp:prompt_tokens_cached_total",
        "prompt tokens reused from the cache",
    ),
    (
        "llama.cpp",
        "llamacpp:prompt_seconds_total",
        "seconds evaluating prompts",
    ),
    (
        "llama.cpp",
        "llamacpp:tokens_predicted_total",
        "tokens generated",
    ),
    (
        "llama.cpp",
        "llamacpp:tokens_predicted_seconds_total",
        "seconds generating",
    ),
    ("llama.cpp", "llamacpp:n_decode_total", "llama_decode calls"),
    (
        "llama.cpp",
        "llamacpp:requests_processing",
        "requests processing",
    ),
    (
        "llama.cpp",
        "llamacpp:requests_deferred",
        "requests deferred",
    ),
    (
        "llama.cpp",
        "llamacpp:kv_cache_usage_ratio",
        "KV cache usage (ratio)",
    ),
    (
        "llama.cpp",
        "llamacpp:n_busy_slots_per_decode",
        "busy slots per decode",
    ),
    ("vllm", "vllm:time_to_first_token_seconds", "TTFT (s)"),
    ("vllm", "vllm:inter_token_latency_seconds", "ITL (s)"),
    ("vllm", "vllm:time_per_output_token_seconds", "TPOT (s)"),
    (
        "vllm",
        "vllm:request_time_per_output_token_seconds",
        "TPOT per request (s)",
    ),
    (
        "vllm",
        "vllm:e2e_request_latency_seconds",
        "e2e latency (s)",
    ),
    ("vllm", "vllm:request_queue_time_seconds", "queue time (s)"),
    (
        "vllm",
        "vllm:request_prefill_time_seconds",
        "prefill time (s)",
    ),
    (
        "vllm",
        "vllm:request_decode_time_seconds",
        "decode time (s)",
    ),
    ("vllm", "vllm:num_requests_running", "requests running"),
    ("vllm", "vllm:num_requests_waiting", "requests waiting"),
    ("vllm", "vllm:kv_cache_usage_perc", "KV cache usage (ratio)"),
    (
        "vllm",
        "vllm:gpu_cache_usage_perc",
        "KV cache usage (ratio)",
    ),
    (
        "vllm",
        "vllm:prefix_cache_queries_total",
        "prefix cache queried tokens",
    ),
    (
        "vllm",
        "vllm:prefix_cache_hits_total",
        "prefix cache hit tokens",
    ),
    ("vllm", "vllm:prompt_tokens_total", "prompt tokens"),
    ("vllm", "vllm:generation_tokens_total", "tokens generated"),
    ("vllm", "vllm:num_preemptions_total", "preemptions"),
    ("vllm", VLLM_DRAFT_TOKENS, "speculative tokens drafted"),
    ("vllm", VLLM_ACCEPTED, "speculative tokens accepted"),
    ("vllm", VLLM_DRAFTS, "speculative verification steps"),
    (
        "sglang",
        "sglang:spec_accept_rate",
        "speculative acceptance rate",
    ),
    (
        "sglang",
        "sglang:spec_accept_length",
        "speculative tokens per verification step",
    ),
    ("sglang", "sglang:time_to_first_token_seconds", "TTFT (s)"),
    ("sglang", "sglang:inter_token_latency_seconds", "ITL (s)"),
    (
        "sglang",
        "sglang:request_time_per_output_token_seconds",
        "TPOT per request (s)",
    ),
    ("sglang", "sglang:queue_time_seconds", "queue time (s)"),
    (
        "sglang",
        "sglang:e2e_request_latency_seconds",
        "e2e latency (s)",
    ),
    ("sglang", "sglang:num_running_reqs", "requests running"),
    ("sglang", "sglang:num_queue_reqs", "requests queued"),
    ("sglang", "sglang:token_usage", "KV token usage (ratio)"),
    ("sglang", "sglang:cache_hit_rate", "prefix cache hit rate"),
    ("sglang", "sglang:prompt_tokens_total", "prompt tokens"),
    (
        "sglang",
        "sglang:generation_tokens_total",
        "tokens generated",
    ),
    ("tgi", "tgi_request_duration", "e2e latency (s)"),
    ("tgi", "tgi_request_queue_duration", "queue time (s)"),
    (
        "tgi",
        "tgi_request_inference_duration",
        "inference time (s)",
    ),
    (
        "tgi",
        "tgi_request_mean_time_per_token_duration",
        "time per token (s)",
    ),
    (
        "tgi",
        "tgi_request_input_length",
        "prompt tokens per request",
    ),
    (
        "tgi",
        "tgi_request_generated_tokens",
        "tokens generated per request",
    ),
    ("tgi", "tgi_batch_current_size", "batch size"),
    ("tgi", "tgi_queue_size", "requests queued"),
];

/// Per engine: (server counter, what the client's totals say it counts).
const CHECKS: &[(&str, &str, Quantity)] = &[
    (
        "llama.cpp",
        "llamacpp:prompt_tokens_total",
        Quantity::PromptUncached,
    ),
    (
        "llama.cpp",
        "llamacpp:prompt_tokens_cached_total",
        Quantity::Cached,
    ),
    (
        "llama.cpp",
        "llamacpp:tokens_predicted_total",
        Quantity::Completion,
    ),
    // vLLM counts every prompt token, cached or not, and the cached ones
    // again (0.32 on); usage names them only with
    // --enable-prompt-tokens-details (else the line is left out).
    ("vllm", "vllm:prompt_tokens_total", Quantity::Prompt),
    ("vllm", "vllm:prompt_tokens_cached_total", Quantity::Cached),
    ("vllm", "vllm:generation_tokens_total", Quantity::Completion),
    // SGLang counts every prompt token, cached or not, and each request's
    // tokens when it finishes. Its cached tokens have no per-request
    // counter (ENGINE_NOTES): not compared.
    ("sglang", "sglang:prompt_tokens_total", Quantity::Prompt),
    (
        "sglang",
        "sglang:generation_tokens_total",
        Quantity::Completion,
    ),
];

/// Per engine: what its check leaves out, and why (a note on every check).
const ENGINE_NOTES: &[(&str, &str)] = &[(
    "sglang",
    "cached prompt tokens not compared: SGLang has no per-request counter of them (sglang:realtime_tokens_total{mode=\"prefill_cache\"} counts each prefill batch's hits again when a request is retracted, sglang:prefill_effective_tokens_total is updated on each log interval); usage.prompt_tokens_details.cached_tokens names them per request",
)];

#[derive(Debug, Clone, Copy)]
enum Quantity {
    Prompt,
    PromptUncached,
    Cached,
    Completion,
}

impl Quantity {
    fn of(self, c: &ClientTotals) -> Option<(f64, &'static str)> {
        let cached_known = c.missing_cached == 0;
        match self {
            Quantity::Prompt => Some((c.prompt_tokens as f64, "Σ usage.prompt_tokens")),
            Quantity::PromptUncached => cached_known.then_some((
                c.prompt_tokens.saturating_sub(c.cached_tokens) as f64,
                "Σ usage.prompt_tokens − Σ cached",
            )),
            Quantity::Cached => {
                cached_known.then_some((c.cached_tokens as f64, "Σ cached prompt tokens"))
            }
            Quantity::Completion => Some((c.completion_tokens as f64, "Σ usage.completion_tokens")),
        }
    }
}

/// The engine family of a scrape, from its metric names.
pub fn engine_of(samples: &[MetricSample]) -> Option<&'static str> {
    ENGINES
        .iter()
        .find(|(prefix, _)| samples.iter().any(|s| s.name.starts_with(prefix)))
        .map(|(_, engine)| *engine)
}

/// `name{a="x",b="y"}`: labels sorted, `le` left out (a bucket's own key).
pub fn series_key(name: &str, labels: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != "le")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    if parts.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", parts.join(","))
    }
}

/// What a sample is to the window math.
enum Role {
    Counter,
    Gauge,
    Bucket(f64),
    HistSum,
    HistCount,
}

fn role(s: &MetricSample) -> (Role, String) {
    let base = |suffix: &str| s.name.strip_suffix(suffix).unwrap_or(&s.name).to_string();
    match s.kind {
        Kind::Counter => (Role::Counter, s.name.clone()),
        Kind::Histogram if s.name.ends_with("_bucket") => {
            let le = match s.labels.get("le").map(String::as_str) {
                Some("+Inf") | None => f64::MAX,
                Some(x) => x.parse().unwrap_or(f64::MAX),
            };
            (Role::Bucket(le), base("_bucket"))
        }
        Kind::Histogram if s.name.ends_with("_sum") => (Role::HistSum, base("_sum")),
        Kind::Histogram if s.name.ends_with("_count") => (Role::HistCount, base("_count")),
        // A summary's sum and count only grow; its quantiles are gauges.
        Kind::Summary if s.name.ends_with("_sum") || s.name.ends_with("_count") => {
            (Role::Counter, s.name.clone())
        }
        Kind::Untyped if s.name.ends_with("_total") => (Role::Counter, s.name.clone()),
        _ => (Role::Gauge, s.name.clone()),
    }
}

/// A counter's increase from `a` to `b`; a drop is a reset (restart), after
/// which it counted from zero.
fn increase(a: Option<f64>, b: f64) -> f64 {
    match a {
        Some(a) if b >= a => b - a,
        _ => b,
    }
}

#[derive(Default)]
struct Hist {
    count: f64,
    sum: f64,
    buckets: BTreeMap<u64, (f64, f64)>,
}

/// One cell's server metrics from one endpoint's windows (each with the
/// client's totals over its requests). `incomplete` windows had no end.
pub fn summarize(
    endpoint: &str,
    url: &str,
    windows: &[(Window, ClientTotals)],
    incomplete: usize,
) -> ServerMetrics {
    let complete: Vec<&(Window, ClientTotals)> = windows
        .iter()
        .filter(|(w, _)| w.scrapes.len() >= 2)
        .collect();
    let mut out = ServerMetrics::unavailable(endpoint, url, "");
    out.unavailable = None;
    out.incomplete_windows = incomplete + (windows.len() - complete.len());
    out.windows = complete.len();
    let mut hists: BTreeMap<String, Hist> = BTreeMap::new();
    let mut gauge_values: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut client = ClientTotals::default();
    for (w, totals) in &complete {
        client.add(totals);
        add_window(&mut out, &mut hists, w);
        add_gauge_values(&mut gauge_values, w);
    }
    for (k, h) in hists {
        out.histograms.insert(k, histogram_delta(h));
    }
    for (k, vals) in &gauge_values {
        out.gauges.insert(k.clone(), gauge_stats(vals));
    }
    out.known = known_metrics(&out);
    for m in out.known.iter().filter(|m| m.kind == Kind::Gauge) {
        if let Some(v) = gauge_values.get(&m.key) {
            out.series
                .insert(m.key.clone(), v.iter().map(|&(t, x)| [t, x]).collect());
        }
    }
    out.check = out
        .engine
        .as_deref()
        .and_then(|e| check_counters(e, &out.counters, &client));
    out
}

/// One window's scrapes, span and engine, and its counters' and histograms'
/// increases from its first scrape to its last.
fn add_window(out: &mut ServerMetrics, hists: &mut BTreeMap<String, Hist>, w: &Window) {
    let first = &w.scrapes[0];
    let last = &w.scrapes[w.scrapes.len() - 1];
    out.scrapes += w.scrapes.len();
    out.window_s += (last.offset_ms - first.offset_ms).max(0.0) / 1000.0;
    out.engine = out
        .engine
        .take()
        .or(engine_of(&last.samples).map(str::to_string));
    let before: BTreeMap<(String, u64), f64> = first
        .samples
        .iter()
        .map(|s| ((full_key(s), bucket_bits(s)), s.value))
        .collect();
    for s in &last.samples {
        let (role, base) = role(s);
        let prior = before.get(&(full_key(s), bucket_bits(s))).copied();
        let inc = increase(prior, s.value);
        match role {
            Role::Counter => {
                *out.counters
                    .entry(series_key(&base, &s.labels))
                    .or_default() += inc;
            }
            Role::Bucket(le) => {
                let h = hists.entry(series_key(&base, &s.labels)).or_default();
                h.buckets.entry(le.to_bits()).or_insert((le, 0.0)).1 += inc;
            }
            Role::HistSum => hists.entry(series_key(&base, &s.labels)).or_default().sum += inc,
            Role::HistCount => hists.entry(series_key(&base, &s.labels)).or_default().count += inc,
            Role::Gauge => {}
        }
    }
}

/// Every gauge value of every scrape of the window, with its time.
fn add_gauge_values(gauge_values: &mut BTreeMap<String, Vec<(f64, f64)>>, w: &Window) {
    for sc in &w.scrapes {
        for s in sc
            .samples
            .iter()
            .filter(|s| matches!(role(s).0, Role::Gauge))
        {
            gauge_values
                .entry(series_key(&s.name, &s.labels))
                .or_default()
                .push((sc.offset_ms, s.value));
        }
    }
}

fn histogram_delta(h: Hist) -> HistogramDelta {
    let buckets: Vec<[f64; 2]> = h.buckets.values().map(|&(le, c)| [le, c]).collect();
    let q = |p: f64| quantile(&buckets, p);
    HistogramDelta {
        count: h.count,
        sum: h.sum,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        buckets,
    }
}

fn gauge_stats(vals: &[(f64, f64)]) -> GaugeStats {
    let n = vals.len();
    let sum: f64 = vals.iter().map(|v| v.1).sum();
    GaugeStats {
        n,
        min: vals.iter().map(|v| v.1).fold(f64::INFINITY, f64::min),
        max: vals.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max),
        mean: sum / n as f64,
        last: vals[n - 1].1,
    }
}

fn full_key(s: &MetricSample) -> String {
    series_key(&s.name, &s.labels)
}

/// A bucket's bound as part of its identity (0 for other samples).
fn bucket_bits(s: &MetricSample) -> u64 {
    match role(s).0 {
        Role::Bucket(le) => le.to_bits(),
        _ => 0,
    }
}

/// The q-quantile of cumulative buckets, linear within the bucket it falls
/// in (Prometheus `histogram_quantile`); in the `+Inf` bucket, the highest
/// finite bound. None without observations.
pub fn quantile(buckets: &[[f64; 2]], q: f64) -> Option<f64> {
    let total = buckets.last()?[1];
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0_f64, 0.0_f64);
    for &[le, c] in buckets {
        if c >= rank {
            if le == f64::MAX {
                return Some(prev.0);
            }
            let lower = if prev.0 == 0.0 && le < 0.0 {
                le
            } else {
                prev.0
            };
            let in_bucket = c - prev.1;
            if in_bucket <= 0.0 {
                return Some(le);
            }
            return Some(lower + (le - lower) * (rank - prev.1) / in_bucket);
        }
        prev = (le, c);
    }
    Some(prev.0)
}

/// The engine's known metrics present in a summary.
fn known_metrics(m: &ServerMetrics) -> Vec<KnownMetric> {
    let Some(engine) = m.engine.as_deref() else {
        return Vec::new();
    };
    let name_of = |key: &str| key.split('{').next().unwrap_or(key).to_string();
    let mut out = Vec::new();
    for &(_, name, meaning) in KNOWN.iter().filter(|(e, _, _)| *e == engine) {
        let known = |kind, value, max, count, p50, p99, key: &String| KnownMetric {
            key: key.clone(),
            meaning: meaning.to_string(),
            kind,
            value,
            max,
            count,
            p50,
            p99,
        };
        for (k, v) in m.counters.iter().filter(|(k, _)| name_of(k) == name) {
            out.push(known(Kind::Counter, *v, None, None, None, None, k));
        }
        for (k, g) in m.gauges.iter().filter(|(k, _)| name_of(k) == name) {
            out.push(known(Kind::Gauge, g.mean, Some(g.max), None, None, None, k));
        }
        for (k, h) in m.histograms.iter().filter(|(k, _)| name_of(k) == name) {
            let mean = if h.count > 0.0 { h.sum / h.count } else { 0.0 };
            out.push(known(
                Kind::Histogram,
                mean,
                None,
                Some(h.count),
                h.p50,
                h.p99,
                k,
            ));
        }
    }
    out
}

/// The engine's token counters against the client's totals. Token counts
/// are integers on both sides, so agreement is exact.
pub fn check_counters(
    engine: &str,
    counters: &BTreeMap<String, f64>,
    client: &ClientTotals,
) -> Option<CounterCheck> {
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for &(_, metric, quantity) in CHECKS.iter().filter(|(e, _, _)| *e == engine) {
        // Summed over label sets (vLLM labels by engine and model).
        let series: Vec<f64> = counters
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(metric))
            .map(|(_, v)| *v)
            .collect();
        if series.is_empty() {
            notes.push(format!("{metric} not served"));
            continue;
        }
        let Some((client_value, what)) = quantity.of(client) else {
            notes.push(format!(
                "{metric}: {} requests did not say how many prompt tokens were cached",
                client.missing_cached
            ));
            continue;
        };
        let server: f64 = series.iter().sum();
        lines.push(CheckLine {
            what: what.to_string(),
            server_metric: metric.to_string(),
            server,
            client: client_value,
            agrees: server == client_value,
        });
    }
    if lines.is_empty() && notes.is_empty() {
        return None;
    }
    notes.extend(
        ENGINE_NOTES
            .iter()
            .filter(|(e, _)| *e == engine)
            .map(|(_, note)| note.to_string()),
    );
    if client.missing_usage > 0 {
        notes.push(format!(
            "{} requests had no usage: the client's sums lack them",
            client.missing_usage
        ));
    }
    if client.failed > 0 {
        notes.push(format!(
            "{} requests failed: the server may have counted part of them",
            client.failed
        ));
    }
    Some(CounterCheck {
        requests: client.requests,
        agrees: !lines.is_empty() && lines.iter().all(|l| l.agrees),
        lines,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, kind: Kind, labels: &[(&str, &str)], value: f64) -> MetricSample {
        MetricSample {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            kind,
            value,
        }
    }

    fn scrape(t: f64, samples: Vec<MetricSample>) -> Scrape {
        Scrape {
            offset_ms: t,
            samples,
        }
    }

    fn llama(t: f64, prompt: f64, cached: f64, predicted: f64, busy: f64) -> Scrape {
        scrape(
            t,
            vec![
                s("llamacpp:prompt_tokens_total", Kind::Counter, &[], prompt),
                s(
                    "llamacpp:prompt_tokens_cached_total",
                    Kind::Counter,
                    &[],
                    cached,
                ),
                s(
                    "llamacpp:tokens_predicted_total",
                    Kind::Counter,
                    &[],
                    predicted,
                ),
                s("llamacpp:requests_processing", Kind::Gauge, &[], busy),
            ],
        )
    }

    fn totals(requests: usize, prompt: u64, cached: u64, completion: u64) -> ClientTotals {
        ClientTotals {
            requests,
            prompt_tokens: prompt,
            cached_tokens: cached,
            completion_tokens: completion,
            ..ClientTotals::default()
        }
    }

    #[test]
    fn counters_sum_their_increase_over_windows_and_the_check_reads_them() {
        let w1 = Window {
            scrapes: vec![
                llama(0.0, 100.0, 0.0, 10.0, 0.0),
                llama(500.0, 150.0, 5.0, 20.0, 1.0),
                llama(1000.0, 300.0, 10.0, 42.0, 0.0),
            ],
        };
        // A restart between windows: the counters start again from zero.
        let w2 = Window {
            scrapes: vec![
                llama(5000.0, 7.0, 0.0, 1.0, 0.0),
                llama(6000.0, 57.0, 0.0, 11.0, 0.0),
            ],
        };
        let m = summarize(
            "target",
            "http://127.0.0.1:1/metrics",
            &[(w1, totals(2, 210, 10, 32)), (w2, totals(1, 50, 0, 10))],
            1,
        );
        assert_eq!(m.engine.as_deref(), Some("llama.cpp"));
        assert_eq!((m.windows, m.incomplete_windows, m.scrapes), (2, 1, 5));
        assert_eq!(m.window_s, 2.0);
        assert_eq!(m.counters["llamacpp:prompt_tokens_total"], 250.0);
        assert_eq!(m.counters["llamacpp:tokens_predicted_total"], 42.0);
        let g = m.gauges["llamacpp:requests_processing"];
        assert_eq!((g.n, g.max, g.mean), (5, 1.0, 0.2));
        assert_eq!(m.series["llamacpp:requests_processing"].len(), 5);
        let check = m.check.expect("a llama.cpp check");
        assert!(check.agrees, "{check:?}");
        assert_eq!(check.lines.len(), 3);
        assert_eq!(check.lines[0].server, 250.0);
        assert_eq!(check.lines[0].client, 250.0);
        assert_eq!(m.known.len(), 4);
    }

    #[test]
    fn a_counter_the_client_cannot_account_for_disagrees() {
        let w = Window {
            scrapes: vec![
                llama(0.0, 0.0, 0.0, 0.0, 0.0),
                llama(1.0, 120.0, 0.0, 8.0, 0.0),
            ],
        };
        let m = summarize("target", "u", &[(w, totals(1, 100, 0, 8))], 0);
        let check = m.check.unwrap();
        assert!(!check.agrees);
        assert!(!check.lines[0].agrees && check.lines[2].agrees);
    }

    #[test]
    fn unknown_cached_counts_skip_the_lines_that_need_them() {
        let w = Window {
            scrapes: vec![
                llama(0.0, 0.0, 0.0, 0.0, 0.0),
                llama(1.0, 100.0, 0.0, 8.0, 0.0),
            ],
        };
        let mut t = totals(1, 100, 0, 8);
        t.missing_cached = 1;
        let check = summarize("target", "u", &[(w, t)], 0).check.unwrap();
        assert_eq!(check.lines.len(), 1);
        assert_eq!(check.notes.len(), 2);
    }

    #[test]
    fn histograms_give_window_buckets_and_quantiles_and_a_window_without_end_is_left_out() {
        let h = |t: f64, c: [f64; 3], sum: f64| {
            let l = |le| vec![("engine", "0"), ("le", le)];
            scrape(
                t,
                vec![
                    s(
                        "vllm:time_to_first_token_seconds_bucket",
                        Kind::Histogram,
                        &l("0.5"),
                        c[0],
                    ),
                    s(
                        "vllm:time_to_first_token_seconds_bucket",
                        Kind::Histogram,
                        &l("1.0"),
                        c[1],
                    ),
                    s(
                        "vllm:time_to_first_token_seconds_bucket",
                        Kind::Histogram,
                        &l("+Inf"),
                        c[2],
                    ),
                    s(
                        "vllm:time_to_first_token_seconds_sum",
                        Kind::Histogram,
                        &[("engine", "0")],
                        sum,
                    ),
                    s(
                        "vllm:time_to_first_token_seconds_count",
                        Kind::Histogram,
                        &[("engine", "0")],
                        c[2],
                    ),
                ],
            )
        };
        let done = Window {
            scrapes: vec![h(0.0, [1.0, 1.0, 1.0], 0.3), h(9.0, [1.0, 11.0, 11.0], 8.3)],
        };
        let open = Window {
            scrapes: vec![h(20.0, [1.0, 11.0, 11.0], 8.3)],
        };
        let m = summarize(
            "target",
            "u",
            &[
                (done, ClientTotals::default()),
                (open, ClientTotals::default()),
            ],
            0,
        );
        assert_eq!((m.windows, m.incomplete_windows), (1, 1));
        let d = &m.histograms["vllm:time_to_first_token_seconds{engine=\"0\"}"];
        assert_eq!((d.count, d.sum), (10.0, 8.0));
        assert_eq!(d.buckets, vec![[0.5, 0.0], [1.0, 10.0], [f64::MAX, 10.0]]);
        // All ten between 0.5 and 1.0: the median interpolates to 0.75.
        assert_eq!(d.p50, Some(0.75));
        assert_eq!(m.engine.as_deref(), Some("vllm"));
        assert_eq!(m.known.len(), 1);
        assert_eq!(m.known[0].value, 0.8);
    }

    #[test]
    fn quantiles_follow_histogram_quantile() {
        let b = [[1.0, 5.0], [2.0, 10.0], [f64::MAX, 12.0]];
        assert_eq!(quantile(&b, 0.25), Some(0.6));
        assert_eq!(quantile(&b, 0.5), Some(1.2));
        // Beyond the last finite bound: that bound, as Prometheus does.
        assert_eq!(quantile(&b, 0.99), Some(2.0));
        assert_eq!(quantile(&[[1.0, 0.0]], 0.5), None);
    }

    /// Two real scrapes of SGLang 0.5.23 (engine/sglang-serve.sh), an
    /// excerpt: the check's and the known metrics' names are SGLang's own.
    const SGLANG_BEFORE: &str = r#"# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.9631990308844252
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:request_time_per_output_token_seconds histogram
sglang:request_time_per_output_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.278823784445454
sglang:request_time_per_output_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 6.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 8.0
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{engine_type="unified",mode="prefill_compute",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 9.0
sglang:realtime_tokens_total{engine_type="unified",mode="decode",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 7.0
"#;
    const SGLANG_AFTER: &str = r#"# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 6.058974169027351
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 7.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.9688945540037821
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:request_time_per_output_token_seconds histogram
sglang:request_time_per_output_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 3.5383439557261935
sglang:request_time_per_output_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 7.0
sglang:request_time_per_output_token_seconds_sum{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.4150152271426383
sglang:request_time_per_output_token_seconds_count{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 233.0
sglang:prompt_tokens_total{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 38.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 188.0
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 8.0
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{engine_type="unified",mode="prefill_compute",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 106.0
sglang:realtime_tokens_total{engine_type="unified",mode="decode",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 188.0
sglang:realtime_tokens_total{engine_type="unified",mode="prefill_cache",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 168.0
"#;

    /// The exposition's samples, by a line split (this crate has no
    /// Prometheus parser; the main crate's is tested against real servers).
    fn exposition(t: f64, text: &str) -> Scrape {
        let mut kinds = BTreeMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                let kind = match kind {
                    "counter" => Kind::Counter,
                    "gauge" => Kind::Gauge,
                    "histogram" => Kind::Histogram,
                    k => panic!("{k}"),
                };
                kinds.insert(name.to_string(), kind);
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = series.split_once('{').unwrap();
            let labels = labels
                .trim_end_matches('}')
                .split(',')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            let family = ["_sum", "_count", "_bucket"]
                .iter()
                .find_map(|x| name.strip_suffix(x).filter(|b| kinds.contains_key(*b)))
                .unwrap_or(name);
            samples.push(MetricSample {
                name: name.to_string(),
                labels,
                kind: kinds[family],
                value: value.parse().unwrap(),
            });
        }
        scrape(t, samples)
    }

    #[test]
    fn sglang_is_checked_and_read_by_its_own_metric_names() {
        let w = Window {
            scrapes: vec![
                exposition(0.0, SGLANG_BEFORE),
                exposition(1000.0, SGLANG_AFTER),
            ],
        };
        // 233 + 38 − 6 prompt tokens and 188 + 8 − 8 generated in the window;
        // the client's usage says 9 cached (usage only: not compared).
        let m = summarize("target", "u", &[(w, totals(8, 265, 9, 188))], 0);
        assert_eq!(m.engine.as_deref(), Some("sglang"));
        let check = m.check.expect("an SGLang check");
        assert!(check.agrees, "{check:?}");
        let lines: Vec<(&str, f64)> = check
            .lines
            .iter()
            .map(|l| (l.server_metric.as_str(), l.server))
            .collect();
        assert_eq!(
            lines,
            [
                ("sglang:prompt_tokens_total", 265.0),
                ("sglang:generation_tokens_total", 188.0)
            ]
        );
        assert_eq!(check.notes.len(), 1, "{:?}", check.notes);
        assert!(
            check.notes[0].starts_with("cached prompt tokens not compared")
                && check.notes[0].contains("cached_tokens names them per request"),
            "{:?}",
            check.notes
        );
        // Every known SGLang metric this excerpt serves is found, by family.
        let mut known: Vec<&str> = m
            .known
            .iter()
            .map(|k| k.key.split('{').next().unwrap())
            .collect();
        known.dedup();
        assert_eq!(
            known,
            [
                "sglang:time_to_first_token_seconds",
                "sglang:request_time_per_output_token_seconds",
                "sglang:num_queue_reqs",
                "sglang:prompt_tokens_total",
                "sglang:generation_tokens_total",
            ]
        );
        let tpot = m
            .known
            .iter()
            .find(|k| k.key.contains(r#"request_time_per_output_token_seconds{engine_type="unified",is_streaming="false""#))
            .unwrap();
        assert_eq!(tpot.count, Some(6.0));
        // Every KNOWN and CHECKS name of SGLang is a family SGLang 0.5.23
        // serves (/work/sglang-attempt/metric_types.txt, 81 families).
        let served = [
            "sglang:time_to_first_token_seconds",
            "sglang:inter_token_latency_seconds",
            "sglang:request_time_per_output_token_seconds",
            "sglang:e2e_request_latency_seconds",
            "sglang:queue_time_seconds",
            "sglang:num_running_reqs",
            "sglang:num_queue_reqs",
            "sglang:token_usage",
            "sglang:cache_hit_rate",
            "sglang:prompt_tokens_total",
            "sglang:generation_tokens_total",
        ];
        for (_, name, _) in KNOWN.iter().filter(|(e, _, _)| *e == "sglang") {
            assert!(served.contains(name), "{name} is not an SGLang metric");
        }
        for (_, name, _) in CHECKS.iter().filter(|(e, _, _)| *e == "sglang") {
            assert!(served.contains(name), "{name} is not an SGLang metric");
        }
    }

    #[test]
    fn vllm_counts_cached_prompt_tokens_only_when_usage_names_them() {
        let counters: BTreeMap<String, f64> = [
            (r#"vllm:prompt_tokens_total{engine="0"}"#, 1806.0),
            (r#"vllm:prompt_tokens_cached_total{engine="0"}"#, 1536.0),
            (r#"vllm:generation_tokens_total{engine="0"}"#, 48.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut client = ClientTotals {
            requests: 6,
            prompt_tokens: 1806,
            completion_tokens: 48,
            cached_tokens: 1536,
            ..ClientTotals::default()
        };
        let c = check_counters("vllm", &counters, &client).unwrap();
        assert!(c.agrees && c.lines.len() == 3, "{c:?}");
        client.cached_tokens = 1520;
        let c = check_counters("vllm", &counters, &client).unwrap();
        assert!(!c.agrees && !c.lines[1].agrees, "{c:?}");
        // Without --enable-prompt-tokens-details the cached count is unknown.
        client.missing_cached = 6;
        let c = check_counters("vllm", &counters, &client).unwrap();
        assert!(c.agrees && c.lines.len() == 2, "{c:?}");
        assert!(c.notes[0].contains("did not say"), "{:?}", c.notes);
    }

    #[test]
    fn series_keys_sort_labels_and_leave_out_le() {
        let labels: BTreeMap<String, String> = [("z", "1"), ("a", "x\"y"), ("le", "0.5")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(series_key("m", &labels), r#"m{a="x\"y",z="1"}"#);
        assert_eq!(series_key("m", &BTreeMap::new()), "m");
    }
}
