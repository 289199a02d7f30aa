//! Fault classes against the real reference engine, through the fault proxy.
//!
//! Each test runs `infergate run` on one small cell through a proxy that
//! injects one fault into two chosen requests (by their index in the cell,
//! read from the request's cache-busting prefix; warmups and the sizing and
//! discovery calls pass untouched). Each checks that exactly those requests
//! are classified as the fault demands, that every other request is measured
//! normally, that the journal holds every request, and that the cell's
//! eligibility names the failures.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use infergate::artifact::{CellResult, RunArtifact};
use infergate::measure::client::Timeouts;
use infergate::measure::journal;
use infergate::measure::record::{Outcome, RequestRecord};
use infergate::measure::runner::{self, RunOptions};
use infergate_testkit::faultproxy::{
    Fault, FaultProxy, FaultProxyConfig, MALFORMED_DATA, ProxiedRequest, ProxyEvent,
    STREAM_ERROR_MESSAGE,
};
use serde_json::Value;

const REQUESTS: usize = 6;
/// The requests that get the fault: one early, one late, so the fault is
/// seen both with a neighbour in flight and after others finished.
const FAULTY: [usize; 2] = [1, 4];

const SUITE: &str = r#"
name = "faults"
[[cell]]
name = "fault-cell"
prompt_tokens = 96
tolerance_percent = 10
max_tokens = 8
concurrency = 2
requests = 6
warmup = 1
seed = 5
extra = { ignore_eos = true }
"#;

fn timeouts(idle: Duration) -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(120),
        idle,
        total: Duration::from_secs(300),
        per_1k_prompt_tokens: Duration::ZERO,
    }
}

/// Index of a measured (not warmup) request of the cell, from its prefix
/// `[<hex> cell <cell> request <k> run <nonce>]`.
fn request_index(req: &ProxiedRequest<'_>) -> Option<usize> {
    if req.path != "/v1/chat/completions" {
        return None;
    }
    let msgs = req.body?.get("messages")?.as_array()?;
    let text = msgs.last()?.get("content")?.as_str()?;
    // `[<hex> cell <cell> request <index> run <nonce>]` (workload::prefix).
    let head = text.strip_prefix('[')?.split(']').next()?;
    let words: Vec<&str> = head.split(' ').collect();
    match words.as_slice() {
        [_, "cell", _, "request", k, "run", nonce] if !nonce.ends_with("-warm") => k.parse().ok(),
        _ => None,
    }
}

struct FaultRun {
    art: RunArtifact,
    records: BTreeMap<usize, RequestRecord>,
    events: Vec<ProxyEvent>,
    out: tempfile::TempDir,
}

impl FaultRun {
    fn cell(&self) -> &CellResult {
        &self.art.cells[0]
    }

    fn faulty(&self) -> impl Iterator<Item = &RequestRecord> {
        FAULTY.iter().map(|k| &self.records[k])
    }

    fn clean(&self) -> impl Iterator<Item = &RequestRecord> {
        self.records.values().filter(|r| !FAULTY.contains(&r.index))
    }

    /// The proxy applied `fault` to exactly the chosen requests.
    fn assert_injected(&self, fault: Fault) {
        let hit: Vec<&ProxyEvent> = self.events.iter().filter(|e| e.fault == fault).collect();
        assert_eq!(hit.len(), FAULTY.len(), "{hit:#?}");
        for e in hit {
            let note = e.note.as_deref().unwrap_or("");
            assert!(!note.contains("before the fault"), "not applied: {note}");
        }
    }
}

