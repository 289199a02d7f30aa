//! Throughput ceiling, CPU cost and peak memory of the load client.
//!
//! The fast source runs in a child process of its own (this binary re-run
//! with `--serve`), so `getrusage(RUSAGE_SELF)` here counts only the client.
//! Three clients read the same streams from it, one after the other:
//! - `infergate`: `loadgen::drive` (closed loop) + `Client::stream_timed`,
//!   building a request body and a `RequestRecord` per request and keeping
//!   every record, as `infergate run` does;
//! - `raw hyper`: one `hyper::client::conn::http1` connection per worker,
//!   counting SSE events in the body frames and nothing else (no timestamps,
//!   no JSON): the practical ceiling for an HTTP/1.1 client on this runtime;
//! - `AIPerf` (when `--aiperf PATH` or `$AIPERF` names its binary), run as a
//!   child against the same source; its CPU time is `RUSAGE_CHILDREN` around
//!   the run (its whole process tree), and its sustained cost is the
//!   difference between a long and a short run, so start-up is not charged.
//!
//! `--pin` puts the source on CPU 0 and this process (its runtime threads and
//! AIPerf) on CPU 1; without it the scheduler places everything on both.
//!
//! Run: `cargo bench --bench throughput [-- --pin] [-- --aiperf PATH]`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use infergate::config::suite::Arrival;
use infergate::measure::client::{Client, ClientConfig, Endpoint, chat_body};
use infergate::measure::loadgen;
use infergate::measure::record::{Outcome, RequestRecord};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use serde_json::{Map, Value, json};

use common::{arg, cpu_children, cpu_of_pid, cpu_self, flag, pin_to_cpu, status_kb};

/// Events per stream besides the content chunks: role, finish, usage, `[DONE]`.
const EXTRA_EVENTS: u64 = 4;
const SOURCE_CPU: usize = 0;
const CLIENT_CPU: usize = 1;

#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    concurrency: usize,
    chunks: u64,
    requests: usize,
}

/// One client's run of one workload.
struct Measured {
    client: String,
    requests: usize,
    failed: usize,
    chunks: u64,
    wall: Duration,
    cpu: Duration,
    source_cpu: Option<Duration>,
}

impl Measured {
    fn chunks_per_s(&self) -> f64 {
        self.chunks as f64 / self.wall.as_secs_f64()
    }
    fn requests_per_s(&self) -> f64 {
        (self.requests - self.failed) as f64 / self.wall.as_secs_f64()
    }
    fn cpu_s_per_m_chunks(&self) -> f64 {
        self.cpu.as_secs_f64() / self.chunks as f64 * 1e6
    }
}

fn body(chunks: u64) -> Value {
    let mut extra = Map::new();
    extra.insert("model".into(), json!("fastsource"));
    chat_body(
        json!([{"role": "user", "content": "bench"}]),
        chunks,
        0.0,
        None,
        extra,
    )
}

/// The fast source in a child process; dropping it closes the child's stdin, which stops it.
struct SourceProcess {
    child: Child,
    addr: SocketAddr,
}

