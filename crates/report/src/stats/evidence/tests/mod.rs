//! Unit tests, and the simulations that show the gate's error rates: A/A
//! false fails, power against a known shift, interval coverage and whether
//! `requests_to_resolve` resolves. Fixed seeds: deterministic, not timed.
//! The helpers the simulations share are here; each file below holds one
//! kind of question asked of the gate.

use super::resample::quantile_in_place;
use super::simulation::*;
use super::*;
use crate::stats::evidence::Spending;
use crate::stats::{BootstrapConfig, Xoshiro256, percentile};

mod budget;
mod design;
mod exact;
mod fixed;
mod sequential;

// The levels of the looks the simulations compare, as `design::Look::levels`
// computes them (the shipped rule: exact boundaries over measured
// fractions), and the rules measured against it.

/// A look's pass and fail levels from its share of alpha.
fn split(share: f64, m: usize) -> (f64, f64) {
    let share = share.max(f64::MIN_POSITIVE);
    (share, share / m.max(1) as f64)
}

/// The first of `looks` by Bonferroni (a fixed-size run's one look, for one).
fn alpha_levels(alpha: f64, m: usize, looks: usize) -> (f64, f64) {
    alpha_levels_at(alpha, m, 1, looks, Spending::Bonferroni)
}

/// Look `look` of `looks` (clamped to them) at its share of the planned
/// looks: what spending has spent by it, and by the look before it.
fn spent_by_shares(alpha: f64, look: usize, looks: usize, spending: Spending) -> (f64, f64) {
    let looks = looks.max(1);
    let look = look.clamp(1, looks);
    let share = |k: usize| spending.spent(alpha, k as f64 / looks as f64);
    (share(look), share(look - 1))
}

/// Look `look` of `looks` at its share of the planned looks (the union bound).
fn alpha_levels_at(
    alpha: f64,
    m: usize,
    look: usize,
    looks: usize,
    spending: Spending,
) -> (f64, f64) {
    let (until, before) = spent_by_shares(alpha, look, looks, spending);
    split(until - before, m)
}

/// [`alpha_levels_at`] closing the run before its last look: all that is left.
fn alpha_levels_closing(
    alpha: f64,
    m: usize,
    look: usize,
    looks: usize,
    spending: Spending,
) -> (f64, f64) {
    let (_, before) = spent_by_shares(alpha, look, looks, spending);
    split(alpha - before, m)
}

/// The last of looks at `fractions`, exact group-sequential boundaries.
fn alpha_levels_sequential(
    alpha: f64,
    m: usize,
    fractions: &[f64],
    spending: Spending,
) -> (f64, f64) {
    alpha_levels_by_side(alpha, m, fractions, fractions, spending)
}

/// A look at information fraction `now` after `before`, its share its
/// level (the union bound over looks at measured fractions: a rule not
/// used, measured against the exact boundaries).
fn alpha_levels_between(
    alpha: f64,
    m: usize,
    before: f64,
    now: f64,
    spending: Spending,
) -> (f64, f64) {
    let before = before.clamp(0.0, 1.0);
    let until = if now >= 1.0 {
        alpha
    } else {
        spending.spent(alpha, now.max(before))
    };
    split(until - spending.spent(alpha, before), m)
}

/// Runs of a simulation case: `ci` in the test suite, `table` (the count the
/// docs' tables were made with) when `INFERGATE_SIM_TABLES=1`, by hand:
/// `INFERGATE_SIM_TABLES=1 cargo test --release -p infergate-report --lib NAME -- --nocapture`.
/// The assertions are the same at both counts, as shares of the runs; the
/// seeds too, so the table's runs begin with the suite's. docs/testing.md
/// says what each count resolves.
fn runs(ci: usize, table: usize) -> usize {
    if std::env::var_os("INFERGATE_SIM_TABLES").is_some_and(|v| v == "1") {
        table
    } else {
        ci
    }
}

/// At most 5 % of `trials`: a wrong call's bound in these simulations.
fn at_most_5_percent(count: usize, trials: usize) -> bool {
    count * 100 <= trials * 5
}

fn inp(direction: Direction, point: f64, drift: Option<&DriftFloor>) -> EvidenceInput<'_> {
    EvidenceInput {
        direction,
        margin_percent: 5.0,
        point_delta_percent: point,
        alpha_pass: 0.05,
        alpha_fail: 0.05,
        resampling: Resampling::Independent,
        drift_floor: drift,
        n_eff: 20.0,
        units: 100_000,
        // The unit tests below check the percent formula's numbers; the log
        // scale has its own tests.
        scale: BoundScale::Percent,
    }
}

