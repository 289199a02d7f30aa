//! Adaptive rounds: a round of blocks, then a look (a comparison at the
//! information fraction reached), until the performance gate resolves or
//! the budget is spent.

use serde_json::json;

use super::compare::compare_interleaved;
use super::measure_block::run_block;
use super::outcome::PassFailure;
use super::progress::{
    PASS_FRACTION, fractions_looked, fractions_looked_by, last_round, round_size_mismatch,
    rounds_done,
};
use super::reach::{PairAtLook, budget_words, ledger_pairs, pairs_at_look};
use super::up::Up;
use crate::config::plan::{BASELINE, LooksBy};
use crate::config::suite::LoadedSuite;
use crate::measure::interleave::{self, CellLayout, StopReason};
use crate::measure::pool::Blocks;
use crate::report::design::{self, Clock, Plan, Recorded};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Entry, Status};
use crate::stats::GateOutcome;

/// Rounds of interleaved blocks, a look after each, until the performance
/// gate resolves or the plan's budget is spent: (rounds done, why it stopped).
/// A resumed qualification continues from the rounds its ledger records.
pub(super) async fn adaptive_rounds(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    cells: &[CellLayout],
    up: &Up,
    blocks: &mut Blocks,
    entries: &[Entry],
    minutes: &dyn Fn() -> f64,
) -> Result<(usize, Option<String>), PassFailure> {
    let fail = |step, runtime, error| PassFailure {
        step,
        runtime,
        error,
    };
    let budget = ctx.plan.adaptive;
    let max_rounds = interleave::max_rounds(cells, budget.max_requests);
    if max_rounds == 0 {
        // Preflight refuses such a plan; nothing is sent past the budget.
        let why = anyhow::anyhow!(
            "[adaptive] max_requests = {} cannot hold one round of every cell",
            budget.max_requests
        );
        return Err(fail("budget", BASELINE, why));
    }
    let mut done = rounds_done(entries);
    refuse_other_round_sizes(entries, cells, done).map_err(|e| fail("resume", BASELINE, e))?;
    let last = last_round(entries);
    let mut stop: Option<String> = last.and_then(|e| e.detail_str("stop").map(str::to_string));
    let mut plan =
        resume_plan(ctx, entries, done, max_rounds).map_err(|e| fail("resume", BASELINE, e))?;
    // Round time is measured in this invocation (a resume brings up its runtimes again).
    let (start_rounds, start_minutes) = (done, minutes());
    if done == 0 {
        say_budget(ctx, max_rounds);
    }
    while stop.is_none() {
        for b in interleave::round_schedule(cells, done) {
            run_block(ctx, suite, cells, &b, up, blocks).await?;
        }
        done += 1;
        // One reading of the clock for the fraction and the stop, so they agree.
        let now_minutes = minutes();
        let round_minutes = (done > start_rounds)
            .then(|| (now_minutes - start_minutes) / (done - start_rounds) as f64);
        let clock = (now_minutes, budget.max_minutes, round_minutes);
        let mut round = look(ctx, suite, cells, blocks, &mut plan, done, clock)
            .map_err(|e| fail("compare", "adaptive round", e))?;
        // The run stops at the rounds the design needs too (as planned now).
        let last_round = max_rounds.min(plan.design_rounds().unwrap_or(usize::MAX));
        round.rounds_left = interleave::rounds_left(done, last_round, clock);
        round.why = interleave::stop_after(
            done,
            max_rounds,
            now_minutes,
            budget.max_minutes,
            plan.design_rounds(),
            round.outcome,
        );
        record_round(ctx, cells, &plan, &round, max_rounds, minutes())
            .map_err(|e| fail("ledger", BASELINE, e))?;
        stop = round.why.map(|w| w.as_str().to_string());
    }
    Ok((done, stop))
}

/// A fresh adaptive pass says what it may spend and how it looks.
fn say_budget(ctx: &Ctx<'_>, max_rounds: usize) {
    let budget = ctx.plan.adaptive;
    ctx.say(&format!(
        "adaptive: up to {max_rounds} rounds (budget {} measured requests per side per cell, {} min; looks by {}); each round is an A B B A pair of blocks per cell, and a look; each cell's warmup and the prompt-sizing probes are sent beside the budget",
        budget.max_requests,
        budget.max_minutes,
        budget.looks_by.as_str()
    ));
}

