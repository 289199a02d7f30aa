//! Compare the two sides (pooled) under the plan's gate policy, and write
//! the report; for an adaptive run, at the look the run has reached.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use serde_json::json;

use super::outcome::StepEnd;
use super::progress::{
    PASS_FRACTION, fractions_looked, fractions_looked_by, last_round, rounds_done,
};
use super::workdir::{recorded_window_rule, recover_blocks};
use crate::config::plan::{BASELINE, CANDIDATE, PlanSchedule};
use crate::config::suite::{LoadedSuite, Suite};
use crate::measure::interleave::{self, CellLayout, StopReason, totals};
use crate::measure::pool::{Blocks, merge_interleaved, merge_passes_of};
use crate::measure::runner::ARTIFACT_FILE;
use crate::report::design::Look;
use crate::report::{self, Report};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Entry, Status};
use crate::runtime::state::pass_dir;
use crate::runtime::state::{side_artifact, turnover_dir};

/// Compare the two sides and write the report; a failed comparison is
/// recorded and ends the qualification.
pub(super) fn compare_and_write(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    report_path: &Path,
    adaptive: bool,
    blocks: Option<Blocks>,
) -> Result<Report, StepEnd> {
    let report = match compare(ctx, suite, adaptive, blocks) {
        Ok(r) => r,
        Err(e) => {
            let error = json!({"error": format!("{e:#}")});
            ctx.log("compare", None, Status::Failed, error)?;
            return Err(StepEnd::Failed(format!("compare: {e:#}")));
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
            "lineage": super::lineage::lineage(&report),
        }),
    )?;
    report::write_report_atomic(report_path, &report).map_err(anyhow::Error::from)?;
    ctx.ledger
        .record_report(ctx.qualification, report_path, "qualify")?;
    ctx.say(&format!(
        "report: {} ({})",
        report_path.display(),
        report.qualification
    ));
    Ok(report)
}

/// Merge each side's blocks (requests `0 .. totals` of every cell) and compare,
/// telling the comparison which look of the adaptive plan it is (`None`: a
/// fixed-size run). Every adaptive round is a look: the look after round
/// `look.round()`.
pub(super) fn compare_interleaved(
    ctx: &Ctx<'_>,
    suite: &Suite,
    cells: &[CellLayout],
    blocks: &Blocks,
    look: Option<&Look>,
) -> Result<Report> {
    let totals = totals(cells, look.map(Look::round));
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
            blocks.side(label),
            &turnover_dir(ctx.out_dir, label),
            started_at,
            ctx.plan
                .skip_turnover
                .then_some(report::artifact::TurnoverSkip::SkippedByPlan),
        )?;
        let path = side_artifact(ctx.out_dir, label);
        crate::atomic::write_json_atomic(&path, &merged)?;
        Ok(path)
    };
    let (b, c) = (side(BASELINE)?, side(CANDIDATE)?);
    // From the files as written, so the report records their sha256 and
    // `verify --runs` can hold them to it.
    let policy = &ctx.plan.gate_policy;
    report::compare_paths_at(&b, &c, policy, look).map_err(|e| anyhow!("{e}"))
}

/// Compare the pooled passes (or blocks) of each side; the blocks as measured
/// in this invocation, else as their journals hold them.
fn compare(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    adaptive: bool,
    blocks: Option<Blocks>,
) -> Result<Report> {
    if ctx.plan.schedule == PlanSchedule::Interleaved {
        let cells = interleave::layout_by(
            &suite.suite.cells,
            ctx.plan.window.as_ref(),
            recorded_window_rule(ctx.out_dir),
        );
        let entries = ctx.ledger.entries(ctx.qualification).unwrap_or_default();
        let look = adaptive.then(|| last_look(ctx, &cells, &entries));
        let blocks = match blocks {
            Some(b) => b,
            None => recover_blocks(ctx.out_dir)?,
        };
        return compare_interleaved(ctx, &suite.suite, &cells, &blocks, look.as_ref());
    }
    let policy = &ctx.plan.gate_policy;
    if ctx.plan.repeats == 1 {
        // From the files, so the report records each one's sha256 (`verify --runs`).
        let file = |label| pass_dir(ctx.out_dir, label, 1).join(ARTIFACT_FILE);
        return Ok(report::compare_paths(
            &file(BASELINE),
            &file(CANDIDATE),
            policy,
        )?);
    }
    let side = |label: &str| -> Result<PathBuf> {
        let dirs: Vec<PathBuf> = (1..=ctx.plan.repeats)
            .map(|n| pass_dir(ctx.out_dir, label, n))
            .collect();
        if dirs.len() == 1 {
            return Ok(dirs[0].join(ARTIFACT_FILE));
        }
        let merged = merge_passes_of(&suite.suite, &dirs)?;
        let path = side_artifact(ctx.out_dir, label);
        crate::atomic::write_json_atomic(&path, &merged)?;
        Ok(path)
    };
    let (b, c) = (side(BASELINE)?, side(CANDIDATE)?);
    // From the files, so the report records their (and a single pass's
    // journal's) sha256 for `verify --runs`.
    report::compare_paths(&b, &c, policy).map_err(|e| anyhow!("{e}"))
}

/// The last look of an adaptive run again, as the ledger's rounds recorded
/// it: at every look's fraction, the pass side's own where each round kept
/// it, closing when the clock stopped the run before its planned last.
/// Rounds that recorded no fractions looked by their share of the planned
/// looks.
fn last_look(ctx: &Ctx<'_>, cells: &[CellLayout], entries: &[Entry]) -> Look {
    // A budget below one round is refused at preflight; never zero looks.
    let planned = interleave::max_rounds(cells, ctx.plan.adaptive.max_requests).max(1);
    let look = Look::planned(
        rounds_done(entries),
        planned,
        ctx.plan.gate_policy.gate.spending,
    );
    let stop = last_round(entries).and_then(|e| e.detail_str("stop"));
    let look = if stop == Some(StopReason::MaxMinutes.as_str()) {
        look.closing()
    } else {
        look
    };
    look.at_fractions(
        fractions_looked(entries).unwrap_or_default(),
        fractions_looked_by(entries, PASS_FRACTION),
    )
}
