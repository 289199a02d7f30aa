//! A loopback OpenAI-style SSE source with a known schedule, for tests and benchmarks.
//!
//! Plain HTTP/1.1 written by hand on a `TcpListener` bound to 127.0.0.1:0,
//! keep-alive supported, run on its own thread and tokio runtime so that the
//! client under test and the source do not share a scheduler. It answers
//! `POST /v1/chat/completions` and `POST /v1/completions` by streaming N
//! chunks: a role-only chunk at once (chat), content chunk `i` at
//! `t0 + ttft + i·itl` (`t0` = request fully read), a finish chunk and a usage
//! chunk with the last content chunk, then `data: [DONE]`. The schedule is the
//! ground truth; the source records nothing about the client.
//!
//! With `ttft` and `itl` both zero the whole answer is written as fast as
//! possible in large writes. On Linux, scheduled chunks are timed with a
//! `timerfd` per connection (µs precision) rather than tokio's 1 ms timer wheel.
//!
//! Per-request overrides ride in the JSON body: `max_tokens` (or
//! `max_completion_tokens`) sets N, and an optional `"fastsource"` object
//! (see [`Overrides`]) changes the schedule or injects faults. A body with
//! `"stream": false` (or no `stream`) gets a plain JSON completion.
//! `GET /v1/models` and `GET /health` answer too.
//!
//! `usage.prompt_tokens` is a quarter of the body's bytes, unless the source
//! counts ([`FastSourceConfig::counter`]): then a chat request's count is
//! that of its chat-formatted prompt, as the reference engine counts it,
//! and infergate's exact sizing lands on its target against the source as
//! against the engine. The counting mode supports what sizing *with the
//! model's `tokenizer.json`* asks of a server: chat requests (streamed, and
//! the unstreamed probes) whose messages have string content. It has no
//! `/tokenize` (discovery finds none, so sizing without a tokenizer file
//! falls back to usage calibration), and `/v1/completions` keeps the
//! byte estimate. Counting takes the place of prefill: a counted request's
//! schedule starts once its prompt is counted.
//!
//! Queueing mode ([`FastSourceConfig::slots`]): at most N requests are
//! answered at once and the rest wait, first come first served, before
//! their first byte; a request's schedule starts when it gets its slot. A
//! server with N batch slots and a fixed per-token speed, so a load exists
//! above which latency grows without bound: a capacity with a known cause.
//! [`FastSource::waited`] counts the requests that found every slot taken.
//!
//! Its files: `server` accepts connections and reads each request,
//! `respond` routes and answers one, `stream` sends a streamed answer on its
//! schedule with the chunks `frames` (and `reasoning`) write, `request` is
//! what a request asks and the facts of its answer, `clock` the send stamps
//! and the chunk timer.

mod clock;
mod frames;
mod reasoning;
mod request;
mod respond;
mod server;
mod stream;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::promptcount::{ChatMessage, PromptCounter};

pub use clock::{STAMP_DIGITS, monotonic_ns};
pub use request::Overrides;

use server::serve;

#[derive(Debug, Clone)]
pub struct FastSourceConfig {
    /// Content chunks per answer when the request names no `max_tokens`.
    pub chunks: usize,
    /// From request received to the first content chunk.
    pub ttft: Duration,
    /// Between content chunks.
    pub itl: Duration,
    /// Text of every content chunk (JSON-escaped once per request, not per chunk).
    pub token: String,
    pub model: String,
    /// Send a role-only chunk (empty content) first, at once, as real servers do.
    pub role_chunk: bool,
    /// Send a usage chunk (`choices: []`) before `[DONE]`.
    pub usage: bool,
    /// Send `data: [DONE]`.
    pub done: bool,
    /// Runtime worker threads; 1 means a current-thread runtime.
    pub threads: usize,
    /// Counting mode: a chat request's `usage.prompt_tokens` is the token
    /// count of its chat-formatted prompt (see the module's notes).
    pub counter: Option<PromptCounter>,
    /// Counting mode: keep each chat request's messages and count, for
    /// [`FastSource::take_prompts`] (a test's independent recount).
    pub record_prompts: bool,
    /// Reasoning a request asks for (`reasoning_chunks`) comes inside the
    /// content in `<think>…</think>`, as from a server that does not
    /// separate it; a request's `think_in_content` overrides it.
    pub think_in_content: bool,
    /// A streamed chat request that offers `tools` is answered with one
    /// call of the first offered function (or, `Last`, the last), its
    /// arguments [`TOOL_ARGUMENTS`], and `finish_reason = "tool_calls"`.
    pub tool_calls: Option<ToolPick>,
    /// Queueing mode: at most this many chat or text completions answered
    /// at once; the rest wait in arrival order (see the module's notes).
    pub slots: Option<usize>,
}

