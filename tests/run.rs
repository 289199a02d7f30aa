//! `infergate run` against the real reference engine: the measurement core.

mod support;
use support::run_opts as opts;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infergate::artifact::{RunArtifact, metric};
use infergate::measure::journal;
use infergate::measure::record::Outcome;
use infergate::measure::runner;
use infergate::stats;

const SUITE: &str = r#"
name = "run-test"
[[cell]]
name = "small"
prompt_tokens = 300
tolerance_percent = 5
max_tokens = 16
concurrency = 2
requests = 6
warmup = 1
seed = 3
extra = { ignore_eos = true }
"#;

/// One engine test at a time: the shared engine has two slots, and a
/// request queued behind another test's would count as client overhead;
/// the tests with engines of their own would slow everyone's clocks.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn write_suite(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("suite.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_measures_real_values_that_agree_with_the_journal() {
    let _serial = SERIAL.lock().await;
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let art = runner::run(&opts(
        &engine.base_url,
        write_suite(dir.path(), SUITE),
        out.clone(),
    ))
    .await
    .expect("run");

    // The artifact on disk is the one returned.
    let on_disk: RunArtifact =
        serde_json::from_slice(&std::fs::read(out.join(runner::ARTIFACT_FILE)).unwrap()).unwrap();
    assert_eq!(on_disk, art);
    assert_eq!(art.schema, "infergate-run/v1");
    assert!(
        art.provenance.model.contains("SmolLM2"),
        "{}",
        art.provenance.model
    );
    assert_eq!(art.provenance.context_window, Some(4096));
    assert!(art.method.contains_key("percentile"));

    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    assert_eq!(recs.len(), 6, "warmups are never journaled");
    for r in &recs {
        assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.detail);
        let c = &r.capture;
        let (ttft, e2e) = (c.ttft_ms.unwrap(), c.e2e_ms.unwrap());
        assert!(
            c.ttfo_ms.unwrap() <= ttft && ttft <= e2e,
            "TTFO ≤ TTFT ≤ e2e: {c:?}"
        );
        // ignore_eos: the server reports exactly max_tokens, one content chunk each.
        assert_eq!(c.completion_tokens, Some(16));
        assert!(!c.completion_tokens_estimated);
        assert_eq!(c.chunk_ms.len(), 16);
        let p = c.prompt_tokens.unwrap();
        assert!(
            (285..=315).contains(&p),
            "prompt tokens {p} outside 300 ± 5%"
        );
        assert_eq!(c.finish_reasons, vec!["length".to_string()]);
    }

    let cell = &art.cells[0];
    support::assert_eligible_but_one_read(cell, &recs);
    assert_eq!((cell.requests, cell.succeeded, cell.failed), (6, 6, 0));
    // p50 in the artifact equals the median of the journal's own values.
    let ttft: Vec<f64> = recs.iter().map(|r| r.capture.ttft_ms.unwrap()).collect();
    let e2e: Vec<f64> = recs.iter().map(|r| r.capture.e2e_ms.unwrap()).collect();
    assert_eq!(
        cell.metrics[metric::TTFT_MS].p50,
        stats::median(&ttft).unwrap()
    );
    assert_eq!(
        cell.metrics[metric::E2E_MS].p50,
        stats::median(&e2e).unwrap()
    );
    assert_eq!(cell.metrics[metric::TTFT_MS].n, 6);
    let decode: Vec<f64> = recs
        .iter()
        .map(|r| r.capture.derived().decode_tok_s.unwrap())
        .collect();
    assert_eq!(
        cell.metrics[metric::DECODE_TOK_S].p50,
        stats::median(&decode).unwrap()
    );
    let prompt: Vec<f64> = recs
        .iter()
        .map(|r| r.capture.prompt_tokens.unwrap() as f64)
        .collect();
    assert_eq!(cell.median_prompt_tokens, stats::median(&prompt));

    // The server's own clock, as a cross-check of the client's: llama.cpp
    // sends timings with every request; its prompt time is inside the
    // client's TTFT (the first token cannot arrive before the prompt is
    // evaluated), and what is left (HTTP, scheduling, streaming) is small.
    assert!(
        recs.iter().all(|r| r.capture.server_timings.is_some()),
        "timings in every journal record"
    );
    let t = cell
        .server_timings
        .as_ref()
        .expect("server timings checked");
    assert_eq!((t.requests, t.client_below_server), (6, 0), "{t:?}");
    let overhead = t.ttft_overhead_ms.as_ref().unwrap();
    assert!(
        overhead.min > 0.0 && overhead.p50 < 500.0,
        "client TTFT − server prompt time: {overhead:?}"
    );
    let by_hand: Vec<f64> = recs
        .iter()
        .map(|r| r.capture.ttft_ms.unwrap() - r.capture.server_timings.unwrap().prompt_ms.unwrap())
        .collect();
    assert_eq!(overhead.p50, stats::median(&by_hand).unwrap());
    assert!(t.e2e_overhead_ms.as_ref().unwrap().min > 0.0, "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_larger_than_the_context_is_refused_before_any_request() {
    let _serial = SERIAL.lock().await;
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let suite = SUITE
        .replace("prompt_tokens = 300", "prompt_tokens = 97159")
        .replace("name = \"small\"", "name = \"capacity-120k\"");
    support::assert_refused_before_any_request(
        &engine.base_url,
        write_suite(dir.path(), &suite),
        out,
        "capacity-120k",
        4096,
    )
    .await;
}