/// A distribution of deltas: `centre ± spread`, uniform, 2001 points.
fn dist(centre: f64, spread: f64) -> Vec<f64> {
    (0..=2000)
        .map(|i| centre + spread * (i as f64 / 1000.0 - 1.0))
        .collect()
}

/// Three cells gate together (m = 3): a family-wise false fail is any cell failing.
fn family(sim: Sim, shift: f64, resampling: Resampling, trials: usize, seed: u64) -> [usize; 3] {
    let mut r = Xoshiro256::new(seed);
    let alpha = alpha_levels(0.05, 3, 1);
    let mut counts = [0usize; 3]; // pass, fail, inconclusive
    for t in 0..trials {
        let outcomes: Vec<GateOutcome> = (0..3)
            .map(|cell| {
                let d = sim.draw(shift, &mut r);
                judge(&d, resampling, alpha, None, (t * 3 + cell) as u64).outcome
            })
            .collect();
        counts[slot(combine(outcomes))] += 1;
    }
    counts
}

fn coverage(sim: Sim, shift: f64, resampling: Resampling, trials: usize, seed: u64) -> f64 {
    let mut r = Xoshiro256::new(seed);
    let covered = (0..trials)
        .filter(|&t| {
            let d = sim.draw(shift, &mut r);
            let (lo, hi) = judge(&d, resampling, (0.05, 0.05), None, t as u64).ci;
            lo <= shift && shift <= hi
        })
        .count();
    covered as f64 / trials as f64
}

/// An adaptive run as `qualify --adaptive` makes it: three cells, a look
/// after every round of two blocks per side, up to `looks` rounds; stop at
/// the first look whose family outcome resolves. `shifts[c]` is cell c's
/// true change. Returns [pass, fail, inconclusive] and the mean requests per
/// side per cell spent.
fn adaptive(
    shifts: [f64; 3],
    spending: Spending,
    looks: usize,
    trials: usize,
    seed: u64,
) -> ([usize; 3], f64) {
    adaptive_until(shifts, spending, looks, looks, false, trials, seed)
}

/// [`adaptive`] stopped by a clock after look `stop_at` of `looks`; with
/// `closing`, that look spends the error the earlier looks left.
fn adaptive_until(
    shifts: [f64; 3],
    spending: Spending,
    looks: usize,
    stop_at: usize,
    closing: bool,
    trials: usize,
    seed: u64,
) -> ([usize; 3], f64) {
    // The reference engine's c=1 cell: per-request CV about 6 %.
    let sim = Sim {
        cv: 0.06,
        ..INTERLEAVED
    };
    let last = stop_at.min(looks);
    let levels = |look: usize| {
        if closing && look == last && last < looks {
            alpha_levels_closing(0.05, 3, look, looks, spending)
        } else {
            alpha_levels_at(0.05, 3, look, looks, spending)
        }
    };
    sequential_run(
        sim,
        shifts,
        &levels,
        (looks, last),
        Resampling::Paired,
        trials,
        seed,
    )
}

/// A look's (pass, fail) levels by its number.
type Levels<'a> = &'a dyn Fn(usize) -> (f64, f64);

/// A sequential run of three cells, `planned` looks drawn, that the budget
/// ends after `last`: look `k` tests at `levels(k)`, the run stops at the
/// first decided look. Returns [pass, fail, inconclusive] and the mean requests per side
/// per cell spent (ASN).
fn sequential_run(
    sim: Sim,
    shifts: [f64; 3],
    levels: Levels,
    (planned, last): (usize, usize),
    resampling: Resampling,
    trials: usize,
    seed: u64,
) -> ([usize; 3], f64) {
    const BLOCKS_PER_ROUND: usize = 2;
    // Drawn for the planned looks, so a run stopped early sees the same data.
    let sim = Sim {
        blocks: planned * BLOCKS_PER_ROUND,
        ..sim
    };
    let per_round = BLOCKS_PER_ROUND * sim.per_block;
    let mut r = Xoshiro256::new(seed);
    let mut counts = [0usize; 3];
    let mut spent = 0usize;
    for t in 0..trials {
        let draws: Vec<Draw> = shifts.iter().map(|&s| sim.draw(s, &mut r)).collect();
        let mut outcome = GateOutcome::Inconclusive;
        let mut used = last;
        for look in 1..=last {
            let alpha = levels(look);
            if 1.0 - alpha.1 == 1.0 {
                continue;
            }
            let n = look * per_round;
            let outcomes: Vec<GateOutcome> = draws
                .iter()
                .enumerate()
                .map(|(c, d)| {
                    let part = d.prefix(n);
                    let seed = ((t * planned + look) * 3 + c) as u64;
                    judge_on(&part, resampling, alpha, None, seed, BoundScale::Log).outcome
                })
                .collect();
            outcome = combine(outcomes);
            if outcome != GateOutcome::Inconclusive {
                used = look;
                break;
            }
        }
        spent += used * per_round;
        counts[slot(outcome)] += 1;
    }
    (counts, spent as f64 / trials as f64)
}