/// Which offered function the source calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPick {
    First,
    Last,
}

/// The arguments of every call the source makes.
pub const TOOL_ARGUMENTS: &str = "{\"answer\": 1}";

impl Default for FastSourceConfig {
    fn default() -> Self {
        FastSourceConfig {
            chunks: 16,
            ttft: Duration::ZERO,
            itl: Duration::ZERO,
            token: "tok".into(),
            model: "fastsource".into(),
            role_chunk: true,
            usage: true,
            done: true,
            threads: 1,
            counter: None,
            record_prompts: false,
            think_in_content: false,
            tool_calls: None,
            slots: None,
        }
    }
}

/// One chat request as the counting source read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedPrompt {
    /// Streamed (a measured request) or not (a sizing probe).
    pub stream: bool,
    pub messages: Vec<ChatMessage>,
    /// What the source reported as `usage.prompt_tokens`.
    pub prompt_tokens: u64,
}

type Recorded = Arc<Mutex<Vec<RecordedPrompt>>>;
/// Every request head the source read, as `METHOD path` (`GET` for any
/// method but POST), in arrival order.
type Heard = Arc<Mutex<Vec<String>>>;

/// Queueing mode's slots and what they saw.
#[derive(Debug)]
pub(crate) struct Queue {
    /// Fair: waiters are served in the order they asked.
    pub(crate) slots: tokio::sync::Semaphore,
    /// Requests that found every slot taken and waited.
    pub(crate) waited: AtomicU64,
}

