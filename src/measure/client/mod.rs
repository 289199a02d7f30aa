//! Streaming client for OpenAI-compatible `/v1/chat/completions` and `/v1/completions`.
//!
//! One request in, one [`StreamCapture`] out: [`Client::stream`] never fails
//! and never panics; every problem becomes `capture.failure`. Timing follows
//! `docs/metrics.md` ("One streamed request"): `t_send` is taken right before
//! the request is handed to the transport (so connection setup counts), and
//! each read's arrival time is taken once, as soon as the read returns.
//!
//! Two transports: plain-`http` targets use the minimal HTTP/1.1 client in
//! `client/wire.rs` (the request's own task reads the socket, so no scheduler hop
//! lies between a read and its timestamp); `https` targets use reqwest.
//!
//! The hot loop does no per-chunk allocation it can avoid: SSE events borrow
//! the read buffer, chunk JSON is parsed into borrowed structs (by the fast
//! path in `client/fastjson.rs` for the usual chunk, else serde_json; text only
//! allocates when the server escaped something in it), timers are re-armed
//! lazily rather than per read, and nothing is tokenized.

use std::fmt;
use std::pin::pin;
use std::time::Instant;

use anyhow::Context as _;
use reqwest::header::{self, HeaderMap, HeaderValue};
use serde_json::Value;

use crate::config::timeouts::BYTES_PER_TOKEN_ESTIMATE;
use crate::measure::record::{Outcome, StreamCapture};

mod body;
mod chunk;
mod config;
mod fastjson;
mod logprobs;
mod read;
mod reported;
mod sink;
mod wire;

pub use body::{chat_body, completions_body};
use config::FOREVER;
pub use config::{ClientConfig, Endpoint, MAX_EVENT_BYTES, Timeouts};
use read::{Reader, ReqwestBody, after, chain, fail, read_response};
pub use reported::{Reported, reported};
use sink::Asked;
pub use sink::{MAX_CHUNK_TIMES, chunk_allowance};

/// Did the request fail on a pooled socket the server had already closed?
pub(super) fn stale_connection(cap: &StreamCapture) -> bool {
    cap.http_status.is_none()
        && cap.failure.as_ref().is_some_and(|f| {
            f.class == Outcome::RequestError
                && f.message
                    .contains("connection closed before message completed")
        })
}

/// A pooled HTTP client bound to one server. Cheap to share by reference across tasks.
pub struct Client {
    /// The transport for `https` targets (and for URLs with credentials in them).
    http: reqwest::Client,
    /// The transport for plain-`http` targets; see [`wire`] for why.
    wire: Option<Wire>,
    chat_url: reqwest::Url,
    completions_url: reqwest::Url,
    cfg: ClientConfig,
}

/// The plain-http transport: its connection pool and, per endpoint, the
/// request head up to the value of `Content-Length`, built once.
pub(super) struct Wire {
    pool: wire::Pool,
    chat_head: Vec<u8>,
    completions_head: Vec<u8>,
}

impl Wire {
    fn new(chat: &reqwest::Url, completions: &reqwest::Url, cfg: &ClientConfig) -> Option<Wire> {
        // reqwest turns URL credentials into a Basic header; leave such URLs to it.
        if chat.scheme() != "http" || !chat.username().is_empty() || chat.password().is_some() {
            return None;
        }
        let host = chat.host_str()?;
        let port = chat.port_or_known_default()?;
        let authority = match chat.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let head = |url: &reqwest::Url| {
            let target = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_string(),
            };
            let mut h = format!(
                "POST {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: infergate/{}\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\n",
                env!("CARGO_PKG_VERSION")
            );
            if let Some(key) = &cfg.api_key {
                h.push_str(&format!("Authorization: Bearer {key}\r\n"));
            }
            h.push_str("Content-Length: ");
            h.into_bytes()
        };
        // An IPv6 literal is bracketed in URLs but not when connecting.
        let connect_host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        Some(Wire {
            pool: wire::Pool::new(
                connect_host.to_string(),
                port,
                cfg.timeouts.connect.min(FOREVER),
            ),
            chat_head: head(chat),
            completions_head: head(completions),
        })
    }
}

