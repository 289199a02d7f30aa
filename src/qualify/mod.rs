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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::artifact::{RunArtifact, Schedule};
use crate::config::plan::{
    After, BASELINE, CANDIDATE, Driver, OnOutcome, Plan, PlanSchedule, ProcessDriver, Runtime,
};
use crate::config::suite::Suite;
use crate::driver::container::Docker;
use crate::measure::runner::{self, ARTIFACT_FILE, JOURNAL_FILE, RunOptions, RunPart};
use crate::measure::scrape::{self, SCRAPE_LOG_FILE, ScrapeOptions};
use crate::measure::{aggregate, journal, windows};
use crate::report::{self, DecisionAction, Report};
use interleave::{Block, CellLayout, StopReason};
use ledger::{Entry, Ledger, Location, Status};
use lifecycle::Started;
use lifecycle::{Ctx, Handle};

use crate::decision::{decide, ledger, lifecycle, state};

pub mod interleave;

pub use state::{
    PLAN_COPY, QUALIFICATION_FILE, QUALIFICATION_SCHEMA, QualificationFile, REPORT_FILE,
    decision_in, pass_dir,
};

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Qualification id; an existing one is resumed. Default: `<plan name>-<UTC time>`.
    pub id: Option<String>,
    /// Parent of the qualification directory; default `out/qualify`.
    pub out_root: Option<PathBuf>,
    /// The ledger; default the plan's, else [`Location::default_location`].
    pub ledger: Option<Location>,
    /// Abandon the (interrupted) qualification and restore the baseline.
    pub rollback: bool,
    /// Adaptive mode even when the plan's `[adaptive]` is not enabled
    /// (interleaved plans only). A resumed qualification keeps the mode it began with.
    pub adaptive: bool,
    pub quiet: bool,
}

/// How a qualification ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Compared and every gate passed.
    Qualified,
    /// Compared; a gate failed.
    NotQualified,
    /// Stopped before a comparison; `failure` says where and why.
    Failed,
    /// Refused at preflight: nothing was changed.
    Refused,
    /// Abandoned with `--rollback`.
    RolledBack,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub id: String,
    pub out_dir: PathBuf,
    pub ledger: Location,
    pub verdict: Verdict,
    pub report: Option<PathBuf>,
    pub failure: Option<String>,
    pub decision: DecisionAction,
    /// What serves now, per the ledger.
    pub serving: Option<(String, Handle)>,
    /// What the measuring cost (interleaved: requests per side, minutes), per the ledger.
    pub spent: Option<String>,
}

/// A pass that could not finish.
#[derive(Debug)]
struct PassFailure {
    step: &'static str,
    runtime: &'static str,
    error: anyhow::Error,
}

pub async fn run(plan_path: &Path, opts: &Options) -> Result<Outcome> {
    let plan = load_plan(plan_path, opts)?;
    // --ledger (or $INFERGATE_LEDGER), else the plan's, else the default file.
    let ledger_path = match (&opts.ledger, &plan.ledger) {
        (Some(l), _) | (None, Some(l)) => l.clone(),
        (None, None) => Location::default_location()?,
    };
    let ledger = Ledger::connect(&ledger_path)?;
    let id = match &opts.id {
        Some(id) => {
            check_id(id)?;
            id.clone()
        }
        None => new_id(&plan.name),
    };
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
        record_plan(&ctx, plan_path, &ledger_path, adaptive)?;
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
    // any leftover of an interrupted run is touched.
    if let Err(e) = preflight(&ctx).await {
        let why = Some(format!("{e:#}"));
        return finish(&ctx, &ledger_path, Verdict::Refused, None, why, false).await;
    }
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

    if let Err(msg) = measure(&ctx, plan_path, adaptive).await? {
        return finish(&ctx, &ledger_path, Verdict::Failed, None, Some(msg), true).await;
    }
    let report_path = out_dir.join(REPORT_FILE);
    let report = match compare_and_write(&ctx, &report_path, adaptive)? {
        Ok(r) => r,
        Err(msg) => {
            return finish(&ctx, &ledger_path, Verdict::Failed, None, Some(msg), true).await;
        }
    };
    decide_or_restore(&ctx, plan_path, &ledger_path, report, report_path).await
}

/// The plan, checked against the options it is run with.
fn load_plan(plan_path: &Path, opts: &Options) -> Result<Plan> {
    let plan = Plan::load(plan_path)?;
    if opts.adaptive && plan.schedule != PlanSchedule::Interleaved {
        bail!(
            "--adaptive adds interleaved blocks, but {} runs schedule = \"{}\"",
            plan_path.display(),
            plan.schedule.as_str()
        );
    }
    Ok(plan)
}

/// Where the qualification lives and whether it is adaptive: from the
/// ledger's plan entry when resuming (the mode it began with: a look taken is
/// a look spent), else a new, empty directory.
fn resolve_out_dir(
    plan: &Plan,
    plan_path: &Path,
    opts: &Options,
    id: &str,
    entries: &[Entry],
) -> Result<(PathBuf, bool)> {
    let mut adaptive =
        plan.schedule == PlanSchedule::Interleaved && (plan.adaptive.enabled || opts.adaptive);
    if entries.is_empty() {
        let root = opts
            .out_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("out/qualify"));
        let dir = absolute(&root.join(id))?;
        if dir.exists()
            && std::fs::read_dir(&dir)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            bail!(
                "{} already exists and is not empty; choose another --id or --out",
                dir.display()
            );
        }
        return Ok((dir, adaptive));
    }
    let plan_entry = entries
        .iter()
        .find(|e| e.step == "plan")
        .with_context(|| format!("ledger has entries for {id} but no plan entry"))?;
    if plan_entry.detail_str("plan_sha256") != Some(plan.sha256.as_str()) {
        bail!(
            "qualification {id} ran a different plan (sha256 {}); {} now has sha256 {}: start a new qualification instead",
            plan_entry.detail_str("plan_sha256").unwrap_or("?"),
            plan_path.display(),
            plan.sha256
        );
    }
    if let Some(began) = plan_entry.detail.get("adaptive").and_then(|a| a.as_bool()) {
        if began != adaptive && !opts.quiet {
            eprintln!(
                "qualification {id}: began {}adaptive; resuming it so",
                if began { "" } else { "not " }
            );
        }
        adaptive = began;
    }
    let dir = plan_entry
        .detail_str("out_dir")
        .context("plan entry without out_dir")?;
    Ok((PathBuf::from(dir), adaptive))
}

