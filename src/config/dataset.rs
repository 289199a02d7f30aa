//! Dataset files a cell's `workload` names, read and checked before any
//! request is sent: ShareGPT-format conversations, OpenAI chat request lines,
//! and Mooncake-style traces. Every error names the file, the line (or the
//! array position) and the field.

use std::path::Path;

use serde::Deserialize;

use super::limits;
use serde_json::Value;

/// Largest dataset file read: every suite input has one limit.
pub use super::limits::MAX_INPUT_FILE_BYTES as MAX_DATASET_BYTES;

/// Longest a trace may span from its first line, ms: a day's schedule at
/// the fastest replay (`limits::MAX_SCHEDULE_S` × `workload::MAX_SPEED`).
/// What a cell sends of it, at its speed, is bounded by the day when the
/// suite is read; this keeps a typo'd timestamp (2^64 − 1) out before then.
pub const MAX_TRACE_SPAN_MS: u64 =
    (limits::MAX_SCHEDULE_S * super::workload::MAX_SPEED * 1000.0) as u64;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One request line of an OpenAI-format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub max_tokens: Option<u64>,
}

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEntry {
    pub timestamp_ms: u64,
    pub input_length: u64,
    pub output_length: u64,
    pub hash_ids: Vec<u64>,
    /// A capture's line: the prompt tokens the server said it served from
    /// its cache, when it said (what a replay's fidelity compares).
    pub cached_tokens: Option<u64>,
}

/// What a dataset file held, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dataset {
    /// ShareGPT: each conversation a list of messages, turns alternating
    /// user then assistant (a leading system message kept apart).
    Conversations(Vec<Conversation>),
    Requests(Vec<ChatRequest>),
    Trace(Trace),
}

/// A trace's lines to send, and what a capture's trace left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub entries: Vec<TraceEntry>,
    /// `Some` when the file is an `infergate capture` trace.
    pub capture: Option<CaptureSkips>,
}

impl std::ops::Deref for Trace {
    type Target = [TraceEntry];
    fn deref(&self) -> &[TraceEntry] {
        &self.entries
    }
}

/// A capture's lines not replayed: failed exchanges (a status other than
/// 2xx, or a zero length) and embeddings requests (a trace cell sends chat).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureSkips {
    pub failed: usize,
    pub embeddings: usize,
}

impl Trace {
    /// What the cell's shape says of the file beyond its name.
    pub fn note(&self) -> Option<String> {
        self.capture.map(|c| {
            format!(
                "a capture: {} failed and {} embeddings lines left out",
                c.failed, c.embeddings
            )
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    pub system: Option<String>,
    /// (user, recorded assistant answer) pairs; the last answer may be empty.
    pub turns: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{file}: {0}", file = .1)]
    Io(std::io::Error, String),
    #[error(
        "{file}: more than {max} bytes (64 MiB), the most a suite input file may hold; take a sample of it",
        max = MAX_DATASET_BYTES
    )]
    TooLarge { file: String },
    #[error("{file}: {at}: {why}")]
    Bad {
        file: String,
        at: String,
        why: String,
    },
    #[error("{file}: the file holds no {what}")]
    Empty { file: String, what: &'static str },
}

pub(crate) fn bad(file: &str, at: impl Into<String>, why: impl Into<String>) -> DatasetError {
    DatasetError::Bad {
        file: file.to_string(),
        at: at.into(),
        why: why.into(),
    }
}

/// Read a suite input file (a dataset, a schema, a tools or task file):
/// only a regular file (a FIFO or a device is refused before it is read)
/// and at most [`MAX_DATASET_BYTES`] of it, counted as it is read; without
/// a leading byte-order mark (what Windows editors write; JSON parsers
/// refuse it as the first value's first character).
pub fn read_bounded(path: &Path) -> Result<String, DatasetError> {
    let file = path.display().to_string();
    let bytes =
        crate::report::files::read_regular_at_most(path, MAX_DATASET_BYTES).map_err(|e| {
            if e.kind() == std::io::ErrorKind::FileTooLarge {
                DatasetError::TooLarge { file: file.clone() }
            } else {
                DatasetError::Io(e, file.clone())
            }
        })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        DatasetError::Io(
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            file,
        )
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// JSON Lines: each non-blank line parsed as a value, with its 1-based line.
pub(crate) fn json_lines(text: &str, file: &str) -> Result<Vec<(usize, Value)>, DatasetError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| bad(file, format!("line {}", i + 1), format!("not JSON: {e}")))?;
        out.push((i + 1, v));
    }
    Ok(out)
}