/// The result of one attempt at a request.
pub(super) enum Attempt {
    Done,
    /// A pooled connection was found closed before any answer: retry once, fresh.
    Stale,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("cfg", &self.cfg)
            .field(
                "transport",
                &if self.wire.is_some() {
                    "http/1.1"
                } else {
                    "reqwest"
                },
            )
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(cfg: ClientConfig) -> anyhow::Result<Client> {
        let root = cfg.base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        let url = |e: Endpoint| {
            reqwest::Url::parse(&format!("{root}{}", e.path()))
                .with_context(|| format!("invalid base_url {:?}", cfg.base_url))
        };
        let chat_url = url(Endpoint::Chat)?;
        let completions_url = url(Endpoint::Completions)?;

        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(key) = &cfg.api_key {
            // Also the check that the key is safe to put in the wire transport's head.
            let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| anyhow::anyhow!("api_key is not a valid HTTP header value"))?;
            v.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, v);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!("infergate/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(cfg.timeouts.connect.min(FOREVER))
            .tcp_nodelay(true)
            // A measuring client talks to the target directly: an environment proxy would be measured too.
            .no_proxy()
            .http1_only()
            .build()
            .context("building the HTTP client")?;
        let wire = Wire::new(&chat_url, &completions_url, &cfg);
        Ok(Client {
            http,
            wire,
            chat_url,
            completions_url,
            cfg,
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// Stream one request and capture it. Never fails: see `capture.failure`.
    pub async fn stream(&self, endpoint: Endpoint, body: &Value) -> StreamCapture {
        self.stream_timed(endpoint, body).await.1
    }

    /// Like [`Client::stream`], also returning `t_send`, the instant every
    /// `*_ms` field of the capture is measured from (for run-relative offsets).
    pub async fn stream_timed(&self, endpoint: Endpoint, body: &Value) -> (Instant, StreamCapture) {
        self.stream_sized(endpoint, body, None).await
    }

    /// Like [`Client::stream_timed`], for a prompt of `prompt_tokens`: its
    /// first-byte and total timeouts grow by [`Timeouts::for_prompt`]'s
    /// allowance. Without a count, the body's bytes over
    /// [`BYTES_PER_TOKEN_ESTIMATE`] stand in for it.
    pub async fn stream_sized(
        &self,
        endpoint: Endpoint,
        body: &Value,
        prompt_tokens: Option<u64>,
    ) -> (Instant, StreamCapture) {
        let (t_send, mut cap) = match &self.wire {
            Some(w) => self.stream_wire(w, endpoint, body, prompt_tokens).await,
            None => self.stream_reqwest(endpoint, body, prompt_tokens).await,
        };
        // Captures are kept for the whole run: give back what reading reserved ahead.
        cap.chunk_ms.shrink_to_fit();
        cap.content.shrink_to_fit();
        cap.reasoning.shrink_to_fit();
        (t_send, cap)
    }

    async fn stream_wire(
        &self,
        w: &Wire,
        endpoint: Endpoint,
        body: &Value,
        prompt_tokens: Option<u64>,
    ) -> (Instant, StreamCapture) {
        let mut cap = StreamCapture::default();
        // Serializing the body happens here, before t_send: it is the client's cost, not the server's.
        let payload = match serde_json::to_vec(body) {
            Ok(p) => p,
            Err(e) => {
                fail(
                    &mut cap,
                    Outcome::RequestError,
                    format!("building request: {e}"),
                );
                return (Instant::now(), cap);
            }
        };
        let head = match endpoint {
            Endpoint::Chat => &w.chat_head,
            Endpoint::Completions => &w.completions_head,
        };
        let mut req = Vec::with_capacity(head.len() + 24 + payload.len());
        req.extend_from_slice(head);
        req.extend_from_slice(payload.len().to_string().as_bytes());
        req.extend_from_slice(b"\r\n\r\n");
        req.extend_from_slice(&payload);
        let t = self.timeouts_for(prompt_tokens, payload.len());
        let asked = Asked::of(endpoint, body);
        if let (Attempt::Done, t_send) = self.run_wire(w, &req, false, asked, &t, &mut cap).await {
            return (t_send, cap);
        }
        // Servers such as llama.cpp close the connection after a stream while
        // advertising keep-alive; a pooled socket can die between its check and
        // its use. That is the client's stale socket, not the server's answer:
        // retry once on a fresh connection, timed afresh.
        cap = StreamCapture::default();
        let (_, t_send) = self.run_wire(w, &req, true, asked, &t, &mut cap).await;
        (t_send, cap)
    }

    async fn run_wire(
        &self,
        w: &Wire,
        req: &[u8],
        fresh: bool,
        asked: Asked,
        t: &Timeouts,
        cap: &mut StreamCapture,
    ) -> (Attempt, Instant) {
        let t_send = Instant::now();
        let total_at = after(t_send, t.total);
        let first_byte_at = after(t_send, t.first_byte).min(total_at);
        let mut timer = pin!(tokio::time::sleep_until(first_byte_at.into()));
        let sent = tokio::select! {
            biased;
            r = w.pool.send(req, fresh) => r,
            () = &mut timer => {
                fail(cap, Outcome::RequestError, no_response(t, first_byte_at, total_at));
                return (Attempt::Done, t_send);
            }
        };
        let mut resp = match sent {
            Ok(r) => r,
            Err(wire::SendError::Stale) => return (Attempt::Stale, t_send),
            Err(wire::SendError::Connect(msg)) => {
                fail(cap, Outcome::RequestError, msg);
                return (Attempt::Done, t_send);
            }
            Err(wire::SendError::Other(msg)) => {
                fail(cap, Outcome::RequestError, format!("request error: {msg}"));
                return (Attempt::Done, t_send);
            }
        };
        cap.http_status = Some(resp.status);
        let mut reader = Reader::new(timer, t_send, total_at, first_byte_at, t);
        let content_type = resp.content_type.take();
        let status = resp.status;
        let complete = read_response(
            &mut reader,
            status,
            content_type.as_deref(),
            &mut resp,
            asked,
            self.cfg.capture_cap_bytes,
            cap,
        )
        .await;
        if complete {
            w.pool.put(resp);
        }
        (Attempt::Done, t_send)
    }

    async fn stream_reqwest(
        &self,
        endpoint: Endpoint,
        body: &Value,
        prompt_tokens: Option<u64>,
    ) -> (Instant, StreamCapture) {
        let mut cap = StreamCapture::default();
        let url = match endpoint {
            Endpoint::Chat => self.chat_url.clone(),
            Endpoint::Completions => self.completions_url.clone(),
        };
        // Serializing the body happens here, before t_send: it is the client's cost, not the server's.
        let req = match self.http.post(url).json(body).build() {
            Ok(r) => r,
            Err(e) => {
                fail(
                    &mut cap,
                    Outcome::RequestError,
                    format!("building request: {}", chain(&e)),
                );
                return (Instant::now(), cap);
            }
        };
        let retry = req.try_clone();
        let bytes = req.body().and_then(|b| b.as_bytes()).map_or(0, <[u8]>::len);
        let t = self.timeouts_for(prompt_tokens, bytes);
        let t_send = Instant::now();
        let asked = Asked::of(endpoint, body);
        self.run_reqwest(req, t_send, asked, &t, &mut cap).await;
        // See stream_wire: a stale pooled socket is retried once, timed afresh.
        if let (Some(req), true) = (retry, stale_connection(&cap)) {
            cap = StreamCapture::default();
            let t_send = Instant::now();
            self.run_reqwest(req, t_send, asked, &t, &mut cap).await;
            return (t_send, cap);
        }
        (t_send, cap)
    }

    async fn run_reqwest(
        &self,
        req: reqwest::Request,
        t_send: Instant,
        asked: Asked,
        t: &Timeouts,
        cap: &mut StreamCapture,
    ) {
        let total_at = after(t_send, t.total);
        let first_byte_at = after(t_send, t.first_byte).min(total_at);
        let mut timer = pin!(tokio::time::sleep_until(first_byte_at.into()));

        let sent = tokio::select! {
            biased;
            r = self.http.execute(req) => r,
            () = &mut timer => {
                fail(cap, Outcome::RequestError, no_response(t, first_byte_at, total_at));
                return;
            }
        };
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                let msg = if e.is_connect() && e.is_timeout() {
                    format!("connect timeout after {:?}: {}", t.connect, chain(&e))
                } else if e.is_connect() {
                    format!("connect error: {}", chain(&e))
                } else {
                    format!("request error: {}", chain(&e))
                };
                fail(cap, Outcome::RequestError, msg);
                return;
            }
        };
        let status = resp.status().as_u16();
        cap.http_status = Some(status);
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.as_bytes().to_vec());
        let mut reader = Reader::new(timer, t_send, total_at, first_byte_at, t);
        let mut body = ReqwestBody {
            resp,
            last: bytes::Bytes::new(),
        };
        read_response(
            &mut reader,
            status,
            content_type.as_deref(),
            &mut body,
            asked,
            self.cfg.capture_cap_bytes,
            cap,
        )
        .await;
    }
}

