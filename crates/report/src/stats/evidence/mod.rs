//! Evidence for gates: a bootstrap that resamples what actually varies
//! (requests, and the clusters they came in), one-sided confidence bounds
//! against a margin, a drift floor where the data cannot see drift, the
//! three-way outcome, and how many requests would decide an undecided one.
//!
//! Everything is in *worse-change* percent: the change of a metric in its
//! worse direction (latency as is, throughput negated), so "≤ T" always means
//! "no more than T percent worse".
//!
//! Here the evidence of one pair and the gate over all of them; how the
//! bootstrap resamples each design in `resample`, and how many requests
//! the oracles and the design need in `sizing`, and whether a pair's
//! bounds inform a reader at all in `informative`. The gate simulated on
//! hosts of known noise, for the tests and the calibration tables, is in
//! `simulation` (tests and the `calibration` feature only).

use serde::{Deserialize, Serialize};

use super::percentile::percentile_sorted;
use super::special::{chi_square_quantile_approx, normal_cdf, normal_quantile, t_quantile};
use super::{Direction, GateOutcome};

mod informative;
mod resample;
#[cfg(any(test, feature = "calibration"))]
pub mod simulation;
mod sizing;

pub use informative::{MAX_INFORMATIVE_RATIO, MIN_UNITS_TO_BOUND, informative};
pub use resample::{
    BlockMean, Clustered, MIN_CLUSTERS, MIN_TRIMMED_BLOCKS, Resampling, TRIM_SHARE,
    bootstrap_deltas, bootstrap_deltas_by, paired_point_delta, paired_point_delta_by,
};
pub use sizing::{
    BLOCKS_PER_ROUND, BlockOracle, DESIGN_INFLATION, DESIGN_POWER, DesignSpread, block_oracle,
    block_oracle_blocks, design_requests, n_eff, oracle_requests, oracles, pass_design_share,
    requests_to_detect, whole_rounds,
};

/// The drift floor: between-run variation the data cannot measure, as the
/// standard deviation (percent) of one pass's statistic around the runtime's
/// long-run value. A delta of two such passes has √2 times that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftFloor {
    pub pass_sd_percent: f64,
    /// Where the number came from: a calibration file and its date, or the
    /// policy's default.
    pub source: String,
}

/// What the evidence says about one gating metric of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub outcome: GateOutcome,
    /// Margin: the tolerated worse change, percent.
    pub margin_percent: f64,
    /// Point change in the worse direction.
    pub worse_change_percent: f64,
    /// One-sided upper bound of the worse change at `1 − alpha_pass`: at or
    /// below the margin means *pass* (confidently no worse than T).
    pub upper_bound_percent: f64,
    /// One-sided lower bound at `1 − alpha_fail`: above the margin means
    /// *fail* (confidently worse than T).
    pub lower_bound_percent: f64,
    pub alpha_pass: f64,
    pub alpha_fail: f64,
    pub resampling: Resampling,
    /// Drift floor folded into both bounds; `None` when the design measures drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_floor: Option<DriftFloor>,
    /// Standard error of the worse change, percent (bootstrap, robust: half the
    /// 15.9–84.1 percentile spread), drift floor included.
    pub standard_error_percent: f64,
    /// A true worse change at least this large fails the gate with
    /// probability ≥ [`POWER`] at this n.
    pub detectable_regression_percent: f64,
    /// Requests per side that would decide an inconclusive outcome with
    /// probability ≥ [`POWER`] if the true change is the point estimate;
    /// `None` when decided, or when no number of requests can (see `unresolvable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_to_resolve: Option<usize>,
    /// Why more requests of this design cannot decide it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolvable: Option<String>,
}

/// Power the sample-size and detectable-effect figures aim for.
pub const POWER: f64 = 0.8;
/// Above this, `requests_to_resolve` is reported as unresolvable.
pub const MAX_REQUESTS_TO_RESOLVE: f64 = 1_000_000.0;

/// How a sequential run shares its error between looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spending {
    /// `alpha / looks` at every look.
    Bonferroni,
    /// Lan–DeMets O'Brien–Fleming-type spending, `α(t) = 2 − 2Φ(z₁₋α/₂ / √t)`
    /// at information fraction `t = look / looks`; look k gets the increment
    /// `α(tₖ) − α(tₖ₋₁)`. Little early, most at the last look, where a
    /// budget-limited run usually decides.
    OBrienFleming,
    /// Lan–DeMets Pocock-type spending, `α(t) = α·ln(1 + (e − 1)·t)`: more
    /// early than O'Brien–Fleming, less at the end.
    Pocock,
}

