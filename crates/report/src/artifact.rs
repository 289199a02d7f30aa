//! The run artifact (`infergate-run/v1`): what one `infergate run` measured
//! against one target. `compare` reads two of these.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod speculative;
pub use speculative::{ResponseCounts, Speculative, SpeculativeError};

pub const RUN_SCHEMA: &str = "infergate-run/v1";

/// Names of per-request metrics, as keys of `CellResult::metrics` and `::samples`.
pub mod metric {
    pub const TTFT_MS: &str = "ttft_ms";
    pub const TTFO_MS: &str = "ttfo_ms";
    pub const E2E_MS: &str = "e2e_ms";
    pub const DECODE_TOK_S: &str = "decode_tok_s";
    pub const TPOT_MS: &str = "tpot_ms";
    pub const ITL_MS: &str = "itl_ms";
    pub const PREFILL_TOK_S: &str = "prefill_tok_s";
    pub const QUEUE_MS: &str = "queue_ms";
    /// Open loop: TTFT and e2e from the *scheduled* send (queue time included).
    pub const TTFT_SCHED_MS: &str = "ttft_sched_ms";
    pub const E2E_SCHED_MS: &str = "e2e_sched_ms";
    pub const PROMPT_TOKENS: &str = "prompt_tokens";
    pub const COMPLETION_TOKENS: &str = "completion_tokens";

    /// The per-request samples a run keeps (`cells[].samples`): what a
    /// policy metric can gate on.
    pub const SAMPLES: &[&str] = &[
        TTFT_MS,
        TTFO_MS,
        E2E_MS,
        DECODE_TOK_S,
        TPOT_MS,
        PREFILL_TOK_S,
        PROMPT_TOKENS,
        COMPLETION_TOKENS,
        QUEUE_MS,
        TTFT_SCHED_MS,
        E2E_SCHED_MS,
    ];
}

/// How a request ended, first failing check wins (transport → HTTP → stream → canary → output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// Transport failure or a timeout: connect, first byte, idle gap, total.
    RequestError,
    /// A non-2xx HTTP status.
    HttpError,
    /// HTTP 200 but the stream was malformed, carried an error object, or ended early.
    StreamValidationFailed,
    /// The answer did not begin with its own canary, or carried another request's canary.
    RequestCanaryFailed,
    /// The answer was not the exact output the contract asks for.
    ControlledOutputFailed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::RequestError => "request_error",
            Outcome::HttpError => "http_error",
            Outcome::StreamValidationFailed => "stream_validation_failed",
            Outcome::RequestCanaryFailed => "request_canary_failed",
            Outcome::ControlledOutputFailed => "controlled_output_failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunArtifact {
    pub schema: String,
    pub provenance: Provenance,
    /// Definitions used, spelled out so a reader need not guess.
    pub method: BTreeMap<String, String>,
    pub cells: Vec<CellResult>,
    #[serde(default)]
    pub turnover: Vec<TurnoverRun>,
    /// How this side's requests were scheduled against the other runtime's;
    /// absent (a plain `infergate run`) means one pass, [`Schedule::Single`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// Open-loop rate sweeps with SLOs (see [`RateSweep`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_sweeps: Vec<RateSweep>,
    /// Embeddings workloads (`[[embeddings]]` of the suite), with their vectors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub embeddings: Vec<crate::embedding::EmbeddingRun>,
    /// Present when the run was asked to leave its turnover workloads (and
    /// embeddings) out: who asked. `compare` reports the turnover gates of
    /// such a candidate as not run; absent, a candidate without turnover
    /// runs fails them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnover_not_run: Option<TurnoverSkip>,
}

/// Who asked a run to skip its turnover workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnoverSkip {
    /// The qualification's plan: `skip_turnover = true` (what
    /// `qualify --no-turnover` writes).
    SkippedByPlan,
    /// `infergate run --skip-turnover`.
    SkippedByRun,
}

impl TurnoverSkip {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnoverSkip::SkippedByPlan => "skipped_by_plan",
            TurnoverSkip::SkippedByRun => "skipped_by_run",
        }
    }

    /// In words, as the views and the qualification say it.
    pub fn describe(self) -> &'static str {
        match self {
            TurnoverSkip::SkippedByPlan => "skipped by the plan",
            TurnoverSkip::SkippedByRun => "skipped by `infergate run --skip-turnover`",
        }
    }
}

