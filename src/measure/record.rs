//! Plain data passed between stages: one finished request, as measured.
//!
//! Times are milliseconds on the client's monotonic clock, as offsets from the
//! moment the request was handed to the HTTP client (`t_send`), except
//! `send_offset_ms`, which is the offset of `t_send` from the start of the run.

use serde::{Deserialize, Serialize};

/// Defined with the artifact vocabulary (reports name failure classes by it).
pub use crate::artifact::Outcome;

/// What the streaming client captured of one request. Produced by `client`,
/// consumed by aggregation, turnover checks and the journal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamCapture {
    /// HTTP status, when a response head arrived.
    pub http_status: Option<u16>,
    /// First non-empty reasoning *or* content delta, ms after t_send.
    pub ttfo_ms: Option<f64>,
    /// First non-empty visible content delta, ms after t_send.
    pub ttft_ms: Option<f64>,
    /// End of stream (`[DONE]`, or close after the final chunk), ms after t_send.
    pub e2e_ms: Option<f64>,
    /// Arrival of every content- or reasoning-bearing chunk, ms after
    /// t_send: the first `client::MAX_CHUNK_TIMES` of them.
    pub chunk_ms: Vec<f64>,
    /// Output-bearing chunks past those `chunk_ms` keeps: counted, not timed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunks_not_kept: u64,
    /// Arrival of the last output-bearing chunk, when some were not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk_ms: Option<f64>,
    /// Visible text, capped (see `truncated`).
    pub content: String,
    /// Reasoning text (`reasoning_content` or `reasoning`, or a `<think>`
    /// block at the start of the content), kept apart, capped.
    pub reasoning: String,
    /// The reasoning came inside the content, in a `<think>` block the
    /// runtime did not separate, and was taken out of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning_from_content: bool,
    /// True when content or reasoning hit the capture cap.
    pub truncated: bool,
    /// `usage.prompt_tokens` as the server reported it.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens` as the server reported it, or an estimate (see below).
    pub completion_tokens: Option<u64>,
    /// True when completion_tokens was counted client-side because the server sent no usage.
    pub completion_tokens_estimated: bool,
    /// Of the completion tokens, the reasoning's, as the server counted them
    /// (`usage.completion_tokens_details.reasoning_tokens`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Every finish_reason the stream carried, in order.
    pub finish_reasons: Vec<String>,
    /// Did the stream end with `data: [DONE]`?
    pub saw_done: bool,
    /// Model id the server put in the chunks.
    pub model: Option<String>,
    /// `system_fingerprint` from the chunks, when present.
    pub system_fingerprint: Option<String>,
    /// Failure, if any, detected by the client (transport, HTTP, stream validity).
    pub failure: Option<Failure>,
    /// Prompt tokens the server says it served from its prompt cache
    /// (`usage.prompt_tokens_details.cached_tokens`, else llama.cpp's `timings.cache_n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
    /// The server's own timings of this request (llama.cpp's `timings`), when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
    /// Per-token logprobs of the content with the top alternatives, when
    /// the request asked for them (reference requests) and the server sent
    /// them in `choices[].logprobs`; empty otherwise, or when a chunk's
    /// logprobs were unreadable (never a partial list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<crate::report::agreement::TokenLogprob>,
    /// Tool calls, assembled from the streamed deltas as a client would
    /// (by index: the name, then the arguments' text appended, capped like
    /// content).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// One tool call of an answer, as assembled from its deltas.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    /// The arguments' JSON text, as streamed (parsed by the check, not here).
    pub arguments: String,
}

/// What a server measured of one request itself (llama.cpp: `timings` in the
/// final chunk). A cross-check of client TTFT, and proof of a cold prefill:
/// `prompt_n` tokens were evaluated, `cache_n` reused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<f64>,
    /// Speculative decoding: tokens the server drafted for this request, and
    /// how many of them its model accepted (llama.cpp's `draft_n`,
    /// `draft_n_accepted`; absent when it does not draft).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_n_accepted: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub class: Outcome,
    /// Human-readable and bounded; never contains secrets.
    pub message: String,
}

