//! The SSE sink: each event of a stream, as it arrives, into the capture
//! (first token, chunk times, text within its cap, usage, finish reason).

use serde_json::Value;

use crate::measure::record::{Failure, Outcome, ServerTimings, StreamCapture, ToolCall};
use crate::measure::sse::{Event, SseError};

use super::chunk::{Chunk, Str, Timings, ToolCallDelta, Usage};
use super::config::{Endpoint, SNIPPET_BYTES};
use super::{fastjson, logprobs};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    FirstByte,
    Idle,
    Total,
}

/// What a request asked for that bounds its answer: the endpoint's shape
/// and the output it allowed (`max_tokens`, else `max_completion_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Asked {
    pub(super) endpoint: Endpoint,
    pub(super) max_tokens: Option<u64>,
}

impl Asked {
    pub(super) fn of(endpoint: Endpoint, body: &Value) -> Asked {
        let max_tokens = ["max_tokens", "max_completion_tokens"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_u64));
        Asked {
            endpoint,
            max_tokens,
        }
    }
}

/// Chunk arrival times one request keeps; later chunks are counted, and
/// the last one's time kept (`StreamCapture::chunks_not_kept`,
/// `last_chunk_ms`). ITL is measured over the kept ones.
pub const MAX_CHUNK_TIMES: usize = 65_536;

/// Output-bearing chunks accepted for a request that allowed `max_tokens`:
/// 4 × `max_tokens` + 64. Chunks are not tokens (a server may send a chunk
/// per byte of a multi-byte token, or a role-only or reasoning chunk beside
/// the text), so the slack is wide; a stream past it ignores its
/// `max_tokens` and would otherwise run to the total timeout.
pub fn chunk_allowance(max_tokens: u64) -> u64 {
    max_tokens.saturating_mul(4).saturating_add(64)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Streaming,
    Done,
    Failed,
}

/// Turns SSE events into the capture. Separate from the I/O so it can be tested alone.
pub(super) struct Sink<'c> {
    pub(super) cap: &'c mut StreamCapture,
    pub(super) endpoint: Endpoint,
    pub(super) cap_bytes: usize,
    pub(super) state: State,
    pub(super) content_full: bool,
    pub(super) reasoning_full: bool,
    /// A tool call's arguments hit the cap (each call capped like content).
    pub(super) tools_full: bool,
    /// Where the content stands with a `<think>` block at its start.
    think: Think,
    /// When the first content arrived (TTFT, once it is known not to be
    /// a `<think>` block).
    first_content_ms: Option<f64>,
    /// A chunk's logprobs were unreadable: the token list is dropped whole.
    pub(super) tokens_broken: bool,
    /// The request's `max_tokens` and the output-bearing chunks it allows
    /// ([`chunk_allowance`]), when it sent one: set once, read per chunk.
    output_limit: Option<(u64, u64)>,
}

impl<'c> Sink<'c> {
    pub(super) fn new(cap: &'c mut StreamCapture, endpoint: Endpoint, cap_bytes: usize) -> Self {
        // Room for a short answer up front; amortized growth after that.
        cap.chunk_ms.reserve(64);
        Sink {
            cap,
            endpoint,
            cap_bytes,
            state: State::Streaming,
            content_full: false,
            reasoning_full: false,
            tools_full: false,
            think: match endpoint {
                Endpoint::Chat => Think::Undecided,
                Endpoint::Completions => Think::Absent,
            },
            first_content_ms: None,
            tokens_broken: false,
            output_limit: None,
        }
    }

    /// Fail the request once its output is far past `max_tokens`.
    pub(super) fn limit_output(&mut self, max_tokens: Option<u64>) {
        self.output_limit = max_tokens.map(|max| (max, chunk_allowance(max)));
    }

    /// One output-bearing chunk's time: kept while there is room, else
    /// counted with the last time. A stream far past its `max_tokens` fails.
    fn note_chunk(&mut self, at_ms: f64) {
        if self.cap.chunk_ms.len() < MAX_CHUNK_TIMES {
            self.cap.chunk_ms.push(at_ms);
        } else {
            self.cap.chunks_not_kept += 1;
            self.cap.last_chunk_ms = Some(at_ms);
        }
        let Some((max, allowed)) = self.output_limit else {
            return;
        };
        let seen = self.cap.chunk_ms.len() as u64 + self.cap.chunks_not_kept;
        if seen > allowed {
            self.fail(
                Outcome::StreamValidationFailed,
                format!(
                    "output far past max_tokens: {seen} output-bearing chunks for max_tokens {max} \
                     (at most {allowed}, 4 × max_tokens + 64, are accepted)"
                ),
            );
        }
    }

