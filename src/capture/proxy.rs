//! One request through the proxy: a recorded endpoint's body read whole
//! (bounded), forwarded unchanged, and its answer forwarded chunk by chunk
//! as it arrives while a tap reads what it says; anything else streamed
//! through untouched and counted.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyDataStream, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap};
use hyper::{Request, Response, StatusCode};

use super::State;
use super::first_byte::Conn;
use super::shape::{self, Endpoint};
use super::trace::Observed;
use crate::measure::client::reported;
use crate::measure::sse::SseParser;

pub type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// A non-streamed answer is kept this far for reading its usage; past it
/// the answer is still forwarded whole, its lengths estimated.
pub const MAX_KEPT_ANSWER_BYTES: usize = 16 << 20;

/// Headers that belong to one connection, not to the message (RFC 9110 §7.6.1).
const HOP_BY_HOP: [header::HeaderName; 8] = [
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HOST,
];

fn end_to_end(h: &HeaderMap) -> HeaderMap {
    let mut out = h.clone();
    // Headers the `Connection` header names are hop-by-hop too.
    let named: Vec<String> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for n in HOP_BY_HOP.iter() {
        out.remove(n);
    }
    out.remove("keep-alive");
    for n in named {
        out.remove(n.as_str());
    }
    out
}

fn plain(status: StatusCode, why: &'static str) -> Response<ProxyBody> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(why.as_bytes()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// The upstream's answer as the client's, its body through `tap` if any.
fn answer(up: reqwest::Response, tap: Option<Pending>) -> Response<ProxyBody> {
    let status = up.status();
    let headers = end_to_end(up.headers());
    let length = up.content_length();
    let stream = up.bytes_stream().map_err(std::io::Error::other);
    let body = match tap {
        Some(p) => {
            let sse = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            StreamBody::new(Tap::new(Box::pin(stream), p, sse, length)).boxed_unsync()
        }
        None => StreamBody::new(stream.map_ok(Frame::data)).boxed_unsync(),
    };
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

fn target(state: &State, req: &Request<Incoming>) -> String {
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    format!("{}{pq}", state.upstream.trim_end_matches('/'))
}

/// One request; `conn` times its answer's first write to the client.
pub async fn handle(
    state: Arc<State>,
    conn: Arc<Conn>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let endpoint = Endpoint::of(req.method() == hyper::Method::POST, req.uri().path());
    let id = endpoint.and_then(|_| state.admit());
    Ok(match (endpoint, id) {
        (Some(e), Some(id)) => record(state, conn, req, e, id).await,
        (e, _) => {
            let c = if e.is_some() {
                &state.counts.over_bound
            } else {
                &state.counts.passthrough
            };
            c.fetch_add(1, Ordering::Relaxed);
            pass(state, req).await
        }
    })
}

/// Not recorded: the body streamed both ways as it comes.
async fn pass(state: Arc<State>, req: Request<Incoming>) -> Response<ProxyBody> {
    let url = target(&state, &req);
    let (parts, body) = req.into_parts();
    let body = reqwest::Body::wrap_stream(BodyDataStream::new(body));
    let sent = state
        .client
        .request(parts.method, url)
        .headers(end_to_end(&parts.headers))
        .body(body)
        .send()
        .await;
    match sent {
        Ok(up) => answer(up, None),
        Err(_) => plain(
            StatusCode::BAD_GATEWAY,
            "capture: the upstream did not answer\n",
        ),
    }
}

async fn record(
    state: Arc<State>,
    conn: Arc<Conn>,
    req: Request<Incoming>,
    endpoint: Endpoint,
    id: u64,
) -> Response<ProxyBody> {
    let mut pending = Pending {
        obs: Some(Observed {
            id,
            timestamp_ms: state.start.elapsed().as_millis() as u64,
            endpoint: Some(endpoint),
            // Until the answer ends: a guard dropped before then is a client gone.
            error: Some("client_gone"),
            ..Observed::default()
        }),
        state: state.clone(),
    };
    state
        .counts
        .endpoint(endpoint)
        .fetch_add(1, Ordering::Relaxed);
    let url = target(&state, &req);
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, state.max_body_bytes).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            state.counts.too_large.fetch_add(1, Ordering::Relaxed);
            pending.finish(Some(413), Some("body_too_large"));
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "capture: the request body is over the capture's limit\n",
            );
        }
        Err(_) => {
            pending.finish(None, Some("client_gone"));
            return plain(
                StatusCode::BAD_REQUEST,
                "capture: the request body broke off\n",
            );
        }
    };
    if let Some(o) = pending.obs.as_mut() {
        let (s, p) = shape::read(endpoint, &bytes);
        o.shape = s;
        o.prompt = Some(p);
        if state.keep_text {
            o.body = Some(bytes.to_vec());
        }
    }
    let mut headers = end_to_end(&parts.headers);
    headers.remove(header::CONTENT_LENGTH);
    let send = || {
        state
            .client
            .request(parts.method.clone(), url.clone())
            .headers(headers.clone())
            .body(bytes.clone())
            .send()
    };
    let mut sent = send().await;
    // The body is in hand, so a request the upstream never read (its pooled
    // connection closed under it) is sent once more, as the measuring
    // client does; counted in the summary.
    if sent.as_ref().is_err_and(closed_before_answer) {
        state
            .counts
            .upstream_retries
            .fetch_add(1, Ordering::Relaxed);
        sent = send().await;
    }
    match sent {
        Ok(up) => {
            if let Some(o) = pending.obs.as_mut() {
                o.status = Some(up.status().as_u16());
                o.first_byte = Some(conn.arm());
            }
            answer(up, Some(pending))
        }
        Err(_) => {
            state
                .counts
                .upstream_unreachable
                .fetch_add(1, Ordering::Relaxed);
            pending.finish(Some(502), Some("upstream_unreachable"));
            plain(
                StatusCode::BAD_GATEWAY,
                "capture: the upstream did not answer\n",
            )
        }
    }
}