/// How the requests of the two runtimes were placed in time. `compare` picks
/// its resampling from it: what varies between clusters (passes, restarts,
/// drift) must be inside the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// One pass per side at different times: nothing in the data measures the
    /// drift between them.
    Single,
    /// Whole passes in A B B A order, each a fresh start: each pass (and each
    /// process lifetime) is a cluster of its side.
    AlternatingPasses,
    /// Both runtimes up at once, a cell's requests alternating between them in
    /// short windows of one timeline; block `k` of the baseline and block `k`
    /// of the candidate ran next to each other (cluster ids are shared).
    Interleaved,
}

impl Schedule {
    pub fn as_str(self) -> &'static str {
        match self {
            Schedule::Single => "single",
            Schedule::AlternatingPasses => "alternating_passes",
            Schedule::Interleaved => "interleaved",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Base URL of the target, never with credentials.
    pub target: String,
    /// Model id as served (`/v1/models`).
    pub model: String,
    /// Runtime profile label (e.g. "baseline"), when known.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Image reference pinned by digest, when the runtime is a container image.
    #[serde(default)]
    pub image: Option<String>,
    /// What the server says about its build (system_fingerprint, /props build info).
    #[serde(default)]
    pub server_build: Option<String>,
    /// Context window per request as the server reports it.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Name of the environment variable the API key came from (never the key).
    #[serde(default)]
    pub api_key_env: Option<String>,
    pub suite: String,
    /// sha256 of the suite file's bytes, so two runs can be shown to share a suite.
    #[serde(default)]
    pub suite_sha256: Option<String>,
    pub tool_version: String,
    pub host: String,
    pub started_at: String,
    pub ended_at: String,
    /// The journal this artifact was aggregated from, as it was when the
    /// artifact was written (`infergate verify --runs` checks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalDigest>,
}

/// A journal file, pinned: its name beside the artifact, sha256 and record count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalDigest {
    /// File name, relative to the artifact's directory (`journal.jsonl`).
    pub file: String,
    pub sha256: String,
    /// Complete, non-empty lines (records).
    pub records: usize,
}

/// Computed by [`crate::stats::summarize`]; defined beside it so `stats` stays a leaf.
pub use crate::stats::Summary;

/// The shape of a cell: what was asked of the target. Two runs compare only
/// when their cells have equal shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellShape {
    pub prompt_tokens: u64,
    pub tolerance_percent: f64,
    pub max_tokens: u64,
    pub concurrency: usize,
    pub requests: usize,
    pub warmup: usize,
    /// "unique" (cache-busting prefix per request) or "shared".
    pub cache: String,
    /// "closed", or "constant:<rps>" / "poisson:<rps>" for open loop.
    pub arrival: String,
    pub temperature: f64,
    #[serde(default)]
    pub seed: Option<u64>,
    /// Where the requests came from when not uniform filler (the suite's
    /// `workload`, described): conversations, shared prefixes, a dataset, a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The OpenAI endpoint the requests went to when not chat completions
    /// (`"completions"`: a text prompt, no chat template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub name: String,
    pub shape: CellShape,
    /// Requests recorded (warmups excluded).
    pub requests: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Count of failed requests per failure class.
    #[serde(default)]
    pub failures_by_class: BTreeMap<String, usize>,
    pub performance_eligible: bool,
    /// Why not eligible; empty when eligible.
    #[serde(default)]
    pub ineligible_reasons: Vec<String>,
    pub median_prompt_tokens: Option<f64>,
    /// Per-metric summary over successful requests (ITL: over all gaps).
    pub metrics: BTreeMap<String, Summary>,
    /// Per-request values of the gating metrics, in request order, for resampling.
    pub samples: BTreeMap<String, Vec<f64>>,
    /// True when any request's completion tokens were counted client-side.
    #[serde(default)]
    pub tokens_estimated: bool,
    /// The cluster (pass, process lifetime or interleaved block) of each value
    /// in `samples[k]`, same key, order and length. Absent: one cluster.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sample_clusters: BTreeMap<String, Vec<u32>>,
    /// What the server said about its prompt cache, when it said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<PromptCache>,
    /// What the server said about speculative decoding, when it said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// What the suite expected the server to report doing in this cell.
    #[serde(default, skip_serializing_if = "Expect::is_empty")]
    pub expect: Expect,

    /// Whether the output length was fixed as asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_length: Option<OutputLength>,
    /// Things a reader must know that do not make the cell ineligible.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Every recorded request (warmups excluded), in request order: what
    /// SLO attainment and goodput are computed from, failures included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_rows: Vec<RequestRow>,
    /// The cell's SLOs (from the suite) and how many requests met them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloAttainment>,
    /// The server's own timings beside the client's, where the engine sends
    /// them (llama.cpp `timings`): a cross-check of the client's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimingCheck>,
    /// What each metrics endpoint (the target's `/metrics`, extras) said over
    /// the cell's measured requests, with its counters checked against them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<crate::server_metrics::ServerMetrics>,
    /// The cell's requests by conversation turn, or by prompt length when
    /// lengths vary (workloads only); each slice's medians beside its n.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<Slice>,
    /// A conversation cell's sessions as their users live them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// A capacity cell's search: every level with its segments, how it
    /// stopped, and the capacity with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::capacity::CapacityRun>,
    /// A cell replaying an `infergate capture` trace: what it sent beside
    /// what was captured (`crate::fidelity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<crate::fidelity::Fidelity>,
}

