//! Compare the two sides (pooled) under the plan's gate policy, and write
//! the report; for an adaptive run, at the look the run has reached.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use serde_json::json;

use super::interleave::{self, CellLayout, StopReason, totals};
use super::outcome::StepEnd;
use super::pool::{Blocks, merge_interleaved, merge_passes_of};
use super::progress::{
    PASS_FRACTION, fraction_of, fractions_looked, fractions_looked_by, last_round, rounds_done,
};
use super::workdir::{recorded_window_rule, turnover_dir};
use crate::config::plan::{BASELINE, CANDIDATE, PlanSchedule};
use crate::config::suite::{LoadedSuite, Suite};
use crate::measure::runner::ARTIFACT_FILE;
use crate::report::{self, Report};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;
use crate::runtime::state::pass_dir;

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

/// Which look of an adaptive run a comparison is: the look after round
/// `round`, at the information fractions the run measured (None when the
/// ledger's rounds recorded none), and whether it closes the run early.
#[derive(Debug, Clone)]
pub(super) struct Look {
    pub round: usize,
    pub fractions: Option<(f64, f64)>,
    /// Every look's fraction so far, this one last (the ledger's rounds):
    /// the levels are exact group-sequential boundaries over them. None
    /// when a round of the ledger recorded no fraction.
    pub history: Option<Vec<f64>>,
    /// The pass side's own fractions, every look's (looks by the design).
    pub pass_history: Option<Vec<f64>>,
    pub closing: bool,
}

impl Look {
    /// A look after round `round` at the full levels, as if it were the
    /// only one: what the design plans by (its spread), never a verdict.
    pub fn probe(round: usize) -> Self {
        Look {
            round,
            fractions: Some((0.0, 1.0)),
            history: Some(vec![1.0]),
            pass_history: Some(vec![1.0]),
            closing: false,
        }
    }
}

/// Merge each side's blocks (requests `0 .. totals` of every cell) and compare,
/// telling the comparison which look of the adaptive plan it is (`None`: a
/// fixed-size run).
pub(super) fn compare_interleaved(
    ctx: &Ctx<'_>,
    suite: &Suite,
    cells: &[CellLayout],
    blocks: &Blocks,
    look: Option<Look>,
) -> Result<Report> {
    let mut policy = ctx.plan.gate_policy.clone();
    policy.sequential_looks = match look {
        Some(_) => interleave::max_rounds(cells, ctx.plan.adaptive.max_requests),
        None => 1,
    };
    // Every adaptive round is a look; this comparison is the look after round `rounds`.
    let rounds = look.as_ref().map(|l| l.round);
    policy.sequential_look = rounds;
    policy.sequential_closing = look.as_ref().is_some_and(|l| l.closing);
    policy.sequential_fractions = look.as_ref().and_then(|l| l.fractions);
    policy.pass_look_fractions = look.as_ref().and_then(|l| l.pass_history.clone());
    policy.look_fractions = look.and_then(|l| l.history);
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
            blocks.side(label),
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
            ctx.plan.window,
            recorded_window_rule(ctx.out_dir),
        );
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
            history: fractions_looked(&entries),
            pass_history: fractions_looked_by(&entries, PASS_FRACTION),
            closing: last.and_then(|e| e.detail_str("stop"))
                == Some(StopReason::MaxMinutes.as_str()),
        });
        let blocks = match blocks {
            Some(b) => b,
            None => Blocks::recover(ctx.out_dir)?,
        };
        return compare_interleaved(ctx, &suite.suite, &cells, &blocks, look);
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
        let path = ctx.out_dir.join(format!("{label}.json"));
        crate::atomic::write_json_atomic(&path, &merged)?;
        Ok(path)
    };
    let (b, c) = (side(BASELINE)?, side(CANDIDATE)?);
    // From the files, so the report records their (and a single pass's
    // journal's) sha256 for `verify --runs`.
    report::compare_paths(&b, &c, policy).map_err(|e| anyhow!("{e}"))
}