/// A recorded request's line, handed to the writer once, however its
/// exchange ends (dropped with it when the client goes).
struct Pending {
    obs: Option<Observed>,
    state: Arc<State>,
}

impl Pending {
    fn finish(&mut self, status: Option<u16>, error: Option<&'static str>) {
        if let Some(mut o) = self.obs.take() {
            o.status = status.or(o.status);
            o.error = error;
            self.state.queue.push(o);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(o) = self.obs.take() {
            self.state.queue.push(o);
        }
    }
}

/// The answer's body, forwarded chunk by chunk; each chunk read as it
/// passes (SSE events through `measure::sse`, a whole answer kept up to
/// [`MAX_KEPT_ANSWER_BYTES`]). Dropping it (the client went) drops the
/// upstream's body, which ends the upstream request.
struct Tap {
    inner: Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>,
    pending: Pending,
    sse: Option<SseParser>,
    whole: Option<Vec<u8>>,
    /// The answer's `Content-Length`: once that much has passed the answer
    /// is complete (hyper stops polling a body at its length).
    left: Option<u64>,
}

impl Tap {
    fn new(
        inner: Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>,
        pending: Pending,
        sse: bool,
        length: Option<u64>,
    ) -> Tap {
        Tap {
            inner,
            pending,
            sse: sse.then(SseParser::default),
            whole: (!sse).then(Vec::new),
            left: length,
        }
    }

    /// The answer is complete: its line goes to the writer.
    fn end(&mut self) {
        if let Some(p) = self.sse.as_mut()
            && let Some(o) = self.pending.obs.as_mut()
            && let Some(ev) = p.finish()
            && ev.data != b"[DONE]"
            && let Some(r) = reported(ev.data)
        {
            o.reported.merge(r);
        }
        if let Some(o) = self.pending.obs.as_mut() {
            o.whole = self.whole.take();
            // An answer too long to keep is read as empty: its length estimated.
            if o.whole.is_none() && self.sse.is_none() {
                o.whole = Some(Vec::new());
            }
        }
        self.pending.finish(None, None);
    }

    fn read(&mut self, b: &[u8]) {
        let Some(o) = self.pending.obs.as_mut() else {
            return;
        };
        if let Some(p) = self.sse.as_mut() {
            p.feed(b, |ev| {
                if let Ok(ev) = ev
                    && ev.data != b"[DONE]"
                    && let Some(r) = reported(ev.data)
                {
                    o.reported.merge(r);
                }
            });
        }
        if let Some(w) = self.whole.as_mut() {
            if w.len() + b.len() <= MAX_KEPT_ANSWER_BYTES {
                w.extend_from_slice(b);
            } else {
                self.whole = None;
            }
        }
    }
}

impl Stream for Tap {
    type Item = std::io::Result<Frame<Bytes>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(b))) => {
                this.read(&b);
                if let Some(left) = this.left.as_mut() {
                    *left = left.saturating_sub(b.len() as u64);
                    if *left == 0 {
                        this.end();
                    }
                }
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Poll::Ready(Some(Err(e))) => {
                this.pending.finish(None, Some("upstream_broke"));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.end();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The upstream closed the connection before any answer: a pooled
/// keep-alive connection it had already given up on.
fn closed_before_answer(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_canceled())
        {
            return true;
        }
        source = s.source();
    }
    false
}
