//! Shared by tests/qualify*.rs: a scratch directory with its own ledger,
//! small suites and plans for the reference engine, and cleanup of every
//! runtime the ledger says is still running (qualification leaves the
//! baseline serving on purpose, and a failed test must not leak servers).
#![allow(dead_code)] // each test binary uses a different part

use std::path::PathBuf;
use std::time::Duration;

use infergate::driver::detached::ProcessIdentity;
use infergate::driver::engine::EngineInstall;
use infergate::driver::handle::Handle;
use infergate::qualify;
use infergate::runtime::ledger::{Entry, Ledger};
use infergate::runtime::lifecycle;

/// The model alias both shipped engine profiles serve.
pub const MODEL: &str = "SmolLM2-135M-Instruct-Q4_1";

/// One engine-heavy test at a time: the machine has two cores. (An async
/// lock: it is held across awaits, and each test has its own runtime.)
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Tests never skip: without the engine they fail and say how to install it.
pub fn require_engine() {
    if let Err(e) = EngineInstall::locate() {
        panic!("these tests run the real reference engine: {e:#}");
    }
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub ledger: PathBuf,
    pub out: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        require_engine();
        let dir = tempfile::Builder::new()
            .prefix("infergate-qualify-")
            .tempdir()
            .expect("tempdir");
        let ledger = dir.path().join("ledger.sqlite");
        let out = dir.path().join("out");
        Env { dir, ledger, out }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    /// One small cell: short prompts, few tokens, one at a time.
    pub fn suite(&self, requests: usize, max_tokens: u64) -> PathBuf {
        self.write(
            "suite.toml",
            &format!(
                "name = \"tiny\"\n\n[[cell]]\nname = \"tiny\"\nprompt_tokens = 128\ntolerance_percent = 50\n\
                 max_tokens = {max_tokens}\nconcurrency = 1\nrequests = {requests}\nwarmup = 1\ncache = \"unique\"\n\
                 seed = 1\nextra = {{ ignore_eos = true }}\n"
            ),
        )
    }

    /// A plan over `suite.toml` with the two shipped profiles; `top` holds
    /// extra top-level keys (e.g. `repeats = 2`).
    pub fn plan(&self, candidate: &str, top: &str) -> PathBuf {
        self.write(
            "plan.toml",
            &format!(
                "name = \"t\"\nsuite = \"suite.toml\"\n{top}\n[baseline]\ndriver = \"process\"\nengine_profile = \"baseline\"\n\n\
                 [candidate]\ndriver = \"process\"\n{candidate}\n\n[readmission]\nexpected_model = \"{MODEL}\"\ntimeout_s = 30\n"
            ),
        )
    }

    pub fn opts(&self, id: &str) -> qualify::Options {
        qualify::Options {
            id: Some(id.into()),
            out_root: Some(self.out.clone()),
            ledger: Some(self.ledger.clone().into()),
            rollback: false,
            adaptive: false,
            quiet: false,
            ..Default::default()
        }
    }

    pub fn entries(&self, id: &str) -> Vec<Entry> {
        Ledger::open(&self.ledger)
            .expect("ledger")
            .entries(id)
            .expect("entries")
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Ok(ledger) = Ledger::open(&self.ledger) {
            stop_everything(&ledger);
        }
    }
}

/// Stop every runtime `ledger` says is still running or serving (a failed
/// test must not leak servers).
pub fn stop_everything(ledger: &Ledger) {
    for q in ledger.qualifications().unwrap_or_default() {
        let entries = ledger.entries(&q).unwrap_or_default();
        let mut all = lifecycle::leftovers(&entries);
        all.extend(lifecycle::serving(&entries));
        for (_, h) in all {
            if let Handle::Process {
                pid, start_ticks, ..
            } = h
            {
                ProcessIdentity { pid, start_ticks }.stop(Duration::from_secs(5));
            }
        }
    }
}

/// Every file below `dir`.
pub fn files_under(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// "step runtime status" of every entry, for assertions and failure messages.
pub fn steps(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e.step,
                e.runtime.as_deref().unwrap_or("-"),
                e.status.as_str()
            )
        })
        .collect()
}

pub fn has(entries: &[Entry], step: &str) -> bool {
    steps(entries).iter().any(|s| s == step)
}

/// The model `/v1/models` serves at `base_url`, if it answers.
pub async fn served_model(base_url: &str) -> Option<String> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .ok()?;
    let v: serde_json::Value = http
        .get(format!("{base_url}/v1/models"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v.pointer("/data/0/id")
        .and_then(|x| x.as_str())
        .map(str::to_string)
}

/// The baseline is what serves, it is running, and it answers with the model.
pub async fn assert_baseline_serving(entries: &[Entry]) -> Handle {
    let Some((label, h)) = lifecycle::serving(entries) else {
        panic!("nothing serving; ledger:\n{}", steps(entries).join("\n"));
    };
    assert_eq!(label, "baseline", "ledger:\n{}", steps(entries).join("\n"));
    assert_eq!(
        served_model(h.base_url()).await.as_deref(),
        Some(MODEL),
        "{}",
        h.describe()
    );
    h
}

pub fn detail_of<'a>(
    entries: &'a [Entry],
    step: &str,
    runtime: &str,
    status: &str,
) -> Vec<&'a serde_json::Value> {
    entries
        .iter()
        .filter(|e| {
            e.step == step
                && e.runtime.as_deref().unwrap_or("-") == runtime
                && e.status.as_str() == status
        })
        .map(|e| &e.detail)
        .collect()
}
