//! What a qualification directory holds: the sidecar file `decide` and
//! `status` find it by, where each side's runs and artifacts are, and the
//! last decision in its ledger entries. `qualify` writes this layout;
//! `verify --runs` reads it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::config::plan::{DefaultWindow, Plan};
use crate::report::DecisionAction;
use crate::runtime::ledger::{Entry, Status};

/// Written beside the report: how `decide` finds the qualification.
pub const QUALIFICATION_FILE: &str = "qualification.json";

pub const QUALIFICATION_SCHEMA: &str = "infergate-qualification/v1";

pub const REPORT_FILE: &str = "report.json";

/// The plan as it ran, copied into the qualification directory.
pub const PLAN_COPY: &str = "plan.toml";

/// The sidecar file beside the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualificationFile {
    pub schema: String,
    pub id: String,
    /// The plan file as given, made absolute.
    pub plan: PathBuf,
    /// Where the plan's relative paths point.
    pub plan_dir: PathBuf,
    pub plan_sha256: String,
    /// The ledger it is recorded in (a file path, or a URL without a password).
    pub ledger: crate::runtime::ledger::Location,
    /// The rule that cut cells the plan gives no `window`; a file without
    /// it was cut by `TwiceConcurrency`.
    #[serde(default = "unrecorded_window", skip_serializing_if = "Option::is_none")]
    pub default_window: Option<DefaultWindow>,
}

fn unrecorded_window() -> Option<DefaultWindow> {
    Some(DefaultWindow::TwiceConcurrency)
}

impl QualificationFile {
    /// The rule that cut cells the plan gives no `window` (`TwiceConcurrency`
    /// when the file does not say).
    pub fn window_rule(&self) -> DefaultWindow {
        self.default_window
            .unwrap_or(DefaultWindow::TwiceConcurrency)
    }

    pub fn read(out_dir: &Path) -> Result<QualificationFile> {
        let p = out_dir.join(QUALIFICATION_FILE);
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{}: not a qualification file", p.display()))
    }

    /// The plan as it ran (the copy), with relative paths taken from the original's directory.
    pub fn load_plan(&self, out_dir: &Path) -> Result<Plan> {
        let copy = out_dir.join(PLAN_COPY);
        let text = std::fs::read_to_string(&copy)
            .with_context(|| format!("reading {}", copy.display()))?;
        let plan = Plan::parse(&text, &copy, &self.plan_dir)?;
        if plan.sha256 != self.plan_sha256 {
            bail!(
                "{} does not match the plan that ran (sha256 {} vs {})",
                copy.display(),
                plan.sha256,
                self.plan_sha256
            );
        }
        Ok(plan)
    }
}

/// The last decision recorded for the qualification.
pub fn decision_in(entries: &[Entry]) -> DecisionAction {
    entries
        .iter()
        .rev()
        .find(|e| e.step == "decision" && e.status == Status::Ok)
        .and_then(|e| e.detail.get("action").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or(DecisionAction::Pending)
}

/// Where a side's `n`-th pass runs (alternating schedule).
pub fn pass_dir(out_dir: &Path, label: &str, n: usize) -> PathBuf {
    out_dir.join(format!("{label}-{n}"))
}

/// Where a side's interleaved blocks are journaled (one journal for all its blocks).
pub fn interleaved_dir(out_dir: &Path, label: &str) -> PathBuf {
    out_dir.join(format!("{label}-interleaved"))
}

/// Where a side's turnover runs after its interleaved blocks.
pub fn turnover_dir(out_dir: &Path, label: &str) -> PathBuf {
    out_dir.join(format!("{label}-turnover"))
}

/// A side's artifact pooled over its blocks (interleaved schedule).
pub fn side_artifact(out_dir: &Path, label: &str) -> PathBuf {
    out_dir.join(format!("{label}.json"))
}

/// A qualification file that does not say its window rule (for tests).
#[cfg(test)]
pub(crate) const UNRECORDED_WINDOW_QUALIFICATION_JSON: &str = r#"{"schema":"infergate-qualification/v1","id":"q","plan":"/p.toml","plan_dir":"/","plan_sha256":"x","ledger":"/l.sqlite"}"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that does not say its window rule reads as twice the
    /// concurrency; one that does names the rule it ran and reads back the same.
    #[test]
    fn the_default_window_rule_is_read_as_written() {
        let q: QualificationFile =
            serde_json::from_str(UNRECORDED_WINDOW_QUALIFICATION_JSON).unwrap();
        assert_eq!(q.default_window, Some(DefaultWindow::TwiceConcurrency));
        let new = QualificationFile {
            default_window: Some(DefaultWindow::ByArrivals),
            ..q
        };
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains(r#""default_window":"by_arrivals""#), "{text}");
        assert_eq!(
            serde_json::from_str::<QualificationFile>(&text).unwrap(),
            new
        );
    }
}