/// A new qualification: the plan copy, the sidecar file, the `plan` entry.
fn record_plan(
    ctx: &Ctx<'_>,
    plan_path: &Path,
    ledger_path: &Location,
    adaptive: bool,
) -> Result<()> {
    let (plan, out_dir, id) = (ctx.plan, ctx.out_dir, ctx.qualification);
    crate::atomic::write_atomic(&out_dir.join(PLAN_COPY), plan.text.as_bytes())?;
    let qf = QualificationFile {
        schema: QUALIFICATION_SCHEMA.into(),
        id: id.to_string(),
        plan: absolute(plan_path)?,
        plan_dir: absolute(&plan.base_dir)?,
        plan_sha256: plan.sha256.clone(),
        ledger: ledger_path.absolute()?,
    };
    crate::atomic::write_json_atomic(&out_dir.join(QUALIFICATION_FILE), &qf)?;
    ctx.log(
        "plan",
        None,
        Status::Ok,
        json!({
            "plan": qf.plan,
            "plan_sha256": plan.sha256,
            "out_dir": out_dir,
            "suite": plan.suite,
            "schedule": plan.schedule.as_str(),
            "order": match plan.schedule {
                PlanSchedule::Alternating => json!(plan.pass_order().iter().map(|(l, n)| format!("{l}-{n}")).collect::<Vec<_>>()),
                PlanSchedule::Interleaved => json!("blocks of each cell alternating A B B A"),
            },
            "window": plan.window,
            "adaptive": adaptive,
            "adaptive_budget": adaptive.then(|| json!({
                "max_requests": plan.adaptive.max_requests,
                "max_minutes": plan.adaptive.max_minutes,
            })),
            "baseline": plan.baseline.driver.kind(),
            "candidate": plan.candidate.driver.kind(),
            "host": crate::util::hostname(),
            "pid": std::process::id(),
        }),
    )?;
    ctx.say(&format!(
        "qualification {id}: plan {} → {}",
        plan_path.display(),
        out_dir.display()
    ));
    Ok(())
}

fn record_resume(ctx: &Ctx<'_>, opts: &Options, entries: usize) -> Result<()> {
    ctx.log(
        "resume",
        None,
        Status::Info,
        json!({"pid": std::process::id(), "rollback": opts.rollback}),
    )?;
    ctx.say(&format!(
        "qualification {}: resuming from the ledger ({entries} entries)",
        ctx.qualification
    ));
    Ok(())
}

/// Measure both runtimes as the plan's schedule says; Ctrl-C interrupts.
/// The inner error is the failure to record (what a dropped pass left
/// running is stopped first).
async fn measure(
    ctx: &Ctx<'_>,
    plan_path: &Path,
    adaptive: bool,
) -> Result<std::result::Result<(), String>> {
    let measure = async {
        match ctx.plan.schedule {
            PlanSchedule::Alternating => run_passes(ctx).await,
            PlanSchedule::Interleaved => run_interleaved(ctx, adaptive).await,
        }
    };
    let passes = tokio::select! {
        r = measure => r,
        _ = tokio::signal::ctrl_c() => Err(PassFailure { step: "interrupted", runtime: BASELINE, error: anyhow!("interrupted (Ctrl-C)") }),
    };
    let Err(f) = passes else {
        return Ok(Ok(()));
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
    Ok(Err(format!("{} {}: {:#}", f.runtime, f.step, f.error)))
}

/// Compare the two sides and write the report; the inner error is a failed
/// comparison (recorded), to finish the qualification with.
fn compare_and_write(
    ctx: &Ctx<'_>,
    report_path: &Path,
    adaptive: bool,
) -> Result<std::result::Result<Report, String>> {
    let report = match compare(ctx, adaptive) {
        Ok(r) => r,
        Err(e) => {
            let error = json!({"error": format!("{e:#}")});
            ctx.log("compare", None, Status::Failed, error)?;
            return Ok(Err(format!("compare: {e:#}")));
        }
    };
    ctx.log(
        "compare",
        None,
        Status::Ok,
        json!({
            "qualification": report.qualification,
            "performance_gate_passed": report.performance_gate_passed,
            "strict_turnover_gate_passed": report.strict_turnover_gate_passed,
            "qualified": report::gate::qualified(&report),
        }),
    )?;
    report::write_report_atomic(report_path, &report)?;
    ctx.log("report", None, Status::Ok, json!({"path": report_path}))?;
    ctx.say(&format!(
        "report: {} ({})",
        report_path.display(),
        report.qualification
    ));
    Ok(Ok(report))
}

/// Apply the plan's decision policy for this outcome, or leave the decision
/// pending and put the baseline back (or nothing, with `after = "stop"`).
async fn decide_or_restore(
    ctx: &Ctx<'_>,
    plan_path: &Path,
    ledger_path: &Location,
    mut report: Report,
    report_path: PathBuf,
) -> Result<Outcome> {
    let plan = ctx.plan;
    let qualified = report::gate::qualified(&report);
    let verdict = if qualified {
        Verdict::Qualified
    } else {
        Verdict::NotQualified
    };
    let policy = if qualified {
        plan.decision.on_pass
    } else {
        plan.decision.on_fail
    };
    let action = match policy {
        OnOutcome::Pending => None,
        OnOutcome::Promote => Some(DecisionAction::Promote),
        OnOutcome::RetainBaseline => Some(DecisionAction::RetainBaseline),
    };
    if let Some(action) = action {
        let who = format!("plan policy ({})", plan_path.display());
        let note = format!(
            "decision.{} = {}",
            if qualified { "on_pass" } else { "on_fail" },
            action.as_str()
        );
        let applied = decide::decide_and_apply(ctx, &report_path, action, &who, &note).await?;
        let failure = (!applied.carried_out).then(|| applied.promotion.clone());
        return finish(ctx, ledger_path, verdict, Some(report_path), failure, false).await;
    }
    let promotion = match plan.after {
        After::RestoreBaseline => {
            match lifecycle::restore(ctx, BASELINE, "qualification finished; decision pending")
                .await
            {
                Ok(h) => format!(
                    "pending; baseline restored and readmitted ({})",
                    h.describe()
                ),
                Err(e) => format!("pending; baseline restore FAILED: {e:#}"),
            }
        }
        After::Stop => "pending; nothing left running (after = \"stop\")".to_string(),
    };
    report.set_promotion(promotion);
    report::write_report_atomic(&report_path, &report)?;
    finish(ctx, ledger_path, verdict, Some(report_path), None, false).await
}

/// Record the end of the qualification; with `restore`, first put the
/// baseline back in service (rollback).
async fn finish(
    ctx: &Ctx<'_>,
    ledger_path: &Location,
    verdict: Verdict,
    report: Option<PathBuf>,
    failure: Option<String>,
    restore: bool,
) -> Result<Outcome> {
    let mut failure = failure;
    if let Some(f) = &failure {
        ctx.say(&format!("qualification {}: {f}", ctx.qualification));
    }
    if restore && ctx.plan.after == After::RestoreBaseline {
        ctx.log(
            "rollback",
            None,
            Status::Started,
            json!({"reason": failure}),
        )?;
        // A baseline already serving (an interrupted run that got that far) stays.
        let current = lifecycle::serving(&ctx.ledger.entries(ctx.qualification)?);
        let already = match &current {
            Some((label, h)) if label == BASELINE => h.down(&ctx.docker).await.is_none(),
            _ => false,
        };
        if let (true, Some((_, h))) = (already, &current) {
            ctx.log(
                "rollback",
                None,
                Status::Ok,
                json!({"serving": h.to_value(), "note": "baseline was already serving"}),
            )?;
        } else {
            match lifecycle::restore(ctx, BASELINE, "rollback").await {
                Ok(h) => ctx.log(
                    "rollback",
                    None,
                    Status::Ok,
                    json!({"serving": h.to_value()}),
                )?,
                Err(e) => {
                    ctx.log(
                        "rollback",
                        None,
                        Status::Failed,
                        json!({"error": format!("{e:#}")}),
                    )?;
                    let f = failure.get_or_insert_with(String::new);
                    f.push_str(&format!(
                        "; rollback FAILED, the baseline is NOT serving: {e:#}"
                    ));
                }
            }
        }
    }
    let verdict_text = serde_json::to_value(&verdict).unwrap_or_default();
    let entries = ctx.ledger.entries(ctx.qualification)?;
    let serving = lifecycle::serving(&entries);
    let decision = decision_in(&entries);
    ctx.log(
        "done",
        None,
        if matches!(verdict, Verdict::Failed | Verdict::Refused) {
            Status::Failed
        } else {
            Status::Ok
        },
        json!({
            "verdict": verdict_text,
            "report": report,
            "failure": failure,
            "serving": serving.as_ref().map(|(l, h)| json!({"runtime": l, "handle": h.to_value()})),
        }),
    )?;
    Ok(Outcome {
        id: ctx.qualification.to_string(),
        out_dir: ctx.out_dir.to_path_buf(),
        ledger: ledger_path.clone(),
        verdict,
        report,
        failure,
        decision,
        serving,
        spent: spent_in(&entries),
    })
}

fn finished_outcome(
    ctx: &Ctx<'_>,
    ledger_path: &Location,
    entries: &[Entry],
    done: &Entry,
) -> Result<Outcome> {
    let verdict: Verdict = done
        .detail
        .get("verdict")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or(Verdict::Failed);
    Ok(Outcome {
        id: ctx.qualification.to_string(),
        out_dir: ctx.out_dir.to_path_buf(),
        ledger: ledger_path.clone(),
        verdict,
        report: done.detail_str("report").map(PathBuf::from),
        failure: done.detail_str("failure").map(str::to_string),
        decision: decision_in(entries),
        serving: lifecycle::serving(entries),
        spent: spent_in(entries),
    })
}

/// The cost of the measuring, as the last `interleaved` entry records it.
pub fn spent_in(entries: &[Entry]) -> Option<String> {
    entries
        .iter()
        .rev()
        .find(|e| e.step == "interleaved" && e.status == Status::Ok)
        .and_then(|e| e.detail_str("spent").map(str::to_string))
}

async fn preflight(ctx: &Ctx<'_>) -> Result<()> {
    let plan = ctx.plan;
    // The suite must load, or nothing can be measured.
    Suite::load(&plan.suite).with_context(|| format!("suite {}", plan.suite.display()))?;
    let mut details = serde_json::Map::new();
    for rt in [&plan.baseline, &plan.candidate] {
        match lifecycle::presence(ctx, rt).await {
            Ok(v) => {
                details.insert(rt.label.clone(), v);
            }
            Err(e) => {
                let why = if rt.label == BASELINE {
                    "the baseline could not be restored, so nothing was changed"
                } else {
                    "the candidate cannot be started; nothing was changed"
                };
                ctx.log(
                    "preflight",
                    Some(&rt.label),
                    Status::Failed,
                    json!({"error": format!("{e:#}"), "why": why}),
                )?;
                return Err(e.context(format!("preflight: {} runtime: {why}", rt.label)));
            }
        }
    }
    ctx.log(
        "preflight",
        None,
        Status::Ok,
        serde_json::Value::Object(details),
    )?;
    ctx.say("preflight: both runtimes present");
    Ok(())
}

async fn run_passes(ctx: &Ctx<'_>) -> Result<(), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    for (label, n) in ctx.plan.pass_order() {
        let entries = ctx
            .ledger
            .entries(ctx.qualification)
            .map_err(|e| fail("ledger", label, e))?;
        let done = entries.iter().any(|e| {
            e.step == "run"
                && e.status == Status::Ok
                && e.runtime.as_deref() == Some(label)
                && e.detail.get("pass").and_then(|p| p.as_u64()) == Some(n as u64)
        });
        if done {
            ctx.say(&format!("{label} pass {n}: already measured"));
            continue;
        }
        run_pass(ctx, label, n).await?;
    }
    Ok(())
}

