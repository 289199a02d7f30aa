//! The streaming client's own timing error, against the fast source's known schedule.
//!
//! The fast source sends content chunk `i` at `t0 + ttft + i·itl`, `t0` being
//! when it has read the whole request, and (with `"stamp": true`) writes into
//! each chunk the CLOCK_MONOTONIC time at which it handed it to the socket.
//! Per request and chunk this bench reports:
//! - TTFT error: measured TTFT − scheduled TTFT. TTFT is measured from
//!   `t_send`, before the request is written, so this holds the request's
//!   trip to the source as well as the source's lateness and the client's delay;
//! - ITL error: |measured gap − itl| (a late chunk makes the next gap short);
//! - client delay: measured arrival − the source's send stamp: the loopback
//!   trip plus the client's wake-up and read, with the source's lateness taken out;
//! - source lateness: send stamp − schedule (relative to `t_send`, so it
//!   includes the request's trip).
//!
//! Rows: `raw` is a reference without HTTP library, async runtime or JSON (a
//! blocking socket on its own thread, stamped per read). `sync` rows start all
//! workers together, as `loadgen` does, so every stream's chunks fall due at
//! the same instants (like a server decoding one batch): the source writes
//! them one after another and the client reads them one after another.
//! `staggered` spreads the workers' starts over one ITL, so chunks fall due
//! evenly.
//!
//! `--pin` puts the source's thread on CPU 0 and the client's runtime on CPU 1.
//! Run under `chrt -f N` to see the error without other tenants' preemption
//! (the heading says when it was).
//!
//! Run: `cargo bench --bench timing [-- --pin]`. Takes about 15 s.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use infergate::measure::client::{Client, ClientConfig, Endpoint, chat_body};
use infergate::measure::record::StreamCapture;
use infergate_testkit::fastsource::{FastSource, FastSourceConfig, STAMP_DIGITS, monotonic_ns};
use serde_json::{Map, Value, json};

use common::{flag, pct, pin_to_cpu, sched_policy, sorted};

const TTFT_MS: f64 = 20.0;
const ITL_MS: f64 = 4.0;
const CHUNKS: u64 = 32;

fn body(chunks: u64, schedule: Option<(f64, f64)>) -> Value {
    let mut extra = Map::new();
    extra.insert("model".into(), json!("fastsource"));
    if let Some((ttft, itl)) = schedule {
        extra.insert(
            "fastsource".into(),
            json!({"ttft_ms": ttft, "itl_ms": itl, "stamp": true}),
        );
    }
    chat_body(
        json!([{"role": "user", "content": "bench"}]),
        chunks,
        0.0,
        None,
        extra,
    )
}

/// Instants as CLOCK_MONOTONIC ns (Instant is that clock on Linux; one
/// calibration pair maps between them to within the gap between two calls).
#[derive(Clone, Copy)]
struct Clock {
    instant: Instant,
    ns: u64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            instant: Instant::now(),
            ns: monotonic_ns(),
        }
    }
    fn ns(&self, t: Instant) -> f64 {
        self.ns as f64 + t.saturating_duration_since(self.instant).as_nanos() as f64
    }
}

/// One request as the bench sees it: when it was sent, what was captured.
struct Sample {
    t_send: Instant,
    cap: StreamCapture,
}

/// Closed loop: `conc` workers, `per_worker` requests each, after one
/// unrecorded warm-up each; `stagger` spreads the workers' first requests.
async fn run(
    client: &Arc<Client>,
    conc: usize,
    per_worker: usize,
    stagger: Option<Duration>,
) -> (Vec<Sample>, Duration) {
    let body = Arc::new(body(CHUNKS, Some((TTFT_MS, ITL_MS))));
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
        .map(|k| {
            let (client, body) = (client.clone(), body.clone());
            tokio::spawn(async move {
                if let Some(span) = stagger {
                    tokio::time::sleep(span * k as u32 / conc as u32).await;
                }
                let mut out = Vec::with_capacity(per_worker);
                for _ in 0..per_worker {
                    let (t_send, cap) = client.stream_timed(Endpoint::Chat, &body).await;
                    out.push(Sample { t_send, cap });
                }
                out
            })
        })
        .collect();
    let mut samples = Vec::new();
    for w in workers {
        samples.extend(w.await.unwrap_or_default());
    }
    (samples, t.elapsed())
}

/// Reference without reqwest, tokio or JSON: one blocking socket on its own
/// thread, arrival times taken per read, chunks found by a byte search.
fn raw_reference(addr: std::net::SocketAddr, requests: usize, body: &Value) -> Vec<Sample> {
    use std::io::{Read, Write};
    let payload = body.to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
        payload.len()
    );
    let needle: &[u8] = br#""delta":{"content":""#;
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
        let mut scanned = 0;
        while !acc.ends_with(b"0\r\n\r\n") {
            let Ok(n) = sock.read(&mut buf) else { break };
            if n == 0 {
                break;
            }
            let at = t_send.elapsed().as_secs_f64() * 1000.0;
            acc.extend_from_slice(&buf[..n]);
            // Only chunks whose stamp digits are complete are counted in this read.
            while let Some(p) = acc[scanned..]
                .windows(needle.len())
                .position(|w| w == needle)
            {
                let digits = scanned + p + needle.len();
                if acc.len() < digits + STAMP_DIGITS {
                    break;
                }
                cap.chunk_ms.push(at);
                cap.content.push_str(&String::from_utf8_lossy(
                    &acc[digits..digits + STAMP_DIGITS],
                ));
                scanned = digits + STAMP_DIGITS;
            }
        }
        cap.ttft_ms = cap.chunk_ms.first().copied();
        out.push(Sample { t_send, cap });
    }
    out
}