/// What the look after one round found, and why the rounds stop there (if they do).
struct Round {
    /// Rounds done, this one included.
    done: usize,
    /// The information fraction of the look before, and of this one.
    before: f64,
    fraction: f64,
    pass_fraction: Option<f64>,
    outcome: Option<GateOutcome>,
    why: Option<StopReason>,
    /// Every gating pair at this look, and the rounds the budget still allows.
    pairs: Vec<PairAtLook>,
    rounds_left: usize,
}

/// The look after round `done`: the next look of `plan` (replanned first
/// when its looks are by design and enough blocks are in), and the
/// comparison at it.
fn look(
    ctx: &Ctx<'_>,
    suite: &LoadedSuite,
    cells: &[CellLayout],
    blocks: &Blocks,
    plan: &mut Plan,
    done: usize,
    clock: Clock,
) -> anyhow::Result<Round> {
    let blocks_now = interleave::blocks_after(cells, done);
    if ctx.plan.adaptive.looks_by == LooksBy::Design && blocks_now >= design::DESIGN_FIRST_BLOCKS {
        // This look's fraction by the rounds its own spread says the
        // design needs: a probe at the full levels (the spread does
        // not depend on them), never recorded. A quiet host's first
        // look can then spend all its error and decide.
        let probe = compare_interleaved(ctx, &suite.suite, cells, blocks, Some(&plan.probe(done)))?;
        plan.replan(done, blocks_now, &probe);
    }
    let look = plan.next(done, clock);
    let (before, fraction) = look.fraction().unwrap_or_default();
    let pass_fraction = look.pass_fractions().and_then(|h| h.last().copied());
    let report = compare_interleaved(ctx, &suite.suite, cells, blocks, Some(&look))?;
    Ok(Round {
        done,
        before,
        fraction,
        pass_fraction,
        outcome: report.performance_outcome,
        why: None,
        pairs: pairs_at_look(&report),
        rounds_left: 0,
    })
}

/// The round in the ledger (what a resume continues from) and one line
/// saying it, with what the rest of the budget can still decide.
fn record_round(
    ctx: &Ctx<'_>,
    cells: &[CellLayout],
    plan: &Plan,
    round: &Round,
    max_rounds: usize,
    minutes: f64,
) -> anyhow::Result<()> {
    let Round {
        done,
        before,
        fraction,
        pass_fraction,
        outcome,
        why,
        rounds_left,
        ..
    } = *round;
    let per_cell: serde_json::Map<String, serde_json::Value> = cells
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                json!(interleave::adaptive_requests(c, done)),
            )
        })
        .collect();
    // Each pair with the requests per side its cell has when the budget is spent.
    let pairs: Vec<(PairAtLook, usize)> = round
        .pairs
        .iter()
        .map(|p| {
            let cell = cells.iter().find(|c| c.name == p.cell);
            let budget = cell.map_or(0, |c| interleave::adaptive_requests(c, done + rounds_left));
            (p.clone(), budget)
        })
        .collect();
    ctx.log(
        "round",
        None,
        Status::Ok,
        json!({
            "round": done,
            "looks": max_rounds,
            "information_fraction": fraction,
            "previous_information_fraction": before,
            "design_rounds": plan.design_rounds(),
            PASS_FRACTION: pass_fraction,
            "pass_design_rounds": plan.pass_design_rounds(),
            "performance_outcome": outcome.map(|o| o.as_str()),
            "requests_per_side": per_cell,
            "minutes": minutes,
            "stop": why.map(StopReason::as_str),
            "budget_rounds_left": rounds_left,
            "pairs": ledger_pairs(&pairs),
        }),
    )?;
    ctx.say(&round_line(round, max_rounds, &pairs));
    Ok(())
}

/// The round's progress line: the look, the gate, what the rest of the
/// budget can decide (while another round runs: once the run stops, its
/// reason says why), and what comes next.
fn round_line(round: &Round, max_rounds: usize, pairs: &[(PairAtLook, usize)]) -> String {
    let (done, fraction, left) = (round.done, round.fraction, round.rounds_left);
    let reach = match round.why {
        None => budget_words(pairs),
        Some(_) => String::new(),
    };
    let left = match left {
        0 => "no round left".to_string(),
        1 => "1 round left".to_string(),
        n => format!("{n} rounds left"),
    };
    format!(
        "adaptive round {done}/{max_rounds} (information fraction {fraction:.2}; {left}): performance {}{}{}; {}",
        round
            .outcome
            .map_or("not decided by this compare", |o| o.as_str()),
        if reach.is_empty() { "" } else { "; " },
        reach,
        round.why.map_or("another round", StopReason::as_str)
    )
}

