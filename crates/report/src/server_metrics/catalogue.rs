//! Per engine, which of its metrics the report reads and what they mean:
//! the engine families by metric-name prefix, each engine's known metrics,
//! the counters its check compares with the client's journal (and what the
//! check leaves out), its queue gauges and vLLM's speculative-decoding
//! counters.

use super::{ClientTotals, Kind, KnownMetric, MetricSample, ServerMetrics};

/// vLLM's speculative-decoding counters (`artifact::Speculative` reads them).
pub const VLLM_DRAFTS: &str = "vllm:spec_decode_num_drafts_total";
pub const VLLM_DRAFT_TOKENS: &str = "vllm:spec_decode_num_draft_tokens_total";
pub const VLLM_ACCEPTED: &str = "vllm:spec_decode_num_accepted_tokens_total";
pub const VLLM_GENERATED: &str = "vllm:generation_tokens_total";

/// Gauges of requests waiting in the server for a slot, by engine.
pub const QUEUE_GAUGES: &[&str] = &[
    "llamacpp:requests_deferred",
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
];

/// Engine families by metric-name prefix.
const ENGINES: [(&str, &str); 4] = [
    ("llamacpp:", "llama.cpp"),
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
];

/// Per engine: the metrics worth reading beside the client's (family names;
/// a histogram by its base name), and what each means.
pub(super) const KNOWN: &[(&str, &str, &str)] = &[
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
pub(super) const CHECKS: &[(&str, &str, Quantity)] = &[
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
pub(super) const ENGINE_NOTES: &[(&str, &str)] = &[(
    "sglang",
    "cached prompt tokens not compared: SGLang has no per-request counter of them (sglang:realtime_tokens_total{mode=\"prefill_cache\"} counts each prefill batch's hits again when a request is retracted, sglang:prefill_effective_tokens_total is updated on each log interval); usage.prompt_tokens_details.cached_tokens names them per request",
)];

#[derive(Debug, Clone, Copy)]
pub(super) enum Quantity {
    Prompt,
    PromptUncached,
    Cached,
    Completion,
}

impl Quantity {
    pub(super) fn of(self, c: &ClientTotals) -> Option<(f64, &'static str)> {
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

/// The engine's known metrics present in a summary.
pub(super) fn known_metrics(m: &ServerMetrics) -> Vec<KnownMetric> {
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