async fn run_pass(ctx: &Ctx<'_>, label: &'static str, n: usize) -> Result<(), PassFailure> {
    let fail = |step, error| PassFailure {
        step,
        runtime: label,
        error,
    };
    let rt = ctx
        .plan
        .runtime(label)
        .ok_or_else(|| fail("start", anyhow!("no runtime {label}")))?;
    let started = lifecycle::start(ctx, rt, &format!("pass-{n}"))
        .await
        .map_err(|e| fail("start", e))?;
    let dir = pass_dir(ctx.out_dir, label, n);
    let resume = dir.join(JOURNAL_FILE).exists();
    let log = |status, detail| {
        ctx.log("run", Some(label), status, detail)
            .map_err(|e| fail("ledger", e))
    };
    log(
        Status::Started,
        json!({"pass": n, "dir": dir, "resume": resume}),
    )?;
    ctx.say(&format!(
        "{label} pass {n}: running {}{}",
        ctx.plan.suite.display(),
        if resume {
            " (resuming its journal)"
        } else {
            ""
        }
    ));
    let opts = RunOptions {
        target: started.handle.base_url().to_string(),
        api_key_env: rt.api_key_env.clone(),
        suite: ctx.plan.suite.clone(),
        out_dir: dir.clone(),
        runtime_label: Some(label.to_string()),
        image: image_label(rt),
        only_cells: Vec::new(),
        resume,
        timeouts: ctx.plan.timeouts.clone(),
        skip_turnover: ctx.plan.skip_turnover,
        quiet: ctx.quiet,
        tokenizer: None,
        part: RunPart::Whole,
        scrape: scrape_options(rt),
    };
    // A runtime that dies mid-suite ends the pass now, not after every
    // remaining request has timed out.
    let result = tokio::select! {
        r = runner::run(&opts) => r,
        why = lifecycle::watch(&started, &ctx.docker) => Err(anyhow!("the {label} runtime stopped during the suite: {why}")),
    };
    // Requests failing because the server died are the server's failure, not
    // the client's: name the crash (the exit may take a moment to be reaped).
    // A crash in the last moments still voids the pass.
    let mut down = lifecycle::down_reason(&started, &ctx.docker).await;
    if result.is_err() && down.is_none() {
        for _ in 0..10 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            down = lifecycle::down_reason(&started, &ctx.docker).await;
            if down.is_some() {
                break;
            }
        }
    }
    let result = match (result, down) {
        (Ok(_), Some(why)) => Err(anyhow!(
            "the {label} runtime stopped during the suite: {why}"
        )),
        (Err(e), Some(why)) if !format!("{e}").contains("stopped during the suite") => {
            Err(anyhow!(
                "the {label} runtime stopped during the suite: {why}; the suite failed with: {e:#}"
            ))
        }
        (r, _) => r,
    };
    match result {
        Ok(art) => {
            let expected = ctx.plan.expected_model(label);
            if let Some(exp) = expected.filter(|e| *e != art.provenance.model) {
                log(
                    Status::Info,
                    json!({"pass": n, "warning": format!("served model {:?}, but readmission expects {exp:?}", art.provenance.model)}),
                )?;
            }
            log(
                Status::Ok,
                json!({
                    "pass": n,
                    "dir": dir,
                    "model": art.provenance.model,
                    "cells": art.cells.iter().map(|c| json!({"name": c.name, "succeeded": c.succeeded, "failed": c.failed, "eligible": c.performance_eligible})).collect::<Vec<_>>(),
                    "turnover_runs": art.turnover.len(),
                }),
            )?;
            lifecycle::stop(ctx, label, &started.handle, &format!("pass {n} finished"))
                .await
                .map_err(|e| fail("stop", e))?;
            Ok(())
        }
        Err(e) => {
            log(
                Status::Failed,
                json!({"pass": n, "dir": dir, "error": format!("{e:#}"), "log": started.handle.log()}),
            )?;
            let _ = lifecycle::stop(ctx, label, &started.handle, &format!("pass {n} failed")).await;
            Err(fail("run", e))
        }
    }
}

