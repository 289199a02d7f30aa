//! The trace a capture writes (`trace.jsonl`): a header line, then one line
//! per recorded request, made and written by a writer off the request path
//! (a bounded queue: when it is full a line is dropped and counted, a
//! request never waits).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::blocks::Blocks;
use super::first_byte::FirstByte;
use super::shape::{Endpoint, Prompt, Shape};
use crate::config::timeouts::BYTES_PER_TOKEN_ESTIMATE;
use crate::measure::client::{Reported, reported};
use crate::measure::tokenizer::TokenizerFile;

/// The header line's key: a trace with it is a capture, read as one.
pub use crate::config::dataset::CAPTURE_HEADER_KEY as HEADER_KEY;

/// Lines waiting for the writer, at most.
pub const QUEUE_LINES: usize = 1024;

/// What the proxy saw of one recorded request, handed to the writer.
#[derive(Debug, Default)]
pub struct Observed {
    pub id: u64,
    pub timestamp_ms: u64,
    pub endpoint: Option<Endpoint>,
    pub shape: Shape,
    pub prompt: Option<Prompt>,
    /// The status the client got; `None` when it got no answer.
    pub status: Option<u16>,
    /// Why the exchange did not complete as the upstream meant it.
    pub error: Option<&'static str>,
    /// A streamed answer's chunks, folded.
    pub reported: Reported,
    /// A non-streamed answer (kept up to a limit), read by the writer.
    pub whole: Option<Vec<u8>>,
    /// The request's body (`--keep text` only).
    pub body: Option<Vec<u8>>,
    /// The answer's head from the upstream to its first write to the client.
    pub first_byte: Option<Arc<FirstByte>>,
}

/// The bounded queue between the proxy and the writer.
#[derive(Debug)]
pub struct Queue {
    tx: Mutex<Option<mpsc::Sender<Observed>>>,
    dropped: AtomicU64,
}

impl Queue {
    pub fn new(cap: usize) -> (Queue, mpsc::Receiver<Observed>) {
        let (tx, rx) = mpsc::channel(cap.max(1));
        (
            Queue {
                tx: Mutex::new(Some(tx)),
                dropped: AtomicU64::new(0),
            },
            rx,
        )
    }

    /// Hand a line to the writer, or drop it (counted) when the queue is
    /// full or closed: never waits.
    pub fn push(&self, o: Observed) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if tx.is_none_or(|tx| tx.try_send(o).is_err()) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// No more lines: the writer ends once it has written what it holds.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// How the writer makes lines.
pub struct Writer {
    pub blocks: Blocks,
    pub tokenizer: Option<TokenizerFile>,
    pub block_tokens: u64,
    pub keep_text: bool,
}

/// What the writer wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Written {
    pub lines: u64,
    /// Lines with a length estimated rather than reported or counted.
    pub estimated: u64,
    pub evicted_blocks: u64,
    /// Lines handed to the writer that did not reach the file: those in
    /// hand when a write failed and every one after it.
    pub unwritten: u64,
    /// The first write that failed (then no more lines are made: they are
    /// counted, and traffic goes on).
    pub error: Option<String>,
}

/// The trace file while it can be written: lines since the last flush are
/// not yet counted as written.
struct Sink {
    out: std::io::BufWriter<std::fs::File>,
    unflushed: u64,
    unflushed_estimated: u64,
}

impl Sink {
    fn open(path: &Path, header: &Value) -> std::io::Result<Sink> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        serde_json::to_writer(&mut out, header)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(Sink {
            out,
            unflushed: 0,
            unflushed_estimated: 0,
        })
    }

    fn push(&mut self, line: &str, estimated: bool) -> std::io::Result<()> {
        self.unflushed += 1;
        self.unflushed_estimated += u64::from(estimated);
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")
    }

    /// Flush, counting what reached the file into `w`.
    fn flush(&mut self, w: &mut Written) -> std::io::Result<()> {
        self.out.flush()?;
        w.lines += std::mem::take(&mut self.unflushed);
        w.estimated += std::mem::take(&mut self.unflushed_estimated);
        Ok(())
    }
}

