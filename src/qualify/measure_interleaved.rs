//! The interleaved schedule: both runtimes up, every block in order (or
//! adaptive rounds), then each runtime's turnover, then both stopped, and
//! what the measuring cost recorded.

use serde_json::json;

use super::measure_adaptive::adaptive_rounds;
use super::measure_block::{finish_side, run_block};
use super::outcome::PassFailure;
use super::progress::{
    last_round, probes_sent, side_finished, spent_words, turnover_sent, warmups_sent,
};
use super::up::Up;
use super::workdir::recorded_window_rule;
use crate::config::plan::{BASELINE, CANDIDATE};
use crate::config::suite::LoadedSuite;
use crate::measure::interleave::{self, CellLayout, totals};
use crate::measure::pool::Blocks;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;
use crate::runtime::lifecycle;

/// The interleaved schedule: both runtimes up, every block in order, then
/// each runtime's turnover, then both stopped; the blocks measured, in
/// memory (`None`: an earlier invocation measured them all). Finished blocks
/// (ledger `block` ok) are kept on resume; an interrupted one continues from
/// its journal.
pub(super) async fn run_interleaved(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    adaptive: bool,
) -> Result<Option<Blocks>, PassFailure> {
    let t0 = std::time::Instant::now();
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let cells = interleave::layout_by(
        &suite.suite.cells,
        ctx.plan.window.as_ref(),
        recorded_window_rule(ctx.out_dir),
    );
    let entries = ctx
        .ledger
        .entries(ctx.qualification)
        .map_err(|e| fail("ledger", BASELINE, e))?;
    if side_finished(&entries, BASELINE) && side_finished(&entries, CANDIDATE) {
        ctx.say("interleaved blocks: already measured");
        return Ok(None);
    }
    // What earlier invocations measured, read back once (nothing on a first run).
    let mut blocks =
        super::workdir::recover_blocks(ctx.out_dir).map_err(|e| fail("recover", BASELINE, e))?;
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
        reached: Default::default(),
    };
    let result = interleaved_body(ctx, suite, &cells, adaptive, &up, &mut blocks, t0).await;
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
    Ok(Some(blocks))
}

async fn interleaved_body(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    cells: &[CellLayout],
    adaptive: bool,
    up: &Up,
    blocks: &mut Blocks,
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
        let (r, s) = adaptive_rounds(ctx, suite, cells, up, blocks, &entries, &minutes).await?;
        (Some(r), s)
    } else {
        for b in interleave::fixed_schedule(cells) {
            run_block(ctx, suite, cells, &b, up, blocks).await?;
        }
        (None, None)
    };
    // Capacity cells are searched segment by segment, not cut into blocks.
    super::measure_capacity::run_capacity(ctx, suite, up, blocks).await?;
    // Correctness, not performance: once per side, after the blocks.
    for label in [BASELINE, CANDIDATE] {
        finish_side(ctx, suite, label, up, blocks).await?;
    }
    // Capacity cells' segments, counted from their records' marks.
    let capacity = |warm: bool| {
        [BASELINE, CANDIDATE]
            .map(|l| {
                blocks
                    .side(l)
                    .records
                    .iter()
                    .filter(|r| r.capacity.is_some_and(|m| m.warmup == warm))
                    .count()
            })
            .into_iter()
            .max()
            .unwrap_or(0)
    };
    let per_side: usize = totals(cells, rounds).iter().sum::<usize>() + capacity(false);
    // As sent: a cell warms up once per runtime lifetime, not per block.
    let entries = ctx
        .ledger
        .entries(ctx.qualification)
        .map_err(|e| fail("ledger", BASELINE, e))?;
    let warmups =
        warmups_sent(&entries, BASELINE).max(warmups_sent(&entries, CANDIDATE)) + capacity(true);
    let probes = [BASELINE, CANDIDATE]
        .map(|l| probes_sent(&entries, l))
        .into_iter()
        .max_by_key(|p| p.total())
        .unwrap_or_default();
    let turnover = turnover_sent(&entries, BASELINE).max(turnover_sent(&entries, CANDIDATE));
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let spent = format!(
        "{} in {}, {:.1} min{}",
        spent_words(per_side, warmups, probes, turnover),
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
        "probe_requests_per_side": probes,
        "turnover_requests_per_side": turnover,
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
