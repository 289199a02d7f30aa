//! The ledger logger every runtime step of a qualification writes through:
//! one row per step in the qualification's ledger (`log`) and one line for
//! people on standard error unless quiet (`say`), with what the steps need
//! to know of where they run (the plan, the output directory, Docker).

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use super::ledger::{Ledger, Status};
use crate::config::plan::Plan;
use crate::driver::container::Docker;

/// Where a qualification's runtime steps happen and how they are told:
/// the plan, the qualification's ledger and output directory, the Docker
/// daemon, and whether to print.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub plan: &'a Plan,
    pub qualification: &'a str,
    pub ledger: &'a Ledger,
    /// Logs go to `<out_dir>/logs`.
    pub out_dir: &'a Path,
    pub docker: Docker,
    pub quiet: bool,
}

impl Ctx<'_> {
    pub fn say(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }

    pub fn log(
        &self,
        step: &str,
        runtime: Option<&str>,
        status: Status,
        detail: Value,
    ) -> Result<()> {
        self.ledger
            .append(self.qualification, step, runtime, status, detail)
            .map(drop)
    }

    pub(super) fn log_dir(&self) -> PathBuf {
        self.out_dir.join("logs")
    }
}