/// ShareGPT-format conversations: a JSON array, or JSON Lines, of objects
/// with `conversations: [{from, value}]` (`from` human/user, gpt/assistant,
/// system).
pub fn sharegpt(path: &Path) -> Result<Dataset, DatasetError> {
    sharegpt_text(&read_bounded(path)?, &path.display().to_string())
}

/// [`sharegpt`] of text already read; `file` names it in errors.
pub fn sharegpt_text(text: &str, file: &str) -> Result<Dataset, DatasetError> {
    let file = file.to_string();
    let items: Vec<(String, Value)> = if text.trim_start().starts_with('[') {
        let all: Vec<Value> = serde_json::from_str(text).map_err(|e| {
            bad(
                &file,
                format!("line {}", e.line()),
                format!("not JSON: {e}"),
            )
        })?;
        // Within an array there are no lines to name: the position stands in.
        all.into_iter()
            .enumerate()
            .map(|(i, v)| (format!("[{i}]"), v))
            .collect()
    } else {
        json_lines(text, &file)?
            .into_iter()
            .map(|(l, v)| (format!("line {l}"), v))
            .collect()
    };
    let mut out = Vec::with_capacity(items.len());
    for (at, v) in items {
        out.push(conversation(&v).map_err(|why| bad(&file, at, why))?);
    }
    if out.is_empty() {
        return Err(DatasetError::Empty {
            file,
            what: "conversation",
        });
    }
    Ok(Dataset::Conversations(out))
}

fn conversation(v: &Value) -> Result<Conversation, String> {
    let turns = v
        .get("conversations")
        .ok_or("missing field `conversations`")?
        .as_array()
        .ok_or("field `conversations`: expected an array of {from, value}")?;
    let mut system = None;
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        let field = |f: &str| format!("conversations[{i}].{f}");
        let from = t
            .get("from")
            .ok_or_else(|| format!("missing field `{}`", field("from")))?
            .as_str()
            .ok_or_else(|| format!("field `{}`: expected a string", field("from")))?;
        let value = t
            .get("value")
            .ok_or_else(|| format!("missing field `{}`", field("value")))?
            .as_str()
            .ok_or_else(|| format!("field `{}`: expected a string", field("value")))?;
        match from {
            "system" if i == 0 => system = Some(value.to_string()),
            "human" | "user" => {
                if pairs.last().is_some_and(|(_, a)| a.is_empty()) {
                    return Err(format!(
                        "field `{}`: two user turns in a row",
                        field("from")
                    ));
                }
                pairs.push((value.to_string(), String::new()));
            }
            "gpt" | "assistant" | "chatgpt" | "bard" => match pairs.last_mut() {
                Some((_, a)) if a.is_empty() => *a = value.to_string(),
                _ => {
                    return Err(format!(
                        "field `{}`: an answer with no user turn before it",
                        field("from")
                    ));
                }
            },
            other => {
                return Err(format!(
                    "field `{}`: unknown speaker {other:?} (human, user, gpt, assistant, or system first)",
                    field("from")
                ));
            }
        }
    }
    if pairs.is_empty() {
        return Err("field `conversations`: the conversation has no user turn".into());
    }
    if pairs.iter().any(|(u, _)| u.trim().is_empty()) {
        return Err("field `conversations`: a user turn is empty".into());
    }
    Ok(Conversation {
        system,
        turns: pairs,
    })
}