/// Kill a run midway: every request it finished is in the journal, and resuming
/// from a journal with a torn last line is a clear error.
#[test]
fn a_killed_run_keeps_every_finished_request() {
    let _serial = SERIAL.blocking_lock();
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let suite = SUITE
        .replace("requests = 6", "requests = 40")
        .replace("concurrency = 2", "concurrency = 1");
    let suite_path = write_suite(dir.path(), &suite);
    let mut child = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--quiet", "--target", &engine.base_url, "--suite"])
        .arg(&suite_path)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal_path = out.join(runner::JOURNAL_FILE);
    let deadline = Instant::now() + Duration::from_secs(180);
    let lines = |p: &Path| {
        std::fs::read_to_string(p)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    while lines(&journal_path) < 3 {
        assert!(Instant::now() < deadline, "run made no progress");
        assert!(child.try_wait().unwrap().is_none(), "run exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SIGKILL: no chance to flush or clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    let recs = journal::read(&journal_path).expect("every complete line parses");
    assert!(recs.len() >= 3 && recs.len() < 40, "{}", recs.len());
    let mut idx: Vec<usize> = recs.iter().map(|r| r.index).collect();
    idx.sort();
    idx.dedup();
    assert_eq!(idx.len(), recs.len(), "no duplicates");
    assert!(
        !out.join(runner::ARTIFACT_FILE).exists(),
        "no artifact from a killed run"
    );
    // The killed run said what it was before its first request: a resume
    // against another target is refused, the journal untouched.
    let id = runner::RunIdentity::recorded(&out)
        .unwrap()
        .expect("identity");
    assert_eq!(id.target, engine.base_url.trim_end_matches('/'));
    let resume = |target: &str| {
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["run", "--quiet", "--resume", "--target", target, "--suite"])
            .arg(&suite_path)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let other = resume("http://127.0.0.1:9");
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("holds another run"), "{err}");
    assert_eq!(journal::read(&journal_path).unwrap().len(), recs.len());

    // A torn last line (as a kill mid-write leaves) stops a resume with a clear error.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .unwrap();
    f.write_all(br#"{"cell":"small","index":39,"send_"#)
        .unwrap();
    drop(f);
    let res = resume(&engine.base_url);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("is torn") && err.contains(&format!("line {}", recs.len() + 1)),
        "{err}"
    );
}

/// A Hugging Face tokenizer.json for the served model counts exactly what
/// the server counts, and a suite naming it sizes prompts with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenizer_json_sizes_prompts_and_agrees_with_the_server() {
    let _serial = SERIAL.lock().await;
    use infergate::measure::tokenizer::TokenizerFile;
    use infergate::measure::workload::filler;
    let engine = support::engine("baseline");
    let path = support::tokenizer_json();
    let tok = TokenizerFile::load(&path).unwrap();
    let http = support::http();
    for (words, seed) in [(1, 1), (37, 2), (500, 3), (2000, 4)] {
        let text = filler(words, seed);
        let server =
            infergate::measure::discover::tokenize_with_key(&http, &engine.base_url, None, &text)
                .await
                .unwrap()
                .expect("the reference engine has /tokenize");
        assert_eq!(tok.count(&text).unwrap(), server as u64, "{words} words");
    }

    let dir = tempfile::tempdir().unwrap();
    let suite = SUITE.replacen(
        "name = \"run-test\"",
        &format!(
            "name = \"run-test\"\ntokenizer = {:?}",
            path.display().to_string()
        ),
        1,
    );
    assert!(suite.contains("tokenizer = "), "{suite}");
    let suite = suite.replace("requests = 6", "requests = 2");
    let out = dir.path().join("out");
    let art = runner::run(&opts(
        &engine.base_url,
        write_suite(dir.path(), &suite),
        out.clone(),
    ))
    .await
    .expect("run");
    let sizing = &art.method["prompt_sizing"];
    assert!(
        sizing.contains(&format!("tokenizer.json {}", path.display())),
        "{sizing}"
    );
    let cell = &art.cells[0];
    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    support::assert_eligible_but_one_read(cell, &recs);
    let p = cell.median_prompt_tokens.unwrap();
    assert!((285.0..=315.0).contains(&p), "median prompt {p}");

    // A file that is not a tokenizer is refused before any request, naming it.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let mut o = opts(
        &engine.base_url,
        write_suite(dir.path(), SUITE),
        dir.path().join("out2"),
    );
    o.tokenizer = Some(bad.clone());
    let e = format!("{:#}", runner::run(&o).await.unwrap_err());
    assert!(e.contains(&bad.display().to_string()), "{e}");
    assert!(!dir.path().join("out2").exists(), "nothing was started");
}

