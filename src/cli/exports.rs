//! What a CI job reads besides the exit code: JUnit XML where asked
//! (`--junit FILE`), and the Markdown report appended to GitHub's job
//! summary when `$GITHUB_STEP_SUMMARY` names one.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use infergate::report;

pub const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// After a report is written: the JUnit file, and the job summary.
pub fn after_report(report: &Value, junit: Option<&Path>, inputs: &[(&str, &Path)]) -> Result<()> {
    if let Some(path) = junit {
        infergate::atomic::refuse_overwriting_inputs(path, inputs)?;
        infergate::atomic::write_atomic(path, report::junit(report).as_bytes())?;
    }
    if let Some(path) = std::env::var_os(STEP_SUMMARY_ENV).filter(|p| !p.is_empty()) {
        // Appended, as GitHub expects: other steps write there too.
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("${STEP_SUMMARY_ENV} ({})", Path::new(&path).display()))?;
        writeln!(f, "{}", report::markdown(report))
            .with_context(|| format!("writing ${STEP_SUMMARY_ENV}"))?;
    }
    Ok(())
}