/// Where a side's interleaved blocks are journaled (one journal for all its blocks).
pub fn interleaved_dir(out_dir: &Path, label: &str) -> PathBuf {
    out_dir.join(format!("{label}-interleaved"))
}

/// Where a side's turnover runs after its interleaved blocks.
pub fn turnover_dir(out_dir: &Path, label: &str) -> PathBuf {
    out_dir.join(format!("{label}-turnover"))
}

/// Both runtimes, up for the interleaved schedule.
struct Up {
    baseline: Started,
    candidate: Started,
    /// (runtime, cell) pairs warmed up since these processes started: a
    /// cell's warmup runs before its first block on each runtime lifetime,
    /// not before every block (the runtimes stay up between blocks).
    warmed: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
}

impl Up {
    fn get(&self, label: &str) -> &Started {
        if label == BASELINE {
            &self.baseline
        } else {
            &self.candidate
        }
    }

    /// Which runtime stopped, and why, if one did.
    async fn down(&self, ctx: &Ctx<'_>) -> Option<(&'static str, String)> {
        for (label, s) in [(BASELINE, &self.baseline), (CANDIDATE, &self.candidate)] {
            if let Some(why) = lifecycle::down_reason(s, &ctx.docker).await {
                return Some((label, why));
            }
        }
        None
    }

    /// Run `opts` against `label`, ended at once if either runtime stops.
    async fn run(
        &self,
        ctx: &Ctx<'_>,
        label: &'static str,
        opts: &RunOptions,
    ) -> Result<RunArtifact, (&'static str, anyhow::Error)> {
        let stopped =
            |l: &str, why: String| anyhow!("the {l} runtime stopped during the suite: {why}");
        let result = tokio::select! {
            r = runner::run(opts) => r.map_err(|e| (label, e)),
            why = lifecycle::watch(&self.baseline, &ctx.docker) => Err((BASELINE, stopped(BASELINE, why))),
            why = lifecycle::watch(&self.candidate, &ctx.docker) => Err((CANDIDATE, stopped(CANDIDATE, why))),
        };
        // As in a pass: requests failing because a server died are the
        // server's failure (its exit may take a moment to be reaped).
        let mut down = self.down(ctx).await;
        if result.is_err() && down.is_none() {
            for _ in 0..10 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                down = self.down(ctx).await;
                if down.is_some() {
                    break;
                }
            }
        }
        match (result, down) {
            (Ok(_), Some((l, why))) => Err((l, stopped(l, why))),
            (Err((_, e)), Some((l, why)))
                if !format!("{e}").contains("stopped during the suite") =>
            {
                Err((
                    l,
                    anyhow!(
                        "the {l} runtime stopped during the suite: {why}; the suite failed with: {e:#}"
                    ),
                ))
            }
            (r, _) => r,
        }
    }
}

fn ok_entry<'a>(entries: &'a [Entry], step: &str, label: &str) -> impl Iterator<Item = &'a Entry> {
    entries.iter().filter(move |e| {
        e.step == step && e.status == Status::Ok && e.runtime.as_deref() == Some(label)
    })
}

fn side_finished(entries: &[Entry], label: &str) -> bool {
    ok_entry(entries, "run", label).any(|e| e.detail_str("schedule") == Some("interleaved"))
}

fn block_finished(entries: &[Entry], b: &Block) -> bool {
    ok_entry(entries, "block", b.side).any(|e| {
        e.detail_str("cell") == Some(b.cell.as_str())
            && e.detail.get("block").and_then(|k| k.as_u64()) == Some(b.k as u64)
    })
}

/// The last adaptive round the ledger records as looked at.
fn last_round(entries: &[Entry]) -> Option<&Entry> {
    entries
        .iter()
        .rev()
        .find(|e| e.step == "round" && e.status == Status::Ok)
}

/// Adaptive rounds finished (looked at), per the ledger.
fn rounds_done(entries: &[Entry]) -> usize {
    entries
        .iter()
        .filter(|e| e.step == "round" && e.status == Status::Ok)
        .filter_map(|e| e.detail.get("round").and_then(|r| r.as_u64()))
        .max()
        .unwrap_or(0) as usize
}

/// Requests per side of each cell: the suite's, or what `rounds` adaptive rounds hold.
fn totals(cells: &[CellLayout], rounds: Option<usize>) -> Vec<usize> {
    cells
        .iter()
        .map(|c| match rounds {
            Some(r) => interleave::adaptive_requests(c, r),
            None => c.requests,
        })
        .collect()
}