/// An engine of this test's own (no other test's traffic in its counters).
async fn own_engine(metrics: bool) -> infergate::driver::engine::RunningEngine {
    let mut profile = support::profile("baseline");
    profile.metrics = metrics;
    profile.name = format!("scrape-{metrics}");
    infergate::driver::engine::start(&profile, &support::log_dir())
        .await
        .expect("reference engine")
}

const TWO_CELLS: &str = r#"
name = "scrape-test"
[[cell]]
name = "c1"
prompt_tokens = 200
max_tokens = 12
concurrency = 1
requests = 3
warmup = 1
seed = 4
[[cell]]
name = "c2"
prompt_tokens = 200
max_tokens = 12
concurrency = 2
requests = 4
warmup = 1
seed = 5
"#;

const ONE_SMALL_CELL: &str = r#"
name = "no-metrics"
[[cell]]
name = "c1"
prompt_tokens = 120
max_tokens = 4
concurrency = 1
requests = 2
warmup = 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_counters_over_each_cell_equal_the_journals_sums() {
    let _serial = SERIAL.lock().await;
    let mut engine = own_engine(true).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut o = opts(
        &engine.base_url,
        write_suite(dir.path(), TWO_CELLS),
        out.clone(),
    );
    o.scrape.interval = Some(Duration::from_millis(500));
    let art = runner::run(&o).await.expect("run");
    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    let log = infergate::measure::scrape::read_log(&out.join("server-metrics.jsonl")).unwrap();
    assert!(art.method["server_metrics"].contains("/metrics"));
    for cell in &art.cells {
        support::assert_eligible_but_one_read(cell, &recs);
        assert!(cell.warnings.is_empty(), "{:?}", cell.warnings);
        let [m] = cell.server_metrics.as_slice() else {
            panic!("one endpoint: {:?}", cell.server_metrics)
        };
        assert_eq!(m.engine.as_deref(), Some("llama.cpp"));
        assert_eq!((m.windows, m.incomplete_windows), (1, 0));
        assert!(m.scrapes >= 2 && m.window_s > 0.0, "{m:?}");
        // The journal's own sums, added up here.
        let mine: Vec<_> = recs.iter().filter(|r| r.cell == cell.name).collect();
        let cached: u64 = mine
            .iter()
            .map(|r| r.capture.server_timings.unwrap().cache_n.unwrap())
            .sum();
        let prompt: u64 = mine.iter().map(|r| r.capture.prompt_tokens.unwrap()).sum();
        let generated: u64 = mine
            .iter()
            .map(|r| r.capture.completion_tokens.unwrap())
            .sum();
        let delta = |name: &str| m.counters[name];
        assert_eq!(
            delta("llamacpp:prompt_tokens_total"),
            (prompt - cached) as f64
        );
        assert_eq!(delta("llamacpp:prompt_tokens_cached_total"), cached as f64);
        assert_eq!(delta("llamacpp:tokens_predicted_total"), generated as f64);
        let check = m.check.as_ref().expect("a counter check");
        assert!(check.agrees && check.lines.len() == 3, "{check:?}");
        assert_eq!(check.requests, mine.len());
        // c2 runs two at once: the gauge saw it.
        let busy = m.gauges["llamacpp:requests_processing"];
        assert!(busy.max >= 1.0, "{busy:?}");
        assert!(m.series.contains_key("llamacpp:requests_processing"));
    }
    // The crate's parse of the last scrape equals the server's text read
    // by this test afterwards (nothing was sent in between).
    let last = log.iter().rev().find(|e| e.samples.is_some()).unwrap();
    let parsed = last
        .samples
        .as_ref()
        .unwrap()
        .iter()
        .find(|s| s.name == "llamacpp:tokens_predicted_total")
        .unwrap()
        .value;
    assert_eq!(
        parsed,
        support::served_total(&engine.base_url, "llamacpp:tokens_predicted_total").await
    );

    // An interleaved qualification's later blocks reuse the first block's
    // sizing: the server's own counter sees only the block's requests.
    let blocks = dir.path().join("blocks");
    let block = |first: usize| {
        let mut o = opts(
            &engine.base_url,
            dir.path().join("suite.toml"),
            blocks.clone(),
        );
        o.only_cells = vec!["c1".into()];
        o.resume = first > 0;
        o.part = runner::RunPart::Block {
            first,
            count: 2,
            warmup: false,
        };
        o
    };
    runner::run(&block(0)).await.expect("first block");
    assert!(blocks.join(runner::SIZING_FILE).is_file());
    let before = support::served_total(&engine.base_url, "llamacpp:prompt_tokens_total").await;
    runner::run(&block(2)).await.expect("second block");
    let after = support::served_total(&engine.base_url, "llamacpp:prompt_tokens_total").await;
    let second: u64 = journal::read(&blocks.join(runner::JOURNAL_FILE))
        .unwrap()
        .iter()
        .filter(|r| r.index >= 2)
        .map(|r| {
            r.capture.prompt_tokens.unwrap() - r.capture.server_timings.unwrap().cache_n.unwrap()
        })
        .sum();
    assert_eq!(
        after - before,
        second as f64,
        "no sizing probes in a later block"
    );
    engine.stop().unwrap();

    // The report carries both sides' server metrics, and verify aggregates
    // the scrape log again: an edited scrape is named.
    let art_file = out.join(runner::ARTIFACT_FILE);
    let report = infergate::report::compare_files(&art_file, &art_file, None).unwrap();
    let cell = &report.cells.0[0].1;
    assert_eq!(cell.baseline_server_metrics.len(), 1);
    assert!(
        cell.baseline_server_metrics[0].counters.is_empty(),
        "raw series stay in the run"
    );
    assert!(
        cell.baseline_server_metrics[0]
            .check
            .as_ref()
            .unwrap()
            .agrees
    );
    let value = serde_json::to_value(&report).unwrap();
    let dirs = infergate::verify_runs::RunDirs {
        baseline: vec![out.clone()],
        candidate: vec![out.clone()],
        suite: None,
    };
    let v = infergate::verify_runs::verify_runs(&value, &dirs);
    assert!(v.is_clean(), "{:#?}", v.disagreements);
    let log_file = out.join("server-metrics.jsonl");
    let edited: String = std::fs::read_to_string(&log_file)
        .unwrap()
        .lines()
        .map(|l| {
            let mut e: serde_json::Value = serde_json::from_str(l).unwrap();
            if e["phase"] == "after" && e["cell"] == "c1" {
                for s in e["samples"].as_array_mut().unwrap() {
                    if s["name"] == "llamacpp:tokens_predicted_total" {
                        s["value"] = (s["value"].as_f64().unwrap() + 5.0).into();
                    }
                }
            }
            e.to_string() + "\n"
        })
        .collect();
    std::fs::write(&log_file, edited).unwrap();
    let v = infergate::verify_runs::verify_runs(&value, &dirs);
    assert!(
        v.disagreements.iter().any(|d| d
            .path
            .ends_with("cells[0].server_metrics[0].counters.llamacpp:tokens_predicted_total")),
        "{:#?}",
        v.disagreements
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_without_metrics_is_noted_and_measured_all_the_same() {
    let _serial = SERIAL.lock().await;
    let mut engine = own_engine(false).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), ONE_SMALL_CELL);
    let art = runner::run(&opts(&engine.base_url, suite, dir.path().join("out")))
        .await
        .expect("a run without /metrics");
    for cell in &art.cells {
        assert_eq!(cell.failed, 0);
        let [m] = cell.server_metrics.as_slice() else {
            panic!("{:?}", cell.server_metrics)
        };
        let why = m.unavailable.as_deref().expect("noted as unavailable");
        assert!(why.contains("501") || why.contains("404"), "{why}");
        assert!(m.check.is_none() && m.counters.is_empty());
    }
    engine.stop().unwrap();
}

