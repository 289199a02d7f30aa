//! The gate simulated on hosts whose noise is known: per-request latencies
//! drawn as a seeded model of the reference engine's (lognormal, AR(1)
//! within a block, drift per block or common in time, bursts, a heavy
//! tail), judged as `compare` judges them, fixed-size or as an adaptive run
//! looks, beside the known-variance oracle. Fixed seeds: deterministic.
//!
//! Used by this module's tests and by the calibration tables' example
//! (`examples/gate_calibration.rs`); built only for tests and with the
//! `calibration` feature.

use crate::stats::sequential::side_level;
use crate::stats::special::normal_quantile;
use crate::stats::{Direction, GateOutcome, Xoshiro256, delta_percent};

use super::{
    BlockMean, BoundScale, Clustered, DesignSpread, DriftFloor, Evidence, EvidenceInput,
    MIN_TRIMMED_BLOCKS, Resampling, Spending, bootstrap_deltas_by, combine, design_requests,
    evidence, paired_point_delta_by, pass_design_share,
};
use crate::stats::percentile::percentile_sorted;

// ---- the simulated hosts ----

/// Per-request latencies as seen on this machine's reference engine, in a
/// form a simulation can vary: lognormal around 1000 ms with a per-request CV
/// `cv`, AR(1) correlation `phi` between consecutive requests of a block,
/// and a drift per block: shared by both sides in an interleaved design,
/// independent per side when blocks are separate passes.
#[derive(Clone, Copy)]
pub struct Sim {
    pub blocks: usize,
    pub per_block: usize,
    pub cv: f64,
    pub phi: f64,
    pub drift_sd: f64,
    /// True: block k of both sides shares its drift (interleaved).
    pub shared: bool,
    /// SD of a per-request log factor shared by request j of block k on both
    /// sides (the same prompt: its length, its turn, its cache hit).
    pub position_sd: f64,
    /// A drift common to both sides in time (the host's load, as the
    /// engine's journals show it): AR(1) over the request slots in the order
    /// the schedule runs them, (correlation per slot, stationary SD).
    pub time_drift: (f64, f64),
    /// How the two sides of a block pair take turns.
    pub order: Order,
    /// A slow request: the share of requests slowed, each on its own, and
    /// by what factor (a heavy tail).
    pub slow: (f64, f64),
    /// The host's bursts, common to both sides in time: per request slot,
    /// the chance one begins, the chance it ends, and the factor it slows
    /// every request by meanwhile (the engine's journals: runs of 10–15
    /// requests a side at 1.4–1.8 × the TTFT around them).
    pub bursts: (f64, f64, f64),
    /// How the paired designs combine their blocks (`design::Method::block_mean`).
    pub block_mean: BlockMean,
}

/// The order of a block pair's requests in time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Order {
    /// One side's whole block, then the other's (`interleave::pair`'s A B,
    /// B A by block).
    Blocks,
    /// Request j of both sides back to back, the first of the two flipping
    /// with j as the blocks' does with k (A B B A within the block).
    Requests,
}

pub struct Draw {
    pub b: Vec<f64>,
    pub bc: Vec<u32>,
    pub c: Vec<f64>,
    pub cc: Vec<u32>,
}