/// The interleaved schedule: both runtimes up, every block in order, then
/// each runtime's turnover, then both stopped. Finished blocks (ledger
/// `block` ok) are kept on resume; an interrupted one continues from its journal.
async fn run_interleaved(ctx: &Ctx<'_>, adaptive: bool) -> Result<(), PassFailure> {
    let t0 = std::time::Instant::now();
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let (suite, _) = Suite::load(&ctx.plan.suite).map_err(|e| fail("run", BASELINE, e))?;
    let cells = interleave::layout(&suite.cells, ctx.plan.window);
    let entries = ctx
        .ledger
        .entries(ctx.qualification)
        .map_err(|e| fail("ledger", BASELINE, e))?;
    if side_finished(&entries, BASELINE) && side_finished(&entries, CANDIDATE) {
        ctx.say("interleaved blocks: already measured");
        return Ok(());
    }
    // Each start of the pair is a process lifetime of its own (logs, container names).
    let life = 1 + entries
        .iter()
        .filter(|e| {
            e.step == "start"
                && e.status == Status::Started
                && e.runtime.as_deref() == Some(BASELINE)
                && e.detail_str("tag")
                    .is_some_and(|t| t.starts_with("interleaved"))
        })
        .count();
    let tag = format!("interleaved-{life}");
    let baseline = lifecycle::start(ctx, &ctx.plan.baseline, &tag)
        .await
        .map_err(|e| fail("start", BASELINE, e))?;
    let candidate = match lifecycle::start(ctx, &ctx.plan.candidate, &tag).await {
        Ok(c) => c,
        Err(e) => {
            let _ = lifecycle::stop(
                ctx,
                BASELINE,
                &baseline.handle,
                "the candidate failed to start",
            )
            .await;
            return Err(fail("start", CANDIDATE, e));
        }
    };
    let up = Up {
        baseline,
        candidate,
        warmed: Default::default(),
    };
    let result = interleaved_body(ctx, &suite, &cells, adaptive, &up, t0).await;
    let reason = if result.is_ok() {
        "interleaved blocks finished"
    } else {
        "interleaved blocks failed"
    };
    let stopped_b = lifecycle::stop(ctx, BASELINE, &up.baseline.handle, reason).await;
    let stopped_c = lifecycle::stop(ctx, CANDIDATE, &up.candidate.handle, reason).await;
    result?;
    stopped_b.map_err(|e| fail("stop", BASELINE, e))?;
    stopped_c.map_err(|e| fail("stop", CANDIDATE, e))?;
    Ok(())
}

async fn interleaved_body(
    ctx: &Ctx<'_>,
    suite: &Suite,
    cells: &[CellLayout],
    adaptive: bool,
    up: &Up,
    t0: std::time::Instant,
) -> Result<(), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let entries = ctx
        .ledger
        .entries(ctx.qualification)
        .map_err(|e| fail("ledger", BASELINE, e))?;
    let logged = |step: &str, status, detail| {
        ctx.log(step, None, status, detail)
            .map_err(|e| fail("ledger", BASELINE, e))
    };
    // Minutes spent by earlier invocations of this qualification (as their
    // last round recorded them) plus this one's.
    let earlier_minutes = last_round(&entries)
        .and_then(|e| e.detail.get("minutes").and_then(|m| m.as_f64()))
        .unwrap_or(0.0);
    let minutes = || earlier_minutes + t0.elapsed().as_secs_f64() / 60.0;
    let (rounds, stopped) = if adaptive {
        let (r, s) = adaptive_rounds(ctx, suite, cells, up, &entries, &minutes).await?;
        (Some(r), s)
    } else {
        for b in interleave::fixed_schedule(cells) {
            run_block(ctx, suite, cells, &b, up).await?;
        }
        (None, None)
    };
    // Correctness, not performance: once per side, after the blocks.
    for label in [BASELINE, CANDIDATE] {
        finish_side(ctx, suite, label, up).await?;
    }
    let per_side: usize = totals(cells, rounds).iter().sum();
    let warmups: usize = suite
        .cells
        .iter()
        .zip(cells)
        .zip(totals(cells, rounds))
        .map(|((s, c), n)| s.warmup * n.div_ceil(c.window))
        .sum();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let spent = format!(
        "{per_side} requests per side (+{warmups} warmup) in {}, {:.1} min{}",
        plural(cells.len(), "cell"),
        minutes(),
        match (&rounds, &stopped) {
            (Some(r), Some(s)) => format!("; adaptive: {}, {s}", plural(*r, "round")),
            _ => String::new(),
        }
    );
    let detail = json!({
        "adaptive": adaptive,
        "rounds": rounds,
        "stopped": stopped,
        "requests_per_side": per_side,
        "warmup_requests_per_side": warmups,
        "minutes": minutes(),
        "spent": spent,
    });
    if adaptive {
        logged("adaptive", Status::Ok, detail.clone())?;
    }
    logged("interleaved", Status::Ok, detail)?;
    ctx.say(&format!("interleaved: spent {spent}"));
    Ok(())
}

/// Rounds of interleaved blocks, a look after each, until the performance
/// gate resolves or the plan's budget is spent: (rounds done, why it stopped).
/// A resumed qualification continues from the rounds its ledger records.
async fn adaptive_rounds(
    ctx: &Ctx<'_>,
    suite: &Suite,
    cells: &[CellLayout],
    up: &Up,
    entries: &[Entry],
    minutes: &dyn Fn() -> f64,
) -> Result<(usize, Option<String>), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let logged = |step: &str, status, detail| {
        ctx.log(step, None, status, detail)
            .map_err(|e| fail("ledger", BASELINE, e))
    };
    let budget = ctx.plan.adaptive;
    let max_rounds = interleave::max_rounds(cells, budget.max_requests);
    let mut done = rounds_done(entries);
    let last = last_round(entries);
    let mut stop: Option<String> = last.and_then(|e| e.detail_str("stop").map(str::to_string));
    // A ledger from before fractions were recorded spent by look / looks.
    let mut before = last.map_or(0.0, |e| {
        fraction_of(e).unwrap_or(done as f64 / max_rounds as f64)
    });
    // Round time is measured in this invocation (a resume brings up its runtimes again).
    let (start_rounds, start_minutes) = (done, minutes());
    if done == 0 {
        ctx.say(&format!(
            "adaptive: up to {max_rounds} rounds (budget {} requests per side per cell, {} min); each round is one A B B A pair of blocks per cell and a look",
            budget.max_requests, budget.max_minutes
        ));
    }
    while stop.is_none() {
        for b in interleave::round_schedule(cells, done) {
            run_block(ctx, suite, cells, &b, up).await?;
        }
        done += 1;
        // One reading of the clock for the fraction and the stop, so they agree.
        let now_minutes = minutes();
        let round_minutes = (done > start_rounds)
            .then(|| (now_minutes - start_minutes) / (done - start_rounds) as f64);
        let fraction = interleave::information_fraction(
            done,
            max_rounds,
            now_minutes,
            budget.max_minutes,
            round_minutes,
            before,
        );
        let look = Look {
            round: done,
            fractions: Some((before, fraction)),
            closing: false,
        };
        let report = compare_interleaved(ctx, suite, cells, Some(look))
            .map_err(|e| fail("compare", "adaptive round", e))?;
        let outcome = report.performance_outcome;
        let why =
            interleave::stop_after(done, max_rounds, now_minutes, budget.max_minutes, outcome);
        let per_cell: serde_json::Map<String, serde_json::Value> = cells
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    json!(interleave::adaptive_requests(c, done)),
                )
            })
            .collect();
        logged(
            "round",
            Status::Ok,
            json!({
                "round": done,
                "looks": max_rounds,
                "information_fraction": fraction,
                "previous_information_fraction": before,
                "performance_outcome": outcome.map(|o| o.as_str()),
                "requests_per_side": per_cell,
                "minutes": minutes(),
                "stop": why.map(StopReason::as_str),
            }),
        )?;
        ctx.say(&format!(
            "adaptive round {done}/{max_rounds} (information fraction {fraction:.2}): performance {}; {}",
            outcome.map_or("not decided by this compare", |o| o.as_str()),
            why.map_or("another round", StopReason::as_str)
        ));
        stop = why.map(|w| w.as_str().to_string());
        before = fraction;
    }
    Ok((done, stop))
}

