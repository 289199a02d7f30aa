//! Where an adaptive run's looks fall: each look's information fraction,
//! the rounds the design needs (planned from a look's spread) and the pass
//! side's share of them, and the [`Plan`] that re-plans them at every look.

use super::Look;
use crate::model::{EvidenceGate, Report};
use crate::stats::evidence::{Spending, pass_design_share};

/// The clock at a look: (minutes spent, the budget's minutes, the measured
/// minutes per round when known).
pub type Clock = (f64, f64, Option<f64>);

/// Blocks per cell before the design plans the looks: a spread from fewer
/// is too noisy to plan by (on the reference engine a first look's 2 blocks
/// planned 2 rounds where later looks planned 40). Every window plans from
/// round 2 (a pair of blocks a round): 4 requests per side for blocks of
/// one, so a quiet host's second look can spend all it has. Planned from
/// the bounds' spread (t with 3 degrees of freedom), a plan from round 2
/// decides as often in simulation as one from round 3, and sooner on a
/// quiet host (`docs/gate-calibration-results.md`).
pub const DESIGN_FIRST_BLOCKS: usize = 4;

/// The information fraction of the look after round `done`: the share of
/// the rounds this run will really have, re-planned at every look. When
/// the budget ends the run at this look (`max_rounds` done, or the clock
/// spent), 1: it spends what is left. Otherwise the rounds left
/// are the fewer of what the request budget allows and what the clock
/// allows at the measured minutes per round (`round_minutes`; the round
/// that crosses the clock still runs), so a run the clock will end early
/// spends its error over the looks it will get, not over a request budget
/// it never reaches. With `design_rounds` (the rounds the design needs,
/// planned by this look's spread, a probe) the rounds left are fewer still
/// when the design needs fewer than the budget allows: the error is spent where the
/// evidence will suffice, and the look at them spends what is left. Above
/// `before` (the previous look's) by at least an even share of what is
/// left over the looks left, so a plan that grows (the design needs more
/// rounds than it did) re-spreads the rest instead of holding the fraction
/// where it was (a look whose fraction does not grow has no error to
/// spend: on the reference engine three looks in a row decided nothing
/// that way), and below 1 while another round will run. It depends on the
/// clock, the budget and the spread, not on the observed difference, which
/// keeps the spending valid.
pub fn information_fraction(
    done: usize,
    max_rounds: usize,
    (minutes, max_minutes, round_minutes): Clock,
    design_rounds: Option<usize>,
    before: f64,
) -> f64 {
    let max_rounds = max_rounds.min(design_rounds.unwrap_or(usize::MAX));
    if done >= max_rounds || minutes >= max_minutes {
        return 1.0;
    }
    let by_clock = round_minutes
        .filter(|r| r.is_finite() && *r > 0.0)
        .map_or(usize::MAX, |r| {
            done.saturating_add(((max_minutes - minutes) / r).ceil().min(1e9) as usize)
        });
    let rounds = max_rounds.min(by_clock).max(done + 1);
    let before = before.clamp(0.0, 1.0);
    // The looks left, this one included: rounds − (done − 1).
    let even = before + (1.0 - before) / (rounds + 1 - done.max(1)) as f64;
    (done as f64 / rounds as f64).max(even)
}

/// The rounds a run needs for the design's power, planned at the look
/// after round `done` (each cell then has at least `blocks` blocks) from
/// its spread: `done` times the most any pair needs over what it has
/// ([`design_growth`]), rounded up. None when not every pair can be
/// planned for, or below [`DESIGN_FIRST_BLOCKS`]; the budget alone then
/// plans the looks.
pub fn design_rounds(done: usize, blocks: usize, growth: Option<f64>) -> Option<usize> {
    if blocks < DESIGN_FIRST_BLOCKS {
        return None;
    }
    let r = growth? * done as f64;
    (r.is_finite() && r >= 0.0).then(|| (r.ceil() as usize).max(1))
}

/// How many times its present requests the gate needs for the design's
/// power: the most any pair needs (every pair must pass), each pair's
/// `design_requests_per_side` over its `requests_per_side`. None when a
/// pair lacks either (not every pair can be planned for).
pub fn design_growth(gate: &EvidenceGate) -> Option<f64> {
    gate.parts.iter().try_fold(0.0f64, |most, p| {
        let (need, used) = (p.design_requests_per_side?, p.requests_per_side?);
        (used > 0).then(|| most.max(need as f64 / used as f64))
    })
}

