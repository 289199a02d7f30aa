//! What makes a run resumable: its identity beside the journal (so
//! `--resume` continues only the same run), the journal it appends to, and
//! the nonce its requests' unique tags hash.

use anyhow::{Context, Result, bail};

use super::{ARTIFACT_FILE, JOURNAL_FILE, RunOptions};
use crate::atomic;
use crate::config::suite::Suite;
use crate::measure::journal::{self, Journal};
use crate::measure::record::RequestRecord;
use crate::util::{redact_url, sha256_hex};

/// Beside a run's journal from its start: what it measures, so `--resume`
/// continues only the same run.
pub const IDENTITY_FILE: &str = "run-identity.json";

/// What makes two runs one: the suite's bytes, the target (redacted) and
/// the model it serves. `infergate run --resume` continues only the run
/// its directory holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunIdentity {
    pub suite: String,
    pub suite_sha256: String,
    pub target: String,
    pub model: String,
}

impl RunIdentity {
    pub(super) fn of(
        opts: &RunOptions,
        model: &str,
        suite: &Suite,
        suite_text: &str,
    ) -> RunIdentity {
        RunIdentity {
            suite: suite.name.clone(),
            suite_sha256: sha256_hex(suite_text.as_bytes()),
            target: redact_url(opts.target.trim_end_matches('/')),
            model: model.to_string(),
        }
    }

    pub(super) fn record(&self, dir: &std::path::Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(atomic::write_json_atomic(&dir.join(IDENTITY_FILE), self)?)
    }

    /// The identity a run directory records: its file, else what its
    /// artifact's provenance says; None when it has neither.
    pub fn recorded(dir: &std::path::Path) -> Result<Option<RunIdentity>> {
        let path = dir.join(IDENTITY_FILE);
        if path.exists() {
            let bytes = crate::report::read_regular(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            return serde_json::from_slice(&bytes)
                .map(Some)
                .with_context(|| format!("{}: not a run identity", path.display()));
        }
        let art = dir.join(ARTIFACT_FILE);
        if !art.exists() {
            return Ok(None);
        }
        let p = crate::report::read_artifact(&art)?.provenance;
        Ok(p.suite_sha256.map(|sha| RunIdentity {
            suite: p.suite,
            suite_sha256: sha,
            target: p.target,
            model: p.model,
        }))
    }

    /// Refuse to resume `dir` with another suite (by its bytes) or another
    /// target, naming each difference. A qualification's passes do not
    /// call this: their runtime may come back on another port.
    pub fn check_resume(dir: &std::path::Path, suite_text: &str, target: &str) -> Result<()> {
        if !dir.join(JOURNAL_FILE).exists() {
            return Ok(());
        }
        let Some(before) = RunIdentity::recorded(dir)? else {
            return Ok(());
        };
        let (sha, target) = (
            sha256_hex(suite_text.as_bytes()),
            redact_url(target.trim_end_matches('/')),
        );
        let mut differs = Vec::new();
        if before.suite_sha256 != sha {
            differs.push(format!(
                "a suite with sha256 {sha} where it ran suite {} (sha256 {})",
                before.suite, before.suite_sha256
            ));
        }
        if before.target != target {
            differs.push(format!("target {target} where it ran {}", before.target));
        }
        if !differs.is_empty() {
            bail!(
                "--resume: {} holds another run: this one has {}; nothing was appended (choose another --out)",
                dir.display(),
                differs.join("; ")
            );
        }
        Ok(())
    }
}

/// The journal to append to, and the records it already holds (`--resume`,
/// read when `read`: not when the caller holds them);
/// an existing journal without `--resume` is refused, never overwritten.
pub(super) fn open_journal(opts: &RunOptions, read: bool) -> Result<(Journal, Vec<RequestRecord>)> {
    std::fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let journal_path = opts.out_dir.join(JOURNAL_FILE);
    let mut previous = Vec::new();
    if opts.resume && journal_path.exists() {
        if read {
            previous = journal::read(&journal_path)?;
        }
    } else if journal_path.exists() {
        bail!(
            "{} already exists; pass --resume to continue that run, or choose another --out",
            journal_path.display()
        );
    }
    Ok((Journal::open(&journal_path)?, previous))
}

/// The nonce a run's unique tags hash: a fresh one per run, but one per side
/// across an interleaved qualification's blocks (kept in the side's
/// directory), so what a workload shares — a group's system prompt, a trace's
/// blocks — is shared across blocks as it would be in one run.
pub(super) fn side_nonce(opts: &RunOptions) -> Result<String> {
    if !opts.part.pooled_by_caller() {
        return Ok(run_nonce());
    }
    let path = opts.out_dir.join(NONCE_FILE);
    if let Ok(n) = std::fs::read_to_string(&path)
        && !n.trim().is_empty()
    {
        return Ok(n.trim().to_string());
    }
    let n = run_nonce();
    atomic::write_atomic(&path, n.as_bytes())?;
    Ok(n)
}

/// A side's nonce across its blocks.
pub const NONCE_FILE: &str = "nonce";

fn run_nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}", (t as u64) ^ ((std::process::id() as u64) << 32))
}
