//! Reading a response under the timeouts, from either transport: the
//! [`Body`] both deliver, the reader that re-arms the first-byte and idle
//! timers lazily, and the error-snippet and drain helpers.

use std::time::{Duration, Instant};

use futures_util::FutureExt as _;

use super::config::{DRAIN_GRACE, FOREVER, MAX_EVENT_BYTES, SNIPPET_BYTES, Timeouts};
use super::sink::{Asked, Limit, Sink, State, bounded, bounded_bytes};
use super::wire;
use crate::measure::record::{Failure, Outcome, StreamCapture};
use crate::measure::sse::SseParser;

/// A response body as either transport delivers it.
pub(super) trait Body {
    /// Move to the next piece of the body and say when it was read; Ok(None) at the end.
    async fn advance(&mut self) -> Result<Option<Instant>, String>;
    /// The piece the last `advance` moved to.
    fn piece(&self) -> &[u8];
}

impl Body for wire::Response {
    async fn advance(&mut self) -> Result<Option<Instant>, String> {
        wire::Response::advance(self).await
    }
    fn piece(&self) -> &[u8] {
        wire::Response::piece(self)
    }
}

pub(super) struct ReqwestBody {
    pub(super) resp: reqwest::Response,
    pub(super) last: bytes::Bytes,
}

impl Body for ReqwestBody {
    async fn advance(&mut self) -> Result<Option<Instant>, String> {
        match self.resp.chunk().await {
            Ok(Some(b)) => {
                let now = Instant::now();
                self.last = b;
                Ok(Some(now))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(format!("reading response body: {}", chain(&e))),
        }
    }
    fn piece(&self) -> &[u8] {
        &self.last
    }
}

/// Read a response (head already in) into the capture. Returns whether the
/// body was read to its end, so that its connection may be reused.
pub(super) async fn read_response<B: Body>(
    reader: &mut Reader<'_>,
    status: u16,
    content_type: Option<&[u8]>,
    body: &mut B,
    asked: Asked,
    cap_bytes: usize,
    cap: &mut StreamCapture,
) -> bool {
    if !(200..300).contains(&status) {
        let (snippet, complete) = reader.snippet(body).await;
        let status = reqwest::StatusCode::from_u16(status)
            .map_or_else(|_| status.to_string(), |s| s.to_string());
        fail(cap, Outcome::HttpError, format!("HTTP {status}: {snippet}"));
        return complete;
    }
    // A missing content type is tolerated; a different one means the server is not streaming.
    let non_sse = content_type.and_then(|v| {
        let sse = v
            .get(..17)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"text/event-stream"));
        (!sse).then(|| String::from_utf8_lossy(v).into_owned())
    });
    if let Some(ct) = non_sse {
        let (snippet, complete) = reader.snippet(body).await;
        fail(
            cap,
            Outcome::StreamValidationFailed,
            format!(
                "content type {ct:?} is not text/event-stream (was `stream: true` sent?): {snippet}"
            ),
        );
        return complete;
    }

    let t_send = reader.t_send;
    let mut parser = SseParser::new(MAX_EVENT_BYTES);
    let mut sink = Sink::new(cap, asked.endpoint, cap_bytes);
    sink.limit_output(asked.max_tokens);
    loop {
        let at = match reader.next(body).await {
            Ok(Some(at)) => at,
            Ok(None) => break,
            Err(msg) => {
                sink.cap.failure = Some(Failure {
                    class: Outcome::RequestError,
                    message: msg,
                });
                return false;
            }
        };
        let at_ms = ms_since(t_send, at);
        parser.feed(body.piece(), |ev| sink.on_event(ev, at_ms));
        match sink.state {
            State::Streaming => {}
            State::Failed => return false,
            State::Done => {
                let complete = reader.drain(body).await;
                sink.finish_after_done();
                return complete;
            }
        }
    }
    // The body ended without [DONE]. A final event with no closing blank line still counts.
    let closed_ms = ms_since(t_send, Instant::now());
    if let Some(ev) = parser.finish() {
        sink.on_event(Ok(ev), closed_ms);
    }
    match sink.state {
        State::Failed => {}
        State::Done => sink.finish_after_done(),
        State::Streaming => sink.finish_at_close(closed_ms),
    }
    true
}

/// `t + d`, with "too long" meaning "practically never" rather than an overflow panic.
pub(super) fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d.min(FOREVER))
        .or_else(|| t.checked_add(Duration::from_secs(24 * 3600)))
        .unwrap_or(t)
}

pub(super) fn ms_since(t0: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(t0).as_secs_f64() * 1000.0
}

pub(super) fn fail(cap: &mut StreamCapture, class: Outcome, message: String) {
    cap.failure = Some(Failure { class, message });
}

/// An error and its sources, bounded (reqwest's top-level message alone is vague).
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let m = inner.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = inner.source();
    }
    bounded(&s, SNIPPET_BYTES)
}