impl Spending {
    pub fn as_str(self) -> &'static str {
        match self {
            Spending::Bonferroni => "bonferroni",
            Spending::OBrienFleming => "o_brien_fleming",
            Spending::Pocock => "pocock",
        }
    }

    /// Error spent by information fraction `t` in [0, 1].
    pub fn spent(self, alpha: f64, t: f64) -> f64 {
        let t = t.clamp(0.0, 1.0);
        match self {
            Spending::Bonferroni => alpha * t,
            Spending::OBrienFleming if t == 0.0 => 0.0,
            Spending::OBrienFleming => {
                let z = normal_quantile(1.0 - alpha / 2.0);
                (2.0 * (1.0 - normal_cdf(z / t.sqrt()))).min(alpha)
            }
            Spending::Pocock => (alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln()).min(alpha),
        }
    }
}

/// How a look's levels follow from its share of alpha.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundaries {
    /// The share is the level (the union bound over looks), as a look
    /// without measured fractions has it.
    UnionBound,
    /// Exact group-sequential boundaries over every look's information
    /// fraction (`crate::design::Look::levels`).
    GroupSequential,
}

/// The scale the bounds of a ratio are built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundScale {
    /// Distances from the point in percent: with few blocks a latency's
    /// lower bound can cross −100 %.
    Percent,
    /// Distances from the point in the log of the ratio, mapped back to
    /// percent: asymmetric, a latency ratio's bounds stay above −100 % and a
    /// throughput's worse change below +100 %.
    Log,
}

impl BoundScale {
    pub fn as_str(self) -> &'static str {
        match self {
            BoundScale::Percent => "percent",
            BoundScale::Log => "log",
        }
    }
}

/// A worse change (percent) as the log of the ratio it stands for, signed so
/// that worse is positive: latency `ln(1 + w/100)`, throughput (where `w` is
/// the negated change) `−ln(1 − w/100)`. `None` outside the ratio's domain.
pub(super) fn worse_log(direction: Direction, w: f64) -> Option<f64> {
    let l = match direction {
        Direction::LowerIsBetter => (w / 100.0).ln_1p(),
        Direction::HigherIsBetter => -(-w / 100.0).ln_1p(),
    };
    l.is_finite().then_some(l)
}

/// [`worse_log`]'s inverse. A log distance beyond ±700 (a ratio past
/// 1e304, reached by a tiny look's alpha with two blocks) is held there, so
/// the bound stays a number that decides nothing rather than overflowing.
fn worse_from_log(direction: Direction, l: f64) -> f64 {
    let l = l.clamp(-700.0, 700.0);
    match direction {
        Direction::LowerIsBetter => l.exp_m1() * 100.0,
        Direction::HigherIsBetter => -(-l).exp_m1() * 100.0,
    }
}

/// Inputs of [`evidence`] beyond the distribution.
#[derive(Debug, Clone)]
pub struct EvidenceInput<'a> {
    pub direction: Direction,
    pub margin_percent: f64,
    pub point_delta_percent: f64,
    pub alpha_pass: f64,
    pub alpha_fail: f64,
    pub resampling: Resampling,
    pub drift_floor: Option<&'a DriftFloor>,
    /// Requests per side now (n_eff of the two sides).
    pub n_eff: f64,
    /// Independent resampling units behind the distribution: blocks
    /// (paired), the smaller side's cluster count (clustered), requests
    /// (independent). Few units make a bootstrap too narrow; see [`evidence`].
    pub units: usize,
    /// Where the bounds' distances from the point are measured.
    pub scale: BoundScale,
}

