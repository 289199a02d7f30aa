//! Adaptive rounds: a round of blocks, then a look (a comparison at the
//! information fraction reached), until the performance gate resolves or
//! the budget is spent.

use serde_json::json;

use super::compare::{Look, compare_interleaved};
use super::interleave::{self, CellLayout, StopReason};
use super::measure_block::run_block;
use super::outcome::PassFailure;
use super::pool::Blocks;
use super::progress::{
    PASS_FRACTION, fraction_of, fractions_looked, fractions_looked_by, last_round,
    round_size_mismatch, rounds_done,
};
use super::up::Up;
use crate::config::plan::{BASELINE, LooksBy};
use crate::config::suite::LoadedSuite;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Entry, Status};

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
    let logged = |step: &str, status, detail| {
        ctx.log(step, None, status, detail)
            .map_err(|e| fail("ledger", BASELINE, e))
    };
    let budget = ctx.plan.adaptive;
    let max_rounds = interleave::max_rounds(cells, budget.max_requests);
    let mut done = rounds_done(entries);
    refuse_other_round_sizes(entries, cells, done).map_err(|e| fail("resume", BASELINE, e))?;
    let last = last_round(entries);
    let mut stop: Option<String> = last.and_then(|e| e.detail_str("stop").map(str::to_string));
    let mut plan = LookPlan::resume(entries, done, max_rounds, budget.looks_by);
    // Round time is measured in this invocation (a resume brings up its runtimes again).
    let (start_rounds, start_minutes) = (done, minutes());
    if done == 0 {
        ctx.say(&format!(
            "adaptive: up to {max_rounds} rounds (budget {} requests per side per cell, {} min; looks by {}); each round is an A B B A pair of blocks per cell, and a look",
            budget.max_requests,
            budget.max_minutes,
            budget.looks_by.as_str()
        ));
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
        let blocks_now = interleave::blocks_after(cells, done);
        if budget.looks_by == LooksBy::Design && blocks_now >= interleave::DESIGN_FIRST_BLOCKS {
            // This look's fraction by the rounds its own spread says the
            // design needs: a probe at the full levels (the spread does
            // not depend on them), never recorded. A quiet host's first
            // look can then spend all its error and decide.
            let probe =
                compare_interleaved(ctx, &suite.suite, cells, blocks, Some(Look::probe(done)))
                    .map_err(|e| fail("compare", "adaptive round", e))?;
            plan.replan(done, blocks_now, &probe);
        }
        let look = plan.next(done, max_rounds, clock);
        let (before, fraction) = look.fractions.unwrap_or_default();
        let pass_fraction = look.pass_history.as_ref().and_then(|h| h.last().copied());
        let report = compare_interleaved(ctx, &suite.suite, cells, blocks, Some(look))
            .map_err(|e| fail("compare", "adaptive round", e))?;
        let outcome = report.performance_outcome;
        let why = interleave::stop_after(
            done,
            max_rounds,
            now_minutes,
            budget.max_minutes,
            plan.design_rounds,
            outcome,
        );
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
                "design_rounds": plan.design_rounds,
                PASS_FRACTION: pass_fraction,
                "pass_design_rounds": plan.pass_design_rounds(),
                "performance_outcome": outcome.map(|o| o.as_str()),
                "requests_per_side": per_cell,
                "minutes": minutes(),
                "stop": why.map(StopReason::as_str),
            }),
        )?;
        ctx.say(&format!(
            "adaptive round {done}/{max_rounds} (information fraction {fraction:.2}{}): performance {}; {}",
            plan.design_rounds.map_or(String::new(), |d| format!(
                ", the design needs {d} rounds{}",
                plan.pass_design_rounds()
                    .map_or(String::new(), |p| format!(" ({p} to pass)"))
            )),
            outcome.map_or("not decided by this compare", |o| o.as_str()),
            why.map_or("another round", StopReason::as_str)
        ));
        stop = why.map(|w| w.as_str().to_string());
    }
    Ok((done, stop))
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

