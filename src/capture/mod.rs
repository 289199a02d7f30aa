//! `infergate capture`: a reverse proxy in front of a serving runtime that
//! records its traffic as a trace of shapes, not text (docs/capture.md).
//!
//! Requests to `/v1/chat/completions`, `/v1/completions` and
//! `/v1/embeddings` are recorded, one trace line each; every other path is
//! passed through and counted. Bodies pass unchanged both ways (hop-by-hop
//! headers aside), answers chunk by chunk as they arrive. The trace is a
//! `config::dataset` trace: replaying it is a `trace` workload cell.
//!
//! The upstream client is reqwest (the crate's client already): pooled,
//! https upstreams with rustls, bodies as streams; redirects are not
//! followed, and it adds `Accept: */*` to a request that has no `Accept`.

pub mod blocks;
pub mod first_byte;
pub mod proxy;
pub mod shape;
pub mod trace;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;

use blocks::{Blocks, MAX_BLOCKS};
use shape::Endpoint;
use trace::{Observed, Queue, Writer, Written};

/// Largest recorded request body read; over it the client gets 413 (recorded).
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// How long open exchanges may finish after a stop before they are cut.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// What `infergate capture` is asked to do.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// The upstream's base URL (`http://127.0.0.1:8080`).
    pub upstream: String,
    pub out: PathBuf,
    /// Stop after this many recorded requests.
    pub max_requests: Option<u64>,
    pub duration: Option<Duration>,
    pub tokenizer: Option<PathBuf>,
    pub block_tokens: u64,
    /// Write the prompts and answers into the trace too.
    pub keep_text: bool,
    pub queue_lines: usize,
    pub max_body_bytes: usize,
}

impl Config {
    pub fn new(listen: SocketAddr, upstream: impl Into<String>, out: impl Into<PathBuf>) -> Config {
        Config {
            listen,
            upstream: upstream.into(),
            out: out.into(),
            max_requests: None,
            duration: None,
            tokenizer: None,
            block_tokens: 512,
            keep_text: false,
            queue_lines: trace::QUEUE_LINES,
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "--upstream {0}: expected an http:// or https:// base URL, without a query or fragment"
    )]
    Upstream(String),
    #[error("--block-tokens must be in 1..=65536")]
    BlockTokens,
    #[error("--out {dir}: {source}")]
    Out {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("--tokenizer: {0:#}")]
    Tokenizer(anyhow::Error),
    #[error("the key of the block hashes: {0}")]
    Key(std::io::Error),
    #[error("the upstream client: {0}")]
    Client(reqwest::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Requests counted as they arrive.
#[derive(Debug, Default)]
pub struct Counts {
    pub chat: AtomicU64,
    pub completions: AtomicU64,
    pub embeddings: AtomicU64,
    /// Other paths, passed through.
    pub passthrough: AtomicU64,
    /// Recorded endpoints past `--max-requests`, passed through unrecorded.
    pub over_bound: AtomicU64,
    pub upstream_unreachable: AtomicU64,
    /// Recorded requests sent a second time after the upstream closed a
    /// pooled connection under the first (never a request it answered).
    pub upstream_retries: AtomicU64,
    pub too_large: AtomicU64,
}

impl Counts {
    fn endpoint(&self, e: Endpoint) -> &AtomicU64 {
        match e {
            Endpoint::Chat => &self.chat,
            Endpoint::Completions => &self.completions,
            Endpoint::Embeddings => &self.embeddings,
        }
    }
}

/// What every request's task shares.
pub struct State {
    client: reqwest::Client,
    upstream: String,
    start: Instant,
    queue: Queue,
    next_id: AtomicU64,
    max_requests: Option<u64>,
    /// Told when the last request `--max-requests` allows has arrived.
    bound: Notify,
    counts: Counts,
    keep_text: bool,
    max_body_bytes: usize,
}

impl State {
    /// The next recorded request's id, or `None` past the bound.
    fn admit(&self) -> Option<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        match self.max_requests {
            Some(n) if id >= n => None,
            Some(n) => {
                if id + 1 == n {
                    self.bound.notify_one();
                }
                Some(id)
            }
            None => Some(id),
        }
    }
}

/// What a capture did, written to `DIR/summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Recorded requests (each a trace line unless dropped).
    pub requests: u64,
    pub by_endpoint: BTreeMap<&'static str, u64>,
    pub passthrough: u64,
    pub over_bound: u64,
    pub upstream_unreachable: u64,
    /// Recorded requests resent once on a fresh connection: the upstream
    /// closed the pooled one before answering (llama.cpp closes a
    /// keep-alive connection after a few requests).
    pub upstream_retries: u64,
    pub body_too_large: u64,
    pub max_body_bytes: usize,
    pub lines: u64,
    /// Lines the full queue (or the stop) left unwritten.
    pub dropped_lines: u64,
    /// Lines the writer could not write (see `write_error`).
    pub unwritten_lines: u64,
    /// The first write to the trace that failed, e.g. a full disk: the
    /// trace holds the lines before it, traffic went on.
    pub write_error: Option<String>,
    pub evicted_blocks: u64,
    pub max_blocks: usize,
    /// Lines with a length estimated (no usage in the answer, no tokenizer).
    pub estimated_lines: u64,
    pub lengths_estimated: bool,
    pub blocks_from: String,
    pub keep_text: bool,
    /// signal, max_requests or duration.
    pub stopped_by: &'static str,
}

/// A capture bound to its address, not yet serving.
pub struct Capture {
    listener: TcpListener,
    state: Arc<State>,
    rx: mpsc::Receiver<Observed>,
    writer: Writer,
    cfg: Config,
}

