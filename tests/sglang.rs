//! A third engine family: SGLang on the CPU serving the reference model
//! (scripts/setup-sglang.sh), measured by `infergate run`. Everything here
//! talks to a real SGLang server on loopback. The SGLang lane is opt-in
//! (its install is ~4.5 minutes and 6.9 GB, and it decodes at ~0.5 s per
//! token here): `INFERGATE_TEST_SGLANG=1 scripts/test.sh` runs these with
//! `--ignored`, and then nothing is skipped: without SGLang they fail.

mod support;
use support::sglang;

use std::path::{Path, PathBuf};
use std::time::Duration;

use infergate::artifact::metric;
use infergate::measure::journal;
use infergate::measure::record::Outcome;
use infergate::measure::runner;

/// One test at a time: the counters of a cell must see that cell's
/// requests only, and the machine has two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sized for a slow engine: 8-token answers, 3–4 requests per cell.
const CELLS: &str = r#"
name = "sglang-cells"
[[cell]]
name = "c1"
prompt_tokens = 300
tolerance_percent = 5
max_tokens = 8
concurrency = 1
requests = 3
warmup = 1
cache = "unique"
seed = 3
extra = { ignore_eos = true }

# Every request shares one long prefix: after the warmup, SGLang serves it
# from its radix cache, and usage must say so.
[[cell]]
name = "c2-shared"
prompt_tokens = 300
tolerance_percent = 5
max_tokens = 8
concurrency = 2
requests = 4
warmup = 1
cache = "shared"
seed = 5
extra = { ignore_eos = true }
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "SGLang lane: INFERGATE_TEST_SGLANG=1 scripts/test.sh runs it (install ~4.5 min, 6.9 GB)"]
async fn cells_on_sglang_are_sized_by_its_tokenizer_and_agree_with_its_counters() {
    let _serial = SERIAL.lock().await;
    let server = sglang::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut o = support::run_opts(
        &server.base_url,
        write(dir.path(), "suite.toml", CELLS),
        out.clone(),
    );
    o.scrape.interval = Some(Duration::from_millis(500));
    let art = runner::run(&o).await.expect("run against SGLang");

    // Discovery: SGLang's model entry and context; its build from
    // /get_server_info (its /version is a 404).
    assert_eq!(art.provenance.model, sglang::MODEL);
    assert_eq!(
        art.provenance.context_window,
        Some(4096),
        "max_model_len of /v1/models (--context-length)"
    );
    assert_eq!(art.provenance.server_build.as_deref(), Some("0.5.23"));
    assert!(
        art.method["prompt_sizing"].contains("server /tokenize"),
        "{}",
        art.method["prompt_sizing"]
    );

    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    assert_eq!(recs.len(), 7, "warmups are never journaled");
    for r in &recs {
        assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.detail);
        let c = &r.capture;
        // ignore_eos: SGLang's usage says exactly max_tokens.
        assert_eq!(c.completion_tokens, Some(8), "{c:?}");
        assert!(!c.completion_tokens_estimated);
        // A role-only first chunk, then one content chunk per token.
        assert_eq!(c.chunk_ms.len(), 8, "one content chunk per token");
        assert_eq!(c.finish_reasons, vec!["length".to_string()]);
        // Each request fitted by SGLang's /tokenize: the server's own count
        // is the target exactly.
        assert_eq!(c.prompt_tokens, Some(300), "{c:?}");
        // --enable-cache-report: every request says what was cached.
        let cached = c.cached_prompt_tokens.expect("usage names cached tokens");
        if r.cell == "c2-shared" {
            assert!(
                cached >= 256,
                "the shared prefix is served from the radix cache: {cached}"
            );
        }
        eprintln!("{} #{}: cached {cached}", r.cell, r.index);
    }

    for cell in &art.cells {
        support::assert_eligible_but_one_read(cell, &recs);
        assert!(cell.warnings.is_empty(), "{:?}", cell.warnings);
        let [m] = cell.server_metrics.as_slice() else {
            panic!("one endpoint: {:?}", cell.server_metrics)
        };
        assert_eq!(m.engine.as_deref(), Some("sglang"));
        assert_eq!((m.windows, m.incomplete_windows), (1, 0));
        // The journal's own sums, added up here, against the server's counters.
        let mine: Vec<_> = recs.iter().filter(|r| r.cell == cell.name).collect();
        let prompt: u64 = mine.iter().map(|r| r.capture.prompt_tokens.unwrap()).sum();
        let generated: u64 = mine
            .iter()
            .map(|r| r.capture.completion_tokens.unwrap())
            .sum();
        let delta = |name: &str| support::sum_over_labels(&m.counters, name);
        assert_eq!(delta("sglang:prompt_tokens_total"), prompt as f64);
        assert_eq!(delta("sglang:generation_tokens_total"), generated as f64);
        let check = m.check.as_ref().expect("a counter check");
        assert!(check.agrees && check.lines.len() == 2, "{check:?}");
        // SGLang has no per-request counter of cached tokens: the check
        // says so rather than compare them (usage names them, above).
        assert!(
            check
                .notes
                .iter()
                .any(|n| n.starts_with("cached prompt tokens not compared")),
            "{check:?}"
        );
        eprintln!(
            "{}: prompt {prompt}, generated {generated}, cached (usage) {}; realtime prefill_cache +{}, prefill_compute +{}",
            cell.name,
            mine.iter()
                .map(|r| r.capture.cached_prompt_tokens.unwrap())
                .sum::<u64>(),
            m.counters
                .iter()
                .filter(|(k, _)| k.starts_with("sglang:realtime_tokens_total")
                    && k.contains("prefill_cache"))
                .map(|(_, v)| v)
                .sum::<f64>(),
            m.counters
                .iter()
                .filter(|(k, _)| k.starts_with("sglang:realtime_tokens_total")
                    && k.contains("prefill_compute"))
                .map(|(_, v)| v)
                .sum::<f64>(),
        );

        // The server's own clock: SGLang times TTFT from the request's
        // arrival in its tokenizer manager, so the client's mean is no
        // smaller and the gap (HTTP, streaming) is small.
        let (count, sum) = m
            .histograms
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some("sglang:time_to_first_token_seconds"))
            .fold((0.0, 0.0), |(c, s), (_, h)| (c + h.count, s + h.sum));
        assert_eq!(count, mine.len() as f64, "one TTFT per request");
        let server_ms = sum / count * 1000.0;
        let client_ms = cell.metrics[metric::TTFT_MS].mean;
        eprintln!(
            "{}: TTFT mean client {client_ms:.1} ms, server {server_ms:.1} ms",
            cell.name
        );
        assert!(
            server_ms <= client_ms + 1.0 && client_ms - server_ms < 1000.0,
            "client TTFT mean {client_ms:.1} ms, server {server_ms:.1} ms"
        );
    }

    // The crate's parse of the last scrape equals this test's own read.
    let log = infergate::measure::scrape::read_log(&out.join("server-metrics.jsonl")).unwrap();
    let last = log.iter().rev().find(|e| e.samples.is_some()).unwrap();
    let parsed: f64 = last
        .samples
        .as_ref()
        .unwrap()
        .iter()
        .filter(|s| s.name == "sglang:generation_tokens_total")
        .map(|s| s.value)
        .sum();
    assert_eq!(
        parsed,
        support::served_total(&server.base_url, "sglang:generation_tokens_total").await
    );

    // A cell beyond SGLang's context length is refused before any request.
    let big = CELLS
        .replacen("prompt_tokens = 300", "prompt_tokens = 5000", 1)
        .replacen("name = \"c1\"", "name = \"too-big\"", 1);
    support::assert_refused_before_any_request(
        &server.base_url,
        write(dir.path(), "big.toml", &big),
        dir.path().join("big"),
        "too-big",
        4096,
    )
    .await;
}