/// One block on one runtime, journaled into the side's interleaved journal.
async fn run_block(
    ctx: &Ctx<'_>,
    suite: &Suite,
    cells: &[CellLayout],
    b: &Block,
    up: &Up,
) -> Result<(), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let entries = ctx
        .ledger
        .entries(ctx.qualification)
        .map_err(|e| fail("ledger", b.side, e))?;
    if block_finished(&entries, b) {
        return Ok(());
    }
    let rt = ctx
        .plan
        .runtime(b.side)
        .ok_or_else(|| fail("run", b.side, anyhow!("no runtime {}", b.side)))?;
    let warm_first = up
        .warmed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert((b.side.to_string(), b.cell.clone()));
    let warmup = suite
        .cells
        .iter()
        .find(|c| c.name == b.cell)
        .map_or(0, |c| if warm_first { c.warmup } else { 0 });
    let window = cells
        .iter()
        .find(|c| c.name == b.cell)
        .map_or(1, |c| c.window);
    let dir = interleaved_dir(ctx.out_dir, b.side);
    let resume = dir.join(JOURNAL_FILE).exists();
    let detail = json!({
        "cell": b.cell,
        "block": b.k,
        "first": b.first,
        "count": b.count,
        "window": window,
        "warmup": warmup,
        "dir": dir,
    });
    ctx.log("block", Some(b.side), Status::Started, detail.clone())
        .map_err(|e| fail("ledger", b.side, e))?;
    let opts = RunOptions {
        target: up.get(b.side).handle.base_url().to_string(),
        api_key_env: rt.api_key_env.clone(),
        suite: ctx.plan.suite.clone(),
        out_dir: dir,
        runtime_label: Some(b.side.to_string()),
        image: image_label(rt),
        only_cells: vec![b.cell.clone()],
        resume,
        timeouts: ctx.plan.timeouts.clone(),
        skip_turnover: true,
        // One line per block here instead of the runner's per-cell lines.
        quiet: true,
        tokenizer: None,
        part: RunPart::Block {
            first: b.first,
            count: b.count,
            warmup: warmup > 0,
        },
        scrape: scrape_options(rt),
    };
    match up.run(ctx, b.side, &opts).await {
        Ok(_) => {
            let records: Vec<_> = journal::read(&opts.out_dir.join(JOURNAL_FILE))
                .map_err(|e| fail("run", b.side, e))?
                .into_iter()
                .filter(|r| r.cell == b.cell && (b.first..b.first + b.count).contains(&r.index))
                .collect();
            let failed = records
                .iter()
                .filter(|r| r.outcome != crate::measure::record::Outcome::Ok)
                .count();
            let mut detail = detail;
            detail["recorded"] = json!(records.len());
            detail["failed"] = json!(failed);
            ctx.log("block", Some(b.side), Status::Ok, detail)
                .map_err(|e| fail("ledger", b.side, e))?;
            ctx.say(&format!(
                "{} block {} {:<9} {} requests (#{}..{}, after {warmup} warmup), {failed} failed",
                b.cell,
                b.k,
                b.side,
                records.len(),
                b.first,
                b.first + b.count
            ));
            Ok(())
        }
        Err((label, e)) => {
            let mut detail = detail;
            detail["error"] = json!(format!("{e:#}"));
            detail["log"] = json!(up.get(label).handle.log());
            let _ = ctx.log("block", Some(b.side), Status::Failed, detail);
            Err(fail("run", label, e))
        }
    }
}

/// A side after its blocks: its turnover (once), then its `run` entry (the
/// model it served, for readmission).
async fn finish_side(
    ctx: &Ctx<'_>,
    suite: &Suite,
    label: &'static str,
    up: &Up,
) -> Result<(), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let entries = ctx
        .ledger
        .entries(ctx.qualification)
        .map_err(|e| fail("ledger", label, e))?;
    if side_finished(&entries, label) {
        return Ok(());
    }
    let rt = ctx
        .plan
        .runtime(label)
        .ok_or_else(|| fail("run", label, anyhow!("no runtime {label}")))?;
    let log = |status, detail| {
        ctx.log("run", Some(label), status, detail)
            .map_err(|e| fail("ledger", label, e))
    };
    let dir = interleaved_dir(ctx.out_dir, label);
    let tdir = turnover_dir(ctx.out_dir, label);
    let turnover = !ctx.plan.skip_turnover && !suite.turnover.is_empty();
    log(
        Status::Started,
        json!({"schedule": "interleaved", "dir": dir, "turnover_dir": turnover.then_some(&tdir)}),
    )?;
    let mut turnover_runs = 0;
    if turnover {
        ctx.say(&format!("{label}: turnover runs"));
        let opts = RunOptions {
            target: up.get(label).handle.base_url().to_string(),
            api_key_env: rt.api_key_env.clone(),
            suite: ctx.plan.suite.clone(),
            out_dir: tdir.clone(),
            runtime_label: Some(label.to_string()),
            image: image_label(rt),
            only_cells: Vec::new(),
            resume: tdir.join(JOURNAL_FILE).exists(),
            timeouts: ctx.plan.timeouts.clone(),
            skip_turnover: false,
            quiet: ctx.quiet,
            tokenizer: None,
            part: RunPart::TurnoverOnly,
            scrape: ScrapeOptions::none(),
        };
        match up.run(ctx, label, &opts).await {
            Ok(art) => turnover_runs = art.turnover.len(),
            Err((who, e)) => {
                log(
                    Status::Failed,
                    json!({"schedule": "interleaved", "dir": tdir, "error": format!("{e:#}"), "log": up.get(who).handle.log()}),
                )?;
                return Err(fail("run", who, e));
            }
        }
    }
    let art = report::read_artifact(&dir.join(ARTIFACT_FILE))
        .map_err(|e| fail("run", label, e.into()))?;
    if let Some(exp) = ctx
        .plan
        .expected_model(label)
        .filter(|e| *e != art.provenance.model)
    {
        log(
            Status::Info,
            json!({"schedule": "interleaved", "warning": format!("served model {:?}, but readmission expects {exp:?}", art.provenance.model)}),
        )?;
    }
    let blocks = ok_entry(
        &ctx.ledger.entries(ctx.qualification).unwrap_or_default(),
        "block",
        label,
    )
    .count();
    log(
        Status::Ok,
        json!({
            "schedule": "interleaved",
            "dir": dir,
            "model": art.provenance.model,
            "blocks": blocks,
            "turnover_runs": turnover_runs,
        }),
    )
}

/// Which look of an adaptive run a comparison is: the look after round
/// `round`, at the information fractions the run measured (ledgers from
/// before #31 have none), and whether it closes the run early.
#[derive(Debug, Clone, Copy)]
struct Look {
    round: usize,
    fractions: Option<(f64, f64)>,
    closing: bool,
}

/// A round entry's information fraction, when it recorded one.
fn fraction_of(e: &Entry) -> Option<f64> {
    e.detail
        .get("information_fraction")
        .and_then(|f| f.as_f64())
}

