//! Shared support for integration tests that need the reference engine.
//!
//! `engine("baseline")` starts that profile once per test binary and hands
//! out a `&'static` to it. The servers live until the binary exits: statics
//! are never dropped, so cleanup is the process driver's exit hook (SIGTERM
//! to each process group at normal exit) and `PR_SET_PDEATHSIG` (if the test
//! binary crashes). Tests never skip: without an installed engine they fail
//! and say to run `scripts/setup-engine.sh`.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod browser;
pub mod cli;
pub mod served;
pub mod sglang;
pub mod vllm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use infergate::driver::engine::{self, EngineProfile, RunningEngine};

/// The engine profiles in the repository's `engine/profiles.toml`.
pub fn profiles_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/profiles.toml")
}

pub fn profile(name: &str) -> EngineProfile {
    let path = profiles_path();
    let mut profiles = engine::load_profiles(&path).unwrap_or_else(|e| panic!("{e:#}"));
    profiles
        .remove(name)
        .unwrap_or_else(|| panic!("no engine profile {name:?} in {}", path.display()))
}

/// Server logs of this test binary's engines, a directory per binary
/// (`engine-logs/features` for `features-<hash>`): binaries run two at once,
/// and each one's logs read apart from the other's.
pub fn log_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("tests");
    let binary = stem.rsplit_once('-').map_or(stem, |(name, _hash)| name);
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("engine-logs")
        .join(binary)
}

/// The shared server for `profile_name`, started on first use.
pub fn engine(profile_name: &str) -> &'static RunningEngine {
    static ENGINES: Mutex<BTreeMap<String, &'static RunningEngine>> = Mutex::new(BTreeMap::new());
    // A test that panicked while holding the lock left the map intact.
    let mut engines = ENGINES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(running) = engines.get(profile_name) {
        return running;
    }
    let started = start_detached(profile(profile_name));
    match started {
        Ok(running) => {
            eprintln!(
                "engine {profile_name}: {} (pid {}, ready in {:.1?}), log {}",
                running.base_url,
                running.pid,
                running.startup,
                running.log_path.display()
            );
            let running: &'static RunningEngine = Box::leak(Box::new(running));
            engines.insert(profile_name.to_string(), running);
            running
        }
        Err(e) => {
            drop(engines);
            panic!("reference engine profile {profile_name} did not start: {e:#}")
        }
    }
}

/// Start on a thread with its own runtime: `#[tokio::test]` gives each test a
/// runtime that dies with the test, and nothing of a shared server may depend
/// on one. (`RunningEngine` holds no runtime resources once started.)
fn start_detached(profile: EngineProfile) -> anyhow::Result<RunningEngine> {
    let dir = log_dir();
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(engine::start(&profile, &dir))
    });
    match handle.join() {
        Ok(result) => result,
        Err(_) => anyhow::bail!("the engine start thread panicked"),
    }
}

/// An HTTP client for talking to the local engines (no proxy, bounded).
///
/// No connection reuse: llama.cpp closes a connection after a streamed
/// response while still advertising keep-alive, and a request sent on it
/// right after fails (hyper `IncompleteMessage`, about 1 in 8 here).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("building an HTTP client")
}

/// Resident memory of a process in KiB, from /proc.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Run one of the repository's setup scripts; its stdout. A failure panics
/// naming the script (its stderr is passed through).
pub fn setup_script(name: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name);
    let out = std::process::Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}); run it by hand to see why",
        script.display(),
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The reference model's `tokenizer.json`, built (cached) by
/// `scripts/setup-tokenizer.sh`, which prints its path last.
pub fn tokenizer_json() -> PathBuf {
    let stdout = setup_script("setup-tokenizer.sh");
    let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    assert!(path.is_file(), "setup-tokenizer.sh printed {stdout:?}");
    path
}

/// Options of a plain whole-suite run against `target` (no turnover, quiet).
pub fn run_opts(
    target: &str,
    suite: PathBuf,
    out: PathBuf,
) -> infergate::measure::runner::RunOptions {
    infergate::measure::runner::RunOptions {
        target: target.to_string(),
        api_key_env: None,
        suite,
        out_dir: out,
        runtime_label: Some("baseline".into()),
        image: None,
        only_cells: vec![],
        resume: false,
        timeouts: infergate::measure::client::Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(300),
            per_1k_prompt_tokens: Duration::ZERO,
        },
        skip_turnover: Some(infergate::artifact::TurnoverSkip::SkippedByRun),
        quiet: true,
        tokenizer: None,
        part: infergate::measure::runner::RunPart::Whole,
        scrape: infergate::measure::scrape::ScrapeOptions::default(),
    }
}