impl SourceProcess {
    fn spawn(cpu: Option<usize>) -> SourceProcess {
        let exe = std::env::current_exe().expect("current exe");
        let mut cmd = Command::new(exe);
        cmd.arg("--serve");
        if let Some(c) = cpu {
            cmd.args(["--cpu", &c.to_string()]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn source");
        let mut line = String::new();
        if let Some(out) = child.stdout.as_mut() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let addr = line
            .trim()
            .strip_prefix("LISTEN ")
            .and_then(|a| a.parse().ok())
            .expect("source address");
        SourceProcess { child, addr }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn cpu(&self) -> Option<Duration> {
        cpu_of_pid(self.child.id())
    }
}

impl Drop for SourceProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// `--serve`: run the fast source until stdin closes.
fn serve() {
    if let Some(cpu) = arg("--cpu").and_then(|c| c.parse().ok()) {
        pin_to_cpu(cpu);
    }
    let cfg = FastSourceConfig {
        threads: 1,
        ..Default::default()
    };
    let (addr, src) = FastSource::start(cfg).expect("fast source");
    println!("LISTEN {addr}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
        line.clear();
    }
    drop(src);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// `requests` requests through `loadgen::drive` + the client; every record kept.
async fn infergate_requests(
    client: &Arc<Client>,
    concurrency: usize,
    requests: usize,
    chunks: u64,
) -> Vec<RequestRecord> {
    let template = Arc::new(body(chunks));
    let client = client.clone();
    let run_t0 = Instant::now();
    let mut records = Vec::with_capacity(requests);
    loadgen::drive(
        Arrival::Closed,
        concurrency,
        requests,
        0,
        move |index, scheduled| {
            let (client, template) = (client.clone(), template.clone());
            async move {
                // A body per request, as the runner builds one per request.
                let req = (*template).clone();
                let (t_send, capture) = client.stream_timed(Endpoint::Chat, &req).await;
                let outcome = capture.failure.as_ref().map_or(Outcome::Ok, |f| f.class);
                RequestRecord {
                    cell: "bench".into(),
                    index,
                    send_offset_ms: (t_send - run_t0).as_secs_f64() * 1e3,
                    queue_ms: t_send
                        .saturating_duration_since(scheduled.into_std())
                        .as_secs_f64()
                        * 1e3,
                    target_prompt_tokens: None,
                    template_prompt_tokens: None,
                    turn: None,
                    detail: capture.failure.as_ref().map(|f| f.message.clone()),
                    capacity: None,
                    capture,
                    outcome,
                }
            }
        },
        |r| records.push(r),
    )
    .await;
    records
}

fn run_infergate(rt: &tokio::runtime::Runtime, src: &SourceProcess, w: Workload) -> Measured {
    let client = Arc::new(Client::new(ClientConfig::new(src.url())).expect("client"));
    // Warm-up: open the pooled connections before the clock starts.
    rt.block_on(infergate_requests(&client, w.concurrency, w.concurrency, 2));
    let (cpu0, scpu0, t) = (cpu_self(), src.cpu(), Instant::now());
    let recs = rt.block_on(infergate_requests(
        &client,
        w.concurrency,
        w.requests,
        w.chunks,
    ));
    let wall = t.elapsed();
    let cpu = cpu_self() - cpu0;
    let source_cpu = src.cpu().zip(scpu0).map(|(a, b)| a - b);
    let full = |r: &&RequestRecord| {
        r.outcome == Outcome::Ok && r.capture.chunk_ms.len() as u64 == w.chunks
    };
    let ok = recs.iter().filter(full).count();
    Measured {
        client: "infergate client + loadgen".into(),
        requests: recs.len(),
        failed: recs.len() - ok,
        chunks: recs
            .iter()
            .filter(full)
            .map(|r| r.capture.chunk_ms.len() as u64)
            .sum(),
        wall,
        cpu,
        source_cpu,
    }
}

/// One raw hyper connection doing requests until the shared counter runs out.
/// Returns (requests whose event count was complete, requests done, content chunks).
async fn raw_worker(
    addr: SocketAddr,
    payload: Bytes,
    chunks: u64,
    next: Arc<AtomicUsize>,
    count: usize,
) -> (usize, usize, u64) {
    let (mut ok, mut done, mut content) = (0, 0, 0);
    let Ok(sock) = tokio::net::TcpStream::connect(addr).await else {
        return (ok, done, content);
    };
    let _ = sock.set_nodelay(true);
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(sock)).await
    else {
        return (ok, done, content);
    };
    tokio::spawn(conn);
    let host = addr.to_string();
    while next.fetch_add(1, Ordering::Relaxed) < count {
        done += 1;
        if sender.ready().await.is_err() {
            break;
        }
        let Ok(req) = hyper::Request::post("/v1/chat/completions")
            .header(hyper::header::HOST, &host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "text/event-stream")
            .body(Full::new(payload.clone()))
        else {
            break;
        };
        let Ok(resp) = sender.send_request(req).await else {
            break;
        };
        let mut body = resp.into_body();
        let mut newlines = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(d) = frame.data_ref() {
                // Every event of the source is `data: …\n\n`: two newlines per event.
                newlines += d.iter().filter(|&&b| b == b'\n').count() as u64;
            }
        }
        if newlines / 2 == chunks + EXTRA_EVENTS {
            ok += 1;
            content += chunks;
        }
    }
    (ok, done, content)
}

async fn raw_requests(
    addr: SocketAddr,
    concurrency: usize,
    requests: usize,
    chunks: u64,
) -> (usize, usize, u64) {
    let payload = Bytes::from(body(chunks).to_string());
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            tokio::spawn(raw_worker(
                addr,
                payload.clone(),
                chunks,
                next.clone(),
                requests,
            ))
        })
        .collect();
    let (mut ok, mut done, mut content) = (0, 0, 0);
    for w in workers {
        if let Ok((o, d, c)) = w.await {
            ok += o;
            done += d;
            content += c;
        }
    }
    (ok, done, content)
}