/// The rounds the pass side needs: `share` (`stats::pass_design_share`, below
/// 1) of the rounds the design needs, rounded up. None without either.
pub fn pass_design_rounds(design_rounds: Option<usize>, share: Option<f64>) -> Option<usize> {
    let r = design_rounds? as f64 * share.filter(|s| s.is_finite() && *s > 0.0)?.min(1.0);
    Some((r.ceil() as usize).max(1))
}

/// What the next look of an adaptive run is planned by: every look's
/// fraction so far (the levels are exact boundaries over them) and the
/// rounds the design needs, as the latest look planned them (each look
/// plans by its own spread before it spends); with the pass side's own
/// plan, the same for the pass side, which needs a share of those rounds
/// (`stats::pass_design_share`) and spends its error by them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The looks the budget allows.
    planned: usize,
    spending: Spending,
    history: Vec<f64>,
    design_rounds: Option<usize>,
    /// None: the pass side spends by `history` too.
    pass: Option<SidePlan>,
}

/// The pass side's fractions, every look's, and the rounds it needs.
#[derive(Debug, Clone, PartialEq)]
struct SidePlan {
    history: Vec<f64>,
    design_rounds: Option<usize>,
}

/// What a run's earlier looks recorded: every look's fraction in order,
/// the rounds the design needed at the last, and the pass side's own
/// (fractions and rounds) when it kept them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    pub fractions: Vec<f64>,
    pub design_rounds: Option<usize>,
    pub pass: Option<(Vec<f64>, Option<usize>)>,
}

impl Plan {
    /// A run of up to `planned` looks spending by `spending`, with no look
    /// yet; `pass_side`: the pass side plans and spends by its own
    /// information (looks by the design).
    pub fn new(planned: usize, spending: Spending, pass_side: bool) -> Plan {
        let pass = pass_side.then_some((Vec::new(), None));
        Plan::resume(
            planned,
            spending,
            Recorded {
                pass,
                ..Recorded::default()
            },
        )
    }

    /// The plan as a run's earlier looks left it.
    pub fn resume(planned: usize, spending: Spending, recorded: Recorded) -> Plan {
        Plan {
            planned,
            spending,
            history: recorded.fractions,
            design_rounds: recorded.design_rounds,
            pass: recorded.pass.map(|(history, design_rounds)| SidePlan {
                history,
                design_rounds,
            }),
        }
    }

    /// The look after round `done` at `clock`: its fraction
    /// ([`information_fraction`]) joins the history, and the pass side's
    /// by its own rounds joins its own.
    pub fn next(&mut self, done: usize, clock: Clock) -> Look {
        let last = self.history.last().copied().unwrap_or(0.0);
        let fraction = information_fraction(done, self.planned, clock, self.design_rounds, last);
        self.history.push(fraction);
        let planned = self.planned;
        let pass = self.pass.as_mut().map(|p| {
            let last = p.history.last().copied().unwrap_or(0.0);
            let t = information_fraction(done, planned, clock, p.design_rounds, last);
            p.history.push(t);
            p.history.clone()
        });
        Look::planned(done, self.planned, self.spending).at_fractions(self.history.clone(), pass)
    }

    /// The look that plans: after round `done`, at the full levels.
    pub fn probe(&self, done: usize) -> Look {
        Look::probe(done, self.planned, self.spending)
    }

    /// The rounds the design needs, as the latest look planned them.
    pub fn design_rounds(&self) -> Option<usize> {
        self.design_rounds
    }

    /// The rounds the pass side needs, as the latest look planned them.
    pub fn pass_design_rounds(&self) -> Option<usize> {
        self.pass.as_ref().and_then(|p| p.design_rounds)
    }

    /// At the look after round `done` (each cell with at least `blocks`
    /// blocks), the rounds the design needs, as its gate plans them from
    /// `probe` (the report of [`Plan::probe`]), and the pass side's share
    /// of them.
    pub fn replan(&mut self, done: usize, blocks: usize, probe: &Report) {
        let growth = probe
            .gates
            .as_ref()
            .and_then(|g| g.performance_evidence.as_ref())
            .and_then(design_growth);
        // A look that cannot plan (a pair without a spread: its fail level
        // too small for a bound) leaves the last plan standing.
        self.design_rounds = design_rounds(done, blocks, growth).or(self.design_rounds);
        let share = probe
            .statistics
            .as_ref()
            .and_then(|s| s.family_wise.as_ref())
            .map(|f| pass_design_share(f.alpha, f.gating_pairs));
        if let Some(p) = self.pass.as_mut() {
            p.design_rounds = pass_design_rounds(self.design_rounds, share);
        }
    }
}