pub fn normal(r: &mut Xoshiro256) -> f64 {
    let u1 = 1.0 - r.next_f64();
    let u2 = r.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl Sim {
    /// `shift`: the candidate's true change in percent (its median is ×(1 + shift/100)).
    pub fn draw(&self, shift: f64, r: &mut Xoshiro256) -> Draw {
        let (mut b, mut bc, mut c, mut cc) = (vec![], vec![], vec![], vec![]);
        let factor = (1.0 + shift / 100.0).ln();
        let time = self.time_drift_series(r);
        for k in 0..self.blocks {
            let common = normal(r) * self.drift_sd;
            // Drawn only when used, so the other simulations' streams stay as they were.
            let position: Vec<f64> = if self.position_sd > 0.0 {
                (0..self.per_block)
                    .map(|_| normal(r) * self.position_sd)
                    .collect()
            } else {
                vec![0.0; self.per_block]
            };
            let sides = [(0.0, &mut b, &mut bc), (factor, &mut c, &mut cc)];
            for (s, (side, out, cl)) in sides.into_iter().enumerate() {
                let drift = if self.shared {
                    common
                } else {
                    normal(r) * self.drift_sd
                };
                let mut e = normal(r);
                for (j, pos) in position.iter().enumerate() {
                    let at = time.get(self.slot(k, s, j)).copied().unwrap_or(0.0);
                    let slow = self.slow_factor(r);
                    out.push(1000.0 * (side + drift + pos + at + slow + self.cv * e).exp());
                    cl.push(k as u32);
                    e = self.phi * e + (1.0 - self.phi * self.phi).sqrt() * normal(r);
                }
            }
        }
        Draw { b, bc, c, cc }
    }

    /// The common drift at every request slot; empty without one (drawn
    /// only when used, so the other simulations' streams stay as they were).
    fn time_drift_series(&self, r: &mut Xoshiro256) -> Vec<f64> {
        let (rho, sd) = self.time_drift;
        let (enter, leave, factor) = self.bursts;
        if sd <= 0.0 && enter <= 0.0 {
            return Vec::new();
        }
        let mut x = normal(r) * sd;
        let mut burst = false;
        (0..self.blocks * 2 * self.per_block)
            .map(|_| {
                let now = x + if burst { factor.ln() } else { 0.0 };
                x = rho * x + (1.0 - rho * rho).sqrt() * sd * normal(r);
                if enter > 0.0 {
                    burst = r.next_f64() < if burst { 1.0 - leave } else { enter };
                }
                now
            })
            .collect()
    }

    /// The time slot of request `j` of block `k` on side `s` (0 baseline):
    /// block `k`'s pair runs baseline first for even `k`.
    pub fn slot(&self, k: usize, s: usize, j: usize) -> usize {
        let w = self.per_block;
        let first = (s == 0) == k.is_multiple_of(2);
        match self.order {
            Order::Blocks => k * 2 * w + if first { j } else { w + j },
            Order::Requests => k * 2 * w + 2 * j + usize::from(first != j.is_multiple_of(2)),
        }
    }

    /// A slow request's log factor, or 0 (drawn only when used).
    fn slow_factor(&self, r: &mut Xoshiro256) -> f64 {
        let (share, factor) = self.slow;
        if share > 0.0 && r.next_f64() < share {
            factor.ln()
        } else {
            0.0
        }
    }
}

impl Draw {
    /// The first `n` requests of each side, as a run that stopped there saw them.
    pub fn prefix(&self, n: usize) -> Draw {
        Draw {
            b: self.b[..n].to_vec(),
            bc: self.bc[..n].to_vec(),
            c: self.c[..n].to_vec(),
            cc: self.cc[..n].to_vec(),
        }
    }
}

/// Reference-engine-like noise: CV 10 %, consecutive requests correlated
/// 0.5, drift 6 % per block (the ±12 % run-to-run range seen here).
pub const INTERLEAVED: Sim = Sim {
    blocks: 8,
    per_block: 4,
    cv: 0.10,
    phi: 0.5,
    drift_sd: 0.06,
    shared: true,
    position_sd: 0.0,
    time_drift: (0.0, 0.0),
    order: Order::Blocks,
    slow: (0.0, 1.0),
    bursts: (0.0, 1.0, 1.0),
    block_mean: BlockMean::Mean,
};

/// A quiet host in blocks of one request: per-request
/// noise 0.5 % a side, the engine's AR(1) drift at SD 2 %, the trimmed mean.
pub const QUIET: Sim = Sim {
    cv: 0.005,
    phi: 0.0,
    drift_sd: 0.0,
    time_drift: (0.9, 0.02),
    per_block: 1,
    block_mean: BlockMean::Trimmed,
    ..INTERLEAVED
};

/// A middling host: CV 2 %, a common drift of SD 3 %;
/// its oracle is 6 requests, as the reference engine's quieter trials.
pub const MIDDLING: Sim = Sim {
    cv: 0.02,
    time_drift: (0.9, 0.03),
    ..QUIET
};

/// [`MIDDLING`] with bursts common to both sides in time (1 % a slot to
/// begin, 4 % to end, ×1.5 meanwhile).
pub const BURSTS: Sim = Sim {
    bursts: (0.01, 0.04, 1.5),
    ..MIDDLING
};

/// [`MIDDLING`] with a heavy tail: 5 % of requests twice as slow, each on
/// its own.
pub const HEAVY_TAIL: Sim = Sim {
    slow: (0.05, 2.0),
    ..MIDDLING
};

/// The reference engine's fit in blocks of one request:
/// noise 6 % a side, a drift common in time of SD 10 %, the mean.
pub const ENGINE_FIT: Sim = Sim {
    cv: 0.06,
    time_drift: (0.9, 0.10),
    block_mean: BlockMean::Mean,
    ..QUIET
};

/// [`ENGINE_FIT`] with the trimmed mean (the default).
pub const ENGINE_FIT_TRIMMED: Sim = Sim {
    block_mean: BlockMean::Trimmed,
    ..ENGINE_FIT
};

// ---- judging a draw ----

/// Where an outcome is counted in [pass, fail, inconclusive].
pub fn slot(outcome: GateOutcome) -> usize {
    match outcome {
        GateOutcome::Pass => 0,
        GateOutcome::Fail => 1,
        GateOutcome::Inconclusive => 2,
    }
}

pub struct Judged {
    pub outcome: GateOutcome,
    pub ev: Evidence,
    pub ci: (f64, f64),
}

pub fn judge(
    d: &Draw,
    resampling: Resampling,
    alpha: (f64, f64),
    floor: Option<&DriftFloor>,
    seed: u64,
) -> Judged {
    judge_on(d, resampling, alpha, floor, seed, BoundScale::Log)
}

pub fn judge_on(
    d: &Draw,
    resampling: Resampling,
    alpha: (f64, f64),
    floor: Option<&DriftFloor>,
    seed: u64,
    scale: BoundScale,
) -> Judged {
    judge_by(d, (resampling, BlockMean::Mean), alpha, floor, seed, scale)
}

/// [`judge_on`] with the paired designs' blocks combined by `block_mean`.
pub fn judge_by(
    d: &Draw,
    (resampling, block_mean): (Resampling, BlockMean),
    alpha: (f64, f64),
    floor: Option<&DriftFloor>,
    seed: u64,
    scale: BoundScale,
) -> Judged {
    let (bs, cs) = (
        Clustered {
            values: &d.b,
            clusters: Some(&d.bc),
        },
        Clustered {
            values: &d.c,
            clusters: Some(&d.cc),
        },
    );
    let deltas = bootstrap_deltas_by(bs, cs, 0.5, (resampling, block_mean), 500, seed).unwrap();
    let point = match resampling {
        Resampling::Paired | Resampling::PairedRequests => {
            paired_point_delta_by(bs, cs, 0.5, block_mean).unwrap()
        }
        _ => delta_percent(
            crate::stats::median(&d.b).unwrap(),
            crate::stats::median(&d.c).unwrap(),
        )
        .unwrap(),
    };
    let ev = evidence(
        &deltas,
        &EvidenceInput {
            direction: Direction::LowerIsBetter,
            margin_percent: 5.0,
            point_delta_percent: point,
            alpha_pass: alpha.0,
            alpha_fail: alpha.1,
            resampling,
            drift_floor: floor,
            n_eff: d.b.len() as f64,
            units: match resampling {
                Resampling::Independent => d.b.len().min(d.c.len()),
                Resampling::Paired | Resampling::PairedRequests => {
                    block_mean.units(d.bc.last().map_or(1, |&k| k as usize + 1))
                }
                Resampling::Clustered => d.bc.last().map_or(1, |&k| k as usize + 1),
            },
            scale,
        },
    )
    .unwrap();
    Judged {
        outcome: ev.outcome,
        ci: (
            percentile_sorted(&deltas, 0.025).unwrap(),
            percentile_sorted(&deltas, 0.975).unwrap(),
        ),
        ev,
    }
}

// ---- adaptive runs ----

/// A look's (pass, fail) levels with exact group-sequential boundaries over
/// the looks' fractions, the pass side over its own (`pass_fractions`).
pub fn alpha_levels_by_side(
    alpha: f64,
    m: usize,
    pass_fractions: &[f64],
    fail_fractions: &[f64],
    spending: Spending,
) -> (f64, f64) {
    (
        side_level(alpha, 1.0, pass_fractions, spending),
        side_level(alpha, m.max(1) as f64, fail_fractions, spending),
    )
}

/// What plans an adaptive run's looks in [`planned_run_by`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looks {
    /// The rounds the budget allows.
    Budget,
    /// The fewer of those and the rounds the design needs, both sides alike.
    Design,
    /// As `Design` for the fail side; the pass side by its own need, the
    /// share [`pass_design_share`] of the fail side's.
    DesignBySide,
    /// As `DesignBySide`, each look planned by the previous look's spread
    /// (not `qualify`'s rule: a first look cannot spend by the design).
    DesignBySideFromSecondLook,
    /// As `DesignBySide`, the design planned from the request pairs' robust
    /// SD (1.4826 × MAD of their log ratios) instead of the estimate's
    /// standard error: a spread the outliers that have come do not move
    /// (measured, not used).
    Robust,
    /// As `Robust`, and the design never ends before the trimmed mean's
    /// [`MIN_TRIMMED_BLOCKS`] (not kept either).
    RobustTrimmed,
    /// As `DesignBySide`, the design planned from the spread the probe's
    /// bounds show at the fixed-size levels ([`DesignSpread::Bounds`],
    /// `qualify`'s default), where it exceeds the standard error.
    /// `DesignBySide` plans from the standard error.
    Bounds,
}