fn run_raw(rt: &tokio::runtime::Runtime, src: &SourceProcess, w: Workload) -> Measured {
    rt.block_on(raw_requests(src.addr, w.concurrency, w.concurrency, 2));
    let (cpu0, scpu0, t) = (cpu_self(), src.cpu(), Instant::now());
    let (ok, done, content) =
        rt.block_on(raw_requests(src.addr, w.concurrency, w.requests, w.chunks));
    let wall = t.elapsed();
    Measured {
        client: "raw hyper (ceiling)".into(),
        requests: done.max(ok),
        failed: done.max(ok) - ok,
        chunks: content,
        wall,
        cpu: cpu_self() - cpu0,
        source_cpu: src.cpu().zip(scpu0).map(|(a, b)| a - b),
    }
}

/// One plain socket doing requests until the shared counter runs out: writes
/// the request, counts `\n\n` event ends until the terminal chunk. No HTTP
/// parsing, no timestamps, no JSON: a floor, not a usable client.
async fn socket_worker(
    addr: SocketAddr,
    request: Arc<Vec<u8>>,
    chunks: u64,
    next: Arc<AtomicUsize>,
    count: usize,
) -> (usize, usize, u64) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut ok, mut done, mut content) = (0, 0, 0);
    let Ok(mut sock) = tokio::net::TcpStream::connect(addr).await else {
        return (ok, done, content);
    };
    let _ = sock.set_nodelay(true);
    let mut buf = vec![0u8; 64 << 10];
    while next.fetch_add(1, Ordering::Relaxed) < count {
        done += 1;
        if sock.write_all(&request).await.is_err() {
            break;
        }
        let (mut events, mut prev, mut tail) = (0u64, 0u8, Vec::with_capacity(16));
        loop {
            let Ok(n) = sock.read(&mut buf).await else {
                return (ok, done, content);
            };
            if n == 0 {
                return (ok, done, content);
            }
            let b = &buf[..n];
            events += u64::from(prev == b'\n' && b[0] == b'\n');
            events += b
                .iter()
                .zip(&b[1..])
                .filter(|&(x, y)| *x == b'\n' && *y == b'\n')
                .count() as u64;
            prev = b[n - 1];
            tail.extend_from_slice(&b[n.saturating_sub(5)..]);
            let keep = tail.len().saturating_sub(5);
            tail.drain(..keep);
            if tail == b"0\r\n\r\n" {
                break;
            }
        }
        if events == chunks + EXTRA_EVENTS {
            ok += 1;
            content += chunks;
        }
    }
    (ok, done, content)
}

fn run_socket(rt: &tokio::runtime::Runtime, src: &SourceProcess, w: Workload) -> Measured {
    let payload = body(w.chunks).to_string();
    let request = Arc::new(
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n\r\n{payload}",
            src.addr,
            payload.len()
        )
        .into_bytes(),
    );
    let go = |requests: usize| {
        let next = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..w.concurrency)
            .map(|_| {
                rt.spawn(socket_worker(
                    src.addr,
                    request.clone(),
                    w.chunks,
                    next.clone(),
                    requests,
                ))
            })
            .collect();
        rt.block_on(async {
            let (mut ok, mut done, mut content) = (0, 0, 0);
            for wk in workers {
                if let Ok((o, d, c)) = wk.await {
                    ok += o;
                    done += d;
                    content += c;
                }
            }
            (ok, done, content)
        })
    };
    let _ = go(w.concurrency);
    let (cpu0, scpu0, t) = (cpu_self(), src.cpu(), Instant::now());
    let (ok, done, content) = go(w.requests);
    let wall = t.elapsed();
    Measured {
        client: "raw socket (floor: no HTTP parsing, no JSON)".into(),
        requests: done.max(ok),
        failed: done.max(ok) - ok,
        chunks: content,
        wall,
        cpu: cpu_self() - cpu0,
        source_cpu: src.cpu().zip(scpu0).map(|(a, b)| a - b),
    }
}

/// What one AIPerf run reported, and what it cost.
struct AiperfRun {
    requests: usize,
    errors: usize,
    request_throughput: f64,
    token_throughput: f64,
    wall: Duration,
    cpu: Duration,
}

/// `metric.avg` from AIPerf's JSON export (the layout has moved between versions; accept both).
fn aiperf_metric(v: &Value, name: &str) -> Option<f64> {
    let m = v.get(name).or_else(|| v.get("records")?.get(name))?;
    m.get("avg").and_then(Value::as_f64).or_else(|| m.as_f64())
}

fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_file(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

/// How to run AIPerf: its binary and a Hugging Face cache holding a local tokenizer.
struct AiperfSetup {
    bin: PathBuf,
    hf_cache: Option<PathBuf>,
}

/// The tokenizer `scripts/bench.sh` puts into AIPerf's Hugging Face cache
/// (AIPerf's `builtin` tokenizer downloads its encoding from the internet).
const AIPERF_TOKENIZER: &str = "local/infergate-bench-tokenizer";

fn run_aiperf(
    setup: &AiperfSetup,
    src: &SourceProcess,
    w: Workload,
    requests: usize,
    dir: &Path,
) -> Result<AiperfRun, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("aiperf.log")).map_err(|e| e.to_string())?;
    let n = |x: usize| x.to_string();
    let args: Vec<String> = [
        "profile",
        "--model",
        "fastsource",
        "--tokenizer",
        if setup.hf_cache.is_some() {
            AIPERF_TOKENIZER
        } else {
            "builtin"
        },
        "--url",
        &src.url(),
        "--endpoint-type",
        "chat",
        "--streaming",
        "--use-server-token-count",
        "--concurrency",
        &n(w.concurrency),
        "--request-count",
        &n(requests),
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        &w.chunks.to_string(),
        "--random-seed",
        "1",
        "--ui-type",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--artifact-dir",
        &dir.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (cpu0, t) = (cpu_children(), Instant::now());
    let mut cmd = Command::new(&setup.bin);
    if let Some(cache) = &setup.hf_cache {
        cmd.env("HF_HUB_CACHE", cache);
    }
    let status = cmd
        .args(&args)
        // Everything stays on this machine: no hub downloads, no telemetry.
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("DO_NOT_TRACK", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .status()
        .map_err(|e| format!("cannot start {}: {e}", setup.bin.display()))?;
    let wall = t.elapsed();
    let cpu = cpu_children() - cpu0;
    let tail = || {
        let text = std::fs::read_to_string(dir.join("aiperf.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" / ")
    };
    if !status.success() {
        return Err(format!("aiperf exited with {status}: {}", tail()));
    }
    let json = find_file(dir, "profile_export_aiperf.json")
        .ok_or_else(|| format!("no profile_export_aiperf.json: {}", tail()))?;
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let get = |k: &str| aiperf_metric(&v, k);
    Ok(AiperfRun {
        requests: get("request_count").unwrap_or(0.0) as usize,
        errors: get("error_request_count").unwrap_or(0.0) as usize,
        request_throughput: get("request_throughput")
            .ok_or_else(|| "no request_throughput in export".to_string())?,
        token_throughput: get("output_token_throughput").unwrap_or(f64::NAN),
        wall,
        cpu,
    })
}

/// `--mem N --url URL`: run N requests (every record kept) and print the peak RSS.
fn mem_child() {
    let n: usize = arg("--mem").and_then(|v| v.parse().ok()).unwrap_or(0);
    let url = arg("--url").expect("--url");
    let rt = runtime();
    let client = Arc::new(Client::new(ClientConfig::new(url)).expect("client"));
    let recs = rt.block_on(infergate_requests(&client, 64, n, 16));
    let ok = recs.iter().filter(|r| r.outcome == Outcome::Ok).count();
    println!(
        "VMHWM {} OK {ok}",
        status_kb("VmHWM").map_or(-1, |v| v as i64)
    );
}

fn peak_kb(src: &SourceProcess, n: usize) -> Result<(u64, usize), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args(["--mem", &n.to_string(), "--url", &src.url()])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some("VMHWM"), Some(kb), Some("OK"), Some(ok)) => Ok((
            kb.parse().map_err(|_| text.to_string())?,
            ok.parse().map_err(|_| text.to_string())?,
        )),
        _ => Err(format!("unexpected output: {text}")),
    }
}

fn row(m: &Measured, ceiling: Option<&Measured>) {
    let ratio = ceiling.map_or(String::from("—"), |c| {
        format!("{:.0}%", 100.0 * m.chunks_per_s() / c.chunks_per_s())
    });
    let src = m.source_cpu.map_or(String::from("?"), |s| {
        format!("{:.0}%", 100.0 * s.as_secs_f64() / m.wall.as_secs_f64())
    });
    println!(
        "| {} | {}/{} | {:.0} | {:.0} | {} | {:.2} | {:.0}% | {} |",
        m.client,
        m.requests - m.failed,
        m.requests,
        m.chunks_per_s(),
        m.requests_per_s(),
        ratio,
        m.cpu_s_per_m_chunks(),
        100.0 * m.cpu.as_secs_f64() / m.wall.as_secs_f64(),
        src
    );
}

