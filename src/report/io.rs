//! Files: read run artifacts and reports with errors that name file, line and
//! column; write a report atomically.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, anyhow};
use serde::de::DeserializeOwned;

use crate::artifact::RunArtifact;

use super::model::Report;
use super::policy::Policy;

fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}:{}:{}: not a valid {what}: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

pub fn read_artifact(path: &Path) -> Result<RunArtifact> {
    read_json(path, "run artifact")
}

/// Any v1 report as JSON, for `verify` and the renderers.
pub fn read_report_value(path: &Path) -> Result<serde_json::Value> {
    read_json(path, "JSON report")
}

/// Read both run artifacts and the policy (defaults when `policy` is None), and compare.
pub fn compare_files(baseline: &Path, candidate: &Path, policy: Option<&Path>) -> Result<Report> {
    let policy = match policy {
        Some(p) => Policy::from_file(p)?,
        None => Policy::default(),
    };
    let b = read_artifact(baseline)?;
    let c = read_artifact(candidate)?;
    super::compare(&b, &c, &policy).with_context(|| {
        format!(
            "cannot compare {} (baseline) with {} (candidate)",
            baseline.display(),
            candidate.display()
        )
    })
}

/// Write `report` as pretty JSON so that `path` holds either the old file or
/// the whole new one, never a torn write: temp file in the same directory
/// (rename is atomic only within a filesystem), fsync, rename, fsync the directory.
pub fn write_report_atomic(path: &Path, report: &Report) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(report).context("cannot serialize report")?;
    bytes.push(b'\n');
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{} is not a file path", path.display()))?;
    // Unique per process and call, so concurrent writers never share a temp file.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> Result<()> {
        let mut f =
            File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(&bytes)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        // Best effort: leave no temp file behind; the original error matters more.
        let _ = fs::remove_file(&tmp);
        return result;
    }
    // Persist the rename itself; not every platform can open a directory.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("bad.json");
        fs::write(&p, "{\n  \"schema\": \"x\",\n  oops\n}\n").expect("write");
        let e = read_report_value(&p).expect_err("invalid JSON").to_string();
        assert!(e.contains(&format!("{}:3:3", p.display())), "{e}");
    }
}