/// A conversation cell's sessions (workloads whose requests have turns):
/// a session's turns are sent in order, each after the one before answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sessions {
    /// Turns per session.
    pub turns: u32,
    /// Sessions with a recorded request.
    pub sessions: usize,
    /// Sessions whose every turn was recorded and succeeded: what the
    /// figures below are over.
    pub complete: usize,
    /// First turn's send to the last turn's last token, think time
    /// included: how long a user's conversation took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_max_ms: Option<f64>,
    /// The session's TTFTs summed: how long its user waited for answers to begin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_sum_p50_ms: Option<f64>,
}

/// Client latency against the server's own per-request timings, over a
/// cell's successful requests that carried them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerTimingCheck {
    /// Successful requests with server timings (of `CellResult::succeeded`).
    pub requests: usize,
    /// Client TTFT − server prompt time, per request: the network, HTTP,
    /// queueing and streaming overhead the client sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_overhead_ms: Option<Summary>,
    /// Client e2e − (server prompt + generation time), per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_overhead_ms: Option<Summary>,
    /// Requests whose client TTFT was below the server's own prompt time: a
    /// measurement error (the client cannot see a token before it exists).
    pub client_below_server: usize,
}

/// One recorded request, as SLO attainment and goodput read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    pub ok: bool,
    /// When it was sent, from the start of its run.
    pub send_offset_ms: f64,
    /// Open loop: how late it was sent after its scheduled time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queue_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Its pass, process lifetime or interleaved block (see `sample_clusters`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub cluster: u32,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u32(x: &u32) -> bool {
    *x == 0
}

/// Attainment a cell must reach to hold when its SLOs name none (the
/// 90 % that DistServe-style goodput studies use).
pub const DEFAULT_MIN_ATTAINMENT: f64 = 0.9;

/// Service-level objectives of a cell: a request meets them when it
/// succeeded and every target given holds. Any subset may be given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// Attainment the cell must reach to "hold" (a rate sweep's capacity);
    /// absent: [`DEFAULT_MIN_ATTAINMENT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_attainment: Option<f64>,
}

/// How many of a cell's requests met its SLOs, and the goodput they make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloAttainment {
    pub targets: Slo,
    /// Requests that succeeded and met every target.
    pub met: usize,
    /// Every recorded request (failures count as not met).
    pub of: usize,
    /// `met / of`.
    pub attainment: f64,
    /// Wilson score interval of the attainment.
    pub interval: [f64; 2],
    pub confidence: f64,
    /// Seconds this side spent serving the cell: per cluster, first send to
    /// last end, summed (an interleaved side's own blocks only).
    pub window_s: f64,
    /// Requests meeting the SLOs per second of `window_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_rps: Option<f64>,
    /// Output tokens of those requests per second of `window_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_tok_s: Option<f64>,
}

/// Open-loop cells of one shape at several rates, with SLOs: the highest
/// rate whose attainment holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateSweep {
    /// Cell names, by rate ascending.
    pub cells: Vec<String>,
    /// Offered rates (requests/s), same order.
    pub rates: Vec<f64>,
    pub attainment: Vec<f64>,
    pub min_attainment: f64,
    /// Highest rate at which it, and every lower rate, reached `min_attainment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_rate_holding: Option<f64>,
    /// The same with the attainment's Wilson lower bound: holding with confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_rate_confidently_holding: Option<f64>,
}

/// The server's own account of prompt-cache reuse over a cell's successful
/// requests (`usage.prompt_tokens_details.cached_tokens`, llama.cpp `timings.cache_n`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptCache {
    /// Requests whose server reported a cached-token count.
    pub reported: usize,
    /// Most prompt tokens one request took from the cache.
    pub max_cached_tokens: u64,
    /// Prompt tokens of the chat template alone: what a unique prompt may share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_tokens: Option<u64>,
    /// Unique cells: requests served from cache beyond the chat template.
    pub beyond_template: usize,
    /// Prompt tokens the server served from its cache, summed over the
    /// requests that reported it, and their prompt tokens: the cache-hit share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
}