/// OpenAI chat request lines (JSON Lines): `messages` (role, content as a
/// string or text parts), and optionally `max_tokens` or
/// `max_completion_tokens`. Other fields are ignored: the cell decides
/// sampling, so both sides are asked the same way.
pub fn openai(path: &Path) -> Result<Dataset, DatasetError> {
    openai_text(&read_bounded(path)?, &path.display().to_string())
}

/// [`openai`] of text already read; `file` names it in errors.
pub fn openai_text(text: &str, file: &str) -> Result<Dataset, DatasetError> {
    let file = file.to_string();
    let mut out = Vec::new();
    for (line, v) in json_lines(text, &file)? {
        out.push(chat_request(&v).map_err(|why| bad(&file, format!("line {line}"), why))?);
    }
    if out.is_empty() {
        return Err(DatasetError::Empty {
            file,
            what: "request",
        });
    }
    Ok(Dataset::Requests(out))
}

fn chat_request(v: &Value) -> Result<ChatRequest, String> {
    let msgs = v
        .get("messages")
        .ok_or("missing field `messages`")?
        .as_array()
        .ok_or("field `messages`: expected an array of {role, content}")?;
    if msgs.is_empty() {
        return Err("field `messages`: empty".into());
    }
    let mut messages = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => Role::System,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some(r) => return Err(format!("field `messages[{i}].role`: unknown role {r:?}")),
            None => {
                return Err(format!(
                    "field `messages[{i}].role`: missing or not a string"
                ));
            }
        };
        let content = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => {
                let mut s = String::new();
                for (j, p) in parts.iter().enumerate() {
                    match (p.get("type").and_then(Value::as_str), p.get("text")) {
                        (Some("text"), Some(Value::String(t))) => s.push_str(t),
                        _ => {
                            return Err(format!(
                                "field `messages[{i}].content[{j}]`: only text parts are sent ({{\"type\": \"text\", \"text\": …}})"
                            ));
                        }
                    }
                }
                s
            }
            _ => {
                return Err(format!(
                    "field `messages[{i}].content`: missing, or not a string or text parts"
                ));
            }
        };
        messages.push(Message { role, content });
    }
    if !messages.iter().any(|m| m.role == Role::User) {
        return Err("field `messages`: no user message".into());
    }
    let max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| v.get(*k).map(|x| (k, x)))
        .map(|(k, x)| match x.as_u64() {
            Some(n) if n > 0 => Ok(n),
            _ => Err(format!("field `{k}`: expected a positive integer")),
        })
        .transpose()?;
    Ok(ChatRequest {
        messages,
        max_tokens,
    })
}

/// A Mooncake-style trace (JSON Lines): `timestamp` (ms from the trace's
/// start, non-decreasing), `input_length`, `output_length`, `hash_ids`.
/// A file whose first line is an `infergate capture` header is a capture:
/// its lines' other fields are ignored, its failed and embeddings lines
/// left out (counted), and its lines, written as requests completed, put
/// in arrival order.
pub fn trace(path: &Path) -> Result<Dataset, DatasetError> {
    trace_text(&read_bounded(path)?, &path.display().to_string())
}

/// The key of a capture's header line (`capture::trace::HEADER_KEY`).
pub const CAPTURE_HEADER_KEY: &str = "infergate_capture";

