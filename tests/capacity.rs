//! A capacity cell measured by `infergate run` against the loopback fast
//! source in its queueing mode (2 slots, about 0.1 s per answer: at most
//! 20 answers a second): the search ends resolved within its precision, the
//! fitted capacity lies where the levels put it and where the queue can
//! hold it, and the journal holds every level's segments, warm-ups marked.

use std::collections::BTreeMap;
use std::time::Duration;

mod support;

use infergate::measure::journal;
use infergate::measure::runner::{self, JOURNAL_FILE};
use infergate::report::capacity::{LevelDecision, Stopped, run::shown};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};

/// 16 tokens 6 ms apart: each answer holds its slot about 0.1 s. Each
/// segment's 16 warm-ups fill an overloaded queue before its 12 measured
/// requests: a short segment's queue otherwise starts near empty, and a
/// level far past the server's rate would still meet half its targets.
const SUITE: &str = r#"
name = "capacity"
[[cell]]
name = "capacity-small"
prompt_tokens = 200
tolerance_percent = 50
max_tokens = 16
requests = 1000
seed = 5
slo = { ttft_ms = 200, min_attainment = 0.5 }
capacity = { by = "rate", low = 12, high = 48, precision_percent = 10, segment_requests = 12, warmup_requests = 16, max_segments = 4 }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queueing_source_s_capacity_is_found_bracketed_and_journaled() {
    let slots = 2;
    let service = Duration::from_millis(6 * 15);
    let (_, src) = FastSource::start(FastSourceConfig {
        itl: Duration::from_millis(6),
        slots: Some(slots),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let out = dir.path().join("run");
    let art = runner::run(&support::run_opts(&src.base_url(), suite, out.clone()))
        .await
        .expect("run");
    let cell = &art.cells[0];
    let cap = cell.capacity.as_ref().expect("a capacity search");
    let line = format!(
        "{}\nlevels: {:?}",
        cap.line(),
        cap.levels
            .iter()
            .map(|l| (
                l.load,
                l.segments.iter().map(|s| s.counts.met).collect::<Vec<_>>(),
                l.evidence.decision
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(cap.stopped, Stopped::Resolved, "{line}");
    // The bracket is within the precision.
    let [Some(held), Some(not_held)] = cap.bracket else {
        panic!("no bracket: {line}");
    };
    assert!(
        held < not_held && not_held / held <= 1.1 + 1e-9,
        "{held} {not_held}"
    );
    // The fitted capacity lies between the highest level decided to hold
    // and the lowest decided not to (the bracket itself steers by point
    // estimates where a level stayed unsure, so the fit may sit outside it).
    let est = cap.estimate.as_ref().expect("an estimate");
    let fitted = est.fitted.expect("a fitted curve");
    let decided = |d: LevelDecision| {
        cap.levels
            .iter()
            .filter(move |l| l.evidence.decision == d)
            .map(|l| l.load)
    };
    let below = decided(LevelDecision::Holds).fold(f64::MIN, f64::max);
    let above = decided(LevelDecision::DoesNotHold).fold(f64::MAX, f64::min);
    assert!(
        below <= held && not_held <= above,
        "{below} {held} {not_held} {above}"
    );
    assert!(
        below <= fitted && fitted <= above,
        "{fitted} outside {below}..{above}: {line}"
    );
    // The queue drains at most slots / service answers a second: a level
    // past twice that cannot meet a 200 ms first token for half its
    // requests, and one at a third of it waits little.
    let drains = slots as f64 / service.as_secs_f64();
    assert!(
        fitted > drains / 3.0 && fitted < 2.0 * drains,
        "{fitted} against {drains} a second: {line}"
    );
    let [lo, hi] = est.interval.expect("an interval");
    assert!(lo <= fitted && fitted <= hi, "{line}");

    // Every level's segments are in the journal, warm-ups marked and counted.
    let recs = journal::read(&out.join(JOURNAL_FILE)).unwrap();
    assert!(recs.iter().all(|r| r.capacity.is_some()));
    let mut by: BTreeMap<usize, (f64, u64, u64)> = BTreeMap::new();
    for r in &recs {
        let m = r.capacity.unwrap();
        let e = by.entry(m.segment).or_insert((m.load, 0, 0));
        assert_eq!(e.0, m.load, "one load per segment");
        if m.warmup {
            e.2 += 1;
        } else {
            e.1 += 1;
        }
    }
    let journaled: Vec<(f64, u64, u64)> = by.into_values().collect();
    let recorded: Vec<(f64, u64, u64)> = cap
        .levels
        .iter()
        .flat_map(|l| {
            l.segments
                .iter()
                .map(move |s| (l.load, s.counts.of, s.counts.warmup))
        })
        .collect();
    assert_eq!(journaled, recorded);
    assert!(recorded.iter().all(|s| s.1 == 12 && s.2 == 16));
    assert_eq!(cap.requests, 12 * recorded.len() as u64);
    assert_eq!(cap.warmup_requests, 16 * recorded.len() as u64);
    assert_eq!(recs.len() as u64, cap.requests + cap.warmup_requests);
    // The cell's own numbers leave the warm-ups out and are not gated.
    assert_eq!(cell.requests as u64, cap.requests);
    assert!(!cell.performance_eligible);
    // What the server heard: every journaled request, and waits it counted.
    let heard = src
        .requests()
        .iter()
        .filter(|h| h.as_str() == "POST /v1/chat/completions")
        .count();
    assert!(heard >= recs.len(), "{heard} < {}", recs.len());
    assert!(src.waited() > 0, "an overloaded level queued nothing");
    assert!(
        line.starts_with(&format!("holds {} req/s", shown(fitted))),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "{} requests (+{} warm-up)",
            cap.requests, cap.warmup_requests
        )),
        "{line}"
    );
    assert!(line.contains("at TTFT ≤ 200 ms, 50 %"), "{line}");
    eprintln!("{line}");
}

/// By concurrency: two slots answer two requests at once with no wait, a
/// third waits for a slot (an answer takes about 0.15 s: the waits are
/// about half that, or alternately none and all of it), so a 50 ms first
/// token holds at 2 concurrent and not at 3, with room on both sides for a
/// loaded machine's scheduling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queueing_source_holds_as_many_concurrent_as_it_has_slots() {
    let (_, src) = FastSource::start(FastSourceConfig {
        itl: Duration::from_millis(10),
        slots: Some(2),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    let text = SUITE
        .replace("ttft_ms = 200, min_attainment = 0.5", "ttft_ms = 50, min_attainment = 0.9")
        .replace(
            "by = \"rate\", low = 12, high = 48, precision_percent = 10, segment_requests = 12, warmup_requests = 16,",
            "by = \"concurrency\", low = 1, high = 8, precision_percent = 10, segment_requests = 12,",
        );
    assert!(text.contains("\"concurrency\""), "{text}");
    std::fs::write(&suite, text).unwrap();
    let out = dir.path().join("run");
    let art = runner::run(&support::run_opts(&src.base_url(), suite, out.clone()))
        .await
        .expect("run");
    let cap = art.cells[0].capacity.as_ref().expect("a capacity search");
    let line = format!(
        "{}\nlevels: {:?}",
        cap.line(),
        cap.levels
            .iter()
            .map(|l| (l.load, l.evidence.attainment, l.evidence.decision))
            .collect::<Vec<_>>()
    );
    eprintln!("{line}");
    assert_eq!(cap.stopped, Stopped::Resolved, "{line}");
    assert_eq!(cap.bracket, [Some(2.0), Some(3.0)], "{line}");
    assert!(cap.levels.iter().all(|l| l.load.fract() == 0.0), "{line}");
    // Each segment's warm-up is its concurrency.
    for l in &cap.levels {
        assert!(
            l.segments.iter().all(|s| s.counts.warmup == l.load as u64),
            "{line}"
        );
    }
    assert!(line.contains("concurrent"), "{line}");
    let recs = journal::read(&out.join(JOURNAL_FILE)).unwrap();
    assert_eq!(recs.len() as u64, cap.requests + cap.warmup_requests);
}

/// Through the binary: `infergate run` prints the cell's capacity line.
#[test]
fn a_search_the_cells_requests_cannot_finish_stops_and_says_so() {
    let (_, src) = FastSource::start(FastSourceConfig {
        itl: Duration::from_millis(6),
        slots: Some(2),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    // Two segments: the lowest level's, and nothing after.
    std::fs::write(&suite, SUITE.replace("requests = 1000", "requests = 24")).unwrap();
    let out = dir.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("run")
        .arg("--target")
        .arg(src.base_url())
        .arg("--suite")
        .arg(&suite)
        .arg("--out")
        .arg(&out)
        .arg("--skip-turnover")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let art: infergate::artifact::RunArtifact =
        serde_json::from_slice(&std::fs::read(out.join(runner::ARTIFACT_FILE)).unwrap()).unwrap();
    let cap = art.cells[0].capacity.as_ref().expect("a capacity search");
    assert_eq!(cap.stopped, Stopped::BudgetSpent);
    assert_eq!(cap.estimate, None);
    assert_eq!(cap.levels.len(), 1);
    assert_eq!(cap.levels[0].segments.len(), 2);
    assert_eq!((cap.requests, cap.warmup_requests), (24, 32));
    assert!(
        stdout.contains(&format!("capacity-small: {}\n", cap.line())),
        "{stdout}"
    );
    assert!(
        cap.line()
            .starts_with("search stopped: the cell's requests are spent"),
        "{}",
        cap.line()
    );
    let recs = journal::read(&out.join(JOURNAL_FILE)).unwrap();
    assert_eq!(recs.len(), 24 + 32);
}