/// A running source. Dropping it stops the server and closes its connections.
#[derive(Debug)]
pub struct FastSource {
    addr: SocketAddr,
    prompts: Recorded,
    heard: Heard,
    queue: Option<Arc<Queue>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FastSource {
    /// Bind 127.0.0.1:0 and serve on a thread of its own.
    pub fn start(cfg: FastSourceConfig) -> io::Result<(SocketAddr, FastSource)> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        // std listens with a backlog of 128: hundreds of clients connecting at
        // once would see dropped SYNs and one-second retransmits.
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: listen on a socket this listener owns; only the backlog changes.
            unsafe { libc::listen(listener.as_raw_fd(), 4096) };
        }
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let rt = if cfg.threads <= 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cfg.threads)
                .thread_name("fastsource-worker")
                .enable_all()
                .build()?
        };
        let (stop_tx, stop_rx) = oneshot::channel();
        let prompts = Recorded::default();
        let recorded = prompts.clone();
        let heard = Heard::default();
        let hearing = heard.clone();
        let queue = cfg.slots.map(|n| {
            Arc::new(Queue {
                slots: tokio::sync::Semaphore::new(n.max(1)),
                waited: AtomicU64::new(0),
            })
        });
        let queueing = queue.clone();
        let thread = std::thread::Builder::new()
            .name("fastsource".into())
            .spawn(move || {
                rt.block_on(serve(
                    listener,
                    Arc::new(cfg),
                    recorded,
                    hearing,
                    queueing,
                    stop_rx,
                ));
                // Dropping the runtime here cancels every connection task.
            })?;
        Ok((
            addr,
            FastSource {
                addr,
                prompts,
                heard,
                queue,
                stop: Some(stop_tx),
                thread: Some(thread),
            },
        ))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, ready for a client's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The chat requests recorded so far (counting mode with
    /// `record_prompts`), in the order they were counted; the record is
    /// emptied.
    pub fn take_prompts(&self) -> Vec<RecordedPrompt> {
        std::mem::take(&mut *self.prompts.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Every request the source has read so far, as `GET /v1/models` or
    /// `POST /v1/chat/completions`, in arrival order (whatever its answer):
    /// a test's count of what a client sent.
    pub fn requests(&self) -> Vec<String> {
        self.heard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl FastSource {
    /// Queueing mode: how many requests so far found every slot taken and
    /// waited for one (0 without slots).
    pub fn waited(&self) -> u64 {
        self.queue
            .as_ref()
            .map_or(0, |q| q.waited.load(Ordering::Relaxed))
    }
}

impl Drop for FastSource {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            // Joining makes "dropped" mean "port closed"; shutdown takes microseconds.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Instant;

    fn raw(addr: SocketAddr, req: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(req.as_bytes()).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    fn post(path: &str, body: &str) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn streams_chunks_usage_and_done() {
        let (addr, _src) = FastSource::start(FastSourceConfig::default()).expect("start");
        let out = raw(
            addr,
            &post("/v1/chat/completions", r#"{"stream":true,"max_tokens":3}"#),
        );
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("text/event-stream"));
        assert_eq!(out.matches(r#""delta":{"content":"tok"}"#).count(), 3);
        assert_eq!(out.matches(r#""role":"assistant""#).count(), 1);
        assert!(out.contains(r#""finish_reason":"length""#));
        assert!(out.contains(r#""completion_tokens":3"#));
        assert!(out.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"), "{out}");
    }

    #[test]
    fn injected_status_and_unknown_paths() {
        let (addr, _src) = FastSource::start(FastSourceConfig::default()).expect("start");
        let out = raw(
            addr,
            &post(
                "/v1/chat/completions",
                r#"{"stream":true,"fastsource":{"status":503}}"#,
            ),
        );
        assert!(out.starts_with("HTTP/1.1 503 "), "{out}");
        let out = raw(addr, &post("/nope", "{}"));
        assert!(out.starts_with("HTTP/1.1 404 "), "{out}");
    }

    #[test]
    fn keep_alive_serves_several_requests_on_one_connection() {
        let (addr, _src) = FastSource::start(FastSourceConfig::default()).expect("start");
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        let body = r#"{"stream":true,"max_tokens":2}"#;
        let req = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut buf = Vec::new();
        for _ in 0..3 {
            s.write_all(req.as_bytes()).expect("write");
            // Read up to the end of this response's chunked body.
            buf.clear();
            let mut b = [0u8; 4096];
            while !buf.ends_with(b"0\r\n\r\n") {
                let n = s.read(&mut b).expect("read");
                assert!(n > 0, "closed early");
                buf.extend_from_slice(&b[..n]);
            }
            let text = String::from_utf8_lossy(&buf);
            assert_eq!(text.matches(r#""text":"tok""#).count(), 2, "{text}");
        }
    }

    #[test]
    fn paced_chunks_are_not_early() {
        let cfg = FastSourceConfig {
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(5),
            ..Default::default()
        };
        let (addr, _src) = FastSource::start(cfg).expect("start");
        let t = Instant::now();
        let out = raw(
            addr,
            &post("/v1/chat/completions", r#"{"stream":true,"max_tokens":5}"#),
        );
        assert!(t.elapsed() >= Duration::from_millis(40));
        assert_eq!(out.matches(r#""content":"tok""#).count(), 5);
    }

    #[test]
    fn with_two_slots_the_third_and_fourth_request_wait_for_one_to_finish() {
        // Service: 10 chunks 100 ms apart, at least 0.9 s from the slot.
        let service = Duration::from_millis(900);
        let cfg = FastSourceConfig {
            itl: Duration::from_millis(100),
            slots: Some(2),
            ..Default::default()
        };
        let (addr, src) = FastSource::start(cfg).expect("start");
        let req = post("/v1/chat/completions", r#"{"stream":true,"max_tokens":10}"#);
        let mut conns: Vec<std::net::TcpStream> = (0..4)
            .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
            .collect();
        let sent = Instant::now();
        for c in &mut conns {
            c.write_all(req.as_bytes()).expect("write");
        }
        let readers: Vec<_> = conns
            .into_iter()
            .map(|mut c| {
                std::thread::spawn(move || {
                    let mut b = [0u8; 1];
                    assert_eq!(c.read(&mut b).expect("first byte"), 1);
                    let first = Instant::now();
                    let mut rest = String::new();
                    c.read_to_string(&mut rest).expect("read");
                    (first, rest.matches(r#""content":"tok""#).count())
                })
            })
            .collect();
        let mut got: Vec<(Instant, usize)> =
            readers.into_iter().map(|r| r.join().unwrap()).collect();
        got.sort();
        assert!(got.iter().all(|g| g.1 == 10), "every answer whole");
        // Two found both slots taken; they could not start before one of
        // the first two had sent its whole answer.
        assert_eq!(src.waited(), 2);
        assert!(got[2].0 >= sent + service, "{:?}", got[2].0 - sent);
        assert!(got[1].0 <= got[2].0);
    }

    #[test]
    fn the_counting_mode_reports_the_chat_prompts_tokens_and_records_it() {
        let counter = PromptCounter::chatml(
            crate::promptcount::tests::CHATML_WORDS.as_bytes(),
            Some("be kind"),
        )
        .unwrap();
        let cfg = FastSourceConfig {
            counter: Some(counter),
            record_prompts: true,
            ..Default::default()
        };
        let (addr, src) = FastSource::start(cfg).expect("start");
        let chat = r#""messages":[{"role":"user","content":"hello big world"}]"#;
        // system turn 5, user turn 6, assistant opening 2.
        let out = raw(
            addr,
            &post(
                "/v1/chat/completions",
                &format!("{{{chat},\"max_tokens\":1}}"),
            ),
        );
        assert!(out.contains(r#""prompt_tokens":13"#), "{out}");
        let out = raw(
            addr,
            &post(
                "/v1/chat/completions",
                &format!("{{{chat},\"stream\":true,\"max_tokens\":2}}"),
            ),
        );
        assert!(
            out.contains(r#""prompt_tokens":13,"completion_tokens":2"#),
            "{out}"
        );
        let out = raw(
            addr,
            &post(
                "/v1/chat/completions",
                r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
            ),
        );
        assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
        let seen = src.take_prompts();
        assert_eq!(
            seen.iter()
                .map(|p| (p.stream, p.prompt_tokens))
                .collect::<Vec<_>>(),
            [(false, 13), (true, 13)]
        );
        assert_eq!(seen[1].messages[0].content, "hello big world");
        assert!(src.take_prompts().is_empty());
    }

    #[test]
    fn stamped_chunks_carry_their_send_time() {
        let (addr, _src) = FastSource::start(FastSourceConfig::default()).expect("start");
        let before = monotonic_ns();
        let out = raw(
            addr,
            &post(
                "/v1/chat/completions",
                r#"{"stream":true,"max_tokens":3,"fastsource":{"stamp":true,"itl_ms":2}}"#,
            ),
        );
        let after = monotonic_ns();
        let stamps: Vec<u64> = out
            .split(r#""content":""#)
            .skip(1)
            .filter_map(|s| s.get(..STAMP_DIGITS)?.parse().ok())
            .collect();
        assert_eq!(stamps.len(), 3, "{out}");
        assert!(
            // Order only: exact gaps are a property of a loaded machine's timers.
            stamps.windows(2).all(|w| w[1] > w[0]),
            "{stamps:?}"
        );
        assert!(stamps[0] >= before && stamps[2] <= after, "{stamps:?}");
    }
}