/// Look `look`'s fraction of `rounds`, as `design::information_fraction`
/// makes it: at least the last of `history` plus an even share of what is
/// left over the looks left, 1 from the look that reaches them.
pub fn next_fraction(look: usize, rounds: usize, history: &[f64]) -> f64 {
    if look >= rounds {
        return 1.0;
    }
    let before = history.last().copied().unwrap_or(0.0);
    let even = before + (1.0 - before) / (rounds + 1 - look) as f64;
    (look as f64 / rounds as f64).max(even)
}

/// The policy's default spending.
pub const OBF: Spending = Spending::OBrienFleming;

/// Blocks per cell before the design plans (`design::DESIGN_FIRST_BLOCKS`).
pub const DESIGN_FIRST_BLOCKS: usize = 4;

/// Blocks per cell before the design plans in the rules `qualify` does not
/// use (round 3 in rounds of a pair of blocks), so their tables stay
/// reproducible.
pub const FIRST_BLOCKS_AT_ROUND_THREE: usize = 6;

/// The standard error of a draw's mean log ratio (percent) were its
/// request pairs' spread their robust SD: 1.4826 × the MAD of the pairs'
/// log ratios, over √n.
pub fn robust_standard_error_percent(d: &Draw) -> Option<f64> {
    let logs: Vec<f64> = d.b.iter().zip(&d.c).map(|(x, y)| (y / x).ln()).collect();
    let center = crate::stats::median(&logs)?;
    let dev: Vec<f64> = logs.iter().map(|x| (x - center).abs()).collect();
    Some(100.0 * 1.4826 * crate::stats::median(&dev)? / (logs.len() as f64).sqrt())
}

