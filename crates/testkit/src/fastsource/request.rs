//! What a request asks of the source (its body and the `"fastsource"`
//! overrides) and the facts of the answer it gets.

use serde::Deserialize;

use super::{FastSourceConfig, ToolPick};
use crate::promptcount::ChatMessage;

/// The part of a chat body the counting mode reads.
#[derive(Deserialize)]
pub(super) struct ChatBody {
    pub(super) messages: Vec<ChatMessage>,
}

/// The `"fastsource"` object a request body may carry; every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Overrides {
    pub ttft_ms: Option<f64>,
    pub itl_ms: Option<f64>,
    /// Answer with this HTTP status and a JSON error body instead of a stream.
    pub status: Option<u16>,
    /// Send this many content chunks, then keep the connection open and silent.
    pub stall_after: Option<usize>,
    /// Send this many content chunks, then an `{"error": ...}` event with status 200.
    pub error_after: Option<usize>,
    pub role_chunk: Option<bool>,
    pub usage: Option<bool>,
    pub done: Option<bool>,
    /// Skip the finish chunk (a stream that never says why it ended).
    pub no_finish: Option<bool>,
    /// Make each content chunk's text the time it was handed to the socket:
    /// [`STAMP_DIGITS`] decimal digits of CLOCK_MONOTONIC nanoseconds (see
    /// [`monotonic_ns`]). Lets a benchmark split its timing error into the
    /// source's lateness and the client's delay.
    pub stamp: Option<bool>,
    /// The first this many chunks carry reasoning, not the answer: as
    /// `reasoning_content` deltas, or with `think_in_content` as content
    /// inside `<think>…</think>` (a server that does not separate it).
    pub reasoning_chunks: Option<usize>,
    pub think_in_content: Option<bool>,
    /// Send this many content chunks whatever `max_tokens` allowed (a
    /// server that ignores it).
    pub ignore_max_tokens: Option<usize>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RequestBody {
    #[serde(default)]
    pub(super) stream: bool,
    pub(super) max_tokens: Option<u64>,
    pub(super) max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) fastsource: Overrides,
    /// OpenAI's `tools`: only their function names are read.
    #[serde(default)]
    pub(super) tools: Vec<OfferedTool>,
}

#[derive(Debug, Deserialize)]
pub(super) struct OfferedTool {
    function: OfferedFunction,
}

#[derive(Debug, Deserialize)]
pub(super) struct OfferedFunction {
    name: String,
}

/// One answer's facts: its endpoint, tokens, finish reason and ids.
pub(super) struct Answer {
    pub(super) chat: bool,
    pub(super) seq: u64,
    pub(super) tokens: usize,
    pub(super) finish: &'static str,
    pub(super) prompt_tokens: usize,
    /// The function called instead of text, when the source calls tools.
    pub(super) call: Option<String>,
}

impl Answer {
    pub(super) fn of(
        cfg: &FastSourceConfig,
        req: &RequestBody,
        chat: bool,
        seq: u64,
        prompt_tokens: usize,
    ) -> Answer {
        let requested = req.max_completion_tokens.or(req.max_tokens);
        let offered = || match cfg.tool_calls? {
            ToolPick::First => req.tools.first(),
            ToolPick::Last => req.tools.last(),
        };
        let call = offered()
            .filter(|_| chat && req.stream)
            .map(|t| t.function.name.clone());
        Answer {
            chat,
            seq,
            tokens: if call.is_some() {
                1
            } else if let Some(n) = req.fastsource.ignore_max_tokens {
                n
            } else {
                requested.map_or(cfg.chunks, |m| usize::try_from(m).unwrap_or(usize::MAX))
            },
            finish: match (&call, requested) {
                (Some(_), _) => "tool_calls",
                (None, Some(_)) => "length",
                (None, None) => "stop",
            },
            prompt_tokens,
            call,
        }
    }

    pub(super) fn usage(&self) -> serde_json::Value {
        let (p, n) = (self.prompt_tokens, self.tokens);
        serde_json::json!({"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n})
    }

    /// The unstreamed answer.
    pub(super) fn whole(&self, cfg: &FastSourceConfig) -> serde_json::Value {
        let text = cfg.token.repeat(self.tokens.min(1 << 20));
        let (seq, finish) = (self.seq, self.finish);
        if self.chat {
            serde_json::json!({"id": format!("chatcmpl-fs-{seq}"), "object": "chat.completion",
                "created": 0, "model": cfg.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": self.usage()})
        } else {
            serde_json::json!({"id": format!("cmpl-fs-{seq}"), "object": "text_completion",
                "created": 0, "model": cfg.model,
                "choices": [{"index": 0, "text": text, "finish_reason": finish}],
                "usage": self.usage()})
        }
    }
}