/// The outcome of one gating metric from its sorted bootstrap distribution of
/// `delta_percent`.
///
/// Bounds are percentiles of the worse change; a drift floor `s` (pass SD)
/// adds `√2·s` in quadrature to each bound's distance from the point
/// (`w + √(d² + (z·√2·s)²)`), as independent variances add. *fail* if the
/// lower bound > margin, *pass* if the upper bound ≤ margin, else
/// *inconclusive*. `None` when the distribution is empty or an input is not finite.
pub fn evidence(deltas_sorted: &[f64], inp: &EvidenceInput) -> Option<Evidence> {
    let t = inp.margin_percent;
    let w = inp.direction.worse_change_percent(inp.point_delta_percent);
    if deltas_sorted.is_empty() || !(w.is_finite() && t.is_finite() && t >= 0.0) {
        return None;
    }
    let (ap, af) = (inp.alpha_pass, inp.alpha_fail);
    // Each side's level on its own: a pass side that has spent its error
    // (by its own information) is below the fail side's.
    if !(ap > 0.0 && ap < 0.5 && af > 0.0 && af < 0.5) {
        return None;
    }
    // A level a double cannot hold apart from 1 has no bound. An early
    // look's fail level: no evidence yet. A pass side that has spent all
    // its error while the fail side has some: its bound is drawn at the
    // smallest level that has one, and it cannot pass.
    if no_bound_at(af) {
        return None;
    }
    let pass_spent = no_bound_at(ap);
    let ap = if pass_spent { f64::EPSILON } else { ap };
    // Worse-change percentile p of the delta distribution.
    let worse_q = |p: f64| -> Option<f64> {
        match inp.direction {
            Direction::LowerIsBetter => percentile_sorted(deltas_sorted, p),
            Direction::HigherIsBetter => percentile_sorted(deltas_sorted, 1.0 - p).map(|x| -x),
        }
    };
    let drift_sd = inp
        .drift_floor
        .map_or(0.0, |d| std::f64::consts::SQRT_2 * d.pass_sd_percent);
    let (zp, zf) = (normal_quantile(1.0 - ap), normal_quantile(1.0 - af));
    // Few units: a bootstrap's spread is short by √((B−1)/B), and its tails
    // by t_{B−1}/z; both are put back (as a t interval would).
    let b = inp.units.max(2) as f64;
    let df = b - 1.0;
    let shrink = (b / df).sqrt();
    let (kp, kf) = (
        shrink * t_quantile(1.0 - ap, df) / zp,
        shrink * t_quantile(1.0 - af, df) / zf,
    );
    let up = worse_q(1.0 - ap)?;
    let lo = worse_q(af)?;
    let (upper, lower) = widened(inp, w, (up, lo), (kp, kf), (zp, zf), drift_sd)?;
    let se_boot = shrink * (worse_q(0.841_344_746)? - worse_q(0.158_655_254)?).abs() / 2.0;
    let se = (se_boot.powi(2) + drift_sd.powi(2)).sqrt();
    // Extreme values (found by fuzzing `compare`: a sample of 1e300) overflow
    // the bounds; a report cannot carry them, and they decide nothing.
    if ![upper, lower, se].iter().all(|x| x.is_finite()) {
        return None;
    }
    let outcome = if lower > t {
        GateOutcome::Fail
    } else if upper <= t && !pass_spent {
        GateOutcome::Pass
    } else {
        GateOutcome::Inconclusive
    };
    let zb = normal_quantile(POWER);
    let (requests_to_resolve, unresolvable) = match outcome {
        GateOutcome::Inconclusive if pass_spent && w <= t => (None, Some(PASS_SPENT.into())),
        GateOutcome::Inconclusive => {
            // The pilot's standard error is itself an estimate from `df` units: plan
            // with its one-sided 80 % upper bound, so the count is not a coin flip.
            let se_plan = se_boot * (df / chi_square_quantile_approx(0.2, df)).sqrt();
            let za = if w > t { zf } else { zp };
            resolve(w, t, se_plan, drift_sd, za, zb, inp.n_eff)
        }
        _ => (None, None),
    };
    Some(Evidence {
        outcome,
        margin_percent: t,
        worse_change_percent: w,
        upper_bound_percent: upper,
        lower_bound_percent: lower,
        alpha_pass: inp.alpha_pass,
        alpha_fail: af,
        resampling: inp.resampling,
        drift_floor: inp.drift_floor.cloned(),
        standard_error_percent: se,
        detectable_regression_percent: t + (zf + zb) * se,
        requests_to_resolve,
        unresolvable,
    })
}

/// The upper (pass) and lower (fail) bounds of the worse change `w` from
/// the bootstrap's percentiles `up` and `lo`: each distance from the point
/// widened by `k` (few units) and by the drift floor `drift_sd` in
/// quadrature at `z`, on the input's scale (on the log scale the floor is
/// ln(1 + sd)). `None` outside a ratio's domain.
fn widened(
    inp: &EvidenceInput,
    w: f64,
    (up, lo): (f64, f64),
    (kp, kf): (f64, f64),
    (zp, zf): (f64, f64),
    drift_sd: f64,
) -> Option<(f64, f64)> {
    let widen = |w: f64, up: f64, lo: f64, drift: f64| {
        (
            w + ((kp * (up - w).max(0.0)).powi(2) + (zp * drift).powi(2)).sqrt(),
            w - ((kf * (w - lo).max(0.0)).powi(2) + (zf * drift).powi(2)).sqrt(),
        )
    };
    Some(match inp.scale {
        BoundScale::Percent => widen(w, up, lo, drift_sd),
        BoundScale::Log => {
            let g = |x| worse_log(inp.direction, x);
            let (u, l) = widen(g(w)?, g(up)?, g(lo)?, (drift_sd / 100.0).ln_1p());
            (
                worse_from_log(inp.direction, u),
                worse_from_log(inp.direction, l),
            )
        }
    })
}