/// How a simulated adaptive run looks and spends.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// The rounds the budget allows.
    pub clock: usize,
    /// Requests per side per round (at least two blocks).
    pub round: usize,
    pub spending: Spending,
    pub looks: Looks,
    /// Blocks per cell before the design plans ([`DESIGN_FIRST_BLOCKS`];
    /// [`FIRST_BLOCKS_AT_ROUND_THREE`] in [`Rule::rounds`]).
    pub first: usize,
}

impl Rule {
    /// `clock` rounds of `round` requests: looks by the design planned from
    /// the standard error from round 3 in rounds of 2 blocks, the pass side
    /// by its own, O'Brien–Fleming (the rule of the tables of
    /// `docs/gate-calibration-results.md`). `qualify` plans by
    /// [`Looks::Bounds`] from [`DESIGN_FIRST_BLOCKS`].
    pub fn rounds(clock: usize, round: usize) -> Rule {
        Rule {
            clock,
            round,
            spending: OBF,
            looks: Looks::DesignBySide,
            first: FIRST_BLOCKS_AT_ROUND_THREE,
        }
    }
}

/// An adaptive run as `qualify --adaptive` makes it, by `rule`: a look every
/// `rule.round` requests per side, `rule.clock` such rounds, each side
/// spending its error by `rule.spending`, with its looks' fractions
/// re-planned from the data as they are: look k at k over the fewer of the
/// rounds the budget allows (`clock`) and, looking by the design, the
/// rounds the design needs (k times the most any cell's `design_requests`
/// exceeds its requests, from `rule.first` blocks on: the rule of
/// `design::design_growth` and `design::design_rounds`), with exact
/// boundaries over every look's fraction. It stops at the first decided
/// look or the look at fraction 1. Returns [pass, fail, inconclusive] and
/// the mean requests per side per cell spent (ASN).
pub fn planned_run_by(
    sim: Sim,
    shifts: [f64; 3],
    (alpha, m): (f64, usize),
    rule: Rule,
    trials: usize,
    seed: u64,
) -> ([usize; 3], f64) {
    let run = PlannedRun::new(sim, (alpha, m), rule);
    let mut r = Xoshiro256::new(seed);
    let mut counts = [0usize; 3];
    let mut spent = 0usize;
    for trial in 0..trials {
        let draws: Vec<Draw> = shifts.iter().map(|&s| run.sim.draw(s, &mut r)).collect();
        let (outcome, used) = run.trial(trial, &draws);
        spent += used * run.per_round;
        counts[slot(outcome)] += 1;
    }
    (counts, spent as f64 / trials as f64)
}

