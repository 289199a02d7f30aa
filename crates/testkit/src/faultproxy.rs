//! A loopback HTTP/1.1 proxy that injects faults into a real server's
//! responses, so tests can show that the checks catch what they claim to.
//!
//! Test support, not a general proxy: one request per connection (answered
//! with `connection: close`), request bodies by `content-length` only,
//! upstream over reqwest. Each request is shown to a caller-supplied plan
//! that picks its [`Fault`]; adding a fault means a variant and an arm in
//! `respond`.
//!
//! Faults (event counts are SSE events of the upstream stream, from 0):
//! - [`Fault::SwapContent`]: requests with this fault are paired in the order
//!   their upstream responses complete, and each gets the other's content
//!   deltas in its own SSE stream (ids, roles, finish reasons and usage stay
//!   its own) — request A's answer carries B's canary and vice versa, the way
//!   a serving engine that mixes up two sequences would look. A request left
//!   without a partner for `pair_timeout` is passed through unchanged.
//! - [`Fault::Delay`]: the request reaches the upstream this much later, as
//!   through a slow router; the stream then keeps its real timing.
//! - [`Fault::Status`]: an OpenAI-style JSON error with that status; the
//!   upstream is never asked (as when a router sheds load).
//! - [`Fault::ResetAfter`], [`Fault::StallAfter`]: after that many events the
//!   connection is reset (RST), or goes silent but stays open.
//! - [`Fault::MalformedEvent`], [`Fault::OversizedEvent`]: an extra event
//!   whose data is cut-off JSON, or is larger than any client should buffer
//!   (written in pieces, never held whole), then the rest of the stream.
//! - [`Fault::ErrorInStream`]: an `{"error": …}` chunk, then `[DONE]`, in a
//!   200 stream (what vLLM and SGLang send when generation fails midway).
//! - [`Fault::DuplicateDone`], [`Fault::MissingDone`]: `[DONE]` twice, or never
//!   (the connection closes after the final chunk).
//! - [`Fault::CapMaxTokens`], [`Fault::DropField`]: the request body changed
//!   on its way (`max_tokens` lowered, a field removed), the stream untouched.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// Largest request head accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest request or buffered response body accepted.
const MAX_BODY_BYTES: usize = 16 << 20;

/// What the proxy does to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Forward the request and stream the response back untouched.
    Pass,
    /// Exchange content deltas with another in-flight `SwapContent` response.
    SwapContent,
    /// Forward the request upstream after this long, then stream untouched.
    Delay(Duration),
    /// Answer with this HTTP status and a JSON error body, without asking upstream.
    Status(u16),
    /// Forward this many events, then reset the connection.
    ResetAfter(usize),
    /// Forward this many events, then send nothing more and keep the connection open.
    StallAfter(usize),
    /// After this many events, insert an event whose data is cut-off JSON.
    MalformedEvent(usize),
    /// After `after_events` events, insert one event with `bytes` bytes of data.
    OversizedEvent { after_events: usize, bytes: usize },
    /// After this many events, send an error object and `[DONE]`, and end the stream.
    ErrorInStream(usize),
    /// Send the `[DONE]` event twice.
    DuplicateDone,
    /// Drop the `[DONE]` event; the connection closes after the final chunk.
    MissingDone,
    /// Forward the request without this top-level body field, then stream
    /// untouched: a runtime that ignores what it was asked (a grammar
    /// backend that drops `response_format`).
    DropField(&'static str),
    /// Forward the request with `max_tokens` lowered to this, then stream
    /// untouched: a runtime that stops early, whatever length was asked for.
    CapMaxTokens(u64),
}

/// The data of the event [`Fault::MalformedEvent`] inserts: JSON cut off mid-string.
pub const MALFORMED_DATA: &str = r#"{"choices":[{"index":0,"delta":{"content":"trunc"#;
/// The message of the error object [`Fault::ErrorInStream`] inserts.
pub const STREAM_ERROR_MESSAGE: &str = "fault proxy: injected error inside a 200 stream";
/// Pause between the last forwarded event and a reset.
const RESET_GRACE: Duration = Duration::from_millis(200);
/// Longest a stalled response keeps its connection open.
const MAX_STALL: Duration = Duration::from_secs(600);

