//! The streaming client's own timing error, against the fast source's known schedule.
//!
//! The fast source sends content chunk `i` at `t0 + ttft + i·itl`, `t0` being
//! when it has read the whole request. The client's TTFT is measured from
//! `t_send`, before the request is written, so `measured − scheduled` TTFT
//! holds request transmission and parsing as well as the client's reaction
//! time; ITL error is `measured gap − itl`, and is signed (a late chunk makes
//! the next gap short). The source's own lateness (timerfd wake-up, one thread
//! for every stream) is in these numbers too: they bound the client's error
//! from above. Both sides share this machine's cores.
//!
//! The `raw` row is a reference: a blocking socket reader with no HTTP
//! library, no async runtime and no JSON, against the same source. The gap
//! between it and the `1` row is what the client itself adds.
//!
//! Run: `cargo bench --bench timing` (release). Takes about 15 s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use infergate::client::{Client, ClientConfig, Endpoint, chat_body};
use infergate::fastsource::{FastSource, FastSourceConfig};
use infergate::record::StreamCapture;
use serde_json::{Map, Value, json};

const TTFT_MS: f64 = 20.0;
const ITL_MS: f64 = 4.0;
const CHUNKS: u64 = 32;

fn body(chunks: u64, schedule: Option<(f64, f64)>) -> Value {
    let mut extra = Map::new();
    extra.insert("model".into(), json!("fastsource"));
    if let Some((ttft, itl)) = schedule {
        extra.insert("fastsource".into(), json!({"ttft_ms": ttft, "itl_ms": itl}));
    }
    chat_body(
        json!([{"role": "user", "content": "bench"}]),
        chunks,
        0.0,
        None,
        extra,
    )
}

/// Closed loop: `conc` workers, `per_worker` requests each, after one unrecorded warmup each.
async fn run(
    client: &Arc<Client>,
    conc: usize,
    per_worker: usize,
    body: Value,
) -> (Vec<StreamCapture>, Duration) {
    let body = Arc::new(body);
    let warm = Arc::new(self::body(2, None));
    let warmups: Vec<_> = (0..conc)
        .map(|_| {
            let (client, warm) = (client.clone(), warm.clone());
            tokio::spawn(async move { client.stream(Endpoint::Chat, &warm).await })
        })
        .collect();
    for w in warmups {
        let _ = w.await;
    }
    let t = Instant::now();
    let workers: Vec<_> = (0..conc)
        .map(|_| {
            let (client, body) = (client.clone(), body.clone());
            tokio::spawn(async move {
                let mut out = Vec::with_capacity(per_worker);
                for _ in 0..per_worker {
                    out.push(client.stream(Endpoint::Chat, &body).await);
                }
                out
            })
        })
        .collect();
    let mut caps = Vec::new();
    for w in workers {
        caps.extend(w.await.unwrap_or_default());
    }
    (caps, t.elapsed())
}

/// Linear interpolation between closest ranks (p50 of an even count is the mean of the middle two).
fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let r = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo as f64)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Reference without reqwest, tokio or JSON: one blocking socket on its own
/// thread, arrival times taken per read, chunks found by a byte search. What
/// remains in its error is the source's lateness plus the kernel's loopback path.
fn raw_reference(addr: std::net::SocketAddr, requests: usize, body: &Value) -> Vec<StreamCapture> {
    use std::io::{Read, Write};
    let payload = body.to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
        payload.len()
    );
    let needle: &[u8] = br#""delta":{"content":"#;
    let mut out = Vec::new();
    let Ok(mut sock) = std::net::TcpStream::connect(addr) else {
        return out;
    };
    let _ = sock.set_nodelay(true);
    let mut buf = vec![0u8; 1 << 16];
    let mut acc = Vec::new();
    for _ in 0..requests {
        acc.clear();
        let t_send = Instant::now();
        if sock.write_all(req.as_bytes()).is_err() {
            break;
        }
        let mut cap = StreamCapture::default();
        while !acc.ends_with(b"0\r\n\r\n") {
            let Ok(n) = sock.read(&mut buf) else { break };
            if n == 0 {
                break;
            }
            let at = t_send.elapsed().as_secs_f64() * 1000.0;
            let from = acc.len().saturating_sub(needle.len() - 1);
            acc.extend_from_slice(&buf[..n]);
            let hits = acc[from..]
                .windows(needle.len())
                .filter(|w| *w == needle)
                .count();
            cap.chunk_ms.extend(std::iter::repeat_n(at, hits));
        }
        cap.ttft_ms = cap.chunk_ms.first().copied();
        out.push(cap);
    }
    out
}