/// A sized run of `suite` against `base` into `out`, with `tokenizer`
/// (None: the server's `/tokenize`): its artifact and its journal's
/// records by index, `requests` of them, every one succeeded (`name` in
/// the messages).
pub async fn sized_run(
    base: &str,
    suite: PathBuf,
    tokenizer: Option<PathBuf>,
    out: &Path,
    requests: usize,
    name: &str,
) -> (
    infergate::artifact::RunArtifact,
    Vec<infergate::measure::record::RequestRecord>,
) {
    use infergate::measure::{journal, record::Outcome, runner};
    let mut o = run_opts(base, suite, out.to_path_buf());
    o.tokenizer = tokenizer;
    let art = runner::run(&o).await.expect("run");
    let mut recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    recs.sort_by_key(|r| r.index);
    assert_eq!(recs.len(), requests, "{name}");
    for r in &recs {
        assert_eq!(
            r.outcome,
            Outcome::Ok,
            "{name} #{}: {:?}",
            r.index,
            r.detail
        );
    }
    (art, recs)
}

/// Run `suite` (one cell, `cell`, too big for the server) against `target`:
/// it is refused naming the cell and the server's `context`, before the
/// journal is opened, so nothing was sent and nothing recorded.
pub async fn assert_refused_before_any_request(
    target: &str,
    suite: PathBuf,
    out: PathBuf,
    cell: &str,
    context: u64,
) {
    let err = infergate::measure::runner::run(&run_opts(target, suite, out.clone()))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&format!("cell '{cell}' cannot fit")) && msg.contains(&context.to_string()),
        "{msg}"
    );
    assert!(!out.join(infergate::measure::runner::JOURNAL_FILE).exists());
}

/// A client for turnover and quality runs against the reference engines:
/// patient first-byte and total timeouts (a CPU engine under test load).
pub fn client(base_url: &str) -> infergate::measure::client::Client {
    use infergate::measure::client::{Client, ClientConfig, Timeouts};
    Client::new(ClientConfig {
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(300),
            per_1k_prompt_tokens: Duration::ZERO,
        },
        ..ClientConfig::new(base_url)
    })
    .expect("client")
}

/// A cell measured against a real engine on this shared host is
/// performance evidence, unless for one reason that names a fact of the
/// host: short answers whose tokens all arrived in one read (the client or
/// the engine's API process was descheduled while it decoded; CI saw 1 of 9
/// on vLLM and 1 of 3 on llama.cpp). The cell then cannot time their decode
/// and is rightly refused (`aggregate::decode_reasons`). That reason is
/// admitted only when it is the only one and its count is exactly the
/// journal's requests with two or more tokens and no decode span, so it can
/// neither hide nor invent one.
pub fn assert_eligible_but_one_read(
    cell: &infergate::artifact::CellResult,
    recs: &[infergate::measure::record::RequestRecord],
) {
    let one_read = recs
        .iter()
        .filter(|r| r.cell == cell.name && r.outcome == infergate::measure::record::Outcome::Ok)
        .filter(|r| r.capture.completion_tokens.is_some_and(|n| n >= 2))
        .filter(|r| r.capture.derived().decode_tok_s.is_none())
        .count();
    if one_read == 0 {
        assert!(
            cell.performance_eligible && cell.ineligible_reasons.is_empty(),
            "{}: {:?}",
            cell.name,
            cell.ineligible_reasons
        );
        return;
    }
    let expected = format!("{one_read} requests whose whole answer arrived in one read");
    eprintln!("{}: {expected} (admitted: a fact of this host)", cell.name);
    assert!(!cell.performance_eligible, "{}", cell.name);
    assert_eq!(
        cell.ineligible_reasons.len(),
        1,
        "{:?}",
        cell.ineligible_reasons
    );
    assert!(
        cell.ineligible_reasons[0].starts_with(&expected),
        "{:?} is not {expected:?}",
        cell.ineligible_reasons[0]
    );
}

/// The server's `/metrics` text, read by this test itself: a second client
/// and a second parser (a line split, not the crate), summed over label sets.
pub async fn served_total(base: &str, name: &str) -> f64 {
    let text = http()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(!values.is_empty(), "{name} not in /metrics");
    values.iter().sum()
}

pub fn sum_over_labels(m: &std::collections::BTreeMap<String, f64>, name: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| k.split('{').next() == Some(name))
        .map(|(_, v)| v)
        .sum()
}