/// Merge each side's blocks (requests `0 .. totals` of every cell) and compare,
/// telling the comparison which look of the adaptive plan it is (`None`: a
/// fixed-size run).
fn compare_interleaved(
    ctx: &Ctx<'_>,
    suite: &Suite,
    cells: &[CellLayout],
    look: Option<Look>,
) -> Result<Report> {
    let mut policy = ctx.plan.policy.load(&ctx.plan.path)?;
    policy.sequential_looks = match look {
        Some(_) => interleave::max_rounds(cells, ctx.plan.adaptive.max_requests),
        None => 1,
    };
    // Every adaptive round is a look; this comparison is the look after round `rounds`.
    let rounds = look.map(|l| l.round);
    policy.sequential_look = rounds;
    policy.sequential_closing = look.is_some_and(|l| l.closing);
    policy.sequential_fractions = look.and_then(|l| l.fractions);
    let totals = totals(cells, rounds);
    let entries = ctx.ledger.entries(ctx.qualification)?;
    let side = |label: &str| -> Result<PathBuf> {
        let started_at = entries
            .iter()
            .find(|e| e.step == "block" && e.runtime.as_deref() == Some(label))
            .map(|e| e.at.clone());
        let merged = merge_interleaved(
            suite,
            cells,
            &totals,
            &interleaved_dir(ctx.out_dir, label),
            &turnover_dir(ctx.out_dir, label),
            started_at,
        )?;
        let path = ctx.out_dir.join(format!("{label}.json"));
        crate::atomic::write_json_atomic(&path, &merged)?;
        Ok(path)
    };
    let (b, c) = (side(BASELINE)?, side(CANDIDATE)?);
    // From the files as written, so the report records their sha256 and
    // `verify --runs` can hold them to it.
    report::compare_paths(&b, &c, &policy).map_err(|e| anyhow!("{e}"))
}

/// What a runtime's runs scrape: its own `/metrics` unless the plan says
/// not, and the plan's extra endpoints.
fn scrape_options(rt: &crate::config::plan::Runtime) -> ScrapeOptions {
    ScrapeOptions {
        target: rt.scrape_metrics,
        extra: rt.metrics_endpoints.clone(),
        ..ScrapeOptions::default()
    }
}

/// `method.prompt_tokens_achieved` over the pooled records.
fn set_prompt_tokens_achieved(
    method: &mut BTreeMap<String, String>,
    cells: &[crate::config::suite::CellSpec],
    records: &[crate::measure::record::RequestRecord],
) {
    let achieved = crate::measure::exact::achieved(cells, records);
    if !achieved.is_empty() {
        method.insert("prompt_tokens_achieved".into(), achieved);
    }
}

/// One side of an interleaved qualification as one artifact: each cell pooled
/// over its blocks (requests `0 .. totals[i]`, `sample_clusters` = block
/// index, the same numbering on both sides), the turnover from its own run
/// when there was one, provenance from the last block.
pub fn merge_interleaved(
    suite: &Suite,
    cells: &[CellLayout],
    totals: &[usize],
    dir: &Path,
    turnover_dir: &Path,
    started_at: Option<String>,
) -> Result<RunArtifact> {
    let last = report::read_artifact(&dir.join(ARTIFACT_FILE))?;
    let records = journal::read(&dir.join(JOURNAL_FILE))?;
    let scrapes = scrape::read_log(&dir.join(SCRAPE_LOG_FILE))?;
    let pooled = pool_interleaved_cells(suite, cells, totals, &records, &scrapes);
    let mut provenance = last.provenance.clone();
    // Pooled from blocks: no one journal state describes the merged artifact.
    provenance.journal = None;
    if let Some(at) = started_at {
        provenance.started_at = at;
    }
    let tfile = turnover_dir.join(ARTIFACT_FILE);
    let turnover = if tfile.exists() {
        let t = report::read_artifact(&tfile)?;
        provenance.ended_at = t.provenance.ended_at.clone();
        t.turnover
    } else {
        Vec::new()
    };
    let mut method = last.method.clone();
    // Over every block's requests, not the last block's run.
    set_prompt_tokens_achieved(&mut method, &suite.cells, &records);
    let windows: Vec<String> = cells
        .iter()
        .zip(&suite.cells)
        .map(|(c, s)| format!("{} {} (+{} warmup)", c.name, c.window, s.warmup))
        .collect();
    method.insert(
        "schedule".into(),
        format!(
            "interleaved: both runtimes up at once; each cell's requests in blocks alternating between them in one timeline (block k: baseline then candidate for even k, candidate then baseline for odd k), never both loaded at once; each block after the cell's warmup requests (not recorded); requests per block: {}; sample_clusters is the block index, shared by the two sides",
            windows.join(", ")
        ),
    );
    Ok(RunArtifact {
        schema: last.schema.clone(),
        provenance,
        method,
        rate_sweeps: crate::slo::rate_sweeps(&pooled),
        cells: pooled,
        turnover,
        schedule: Some(Schedule::Interleaved),
    })
}

/// Each cell of `suite` pooled over its blocks (requests `0 .. totals[i]`)
/// from the blocks' records, with its server windows from the scrape log.
pub fn pool_interleaved_cells(
    suite: &Suite,
    cells: &[CellLayout],
    totals: &[usize],
    records: &[crate::measure::record::RequestRecord],
    scrapes: &[scrape::ScrapeEntry],
) -> Vec<crate::artifact::CellResult> {
    suite
        .cells
        .iter()
        .zip(cells)
        .zip(totals)
        .map(|((spec, c), &n)| {
            let mut cell = interleave::pool_cell(spec, c.window, n, records);
            let w = windows::cell_windows(scrapes, &spec.name, records, n);
            windows::attach(&mut cell, w);
            cell
        })
        .collect()
}

/// What the report names as the runtime's "image": the digest for containers,
/// the executable's path for commands, the engine profile for the reference engine.
fn image_label(rt: &Runtime) -> Option<String> {
    match &rt.driver {
        Driver::Container(c) => Some(c.image.to_string()),
        Driver::Process(ProcessDriver::Engine { profile, .. }) => Some(format!(
            "xllamacpp-{} engine profile {profile}",
            crate::driver::engine::XLLAMACPP_VERSION
        )),
        Driver::Process(ProcessDriver::Command(c)) => Some(match &c.sha256 {
            Some(s) => format!("{}@sha256:{s}", c.command),
            None => c.command.clone(),
        }),
        Driver::External { url, .. } => Some(crate::util::redact_url(url)),
    }
}

