//! Stopping what a qualification left running: any leftover an interrupted
//! invocation started, and whatever serves (`infergate stop`, and `qualify
//! --then-stop`), each recorded in the ledger.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::driver::container::Docker;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Ledger, Location, Status};
use crate::runtime::lifecycle;
use crate::runtime::state::QualificationFile;

/// `infergate stop ID`: retire what the qualification left serving.
pub async fn stop(id: &str, ledger: Option<Location>, quiet: bool) -> Result<String> {
    let path = match ledger {
        Some(p) => p,
        None => Location::default_location()?,
    };
    let ledger = Ledger::connect_existing(&path)?;
    let entries = ledger.entries(id)?;
    let plan_entry = entries
        .iter()
        .find(|e| e.step == "plan")
        .ok_or_else(|| lifecycle::unknown_qualification(id, &ledger))?;
    let out_dir = PathBuf::from(
        plan_entry
            .detail_str("out_dir")
            .context("plan entry without out_dir")?,
    );
    let qf = QualificationFile::read(&out_dir)?;
    let plan = qf.load_plan(&out_dir)?;
    let _lock = ledger.lock(id, &out_dir)?;
    let ctx = Ctx {
        plan: &plan,
        qualification: id,
        ledger: &ledger,
        out_dir: &out_dir,
        docker: Docker::new(&plan.docker.socket),
        quiet,
    };
    let mut done = Vec::new();
    for (label, h) in lifecycle::leftovers(&entries) {
        lifecycle::stop(&ctx, &label, &h, "infergate stop").await?;
        done.push(format!("stopped leftover {label}: {}", h.describe()));
    }
    match lifecycle::serving(&entries) {
        Some((label, h)) => {
            lifecycle::retire(&ctx, &label, &h, "infergate stop").await?;
            done.push(format!("retired {label}: {}", h.describe()));
        }
        None => done.push(format!("qualification {id}: nothing serving")),
    }
    let _ = ledger.append(
        id,
        "stopped",
        None,
        Status::Info,
        serde_json::json!({"by": "infergate stop"}),
    );
    Ok(done.join("\n") + "\n")
}