/// A request as the plan sees it.
#[derive(Debug, Clone, Copy)]
pub struct ProxiedRequest<'a> {
    /// Arrival order at the proxy, from 0.
    pub seq: usize,
    pub method: &'a str,
    /// Path and query, as sent (`/v1/chat/completions`).
    pub path: &'a str,
    /// The body, when it was JSON.
    pub body: Option<&'a Value>,
}

/// What happened to one request, recorded when its response is done.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyEvent {
    pub seq: usize,
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub fault: Fault,
    pub upstream_status: Option<u16>,
    /// `SwapContent`: the request whose content this one received.
    pub swapped_with: Option<usize>,
    /// Anything unusual (upstream error, no partner, not an event stream).
    pub note: Option<String>,
}

type Plan = dyn Fn(&ProxiedRequest<'_>) -> Fault + Send + Sync;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultProxyConfig {
    /// Server root, e.g. `http://127.0.0.1:8080`.
    pub upstream: String,
    /// How long a `SwapContent` response waits for a partner.
    pub pair_timeout: Duration,
}

impl FaultProxyConfig {
    pub fn new(upstream: impl Into<String>) -> Self {
        FaultProxyConfig {
            upstream: upstream.into(),
            pair_timeout: Duration::from_secs(10),
        }
    }
}

/// A running proxy on `127.0.0.1:<free port>`. Dropping it stops accepting
/// and aborts the connections in progress.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    plan: Box<Plan>,
    pair_timeout: Duration,
    next_seq: AtomicUsize,
    events: Mutex<Vec<ProxyEvent>>,
    waiting: Mutex<Option<Waiting>>,
}

/// A `SwapContent` response that is waiting for its partner.
struct Waiting {
    seq: usize,
    deltas: Vec<String>,
    reply: oneshot::Sender<(usize, Vec<String>)>,
}