/// What [`planned_run_by`] holds fixed over its trials.
struct PlannedRun {
    /// The host, drawn for every round the clock allows.
    sim: Sim,
    alpha: f64,
    m: usize,
    rule: Rule,
    blocks_per_round: usize,
    per_round: usize,
    /// Looks by the design's information (else by the budget alone).
    by_design: bool,
    /// The design planned from this look's spread (else the previous look's).
    plan_now: bool,
    /// The pass side's share of the design's rounds.
    pass_share: f64,
}

impl PlannedRun {
    fn new(sim: Sim, (alpha, m): (f64, usize), rule: Rule) -> PlannedRun {
        let Rule {
            clock,
            round,
            looks,
            ..
        } = rule;
        let blocks_per_round = (round / sim.per_block.max(1)).max(2);
        let pass_share = match looks {
            Looks::DesignBySide
            | Looks::DesignBySideFromSecondLook
            | Looks::Robust
            | Looks::RobustTrimmed
            | Looks::Bounds => pass_design_share(alpha, m),
            _ => 1.0,
        };
        let sim = Sim {
            blocks: clock * blocks_per_round,
            ..sim
        };
        PlannedRun {
            per_round: blocks_per_round * sim.per_block,
            sim,
            alpha,
            m,
            rule,
            blocks_per_round,
            by_design: looks != Looks::Budget,
            plan_now: looks != Looks::DesignBySideFromSecondLook,
            pass_share,
        }
    }

    /// Every cell's evidence at look `look` of trial `trial` (its first
    /// `parts` requests), at `levels`; `salt` varies the bootstrap seeds.
    fn judge(
        &self,
        parts: &[Draw],
        (trial, look): (usize, usize),
        levels: (f64, f64),
        salt: u64,
    ) -> Vec<Evidence> {
        parts
            .iter()
            .enumerate()
            .map(|(c, part)| {
                let seed = ((trial * self.rule.clock + look) * 3 + c) as u64 ^ salt;
                let design = (Resampling::PairedRequests, self.sim.block_mean);
                judge_by(part, design, levels, None, seed, BoundScale::Log).ev
            })
            .collect()
    }