impl Capture {
    /// Check the configuration, bind, make the output directory.
    pub async fn bind(cfg: Config) -> Result<Capture, CaptureError> {
        let u = cfg.upstream.trim();
        // Request paths are joined to the base's path: a query or fragment would end up inside it.
        let fine = reqwest::Url::parse(u).is_ok_and(|url| {
            matches!(url.scheme(), "http" | "https")
                && url.query().is_none()
                && url.fragment().is_none()
        });
        if !fine {
            return Err(CaptureError::Upstream(crate::util::redact_url(u)));
        }
        if !(1..=65_536).contains(&cfg.block_tokens) {
            return Err(CaptureError::BlockTokens);
        }
        let tokenizer = cfg
            .tokenizer
            .as_deref()
            .map(crate::measure::tokenizer::TokenizerFile::load)
            .transpose()
            .map_err(CaptureError::Tokenizer)?;
        std::fs::create_dir_all(&cfg.out).map_err(|source| CaptureError::Out {
            dir: cfg.out.clone(),
            source,
        })?;
        let listener =
            TcpListener::bind(cfg.listen)
                .await
                .map_err(|source| CaptureError::Listen {
                    addr: cfg.listen,
                    source,
                })?;
        let client = crate::measure::http_client()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(CaptureError::Client)?;
        let (queue, rx) = Queue::new(cfg.queue_lines);
        let state = Arc::new(State {
            client,
            upstream: u.to_string(),
            start: Instant::now(),
            queue,
            next_id: AtomicU64::new(0),
            max_requests: cfg.max_requests,
            bound: Notify::new(),
            counts: Counts::default(),
            keep_text: cfg.keep_text,
            max_body_bytes: cfg.max_body_bytes,
        });
        let writer = Writer {
            blocks: Blocks::new(blocks::random_key().map_err(CaptureError::Key)?, MAX_BLOCKS),
            tokenizer,
            block_tokens: cfg.block_tokens,
            keep_text: cfg.keep_text,
        };
        Ok(Capture {
            listener,
            state,
            rx,
            writer,
            cfg,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until `stop` resolves or a bound is reached; then let open
    /// exchanges finish (up to [`STOP_GRACE`]), flush the trace and write
    /// the summary.
    pub async fn run(
        self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Summary, CaptureError> {
        let Capture {
            listener,
            state,
            rx,
            writer,
            cfg,
        } = self;
        let path = cfg.out.join("trace.jsonl");
        let blocks_from = writer.header(MAX_BLOCKS)["blocks_from"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let writing = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || writer.run(rx, &path, MAX_BLOCKS))
        };
        let stopped_by = serve(&listener, &state, &cfg, stop).await;
        drop(listener);
        state.queue.close();
        let written: Written = writing.await.map_err(|e| CaptureError::Write {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let c = &state.counts;
        let by_endpoint: BTreeMap<&'static str, u64> =
            [Endpoint::Chat, Endpoint::Completions, Endpoint::Embeddings]
                .into_iter()
                .map(|e| (e.as_str(), c.endpoint(e).load(Ordering::Relaxed)))
                .collect();
        let summary = Summary {
            requests: by_endpoint.values().sum(),
            by_endpoint,
            passthrough: c.passthrough.load(Ordering::Relaxed),
            over_bound: c.over_bound.load(Ordering::Relaxed),
            upstream_unreachable: c.upstream_unreachable.load(Ordering::Relaxed),
            upstream_retries: c.upstream_retries.load(Ordering::Relaxed),
            body_too_large: c.too_large.load(Ordering::Relaxed),
            max_body_bytes: cfg.max_body_bytes,
            lines: written.lines,
            dropped_lines: state.queue.dropped(),
            unwritten_lines: written.unwritten,
            write_error: written.error.clone(),
            evicted_blocks: written.evicted_blocks,
            max_blocks: MAX_BLOCKS,
            estimated_lines: written.estimated,
            lengths_estimated: written.estimated > 0,
            blocks_from,
            keep_text: cfg.keep_text,
            stopped_by,
        };
        let at = cfg.out.join("summary.json");
        crate::atomic::write_json_atomic(&at, &summary).map_err(|e| CaptureError::Write {
            path: at,
            source: std::io::Error::other(format!("{e:#}")),
        })?;
        Ok(summary)
    }
}

/// Accept and serve connections until a stop; then close each after its
/// open exchange, cutting what is still open after [`STOP_GRACE`].
async fn serve(
    listener: &TcpListener,
    state: &Arc<State>,
    cfg: &Config,
    stop: impl std::future::Future<Output = ()>,
) -> &'static str {
    let (closing, closed) = watch::channel(false);
    let mut conns = JoinSet::new();
    let deadline = cfg.duration.map(|d| tokio::time::Instant::now() + d);
    let mut stop = std::pin::pin!(stop);
    let why = loop {
        tokio::select! {
            () = &mut stop => break "signal",
            () = state.bound.notified() => break "max_requests",
            () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => break "duration",
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            acc = listener.accept() => {
                let Ok((stream, _)) = acc else { continue };
                let state = state.clone();
                let mut closed = closed.clone();
                conns.spawn(async move {
                    let timer = Arc::new(first_byte::Conn::default());
                    let t = timer.clone();
                    let svc = service_fn(move |req| proxy::handle(state.clone(), t.clone(), req));
                    let io = first_byte::Timed::new(TokioIo::new(stream), timer);
                    let conn = http1::Builder::new().serve_connection(io, svc);
                    let mut conn = std::pin::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        () = async { drop(closed.wait_for(|c| *c).await) } => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
    };
    let _ = closing.send(true);
    let all = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(STOP_GRACE, all).await.is_err() {
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    why
}
