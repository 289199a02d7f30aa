//! The long-context lane (`INFERGATE_TEST_LONG=1 scripts/test.sh`): a cell
//! of 7.5k-token prompts, near the reference model's whole trained context
//! (8192), against the `long` engine profile (one slot of 8192 tokens).
//! Each request lands on its target as the server counts it
//! (`usage.prompt_tokens`), sized once with `tokenizer.json` and once with
//! the server's `/tokenize`, and request k has the same count in both runs.
//! Opt-in: with sizing's probes, each run takes about 4.5 minutes on one
//! engine thread here (528 s for both).
//!
//! The seed's production cell (~97-120k prompt tokens) is beyond any
//! reference engine here (8k context, ~250 prompt tokens/s on the CPU), so
//! its client path is checked against the fast source counting as the
//! engine does: 120k-token prompts sized exactly, each recounted by the
//! engine's own template and tokenizer (which prefill nothing), the journal
//! complete. The client's memory at 100 such requests is
//! `cargo bench --bench long_prompt` (docs/testing.md).

mod support;

use std::path::Path;
use std::time::Instant;

use infergate::measure::runner;
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use infergate_testkit::promptcount::{PromptCounter, engine_recount};

const TARGET: u64 = 7680;
const REQUESTS: usize = 3;

/// A suite of one unique-prompt cell of `requests` prompts of `target` tokens.
fn suite_of(dir: &Path, target: u64, requests: usize, concurrency: usize) -> std::path::PathBuf {
    let p = dir.join(format!("suite-{target}.toml"));
    std::fs::write(
        &p,
        format!(
            "name = \"long\"\n[[cell]]\nname = \"p{target}\"\nprompt_tokens = {target}\ntolerance_percent = 1\n\
             max_tokens = 4\nconcurrency = {concurrency}\nrequests = {requests}\nwarmup = 0\ncache = \"unique\"\n"
        ),
    )
    .unwrap();
    p
}

fn suite(dir: &Path) -> std::path::PathBuf {
    suite_of(dir, TARGET, REQUESTS, 1)
}

/// The longest line of a run's journal, in bytes.
fn longest_journal_line(out: &Path) -> usize {
    std::fs::read_to_string(out.join(runner::JOURNAL_FILE))
        .unwrap()
        .lines()
        .map(str::len)
        .max()
        .unwrap()
}

/// One run: each request's `usage.prompt_tokens`, by index.
async fn run_once(
    base: &str,
    tokenizer: Option<std::path::PathBuf>,
    dir: &Path,
    name: &str,
) -> Vec<u64> {
    let out = dir.join(name);
    let t0 = Instant::now();
    let (art, recs) = support::sized_run(base, suite(dir), tokenizer, &out, REQUESTS, name).await;
    let counts: Vec<u64> = recs
        .iter()
        .map(|r| r.capture.prompt_tokens.expect("usage.prompt_tokens"))
        .collect();
    // A journal line holds what was measured, never the prompt itself.
    let longest = longest_journal_line(&out);
    eprintln!(
        "{name}: {REQUESTS} requests in {:.1?}; usage.prompt_tokens {counts:?}; longest journal line {longest} bytes; {}",
        t0.elapsed(),
        art.method["prompt_tokens_achieved"]
    );
    assert!(longest < 16 << 10, "{longest} bytes");
    assert!(
        art.cells[0].ineligible_reasons.is_empty(),
        "{:?}",
        art.cells[0].ineligible_reasons
    );
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long-context lane: INFERGATE_TEST_LONG=1 scripts/test.sh runs it (about 9 minutes)"]
async fn prompts_near_the_whole_context_land_on_their_target_both_ways() {
    let engine = support::engine("long");
    let dir = tempfile::tempdir().unwrap();
    let a = run_once(
        &engine.base_url,
        Some(support::tokenizer_json()),
        dir.path(),
        "file",
    )
    .await;
    let b = run_once(&engine.base_url, None, dir.path(), "tokenize").await;
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            x.abs_diff(TARGET) <= 1,
            "tokenizer.json: request {k}: {x} tokens"
        );
        assert!(
            y.abs_diff(TARGET) <= 1,
            "/tokenize: request {k}: {y} tokens"
        );
    }
    assert_eq!(a, b, "the file and /tokenize size request k alike");
}

const LONG_TARGET: u64 = 120_000;
const LONG_REQUESTS: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long-context lane: INFERGATE_TEST_LONG=1 scripts/test.sh runs it (about 15 seconds)"]
async fn prompts_of_120k_tokens_land_on_target_and_the_engine_recounts_them() {
    let tokenizer = support::tokenizer_json();
    let (_, src) = FastSource::start(FastSourceConfig {
        counter: Some(PromptCounter::smollm2(&tokenizer).unwrap()),
        record_prompts: true,
        // Paced, so the client times each answer's decode.
        ttft: std::time::Duration::from_millis(50),
        itl: std::time::Duration::from_millis(50),
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p120k");
    let t0 = Instant::now();
    let (art, recs) = support::sized_run(
        &src.base_url(),
        suite_of(dir.path(), LONG_TARGET, LONG_REQUESTS, 4),
        Some(tokenizer),
        &out,
        LONG_REQUESTS,
        "120k",
    )
    .await;
    let took = t0.elapsed();
    // The journal is complete: every request once, each on target as the
    // source counted it.
    let indices: Vec<usize> = recs.iter().map(|r| r.index).collect();
    assert_eq!(indices, (0..LONG_REQUESTS).collect::<Vec<_>>());
    for r in &recs {
        assert_eq!(
            r.capture.prompt_tokens,
            Some(LONG_TARGET),
            "request {}",
            r.index
        );
        assert_eq!(r.target_prompt_tokens, Some(LONG_TARGET));
    }
    let longest = longest_journal_line(&out);
    assert!(longest < 16 << 10, "{longest} bytes");
    assert!(
        art.cells[0].ineligible_reasons.is_empty(),
        "{:?}",
        art.cells[0].ineligible_reasons
    );
    // The prompts as the source received them (the probes unstreamed),
    // recounted by the reference engine's own template and tokenizer.
    let (prompts, probes): (Vec<_>, Vec<_>) =
        src.take_prompts().into_iter().partition(|p| p.stream);
    assert_eq!(prompts.len(), LONG_REQUESTS);
    // Sizing's probes: an empty message, the prefix alone, and one prompt
    // at full size (a real engine's one full prefill before the cell).
    let mut probed: Vec<u64> = probes.iter().map(|p| p.prompt_tokens).collect();
    probed.sort();
    assert_eq!(probed.len(), 3, "{probed:?}");
    assert!(
        probed[2].abs_diff(LONG_TARGET) < LONG_TARGET / 100,
        "{probed:?}"
    );
    let engine = support::engine("long");
    let http = support::http();
    let mut prefixes = std::collections::BTreeSet::new();
    for p in &prompts {
        assert_eq!(p.prompt_tokens, LONG_TARGET);
        let content = &p.messages[0].content;
        prefixes.insert(content[..content.find(']').unwrap()].to_string());
        let n = engine_recount(&http, &engine.base_url, &p.messages)
            .await
            .unwrap();
        assert_eq!(n, LONG_TARGET, "recount of {}", &content[..60]);
    }
    assert_eq!(prefixes.len(), LONG_REQUESTS, "each prompt unique");
    eprintln!(
        "120k: {LONG_REQUESTS} requests in {took:.1?} (sizing included), recounted in {:.1?}; longest journal line {longest} bytes; {}",
        t0.elapsed() - took,
        art.method["prompt_tokens_achieved"]
    );
}