    /// As `design::design_rounds`: the rounds the design needs, planned from
    /// `judged` (the evidence of `parts`, `n` requests a side, at `look`)
    /// from `rule.first` blocks on; `before` when it cannot plan.
    fn plan_from(
        &self,
        judged: &[Evidence],
        (parts, n): (&[Draw], usize),
        look: usize,
        before: Option<usize>,
    ) -> Option<usize> {
        let (sim, looks) = (self.sim, self.rule.looks);
        if !self.by_design || look * self.blocks_per_round < self.rule.first {
            return before;
        }
        let robust = matches!(looks, Looks::Robust | Looks::RobustTrimmed);
        let growth = judged
            .iter()
            .zip(parts)
            .try_fold(0.0f64, |most, (e, part)| {
                let se = if robust {
                    robust_standard_error_percent(part)?
                } else if looks == Looks::Bounds {
                    let units = sim.block_mean.units(n / sim.per_block.max(1));
                    DesignSpread::Bounds.of(e, units)
                } else {
                    e.standard_error_percent
                };
                let need = design_requests(se, n, 5.0, self.alpha / self.m as f64)?;
                Some(most.max(need as f64 / n as f64))
            });
        growth
            .map(|g| ((g * look as f64).ceil() as usize).max(1))
            .or(before)
    }

    /// One trial on `draws` (each cell's requests): its outcome and the
    /// look it stopped at.
    fn trial(&self, trial: usize, draws: &[Draw]) -> (GateOutcome, usize) {
        let (alpha, m) = (self.alpha, self.m);
        let Rule {
            clock,
            spending,
            looks,
            ..
        } = self.rule;
        let (mut outcome, mut used) = (GateOutcome::Inconclusive, clock);
        let (mut history, mut pass_history) = (Vec::new(), Vec::new());
        let mut design_rounds: Option<usize> = None;
        for look in 1..=clock {
            let n = look * self.per_round;
            let parts: Vec<Draw> = draws.iter().map(|d| d.prefix(n)).collect();
            // With `plan_now`, the design plans from this look's spread (a
            // probe at the full levels: the spread does not depend on
            // them), else from the previous look's.
            if self.plan_now {
                let probe = self.judge(&parts, (trial, look), (alpha, alpha / m as f64), 1 << 40);
                design_rounds = self.plan_from(&probe, (&parts, n), look, design_rounds);
            }
            let floor = if looks == Looks::RobustTrimmed {
                MIN_TRIMMED_BLOCKS.div_ceil(self.blocks_per_round)
            } else {
                0
            };
            let rounds = clock.min(design_rounds.map_or(usize::MAX, |d| d.max(floor)));
            let t = next_fraction(look, rounds, &history);
            history.push(t);
            let pass_rounds = design_rounds.map_or(clock, |d| {
                clock.min(
                    ((d as f64 * self.pass_share).ceil() as usize)
                        .max(1)
                        .max(floor),
                )
            });
            pass_history.push(next_fraction(look, pass_rounds, &pass_history));
            let levels = alpha_levels_by_side(alpha, m, &pass_history, &history, spending);
            if 1.0 - levels.1 == 1.0 {
                // A look with next to no error to spend decides nothing.
                continue;
            }
            let judged = self.judge(&parts, (trial, look), levels, 0);
            outcome = combine(judged.iter().map(|e| e.outcome));
            if outcome != GateOutcome::Inconclusive || t >= 1.0 {
                used = look;
                break;
            }
            if !self.plan_now {
                design_rounds = self.plan_from(&judged, (&parts, n), look, design_rounds);
            }
        }
        (outcome, used)
    }
}

// ---- the calibration tables' cases ----