impl FaultProxy {
    /// Start a proxy in front of `upstream`; `plan` picks each request's fault.
    /// Must be called inside a tokio runtime, which then runs the proxy.
    pub async fn start(
        cfg: FaultProxyConfig,
        plan: impl Fn(&ProxiedRequest<'_>) -> Fault + Send + Sync + 'static,
    ) -> Result<FaultProxy> {
        let upstream = cfg.upstream.trim_end_matches('/').to_string();
        reqwest::Url::parse(&upstream).with_context(|| format!("upstream {upstream:?}"))?;
        let http = reqwest::Client::builder()
            .no_proxy()
            // llama.cpp may close a kept-alive connection right after a stream;
            // a fresh connection per request keeps that out of the faults under test.
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .context("building the upstream HTTP client")?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the fault proxy to 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            http,
            plan: Box::new(plan),
            pair_timeout: cfg.pair_timeout,
            next_seq: AtomicUsize::new(0),
            events: Mutex::new(Vec::new()),
            waiting: Mutex::new(None),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(FaultProxy {
            addr,
            shared,
            accept,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, to use as a client's base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests handled so far, in order of completion.
    pub fn events(&self) -> Vec<ProxyEvent> {
        self.shared
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Owning the connection tasks here means aborting this task aborts them too.
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        let Ok((sock, _)) = listener.accept().await else {
            // Out of file descriptors and the like: back off rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = shared.clone();
        conns.spawn(async move {
            let _ = serve(sock, &shared).await;
        });
    }
}

/// A parsed request head and its body.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn serve(mut sock: TcpStream, shared: &Shared) -> Result<()> {
    let req = match read_request(&mut sock).await {
        Ok(r) => r,
        Err(e) => {
            write_simple(&mut sock, 400, &format!("{e:#}")).await?;
            return Ok(());
        }
    };
    let seq = shared.next_seq.fetch_add(1, Ordering::Relaxed);
    let body_json: Option<Value> = serde_json::from_slice(&req.body).ok();
    let fault = (shared.plan)(&ProxiedRequest {
        seq,
        method: &req.method,
        path: &req.path,
        body: body_json.as_ref(),
    });
    let mut event = ProxyEvent {
        seq,
        method: req.method.clone(),
        path: req.path.clone(),
        body: body_json,
        fault,
        upstream_status: None,
        swapped_with: None,
        note: None,
    };
    let result = respond(&mut sock, shared, req, &mut event).await;
    if let Err(e) = &result
        && event.note.is_none()
    {
        event.note = Some(format!("{e:#}"));
    }
    shared
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(event);
    match result {
        // Linger 0: closing sends RST instead of FIN.
        Ok(End::Reset) => {
            sock.set_zero_linger()?;
            drop(sock);
            Ok(())
        }
        Ok(End::Close) => {
            let _ = sock.shutdown().await;
            Ok(())
        }
        Err(e) => {
            let _ = sock.shutdown().await;
            Err(e)
        }
    }
}

/// The JSON body as `edit` leaves it (a fault named `fault` in errors).
fn rewrite_body(body: &[u8], fault: &str, edit: impl FnOnce(&mut Value)) -> Result<Vec<u8>> {
    let mut v: Value =
        serde_json::from_slice(body).with_context(|| format!("{fault}: body is not JSON"))?;
    edit(&mut v);
    Ok(serde_json::to_vec(&v)?)
}

/// How the proxy ends a connection.
enum End {
    Close,
    Reset,
}

/// Answer one request as its fault says: at once (`Status`), or through
/// the upstream, its request or response changed on the way.
async fn respond(
    sock: &mut TcpStream,
    shared: &Shared,
    req: Request,
    event: &mut ProxyEvent,
) -> Result<End> {
    if let Fault::Status(code) = event.fault {
        write_error_status(sock, code).await?;
        return Ok(End::Close);
    }
    if let Fault::Delay(d) = event.fault {
        // Before the upstream sees the request, as a slow network or router
        // would: the stream itself keeps its real timing.
        tokio::time::sleep(d).await;
    }
    let req = edit_request(req, event.fault)?;
    let Some(mut resp) = ask_upstream(sock, shared, req, event).await? else {
        return Ok(End::Close);
    };
    event.upstream_status = Some(resp.status().as_u16());
    let head = response_head(&resp);

    let end = match event.fault {
        // Status was answered above; Delay waited before the upstream call.
        Fault::Pass
        | Fault::Status(_)
        | Fault::Delay(_)
        | Fault::CapMaxTokens(_)
        | Fault::DropField(_) => {
            sock.write_all(head.as_bytes()).await?;
            while let Some(chunk) = resp.chunk().await? {
                sock.write_all(&chunk).await?;
            }
            End::Close
        }
        Fault::SwapContent => swap_content(sock, shared, &mut resp, &head, event).await?,
        // The rest act between the upstream stream's events.
        fault => {
            sock.write_all(head.as_bytes()).await?;
            forward_events(sock, &mut resp, fault, event).await?
        }
    };
    sock.flush().await?;
    Ok(end)
}

/// The request as the faults that change it on its way leave it
/// (`CapMaxTokens`, `DropField`); any other fault leaves it as sent.
fn edit_request(mut req: Request, fault: Fault) -> Result<Request> {
    match fault {
        Fault::CapMaxTokens(n) => {
            req.body = rewrite_body(&req.body, "CapMaxTokens", |v| {
                let asked = v
                    .get("max_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(u64::MAX);
                v["max_tokens"] = Value::from(asked.min(n));
            })?;
        }
        Fault::DropField(field) => {
            req.body = rewrite_body(&req.body, "DropField", |v| {
                if let Some(o) = v.as_object_mut() {
                    o.remove(field);
                }
            })?;
        }
        _ => {}
    }
    Ok(req)
}

/// Send `req` upstream (its method, path, body, and the headers that
/// matter). When the upstream cannot be reached the client gets a 502 and
/// there is no response.
async fn ask_upstream(
    sock: &mut TcpStream,
    shared: &Shared,
    req: Request,
    event: &mut ProxyEvent,
) -> Result<Option<reqwest::Response>> {
    let method = reqwest::Method::from_bytes(req.method.as_bytes())
        .with_context(|| format!("method {:?}", req.method))?;
    let mut up = shared
        .http
        .request(method, format!("{}{}", shared.upstream, req.path));
    for (k, v) in &req.headers {
        if matches!(k.as_str(), "content-type" | "accept" | "authorization") {
            up = up.header(k.as_str(), v.as_str());
        }
    }
    match up.body(req.body).send().await {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            event.note = Some(format!("upstream: {e}"));
            write_simple(sock, 502, &format!("fault proxy: upstream: {e}")).await?;
            Ok(None)
        }
    }
}

/// `SwapContent`: the whole upstream answer, its content deltas exchanged
/// with a partner's; passed through, and said why, when it has none or
/// finds no partner in time.
async fn swap_content(
    sock: &mut TcpStream,
    shared: &Shared,
    resp: &mut reqwest::Response,
    head: &str,
    event: &mut ProxyEvent,
) -> Result<End> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            bail!("upstream body larger than {MAX_BODY_BYTES} bytes");
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let mine = content_deltas(&text);
    let out = if mine.is_empty() {
        event.note = Some("no content deltas (not an event stream?): passed through".into());
        text
    } else {
        match shared.pair(event.seq, mine).await {
            Some((partner, theirs)) => {
                event.swapped_with = Some(partner);
                replace_content(&text, &theirs)
            }
            None => {
                event.note = Some(format!(
                    "no partner within {:?}: passed through",
                    shared.pair_timeout
                ));
                text
            }
        }
    };
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(out.as_bytes()).await?;
    Ok(End::Close)
}

/// Forward the upstream stream one SSE event at a time, applying `fault`.
async fn forward_events(
    sock: &mut TcpStream,
    resp: &mut reqwest::Response,
    fault: Fault,
    event: &mut ProxyEvent,
) -> Result<End> {
    let mut splitter = EventSplitter::default();
    let mut sent = 0usize;
    let mut applied = false;
    loop {
        let chunk = resp.chunk().await?;
        let events = match &chunk {
            Some(c) => splitter.push(c),
            None => splitter.finish(),
        };
        for ev in events {
            // Faults that act before event number `sent` is forwarded.
            if !applied {
                match fault {
                    Fault::ResetAfter(n) if sent == n => {
                        event.note = Some(format!("reset after {n} events"));
                        // An RST makes the peer's kernel drop bytes it has not
                        // read yet; give the client time to read what was sent,
                        // so the test sees a reset *mid*-stream.
                        sock.flush().await?;
                        tokio::time::sleep(RESET_GRACE).await;
                        return Ok(End::Reset);
                    }
                    Fault::StallAfter(n) if sent == n => {
                        event.note = Some(format!("stalled after {n} events"));
                        sock.flush().await?;
                        stall(sock).await;
                        return Ok(End::Close);
                    }
                    Fault::MalformedEvent(n) if sent == n => {
                        applied = true;
                        sock.write_all(format!("data: {MALFORMED_DATA}\n\n").as_bytes())
                            .await?;
                    }
                    Fault::OversizedEvent {
                        after_events: n,
                        bytes,
                    } if sent == n => {
                        applied = true;
                        write_oversized(sock, bytes).await?;
                    }
                    Fault::ErrorInStream(n) if sent == n => {
                        let err = serde_json::json!({"error": {
                            "message": STREAM_ERROR_MESSAGE,
                            "type": "server_error",
                            "code": 500,
                        }});
                        sock.write_all(format!("data: {err}\n\ndata: [DONE]\n\n").as_bytes())
                            .await?;
                        event.note = Some(format!("error object after {n} events"));
                        return Ok(End::Close);
                    }
                    _ => {}
                }
            }
            let done = is_done_event(&ev);
            match fault {
                Fault::MissingDone if done => {
                    applied = true;
                    continue;
                }
                Fault::DuplicateDone if done => {
                    applied = true;
                    sock.write_all(&ev).await?;
                }
                _ => {}
            }
            sock.write_all(&ev).await?;
            sent += 1;
        }
        if chunk.is_none() {
            break;
        }
    }
    if !applied {
        event.note = Some(format!(
            "stream ended after {sent} events, before the fault"
        ));
    }
    Ok(End::Close)
}

/// Keep a connection open and silent until the client gives up (or `MAX_STALL`).
async fn stall(sock: &mut TcpStream) {
    let mut buf = [0u8; 256];
    let _ = tokio::time::timeout(MAX_STALL, async {
        // Returns when the client closes (0) or errors.
        while let Ok(n) = sock.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// One event of `bytes` bytes of data, written in pieces so the proxy never
/// holds it whole. The client is expected to give up partway: a write error
/// then ends this request, as it should.
async fn write_oversized(sock: &mut TcpStream, bytes: usize) -> Result<()> {
    const PIECE: usize = 64 * 1024;
    let fill = vec![b'a'; PIECE];
    sock.write_all(b"data: {\"pad\":\"").await?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(PIECE);
        sock.write_all(&fill[..n]).await?;
        left -= n;
    }
    sock.write_all(b"\"}\n\n").await?;
    Ok(())
}

/// Is this (complete) event `data: [DONE]`?
fn is_done_event(ev: &[u8]) -> bool {
    std::str::from_utf8(ev).is_ok_and(|t| {
        t.lines()
            .filter_map(data_payload)
            .any(|p| p.trim() == "[DONE]")
    })
}

/// Splits a byte stream into SSE event blocks, each with its terminating
/// blank line (LF or CRLF), for fault injection between events.
#[derive(Default)]
struct EventSplitter {
    buf: Vec<u8>,
}

impl EventSplitter {
    fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = event_end(&self.buf) {
            let rest = self.buf.split_off(end);
            out.push(std::mem::replace(&mut self.buf, rest));
        }
        out
    }

    /// What is left when the stream ends: a last event without its blank line.
    fn finish(&mut self) -> Vec<Vec<u8>> {
        let rest = std::mem::take(&mut self.buf);
        if rest.iter().all(u8::is_ascii_whitespace) {
            Vec::new()
        } else {
            vec![rest]
        }
    }
}

/// End (exclusive) of the first complete event block in `buf`.
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = find(buf, b"\n\n").map(|p| p + 2);
    let crlf = find(buf, b"\r\n\r\n").map(|p| p + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Shared {
    /// Pair with another waiting `SwapContent` response: hand over our deltas
    /// and get theirs, or wait up to `pair_timeout` for one to arrive.
    async fn pair(&self, seq: usize, deltas: Vec<String>) -> Option<(usize, Vec<String>)> {
        let rx = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let mut deltas = deltas;
            if let Some(other) = waiting.take() {
                match other.reply.send((seq, deltas)) {
                    Ok(()) => return Some((other.seq, other.deltas)),
                    // It gave up just now: wait in its place.
                    Err((_, d)) => deltas = d,
                }
            }
            let (reply, rx) = oneshot::channel();
            *waiting = Some(Waiting { seq, deltas, reply });
            rx
        };
        match tokio::time::timeout(self.pair_timeout, rx).await {
            Ok(Ok(partner)) => Some(partner),
            _ => {
                let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
                if waiting.as_ref().is_some_and(|w| w.seq == seq) {
                    *waiting = None;
                }
                None
            }
        }
    }
}

/// Read one request head and its `content-length` body.
async fn read_request(sock: &mut TcpStream) -> Result<Request> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_HEAD_BYTES {
            bail!("request head larger than {MAX_HEAD_BYTES} bytes");
        }
        let mut chunk = [0u8; 4096];
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            bail!("connection closed before the request head ended");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).context("request head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(path)) = (first.next(), first.next()) else {
        bail!("malformed request line");
    };
    let (method, path) = (method.to_string(), path.to_string());
    let mut headers = Vec::new();
    let mut length = 0usize;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            bail!("malformed header line {line:?}");
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
        if k == "content-length" {
            length = v.parse().with_context(|| format!("content-length {v:?}"))?;
        }
        if k == "transfer-encoding" {
            bail!("chunked request bodies are not supported");
        }
        headers.push((k, v));
    }
    if length > MAX_BODY_BYTES {
        bail!("request body larger than {MAX_BODY_BYTES} bytes");
    }
    let mut body = buf.split_off(head_end + 4);
    if body.len() < length {
        let start = body.len();
        body.resize(length, 0);
        sock.read_exact(&mut body[start..]).await?;
    }
    body.truncate(length);
    Ok(Request {
        method,
        path,
        headers,
        body,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Status line and end-to-end headers of an upstream response; the body that
/// follows is close-delimited.
fn response_head(resp: &reqwest::Response) -> String {
    let status = resp.status();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for (k, v) in resp.headers() {
        let hop_by_hop = matches!(
            k.as_str(),
            "connection"
                | "keep-alive"
                | "transfer-encoding"
                | "content-length"
                | "te"
                | "trailer"
                | "upgrade"
                | "proxy-authenticate"
        );
        if let (false, Ok(v)) = (hop_by_hop, v.to_str()) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str("connection: close\r\n\r\n");
    head
}

async fn write_simple(sock: &mut TcpStream, status: u16, text: &str) -> Result<()> {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let msg = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    sock.write_all(msg.as_bytes()).await?;
    Ok(())
}

/// An OpenAI-style JSON error with `status` (and `retry-after` on 429).
async fn write_error_status(sock: &mut TcpStream, status: u16) -> Result<()> {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let body = serde_json::json!({"error": {
        "message": format!("fault proxy: injected HTTP {status}"),
        "type": if status == 429 { "rate_limit_exceeded" } else { "server_error" },
        "code": status,
    }})
    .to_string();
    let retry = if status == 429 {
        "retry-after: 1\r\n"
    } else {
        ""
    };
    let msg = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{retry}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(msg.as_bytes()).await?;
    Ok(())
}

/// `choices[0].delta.content` of a chunk, if it is a string.
fn delta_content(v: &Value) -> Option<&str> {
    v.get("choices")?
        .get(0)?
        .get("delta")?
        .get("content")?
        .as_str()
}

/// The payload of a `data:` line (`data:` with or without a space).
fn data_payload(line: &str) -> Option<&str> {
    let p = line.strip_prefix("data:")?;
    Some(p.strip_prefix(' ').unwrap_or(p))
}

/// The content deltas of a chat SSE body, in order.
pub fn content_deltas(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(data_payload)
        .filter_map(|p| serde_json::from_str::<Value>(p).ok())
        .filter_map(|v| delta_content(&v).map(str::to_string))
        .collect()
}

/// `body` with its k-th content delta replaced by `replacement[k]`: missing
/// ones become empty, surplus ones are appended to the last content delta, so
/// the stream's whole content becomes `replacement.concat()`. Everything else
/// (other fields, other events, line endings) is kept.
pub fn replace_content(body: &str, replacement: &[String]) -> String {
    let total = content_deltas(body).len();
    let mut k = 0;
    let mut out = String::with_capacity(body.len());
    for line in body.split_inclusive('\n') {
        let (text, ending) = match line.strip_suffix("\r\n") {
            Some(t) => (t, "\r\n"),
            None => match line.strip_suffix('\n') {
                Some(t) => (t, "\n"),
                None => (line, ""),
            },
        };
        let parsed = data_payload(text).and_then(|p| serde_json::from_str::<Value>(p).ok());
        let rewritten = parsed.and_then(|mut v| {
            delta_content(&v)?;
            let mut new = replacement.get(k).cloned().unwrap_or_default();
            if k + 1 == total && replacement.len() > total {
                new.extend(replacement[total..].iter().map(String::as_str));
            }
            k += 1;
            v["choices"][0]["delta"]["content"] = Value::from(new);
            Some(format!("data: {v}"))
        });
        out.push_str(rewritten.as_deref().unwrap_or(text));
        out.push_str(ending);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(content: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
        )
    }

    const TAIL: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";

    fn stream(parts: &[&str]) -> String {
        let role = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n";
        let mut s = String::from(role);
        for p in parts {
            s.push_str(&chunk(p));
        }
        s.push_str(TAIL);
        s
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_content_deltas_only() {
        let s = stream(&["A1", " cedar", " cedar"]);
        assert_eq!(content_deltas(&s), strings(&["A1", " cedar", " cedar"]));
        assert!(content_deltas("data: [DONE]\n\n: keep-alive\n\n").is_empty());
        assert_eq!(
            content_deltas("data:{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\n"),
            ["x"]
        );
    }

    #[test]
    fn swapping_exchanges_the_whole_content_and_keeps_the_rest() {
        let a = stream(&["A1", " cedar", " cedar"]);
        let b = stream(&["B2", " cedar"]);
        let a2 = replace_content(&a, &content_deltas(&b));
        let b2 = replace_content(&b, &content_deltas(&a));
        assert_eq!(content_deltas(&a2).concat(), "B2 cedar");
        assert_eq!(content_deltas(&b2).concat(), "A1 cedar cedar");
        assert!(a2.ends_with(TAIL) && b2.ends_with(TAIL));
        assert_eq!(a2.matches("\n\n").count(), a.matches("\n\n").count());
        assert!(a2.contains("\"id\":\"c1\""));
    }

    #[test]
    fn crlf_line_endings_survive_a_rewrite() {
        let a = stream(&["A1", " x"]).replace('\n', "\r\n");
        let out = replace_content(&a, &strings(&["B2"]));
        assert_eq!(content_deltas(&out).concat(), "B2");
        assert_eq!(out.matches("\r\n").count(), a.matches("\r\n").count());
    }

    #[test]
    fn splitter_yields_whole_events_at_any_split() {
        let s = stream(&["A1", " x"]).replace("data: [DONE]\n\n", "data: [DONE]\r\n\r\n");
        let whole = EventSplitter::default().push(s.as_bytes());
        assert_eq!(whole.concat(), s.as_bytes());
        assert_eq!(whole.len(), 6);
        assert!(is_done_event(whole.last().unwrap()));
        assert!(!whole[..5].iter().any(|e| is_done_event(e)));
        for cut in 0..s.len() {
            let mut sp = EventSplitter::default();
            let mut got = sp.push(&s.as_bytes()[..cut]);
            got.extend(sp.push(&s.as_bytes()[cut..]));
            got.extend(sp.finish());
            assert_eq!(got, whole, "cut at {cut}");
        }
        // An unterminated last event still comes out at the end.
        let mut sp = EventSplitter::default();
        assert!(sp.push(b"data: [DONE]").is_empty());
        assert_eq!(sp.finish(), vec![b"data: [DONE]".to_vec()]);
    }

    #[tokio::test]
    async fn reads_a_request_with_its_body() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}")
                .await
                .unwrap();
            s
        });
        let (mut sock, _) = listener.accept().await.unwrap();
        let req = read_request(&mut sock).await.unwrap();
        assert_eq!(
            (req.method.as_str(), req.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        assert_eq!(req.body, b"{\"a\":1}");
        assert!(
            req.headers
                .contains(&("content-type".into(), "application/json".into()))
        );
        drop(client.await.unwrap());
    }
}
