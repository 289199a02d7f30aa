//! What a CI job or a spreadsheet reads besides the exit code: JUnit XML
//! where asked (`--junit FILE`), the Markdown report appended to GitHub's
//! job summary when `$GITHUB_STEP_SUMMARY` names one, and CSV (`report --csv DIR`).

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

/// `DIR/metrics.csv` and `DIR/requests.csv` of a report, each written atomically.
pub fn write_csv(report: &Value, dir: &Path, input: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (metrics, requests) = report::csv(report);
    for (name, text) in [("metrics.csv", metrics), ("requests.csv", requests)] {
        let path = dir.join(name);
        infergate::atomic::refuse_overwriting_inputs(&path, &[("report", input)])?;
        infergate::atomic::write_atomic(&path, text.as_bytes())?;
        outln!("wrote {}", path.display())?;
    }
    Ok(())
}