    pub(super) fn fail(&mut self, class: Outcome, message: String) {
        if self.state != State::Failed {
            self.state = State::Failed;
            self.cap.failure = Some(Failure { class, message });
        }
    }

    /// One SSE event into the capture, in named steps: its payload, the
    /// `[DONE]` end, the chunk, an in-band error, then what the chunk carries.
    pub(super) fn on_event(&mut self, ev: Result<Event<'_>, SseError>, at_ms: f64) {
        if self.state != State::Streaming {
            return;
        }
        let Some(data) = self.payload(ev) else {
            return;
        };
        if data.trim_ascii() == b"[DONE]" {
            self.cap.saw_done = true;
            self.cap.e2e_ms = Some(at_ms);
            self.state = State::Done;
            return;
        }
        if data.trim_ascii().is_empty() {
            return;
        }
        let Some(mut chunk) = self.parse_chunk(data) else {
            return;
        };
        if self.failed_in_band(&chunk) {
            return;
        }
        self.note_identity(&mut chunk);
        if self.take_choices(&chunk, at_ms) {
            self.cap.truncated = self.content_full || self.reasoning_full || self.tools_full;
            self.note_chunk(at_ms);
        }
        self.take_usage(chunk.usage.take());
        self.take_timings(chunk.timings.take());
    }