impl Client {
    /// One request's limits: the configured ones with its prompt's allowance.
    fn timeouts_for(&self, prompt_tokens: Option<u64>, body_bytes: usize) -> Timeouts {
        let estimate = (body_bytes / BYTES_PER_TOKEN_ESTIMATE) as u64;
        self.cfg
            .timeouts
            .for_prompt(prompt_tokens.unwrap_or(estimate))
    }
}

/// The message for a timeout before the response head.
pub(super) fn no_response(t: &Timeouts, first_byte_at: Instant, total_at: Instant) -> String {
    if first_byte_at < total_at {
        format!("first-byte timeout: no response within {:?}", t.first_byte)
    } else {
        format!("total timeout: no response within {:?}", t.total)
    }
}

#[cfg(test)]
mod tests {
    use super::chunk::{Chunk, Str};
    use super::config::SNIPPET_BYTES;
    use super::sink::{Sink, State};
    use super::*;
    use crate::measure::sse::SseParser;
    use serde_json::Map;
    use serde_json::json;
    use std::borrow::Cow;
    use std::time::Duration;

    /// Feed `reads` (each with its arrival ms) through a parser and a sink, as `run` does.
    fn capture(
        endpoint: Endpoint,
        cap_bytes: usize,
        reads: &[(&str, f64)],
        close_ms: f64,
    ) -> StreamCapture {
        let mut cap = StreamCapture::default();
        let mut parser = SseParser::new(MAX_EVENT_BYTES);
        let mut sink = Sink::new(&mut cap, endpoint, cap_bytes);
        for (bytes, at) in reads {
            parser.feed(bytes.as_bytes(), |ev| sink.on_event(ev, *at));
            if sink.state != State::Streaming {
                break;
            }
        }
        match sink.state {
            State::Streaming => {
                if let Some(ev) = parser.finish() {
                    sink.on_event(Ok(ev), close_ms);
                }
                match sink.state {
                    State::Done => sink.finish_after_done(),
                    State::Streaming => sink.finish_at_close(close_ms),
                    State::Failed => {}
                }
            }
            State::Done => sink.finish_after_done(),
            State::Failed => {}
        }
        cap
    }