impl PromptCache {
    /// Cached prompt tokens over all prompt tokens of the reporting requests.
    pub fn cached_share(&self) -> Option<f64> {
        match (self.cached_tokens, self.prompt_tokens) {
            (Some(c), Some(p)) if p > 0 => Some(c as f64 / p as f64),
            _ => None,
        }
    }
}

/// A cell's `expect`: the feature it is about, as the server's own numbers
/// must show it engaged. A side that does not show it is named, and the
/// cell cannot pass as if it had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Cached prompt tokens over prompt tokens (the server's count), at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_share_min: Option<f64>,
    /// Accepted over drafted tokens (the server's count), at least; a server
    /// that drafted nothing does not meet it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_acceptance_min: Option<f64>,
}

/// How an unmet expectation's ineligible reason begins: `compare` tells
/// them from the other reasons by it, in a run or in a report alike.
pub const UNMET_EXPECTATION: &str = "expect.";

/// Whether an ineligible reason is an unmet expectation.
pub fn is_unmet_expectation(reason: &str) -> bool {
    reason.starts_with(UNMET_EXPECTATION)
}

impl Expect {
    pub fn is_empty(&self) -> bool {
        self.cached_share_min.is_none() && self.spec_acceptance_min.is_none()
    }

    /// A bound outside [0, 1], named.
    pub fn problem(&self) -> Option<String> {
        [
            ("cached_share_min", self.cached_share_min),
            ("spec_acceptance_min", self.spec_acceptance_min),
        ]
        .into_iter()
        .find_map(|(k, v)| {
            v.filter(|v| !(0.0..=1.0).contains(v))
                .map(|v| format!("expect.{k} must be a share in [0, 1], found {v}"))
        })
    }

    /// Each expectation the server's numbers do not meet, saying what they were.
    pub fn unmet(&self, cache: Option<&PromptCache>, spec: Option<&Speculative>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(min) = self.cached_share_min {
            match cache.and_then(|c| Some((c.cached_share()?, c))) {
                Some((share, _)) if share >= min => {}
                Some((share, c)) => out.push(format!(
                    "expect.cached_share_min {min}: the server served {share:.3} of the prompt tokens from its cache ({} of {})",
                    c.cached_tokens.unwrap_or(0),
                    c.prompt_tokens.unwrap_or(0)
                )),
                None => out.push(format!(
                    "expect.cached_share_min {min}: the server reported no cached tokens"
                )),
            }
        }
        if let Some(min) = self.spec_acceptance_min {
            match spec.and_then(|s| Some((s.acceptance()?, s))) {
                Some((rate, _)) if rate >= min => {}
                Some((rate, s)) => out.push(format!(
                    "expect.spec_acceptance_min {min}: the server accepted {rate:.3} of its drafted tokens ({} of {})",
                    s.accepted, s.drafted
                )),
                None => out.push(format!(
                    "expect.spec_acceptance_min {min}: the server reported no drafted tokens: speculative decoding did not run"
                )),
            }
        }
        out
    }
}

/// One slice of a cell's requests (a conversation turn, a prompt-length
/// bucket): how many, and their medians, so a change that only some
/// requests feel is seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// `turn` or `prompt_tokens`.
    pub by: String,
    /// `1` (first turn), or a bucket such as `256-511`.
    pub label: String,
    pub requests: usize,
    pub succeeded: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_p50: Option<f64>,
    /// Cached prompt tokens over prompt tokens, where the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_share: Option<f64>,
}

/// Output length as asked and as served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputLength {
    /// True when the requests asked for exactly `max_tokens` (see the
    /// artifact's `method.output_length` for the fields sent).
    pub fixed: bool,
    /// Successful requests whose completion tokens equal `max_tokens`.
    pub at_max_tokens: usize,
    /// Successful requests counted.
    pub of: usize,
    /// `fixed`, and every successful request got exactly `max_tokens`.
    pub held: bool,
}