#[derive(Serialize)]
struct Line<'a> {
    timestamp: u64,
    input_length: u64,
    output_length: u64,
    hash_ids: Vec<u64>,
    id: u64,
    endpoint: Option<&'static str>,
    #[serde(flatten)]
    shape: &'a Shape,
    status: Option<u16>,
    error: Option<&'static str>,
    finish_reason: Option<String>,
    cached_tokens: Option<u64>,
    session: u64,
    /// Where each length came from: usage, tokenizer, tokens, bytes/4, chunks, none.
    input_from: &'static str,
    output_from: &'static str,
    estimated: bool,
    /// µs from the answer's head arriving from the upstream to its first
    /// write to the client: the proxy's own time to first byte.
    proxy_first_byte_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<String>,
}

impl Writer {
    /// The header: what the lines' ids and lengths are made from.
    pub fn header(&self, max_blocks: usize) -> Value {
        let blocks_from = match &self.tokenizer {
            Some(t) => format!("tokens of {}", t.describe()),
            None => format!(
                "bytes, {BYTES_PER_TOKEN_ESTIMATE} a token (no tokenizer): blocks of {} bytes",
                self.block_tokens * BYTES_PER_TOKEN_ESTIMATE as u64
            ),
        };
        serde_json::json!({
            HEADER_KEY: 1,
            "started": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "block_tokens": self.block_tokens,
            "blocks_from": blocks_from,
            "max_blocks": max_blocks,
            "estimate": format!("lengths without usage or tokenizer: prompt bytes / {BYTES_PER_TOKEN_ESTIMATE}; a streamed answer's text-bearing chunks"),
            "keep_text": self.keep_text,
        })
    }

    /// Write lines as they come until the queue is closed and empty.
    /// Blocking: run on a thread of its own (tokenizing is slow). A write
    /// that fails (a full disk) ends the writing, not the draining: later
    /// lines are counted as unwritten, so the proxy never waits on it.
    pub fn run(
        mut self,
        mut rx: mpsc::Receiver<Observed>,
        path: &Path,
        max_blocks: usize,
    ) -> Written {
        let mut w = Written::default();
        let failed = |w: &mut Written, sink: Option<Sink>, e: std::io::Error| {
            w.unwritten += sink.map_or(0, |s| s.unflushed);
            w.error = Some(format!("{}: {e}", path.display()));
        };
        let mut sink = match Sink::open(path, &self.header(max_blocks)) {
            Ok(s) => Some(s),
            Err(e) => {
                failed(&mut w, None, e);
                None
            }
        };
        while let Some(o) = rx.blocking_recv() {
            let Some(s) = sink.as_mut() else {
                w.unwritten += 1;
                continue;
            };
            let (line, estimated) = self.line(o);
            let wrote = s.push(&line, estimated).and_then(|()| {
                if rx.is_empty() {
                    s.flush(&mut w)
                } else {
                    Ok(())
                }
            });
            if let Err(e) = wrote {
                failed(&mut w, sink.take(), e);
            }
        }
        if let Some(mut s) = sink.take() {
            let end = s.flush(&mut w).and_then(|()| s.out.get_ref().sync_all());
            if let Err(e) = end {
                failed(&mut w, Some(s), e);
            }
        }
        w.evicted_blocks = self.blocks.evicted();
        w
    }