fn main() {
    if flag("--serve") {
        return serve();
    }
    if arg("--mem").is_some() {
        return mem_child();
    }
    let pin = flag("--pin");
    let quick = flag("--quick");
    let aiperf = arg("--aiperf")
        .or_else(|| std::env::var("AIPERF").ok())
        .filter(|p| !p.is_empty())
        .map(|bin| AiperfSetup {
            bin: PathBuf::from(bin),
            hf_cache: arg("--aiperf-hf-cache").map(PathBuf::from),
        });
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let pinned = pin && cores >= 2 && pin_to_cpu(CLIENT_CPU);
    let src = SourceProcess::spawn(pinned.then_some(SOURCE_CPU));
    let rt = runtime();
    let scale = if quick { 4 } else { 1 };
    let workloads = [
        Workload {
            name: "long streams",
            concurrency: 64,
            chunks: 1000,
            requests: 1280 / scale,
        },
        Workload {
            name: "short streams",
            concurrency: 64,
            chunks: 16,
            requests: 24_000 / scale,
        },
    ];
    let placement = if pinned {
        format!("source pinned to CPU {SOURCE_CPU}, clients (and AIPerf) to CPU {CLIENT_CPU}")
    } else {
        format!("unpinned: source, clients and AIPerf share all {cores} CPUs")
    };
    println!("### Throughput ceiling ({placement})");
    println!();
    println!(
        "Fast source in its own process (1 thread). CPU = user+sys of the client process (getrusage); source CPU from /proc."
    );
    // `--profile NAME` runs only infergate on one workload, for perf.
    if let Some(name) = arg("--profile") {
        for w in workloads.iter().filter(|w| w.name.starts_with(&name)) {
            let m = if flag("--raw") {
                run_raw(&rt, &src, *w)
            } else {
                run_infergate(&rt, &src, *w)
            };
            row(&m, None);
        }
        return;
    }
    for w in workloads {
        println!();
        println!(
            "**{}**: concurrency {}, {} content chunks per request, {} requests",
            w.name, w.concurrency, w.chunks, w.requests
        );
        println!();
        println!(
            "| client | ok/requests | chunks/s | requests/s | of ceiling | CPU-s per 1M chunks | client CPU | source CPU |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        // Interleave the clients and keep each one's best of two passes: on a
        // shared machine a neighbour's burst then hurts one pass, not the ratio.
        let best = |a: Measured, b: Measured| {
            if b.chunks_per_s() > a.chunks_per_s() {
                b
            } else {
                a
            }
        };
        let (mut sock, mut raw, mut ig) = (
            run_socket(&rt, &src, w),
            run_raw(&rt, &src, w),
            run_infergate(&rt, &src, w),
        );
        sock = best(sock, run_socket(&rt, &src, w));
        raw = best(raw, run_raw(&rt, &src, w));
        ig = best(ig, run_infergate(&rt, &src, w));
        row(&sock, Some(&raw));
        row(&raw, None);
        row(&ig, Some(&raw));
        let ratio = ig.chunks_per_s() / raw.chunks_per_s();
        let tag = if pinned { "pinned" } else { "unpinned" };
        println!(
            "SUMMARY|CPU-seconds per 1M streamed chunks, {} ({tag})|infergate {:.2}, raw hyper {:.2}, raw socket {:.2}|—|measured",
            w.name,
            ig.cpu_s_per_m_chunks(),
            raw.cpu_s_per_m_chunks(),
            sock.cpu_s_per_m_chunks()
        );
        let ig_chunks_per_cpu = ig.chunks as f64 / ig.cpu.as_secs_f64();
        println!(
            "SUMMARY|infergate / raw-hyper ceiling, {} ({tag})|{:.0}%|≥ 70%|{}",
            w.name,
            ratio * 100.0,
            if ratio >= 0.7 { "met" } else { "not met" }
        );

        let Some(setup) = aiperf.as_ref() else {
            println!("| AIPerf | not run: no AIPerf binary given | | | | | | |");
            continue;
        };
        // Only the long-stream workload: AIPerf's start-up takes seconds per run.
        if w.name != "long streams" {
            println!(
                "| AIPerf | not run on this workload (each run starts up for ~10 s) | | | | | | |"
            );
            continue;
        }
        let dir =
            std::env::temp_dir().join(format!("infergate-bench-aiperf-{}", std::process::id()));
        // Two runs; their difference is AIPerf's sustained cost without its start-up.
        let short = w.concurrency / 2;
        let long = (w.requests / 8).max(short * 5);
        let r_short = run_aiperf(setup, &src, w, short, &dir.join("short"));
        let r_long = run_aiperf(setup, &src, w, long, &dir.join("long"));
        match (r_short, r_long) {
            (Ok(s), Ok(l)) => {
                let chunks_long = (l.requests - l.errors) as f64 * w.chunks as f64;
                let chunks_short = (s.requests - s.errors) as f64 * w.chunks as f64;
                let marginal_cpu = l.cpu.as_secs_f64() - s.cpu.as_secs_f64();
                let per_m = marginal_cpu / (chunks_long - chunks_short) * 1e6;
                println!(
                    "| AIPerf {} | {}/{} | {:.0} | {:.1} | {:.0}% | {:.2} (whole run: {:.2}) | {:.0}% of wall, incl. start-up | |",
                    aiperf_version(&setup.bin),
                    l.requests - l.errors,
                    long,
                    l.request_throughput * w.chunks as f64,
                    l.request_throughput,
                    100.0 * l.request_throughput * w.chunks as f64 / raw.chunks_per_s(),
                    per_m,
                    l.cpu.as_secs_f64() / chunks_long * 1e6,
                    100.0 * l.cpu.as_secs_f64() / l.wall.as_secs_f64(),
                );
                println!();
                println!(
                    "AIPerf: its own reported request throughput × {} chunks (output token throughput {:.0} tok/s with server token counts); wall {:.1} s for {} requests and {:.1} s for {} requests, process-tree CPU {:.1} s and {:.1} s; sustained CPU per chunk = difference of the two runs.",
                    w.chunks,
                    l.token_throughput,
                    l.wall.as_secs_f64(),
                    long,
                    s.wall.as_secs_f64(),
                    short,
                    l.cpu.as_secs_f64(),
                    s.cpu.as_secs_f64()
                );
                let aiperf_chunks_per_cpu = 1e6 / per_m;
                let x = ig_chunks_per_cpu / aiperf_chunks_per_cpu;
                println!(
                    "SUMMARY|CPU-seconds per 1M streamed chunks, AIPerf, {} ({tag})|{per_m:.1} sustained ({:.1} with start-up)|—|measured",
                    w.name,
                    l.cpu.as_secs_f64() / chunks_long * 1e6
                );
                println!(
                    "SUMMARY|chunks per CPU-second, infergate vs AIPerf ({tag})|{x:.1}×|≥ 5×|{}",
                    if x >= 5.0 { "met" } else { "not met" }
                );
            }
            (Err(e), _) | (_, Err(e)) => {
                println!("| AIPerf | failed: {} | | | | | | |", e.replace('|', "/"));
                println!(
                    "SUMMARY|chunks per CPU-second, infergate vs AIPerf ({tag})|AIPerf failed|≥ 5×|not measured"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    if !pinned {
        println!();
        println!(
            "### Peak memory (infergate client + loadgen, 16-chunk requests, concurrency 64, every record kept)"
        );
        println!();
        println!("| requests | VmHWM of the child process |");
        println!("|---|---|");
        let n = if quick { 2_500 } else { 10_000 };
        let mut base = None;
        for k in [0, n] {
            match peak_kb(&src, k) {
                Ok((kb, ok)) => {
                    println!("| {k} ({ok} ok) | {:.1} MiB |", kb as f64 / 1024.0);
                    if k == 0 {
                        base = Some(kb);
                    } else if let Some(b) = base {
                        println!(
                            "SUMMARY|peak memory, {n} requests with every record kept|VmHWM {:.1} MiB ({:.1} MiB above an idle client)|—|measured",
                            kb as f64 / 1024.0,
                            (kb.saturating_sub(b)) as f64 / 1024.0
                        );
                    }
                }
                Err(e) => println!("| {k} | failed: {e} |"),
            }
        }
    }
}

fn aiperf_version(bin: &Path) -> String {
    // The venv's pip knows the installed version without importing AIPerf.
    let pip = bin.with_file_name("pip");
    Command::new(pip)
        .args(["show", "aiperf"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("Version: ").map(str::to_owned))
        })
        .unwrap_or_default()
}
