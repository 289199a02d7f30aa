//! A qualification's capacity cells: the two runtimes' searches on one
//! level schedule (`report::capacity::shared::next`). At each step both
//! sides measure one segment at the level the schedule names, in the order
//! the interleaved blocks alternate (A B, then B A: A B B A), each drained
//! before the other starts; every request journaled in its side's
//! interleaved journal as it completes. A step begun on one side and not
//! the other (an interrupted invocation) is completed first on resume, so
//! each side's segments pair by position.

use anyhow::{Result, anyhow, bail};
use serde_json::json;

use super::outcome::PassFailure;
use super::up::Up;
use crate::config::plan::{BASELINE, CANDIDATE};
use crate::config::suite::{CellSpec, LoadedSuite};
use crate::measure::interleave;
use crate::measure::pool::Blocks;
use crate::measure::runner::{RunPart, capacity_segments};
use crate::report::capacity::run::{rule_of, shown, tried_of};
use crate::report::capacity::search::Tried;
use crate::report::capacity::{SegmentRun, shared};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;

/// Every capacity cell of the suite, one after another.
pub(super) async fn run_capacity(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    up: &Up,
    blocks: &mut Blocks,
) -> Result<(), PassFailure> {
    for cell in suite.suite.cells.iter().filter(|c| c.capacity.is_some()) {
        capacity_cell(ctx, suite, cell, up, blocks).await?;
    }
    Ok(())
}

/// The segments each side's journal holds of `cell`, finished ones only.
fn both_segments(cell: &CellSpec, blocks: &Blocks) -> Result<[Vec<(f64, SegmentRun)>; 2]> {
    Ok([
        capacity_segments(cell, &blocks.side(BASELINE).records)?,
        capacity_segments(cell, &blocks.side(CANDIDATE).records)?,
    ])
}

/// What a step of the shared schedule runs next: (side, load) in order;
/// empty once the schedule has ended or the cell's `requests` cannot pay
/// for another segment on each side.
fn next_segments(
    cell: &CellSpec,
    segs: &[Vec<(f64, SegmentRun)>; 2],
) -> Result<Vec<(&'static str, f64)>> {
    let (Some(spec), Some(slo)) = (&cell.capacity, &cell.slo) else {
        bail!("cell '{}' is not a capacity cell with an SLO", cell.name);
    };
    let [b, c] = segs;
    let k = b.len().min(c.len());
    if b.len().abs_diff(c.len()) > 1 {
        bail!(
            "cell '{}': the baseline's journal holds {} finished segments and the candidate's {}: a shared schedule differs by one at most",
            cell.name,
            b.len(),
            c.len()
        );
    }
    if b.len() != c.len() {
        // The side behind completes the step the other began.
        let (behind, ahead) = if b.len() < c.len() {
            (BASELINE, c)
        } else {
            (CANDIDATE, b)
        };
        return Ok(vec![(behind, ahead[k].0)]);
    }
    let measured: u64 = b.iter().map(|(_, s)| s.counts.of).sum();
    if measured + spec.segment_requests as u64 > cell.requests as u64 {
        return Ok(Vec::new());
    }
    let tried = |s: &[(f64, SegmentRun)]| -> Vec<Tried> {
        tried_of(s).into_iter().map(|(t, _)| t).collect()
    };
    let rule = rule_of(spec, slo.min_attainment());
    Ok(match shared::next(&rule, &tried(b), &tried(c)) {
        Some(load) => interleave::pair(k as u32)
            .into_iter()
            .map(|side| (side, load))
            .collect(),
        None => Vec::new(),
    })
}

/// One capacity cell on both sides until the shared schedule ends.
async fn capacity_cell(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    cell: &CellSpec,
    up: &Up,
    blocks: &mut Blocks,
) -> Result<(), PassFailure> {
    let fail = |e| PassFailure {
        step: "capacity",
        runtime: BASELINE,
        error: e,
    };
    loop {
        let segs = both_segments(cell, blocks).map_err(fail)?;
        let step = segs[0].len().min(segs[1].len());
        let todo = next_segments(cell, &segs).map_err(fail)?;
        if todo.is_empty() {
            break;
        }
        for (side, load) in todo {
            segment(ctx, suite, cell, (side, load, step), up, blocks).await?;
        }
    }
    for side in [BASELINE, CANDIDATE] {
        let run =
            crate::measure::runner::capacity_run(cell, &blocks.side(side).records).map_err(fail)?;
        ctx.say(&format!("{} {side:<9} {}", cell.name, run.line()));
    }
    Ok(())
}