    /// One line of JSON, and whether a length in it is estimated.
    pub fn line(&mut self, o: Observed) -> (String, bool) {
        let mut rep = o.reported;
        let whole = o.whole.as_deref().and_then(|b| {
            let v: Value = serde_json::from_slice(b).ok()?;
            rep.merge(reported(b).unwrap_or_default());
            Some(answer_text(&v))
        });
        let text = match &o.prompt {
            Some(Prompt::Text(t)) => t.as_str(),
            _ => "",
        };
        // The prompt as units: token ids (4 bytes each) or bytes.
        let tokens: Option<Vec<u32>> = match (&o.prompt, &self.tokenizer) {
            (Some(Prompt::Tokens(t)), _) => Some(t.clone()),
            (Some(Prompt::Text(t)), Some(tok)) => tok.ids(t).ok(),
            _ => None,
        };
        let unit = BYTES_PER_TOKEN_ESTIMATE;
        let block_bytes = self.block_tokens as usize * unit;
        let material: Vec<u8> = match &tokens {
            Some(t) => t.iter().flat_map(|x| x.to_le_bytes()).collect(),
            None => text.as_bytes().to_vec(),
        };
        let hash_ids = if o.shape.parsed {
            self.blocks.ids(&material, block_bytes)
        } else {
            Vec::new()
        };
        let full = material.len() / block_bytes.max(1);
        let session = self.blocks.session(o.id, &hash_ids, full);
        let (input_length, input_from) = match (rep.prompt_tokens, &tokens, o.shape.parsed) {
            (Some(n), _, _) => (n, "usage"),
            (None, Some(t), _) if self.tokenizer.is_some() => (t.len() as u64, "tokenizer"),
            (None, Some(t), _) => (t.len() as u64, "tokens"),
            (None, None, true) => (text.len().div_ceil(unit) as u64, "bytes/4"),
            (None, None, false) => (o.shape.body_bytes.div_ceil(unit) as u64, "bytes/4"),
        };
        let answer: Option<&str> = whole.as_deref().or(Some(rep.text.as_str()));
        let (output_length, output_from) = match (rep.completion_tokens, o.endpoint) {
            (Some(n), _) => (n, "usage"),
            (None, Some(Endpoint::Embeddings)) => (0, "none"),
            (None, _) if o.whole.is_none() => (rep.text_chunks, "chunks"),
            (None, _) => match (&self.tokenizer, answer) {
                (Some(t), Some(a)) => (t.count(a).unwrap_or(0), "tokenizer"),
                (_, a) => (a.map_or(0, |a| a.len().div_ceil(unit)) as u64, "bytes/4"),
            },
        };
        let estimated =
            matches!(input_from, "bytes/4") || matches!(output_from, "bytes/4" | "chunks");
        let line = Line {
            timestamp: o.timestamp_ms,
            input_length,
            output_length,
            hash_ids,
            id: o.id,
            endpoint: o.endpoint.map(Endpoint::as_str),
            shape: &o.shape,
            status: o.status,
            error: o.error,
            finish_reason: rep.finish_reason.clone(),
            cached_tokens: rep.cached_tokens,
            session,
            input_from,
            output_from,
            estimated,
            proxy_first_byte_us: o.first_byte.as_ref().and_then(|f| f.us()),
            prompt: self
                .keep_text
                .then(|| {
                    o.body
                        .as_deref()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                })
                .flatten(),
            answer: self.keep_text.then(|| answer.map(str::to_string)).flatten(),
        };
        let json = serde_json::to_string(&line).unwrap_or_default();
        (json, estimated)
    }
}

/// A whole answer's text: each choice's message content (or reasoning),
/// or a completion's text.
fn answer_text(v: &Value) -> String {
    let mut s = String::new();
    for c in v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let m = c.get("message");
        for t in [
            m.and_then(|m| m.get("reasoning_content")),
            m.and_then(|m| m.get("content")),
            c.get("text"),
        ]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        {
            s.push_str(t);
        }
        if let Some(calls) = m.and_then(|m| m.get("tool_calls")) {
            s.push_str(&calls.to_string());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_and_never_waits() {
        let (q, mut rx) = Queue::new(1);
        for id in 0..3 {
            q.push(Observed {
                id,
                ..Observed::default()
            });
        }
        assert_eq!(q.dropped(), 2);
        assert_eq!(rx.try_recv().unwrap().id, 0);
        q.close();
        q.push(Observed::default());
        assert_eq!(q.dropped(), 3, "a line after close is dropped too");
    }
}