/// The known-variance oracle: requests per side per cell a fixed-size z
/// test on the per-request log metric needs, with the median's efficiency
/// (π/2), the variance inflation of AR(1) noise over a block of
/// `per_block`, requests paired (the shared drift cancels), to clear the
/// margin at level `alpha` with per-cell power `power` when the true
/// change is `shift` percent. Nothing an estimator that must learn the
/// variance from the data can beat.
fn known_variance_oracle(sim: Sim, shift: f64, margin: f64, alpha: f64, power: f64) -> f64 {
    let k = sim.per_block as f64;
    let inflation = 1.0
        + 2.0
            * (1..sim.per_block)
                .map(|j| (1.0 - j as f64 / k) * sim.phi.powi(j as i32))
                .sum::<f64>();
    oracle_of_variance(
        2.0 * sim.cv * sim.cv * inflation,
        shift,
        margin,
        alpha,
        power,
    )
}

/// One simulated case: its name, the three cells' shifts, the outcome it
/// should reach (0 pass, 1 fail), and the known-variance oracle for it.
type OracleCase = (&'static str, [f64; 3], usize, f64);

/// A/A pass and +10 % fail with their oracles at the fixed-size levels:
/// a pass needs all three cells (per-cell power 0.8^(1/3)), a fail the one.
fn oracle_cases(sim: Sim, alpha: f64, m: usize) -> [OracleCase; 2] {
    [
        (
            "A/A pass",
            [0.0; 3],
            0,
            known_variance_oracle(sim, 0.0, 5.0, alpha, 0.8f64.powf(1.0 / 3.0)),
        ),
        (
            "+10% fail",
            [10.0, 0.0, 0.0],
            1,
            known_variance_oracle(sim, 10.0, 5.0, alpha / m as f64, 0.8),
        ),
    ]
}

/// Look k of a run the budget ends after `clock` rounds, at fraction k / clock.
fn by_fraction(
    alpha: f64,
    m: usize,
    clock: usize,
    spending: Spending,
) -> impl Fn(usize) -> (f64, f64) {
    move |k| {
        alpha_levels_between(
            alpha,
            m,
            (k - 1) as f64 / clock as f64,
            k as f64 / clock as f64,
            spending,
        )
    }
}

/// Look k of a run the budget ends after `clock` rounds, at fraction k /
/// clock, with exact group-sequential boundaries over the looks before it
/// (computed once per look, not per trial).
fn exact_by_fraction(
    alpha: f64,
    m: usize,
    clock: usize,
    spending: Spending,
) -> impl Fn(usize) -> (f64, f64) {
    let fractions: Vec<f64> = (1..=clock).map(|k| k as f64 / clock as f64).collect();
    let levels: Vec<(f64, f64)> = (1..=clock)
        .map(|k| alpha_levels_sequential(alpha, m, &fractions[..k], spending))
        .collect();
    move |k| levels[k - 1]
}

/// [`planned_run_by`] with `looks`, a look every 8 requests per side and
/// `clock` such rounds, O'Brien–Fleming, the design planned from round 3.
fn planned_run(
    sim: Sim,
    shifts: [f64; 3],
    (alpha, m): (f64, usize),
    clock: usize,
    looks: Looks,
    trials: usize,
    seed: u64,
) -> ([usize; 3], f64) {
    // A look every 8 requests per side whatever the window (two blocks of
    // 4, as the rounds of `qualify`'s default window).
    let rule = Rule {
        looks,
        ..Rule::rounds(clock, 8)
    };
    planned_run_by(sim, shifts, (alpha, m), rule, trials, seed)
}

/// The gate's own two-sided 95 % interval (each bound at 2.5 %, the t
/// widening of few blocks included) over `trials` fixed-size runs: how
/// often it holds the true change.
fn gate_coverage(sim: Sim, shift: f64, trials: usize, seed: u64) -> f64 {
    let mut r = Xoshiro256::new(seed);
    let covered = (0..trials)
        .filter(|&t| {
            let d = sim.draw(shift, &mut r);
            let design = (Resampling::PairedRequests, sim.block_mean);
            let ev = judge_by(&d, design, (0.025, 0.025), None, t as u64, BoundScale::Log).ev;
            ev.lower_bound_percent <= shift && shift <= ev.upper_bound_percent
        })
        .count();
    covered as f64 / trials as f64
}