    /// A data event's payload. An `error` event or a broken stream fails the
    /// request; other named events (e.g. `ping`) are not part of the OpenAI
    /// protocol and are ignored.
    #[inline]
    fn payload<'e>(&mut self, ev: Result<Event<'e>, SseError>) -> Option<&'e [u8]> {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                self.fail(Outcome::StreamValidationFailed, e.to_string());
                return None;
            }
        };
        match ev.event {
            "" | "message" => Some(ev.data),
            "error" => {
                self.fail(
                    Outcome::StreamValidationFailed,
                    format!(
                        "error event in stream: {}",
                        bounded_bytes(ev.data, SNIPPET_BYTES)
                    ),
                );
                None
            }
            _ => None,
        }
    }

    /// The fast path reads the usual chunk; anything unusual goes to
    /// serde_json, as before; a chunk neither reads fails the request.
    #[inline]
    fn parse_chunk<'d>(&mut self, data: &'d [u8]) -> Option<Chunk<'d>> {
        let mut chunk = Chunk::default();
        if fastjson::parse_into(data, &mut chunk) {
            return Some(chunk);
        }
        match serde_json::from_slice(data) {
            Ok(c) => Some(c),
            Err(e) => {
                self.fail(
                    Outcome::StreamValidationFailed,
                    format!(
                        "malformed chunk ({e}): {}",
                        bounded_bytes(data, SNIPPET_BYTES)
                    ),
                );
                None
            }
        }
    }

    /// An error object inside a chunk fails the request.
    #[inline]
    fn failed_in_band(&mut self, chunk: &Chunk<'_>) -> bool {
        let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) else {
            return false;
        };
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| err.to_string());
        self.fail(
            Outcome::StreamValidationFailed,
            format!("error object in stream: {}", bounded(&msg, SNIPPET_BYTES)),
        );
        true
    }

    /// The model and fingerprint, from the first chunk that names them.
    #[inline]
    fn note_identity(&mut self, chunk: &mut Chunk<'_>) {
        if self.cap.model.is_none() {
            self.cap.model = chunk.model.take().map(|m| m.0.into_owned());
        }
        if self.cap.system_fingerprint.is_none() {
            self.cap.system_fingerprint = chunk.system_fingerprint.take().map(|m| m.0.into_owned());
        }
    }

    /// Each choice's text, reasoning, tokens and finish reason; whether any
    /// of them bore output (a timed chunk).
    #[inline]
    fn take_choices(&mut self, chunk: &Chunk<'_>, at_ms: f64) -> bool {
        let mut bearing = false;
        for c in chunk.choices.iter() {
            let (content, reasoning) = match self.endpoint {
                Endpoint::Chat => match &c.delta {
                    Some(d) => (
                        &d.content,
                        d.reasoning_content.as_ref().or(d.reasoning.as_ref()),
                    ),
                    None => (&None, None),
                },
                Endpoint::Completions => (&c.text, None),
            };
            if let Some(Str(r)) = reasoning.filter(|r| !r.0.is_empty()) {
                bearing = true;
                self.cap.ttfo_ms.get_or_insert(at_ms);
                append_capped(
                    &mut self.cap.reasoning,
                    r,
                    self.cap_bytes,
                    &mut self.reasoning_full,
                );
            }
            if let Some(Str(t)) = content.as_ref().filter(|t| !t.0.is_empty()) {
                bearing = true;
                self.cap.ttfo_ms.get_or_insert(at_ms);
                self.first_content_ms.get_or_insert(at_ms);
                append_capped(
                    &mut self.cap.content,
                    t,
                    self.cap_bytes,
                    &mut self.content_full,
                );
                // Once the answer began nothing changes: no scan per chunk.
                if self.cap.ttft_ms.is_none() && self.answer_began() {
                    self.cap.ttft_ms.get_or_insert(at_ms);
                }
            }
            if let Some(calls) = c.delta.as_ref().and_then(|d| d.tool_calls.as_deref())
                && self.take_tool_calls(calls)
            {
                // A call is the answer's output, as content is.
                bearing = true;
                self.cap.ttfo_ms.get_or_insert(at_ms);
                self.cap.ttft_ms.get_or_insert(at_ms);
            }
            // Tokens while the text is kept whole: a cut text is not compared.
            if let Some(lp) = c.logprobs.as_ref().filter(|v| !v.is_null())
                && !self.tokens_broken
                && !self.content_full
            {
                match logprobs::parse(lp) {
                    Some(t) => self.cap.tokens.extend(t),
                    None => {
                        self.tokens_broken = true;
                        self.cap.tokens = Vec::new();
                    }
                }
            }
            if let Some(fr) = &c.finish_reason {
                self.cap.finish_reasons.push(fr.0.as_ref().to_owned());
            }
        }
        bearing
    }

    /// Each piece appended to its call, by `index` (else its place in the
    /// list), as a client assembles them: the name once, the arguments'
    /// text piece by piece. A piece that skips past the next new call, or a
    /// second name for a named call, fails the request. Whether any piece
    /// carried output.
    fn take_tool_calls(&mut self, pieces: &[ToolCallDelta]) -> bool {
        let mut bearing = false;
        for (k, piece) in pieces.iter().enumerate() {
            let i = piece.index.unwrap_or(k);
            let known = self.cap.tool_calls.len();
            if i > known || i >= MAX_TOOL_CALLS {
                self.fail(
                    Outcome::StreamValidationFailed,
                    format!("tool call delta for index {i}, after {known} call(s)"),
                );
                return bearing;
            }
            if i == known {
                self.cap.tool_calls.push(ToolCall::default());
            }
            let call = &mut self.cap.tool_calls[i];
            if call.id.is_none() {
                call.id = piece.id.clone();
            }
            let Some(f) = &piece.function else {
                continue;
            };
            if let Some(name) = f.name.as_deref().filter(|n| !n.is_empty()) {
                if call.name.is_empty() {
                    call.name = name.to_owned();
                    bearing = true;
                } else if call.name != name {
                    let was = bounded(&call.name, SNIPPET_BYTES);
                    self.fail(
                        Outcome::StreamValidationFailed,
                        format!(
                            "tool call {i} named {was:?}, then {:?}",
                            bounded(name, SNIPPET_BYTES)
                        ),
                    );
                    return bearing;
                }
            }
            if let Some(args) = f.arguments.as_deref().filter(|a| !a.is_empty()) {
                let call = &mut self.cap.tool_calls[i];
                append_capped(
                    &mut call.arguments,
                    args,
                    self.cap_bytes,
                    &mut self.tools_full,
                );
                bearing = true;
            }
        }
        bearing
    }

    /// Some servers repeat usage in every chunk; the last one wins.
    #[inline]
    fn take_usage(&mut self, usage: Option<Usage>) {
        let Some(u) = usage else {
            return;
        };
        if u.prompt_tokens.is_some() {
            self.cap.prompt_tokens = u.prompt_tokens;
        }
        if u.completion_tokens.is_some() {
            self.cap.completion_tokens = u.completion_tokens;
        }
        if let Some(n) = u.prompt_tokens_details.and_then(|d| d.cached_tokens) {
            self.cap.cached_prompt_tokens = Some(n);
        }
        if let Some(n) = u.completion_tokens_details.and_then(|d| d.reasoning_tokens) {
            self.cap.reasoning_tokens = Some(n);
        }
    }

    /// llama.cpp's per-request timings (the final chunk).
    #[inline]
    fn take_timings(&mut self, timings: Option<Timings>) {
        let Some(t) = timings else {
            return;
        };
        let t = ServerTimings {
            cache_n: t.cache_n,
            prompt_n: t.prompt_n,
            prompt_ms: t.prompt_ms,
            predicted_n: t.predicted_n,
            predicted_ms: t.predicted_ms,
            draft_n: t.draft_n,
            draft_n_accepted: t.draft_n_accepted,
        };
        // usage's count, when the server sent one, is the portable field.
        self.cap.cached_prompt_tokens = self.cap.cached_prompt_tokens.or(t.cache_n);
        self.cap.server_timings = Some(t);
    }

    /// Whether the content so far holds answer text: not while it may
    /// still open, or is inside, a `<think>` block (a runtime that leaves
    /// reasoning in the content). Settles the block's state as it goes.
    fn answer_began(&mut self) -> bool {
        loop {
            match self.think {
                Think::Absent => return true,
                Think::Undecided => {
                    let lead = self.cap.content.trim_start();
                    if lead.starts_with(THINK_OPEN) {
                        let open = self.cap.content.len() - lead.len() + THINK_OPEN.len();
                        self.think = Think::Inside { open, from: open };
                    } else if THINK_OPEN.starts_with(lead) {
                        return false;
                    } else {
                        // No block: the answer began with the first content.
                        self.think = Think::Absent;
                        if let Some(t) = self.first_content_ms {
                            self.cap.ttft_ms.get_or_insert(t);
                        }
                    }
                }
                Think::Inside { open, from } => {
                    let Some(at) = self.cap.content[from..].find(THINK_CLOSE) else {
                        // Search again from where a tag split across chunks may start.
                        let mut from = self.cap.content.len().saturating_sub(THINK_CLOSE.len());
                        while !self.cap.content.is_char_boundary(from) {
                            from -= 1;
                        }
                        self.think = Think::Inside {
                            open,
                            from: from.max(open),
                        };
                        return false;
                    };
                    let close = from + at;
                    self.think = Think::Closed { open, close };
                }
                Think::Closed { close, .. } => {
                    let answer = &self.cap.content[close + THINK_CLOSE.len()..];
                    return !answer.trim().is_empty();
                }
            }
        }
    }

    /// The `<think>` block taken out of the content into the reasoning (the
    /// answer is what follows it, leading blank space dropped); a block never
    /// closed is all reasoning and leaves no answer.
    fn take_think_block(&mut self) {
        let content = &self.cap.content;
        let (inner, answer) = match self.think {
            Think::Undecided => {
                if let Some(t) = self.first_content_ms {
                    self.cap.ttft_ms.get_or_insert(t);
                }
                return;
            }
            Think::Absent => return,
            Think::Inside { open, .. } => (&content[open..], ""),
            Think::Closed { open, close } => (
                &content[open..close],
                content[close + THINK_CLOSE.len()..].trim_start(),
            ),
        };
        let (inner, answer) = (inner.to_owned(), answer.to_owned());
        self.cap.reasoning.push_str(&inner);
        self.cap.content = answer;
        self.cap.reasoning_from_content = true;
    }

    /// After `[DONE]`: a stream that never said why it finished is not valid.
    pub(super) fn finish_after_done(&mut self) {
        self.take_think_block();
        if self.cap.finish_reasons.is_empty() {
            self.fail(
                Outcome::StreamValidationFailed,
                "stream ended ([DONE]) without any finish_reason".into(),
            );
        }
    }

    /// The body ended without `[DONE]`: fine after a final chunk, else a truncated stream.
    pub(super) fn finish_at_close(&mut self, closed_ms: f64) {
        self.take_think_block();
        if self.cap.finish_reasons.is_empty() {
            self.fail(
                Outcome::StreamValidationFailed,
                "stream ended without [DONE] and without any finish_reason".into(),
            );
        } else {
            self.cap.e2e_ms = Some(closed_ms);
            self.state = State::Done;
        }
    }
}

