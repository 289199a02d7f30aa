//! `infergate qualify PLAN`: the whole qualification of a candidate runtime
//! against the baseline, every step a ledger entry.
//!
//! 1. Preflight: both runtimes present (engine installed, command and its
//!    sha256, or image by digest). A baseline that could not be restored
//!    refuses the qualification before anything changes.
//! 2. Measure, as the plan's `schedule` says:
//!    - interleaved (the default where both runtimes can serve at once): both
//!      started, then each cell's requests in blocks of `window`, alternating
//!      between the two in one timeline (A B B A …, see [`crate::qualify::interleave`]),
//!      then each runtime's turnover, then both stopped. In adaptive mode,
//!      rounds of blocks are added until the performance gate resolves or a
//!      budget (`[adaptive]`) is spent; every round is a look, and the
//!      comparison is told how many looks the budget allows.
//!    - alternating passes (A B, or A B B A … with repeats): start the
//!      runtime, run the suite (warmups, cells, turnover), stop it.
//!
//!    A runtime that dies mid-suite ends the measuring at once.
//! 3. Compare (a runtime's passes or blocks pooled), write the report.
//! 4. Decision: pending, unless the plan declares a policy; meanwhile the
//!    baseline is restored and readmitted (or nothing left running with
//!    `after = "stop"`).
//!
//! Any failure rolls back: what was started is stopped (logs kept) and the
//! baseline is restored and readmitted. Rerunning with the same `--id`
//! resumes: finished passes (or blocks, rounds) are kept, an interrupted one
//! continues from its journal, and anything an interrupted invocation left
//! running is stopped first. `--rollback` abandons it instead and restores the baseline.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;

use crate::config::plan::{BASELINE, Plan, PlanSchedule};
use crate::config::suite::LoadedSuite;
use crate::driver::container::Docker;
use crate::measure::pool::Blocks;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Ledger, Location, Status};
use crate::runtime::lifecycle;
use compare::compare_and_write;
use finish::{decide_or_restore, finish, finished_outcome};
use outcome::{PassFailure, StepEnd};
use preflight::preflight;
use workdir::{check_id, load_plan, record_plan, record_resume, resolve_out_dir};

pub mod check;
mod compare;
mod finish;
pub mod lineage;
mod measure_adaptive;
mod measure_block;
mod measure_capacity;
mod measure_interleaved;
mod measure_passes;
mod outcome;
mod preflight;
mod progress;
mod reach;
mod targets;
mod up;
mod workdir;

pub use crate::runtime::state::{
    PLAN_COPY, QUALIFICATION_FILE, QUALIFICATION_SCHEMA, QualificationFile, REPORT_FILE,
    decision_in, interleaved_dir, pass_dir, side_artifact, turnover_dir,
};
pub use finish::then_stop;
pub use outcome::{CandidateImage, Options, Outcome, Verdict};
pub use progress::spent_in;
pub use workdir::{absolute, new_id, new_qualification_dir};