/// [`trace`] of text already read; `file` names it in errors.
pub fn trace_text(text: &str, file: &str) -> Result<Dataset, DatasetError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line {
        timestamp: u64,
        input_length: u64,
        output_length: u64,
        #[serde(default)]
        hash_ids: Vec<u64>,
        #[serde(skip)]
        cached_tokens: Option<u64>,
    }
    /// A capture's line: the fields replay reads, the rest ignored.
    #[derive(Deserialize)]
    struct Captured {
        timestamp: u64,
        input_length: u64,
        output_length: u64,
        #[serde(default)]
        hash_ids: Vec<u64>,
        #[serde(default)]
        endpoint: Option<String>,
        #[serde(default)]
        status: Option<u16>,
        #[serde(default)]
        cached_tokens: Option<u64>,
    }
    let file = file.to_string();
    let mut lines = json_lines(text, &file)?;
    let capture = lines
        .first()
        .is_some_and(|(_, v)| v.get(CAPTURE_HEADER_KEY).is_some());
    let mut skips = CaptureSkips::default();
    let mut read: Vec<(usize, Line)> = Vec::with_capacity(lines.len());
    if capture {
        lines.remove(0);
    }
    for (line, v) in lines {
        let at = format!("line {line}");
        let field = |e: serde_path_to_error::Error<serde_json::Error>| {
            let field = e.path().to_string();
            bad(&file, &at, format!("field `{field}`: {}", e.into_inner()))
        };
        let l = if capture {
            let c: Captured = serde_path_to_error::deserialize(&v).map_err(field)?;
            if c.endpoint.as_deref() == Some("embeddings") {
                skips.embeddings += 1;
                continue;
            }
            if !c.status.is_some_and(|s| (200..300).contains(&s))
                || c.input_length == 0
                || c.output_length == 0
            {
                skips.failed += 1;
                continue;
            }
            Line {
                timestamp: c.timestamp,
                input_length: c.input_length,
                output_length: c.output_length,
                hash_ids: c.hash_ids,
                cached_tokens: c.cached_tokens,
            }
        } else {
            serde_path_to_error::deserialize(&v).map_err(field)?
        };
        read.push((line, l));
    }
    if capture {
        // Written as each exchange completed; replayed as they arrived.
        read.sort_by_key(|(_, l)| l.timestamp);
    }
    let mut out: Vec<TraceEntry> = Vec::new();
    for (line, l) in read {
        let at = format!("line {line}");
        if l.input_length == 0 || l.output_length == 0 {
            return Err(bad(
                &file,
                at,
                "fields `input_length` and `output_length` must be > 0",
            ));
        }
        // The prompt is made to this length: a typo must not become an allocation.
        for (field, v, max) in [
            ("input_length", l.input_length, limits::MAX_PROMPT_TOKENS),
            ("output_length", l.output_length, limits::MAX_OUTPUT_TOKENS),
        ] {
            if v > max {
                return Err(bad(
                    &file,
                    at,
                    format!("field `{field}`: {v} is more than the {max} a request may ask for"),
                ));
            }
        }
        if let Some(first) = out.first()
            && l.timestamp.saturating_sub(first.timestamp_ms) > MAX_TRACE_SPAN_MS
        {
            return Err(bad(
                &file,
                at,
                format!(
                    "field `timestamp`: {} is more than {MAX_TRACE_SPAN_MS} ms after the first line's ({}); a trace may span at most that (a day at the fastest replay speed)",
                    l.timestamp, first.timestamp_ms
                ),
            ));
        }
        if let Some(prev) = out.last()
            && l.timestamp < prev.timestamp_ms
        {
            return Err(bad(
                &file,
                at,
                format!(
                    "field `timestamp`: {} is before the line above ({}); a trace is replayed in time order",
                    l.timestamp, prev.timestamp_ms
                ),
            ));
        }
        out.push(TraceEntry {
            timestamp_ms: l.timestamp,
            input_length: l.input_length,
            output_length: l.output_length,
            hash_ids: l.hash_ids,
            cached_tokens: l.cached_tokens,
        });
    }
    if out.is_empty() {
        return Err(match capture {
            true => bad(
                &file,
                "capture",
                format!(
                    "no line to replay: {} failed and {} embeddings lines left out",
                    skips.failed, skips.embeddings
                ),
            ),
            false => DatasetError::Empty {
                file,
                what: "trace line",
            },
        });
    }
    Ok(Dataset::Trace(Trace {
        entries: out,
        capture: capture.then_some(skips),
    }))
}