fn row(label: &str, caps: &[StreamCapture], wall: Duration) {
    let fail = caps.iter().filter(|c| c.failure.is_some()).count();
    let ok: Vec<&StreamCapture> = caps.iter().filter(|c| c.failure.is_none()).collect();
    let ttft = sorted(
        ok.iter()
            .filter_map(|c| c.ttft_ms)
            .map(|t| (t - TTFT_MS) * 1000.0)
            .collect(),
    );
    let itl = sorted(
        ok.iter()
            .flat_map(|c| c.itl_ms())
            .map(|g| (g - ITL_MS) * 1000.0)
            .collect(),
    );
    let chunks: usize = ok.iter().map(|c| c.chunk_ms.len()).sum();
    println!(
        "{:>5} {:>5} {:>4} {:>7.0} | {:>5} {:>8.0} {:>8.0} {:>8.0} | {:>6} {:>8.0} {:>8.0} {:>8.0} {:>8.0}",
        label,
        caps.len(),
        fail,
        chunks as f64 / wall.as_secs_f64(),
        ttft.len(),
        pct(&ttft, 0.5),
        pct(&ttft, 0.99),
        ttft.last().copied().unwrap_or(f64::NAN),
        itl.len(),
        pct(&itl, 0.01),
        pct(&itl, 0.5),
        pct(&itl, 0.99),
        itl.last().copied().unwrap_or(f64::NAN),
    );
    if let Some(f) = caps.iter().find_map(|c| c.failure.as_ref()) {
        println!("      first failure: {}: {}", f.class.as_str(), f.message);
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (_, src) = FastSource::start(FastSourceConfig::default()).expect("fast source");
    let client = Arc::new(Client::new(ClientConfig::new(src.base_url())).expect("client"));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());

    println!(
        "client timing error vs fast-source schedule: ttft {TTFT_MS} ms, itl {ITL_MS} ms, {CHUNKS} chunks/request"
    );
    println!(
        "{cores} cores shared by the client runtime ({cores} workers) and the source (1 thread); µs; percentiles by linear interpolation"
    );
    println!();
    println!(
        "{:>5} {:>5} {:>4} {:>7} | {:>5} {:>8} {:>8} {:>8} | {:>6} {:>8} {:>8} {:>8} {:>8}",
        "conc",
        "reqs",
        "fail",
        "chunk/s",
        "n",
        "TTFTp50",
        "TTFTp99",
        "TTFTmax",
        "n",
        "ITLp1",
        "ITLp50",
        "ITLp99",
        "ITLmax"
    );
    let scheduled = body(CHUNKS, Some((TTFT_MS, ITL_MS)));
    let t = Instant::now();
    let raw = raw_reference(src.addr(), 30, &scheduled);
    row("raw", &raw, t.elapsed());
    let budget = Instant::now();
    for conc in [1usize, 64, 512] {
        if conc == 512 && budget.elapsed() > Duration::from_secs(20) {
            println!("{conc:>5} skipped: time budget spent");
            continue;
        }
        let per_worker = if conc == 1 { 30 } else { 3 };
        let (caps, wall) = rt.block_on(run(
            &client,
            conc,
            per_worker,
            body(CHUNKS, Some((TTFT_MS, ITL_MS))),
        ));
        row(&conc.to_string(), &caps, wall);
    }

    // Throughput ceiling: the source writes as fast as it can, the client parses everything.
    println!();
    println!("as fast as possible (no schedule): client-side chunk rate");
    println!(
        "{:>5} {:>5} {:>8} {:>10} {:>8}",
        "conc", "reqs", "chunks", "chunk/s", "fail"
    );
    for (conc, per_worker, chunks) in [(1usize, 20usize, 20_000u64), (64, 2, 2_000)] {
        let (caps, wall) = rt.block_on(run(&client, conc, per_worker, body(chunks, None)));
        let fail = caps.iter().filter(|c| c.failure.is_some()).count();
        let n: usize = caps.iter().map(|c| c.chunk_ms.len()).sum();
        println!(
            "{:>5} {:>5} {:>8} {:>10.0} {:>8}",
            conc,
            caps.len(),
            n,
            n as f64 / wall.as_secs_f64(),
            fail
        );
    }
}