async fn run_with(fault: Fault, idle: Duration) -> FaultRun {
    let engine = support::engine("baseline");
    let proxy =
        FaultProxy::start(
            FaultProxyConfig::new(&engine.base_url),
            move |req| match request_index(req) {
                Some(k) if FAULTY.contains(&k) => fault,
                _ => Fault::Pass,
            },
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let out = dir.path().join("out");
    let opts = RunOptions {
        timeouts: timeouts(idle),
        ..support::run_opts(&proxy.base_url(), suite, out.clone())
    };
    let art = runner::run(&opts)
        .await
        .expect("a fault in some requests never fails the run");
    let records = read_journal(&out);
    FaultRun {
        art,
        records,
        events: proxy.events(),
        out: dir,
    }
}

/// Every request of the cell, once each, from the journal on disk.
fn read_journal(out: &Path) -> BTreeMap<usize, RequestRecord> {
    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    assert_eq!(recs.len(), REQUESTS, "no record lost, none doubled");
    let by_index: BTreeMap<usize, RequestRecord> = recs.into_iter().map(|r| (r.index, r)).collect();
    assert_eq!(
        by_index.keys().copied().collect::<Vec<_>>(),
        (0..REQUESTS).collect::<Vec<_>>()
    );
    by_index
}

/// The clean requests were measured in full.
fn assert_clean_measured(run: &FaultRun) {
    for r in run.clean() {
        assert_eq!(
            r.outcome,
            Outcome::Ok,
            "request {}: {:?}",
            r.index,
            r.detail
        );
        let c = &r.capture;
        assert!(c.ttft_ms.is_some() && c.e2e_ms.is_some(), "{c:?}");
        assert_eq!(c.completion_tokens, Some(8));
        assert_eq!(c.chunk_ms.len(), 8);
    }
}

/// The two faulty requests failed with `class` and a detail containing `needle`;
/// the cell counts them and says so in its eligibility.
fn assert_failed(run: &FaultRun, class: Outcome, needle: &str) {
    for r in run.faulty() {
        assert_eq!(r.outcome, class, "request {}: {:?}", r.index, r.detail);
        let detail = r.detail.as_deref().unwrap_or("");
        assert!(detail.contains(needle), "request {}: {detail:?}", r.index);
    }
    assert_clean_measured(run);
    let cell = run.cell();
    assert_eq!(
        (cell.requests, cell.succeeded, cell.failed),
        (REQUESTS, REQUESTS - 2, 2)
    );
    assert_eq!(cell.failures_by_class.get(class.as_str()), Some(&2));
    assert!(!cell.performance_eligible);
    let want = format!("failed requests: 2 {}", class.as_str());
    assert!(
        cell.ineligible_reasons.iter().any(|r| r == &want),
        "{:?}",
        cell.ineligible_reasons
    );
    // Summaries are over the successful requests only.
    assert_eq!(cell.metrics["ttft_ms"].n, REQUESTS - 2);
}

/// Requests that must still count as successes: all measured, cell eligible.
fn assert_all_ok(run: &FaultRun) {
    for r in run.records.values() {
        assert_eq!(
            r.outcome,
            Outcome::Ok,
            "request {}: {:?}",
            r.index,
            r.detail
        );
        assert_eq!(r.capture.completion_tokens, Some(8));
    }
    let cell = run.cell();
    assert_eq!((cell.succeeded, cell.failed), (REQUESTS, 0));
    let recs: Vec<RequestRecord> = run.records.values().cloned().collect();
    support::assert_eligible_but_one_read(cell, &recs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_latency_is_measured_as_latency() {
    let delay = Duration::from_millis(1500);
    let run = run_with(Fault::Delay(delay), Duration::from_secs(30)).await;
    run.assert_injected(Fault::Delay(delay));
    assert_all_ok(&run);
    for r in run.faulty() {
        // The request reached the engine 1.5 s late: no token can come sooner,
        // and the stream after it keeps its real decode timing.
        assert!(r.capture.ttft_ms.unwrap() >= 1500.0, "{:?}", r.capture);
        assert!(
            r.capture.derived().decode_tok_s.is_some(),
            "{:?}",
            r.capture
        );
    }
    assert!(run.cell().metrics["ttft_ms"].max >= 1500.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_429_500_503_are_http_errors_with_their_status() {
    for status in [429u16, 500, 503] {
        let run = run_with(Fault::Status(status), Duration::from_secs(30)).await;
        run.assert_injected(Fault::Status(status));
        assert_failed(&run, Outcome::HttpError, &format!("HTTP {status}"));
        for r in run.faulty() {
            assert_eq!(r.capture.http_status, Some(status));
            // The server's error message is kept, bounded.
            let detail = r.detail.as_deref().unwrap();
            assert!(detail.contains("injected HTTP"), "{detail}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_stream_is_a_request_error() {
    let run = run_with(Fault::ResetAfter(3), Duration::from_secs(30)).await;
    run.assert_injected(Fault::ResetAfter(3));
    assert_failed(&run, Outcome::RequestError, "");
    for r in run.faulty() {
        // The head and some chunks arrived before the reset; they are kept.
        assert_eq!(r.capture.http_status, Some(200));
        assert!(!r.capture.content.is_empty(), "{:?}", r.capture);
        assert!(r.capture.e2e_ms.is_none());
        let detail = r.detail.as_deref().unwrap().to_lowercase();
        assert!(detail.contains("reset"), "{detail}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_ends_at_the_idle_timeout() {
    // Long enough that a clean request on a loaded 2-core machine never
    // pauses this long between chunks (2 s did, once, under fuzzing load).
    let idle = Duration::from_secs(10);
    let run = run_with(Fault::StallAfter(3), idle).await;
    run.assert_injected(Fault::StallAfter(3));
    assert_failed(&run, Outcome::RequestError, "idle timeout: no data for 10s");
    // The timeouts in force are part of the artifact's method.
    let method = serde_json::to_string(&run.art.method).unwrap();
    assert!(method.contains("idle"), "{method}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_event_fails_stream_validation() {
    let run = run_with(Fault::MalformedEvent(3), Duration::from_secs(30)).await;
    run.assert_injected(Fault::MalformedEvent(3));
    assert_failed(&run, Outcome::StreamValidationFailed, "malformed chunk");
    for r in run.faulty() {
        // The bad data is quoted (bounded) so the reader can see it.
        assert!(r.detail.as_deref().unwrap().contains(&MALFORMED_DATA[..20]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_event_is_refused_without_buffering_it() {
    let bytes = 8 << 20;
    let fault = Fault::OversizedEvent {
        after_events: 3,
        bytes,
    };
    let run = run_with(fault, Duration::from_secs(30)).await;
    assert_failed(
        &run,
        Outcome::StreamValidationFailed,
        &format!(
            "larger than {} bytes",
            infergate::measure::client::MAX_EVENT_BYTES
        ),
    );
    for r in run.faulty() {
        // Nothing of the 8 MiB event reached the capture.
        assert!(
            r.capture.content.len() < 1024,
            "{}",
            r.capture.content.len()
        );
        assert!(!r.capture.content.contains("aaaa"));
    }
    // The record on disk is small too: the journal holds no event body.
    let size = std::fs::metadata(run.out.path().join("out").join(runner::JOURNAL_FILE))
        .unwrap()
        .len();
    assert!(size < 64 * 1024, "journal is {size} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_object_in_a_200_stream_fails_stream_validation() {
    let run = run_with(Fault::ErrorInStream(3), Duration::from_secs(30)).await;
    run.assert_injected(Fault::ErrorInStream(3));
    assert_failed(&run, Outcome::StreamValidationFailed, STREAM_ERROR_MESSAGE);
    for r in run.faulty() {
        assert_eq!(r.capture.http_status, Some(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicated_done_is_harmless() {
    let run = run_with(Fault::DuplicateDone, Duration::from_secs(30)).await;
    run.assert_injected(Fault::DuplicateDone);
    assert_all_ok(&run);
    for r in run.faulty() {
        assert!(r.capture.saw_done);
        assert_eq!(r.capture.finish_reasons, ["length"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_done_ends_at_the_close_after_the_final_chunk() {
    let run = run_with(Fault::MissingDone, Duration::from_secs(30)).await;
    run.assert_injected(Fault::MissingDone);
    assert_all_ok(&run);
    for r in run.faulty() {
        let c = &r.capture;
        assert!(!c.saw_done);
        assert_eq!(c.finish_reasons, ["length"]);
        // e2e is the close, after the last chunk.
        assert!(c.e2e_ms.unwrap() >= *c.chunk_ms.last().unwrap());
    }
    for r in run.clean() {
        assert!(r.capture.saw_done);
    }
}

/// Request index parsing matches the workload's own prefix format.
#[test]
fn request_index_reads_the_workload_prefix() {
    use infergate::config::suite::CachePolicy;
    use infergate::measure::workload::{prefix, user_content};
    let body = |content: String| -> Value {
        serde_json::json!({"messages": [{"role": "user", "content": content}]})
    };
    let req = |b: &Value| -> Option<usize> {
        request_index(&ProxiedRequest {
            seq: 0,
            method: "POST",
            path: "/v1/chat/completions",
            body: Some(b),
        })
    };
    let measured = body(user_content(
        &prefix(CachePolicy::Unique, "n1", "fault-cell", 4),
        "x",
    ));
    assert_eq!(req(&measured), Some(4));
    let warm = body(user_content(
        &prefix(CachePolicy::Unique, "n1-warm", "fault-cell", 4),
        "x",
    ));
    assert_eq!(req(&warm), None);
}