/// Compare the pooled passes (or blocks) of each side.
fn compare(ctx: &Ctx<'_>, adaptive: bool) -> Result<Report> {
    if ctx.plan.schedule == PlanSchedule::Interleaved {
        let (suite, _) = Suite::load(&ctx.plan.suite)?;
        let cells = interleave::layout(&suite.cells, ctx.plan.window);
        let entries = ctx.ledger.entries(ctx.qualification).unwrap_or_default();
        let last = last_round(&entries);
        // The last look again, at the fractions its round recorded; a ledger
        // from before them: stopped by the clock before the last planned
        // look, it spends the error the earlier ones left.
        let look = adaptive.then(|| Look {
            round: rounds_done(&entries),
            fractions: last.and_then(|e| {
                Some((
                    e.detail.get("previous_information_fraction")?.as_f64()?,
                    fraction_of(e)?,
                ))
            }),
            closing: last.and_then(|e| e.detail_str("stop"))
                == Some(StopReason::MaxMinutes.as_str()),
        });
        return compare_interleaved(ctx, &suite, &cells, look);
    }
    let policy = ctx.plan.policy.load(&ctx.plan.path)?;
    if ctx.plan.repeats == 1 {
        // From the files, so the report records each one's sha256 (`verify --runs`).
        let file = |label| pass_dir(ctx.out_dir, label, 1).join(ARTIFACT_FILE);
        return Ok(report::compare_paths(
            &file(BASELINE),
            &file(CANDIDATE),
            &policy,
        )?);
    }
    let side = |label: &str| -> Result<PathBuf> {
        let dirs: Vec<PathBuf> = (1..=ctx.plan.repeats)
            .map(|n| pass_dir(ctx.out_dir, label, n))
            .collect();
        if dirs.len() == 1 {
            return Ok(dirs[0].join(ARTIFACT_FILE));
        }
        let merged = merge_passes(&ctx.plan.suite, &dirs)?;
        let path = ctx.out_dir.join(format!("{label}.json"));
        crate::atomic::write_json_atomic(&path, &merged)?;
        Ok(path)
    };
    let (b, c) = (side(BASELINE)?, side(CANDIDATE)?);
    // From the files, so the report records their (and a single pass's
    // journal's) sha256 for `verify --runs`.
    report::compare_paths(&b, &c, &policy).map_err(|e| anyhow!("{e}"))
}

/// Pool the passes of one runtime into one artifact: each cell re-aggregated
/// over every pass's requests (same shape, `requests` × passes), turnover runs
/// listed in pass order.
pub fn merge_passes(suite_path: &Path, dirs: &[PathBuf]) -> Result<RunArtifact> {
    let (suite, _) = Suite::load(suite_path)?;
    let arts: Vec<RunArtifact> = dirs
        .iter()
        .map(|d| report::read_artifact(&d.join(ARTIFACT_FILE)))
        .collect::<Result<_, _>>()?;
    let first = arts.first().context("no passes to merge")?;
    let mut records = Vec::new();
    // Per cell, every pass's server windows (each pass its own log and indices).
    let mut server: BTreeMap<String, BTreeMap<String, windows::EndpointWindows>> = BTreeMap::new();
    for (k, dir) in dirs.iter().enumerate() {
        let pass = journal::read(&dir.join(JOURNAL_FILE))?;
        let scrapes = scrape::read_log(&dir.join(SCRAPE_LOG_FILE))?;
        for spec in &suite.cells {
            let w = windows::cell_windows(&scrapes, &spec.name, &pass, spec.requests);
            windows::merge(server.entry(spec.name.clone()).or_default(), w);
        }
        for mut r in pass {
            if let Some(spec) = suite.cells.iter().find(|c| c.name == r.cell) {
                // Distinct indices per pass, so pooled requests never collide.
                r.index += k * spec.requests;
                records.push(r);
            }
        }
    }
    let cells: Vec<crate::artifact::CellResult> = first
        .cells
        .iter()
        .filter_map(|c| suite.cells.iter().find(|s| s.name == c.name))
        .map(|spec| {
            let mut pooled = spec.clone();
            pooled.requests = spec.requests * dirs.len();
            // Each pass is a fresh start of the runtime: a cluster of its own.
            let per_pass = spec.requests;
            let mut cell =
                aggregate::cell_clustered(&pooled, &records, |r| (r.index / per_pass) as u32);
            windows::attach(&mut cell, server.remove(&spec.name).unwrap_or_default());
            cell
        })
        .collect();
    let mut turnover = Vec::new();
    for a in &arts {
        for t in &a.turnover {
            let mut t = t.clone();
            t.repeat = turnover
                .iter()
                .filter(|x: &&crate::artifact::TurnoverRun| x.name == t.name)
                .count();
            turnover.push(t);
        }
    }
    let mut method = first.method.clone();
    set_prompt_tokens_achieved(&mut method, &suite.cells, &records);
    method.insert(
        "passes".into(),
        format!("pooled over {} passes of this runtime, each from a fresh start, in alternating order with the other runtime", dirs.len()),
    );
    let mut provenance = first.provenance.clone();
    // Pooled from several passes' journals: none of them alone describes it.
    provenance.journal = None;
    if let Some(last) = arts.last() {
        provenance.ended_at = last.provenance.ended_at.clone();
    }
    Ok(RunArtifact {
        schema: first.schema.clone(),
        provenance,
        method,
        rate_sweeps: crate::slo::rate_sweeps(&cells),
        cells,
        turnover,
        schedule: Some(Schedule::AlternatingPasses),
    })
}

/// `<plan name>-<UTC yyyymmddThhmmssZ>-<8 hex digits>`: the suffix (from
/// the OS-seeded hasher keys, the process id, the clock's nanoseconds and a
/// counter) keeps two qualifications of one plan started within the same
/// second apart, in one process or in two.
pub fn new_id(plan_name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let clean: String = plan_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let now = chrono::Utc::now();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_i64(now.timestamp_nanos_opt().unwrap_or_default());
    h.write_u64(SEQ.fetch_add(1, Ordering::Relaxed));
    format!(
        "{clean}-{}-{:08x}",
        now.format("%Y%m%dT%H%M%SZ"),
        h.finish() as u32
    )
}

fn check_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 100
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !id.starts_with('.');
    if !ok {
        bail!(
            "qualification id {id:?}: use letters, digits, '-', '_' and '.' (it names a directory)"
        );
    }
    Ok(())
}

pub fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()
            .context("reading the current directory")?
            .join(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_directory_safe() {
        assert!(check_id("ref-20260101T000000Z").is_ok());
        assert!(check_id("../x").is_err());
        assert!(check_id("").is_err());
        let id = new_id("my plan/1");
        assert!(id.starts_with("my-plan-1-"), "{id}");
        assert!(check_id(&id).is_ok());
    }

    #[test]
    fn two_qualifications_of_one_plan_in_one_second_get_two_ids() {
        let ids: std::collections::BTreeSet<String> = (0..50).map(|_| new_id("plan")).collect();
        assert_eq!(ids.len(), 50, "{ids:?}");
        for id in &ids {
            let (stamp, suffix) = id.strip_prefix("plan-").unwrap().split_once('-').unwrap();
            assert_eq!(stamp.len(), "20260101T000000Z".len(), "{id}");
            assert!(
                suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit()),
                "{id}"
            );
        }
    }

    #[test]
    fn pass_order_names_directories() {
        assert_eq!(
            pass_dir(Path::new("/o"), CANDIDATE, 2),
            Path::new("/o/candidate-2")
        );
    }
}