impl Dataset {
    /// How many requests the file can supply, sessions of `turns` counted whole.
    pub fn capacity(&self, turns: u32) -> usize {
        match self {
            Dataset::Conversations(c) => {
                let t = turns.max(1) as usize;
                c.iter().filter(|c| c.turns.len() >= t).count() * t
            }
            Dataset::Requests(r) => r.len(),
            Dataset::Trace(t) => t.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("data.jsonl");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn sharegpt_reads_arrays_and_lines_and_names_what_is_wrong() {
        let (_d, p) = write(
            r#"[{"id":"a","conversations":[{"from":"system","value":"Be brief."},{"from":"human","value":"Hi"},{"from":"gpt","value":"Hello"},{"from":"human","value":"Bye"}]}]"#,
        );
        let Dataset::Conversations(c) = sharegpt(&p).unwrap() else {
            panic!()
        };
        assert_eq!(c[0].system.as_deref(), Some("Be brief."));
        assert_eq!(
            c[0].turns,
            vec![("Hi".into(), "Hello".into()), ("Bye".into(), String::new())]
        );
        let (_d, p) = write(
            "{\"conversations\":[{\"from\":\"human\",\"value\":\"a\"}]}\n{\"conversations\":[{\"from\":\"human\",\"value\":3}]}\n",
        );
        let e = sharegpt(&p).unwrap_err().to_string();
        assert!(
            e.contains("data.jsonl: line 2") && e.contains("conversations[0].value"),
            "{e}"
        );
        let (_d, p) = write("{\"conversations\":[]}\n");
        let e = sharegpt(&p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("no user turn"), "{e}");
        let (_d, p) = write("{\"id\":1}\n");
        let e = sharegpt(&p).unwrap_err().to_string();
        assert!(e.contains("missing field `conversations`"), "{e}");
    }

    #[test]
    fn openai_lines_are_checked_field_by_field() {
        let (_d, p) = write(
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":9,\"temperature\":0.3}\n\n{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}]}\n",
        );
        let Dataset::Requests(r) = openai(&p).unwrap() else {
            panic!()
        };
        assert_eq!(r[0].max_tokens, Some(9));
        assert_eq!(r[1].messages[0].content, "ab");
        for (line, want) in [
            ("{\"messages\":[]}", "`messages`: empty"),
            ("{\"max_tokens\":3}", "missing field `messages`"),
            (
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"9\"}",
                "`max_tokens`: expected a positive integer",
            ),
            (
                "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}",
                "messages[0].role",
            ),
            ("not json", "not JSON"),
        ] {
            let (_d, p) = write(&format!(
                "{{\"messages\":[{{\"role\":\"user\",\"content\":\"ok\"}}]}}\n{line}\n"
            ));
            let e = openai(&p).unwrap_err().to_string();
            assert!(e.contains("line 2") && e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn traces_are_typed_and_in_time_order() {
        let (_d, p) = write(
            "{\"timestamp\":0,\"input_length\":700,\"output_length\":10,\"hash_ids\":[1,2]}\n{\"timestamp\":50,\"input_length\":300,\"output_length\":5,\"hash_ids\":[1]}\n",
        );
        assert_eq!(trace(&p).unwrap().capacity(1), 2);
        let (_d, p) = write(
            "{\"timestamp\":5,\"input_length\":7,\"output_length\":1}\n{\"timestamp\":4,\"input_length\":7,\"output_length\":1}\n",
        );
        let e = trace(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("`timestamp`"), "{e}");
        let (_d, p) = write("{\"timestamp\":5,\"input_length\":\"x\",\"output_length\":1}\n");
        let e = trace(&p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("input_length"), "{e}");
        // A length past the request limits is refused, not made into a prompt.
        let e = trace_text(
            "{\"timestamp\":0,\"input_length\":7,\"output_length\":1}\n{\"timestamp\":1,\"input_length\":99999999999,\"output_length\":1}\n",
            "t.jsonl",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("t.jsonl: line 2: field `input_length`") && e.contains("more than"),
            "{e}"
        );
    }

    #[test]
    fn a_capture_is_replayed_in_arrival_order_without_its_failed_or_embeddings_lines() {
        let header = "{\"infergate_capture\":1,\"block_tokens\":512}\n";
        let line = |ts: u64, status: u16, endpoint: &str, out: u64| {
            format!(
                "{{\"timestamp\":{ts},\"input_length\":9,\"output_length\":{out},\"hash_ids\":[0],\"endpoint\":\"{endpoint}\",\"status\":{status},\"model\":\"m\",\"session\":0,\"cached_tokens\":{ts}}}\n"
            )
        };
        let text = [
            header.to_string(),
            line(20, 200, "chat", 3),
            line(10, 200, "completions", 2),
            line(15, 502, "chat", 0),
            line(16, 200, "chat", 0),
            line(17, 200, "embeddings", 0),
        ]
        .concat();
        let Dataset::Trace(t) = trace_text(&text, "c.jsonl").unwrap() else {
            panic!()
        };
        let at: Vec<u64> = t.iter().map(|e| e.timestamp_ms).collect();
        assert_eq!(at, vec![10, 20]);
        // The cached tokens a replay's fidelity compares are kept.
        assert_eq!(t[0].cached_tokens, Some(10));
        assert_eq!(
            t.capture,
            Some(CaptureSkips {
                failed: 2,
                embeddings: 1
            })
        );
        assert_eq!(
            t.note().unwrap(),
            "a capture: 2 failed and 1 embeddings lines left out"
        );
        // Without the header the same lines are a Mooncake trace: extra fields refused.
        let e = trace_text(&line(20, 200, "chat", 3), "t.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("unknown field"), "{e}");
        // A capture with nothing to replay says why.
        let e = trace_text(
            &[header.to_string(), line(1, 500, "chat", 1)].concat(),
            "c.jsonl",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1 failed"), "{e}");
    }

    #[test]
    fn a_trace_spanning_more_than_its_limit_is_refused_at_the_line() {
        let lines = |last: u64| {
            format!(
                "{{\"timestamp\":7,\"input_length\":7,\"output_length\":1}}\n{{\"timestamp\":{last},\"input_length\":7,\"output_length\":1}}\n"
            )
        };
        for last in [u64::MAX, 7 + MAX_TRACE_SPAN_MS + 1] {
            let e = trace_text(&lines(last), "t.jsonl").unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("t.jsonl: line 2: field `timestamp`: {last} is more than {MAX_TRACE_SPAN_MS} ms after the first line's (7)")),
                "{e}"
            );
        }
        trace_text(&lines(7 + MAX_TRACE_SPAN_MS), "t.jsonl").unwrap();
        // Where the trace starts is its own business: offsets are from its first line.
        trace_text(
            &format!(
                "{{\"timestamp\":{},\"input_length\":7,\"output_length\":1}}\n",
                u64::MAX
            ),
            "t.jsonl",
        )
        .unwrap();
    }

    #[test]
    fn a_dataset_with_a_byte_order_mark_reads_as_without() {
        let line = "{\"timestamp\":0,\"input_length\":7,\"output_length\":1}\n";
        let (_d, p) = write(&format!("\u{feff}{line}"));
        assert_eq!(read_bounded(&p).unwrap(), line);
        assert_eq!(trace(&p).unwrap().capacity(1), 1);
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.jsonl");
        let f = std::fs::File::create(&p).unwrap();
        // Sparse: the size is set without writing 64 MiB.
        f.set_len(MAX_DATASET_BYTES + 1).unwrap();
        let e = openai(&p).unwrap_err().to_string();
        assert!(e.contains("big.jsonl") && e.contains("more than"), "{e}");
    }
}
