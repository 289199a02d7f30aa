//! The definitions a run artifact carries in its `method`: the notes every
//! artifact shares, how this run sized its prompts, and its timeouts.

use std::collections::BTreeMap;

use super::{RunOptions, SIZING_FILE};
use crate::config::timeouts::BYTES_PER_TOKEN_ESTIMATE;
use crate::measure::workload::{self, PromptSizer};
use crate::stats;

/// Definitions written into the artifact: the shared notes, how prompts were
/// sized and the timeouts in force.
pub(super) fn method_of(
    opts: &RunOptions,
    sizer: &PromptSizer,
    dialect: workload::LengthDialect,
) -> BTreeMap<String, String> {
    let mut m = method_notes();
    m.insert("output_length".into(), dialect.describe().into());
    let sizing = if sizer.counts_text() {
        format!(
            "filler bodies counted with {m}; then each request of a plain cell fitted to the cell's target (its unique prefix counted with {m}, its body cut or extended by whole filler words and one-token pad words against the probe's usage.prompt_tokens), before any request is sent; prompt_tokens_achieved says what the server counted",
            m = sizer.method()
        )
    } else {
        format!(
            "filler bodies calibrated with {}; no tokenizer, so each request's unique prefix is not counted and prompts vary by a few tokens: prompt_tokens_achieved says by how much",
            sizer.method()
        )
    };
    m.insert("prompt_sizing".into(), sizing);
    if opts.part.pooled_by_caller() {
        m.insert(
            "prompt_sizing_blocks".into(),
            format!("a side's first block sizes each cell; later blocks reuse it ({SIZING_FILE})"),
        );
    }
    if opts.scrape.target || !opts.scrape.extra.is_empty() {
        m.insert("server_metrics".into(), opts.scrape.describe());
    }
    let t = &opts.timeouts;
    m.insert(
        "timeouts".into(),
        format!(
            "connect {:?}, first byte {:?}, idle gap between reads {:?}, total {:?}, first byte and total each extended by {:?} per 1,000 prompt tokens (the planned count, else the body's bytes / {BYTES_PER_TOKEN_ESTIMATE}); a request exceeding one is a request_error naming it",
            t.connect, t.first_byte, t.idle, t.total, t.per_1k_prompt_tokens
        ),
    );
    m
}

/// Definitions written into every artifact, so no reader has to guess.
pub fn method_notes() -> BTreeMap<String, String> {
    [
        ("percentile", stats::PERCENTILE_METHOD),
        ("clock", "monotonic; t_send taken immediately before the request is handed to the HTTP client (connection setup counts)"),
        ("ttfo_ms", "first non-empty reasoning or content delta after t_send"),
        ("ttft_ms", "first non-empty visible content delta after t_send (a role-only chunk is not a token)"),
        ("e2e_ms", "end of stream: [DONE], or connection close after the final chunk"),
        ("decode_tok_s", "(completion_tokens - 1) / (e2e - TTFO); reasoning tokens count in completion_tokens"),
        ("tpot_ms", "(e2e - TTFO) / (completion_tokens - 1)"),
        ("itl_ms", "gaps between consecutive output-bearing chunks (content or reasoning deltas, as both are output tokens), pooled over all requests of the cell (a chunk may carry several tokens, so ITL != TPOT)"),
        ("prefill_tok_s", "prompt_tokens / TTFO"),
        ("queue_ms", "open loop: time between a request's scheduled send and its actual send (coordinated-omission guard); 0 in closed loop"),
        ("tokens", "prompt and completion tokens from the server's usage (stream_options.include_usage); client-side counts are flagged tokens_estimated"),
        ("summaries", "over successful requests only; warmup requests are never recorded"),
        ("slo", "cells with SLOs: a request meets them when it succeeded and every target holds (TTFT and e2e from the scheduled send, TPOT as measured; one output token has no TPOT); failures count as not met; goodput: those requests, and their output tokens, per second of the cell's window (per cluster, first send to last end); request_rows keeps every recorded request"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