/// One segment of `cell` at `load` on `side` (step `step` of the shared
/// schedule), journaled in the side's interleaved journal and added to its
/// records in memory.
async fn segment(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    cell: &CellSpec,
    (side, load, step): (&'static str, f64, usize),
    up: &Up,
    blocks: &mut Blocks,
) -> Result<(), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let rt = ctx
        .plan
        .runtime(side)
        .ok_or_else(|| fail("run", side, anyhow!("no runtime {side}")))?;
    let part = RunPart::CapacitySegment { load };
    let opts = super::measure_block::part_options(ctx, rt, (side, &cell.name), up, part);
    let detail = json!({"cell": cell.name, "step": step, "load": load, "dir": opts.out_dir});
    ctx.log("segment", Some(side), Status::Started, detail.clone())
        .map_err(|e| fail("ledger", side, e))?;
    let records = &mut blocks.side_mut(side);
    match up
        .run(ctx, side, &opts, suite, Some(&records.records))
        .await
    {
        Ok(measured) => {
            let before = records.records.len();
            records.add(measured);
            let (met, of) = met_of(cell, &records.records[before..]);
            let mut detail = detail;
            detail["met"] = json!(met);
            detail["of"] = json!(of);
            ctx.log("segment", Some(side), Status::Ok, detail)
                .map_err(|e| fail("ledger", side, e))?;
            ctx.say(&format!(
                "{} step {step} {side:<9} {} {}: met {met} of {of}",
                cell.name,
                shown(load),
                cell.capacity.as_ref().map_or("", |s| s.by.unit()),
            ));
            Ok(())
        }
        Err((label, e)) => {
            let mut detail = detail;
            detail["error"] = json!(format!("{e:#}"));
            detail["log"] = json!(up.get(label).handle.log());
            let _ = ctx.log("segment", Some(side), Status::Failed, detail);
            Err(fail("run", label, e))
        }
    }
}

/// A segment's measured requests that met the cell's SLO, and how many it measured.
fn met_of(cell: &CellSpec, records: &[crate::measure::record::RequestRecord]) -> (usize, usize) {
    let measured: Vec<_> = records
        .iter()
        .filter(|r| r.cell == cell.name && r.capacity.is_some_and(|m| !m.warmup))
        .collect();
    let met = cell.slo.as_ref().map_or(0, |slo| {
        measured
            .iter()
            .filter(|r| slo.met(&crate::measure::aggregate::request_row(r, 0)))
            .count()
    });
    (met, measured.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::suite::Suite;
    use crate::report::capacity::Segment;

    fn cell(requests: usize) -> CellSpec {
        let text = format!(
            "name = \"t\"\n[[cell]]\nname = \"c\"\nprompt_tokens = 100\nmax_tokens = 8\nrequests = {requests}\nslo = {{ ttft_ms = 100, min_attainment = 0.5 }}\ncapacity = {{ by = \"rate\", low = 1, high = 8, precision_percent = 10, segment_requests = 4, warmup_requests = 2 }}\n"
        );
        Suite::parse(&text, "t.toml").unwrap().cells.remove(0)
    }

    fn seg(load: f64, met: u64) -> (f64, SegmentRun) {
        (
            load,
            SegmentRun {
                counts: Segment {
                    met,
                    of: 4,
                    warmup: 2,
                },
                client_lag_p99_ms: 0.0,
            },
        )
    }

    #[test]
    fn a_step_begun_on_one_side_is_completed_first_and_steps_alternate() {
        let c = cell(100);
        // Nothing yet: the lowest level, baseline first.
        let none = [Vec::new(), Vec::new()];
        assert_eq!(
            next_segments(&c, &none).unwrap(),
            [(BASELINE, 1.0), (CANDIDATE, 1.0)]
        );
        // The baseline ran step 0 and the candidate did not: it runs there.
        let half = [vec![seg(1.0, 4)], Vec::new()];
        assert_eq!(next_segments(&c, &half).unwrap(), [(CANDIDATE, 1.0)]);
        // Step 1 runs candidate first.
        let one = [vec![seg(1.0, 4)], vec![seg(1.0, 4)]];
        let next = next_segments(&c, &one).unwrap();
        assert_eq!(next.len(), 2);
        assert_eq!((next[0].0, next[1].0), (CANDIDATE, BASELINE));
        assert_eq!(next[0].1, next[1].1);
        // Two apart is not a shared schedule.
        let apart = [vec![seg(1.0, 4), seg(1.0, 4)], Vec::new()];
        let e = format!("{:#}", next_segments(&c, &apart).unwrap_err());
        assert!(e.contains("differs by one at most"), "{e}");
        // The cell's requests cannot pay for another segment per side.
        let two = [
            vec![seg(1.0, 4), seg(1.0, 4)],
            vec![seg(1.0, 4), seg(1.0, 2)],
        ];
        assert!(!next_segments(&cell(100), &two).unwrap().is_empty());
        assert!(next_segments(&cell(8), &two).unwrap().is_empty());
    }
}