/// One turnover run, in the seed's shape (extra fields are additions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverRun {
    pub name: String,
    /// 0 for the first run, 1 for the first repeat, …
    pub repeat: usize,
    /// "words" or "reference".
    pub contract: String,
    pub concurrency: usize,
    pub requests: usize,
    pub exact_output_passed: usize,
    pub failed: usize,
    pub responses_received: usize,
    pub performance_eligible: bool,
    /// Requests whose answer carried another request's canary: cross-request contamination.
    pub contaminated: usize,
    pub failures: Vec<TurnoverFailure>,
    /// Reference contract: each request's reference text (run alone,
    /// temperature 0), by request index; None where it failed or was cut
    /// at the capture cap. `compare` holds the candidate's against the baseline's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Option<String>>,
    /// Reference contract: each reference's per-token logprobs and top-k
    /// (parallel to `references`); None where the server sent none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_tokens: Vec<Option<Vec<crate::agreement::TokenLogprob>>>,
    /// Task prompts: per item, whether its reference answer matched the
    /// answer key: `1` right, `0` wrong, `-` no answer (the request failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_answers: String,
    /// Task prompts: SHA-256 of the items asked (questions, answer keys,
    /// match rules), so two sides' answers are paired only when they answered
    /// the same items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_set_sha256: Option<String>,
    /// Features the workload asked for beyond plain text, each reference
    /// answer marked by what came back: `structured_output` → `1` valid,
    /// `s` not valid against the schema, `j` not JSON, `c` cut at
    /// `max_tokens`, `-` no answer (the request failed).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub features: std::collections::BTreeMap<String, String>,
    /// A workload asking for structured output or tools: the TTFT of its
    /// first reference request (alone, the first on its schema in this
    /// run, where a runtime compiles its grammar) and the median of the
    /// later ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_ttft_p50_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverFailure {
    pub request_index: usize,
    pub failure_class: String,
    /// Words in the answer after its canary (the seed's field).
    pub words: usize,
    pub finish_reasons: Vec<String>,
    pub canary_passed: bool,
    /// Other requests' markers found in this answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_markers: Vec<String>,
    /// Bounded error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bounded captured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Reference contract: where the output first diverged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Divergence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Character (Unicode scalar) index of the first difference.
    pub char_index: usize,
    pub expected_snippet: String,
    pub actual_snippet: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Direction;

    #[test]
    fn an_expectation_is_met_only_by_what_the_server_reported() {
        let want = Expect {
            cached_share_min: Some(0.5),
            spec_acceptance_min: Some(0.3),
        };
        let cache = |cached, prompt| PromptCache {
            reported: 4,
            cached_tokens: Some(cached),
            prompt_tokens: Some(prompt),
            ..PromptCache::default()
        };
        let spec = |drafted, accepted| Speculative {
            reported: 4,
            drafted,
            accepted,
            predicted: 100,
            ..Speculative::default()
        };
        assert!(
            want.unmet(Some(&cache(60, 100)), Some(&spec(50, 15)))
                .is_empty()
        );
        let short = want.unmet(Some(&cache(10, 100)), Some(&spec(50, 5)));
        assert_eq!(short.len(), 2, "{short:?}");
        assert!(short[0].contains("0.100 of the prompt tokens from its cache (10 of 100)"));
        assert!(short[1].contains("accepted 0.100 of its drafted tokens (5 of 50)"));
        assert!(short.iter().all(|r| is_unmet_expectation(r)));
        // Nothing reported, or nothing drafted: not exercised.
        let none = want.unmet(None, Some(&spec(0, 0)));
        assert!(
            none[0].ends_with("the server reported no cached tokens"),
            "{none:?}"
        );
        assert!(
            none[1].ends_with("speculative decoding did not run"),
            "{none:?}"
        );
        assert!(Expect::default().unmet(None, None).is_empty());
        assert!(!is_unmet_expectation("3 requests failed"));
        // Bounds are shares.
        let bad = Expect {
            spec_acceptance_min: Some(1.5),
            ..Expect::default()
        };
        assert_eq!(
            bad.problem().as_deref(),
            Some("expect.spec_acceptance_min must be a share in [0, 1], found 1.5")
        );
        assert_eq!(want.problem(), None);
    }

    #[test]
    fn metric_directions() {
        for m in [
            metric::TTFT_MS,
            metric::TTFO_MS,
            metric::E2E_MS,
            metric::TPOT_MS,
            metric::ITL_MS,
            metric::QUEUE_MS,
        ] {
            assert_eq!(
                Direction::of_metric(m),
                Some(Direction::LowerIsBetter),
                "{m}"
            );
        }
        for m in [metric::DECODE_TOK_S, metric::PREFILL_TOK_S] {
            assert_eq!(
                Direction::of_metric(m),
                Some(Direction::HigherIsBetter),
                "{m}"
            );
        }
        assert_eq!(Direction::of_metric(metric::PROMPT_TOKENS), None);
        assert_eq!(Direction::of_metric(metric::COMPLETION_TOKENS), None);
    }
}