/// A one-look z test's requests per side for a median whose per-request
/// log ratio has variance `var`: π/2 · var · z² / δ².
pub fn oracle_of_variance(var: f64, shift: f64, margin: f64, alpha: f64, power: f64) -> f64 {
    let delta = ((1.0 + margin / 100.0) / (1.0 + shift / 100.0)).ln().abs();
    let z = normal_quantile(1.0 - alpha) + normal_quantile(power);
    std::f64::consts::FRAC_PI_2 * var * z * z / (delta * delta)
}

/// The oracle's variance as a report computes it on a run's own data: the
/// squared robust SD (1.4826 × MAD) of the per-request log ratios, pooled
/// over `trials` draws, treated as independent.
pub fn per_request_log_ratio_variance(sim: Sim, trials: usize, seed: u64) -> f64 {
    let mut r = Xoshiro256::new(seed);
    let mut d = Vec::new();
    for _ in 0..trials {
        let draw = sim.draw(0.0, &mut r);
        d.extend(draw.b.iter().zip(&draw.c).map(|(b, c)| (c / b).ln()));
    }
    let m = crate::stats::median(&d).unwrap();
    let dev: Vec<f64> = d.iter().map(|x| (x - m).abs()).collect();
    (1.4826 * crate::stats::median(&dev).unwrap()).powi(2)
}

/// A/A pass and +10 % fail as the blocks-of-one simulations judge them:
/// (case, the three cells' shifts, the outcome it should reach (0 pass, 1
/// fail), the oracle's one-look level and power, the shift it sees). A
/// pass needs all three cells (per-cell power 0.8^(1/3)), a fail the one.
pub type ShiftCase = (&'static str, [f64; 3], usize, f64, f64, f64);

pub fn shift_cases(alpha: f64, m: usize) -> [ShiftCase; 2] {
    [
        ("A/A pass", [0.0; 3], 0, alpha, 0.8f64.powf(1.0 / 3.0), 0.0),
        (
            "+10% fail",
            [10.0, 0.0, 0.0],
            1,
            alpha / m as f64,
            0.8,
            10.0,
        ),
    ]
}

/// One host in rounds of `round` requests per side (`clock` of them),
/// looks by the design with the pass side by its own, at α 0.05 over 3
/// cells: the A/A and +10 % cases (`trials` runs each, seed `seed` + the
/// case's index), printed beside their known-variance oracle under
/// `label`. Returns each case's name, the outcome it should reach, its
/// counts and ASN.
pub fn cases_in_rounds(
    label: &str,
    sim: Sim,
    rule: Rule,
    (trials, seed): (usize, u64),
) -> Vec<(&'static str, usize, [usize; 3], f64)> {
    let (alpha, m) = (0.05, 3);
    let var = per_request_log_ratio_variance(Sim { blocks: 96, ..sim }, 50, 4301);
    let round = rule.round;
    shift_cases(alpha, m)
        .into_iter()
        .enumerate()
        .map(|(i, (case, shifts, want, a, power, shift))| {
            let oracle = oracle_of_variance(var, shift, 5.0, a, power);
            let (counts, n) =
                planned_run_by(sim, shifts, (alpha, m), rule, trials, seed + i as u64);
            eprintln!(
                "{label}, rounds of {round} | {case:9} | {counts:?} | ASN {n:5.1} | oracle {oracle:4.1}"
            );
            (case, want, counts, n)
        })
        .collect()
}

/// As [`cases_in_rounds`], a runtime exactly on the margin (+5 % in one
/// cell): its pass, fail and inconclusive counts of `trials`, printed.
pub fn on_the_margin_in_rounds(
    label: &str,
    sim: Sim,
    rule: Rule,
    (trials, seed): (usize, u64),
) -> [usize; 3] {
    let round = rule.round;
    let (counts, n) = planned_run_by(sim, [5.0, 0.0, 0.0], (0.05, 3), rule, trials, seed);
    eprintln!("{label}, rounds of {round} | on the margin [5, 0, 0] | {counts:?} | ASN {n:5.1}");
    counts
}