    fn chat(delta: &str, finish: &str) -> String {
        format!(
            "data: {{\"model\":\"m\",\"system_fingerprint\":\"fp\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    }

    fn class(c: &StreamCapture) -> Option<Outcome> {
        c.failure.as_ref().map(|f| f.class)
    }

    #[test]
    fn logprobs_are_captured_per_token_and_unreadable_ones_dropped_whole() {
        let lp = |t: &str, l: f64| {
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{t}\"}},\"logprobs\":{{\"content\":[{{\"id\":1,\"token\":\"{t}\",\"bytes\":[],\"logprob\":{l},\"top_logprobs\":[{{\"token\":\"{t}\",\"logprob\":{l}}},{{\"token\":\"x\",\"logprob\":-3.0}}]}}]}},\"finish_reason\":null}}]}}\n\n"
            )
        };
        let (a, b) = (lp("Hel", -0.25), lp("lo", -0.5));
        let fin = chat("{}", r#""stop""#);
        let done = "data: [DONE]\n\n";
        let c = capture(
            Endpoint::Chat,
            1024,
            &[(&a, 1.0), (&b, 2.0), (&fin, 3.0), (done, 4.0)],
            5.0,
        );
        assert_eq!(c.failure, None);
        assert_eq!(c.content, "Hello");
        let toks: Vec<(&str, f64, usize)> = c
            .tokens
            .iter()
            .map(|t| (t.token.as_str(), t.logprob, t.top.len()))
            .collect();
        assert_eq!(toks, [("Hel", -0.25, 2), ("lo", -0.5, 2)]);
        // `bytes: []` is not "Hel": the bytes are kept (and compared by).
        assert_eq!(c.tokens[0].bytes.as_deref(), Some(&[][..]));
        // Without logprobs (every performance request): nothing, no failure.
        let plain = chat(r#"{"content":"Hi"}"#, "null");
        let c = capture(
            Endpoint::Chat,
            1024,
            &[(&plain, 1.0), (&fin, 2.0), (done, 3.0)],
            4.0,
        );
        assert!(c.tokens.is_empty() && c.failure.is_none());
        // An unreadable entry drops the list (never a gap), not the stream.
        let bad = "data: {\"choices\":[{\"delta\":{\"content\":\"?\"},\"logprobs\":{\"content\":[{\"token\":\"?\"}]}}]}\n\n";
        let c = capture(
            Endpoint::Chat,
            1024,
            &[(&a, 1.0), (bad, 2.0), (&b, 3.0), (&fin, 4.0), (done, 5.0)],
            6.0,
        );
        assert_eq!(
            (c.failure, c.tokens.len(), c.content.as_str()),
            (None, 0, "Hel?lo")
        );
    }

    #[test]
    fn role_only_and_empty_chunks_are_not_tokens() {
        let role = chat(r#"{"role":"assistant","content":""}"#, "null");
        let null = chat(r#"{"role":"assistant","content":null}"#, "null");
        let a = chat(r#"{"content":"Hel"}"#, "null");
        let b = chat(r#"{"content":"lo"}"#, "null");
        let fin = chat("{}", r#""stop""#);
        let usage =
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n";
        let c = capture(
            Endpoint::Chat,
            1024,
            &[
                (&role, 1.0),
                (&null, 2.0),
                (&a, 10.0),
                (&b, 12.0),
                (&fin, 13.0),
                (usage, 13.5),
                ("data: [DONE]\n\n", 14.0),
            ],
            20.0,
        );
        assert_eq!(c.failure, None);
        assert_eq!(c.ttft_ms, Some(10.0));
        assert_eq!(c.ttfo_ms, Some(10.0));
        assert_eq!(c.chunk_ms, vec![10.0, 12.0]);
        assert_eq!(c.e2e_ms, Some(14.0));
        assert!(c.saw_done);
        assert_eq!(c.content, "Hello");
        assert_eq!(c.finish_reasons, vec!["stop"]);
        assert_eq!((c.prompt_tokens, c.completion_tokens), (Some(7), Some(2)));
        assert_eq!(c.model.as_deref(), Some("m"));
        assert_eq!(c.system_fingerprint.as_deref(), Some("fp"));
    }

    #[test]
    fn reasoning_counts_for_ttfo_not_ttft() {
        let r1 = chat(r#"{"reasoning_content":"think"}"#, "null");
        let r2 = chat(r#"{"reasoning":" more"}"#, "null");
        let a = chat(r#"{"content":"answer\n\"q\""}"#, r#""stop""#);
        let c = capture(
            Endpoint::Chat,
            1024,
            &[(&r1, 5.0), (&r2, 6.0), (&a, 9.0)],
            11.0,
        );
        assert_eq!(c.failure, None);
        assert_eq!(c.ttfo_ms, Some(5.0));
        assert_eq!(c.ttft_ms, Some(9.0));
        assert_eq!(c.chunk_ms, vec![5.0, 6.0, 9.0]);
        assert_eq!(c.reasoning, "think more");
        assert_eq!(c.content, "answer\n\"q\"");
        // No [DONE], but the stream said why it finished: e2e is the close.
        assert!(!c.saw_done);
        assert_eq!(c.e2e_ms, Some(11.0));
        assert_eq!(c.completion_tokens, None);
        assert!(!c.completion_tokens_estimated);
    }

    /// A runtime that leaves reasoning in the content: the `<think>` block
    /// (its tags split across chunks) is taken out into the reasoning, TTFO
    /// is its first chunk and TTFT the answer's first.
    #[test]
    fn a_think_block_in_the_content_is_reasoning_and_ttft_is_the_answers() {
        let c = |t: &str| {
            chat(
                &format!("{{\"content\":{}}}", serde_json::to_string(t).unwrap()),
                "null",
            )
        };
        let fin = chat("{}", r#""stop""#);
        let chunks = [
            (c("<thi"), 1.0),
            (c("nk>I should add"), 2.0),
            (c(" 3 and 4.</th"), 3.0),
            (c("ink>\n\n"), 4.0),
            (c("7"), 5.0),
            (fin.clone(), 6.0),
        ];
        let events: Vec<(&str, f64)> = chunks
            .iter()
            .map(|(e, t)| (e.as_str(), *t))
            .chain([("data: [DONE]\n\n", 7.0)])
            .collect();
        let cap = capture(Endpoint::Chat, 1024, &events, 8.0);
        assert_eq!(cap.failure, None);
        assert_eq!(cap.reasoning, "I should add 3 and 4.");
        assert_eq!(cap.content, "7");
        assert!(cap.reasoning_from_content);
        assert_eq!((cap.ttfo_ms, cap.ttft_ms), (Some(1.0), Some(5.0)));

        // Content that only looks like a tag at first is the answer from its
        // first chunk, untouched.
        let (b1, b2) = (c("<b"), c(">bold</b>"));
        let cap = capture(
            Endpoint::Chat,
            1024,
            &[
                (&b1, 1.0),
                (&b2, 2.0),
                (&fin, 3.0),
                ("data: [DONE]\n\n", 4.0),
            ],
            5.0,
        );
        assert_eq!(
            (cap.content.as_str(), cap.ttft_ms),
            ("<b>bold</b>", Some(1.0))
        );
        assert!(!cap.reasoning_from_content && cap.reasoning.is_empty());

        // A block never closed (max_tokens spent thinking): no answer at all.
        let (t1, cut) = (
            c("<think>hmm, let me"),
            chat(r#"{"content":" see"}"#, r#""length""#),
        );
        let cap = capture(
            Endpoint::Chat,
            1024,
            &[(&t1, 1.0), (&cut, 2.0), ("data: [DONE]\n\n", 3.0)],
            4.0,
        );
        assert_eq!(
            (cap.content.as_str(), cap.reasoning.as_str()),
            ("", "hmm, let me see")
        );
        assert_eq!((cap.ttfo_ms, cap.ttft_ms), (Some(1.0), None));
    }

    /// Tool calls streamed in pieces, as llama.cpp and vLLM send them: the
    /// first piece names the call, later ones carry its arguments' text; two
    /// calls by index. Assembled as a client would, and timed as output.
    #[test]
    fn streamed_tool_calls_are_assembled_by_index() {
        let piece = |json: &str| chat(&format!("{{\"tool_calls\":[{json}]}}"), "null");
        let first = piece(
            r#"{"index":0,"id":"call_a","type":"function","function":{"name":"submit_answer","arguments":""}}"#,
        );
        let args1 = piece(r#"{"index":0,"function":{"arguments":"{\"answer\": "}}"#);
        let args2 = piece(r#"{"index":0,"function":{"arguments":"42}"}}"#);
        let second =
            piece(r#"{"index":1,"id":"call_b","function":{"name":"lookup","arguments":"{}"}}"#);
        let fin = chat("{}", r#""tool_calls""#);
        let c = capture(
            Endpoint::Chat,
            1024,
            &[
                (&first, 4.0),
                (&args1, 5.0),
                (&args2, 6.0),
                (&second, 7.0),
                (&fin, 8.0),
                ("data: [DONE]\n\n", 9.0),
            ],
            10.0,
        );
        assert_eq!(c.failure, None);
        assert_eq!(c.content, "");
        assert_eq!(c.tool_calls.len(), 2, "{:?}", c.tool_calls);
        assert_eq!(c.tool_calls[0].name, "submit_answer");
        assert_eq!(c.tool_calls[0].id.as_deref(), Some("call_a"));
        assert_eq!(c.tool_calls[0].arguments, "{\"answer\": 42}");
        assert_eq!(
            (
                c.tool_calls[1].name.as_str(),
                c.tool_calls[1].arguments.as_str()
            ),
            ("lookup", "{}")
        );
        assert_eq!(c.finish_reasons, vec!["tool_calls"]);
        assert_eq!((c.ttfo_ms, c.ttft_ms), (Some(4.0), Some(4.0)));
        assert_eq!(c.chunk_ms, vec![4.0, 5.0, 6.0, 7.0]);
    }

    /// Malformed tool-call deltas fail the request, classified as a broken
    /// stream: a piece that skips an index, a call renamed midway, and
    /// arguments that are not a string.
    #[test]
    fn malformed_tool_call_deltas_fail_the_request() {
        let piece = |json: &str| chat(&format!("{{\"tool_calls\":[{json}]}}"), "null");
        let named = piece(r#"{"index":0,"function":{"name":"a","arguments":""}}"#);
        for (bad, says) in [
            (
                piece(r#"{"index":2,"function":{"arguments":"{}"}}"#),
                "index 2",
            ),
            (piece(r#"{"index":0,"function":{"name":"b"}}"#), "named"),
            (
                piece(r#"{"index":0,"function":{"arguments":{"x":1}}}"#),
                "malformed chunk",
            ),
        ] {
            let c = capture(Endpoint::Chat, 1024, &[(&named, 1.0), (&bad, 2.0)], 3.0);
            let f = c.failure.as_ref().expect("failed");
            assert_eq!(f.class, Outcome::StreamValidationFailed, "{f:?}");
            assert!(f.message.contains(says), "{says}: {f:?}");
        }
    }

    #[test]
    fn completions_text_is_read_from_choices_text() {
        let ev = |t: &str, f: &str| {
            format!("data: {{\"choices\":[{{\"text\":{t},\"finish_reason\":{f}}}]}}\n\n")
        };
        let c = capture(
            Endpoint::Completions,
            1024,
            &[
                (&ev("\"a\"", "null"), 3.0),
                (&ev("\"b\"", "\"length\""), 4.0),
                ("data: [DONE]\n\n", 5.0),
            ],
            6.0,
        );
        assert_eq!(c.failure, None);
        assert_eq!(
            (c.content.as_str(), c.ttft_ms, c.e2e_ms),
            ("ab", Some(3.0), Some(5.0))
        );
        assert_eq!(c.finish_reasons, vec!["length"]);
    }

    #[test]
    fn stream_problems_are_validation_failures() {
        let ok = chat(r#"{"content":"x"}"#, "null");
        let cases: Vec<(Vec<String>, &str)> = vec![
            (
                vec![ok.clone(), "data: {not json\n\n".into()],
                "malformed chunk",
            ),
            (
                vec![
                    ok.clone(),
                    "data: {\"error\":{\"message\":\"out of memory\",\"code\":500}}\n\n".into(),
                ],
                "out of memory",
            ),
            (
                vec!["event: error\ndata: {\"message\":\"boom\"}\n\n".into()],
                "boom",
            ),
            (
                vec![ok.clone()],
                "without [DONE] and without any finish_reason",
            ),
            (
                vec![ok.clone(), "data: [DONE]\n\n".into()],
                "without any finish_reason",
            ),
            (
                vec![format!("data: {}\n\n", "x".repeat(MAX_EVENT_BYTES + 1))],
                "larger than",
            ),
        ];
        for (reads, want) in cases {
            let reads: Vec<(&str, f64)> = reads.iter().map(|r| (r.as_str(), 1.0)).collect();
            let c = capture(Endpoint::Chat, 1024, &reads, 2.0);
            assert_eq!(class(&c), Some(Outcome::StreamValidationFailed), "{want}");
            let msg = &c
                .failure
                .as_ref()
                .map(|f| f.message.clone())
                .unwrap_or_default();
            assert!(msg.contains(want), "{msg:?} should contain {want:?}");
            assert!(msg.len() < 2 * SNIPPET_BYTES, "message is bounded");
        }
    }

    #[test]
    fn keepalives_pings_and_unterminated_done_are_tolerated() {
        let a = chat(r#"{"content":"x"}"#, r#""stop""#);
        let c = capture(
            Endpoint::Chat,
            1024,
            &[
                (": keep-alive\r\n\r\n", 1.0),
                ("event: ping\ndata: {}\n\n", 1.5),
                (&a, 2.0),
                ("data:[DONE]", 3.0),
            ],
            4.0,
        );
        assert_eq!(c.failure, None);
        assert!(c.saw_done);
        // The unterminated [DONE] is only seen at close.
        assert_eq!(c.e2e_ms, Some(4.0));
    }

    #[test]
    fn capture_is_capped_at_a_char_boundary_but_timing_goes_on() {
        let a = chat(r#"{"content":"ab€"}"#, "null");
        let b = chat(r#"{"content":"cd"}"#, r#""stop""#);
        let c = capture(
            Endpoint::Chat,
            4,
            &[(&a, 1.0), (&b, 2.0), ("data: [DONE]\n\n", 3.0)],
            4.0,
        );
        assert_eq!(c.failure, None);
        // Later text that would fit must not be appended after a cut: the capture stays a prefix.
        assert_eq!(c.content, "ab");
        assert!(c.truncated);
        assert_eq!(c.chunk_ms, vec![1.0, 2.0]);
    }

    #[test]
    fn chunk_strings_borrow_unless_escaped() {
        let c: Chunk<'_> = serde_json::from_str(
            r#"{"model":"m","choices":[{"delta":{"content":"plain"}},{"delta":{"content":"esc\n"}}]}"#,
        )
        .expect("valid");
        let mut it = c.choices.iter();
        let first = it
            .next()
            .and_then(|c| c.delta.as_ref())
            .and_then(|d| d.content.as_ref());
        assert!(matches!(first, Some(Str(Cow::Borrowed("plain")))));
        let second = it
            .next()
            .and_then(|c| c.delta.as_ref())
            .and_then(|d| d.content.as_ref());
        assert!(matches!(second, Some(Str(Cow::Owned(s))) if s == "esc\n"));
        assert!(matches!(c.model, Some(Str(Cow::Borrowed("m")))));
        let c: Chunk<'_> = serde_json::from_str(r#"{"choices":null,"usage":null}"#).expect("valid");
        assert_eq!(c.choices.iter().count(), 0);
    }

    #[test]
    fn chat_body_streams_and_asks_for_usage() {
        let mut extra = Map::new();
        extra.insert("model".into(), json!("m"));
        extra.insert("stream".into(), json!(false));
        extra.insert(
            "stream_options".into(),
            json!({"continuous_usage_stats": true}),
        );
        let b = chat_body(
            json!([{"role": "user", "content": "hi"}]),
            16,
            0.0,
            Some(7),
            extra,
        );
        assert_eq!(b["stream"], json!(true));
        assert_eq!(
            b["stream_options"],
            json!({"continuous_usage_stats": true, "include_usage": true})
        );
        assert_eq!(
            (
                b["max_tokens"].clone(),
                b["seed"].clone(),
                b["model"].clone()
            ),
            (json!(16), json!(7), json!("m"))
        );
        assert_eq!(b["messages"][0]["content"], json!("hi"));
        let b = completions_body("p", 4, 1.0, None, Map::new());
        assert_eq!((b["prompt"].clone(), b.get("seed")), (json!("p"), None));
        assert_eq!(b["stream_options"]["include_usage"], json!(true));
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let mut cfg = ClientConfig::new("http://127.0.0.1:1");
        cfg.api_key = Some("sk-secret-123".into());
        let client = Client::new(cfg.clone()).expect("client");
        for s in [
            format!("{cfg:?}"),
            format!("{client:?}"),
            format!("{cfg:#?}"),
        ] {
            assert!(!s.contains("sk-secret"), "{s}");
            assert!(s.contains("redacted"), "{s}");
        }
    }

    /// Parse cost per chunk without I/O; run with
    /// `cargo test --release --lib parse_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn parse_cost_per_chunk() {
        let one = chat(r#"{"content":" token"}"#, "null");
        let read: String = one.repeat(64);
        let reads = 20_000;
        let t = Instant::now();
        let mut cap = StreamCapture::default();
        let mut parser = SseParser::new(MAX_EVENT_BYTES);
        let mut sink = Sink::new(&mut cap, Endpoint::Chat, 1 << 30);
        for i in 0..reads {
            parser.feed(read.as_bytes(), |ev| sink.on_event(ev, i as f64));
        }
        let per = t.elapsed().as_secs_f64() * 1e9 / (reads * 64) as f64;
        assert_eq!(cap.chunk_ms.len(), reads * 64);
        println!(
            "{} bytes/chunk: {per:.0} ns per chunk (SSE + JSON + capture)",
            one.len()
        );
    }

    #[test]
    fn base_url_may_carry_v1_and_slashes() {
        for base in [
            "http://127.0.0.1:9",
            "http://127.0.0.1:9/",
            "http://127.0.0.1:9/v1/",
        ] {
            let c = Client::new(ClientConfig::new(base)).expect("client");
            assert_eq!(
                c.chat_url.as_str(),
                "http://127.0.0.1:9/v1/chat/completions"
            );
        }
        assert!(Client::new(ClientConfig::new("not a url")).is_err());
    }

    fn fast_body(max_tokens: u64, fastsource: Value) -> Value {
        let mut extra = Map::new();
        extra.insert("model".into(), json!("fastsource"));
        extra.insert("fastsource".into(), fastsource);
        chat_body(
            json!([{"role": "user", "content": "hi"}]),
            max_tokens,
            0.0,
            None,
            extra,
        )
    }

    /// What a capture says, without its times or transport-specific wording.
    fn gist(c: &StreamCapture) -> String {
        format!(
            "{:?} {:?} {:?} n={} {:?} {:?}/{:?} done={} {:?} {:?}",
            c.failure.as_ref().map(|f| f.class),
            c.http_status,
            c.content,
            c.chunk_ms.len(),
            c.finish_reasons,
            c.prompt_tokens,
            c.completion_tokens,
            c.saw_done,
            c.model,
            c.system_fingerprint,
        )
    }

    /// The plain-http transport and reqwest read every fast-source scenario alike.
    #[tokio::test]
    async fn both_transports_capture_the_same() {
        use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
        let (_, src) = FastSource::start(FastSourceConfig::default()).expect("source");
        let mut cfg = ClientConfig::new(src.base_url());
        cfg.timeouts.idle = Duration::from_millis(200);
        let wire = Client::new(cfg.clone()).expect("client");
        assert!(wire.wire.is_some());
        let mut via_reqwest = Client::new(cfg).expect("client");
        via_reqwest.wire = None;
        let cases = [
            fast_body(5, json!({})),
            fast_body(300, json!({"itl_ms": 0.05})),
            fast_body(3, json!({"done": false})),
            fast_body(3, json!({"usage": false})),
            fast_body(3, json!({"status": 503})),
            fast_body(6, json!({"error_after": 2})),
            fast_body(3, json!({"no_finish": true})),
            fast_body(4, json!({"stall_after": 2})),
            {
                let mut b = fast_body(3, json!({}));
                b["stream"] = json!(false);
                b
            },
        ];
        for body in &cases {
            for endpoint in [Endpoint::Chat, Endpoint::Completions] {
                let a = wire.stream(endpoint, body).await;
                let b = via_reqwest.stream(endpoint, body).await;
                assert_eq!(gist(&a), gist(&b), "{body}");
                if let (Some(x), Some(y)) = (&a.failure, &b.failure) {
                    // The same check fails, with the same words up to the transport's own.
                    let head = |m: &str| m.split(':').next().unwrap_or_default().to_string();
                    assert_eq!(head(&x.message), head(&y.message), "{x:?} vs {y:?}");
                }
            }
        }
        // Sequential requests reuse one connection.
        let idle = wire.wire.as_ref().map(|w| w.pool.idle_len());
        assert_eq!(idle, Some(1));
    }

    /// A server that streams on past `max_tokens` (here 100,000 chunks for
    /// 8): both transports end the request once it is far past the
    /// allowance, as a server fault, keeping a bounded record.
    #[tokio::test]
    async fn a_stream_ignoring_max_tokens_is_ended_as_a_server_fault() {
        use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
        let (_, src) = FastSource::start(FastSourceConfig::default()).expect("source");
        let wire = Client::new(ClientConfig::new(src.base_url())).expect("client");
        let mut via_reqwest = Client::new(ClientConfig::new(src.base_url())).expect("client");
        via_reqwest.wire = None;
        let body = fast_body(8, json!({"ignore_max_tokens": 100_000}));
        for client in [&wire, &via_reqwest] {
            let c = client.stream(Endpoint::Chat, &body).await;
            let f = c.failure.as_ref().expect("a failure");
            assert_eq!(f.class, Outcome::StreamValidationFailed, "{f:?}");
            assert!(f.message.contains("far past max_tokens"), "{}", f.message);
            assert_eq!(c.chunk_ms.len() as u64, chunk_allowance(8) + 1);
        }
        // Within its max_tokens the same source is read whole.
        let c = wire.stream(Endpoint::Chat, &fast_body(8, json!({}))).await;
        assert_eq!((c.failure, c.chunk_ms.len()), (None, 8));
    }

    /// A server that closes a kept-alive connection instead of answering the
    /// next request: the client retries once on a fresh connection.
    #[tokio::test]
    async fn a_stale_pooled_connection_is_retried_fresh() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}{}0\r\n\r\n",
            chunk(
                "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n"
            ),
            chunk("data: [DONE]\n\n"),
        );
        let answer: &'static str = Box::leak(answer.into_boxed_str());
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let first = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let mut served = 0;
                    while s.read(&mut buf).await.is_ok_and(|n| n > 0) {
                        if first && served == 1 {
                            return; // close without answering
                        }
                        if s.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                        served += 1;
                    }
                });
            }
        });
        let client =
            Client::new(ClientConfig::new(format!("http://127.0.0.1:{port}"))).expect("client");
        let body = fast_body(1, json!({}));
        for _ in 0..3 {
            let c = client.stream(Endpoint::Chat, &body).await;
            assert_eq!(c.failure, None);
            assert_eq!(c.content, "x");
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