/// The qualification, step by step; each step records itself in the ledger.
pub async fn run(plan_path: &Path, opts: &Options) -> Result<Outcome> {
    let plan = load_plan(plan_path, opts)?;
    let ledger_path = ledger_location(&plan, opts)?;
    let ledger = Ledger::connect(&ledger_path)?;
    let id = qualification_id(&plan, opts)?;
    let entries = ledger.entries(&id)?;
    let resuming = !entries.is_empty();
    let (out_dir, adaptive) = resolve_out_dir(&plan, plan_path, opts, &id, &entries)?;
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let _lock = ledger.lock(&id, &out_dir)?;
    let ctx = Ctx {
        plan: &plan,
        qualification: &id,
        ledger: &ledger,
        out_dir: &out_dir,
        docker: Docker::new(&plan.docker.socket),
        quiet: opts.quiet,
    };

    if !resuming {
        record_plan(
            &ctx,
            plan_path,
            &ledger_path,
            adaptive,
            opts.candidate_image.as_ref(),
        )?;
    } else if let Some(done) = entries.iter().rev().find(|e| e.step == "done") {
        ctx.say(&format!(
            "qualification {id} already finished ({}); nothing to do",
            done.detail_str("verdict").unwrap_or("?")
        ));
        return finished_outcome(&ctx, &ledger_path, &entries, done);
    } else {
        record_resume(&ctx, opts, entries.len())?;
    }

    // Preflight changes nothing (except a pull by digest), so it runs before
    // any leftover of an interrupted run is touched. It reads the suite, once.
    let suite = match preflight(&ctx, adaptive).await {
        Ok(suite) => suite,
        Err(e) => {
            let why = Some(format!("{e:#}"));
            return finish(&ctx, &ledger_path, Verdict::Refused, None, why, false).await;
        }
    };
    if resuming {
        lifecycle::stop_leftovers(&ctx).await?;
        if opts.rollback {
            let reason = json!({"reason": "--rollback"});
            ctx.log("abandon", None, Status::Info, reason)?;
            return finish(&ctx, &ledger_path, Verdict::RolledBack, None, None, true).await;
        }
        if let Some((label, h)) = lifecycle::serving(&ctx.ledger.entries(&id)?) {
            lifecycle::retire(&ctx, &label, &h, "qualification resumed: measuring again").await?;
        }
    } else if opts.rollback {
        bail!(
            "--rollback: qualification {id} does not exist in {}",
            ledger_path
        );
    }

    let report_path = out_dir.join(REPORT_FILE);
    let measured = match measure(&ctx, &suite, plan_path, adaptive).await {
        Ok(blocks) => compare_and_write(&ctx, &suite, &report_path, adaptive, blocks),
        Err(end) => Err(end),
    };
    match measured {
        Ok(report) => decide_or_restore(&ctx, plan_path, &ledger_path, report, report_path).await,
        Err(StepEnd::Failed(msg)) => {
            finish(&ctx, &ledger_path, Verdict::Failed, None, Some(msg), true).await
        }
        Err(StepEnd::Unrecorded(e)) => Err(e),
    }
}

/// --ledger (or $INFERGATE_LEDGER), else the plan's, else the default file.
fn ledger_location(plan: &Plan, opts: &Options) -> Result<Location> {
    ledger_for(plan, opts.ledger.as_ref())
}

/// The ledger a qualification of `plan` records in: the one `given` on the
/// command line, else the plan's, else the default.
pub fn ledger_for(plan: &Plan, given: Option<&Location>) -> Result<Location> {
    Ok(match (given, &plan.ledger) {
        (Some(l), _) | (None, Some(l)) => l.clone(),
        (None, None) => Location::default_location()?,
    })
}

/// `--id` (checked: it names a directory), else a new one.
fn qualification_id(plan: &Plan, opts: &Options) -> Result<String> {
    match &opts.id {
        Some(id) => {
            check_id(id)?;
            Ok(id.clone())
        }
        None => Ok(new_id(&plan.name)),
    }
}

/// Measure both runtimes as the plan's schedule says; Ctrl-C interrupts.
/// A failed pass is recorded (and what it left running stopped first).
/// The interleaved schedule hands back its blocks, in memory.
async fn measure(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    plan_path: &Path,
    adaptive: bool,
) -> Result<Option<Blocks>, StepEnd> {
    let measure = async {
        match ctx.plan.schedule {
            PlanSchedule::Alternating => measure_passes::run_passes(ctx, suite).await.map(|_| None),
            PlanSchedule::Interleaved => {
                measure_interleaved::run_interleaved(ctx, suite, adaptive).await
            }
        }
    };
    let passes = tokio::select! {
        r = measure => r,
        _ = tokio::signal::ctrl_c() => Err(PassFailure { step: "interrupted", runtime: BASELINE, error: anyhow!("interrupted (Ctrl-C)") }),
    };
    let f = match passes {
        Ok(blocks) => return Ok(blocks),
        Err(f) => f,
    };
    lifecycle::stop_leftovers(ctx).await?;
    if f.step == "interrupted" {
        let resume = format!(
            "infergate qualify {} --id {}",
            plan_path.display(),
            ctx.qualification
        );
        ctx.log("interrupted", None, Status::Info, json!({"resume": resume}))?;
    }
    Err(StepEnd::Failed(format!(
        "{} {}: {:#}",
        f.runtime, f.step, f.error
    )))
}