struct Row {
    label: String,
    requests: usize,
    failed: usize,
    ttft: Vec<f64>,
    itl: Vec<f64>,
    delay: Vec<f64>,
    late: Vec<f64>,
    first_failure: Option<String>,
}

fn analyse(label: &str, samples: &[Sample], clock: Clock) -> Row {
    let mut row = Row {
        label: label.into(),
        requests: samples.len(),
        failed: 0,
        ttft: Vec::new(),
        itl: Vec::new(),
        delay: Vec::new(),
        late: Vec::new(),
        first_failure: None,
    };
    for s in samples {
        let c = &s.cap;
        if let Some(f) = &c.failure {
            row.failed += 1;
            row.first_failure
                .get_or_insert_with(|| format!("{}: {}", f.class.as_str(), f.message));
            continue;
        }
        if let Some(t) = c.ttft_ms {
            row.ttft.push((t - TTFT_MS) * 1000.0);
        }
        row.itl
            .extend(c.itl_ms().map(|g| ((g - ITL_MS) * 1000.0).abs()));
        let sent_ns = clock.ns(s.t_send);
        let stamps = c
            .content
            .as_bytes()
            .chunks(STAMP_DIGITS)
            .filter_map(|d| std::str::from_utf8(d).ok()?.parse::<f64>().ok());
        for (i, (stamp, at_ms)) in stamps.zip(&c.chunk_ms).enumerate() {
            let arrival = sent_ns + at_ms * 1e6;
            let due = sent_ns + (TTFT_MS + ITL_MS * i as f64) * 1e6;
            row.delay.push((arrival - stamp) / 1000.0);
            row.late.push((stamp - due) / 1000.0);
        }
    }
    row.ttft = sorted(std::mem::take(&mut row.ttft));
    row.itl = sorted(std::mem::take(&mut row.itl));
    row.delay = sorted(std::mem::take(&mut row.delay));
    row.late = sorted(std::mem::take(&mut row.late));
    row
}

fn print_row(r: &Row) {
    println!(
        "| {} | {}/{} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        r.label,
        r.requests - r.failed,
        r.requests,
        pct(&r.ttft, 0.5),
        pct(&r.ttft, 0.99),
        pct(&r.itl, 0.5),
        pct(&r.itl, 0.99),
        pct(&r.delay, 0.5),
        pct(&r.delay, 0.99),
        pct(&r.late, 0.5),
        pct(&r.late, 0.99),
    );
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let pinned = flag("--pin") && cores >= 2 && pin_to_cpu(0);
    // The source's thread inherits this thread's CPU set at spawn.
    let (_, src) = FastSource::start(FastSourceConfig::default()).expect("fast source");
    if pinned {
        pin_to_cpu(1);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let client = Arc::new(Client::new(ClientConfig::new(src.base_url())).expect("client"));
    let clock = Clock::new();
    let mut placement = if pinned {
        "source thread pinned to CPU 0, client runtime (2 workers) to CPU 1".to_string()
    } else {
        format!(
            "unpinned: source (1 thread) and client runtime ({cores} workers) share {cores} CPUs"
        )
    };
    let policy = sched_policy();
    if let Some(p) = &policy {
        placement.push_str(&format!("; real-time priority {p} for every thread"));
    }
    println!("### Timing error ({placement})");
    println!();
    println!(
        "Schedule: TTFT {TTFT_MS} ms, ITL {ITL_MS} ms, {CHUNKS} chunks per request. µs; percentiles by linear interpolation over every request (TTFT) or chunk (the rest)."
    );
    println!();
    println!(
        "| run | ok/requests | TTFT err p50 | TTFT err p99 | ITL err p50 | ITL err p99 | client delay p50 | client delay p99 | source late p50 | source late p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let scheduled = body(CHUNKS, Some((TTFT_MS, ITL_MS)));
    let raw = raw_reference(src.addr(), 20, &scheduled);
    print_row(&analyse("raw socket, c=1", &raw, clock));
    let mut c64 = None;
    for (label, conc, per_worker, stagger) in [
        ("infergate, c=1", 1usize, 20usize, None),
        ("infergate, c=64 sync", 64, 3, None),
        (
            "infergate, c=64 staggered",
            64,
            3,
            Some(Duration::from_secs_f64(ITL_MS / 1000.0)),
        ),
        ("infergate, c=512 sync", 512, 2, None),
    ] {
        let (samples, _) = rt.block_on(run(&client, conc, per_worker, stagger));
        let row = analyse(label, &samples, clock);
        print_row(&row);
        if let Some(f) = &row.first_failure {
            println!("|  first failure: {} |", f.replace('|', "/"));
        }
        if conc == 64 && stagger.is_none() {
            c64 = Some(row);
        }
    }
    if let Some(r) = c64 {
        let worst = pct(&r.ttft, 0.99).max(pct(&r.itl, 0.99));
        let own = pct(&r.delay, 0.99);
        let verdict = |x: f64| if x < 200.0 { "met" } else { "not met" };
        let mut tag = if pinned { "pinned" } else { "unpinned" }.to_string();
        if let Some(p) = &policy {
            tag.push_str(&format!(", {p}"));
        }
        println!(
            "SUMMARY|timing error vs schedule, p99 at c=64 sync, worse of TTFT and ITL ({tag})|{worst:.0} µs (TTFT {:.0}, ITL {:.0})|< 200 µs|{}",
            pct(&r.ttft, 0.99),
            pct(&r.itl, 0.99),
            verdict(worst)
        );
        println!(
            "SUMMARY|client's own delay (arrival − source's send stamp), p99 at c=64 sync ({tag})|{own:.0} µs|< 200 µs|{}",
            verdict(own)
        );
    }
}
