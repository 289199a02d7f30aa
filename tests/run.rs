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

fn write_suite(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("suite.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_measures_real_values_that_agree_with_the_journal() {
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
    assert!(cell.performance_eligible, "{:?}", cell.ineligible_reasons);
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
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let suite = SUITE
        .replace("prompt_tokens = 300", "prompt_tokens = 97159")
        .replace("name = \"small\"", "name = \"capacity-120k\"");
    let err = runner::run(&opts(
        &engine.base_url,
        write_suite(dir.path(), &suite),
        out.clone(),
    ))
    .await
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("cell 'capacity-120k' cannot fit") && msg.contains("4096"),
        "{msg}"
    );
    // Refused before the journal was opened: nothing was sent, nothing recorded.
    assert!(!out.join(runner::JOURNAL_FILE).exists());
}

/// Kill a run midway: every request it finished is in the journal, and resuming
/// from a journal with a torn last line is a clear error.
#[test]
fn a_killed_run_keeps_every_finished_request() {
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

    // A torn last line (as a kill mid-write leaves) stops a resume with a clear error.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .unwrap();
    f.write_all(br#"{"cell":"small","index":39,"send_"#)
        .unwrap();
    drop(f);
    let res = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args([
            "run",
            "--quiet",
            "--resume",
            "--target",
            &engine.base_url,
            "--suite",
        ])
        .arg(&suite_path)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
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
    assert!(cell.performance_eligible, "{:?}", cell.ineligible_reasons);
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
