//! What a qualification would spend, per side: requests, warm-ups and
//! turnover from the suite and the plan; a capacity search's levels and
//! requests from its table; the minutes from a `calibrate` output.

use std::path::Path;

use crate::config::plan::{BudgetSource, Plan, check_round_budget};
use crate::config::suite::LoadedSuite;

use super::{Check, Found};

/// What the measuring will spend, per side, from the suite and the plan.
pub(super) fn spend(c: &mut Check, plan: &Plan, suite: &LoadedSuite) {
    capacity(c, plan, suite);
    // A capacity cell's `requests` is its search's budget, said apart.
    let cells: Vec<_> = suite
        .suite
        .cells
        .iter()
        .filter(|c| c.capacity.is_none())
        .cloned()
        .collect();
    let cells = &cells[..];
    let requests: usize = cells.iter().map(|c| c.requests).sum();
    let warmup: usize = cells.iter().map(|c| c.warmup).sum();
    let specs = if plan.skip_turnover {
        &[][..]
    } else {
        &suite.suite.turnover[..]
    };
    let turnover: usize = specs.iter().map(|t| t.requests * t.repeats.max(1)).sum();
    // Each turnover request may generate up to its max_tokens, on both the
    // reference and the measured pass.
    let turnover_tokens: u64 = specs
        .iter()
        .map(|t| 2 * (t.requests * t.repeats.max(1)) as u64 * t.max_tokens())
        .sum();
    if plan.adaptive.enabled {
        let window = plan.window.as_ref();
        let layout = crate::measure::interleave::layout(cells, window);
        let round = crate::measure::interleave::round_cells(cells, &layout, window);
        let budget = plan.adaptive.max_requests;
        if let Err(why) = check_round_budget(&round, budget, BudgetSource::Plan) {
            c.add("adaptive budget", Found::Wrong, why);
        }
    }
    let measured = if plan.adaptive.enabled {
        format!(
            "adaptive: up to {} measured requests per side per cell ({} cell(s), each cell's warmup and the prompt-sizing probes beside them) or {} minutes of rounds, whichever ends first",
            plan.adaptive.max_requests,
            cells.len(),
            plan.adaptive.max_minutes
        )
    } else {
        format!(
            "{} requests (+{} warmup) over {} cell(s), × {} pass(es)",
            requests,
            warmup,
            cells.len(),
            plan.repeats
        )
    };
    c.add(
        "spend per side",
        Found::Checked,
        format!(
            "{measured}; {turnover} turnover requests and as many for their reference passes (up to {turnover_tokens} generated tokens in all)"
        ),
    );
}

/// Each capacity cell's search: whether the plan's schedule can run it, and
/// the levels and measured requests it may spend per side.
fn capacity(c: &mut Check, plan: &Plan, suite: &LoadedSuite) {
    if let Some(why) =
        crate::qualify::preflight::capacity_schedule(plan, suite, plan.adaptive.enabled)
    {
        c.add("capacity cells", Found::Wrong, why);
    }
    for cell in &suite.suite.cells {
        let Some(spec) = &cell.capacity else {
            continue;
        };
        let cost = spec.cost(cell.requests);
        c.add(
            format!("capacity cell {}", cell.name),
            Found::Checked,
            format!(
                "a search by {} over {}–{} {} to {} %: at most {} levels, {}–{} measured requests per side (two segments of {} a level, or all {}; the cell's `requests` {} caps it), each segment's warm-up on top; A B B A segments, so both runtimes are up at once",
                spec.by.name(),
                spec.low,
                spec.high,
                spec.by.unit(),
                spec.precision_percent,
                cost.levels,
                cost.fewest,
                cost.most,
                spec.segment_requests,
                spec.max_segments,
                cell.requests
            ),
        );
    }
}

/// The measuring's minutes from a `calibrate` output's seconds per request
/// of each cell: both runtimes' passes, one after another. Startups,
/// sizing, turnover and readmission come on top.
pub(super) fn minutes(c: &mut Check, plan: &Plan, suite: &LoadedSuite, file: &Path) {
    let what = "spend in minutes";
    let read = crate::report::files::read_regular(file)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            serde_json::from_slice::<crate::report::calibrate::Calibration>(&bytes)
                .map_err(|e| format!("not a calibrate output: {e}"))
        });
    let cal = match read {
        Ok(cal) if cal.schema == crate::report::calibrate::CALIBRATION_SCHEMA => cal,
        Ok(cal) => {
            c.add(
                what,
                Found::Wrong,
                format!(
                    "{}: schema {:?} is not a calibrate output's",
                    file.display(),
                    cal.schema
                ),
            );
            return;
        }
        Err(e) => {
            c.add(what, Found::Wrong, format!("{}: {e}", file.display()));
            return;
        }
    };
    let mut seconds = 0.0;
    let mut missing = Vec::new();
    for cell in suite.suite.cells.iter().filter(|c| c.capacity.is_none()) {
        let per = cal
            .cells
            .iter()
            .find(|n| n.cell == cell.name)
            .and_then(|n| n.seconds_per_request);
        match per {
            Some(per) => seconds += (cell.requests + cell.warmup) as f64 * per,
            None => missing.push(cell.name.as_str()),
        }
    }
    let passes = if plan.adaptive.enabled {
        1
    } else {
        plan.repeats
    };
    let total = 2.0 * passes as f64 * seconds / 60.0;
    if missing.is_empty() {
        c.add(
            what,
            Found::Checked,
            format!(
                "about {total:.1} minutes of requests for both runtimes ({}: each cell's seconds per request × its requests and warmups × {passes} pass(es) × 2 runtimes; startups, sizing, turnover, readmission and capacity searches on top)",
                file.display()
            ),
        );
    } else {
        c.add(
            what,
            Found::Unchecked,
            format!(
                "{} has no seconds per request for cell(s) {}: calibrate this suite",
                file.display(),
                missing.join(", ")
            ),
        );
    }
}