/// Why a pair whose pass side has spent its error cannot be resolved by
/// more requests towards a pass.
const PASS_SPENT: &str = "the pass bound has spent its error (the information the design needs to pass is reached): more requests can only fail it";

/// A level with no bound (`1 − α` rounds to 1): its side has nothing left
/// to spend, or an early look's share is too small.
pub fn no_bound_at(level: f64) -> bool {
    1.0 - level == 1.0
}

/// Requests per side at which the bound on the side the point estimate lies
/// clears the margin with probability [`POWER`], if the true change is `w`:
/// `(z_a + z_b)²·se(n)² + (z_a·drift)² ≤ (T − w)²` with `se(n)² = se²·n_now/n`.
fn resolve(
    w: f64,
    t: f64,
    se_boot: f64,
    drift_sd: f64,
    za: f64,
    zb: f64,
    n_now: f64,
) -> (Option<usize>, Option<String>) {
    let d = (t - w).abs();
    let room = d.powi(2) - (za * drift_sd).powi(2);
    if room <= 0.0 {
        return (
            None,
            Some(format!(
                "the point change ({w:+.2}%) is within the drift floor of the margin; more requests of this design cannot decide it: interleave the runtimes, run several passes per side, or calibrate the drift"
            )),
        );
    }
    if !(se_boot.is_finite() && n_now.is_finite() && n_now > 0.0) {
        return (None, Some("no spread to scale from".into()));
    }
    let n = n_now * (za + zb).powi(2) * se_boot.powi(2) / room;
    if !n.is_finite() || n > MAX_REQUESTS_TO_RESOLVE {
        return (
            None,
            Some(format!(
                "more than {MAX_REQUESTS_TO_RESOLVE} requests per side: the point change ({w:+.2}%) sits on the margin ({t}%)"
            )),
        );
    }
    // An undecided run needs more than it has: never fewer than n_now + 1.
    (
        Some((n.ceil() as usize).max(n_now.ceil() as usize + 1)),
        None,
    )
}

/// The gate over every gating (cell, metric) pair: *fail* if any fails, else
/// *pass* if all pass (and there is at least one), else *inconclusive*.
pub fn combine(outcomes: impl IntoIterator<Item = GateOutcome>) -> GateOutcome {
    let mut any = false;
    let mut all_pass = true;
    for o in outcomes {
        any = true;
        match o {
            GateOutcome::Fail => return GateOutcome::Fail,
            GateOutcome::Inconclusive => all_pass = false,
            GateOutcome::Pass => {}
        }
    }
    if any && all_pass {
        GateOutcome::Pass
    } else {
        GateOutcome::Inconclusive
    }
}

/// Wilson score interval of `x / n` at two-sided normal quantile `z`.
pub fn wilson(x: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    wilson_share(x.min(n) as f64 / n as f64, n as f64, z)
}

/// Wilson's score bounds for a share `p` of `n` trials, `n` not necessarily
/// whole (an effective count: a pooled count over its design effect).
pub fn wilson_share(p: f64, n: f64, z: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Newcombe's hybrid score interval (method 10, 1998) of `p1 − p2` at
/// two-sided confidence `confidence`: good coverage at small counts and at 0
/// failures, where the Wald interval collapses.
pub fn newcombe_difference(x1: u64, n1: u64, x2: u64, n2: u64, confidence: f64) -> (f64, f64) {
    let z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    let p1 = if n1 == 0 { 0.0 } else { x1 as f64 / n1 as f64 };
    let p2 = if n2 == 0 { 0.0 } else { x2 as f64 / n2 as f64 };
    let (l1, u1) = wilson(x1, n1, z);
    let (l2, u2) = wilson(x2, n2, z);
    let d = p1 - p2;
    let lo = d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
    let hi = d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
    (lo.max(-1.0), hi.min(1.0))
}

#[cfg(test)]
mod tests;
