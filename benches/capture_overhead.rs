//! What `infergate capture` adds to the traffic it records (issue 62): 64
//! concurrent streams from the fast source on loopback, read (a) through
//! `infergate capture` and (b) through a plain pass-through proxy written
//! here, measured in one run, one after the other.
//!
//! The pass-through is this binary re-run with `--passthrough URL`: the same
//! runtime (tokio, multi-thread, as `#[tokio::main]` makes it), the same
//! forwarding (a hyper HTTP/1.1 server, the crate's reqwest client builder,
//! the answer's body frames forwarded as they come), and no trace, no tap,
//! no body read whole. Each proxy is a child process of its own, so its CPU
//! time (`/proc/PID/stat`, user + system, over the measured rounds only) is
//! its own, apart from the clients and the source here.
//!
//! The proxy's own time to first byte, per request: from its answer's head
//! arriving from the upstream to the answer's first write to the client's
//! socket (`capture::first_byte`): the trace's `proxy_first_byte_us` for the
//! capture, the same timer around the same socket for the pass-through.
//!
//! Run: `nice -n 10 cargo bench --bench capture_overhead [-- --rounds N --chunks N]`.

mod common;

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::TryStreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyDataStream, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use infergate::capture::first_byte::{Conn, FirstByte, Timed};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use serde_json::{Value, json};

use common::{arg, cpu_of_pid, pct, sorted};

const STREAMS: usize = 64;

fn main() {
    if let Some(up) = arg("--passthrough") {
        passthrough(&up);
        return;
    }
    let rounds: usize = arg("--rounds").map_or(16, |r| r.parse().expect("--rounds N"));
    let chunks: u64 = arg("--chunks").map_or(1000, |c| c.parse().expect("--chunks N"));
    let (_, source) = FastSource::start(FastSourceConfig {
        itl: Duration::from_millis(1),
        threads: 1,
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(STREAMS)
        .build()
        .unwrap();
    println!(
        "capture overhead: {STREAMS} concurrent streams of {chunks} chunks (ITL 1 ms) from the fast source, {rounds} rounds per proxy, after one warm-up round"
    );
    let mut results = Vec::new();
    for kind in [Kind::Passthrough, Kind::Capture] {
        let mut p = Proxy::spawn(kind, &source.base_url());
        let url = format!("http://{}/v1/chat/completions", p.addr);
        rt.block_on(round(&client, &url, 4));
        let cpu0 = cpu_of_pid(p.child.id()).unwrap();
        let t0 = Instant::now();
        let mut streamed = 0;
        for _ in 0..rounds {
            streamed += rt.block_on(round(&client, &url, chunks));
        }
        let wall = t0.elapsed();
        let cpu = cpu_of_pid(p.child.id()).unwrap() - cpu0;
        let first_us = p.stop();
        results.push(Measured {
            kind,
            requests: rounds * STREAMS,
            chunks: streamed,
            wall,
            cpu,
            first_us: sorted(first_us),
        });
    }
    report(&results);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Passthrough,
    Capture,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Passthrough => "plain pass-through",
            Kind::Capture => "infergate capture",
        }
    }
}

struct Measured {
    kind: Kind,
    requests: usize,
    chunks: u64,
    wall: Duration,
    cpu: Duration,
    first_us: Vec<f64>,
}

impl Measured {
    fn cpu_per_million(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.chunks as f64
    }
}

fn report(r: &[Measured]) {
    println!();
    println!(
        "| proxy | requests | chunks | wall s | proxy first byte p50 µs | p99 µs | n | CPU s | CPU s per 1M chunks |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for m in r {
        println!(
            "| {} | {} | {} | {:.1} | {:.0} | {:.0} | {} | {:.2} | {:.2} |",
            m.kind.name(),
            m.requests,
            m.chunks,
            m.wall.as_secs_f64(),
            pct(&m.first_us, 0.5),
            pct(&m.first_us, 0.99),
            m.first_us.len(),
            m.cpu.as_secs_f64(),
            m.cpu_per_million()
        );
    }
    if let [p, c] = r {
        let p99 = pct(&c.first_us, 0.99);
        let ratio = c.cpu_per_million() / p.cpu_per_million();
        println!();
        println!(
            "capture / pass-through: first byte p50 {:.0} vs {:.0} µs, p99 {:.0} vs {:.0} µs; CPU per chunk {:.2}×",
            pct(&c.first_us, 0.5),
            pct(&p.first_us, 0.5),
            p99,
            pct(&p.first_us, 0.99),
            ratio
        );
        println!(
            "targets: capture's own first byte ≤ 1 ms at p99: {} ({p99:.0} µs); CPU within 2× of the pass-through: {} ({ratio:.2}×)",
            if p99 <= 1000.0 { "met" } else { "not met" },
            if ratio <= 2.0 { "met" } else { "not met" }
        );
    }
}