/// Where the content stands with a `<think>` block at its start (byte
/// offsets into the content: `open` just after `<think>`, `close` at
/// `</think>`, `from` where the search for it resumes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Think {
    /// The content so far is blank, or a prefix of `<think>`.
    Undecided,
    Absent,
    Inside {
        open: usize,
        from: usize,
    },
    Closed {
        open: usize,
        close: usize,
    },
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Most tool calls one answer may carry.
const MAX_TOOL_CALLS: usize = 64;

/// Append within `cap` bytes; once something did not fit, `full` stops all
/// later appends, so the capture is always a prefix of the real text.
pub(super) fn append_capped(dst: &mut String, s: &str, cap: usize, full: &mut bool) {
    if *full {
        return;
    }
    let room = cap.saturating_sub(dst.len());
    if s.len() <= room {
        dst.push_str(s);
        return;
    }
    let mut cut = room;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    dst.push_str(&s[..cut]);
    *full = true;
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(super) fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

pub(super) fn bounded_bytes(b: &[u8], max: usize) -> String {
    bounded(&String::from_utf8_lossy(&b[..b.len().min(max + 4)]), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::sse::SseParser;

    const CHUNK: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n";

    /// Feed `n` one-character chunks, one ms apart, while the sink streams;
    /// how many it took.
    fn feed(sink: &mut Sink<'_>, n: usize) -> usize {
        let mut parser = SseParser::new(crate::measure::client::MAX_EVENT_BYTES);
        let mut fed = 0;
        while fed < n && sink.state == State::Streaming {
            fed += 1;
            parser.feed(CHUNK.as_bytes(), |ev| sink.on_event(ev, fed as f64));
        }
        fed
    }

    #[test]
    fn a_stream_far_past_max_tokens_ends_as_a_server_fault() {
        let mut cap = StreamCapture::default();
        let mut sink = Sink::new(&mut cap, Endpoint::Chat, 1 << 20);
        sink.limit_output(Some(8));
        let allowed = chunk_allowance(8);
        assert_eq!(allowed, 96);
        // Up to the allowance the stream goes on: chunks are not tokens.
        assert_eq!(feed(&mut sink, allowed as usize), 96);
        assert_eq!(sink.state, State::Streaming);
        // One past it ends the request; nothing more is read.
        assert_eq!(feed(&mut sink, 1_000_000), 1);
        assert_eq!(sink.state, State::Failed);
        let f = cap.failure.expect("failed");
        assert_eq!(f.class, Outcome::StreamValidationFailed);
        assert!(
            f.message
                .contains("97 output-bearing chunks for max_tokens 8")
                && f.message.contains("at most 96"),
            "{}",
            f.message
        );
        assert_eq!(cap.chunk_ms.len(), 97);
    }

    #[test]
    fn chunk_times_past_the_limit_are_counted_with_the_last_time() {
        let mut cap = StreamCapture::default();
        let mut sink = Sink::new(&mut cap, Endpoint::Chat, 16);
        assert_eq!(feed(&mut sink, MAX_CHUNK_TIMES + 10), MAX_CHUNK_TIMES + 10);
        assert_eq!(sink.state, State::Streaming);
        assert_eq!(cap.chunk_ms.len(), MAX_CHUNK_TIMES);
        assert_eq!(cap.chunks_not_kept, 10);
        assert_eq!(cap.last_chunk_ms, Some((MAX_CHUNK_TIMES + 10) as f64));
        // The capture is capped too: a never-ending stream keeps a bounded record.
        assert_eq!(cap.content.len(), 16);
    }

    #[test]
    fn the_allowance_is_read_from_the_body() {
        let of = |b: Value| Asked::of(Endpoint::Chat, &b).max_tokens;
        assert_eq!(of(serde_json::json!({"max_tokens": 8})), Some(8));
        assert_eq!(of(serde_json::json!({"max_completion_tokens": 9})), Some(9));
        assert_eq!(of(serde_json::json!({})), None);
        assert_eq!(chunk_allowance(u64::MAX), u64::MAX);
    }
}
