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

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::promptcount::{ChatMessage, PromptCounter};

/// Requests larger than this are refused: a 120k-token prompt is well below it.
const MAX_BODY: usize = 64 << 20;
const MAX_HEAD: usize = 64 << 10;
/// Fast mode flushes its buffer at this size.
const WRITE_BUF: usize = 64 << 10;

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

/// The part of a chat body the counting mode reads.
#[derive(Deserialize)]
struct ChatBody {
    messages: Vec<ChatMessage>,
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
}

/// Width of a send stamp in content text.
pub const STAMP_DIGITS: usize = 20;

/// CLOCK_MONOTONIC in nanoseconds, the clock of send stamps (and of
/// `std::time::Instant` on Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the live local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[derive(Debug, Deserialize)]
struct RequestBody {
    #[serde(default)]
    stream: bool,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    fastsource: Overrides,
    /// OpenAI's `tools`: only their function names are read.
    #[serde(default)]
    tools: Vec<OfferedTool>,
}

#[derive(Debug, Deserialize)]
struct OfferedTool {
    function: OfferedFunction,
}

#[derive(Debug, Deserialize)]
struct OfferedFunction {
    name: String,
}

/// Where a request goes.
enum Route {
    Chat,
    Completions,
    /// Answered already; whether the connection may be reused.
    Answered(bool),
}

/// One answer's facts: its endpoint, tokens, finish reason and ids.
struct Answer {
    chat: bool,
    seq: u64,
    tokens: usize,
    finish: &'static str,
    prompt_tokens: usize,
    /// The function called instead of text, when the source calls tools.
    call: Option<String>,
}

