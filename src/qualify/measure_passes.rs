//! The alternating schedule: start a runtime, run the whole suite, stop it;
//! A B (or A B B A … with repeats).

use anyhow::anyhow;
use serde_json::json;

use super::outcome::{PassFailure, RuntimeStopped};
use super::targets::{image_label, scrape_options};
use crate::artifact::RunArtifact;
use crate::config::suite::LoadedSuite;
use crate::measure::runner::{self, JOURNAL_FILE, RunOptions, RunPart};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;
use crate::runtime::lifecycle::{self, Started};
use crate::runtime::state::pass_dir;

pub(super) async fn run_passes(ctx: &Ctx<'_>, suite: &LoadedSuite) -> Result<(), PassFailure> {
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
        run_pass(ctx, suite, label, n).await?;
    }
    Ok(())
}

async fn run_pass(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    label: &'static str,
    n: usize,
) -> Result<(), PassFailure> {
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
        skip_turnover: ctx
            .plan
            .skip_turnover
            .then_some(crate::artifact::TurnoverSkip::SkippedByPlan),
        quiet: ctx.quiet,
        tokenizer: None,
        part: RunPart::Whole,
        scrape: scrape_options(rt),
    };
    let result = run_watched(ctx, label, &started, &opts, suite).await;
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

/// Run the suite against `started`; a runtime that dies mid-suite ends the
/// pass now, not after every remaining request has timed out, and its death
/// is named as the failure.
async fn run_watched(
    ctx: &Ctx<'_>,
    label: &str,
    started: &Started,
    opts: &RunOptions,
    suite: &LoadedSuite,
) -> anyhow::Result<RunArtifact> {
    let result = tokio::select! {
        r = runner::run_suite(opts, &suite.suite, &suite.text) => r,
        why = lifecycle::watch(started, &ctx.docker) => Err(RuntimeStopped::new(label, why).into()),
    };
    // Requests failing because the server died are the server's failure, not
    // the client's: name the crash (the exit may take a moment to be reaped).
    // A crash in the last moments still voids the pass.
    let mut down = lifecycle::down_reason(started, &ctx.docker).await;
    if result.is_err() && down.is_none() {
        for _ in 0..10 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            down = lifecycle::down_reason(started, &ctx.docker).await;
            if down.is_some() {
                break;
            }
        }
    }
    match (result, down) {
        (Ok(_), Some(why)) => Err(RuntimeStopped::new(label, why).into()),
        (Err(e), Some(why)) if !RuntimeStopped::is(&e) => Err(anyhow!(
            "the {label} runtime stopped during the suite: {why}; the suite failed with: {e:#}"
        )),
        (r, _) => r,
    }
}