/// One round: `STREAMS` streams at once, each read to its end; the content
/// chunks streamed.
async fn round(client: &reqwest::Client, url: &str, chunks: u64) -> u64 {
    let body = json!({"model": "fastsource", "stream": true, "max_tokens": chunks,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "a prompt of a few words, the same for every stream"}]});
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..STREAMS {
        let (client, url, body) = (client.clone(), url.to_string(), body.clone());
        set.spawn(async move {
            let mut r = client.post(&url).json(&body).send().await.expect("send");
            assert_eq!(r.status(), 200);
            let mut n = 0;
            while let Some(c) = r.chunk().await.expect("chunk") {
                n += c.len();
            }
            assert!(n > 0);
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    chunks * STREAMS as u64
}

/// A proxy under test, in a child process.
struct Proxy {
    kind: Kind,
    child: Child,
    addr: String,
    out: tempfile::TempDir,
}

impl Proxy {
    fn spawn(kind: Kind, upstream: &str) -> Proxy {
        let out = tempfile::tempdir().unwrap();
        let mut child = match kind {
            Kind::Passthrough => Command::new(std::env::current_exe().unwrap())
                .args(["--passthrough", upstream])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn the pass-through"),
            Kind::Capture => {
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port();
                Command::new(env!("CARGO_BIN_EXE_infergate"))
                    .args(["capture", "--listen", &format!("127.0.0.1:{port}")])
                    .args(["--upstream", upstream])
                    .arg("--out")
                    .arg(out.path())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn infergate capture")
            }
        };
        let mut line = String::new();
        let addr = match kind {
            Kind::Passthrough => {
                BufReader::new(child.stdout.as_mut().unwrap())
                    .read_line(&mut line)
                    .unwrap();
                line.trim().strip_prefix("LISTEN ").unwrap().to_string()
            }
            Kind::Capture => {
                BufReader::new(child.stderr.as_mut().unwrap())
                    .read_line(&mut line)
                    .unwrap();
                line.split("listening on ")
                    .nth(1)
                    .and_then(|r| r.split(',').next())
                    .unwrap_or_else(|| panic!("{line}"))
                    .to_string()
            }
        };
        Proxy {
            kind,
            child,
            addr,
            out,
        }
    }

    /// Stop it; the measured requests' first-byte times, µs (the warm-up
    /// round's left out: it came first).
    fn stop(&mut self) -> Vec<f64> {
        match self.kind {
            Kind::Passthrough => {
                drop(self.child.stdin.take());
                let mut s = String::new();
                self.child
                    .stdout
                    .as_mut()
                    .unwrap()
                    .read_to_string(&mut s)
                    .unwrap();
                self.child.wait().unwrap();
                let all: Vec<Option<u64>> = serde_json::from_str(s.trim()).unwrap();
                all.into_iter()
                    .skip(STREAMS)
                    .flatten()
                    .map(|u| u as f64)
                    .collect()
            }
            Kind::Capture => {
                // SAFETY: a signal to the child this bench started, by its id.
                unsafe {
                    libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
                }
                let mut rest = String::new();
                let _ = self
                    .child
                    .stderr
                    .as_mut()
                    .unwrap()
                    .read_to_string(&mut rest);
                assert!(self.child.wait().unwrap().success(), "{rest}");
                let text = std::fs::read_to_string(self.out.path().join("trace.jsonl")).unwrap();
                text.lines()
                    .skip(1)
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|l| l["id"].as_u64().is_some_and(|id| id >= STREAMS as u64))
                    .filter_map(|l| l["proxy_first_byte_us"].as_f64())
                    .collect()
            }
        }
    }
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// `--passthrough URL`: forward everything to URL until stdin closes, then
/// print each answer's first-byte time (µs, in the order the heads came).
fn passthrough(upstream: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("LISTEN {}", l.local_addr().unwrap());
        std::io::stdout().flush().unwrap();
        let client = infergate::measure::http_client()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let upstream: Arc<str> = upstream.trim_end_matches('/').into();
        let times: Arc<Mutex<Vec<Arc<FirstByte>>>> = Arc::default();
        let mut stdin_closed = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        });
        loop {
            tokio::select! {
                _ = &mut stdin_closed => break,
                acc = l.accept() => {
                    let Ok((stream, _)) = acc else { continue };
                    let conn = Arc::new(Conn::default());
                    let (client, upstream, times, c) =
                        (client.clone(), upstream.clone(), times.clone(), conn.clone());
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req| {
                            forward(client.clone(), upstream.clone(), c.clone(), times.clone(), req)
                        });
                        let io = Timed::new(TokioIo::new(stream), conn);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, svc)
                            .await;
                    });
                }
            }
        }
        let all: Vec<Option<u64>> = times.lock().unwrap().iter().map(|t| t.us()).collect();
        println!("{}", serde_json::to_string(&all).unwrap());
    });
}

async fn forward(
    client: reqwest::Client,
    upstream: Arc<str>,
    conn: Arc<Conn>,
    times: Arc<Mutex<Vec<Arc<FirstByte>>>>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{upstream}{pq}");
    let (parts, body) = req.into_parts();
    let mut headers = parts.headers;
    for h in [header::HOST, header::CONNECTION, header::TRANSFER_ENCODING] {
        headers.remove(h);
    }
    let sent = client
        .request(parts.method, url)
        .headers(headers)
        .body(reqwest::Body::wrap_stream(BodyDataStream::new(body)))
        .send()
        .await;
    let Ok(up) = sent else {
        let mut r = Response::new(
            Full::new(Bytes::from_static(b"no upstream\n"))
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        return Ok(r);
    };
    times.lock().unwrap().push(conn.arm());
    let status = up.status();
    let mut headers = up.headers().clone();
    for h in [header::CONNECTION, header::TRANSFER_ENCODING] {
        headers.remove(h);
    }
    let body = StreamBody::new(
        up.bytes_stream()
            .map_ok(Frame::data)
            .map_err(std::io::Error::other),
    )
    .boxed_unsync();
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    Ok(r)
}