impl Answer {
    fn of(
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

    fn usage(&self) -> serde_json::Value {
        let (p, n) = (self.prompt_tokens, self.tokens);
        serde_json::json!({"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n})
    }

    /// The unstreamed answer.
    fn whole(&self, cfg: &FastSourceConfig) -> serde_json::Value {
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

/// Every frame of a streamed answer, built once per request; per chunk the
/// source only copies bytes.
struct Frames {
    role: Vec<u8>,
    content: Vec<u8>,
    /// Where the stamp digits sit inside the content frame.
    stamp_at: Option<usize>,
    /// The first `reasoning` chunks carry reasoning instead: as
    /// `reasoning_content` deltas, or as content inside `<think>…</think>`
    /// (first, middle and last frames).
    reasoning: usize,
    think: [Vec<u8>; 3],
    fin: Vec<u8>,
    prefix: String,
    usage_json: String,
}

impl Frames {
    fn of(cfg: &FastSourceConfig, a: &Answer, o: &Overrides) -> Frames {
        let stamp = o.stamp.unwrap_or(false);
        // A stamped chunk carries a placeholder that is overwritten as it is sent.
        let token_json = if stamp {
            format!("\"{}\"", "0".repeat(STAMP_DIGITS))
        } else {
            json_string(&cfg.token)
        };
        let (id, object) = if a.chat {
            (format!("chatcmpl-fs-{}", a.seq), "chat.completion.chunk")
        } else {
            (format!("cmpl-fs-{}", a.seq), "text_completion")
        };
        let prefix = format!(
            "{{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":0,\"model\":{},\"system_fingerprint\":\"fastsource\",\"choices\":",
            json_string(&cfg.model)
        );
        let choice = |payload: &str, fin: &str| {
            if a.chat {
                format!("[{{\"index\":0,\"delta\":{payload},\"finish_reason\":{fin}}}]}}")
            } else {
                format!(
                    "[{{\"index\":0,\"text\":{payload},\"logprobs\":null,\"finish_reason\":{fin}}}]}}"
                )
            }
        };
        let delta = |field: &str, text: &str| {
            let payload = if a.chat {
                format!("{{\"{field}\":{text}}}")
            } else {
                text.to_string()
            };
            frame(&format!("{prefix}{}", choice(&payload, "null")))
        };
        let content = match &a.call {
            Some(name) => delta(
                "tool_calls",
                &serde_json::json!([{"index": 0, "id": format!("call_{}", a.seq), "type": "function",
                    "function": {"name": name, "arguments": TOOL_ARGUMENTS}}])
                .to_string(),
            ),
            None => delta("content", &token_json),
        };
        let stamp_at = stamp
            .then(|| find(&content, token_json.as_bytes()).map(|p| p + 1))
            .flatten();
        let reasoning = o.reasoning_chunks.unwrap_or(0).min(a.tokens);
        let tok = &cfg.token;
        // Built only for an answer that reasons: the others never send them.
        let think = if reasoning == 0 {
            Default::default()
        } else if o.think_in_content.unwrap_or(cfg.think_in_content) || !a.chat {
            let last = if reasoning == 1 {
                format!("<think>{tok}</think>")
            } else {
                format!("{tok}</think>")
            };
            [
                delta("content", &json_string(&format!("<think>{tok}"))),
                delta("content", &json_string(tok)),
                delta("content", &json_string(&last)),
            ]
        } else {
            let r = delta("reasoning_content", &json_string(tok));
            [r.clone(), r.clone(), r]
        };
        let fin_payload = if a.chat { "{}" } else { "\"\"" };
        Frames {
            role: frame(&format!(
                "{prefix}{}",
                choice("{\"role\":\"assistant\",\"content\":null}", "null")
            )),
            fin: frame(&format!(
                "{prefix}{}",
                choice(fin_payload, &format!("\"{}\"", a.finish))
            )),
            content,
            stamp_at,
            reasoning,
            think,
            prefix,
            usage_json: format!(
                "{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{}}}",
                a.prompt_tokens,
                a.tokens,
                a.prompt_tokens + a.tokens
            ),
        }
    }

    /// Chunk `i`'s frame, and where its stamp goes.
    fn chunk(&self, i: usize) -> (&[u8], Option<usize>) {
        if i >= self.reasoning {
            return (&self.content, self.stamp_at);
        }
        let which = if i + 1 == self.reasoning {
            2
        } else {
            usize::from(i > 0)
        };
        (&self.think[which], None)
    }

    /// The finish, usage and `[DONE]` frames the overrides leave in.
    fn push_tail(&self, out: &mut Vec<u8>, o: &Overrides, cfg: &FastSourceConfig) {
        if !o.no_finish.unwrap_or(false) {
            out.extend_from_slice(&self.fin);
        }
        if o.usage.unwrap_or(cfg.usage) {
            out.extend_from_slice(&frame(&format!(
                "{}[],\"usage\":{}}}",
                self.prefix, self.usage_json
            )));
        }
        if o.done.unwrap_or(cfg.done) {
            out.extend_from_slice(&frame("[DONE]"));
        }
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A running source. Dropping it stops the server and closes its connections.
#[derive(Debug)]
pub struct FastSource {
    addr: SocketAddr,
    prompts: Recorded,
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
        let thread = std::thread::Builder::new()
            .name("fastsource".into())
            .spawn(move || {
                rt.block_on(serve(listener, Arc::new(cfg), recorded, stop_rx));
                // Dropping the runtime here cancels every connection task.
            })?;
        Ok((
            addr,
            FastSource {
                addr,
                prompts,
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

async fn serve(
    listener: std::net::TcpListener,
    cfg: Arc<FastSourceConfig>,
    prompts: Recorded,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let counter = Arc::new(AtomicU64::new(0));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => {
                let Ok((sock, _)) = r else { continue };
                // Without NODELAY, Nagle would hold back small scheduled chunks.
                let _ = sock.set_nodelay(true);
                let cfg = cfg.clone();
                let counter = counter.clone();
                let prompts = prompts.clone();
                tokio::spawn(async move {
                    let _ = Conn::new(sock, cfg, counter, prompts).run().await;
                });
            }
        }
    }
}

struct Conn {
    sock: TcpStream,
    cfg: Arc<FastSourceConfig>,
    counter: Arc<AtomicU64>,
    prompts: Recorded,
    /// Unparsed input; may hold the start of the next request.
    inbuf: Vec<u8>,
    out: Vec<u8>,
    timer: Option<Timer>,
}

/// One parsed request head.
struct Head {
    method_post: bool,
    path: String,
    content_length: usize,
    close: bool,
    head_len: usize,
}

impl Conn {
    fn new(
        sock: TcpStream,
        cfg: Arc<FastSourceConfig>,
        counter: Arc<AtomicU64>,
        prompts: Recorded,
    ) -> Self {
        Conn {
            sock,
            cfg,
            counter,
            prompts,
            inbuf: Vec::with_capacity(8192),
            out: Vec::with_capacity(WRITE_BUF + 4096),
            timer: None,
        }
    }

    async fn run(mut self) -> io::Result<()> {
        loop {
            let Some(head) = self.read_head().await? else {
                return Ok(());
            };
            if head.content_length > MAX_BODY {
                self.simple(
                    413,
                    "application/json",
                    b"{\"error\":{\"message\":\"body too large\"}}",
                    true,
                )
                .await?;
                return Ok(());
            }
            let body_end = head.head_len + head.content_length;
            while self.inbuf.len() < body_end {
                if self.read_more().await? == 0 {
                    return Ok(());
                }
            }
            // The schedule starts once the whole request is in.
            let t0 = Instant::now();
            let body = self.inbuf[head.head_len..body_end].to_vec();
            self.inbuf.drain(..body_end);
            let keep = self.respond(&head, &body, t0).await?;
            if !keep || head.close {
                let _ = self.sock.shutdown().await;
                return Ok(());
            }
        }
    }

    async fn read_more(&mut self) -> io::Result<usize> {
        if self.inbuf.capacity() - self.inbuf.len() < 4096 {
            self.inbuf.reserve(8192);
        }
        self.sock.read_buf(&mut self.inbuf).await
    }

    /// Read until a complete request head is buffered; None on a clean close.
    async fn read_head(&mut self) -> io::Result<Option<Head>> {
        let mut scanned = 0;
        loop {
            if let Some(p) = find(&self.inbuf[scanned..], b"\r\n\r\n") {
                let head_len = scanned + p + 4;
                return Ok(parse_head(&self.inbuf[..head_len]).or_else(|| {
                    Some(Head {
                        method_post: false,
                        path: String::new(),
                        content_length: 0,
                        close: true,
                        head_len,
                    })
                }));
            }
            scanned = self.inbuf.len().saturating_sub(3);
            if self.inbuf.len() > MAX_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "request head too large",
                ));
            }
            if self.read_more().await? == 0 {
                return Ok(None);
            }
        }
    }

    /// Answer one request. Returns whether the connection may be reused.
    async fn respond(&mut self, head: &Head, body: &[u8], t0: Instant) -> io::Result<bool> {
        let chat = match self.route(head).await? {
            Route::Answered(reuse) => return Ok(reuse),
            Route::Chat => true,
            Route::Completions => false,
        };
        let req: RequestBody = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return self
                    .error_json(400, "invalid_request_error", format!("bad JSON: {e}"))
                    .await;
            }
        };
        let o = &req.fastsource;
        if let Some(status) = o.status.filter(|s| *s != 200) {
            let why = "fastsource: injected failure".to_string();
            return self.error_json(status, "server_error", why).await;
        }
        let cfg = self.cfg.clone();
        let (prompt_tokens, t0) = match (&cfg.counter, chat) {
            // Counting is the source's prefill: the schedule starts after it,
            // so a paced answer stays paced however long the prompt.
            (Some(counter), true) => match self.count(counter, body, req.stream).await {
                Ok(n) => (usize::try_from(n).unwrap_or(usize::MAX), Instant::now()),
                Err(e) => {
                    return self
                        .error_json(400, "invalid_request_error", format!("fastsource: {e:#}"))
                        .await;
                }
            },
            _ => (body.len() / 4, t0),
        };
        let seq = self.counter.fetch_add(1, Ordering::Relaxed);
        let answer = Answer::of(&self.cfg, &req, chat, seq, prompt_tokens);
        if !req.stream {
            let v = answer.whole(&self.cfg);
            self.simple(200, "application/json", v.to_string().as_bytes(), false)
                .await?;
            return Ok(true);
        }
        self.stream(&answer, o, t0).await
    }

    /// What a path answers: a chat or text completion, or (models, health,
    /// not found, a bad request) an answer already written.
    async fn route(&mut self, head: &Head) -> io::Result<Route> {
        match (head.method_post, head.path.as_str()) {
            (true, "/v1/chat/completions") => Ok(Route::Chat),
            (true, "/v1/completions") => Ok(Route::Completions),
            (false, "/v1/models") => {
                let m = serde_json::json!({
                    "object": "list",
                    "data": [{"id": self.cfg.model, "object": "model", "owned_by": "fastsource"}],
                });
                self.simple(200, "application/json", m.to_string().as_bytes(), false)
                    .await?;
                Ok(Route::Answered(true))
            }
            (false, "/health") => {
                self.simple(200, "application/json", b"{\"status\":\"ok\"}", false)
                    .await?;
                Ok(Route::Answered(true))
            }
            (_, "") => {
                self.simple(400, "text/plain", b"bad request", true).await?;
                Ok(Route::Answered(false))
            }
            _ => {
                let body = b"{\"error\":{\"message\":\"not found\"}}";
                self.simple(404, "application/json", body, false).await?;
                Ok(Route::Answered(true))
            }
        }
    }

    /// An error answer with a JSON body; the connection stays usable.
    async fn error_json(&mut self, status: u16, kind: &str, message: String) -> io::Result<bool> {
        let msg = serde_json::json!({"error": {"message": message, "type": kind, "code": status}});
        self.simple(
            status,
            "application/json",
            msg.to_string().as_bytes(),
            false,
        )
        .await?;
        Ok(true)
    }

    /// Stream `answer` on its schedule, with the faults `o` asks for.
    async fn stream(&mut self, answer: &Answer, o: &Overrides, t0: Instant) -> io::Result<bool> {
        let ms = |v: Option<f64>, d: Duration| {
            v.filter(|x| x.is_finite() && *x >= 0.0)
                .map_or(d, |x| Duration::from_secs_f64(x / 1000.0))
        };
        let ttft = ms(o.ttft_ms, self.cfg.ttft);
        let itl = ms(o.itl_ms, self.cfg.itl);
        let frames = Frames::of(&self.cfg, answer, o);
        let n = answer.tokens;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.extend_from_slice(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        if o.role_chunk.unwrap_or(self.cfg.role_chunk) && answer.chat {
            out.extend_from_slice(&frames.role);
        }
        let stall = o.stall_after.map(|k| k.min(n));
        let error_at = o.error_after.map(|k| k.min(n));
        let sent = stall.or(error_at).unwrap_or(n);
        let r = self
            .send_chunks(&mut out, &frames, sent, t0, ttft, itl)
            .await;
        if let Err(e) = r {
            self.out = out;
            return Err(e);
        }
        if stall.is_some() {
            self.sock.write_all(&out).await?;
            self.out = out;
            // Silent until the client gives up; then the connection is done.
            let mut scratch = [0u8; 1024];
            while self.sock.read(&mut scratch).await? != 0 {}
            return Ok(false);
        }
        if error_at.is_some() {
            out.extend_from_slice(&frame(
                "{\"error\":{\"message\":\"fastsource: injected error\",\"type\":\"server_error\",\"code\":500}}",
            ));
        } else {
            frames.push_tail(&mut out, o, &self.cfg);
        }
        out.extend_from_slice(b"0\r\n\r\n");
        let r = self.sock.write_all(&out).await;
        self.out = out;
        r?;
        Ok(true)
    }

    /// Counting mode: the prompt tokens of a chat body, counted on a
    /// blocking thread (a 120k-token prompt takes a while), recorded when
    /// asked.
    async fn count(
        &self,
        counter: &PromptCounter,
        body: &[u8],
        stream: bool,
    ) -> anyhow::Result<u64> {
        let chat: ChatBody = serde_json::from_slice(body).map_err(|e| {
            anyhow::anyhow!("counting mode reads messages with string content only: {e}")
        })?;
        let counter = counter.clone();
        let (n, messages) = tokio::task::spawn_blocking(move || {
            counter
                .count_chat(&chat.messages)
                .map(|n| (n, chat.messages))
        })
        .await??;
        if self.cfg.record_prompts {
            self.prompts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(RecordedPrompt {
                    stream,
                    messages,
                    prompt_tokens: n,
                });
        }
        Ok(n)
    }

    /// Append `count` copies of `content`, each no earlier than its scheduled
    /// time, writing whenever the next chunk is not due yet (or the buffer is big).
    /// With `stamp_at`, the digits there are set to the time of appending.
    #[allow(clippy::too_many_arguments)]
    async fn send_chunks(
        &mut self,
        out: &mut Vec<u8>,
        frames: &Frames,
        count: usize,
        t0: Instant,
        ttft: Duration,
        itl: Duration,
    ) -> io::Result<()> {
        let paced = !(ttft.is_zero() && itl.is_zero());
        let first = t0 + ttft;
        for i in 0..count {
            if paced {
                let due = first + itl * u32::try_from(i).unwrap_or(u32::MAX);
                if due > Instant::now() {
                    if !out.is_empty() {
                        self.sock.write_all(out).await?;
                        out.clear();
                    }
                    self.sleep_until(due).await?;
                }
            }
            let at = out.len();
            let (chunk, stamp_at) = frames.chunk(i);
            out.extend_from_slice(chunk);
            if let Some(p) = stamp_at {
                let digits = format!("{:0width$}", monotonic_ns(), width = STAMP_DIGITS);
                out[at + p..at + p + STAMP_DIGITS].copy_from_slice(digits.as_bytes());
            }
            // The last chunk goes out with the tail (finish, usage, [DONE]).
            if out.len() >= WRITE_BUF && i + 1 < count {
                self.sock.write_all(out).await?;
                out.clear();
            }
        }
        Ok(())
    }

    async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
        if self.timer.is_none() {
            self.timer = Some(Timer::new()?);
        }
        match &mut self.timer {
            Some(t) => t.sleep_until(due).await,
            None => Ok(()),
        }
    }

    async fn simple(
        &mut self,
        status: u16,
        ctype: &str,
        body: &[u8],
        close: bool,
    ) -> io::Result<()> {
        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            413 => "Payload Too Large",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            _ => "Status",
        };
        let conn = if close { "close" } else { "keep-alive" };
        let mut out = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        self.sock.write_all(&out).await
    }
}

/// `data: {payload}\n\n` as one HTTP chunk.
fn frame(payload: &str) -> Vec<u8> {
    let len = payload.len() + 8;
    let mut v = format!("{len:x}\r\ndata: ").into_bytes();
    v.extend_from_slice(payload.as_bytes());
    v.extend_from_slice(b"\n\n\r\n");
    v
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?;
    let target = first.next()?;
    let version = first.next()?;
    let mut content_length = 0;
    // HTTP/1.0 closes by default.
    let mut close = version == "HTTP/1.0";
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked request bodies are not needed by any client here.
            return None;
        }
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    Some(Head {
        method_post: method == "POST",
        path,
        content_length,
        close,
        head_len: head.len(),
    })
}

#[cfg(target_os = "linux")]
use linux_timer::Timer;

#[cfg(target_os = "linux")]
mod linux_timer {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Instant;

    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// A one-shot timerfd: wakes within microseconds of its deadline, where
    /// tokio's timer wheel rounds up to the next millisecond.
    pub struct Timer {
        fd: AsyncFd<OwnedFd>,
    }

    impl Timer {
        pub fn new() -> io::Result<Timer> {
            // SAFETY: plain syscall; the returned descriptor is checked and then owned.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: the OwnedFd stays open, unchanged, for as long as the AsyncFd owns it.
            let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
            Ok(Timer { fd })
        }

        pub async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
            let now = Instant::now();
            if due <= now {
                return Ok(());
            }
            // Relative arming: the gap between `now` and the syscall is well under a µs.
            let d = due - now;
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: d.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                    tv_nsec: d.subsec_nanos().into(),
                },
            };
            // SAFETY: valid descriptor and a pointer to a live itimerspec; old value not wanted.
            let rc = unsafe {
                libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            loop {
                let mut guard = self.fd.readable().await?;
                let r = guard.try_io(|fd| {
                    let mut expirations = 0u64;
                    // SAFETY: reads 8 bytes into a live u64, as timerfd requires.
                    let n = unsafe {
                        libc::read(
                            fd.as_raw_fd(),
                            (&mut expirations as *mut u64).cast(),
                            std::mem::size_of::<u64>(),
                        )
                    };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(())
                    }
                });
                match r {
                    Ok(result) => return result,
                    Err(_would_block) => continue,
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
struct Timer;

#[cfg(not(target_os = "linux"))]
impl Timer {
    fn new() -> io::Result<Timer> {
        Ok(Timer)
    }
    async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
        tokio::time::sleep_until(due.into()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

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
