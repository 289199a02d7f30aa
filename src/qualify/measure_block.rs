//! One block of the interleaved schedule on one runtime, and a side's end
//! (its turnover, then its `run` entry).

use std::path::Path;

use anyhow::anyhow;
use serde_json::{Value, json};

use super::outcome::PassFailure;
use super::progress::{block_finished, ok_entry, side_finished};
use super::targets::{image_label, scrape_options};
use super::up::Up;
use crate::config::plan::Runtime;
use crate::config::suite::LoadedSuite;
use crate::measure::interleave::{Block, CellLayout};
use crate::measure::pool::{Blocks, SideBlocks};
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::runner::{JOURNAL_FILE, Measured, RunOptions, RunPart};
use crate::measure::scrape::ScrapeOptions;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;
use crate::runtime::state::{interleaved_dir, turnover_dir};

/// One block on one runtime, journaled into the side's interleaved journal
/// as its requests complete and handed to the side's blocks in memory.
pub(super) async fn run_block(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    cells: &[CellLayout],
    b: &Block,
    up: &Up,
    blocks: &mut Blocks,
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
    let warmup = warmup_before(suite, b, up);
    let window = cells
        .iter()
        .find(|c| c.name == b.cell)
        .map_or(1, |c| c.window);
    let part = RunPart::Block {
        first: b.first,
        count: b.count,
        warmup: warmup > 0,
    };
    let opts = part_options(ctx, rt, (b.side, &b.cell), up, part);
    let detail = json!({
        "cell": b.cell,
        "block": b.k,
        "first": b.first,
        "count": b.count,
        "window": window,
        "warmup": warmup,
        "dir": opts.out_dir,
    });
    ctx.log("block", Some(b.side), Status::Started, detail.clone())
        .map_err(|e| fail("ledger", b.side, e))?;
    let side = blocks.side_mut(b.side);
    match up.run(ctx, b.side, &opts, suite, Some(&side.records)).await {
        Ok(measured) => {
            let mut detail = detail;
            detail["probes"] = json!(measured.probes);
            side.add(measured);
            block_measured(ctx, b, side, detail, warmup).map_err(|e| fail("ledger", b.side, e))
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

/// The cell's warmup requests before this block: all of them on the
/// runtime's first block of the cell since it started, none after.
fn warmup_before(suite: &LoadedSuite, b: &Block, up: &Up) -> usize {
    let warm_first = up
        .warmed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert((b.side.to_string(), b.cell.clone()));
    suite
        .suite
        .cells
        .iter()
        .find(|c| c.name == b.cell)
        .map_or(0, |c| if warm_first { c.warmup } else { 0 })
}

/// The runner's options for one part of `cell` on `side` (a block of its
/// requests, or a capacity segment), into the side's interleaved directory.
pub(super) fn part_options(
    ctx: &Ctx<'_>,
    rt: &Runtime,
    (side, cell): (&str, &str),
    up: &Up,
    part: RunPart,
) -> RunOptions {
    let dir = interleaved_dir(ctx.out_dir, side);
    RunOptions {
        target: up.get(side).handle.base_url().to_string(),
        api_key_env: rt.api_key_env.clone(),
        suite: ctx.plan.suite.clone(),
        resume: dir.join(JOURNAL_FILE).exists(),
        out_dir: dir,
        runtime_label: Some(side.to_string()),
        image: image_label(rt),
        only_cells: vec![cell.to_string()],
        timeouts: ctx.plan.timeouts.clone(),
        // A part never runs turnover; the merged artifact records a skip.
        skip_turnover: None,
        // One line per part here instead of the runner's per-cell lines.
        quiet: true,
        tokenizer: None,
        part,
        scrape: scrape_options(rt),
    }
}

/// A measured block in the ledger and on the terminal: its requests (with
/// those an interrupted invocation measured of it) and how many failed.
fn block_measured(
    ctx: &Ctx<'_>,
    b: &Block,
    side: &SideBlocks,
    mut detail: serde_json::Value,
    warmup: usize,
) -> anyhow::Result<()> {
    let in_block =
        |r: &&RequestRecord| r.cell == b.cell && (b.first..b.first + b.count).contains(&r.index);
    let records: Vec<&RequestRecord> = side.records.iter().filter(in_block).collect();
    let failed = records.iter().filter(|r| r.outcome != Outcome::Ok).count();
    detail["recorded"] = json!(records.len());
    detail["failed"] = json!(failed);
    ctx.log("block", Some(b.side), Status::Ok, detail)?;
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

/// A side after its blocks: its turnover (once), then its `run` entry (the
/// model it served, for readmission).
pub(super) async fn finish_side(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    label: &'static str,
    up: &Up,
    blocks: &Blocks,
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
    let turnover = !ctx.plan.skip_turnover && !suite.suite.turnover.is_empty();
    log(
        Status::Started,
        json!({"schedule": "interleaved", "dir": dir, "turnover_dir": turnover.then_some(&tdir)}),
    )?;
    let (turnover_runs, turnover_requests) = if turnover {
        side_turnover(ctx, suite, label, rt, up, &tdir, &log).await?
    } else {
        (0, 0)
    };
    let art = blocks
        .side(label)
        .last
        .as_ref()
        .ok_or_else(|| fail("run", label, anyhow!("no block measured")))?;
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
            "turnover_requests": turnover_requests,
        }),
    )
}

/// The side's turnover runs, in their own directory (resumed when its
/// journal is there): how many ran, and the requests this invocation sent
/// for them. A failure is logged as the side's `run` entry failing.
async fn side_turnover(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    label: &'static str,
    rt: &Runtime,
    up: &Up,
    tdir: &Path,
    log: &dyn Fn(Status, Value) -> Result<(), PassFailure>,
) -> Result<(usize, usize), PassFailure> {
    ctx.say(&format!("{label}: turnover runs"));
    let opts = RunOptions {
        target: up.get(label).handle.base_url().to_string(),
        api_key_env: rt.api_key_env.clone(),
        suite: ctx.plan.suite.clone(),
        out_dir: tdir.to_path_buf(),
        runtime_label: Some(label.to_string()),
        image: image_label(rt),
        only_cells: Vec::new(),
        resume: tdir.join(JOURNAL_FILE).exists(),
        timeouts: ctx.plan.timeouts.clone(),
        skip_turnover: None,
        quiet: ctx.quiet,
        tokenizer: None,
        part: RunPart::TurnoverOnly,
        scrape: ScrapeOptions::none(),
    };
    match up.run(ctx, label, &opts, suite, None).await {
        Ok(m) => Ok((m.artifact.turnover.len(), turnover_sent(&m))),
        Err((who, e)) => {
            log(
                Status::Failed,
                json!({"schedule": "interleaved", "dir": tdir, "error": format!("{e:#}"), "log": up.get(who).handle.log()}),
            )?;
            Err(PassFailure {
                step: "run",
                runtime: who,
                error: e,
            })
        }
    }
}

/// What a turnover-only run sent its server: each turnover run's requests
/// and reference answers, the embeddings' requests, and its probes.
fn turnover_sent(m: &Measured) -> usize {
    let turnover: usize = m
        .artifact
        .turnover
        .iter()
        .map(|t| t.requests + t.references.len())
        .sum();
    let embeddings: usize = m.artifact.embeddings.iter().map(|e| e.requests).sum();
    turnover + embeddings + m.probes.total()
}