/// What the next look is planned by: the last look's fraction (0 before
/// the first), every look's fraction so far (for exact boundaries; None
/// when the ledger's rounds recorded none), and the rounds the design
/// needs, as the latest look planned them (each look plans by its own
/// spread before it spends); with looks by the design, the same for the
/// pass side, which needs a share of those rounds
/// (`stats::evidence::pass_design_share`) and spends its error by them.
struct LookPlan {
    last: f64,
    history: Option<Vec<f64>>,
    design_rounds: Option<usize>,
    /// The pass side's own: None with looks by the budget (and in ledgers
    /// from before it), when the pass side spends by `history` too.
    pass: Option<SidePlan>,
}

/// The pass side's fractions, every look's, and the rounds it needs.
struct SidePlan {
    history: Vec<f64>,
    design_rounds: Option<usize>,
}

impl LookPlan {
    /// The plan as the ledger's rounds left it (a fresh run: no looks yet).
    fn resume(entries: &[Entry], done: usize, max_rounds: usize, looks_by: LooksBy) -> Self {
        let last = last_round(entries);
        let rounds = |key: &str| {
            last.and_then(|e| e.detail.get(key))
                .and_then(|d| d.as_u64())
                .map(|d| d as usize)
        };
        // A ledger from before fractions were recorded spent by look / looks.
        let last_fraction = last.map_or(0.0, |e| {
            fraction_of(e).unwrap_or(done as f64 / max_rounds as f64)
        });
        let pass = match (looks_by, done) {
            (LooksBy::Budget, _) => None,
            (LooksBy::Design, 0) => Some(SidePlan {
                history: Vec::new(),
                design_rounds: None,
            }),
            // Resumed: only if every look recorded the pass side's fraction.
            (LooksBy::Design, _) => {
                fractions_looked_by(entries, PASS_FRACTION).map(|history| SidePlan {
                    history,
                    design_rounds: rounds("pass_design_rounds"),
                })
            }
        };
        LookPlan {
            last: last_fraction,
            history: if done == 0 {
                Some(Vec::new())
            } else {
                fractions_looked(entries)
            },
            design_rounds: rounds("design_rounds"),
            pass,
        }
    }

    /// The look after round `done`: its fraction
    /// ([`interleave::information_fraction`]) joins the history, and the
    /// pass side's by its own rounds joins its own.
    fn next(&mut self, done: usize, max_rounds: usize, clock: (f64, f64, Option<f64>)) -> Look {
        let fraction = interleave::information_fraction(
            done,
            max_rounds,
            clock,
            self.design_rounds,
            self.last,
        );
        if let Some(h) = self.history.as_mut() {
            h.push(fraction);
        }
        let before = std::mem::replace(&mut self.last, fraction);
        let pass_history = self.pass.as_mut().map(|p| {
            let last = p.history.last().copied().unwrap_or(0.0);
            let t =
                interleave::information_fraction(done, max_rounds, clock, p.design_rounds, last);
            p.history.push(t);
            p.history.clone()
        });
        Look {
            round: done,
            fractions: Some((before, fraction)),
            history: self.history.clone(),
            // Both histories, or neither: the levels spend over look-by-look pairs.
            pass_history: pass_history.filter(|_| self.history.is_some()),
            closing: false,
        }
    }

    /// The rounds the pass side needs, as the latest look planned them.
    fn pass_design_rounds(&self) -> Option<usize> {
        self.pass.as_ref().and_then(|p| p.design_rounds)
    }

    /// At the look after round `done` (each cell with at least `blocks`
    /// blocks), the rounds the design needs, as its gate plans them from
    /// `report`, and the pass side's share of them.
    fn replan(&mut self, done: usize, blocks: usize, report: &crate::report::Report) {
        let growth = report
            .gates
            .as_ref()
            .and_then(|g| g.performance_evidence.as_ref())
            .and_then(crate::report::gate::design_growth);
        // A look that cannot plan (a pair without a spread: its fail level
        // too small for a bound) leaves the last plan standing.
        self.design_rounds = interleave::design_rounds(done, blocks, growth).or(self.design_rounds);
        let share = report
            .statistics
            .as_ref()
            .and_then(|s| s.family_wise.as_ref())
            .map(|f| crate::report::stats::pass_design_share(f.alpha, f.gating_pairs));
        if let Some(p) = self.pass.as_mut() {
            p.design_rounds = interleave::pass_design_rounds(self.design_rounds, share);
        }
    }
}