/// Reads the body with the three body timeouts. The idle timer is re-armed
/// lazily: a read only records its time, and the timer, when it fires,
/// checks whether the real deadline has moved (later) and sleeps again.
pub(super) struct Reader<'t> {
    pub(super) timer: std::pin::Pin<&'t mut tokio::time::Sleep>,
    pub(super) t_send: Instant,
    pub(super) total_at: Instant,
    pub(super) first_byte_at: Instant,
    pub(super) idle: Duration,
    pub(super) last_read: Option<Instant>,
    pub(super) timeouts: Timeouts,
}

impl<'t> Reader<'t> {
    pub(super) fn new(
        timer: std::pin::Pin<&'t mut tokio::time::Sleep>,
        t_send: Instant,
        total_at: Instant,
        first_byte_at: Instant,
        t: &Timeouts,
    ) -> Self {
        Reader {
            timer,
            t_send,
            total_at,
            first_byte_at,
            idle: t.idle.min(FOREVER),
            last_read: None,
            timeouts: t.clone(),
        }
    }

    /// The deadline now in force, and which limit it is.
    pub(super) fn deadline(&self) -> (Instant, Limit) {
        let (at, which) = match self.last_read {
            None => (self.first_byte_at, Limit::FirstByte),
            Some(last) => (after(last, self.idle), Limit::Idle),
        };
        if self.total_at <= at {
            (self.total_at, Limit::Total)
        } else {
            (at, which)
        }
    }

    pub(super) fn timeout_message(&self, which: Limit) -> String {
        let t = &self.timeouts;
        match which {
            Limit::FirstByte => {
                format!("first-byte timeout: no body byte within {:?}", t.first_byte)
            }
            Limit::Idle => format!("idle timeout: no data for {:?}", t.idle),
            Limit::Total => format!(
                "total timeout: stream exceeded {:?} ({:.0} ms)",
                t.total,
                ms_since(self.t_send, Instant::now())
            ),
        }
    }

    /// Move `body` to its next piece and return when it arrived; Ok(None) at end of body.
    pub(super) async fn next<B: Body>(&mut self, body: &mut B) -> Result<Option<Instant>, String> {
        loop {
            let r = tokio::select! {
                biased;
                r = body.advance() => r,
                () = self.timer.as_mut() => {
                    let (at, which) = self.deadline();
                    if Instant::now() >= at {
                        return Err(self.timeout_message(which));
                    }
                    self.timer.as_mut().reset(at.into());
                    continue;
                }
            };
            return match r {
                Ok(Some(now)) => {
                    // While data flows the timer branch may never be polled, so check here (no syscall).
                    if now >= self.total_at {
                        return Err(self.timeout_message(Limit::Total));
                    }
                    if self.last_read.is_none() {
                        // The idle deadline may come before the armed first-byte one: re-arm
                        // once. From here on deadlines only move later, so lazy re-arming holds.
                        self.last_read = Some(now);
                        let (at, _) = self.deadline();
                        self.timer.as_mut().reset(at.into());
                    }
                    self.last_read = Some(now);
                    Ok(Some(now))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
        }
    }

    /// Up to SNIPPET_BYTES of the body, for an error message; stops at any
    /// trouble. Also says whether the body was read to its end.
    pub(super) async fn snippet<B: Body>(&mut self, body: &mut B) -> (String, bool) {
        let mut buf = Vec::new();
        let mut complete = false;
        while buf.len() < SNIPPET_BYTES {
            match self.next(body).await {
                Ok(Some(_)) => {
                    let b = body.piece();
                    buf.extend_from_slice(&b[..b.len().min(SNIPPET_BYTES + 4)]);
                }
                Ok(None) => {
                    complete = true;
                    break;
                }
                Err(e) => {
                    if buf.is_empty() {
                        return (format!("(body unreadable: {e})"), false);
                    }
                    break;
                }
            }
        }
        if !complete && self.drained_now(body) {
            complete = true;
        }
        (bounded_bytes(&buf, SNIPPET_BYTES), complete)
    }

    /// Whether the body ends within what is already received, read without waiting.
    pub(super) fn drained_now<B: Body>(&mut self, body: &mut B) -> bool {
        loop {
            match body.advance().now_or_never() {
                Some(Ok(Some(_))) => {}
                Some(Ok(None)) => return true,
                Some(Err(_)) | None => return false,
            }
        }
    }

    /// Read to the end of the body after `[DONE]`, briefly, so that the
    /// connection can be reused instead of closed. Returns whether it ended.
    pub(super) async fn drain<B: Body>(&mut self, body: &mut B) -> bool {
        // Usually the end is already buffered: no timer needed then.
        if self.drained_now(body) {
            return true;
        }
        let until = after(Instant::now(), DRAIN_GRACE).min(self.total_at);
        tokio::time::timeout_at(until.into(), async {
            loop {
                match body.advance().await {
                    Ok(Some(_)) => {}
                    Ok(None) => return true,
                    Err(_) => return false,
                }
            }
        })
        .await
        .unwrap_or(false)
    }
}