const TURNOVER: &str = r#"
name = "sglang-turnover"
[[turnover]]
name = "reference-words5-c2"
contract = "reference"
prompt = "words"
words = 5
code_words = ["cedar"]
requests = 4
concurrency = 2
repeats = 1
seed = 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "SGLang lane: INFERGATE_TEST_SGLANG=1 scripts/test.sh runs it (install ~4.5 min, 6.9 GB)"]
async fn turnover_on_sglang_is_reference_exact_with_canaries() {
    let _serial = SERIAL.lock().await;
    let server = sglang::shared();
    let dir = tempfile::tempdir().unwrap();
    let mut o = support::run_opts(
        &server.base_url,
        write(dir.path(), "suite.toml", TURNOVER),
        dir.path().join("out"),
    );
    o.skip_turnover = None;
    let art = runner::run(&o).await.expect("turnover against SGLang");
    let [t] = art.turnover.as_slice() else {
        panic!("one turnover run: {:?}", art.turnover)
    };
    assert_eq!(t.contract, "reference");
    assert_eq!((t.requests, t.responses_received), (4, 4));
    // Batched two at a time, every answer equals its prompt's answer alone
    // at temperature 0, byte for byte, and carries its own canary only.
    assert_eq!(
        (t.exact_output_passed, t.failed, t.contaminated),
        (4, 0, 0),
        "{:#?}",
        t.failures
    );
    assert_eq!(t.references.len(), 4);
    assert!(t.references.iter().all(|r| {
        r.as_deref()
            .is_some_and(|s| s.split_whitespace().count() >= 5)
    }));
}
