//! The long-context lane (`INFERGATE_TEST_LONG=1 scripts/test.sh`): a cell
//! of 7.5k-token prompts, near the reference model's whole trained context
//! (8192), against the `long` engine profile (one slot of 8192 tokens).
//! Each request lands on its target as the server counts it
//! (`usage.prompt_tokens`), sized once with `tokenizer.json` and once with
//! the server's `/tokenize`, and request k has the same count in both runs.
//! Opt-in: with sizing's probes, each run takes about 4.5 minutes on one
//! engine thread here (528 s for both).

mod support;

use std::path::Path;
use std::time::Instant;

use infergate::measure::runner;

const TARGET: u64 = 7680;
const REQUESTS: usize = 3;

fn suite(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("suite.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"long\"\n[[cell]]\nname = \"p7680\"\nprompt_tokens = {TARGET}\ntolerance_percent = 1\n\
             max_tokens = 4\nconcurrency = 1\nrequests = {REQUESTS}\nwarmup = 0\ncache = \"unique\"\n"
        ),
    )
    .unwrap();
    p
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
    let longest = std::fs::read_to_string(out.join(runner::JOURNAL_FILE))
        .unwrap()
        .lines()
        .map(str::len)
        .max()
        .unwrap();
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