/// A resumed run's rounds must be cut as this infergate cuts them: its
/// looks' fractions and the requests each look saw come from the ledger.
fn refuse_other_round_sizes(
    entries: &[Entry],
    cells: &[CellLayout],
    done: usize,
) -> anyhow::Result<()> {
    match round_size_mismatch(entries, cells, done) {
        None => Ok(()),
        Some((cell, had, now)) => anyhow::bail!(
            "cannot resume: the ledger's {done} adaptive rounds hold {had} requests per side in cell {cell}, but this infergate's hold {now} (its rounds are a pair of blocks); finish this qualification with the infergate that started it, or start a new one"
        ),
    }
}

/// The plan of the next look as the ledger's rounds left it (a fresh run:
/// no looks yet). Its looks spend by every look's information fraction, so
/// a ledger whose rounds recorded none cannot be continued.
fn resume_plan(
    ctx: &Ctx<'_>,
    entries: &[Entry],
    done: usize,
    max_rounds: usize,
) -> anyhow::Result<Plan> {
    let spending = ctx.plan.gate_policy.gate.spending;
    let by_design = ctx.plan.adaptive.looks_by == LooksBy::Design;
    if done == 0 {
        return Ok(Plan::new(max_rounds, spending, by_design));
    }
    let Some(fractions) = fractions_looked(entries) else {
        anyhow::bail!(
            "cannot resume: the ledger's {done} adaptive rounds record no information fraction, which this infergate's looks spend their error by; finish this qualification with the infergate that started it, or start a new one"
        );
    };
    let last = last_round(entries);
    let rounds = |key: &str| {
        last.and_then(|e| e.detail.get(key))
            .and_then(|d| d.as_u64())
            .map(|d| d as usize)
    };
    // The pass side keeps its own plan only if every look recorded its fraction.
    let pass = by_design
        .then(|| fractions_looked_by(entries, PASS_FRACTION))
        .flatten()
        .map(|history| (history, rounds("pass_design_rounds")));
    let recorded = Recorded {
        fractions,
        design_rounds: rounds("design_rounds"),
        pass,
    };
    Ok(Plan::resume(max_rounds, spending, recorded))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(metric: &str, words: &str, beyond: bool, need: usize) -> PairAtLook {
        PairAtLook {
            cell: "concurrent-512".into(),
            metric: metric.into(),
            words: words.into(),
            outcome: GateOutcome::Inconclusive,
            beyond_margin: Some(beyond),
            requests_per_side: Some(16),
            requests_to_resolve: Some(need),
            design_requests_per_side: Some(need * 2),
        }
    }

    #[test]
    fn a_round_line_says_what_the_rest_of_the_budget_can_decide() {
        let mut round = Round {
            done: 2,
            before: 0.0,
            fraction: 0.01,
            pass_fraction: None,
            outcome: Some(GateOutcome::Inconclusive),
            why: None,
            pairs: Vec::new(),
            rounds_left: 10,
        };
        let pairs = [
            (pair("decode_tok_s_p50", "decode", true, 40), 96),
            (pair("ttft_p50_ms", "TTFT", false, 1466), 96),
        ];
        assert_eq!(
            round_line(&round, 12, &pairs),
            "adaptive round 2/12 (information fraction 0.01; 10 rounds left): performance inconclusive; decode at concurrent-512 can fail within the budget; TTFT there cannot be decided within it (about 1466 requests per side would); another round"
        );
        // The run stops (here the gate decided; a spent budget alike): no
        // more rounds to decide anything, only why it stopped.
        round.outcome = Some(GateOutcome::Fail);
        round.why = Some(StopReason::Resolved(GateOutcome::Fail));
        round.rounds_left = 1;
        let line = round_line(&round, 12, &pairs);
        assert!(
            line.starts_with(
                "adaptive round 2/12 (information fraction 0.01; 1 round left): performance fail; "
            ) && !line.contains("within"),
            "{line}"
        );
    }
}