/// A qualification's later blocks reuse the server as its first block
/// discovered it (the process stays up between them): a proxy in front of
/// the engine sees the discovery probes once, and a later block sends only
/// its measured requests and the metrics scrapes around them. Each block's
/// records reach the caller in memory, the journal's very records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_block_reuses_the_discovered_server_and_hands_back_its_records() {
    use infergate_testkit::faultproxy::{Fault, FaultProxy, FaultProxyConfig, ProxyEvent};
    let engine = support::engine("baseline");
    let proxy = FaultProxy::start(FaultProxyConfig::new(&engine.base_url), |_| Fault::Pass)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let suite_path = write_suite(dir.path(), TWO_CELLS);
    let (suite, text) = infergate::config::suite::Suite::load(&suite_path).unwrap();
    let out = dir.path().join("blocks");
    let block = |first: usize| {
        let mut o = opts(&proxy.base_url(), suite_path.clone(), out.clone());
        o.only_cells = vec!["c1".into()];
        o.resume = first > 0;
        o.part = runner::RunPart::Block {
            first,
            count: 2,
            warmup: false,
        };
        o
    };
    // Discovery: what the server serves, its build and whether it can
    // tokenize ("hello"). Each request's fitting (/tokenize of its own
    // prompt) is a block's work and is not counted here.
    let probes = |events: &[ProxyEvent]| -> Vec<String> {
        events
            .iter()
            .filter(|e| {
                let hello = e.body.as_ref().and_then(|b| b.get("content"))
                    == Some(&serde_json::json!("hello"));
                (e.method == "GET" && e.path != "/metrics") || (e.path == "/tokenize" && hello)
            })
            .map(|e| format!("{} {}", e.method, e.path))
            .collect()
    };
    let first = runner::measure_suite(&block(0), &suite, &text, Some(&[]), None)
        .await
        .expect("first block");
    let seen = proxy.events();
    assert!(
        probes(&seen).iter().any(|p| p == "GET /v1/models"),
        "{:?}",
        probes(&seen)
    );
    let second = runner::measure_suite(
        &block(2),
        &suite,
        &text,
        Some(&first.records),
        Some(first.target.clone()),
    )
    .await
    .expect("second block");
    let later = &proxy.events()[seen.len()..];
    assert_eq!(probes(later), Vec::<String>::new(), "a later block probed");
    assert!(probes(&seen).iter().any(|p| p == "POST /tokenize"));
    let measured = later
        .iter()
        .filter(|e| e.path == "/v1/chat/completions")
        .count();
    assert_eq!(measured, 2, "the block's own requests");
    // What is left to count is each request's own prompt head: the filler
    // vocabulary and the probe were counted by the first block.
    let counted = later.iter().filter(|e| e.path == "/tokenize").count();
    assert!(counted <= 2, "{counted} POST /tokenize in a block of 2");
    // A block is pooled by its caller, not aggregated on its own.
    assert!(second.artifact.cells.is_empty());
    let held: Vec<_> = first.records.iter().chain(&second.records).collect();
    let journal = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    assert_eq!(journal.len(), 4);
    assert_eq!(held.len(), journal.len());
    for r in &journal {
        assert!(
            held.iter()
                .any(|h| h.index == r.index && h.capture.ttft_ms == r.capture.ttft_ms),
            "journal record {} not handed back",
            r.index
        );
    }
}