/// One finished request as written to the journal (one JSON line each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Cell (or turnover run) this request belongs to.
    pub cell: String,
    /// Index within the cell, in issue order (warmups are not recorded).
    pub index: usize,
    /// Offset of t_send from the start of the run, ms.
    pub send_offset_ms: f64,
    /// Open loop: how long the request waited in the client after its scheduled time, ms.
    pub queue_ms: f64,
    /// Prompt tokens the workload aimed for.
    pub target_prompt_tokens: Option<u64>,
    /// Prompt tokens of the chat template alone (an empty user message), as
    /// measured when sizing: the most a unique prompt may take from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_prompt_tokens: Option<u64>,
    /// A conversation's turn (0 = first), for the per-turn view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    pub capture: StreamCapture,
    /// Final classification after all checks.
    pub outcome: Outcome,
    /// Why, when outcome is not Ok (bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A capacity cell's request: where it sat in the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityMark>,
}

/// Where a capacity cell's request sat in its search: the segment it was
/// sent in (numbered across the search), that segment's load, and whether
/// it warmed the segment (sent, left out of its attainment) or was measured.
/// The segments are rebuilt from these marks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CapacityMark {
    pub load: f64,
    pub segment: usize,
    pub warmup: bool,
}

/// Derived per-request metrics, as `docs/metrics.md` ("One streamed
/// request") defines them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DerivedMetrics {
    pub ttft_ms: Option<f64>,
    pub ttfo_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// (completion_tokens − 1) / (e2e − TTFO)
    pub decode_tok_s: Option<f64>,
    /// (e2e − TTFO) / (completion_tokens − 1)
    pub tpot_ms: Option<f64>,
    /// prompt_tokens / TTFO
    pub prefill_tok_s: Option<f64>,
}

impl StreamCapture {
    /// Metrics that follow from this capture; None where a definition does not apply
    /// (e.g. decode speed of a one-token answer).
    pub fn derived(&self) -> DerivedMetrics {
        let mut d = DerivedMetrics {
            ttft_ms: self.ttft_ms,
            ttfo_ms: self.ttfo_ms,
            e2e_ms: self.e2e_ms,
            ..Default::default()
        };
        if let (Some(ttfo), Some(e2e), Some(ct)) =
            (self.ttfo_ms, self.e2e_ms, self.completion_tokens)
        {
            let span = e2e - ttfo;
            if ct > 1 && span > 0.0 {
                d.decode_tok_s = Some((ct - 1) as f64 / (span / 1000.0));
                d.tpot_ms = Some(span / (ct - 1) as f64);
            }
        }
        if let (Some(ttfo), Some(pt)) = (self.ttfo_ms, self.prompt_tokens)
            && ttfo > 0.0
        {
            d.prefill_tok_s = Some(pt as f64 / (ttfo / 1000.0));
        }
        d
    }

    /// Gaps between consecutive output-bearing (content or reasoning) chunks (ITL), ms:
    /// reasoning tokens are output the client waits for, as they count in completion_tokens.
    pub fn itl_ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.chunk_ms.windows(2).map(|w| w[1] - w[0])
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Truncate text for error messages and captures kept in artifacts.
pub fn bounded(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}… [{} more bytes]", &s[..i], s.len() - i),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_speed_excludes_the_first_token() {
        let c = StreamCapture {
            ttfo_ms: Some(100.0),
            e2e_ms: Some(1100.0),
            completion_tokens: Some(101),
            prompt_tokens: Some(500),
            ..Default::default()
        };
        let d = c.derived();
        assert_eq!(d.decode_tok_s, Some(100.0));
        assert_eq!(d.tpot_ms, Some(10.0));
        assert_eq!(d.prefill_tok_s, Some(5000.0));
    }

    #[test]
    fn one_token_answer_has_no_decode_speed() {
        let c = StreamCapture {
            ttfo_ms: Some(100.0),
            e2e_ms: Some(120.0),
            completion_tokens: Some(1),
            ..Default::default()
        };
        assert_eq!(c.derived().decode_tok_s, None);
    }
}
