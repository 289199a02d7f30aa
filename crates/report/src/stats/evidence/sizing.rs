//! How many requests a pair needs: the known-variance oracle's and the one
//! that learns the spread (what a verdict's cost is held against), the
//! same oracle on an interleaved design's blocks, the design's plan for an
//! adaptive run, and the size that would detect a regression.

use serde::{Deserialize, Serialize};

use crate::stats::Direction;
use crate::stats::special::{normal_quantile, t_quantile};

use super::resample::{Clustered, log_ratio, paired_groups, quantile_in_place};
use super::{Evidence, MAX_REQUESTS_TO_RESOLVE, POWER, worse_log};

/// The known-variance oracle on a pair's own data: the fewest
/// requests per side a one-look z test would need to decide what this pair
/// shows, if it knew the spread. The spread is the robust SD (1.4826 ×
/// MAD) of the per-request log metric: of each request pair's log ratio
/// when requests are paired (`paired`: request k of block b on both sides),
/// else of each side, added. A median costs π/2 over a mean. The effect is
/// the distance, in log, from the observed worse change `worse_percent` to
/// the margin, at one-sided level `alpha` (the fixed-size run's: pass or
/// fail, the side the point lies on) and power [`POWER`]. It ignores
/// autocorrelation and learns nothing from the data, so no sequential rule
/// can reach it; a run's requests over it say what the evidence cost.
/// `None` when the point sits on the margin or there is no spread to read.
pub fn oracle_requests(
    baseline: Clustered,
    candidate: Clustered,
    paired: bool,
    direction: Direction,
    margin_percent: f64,
    worse_percent: f64,
    alpha: f64,
) -> Option<usize> {
    let on = (direction, margin_percent, worse_percent, alpha);
    oracles(baseline, candidate, paired, on).0
}

/// [`oracle_requests`] and the oracle that must learn the spread: the
/// fewest requests per side a one-look t test needs on the same data, at
/// the same level and power, its spread estimated from its own n requests
/// (n − 1 degrees of freedom paired, 2(n − 1) not; at least 2 requests). Where the known-variance oracle needs a handful of requests
/// (a quiet host, request pairs back to back) no rule that reads the
/// spread from the data can come near it; the second says what a
/// fixed-size run that knew the effect but not the spread would have spent.
/// `on`: the direction, the margin, the observed worse change and the level.
pub fn oracles(
    baseline: Clustered,
    candidate: Clustered,
    paired: bool,
    (direction, margin_percent, worse_percent, alpha): (Direction, f64, f64, f64),
) -> (Option<usize>, Option<usize>) {
    let Some(k) = oracle_scale(
        baseline,
        candidate,
        paired,
        direction,
        margin_percent,
        worse_percent,
    ) else {
        return (None, None);
    };
    let z = normal_quantile(1.0 - alpha) + normal_quantile(POWER);
    let floor = k * z * z;
    if !(floor.is_finite() && floor <= MAX_REQUESTS_TO_RESOLVE) {
        return (None, None);
    }
    let known = (floor.ceil() as usize).max(1);
    let need = |n: usize| {
        let df = if paired { n - 1 } else { 2 * (n - 1) } as f64;
        k * (t_quantile(1.0 - alpha, df) + t_quantile(POWER, df)).powi(2)
    };
    // t ≥ z, so the known-variance count is a floor; t nears z as n grows,
    // so the search from there takes a few steps.
    let mut n = known.max(2);
    while (n as f64) < need(n) {
        n += 1;
        if n as f64 > MAX_REQUESTS_TO_RESOLVE {
            return (Some(known), None);
        }
    }
    (Some(known), Some(n))
}

/// What the oracles scale by: π/2 × the per-request log variance over the
/// squared log distance from the point to the margin (their n per unit
/// squared quantile). `None` without a spread, or with the point on the margin.
fn oracle_scale(
    baseline: Clustered,
    candidate: Clustered,
    paired: bool,
    direction: Direction,
    margin_percent: f64,
    worse_percent: f64,
) -> Option<f64> {
    let robust_sd = |v: &[f64]| -> Option<f64> {
        let m = crate::stats::median(v)?;
        let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
        Some(1.4826 * crate::stats::median(&dev)?)
    };
    let logs =
        |v: &[f64]| -> Option<Vec<f64>> { v.iter().map(|x| (*x > 0.0).then(|| x.ln())).collect() };
    let var = if paired {
        let (bg, cg) = paired_groups(baseline, candidate)?;
        let mut d = Vec::new();
        for ((_, b), (_, c)) in bg.iter().zip(&cg) {
            if b.len() != c.len() {
                return None;
            }
            for (x, y) in b.iter().zip(c) {
                d.push(log_ratio(*x, *y)?);
            }
        }
        robust_sd(&d)?.powi(2)
    } else {
        robust_sd(&logs(baseline.values)?)?.powi(2) + robust_sd(&logs(candidate.values)?)?.powi(2)
    };
    let delta =
        (worse_log(direction, worse_percent)? - worse_log(direction, margin_percent)?).abs();
    let k = std::f64::consts::FRAC_PI_2 * var / (delta * delta);
    (k.is_finite() && var > 0.0).then_some(k)
}

/// Blocks per side one round of an interleaved schedule adds: a round runs
/// A B B A, a block of each runtime twice.
pub const BLOCKS_PER_ROUND: usize = 2;

/// The known-variance oracle on an interleaved design's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockOracle {
    /// Blocks per side its one-look z test needs (at least 1).
    pub blocks: usize,
    /// Those blocks rounded up to whole rounds ([`BLOCKS_PER_ROUND`]),
    /// times the cell's window (the most requests a block of either side
    /// holds).
    pub requests_per_side: usize,
}

/// The known-variance oracle at the level of the blocks, where requests run
/// concurrently inside a block and are correlated (one batch), so the
/// request-level [`oracles`] count them as more independent evidence than
/// they are. Each block's statistic is the one the gate's paired bootstrap
/// averages (`resample`): the log ratio of the two sides' `q` quantiles in
/// that block, signed so that worse is positive. Its spread is the blocks'
/// sample SD, taken as known; the effect the log distance from the blocks'
/// mean to the margin; a one-look z test at the fixed-size level of the
/// side the mean lies on (`levels`: pass, fail) and power [`POWER`] needs
/// [`block_oracle_blocks`] blocks. The schedule runs them in whole rounds,
/// so the requests per side are [`whole_rounds`] of them times the window.
/// `None` without two blocks shared by both sides, a positive quantile in
/// each, or with the mean on the margin.
/// (`scripts/block-oracle.py` is the same oracle written apart from this
/// code, from a qualification's files.)
pub fn block_oracle(
    baseline: Clustered,
    candidate: Clustered,
    q: f64,
    direction: Direction,
    margin_percent: f64,
    levels: (f64, f64),
) -> Option<BlockOracle> {
    let (mut bg, mut cg) = paired_groups(baseline, candidate)?;
    let window = bg.iter().chain(&cg).map(|(_, v)| v.len()).max()?;
    let mut logs = Vec::with_capacity(bg.len());
    for ((_, b), (_, c)) in bg.iter_mut().zip(cg.iter_mut()) {
        let l = log_ratio(quantile_in_place(b, q)?, quantile_in_place(c, q)?)?;
        logs.push(match direction {
            Direction::LowerIsBetter => l,
            Direction::HigherIsBetter => -l,
        });
    }
    let blocks = block_oracle_blocks(&logs, worse_log(direction, margin_percent)?, levels)?;
    let requests = whole_rounds(blocks)
        .checked_mul(BLOCKS_PER_ROUND)?
        .checked_mul(window)?;
    (requests as f64 <= MAX_REQUESTS_TO_RESOLVE).then_some(BlockOracle {
        blocks,
        requests_per_side: requests,
    })
}

/// The closed form of [`block_oracle`] on the blocks' worse-signed log
/// ratios `logs` against the margin's log `margin`: with their mean m and
/// sample SD s, at the level of the side m lies on (`levels`: pass, fail),
/// `max(1, ⌈s²·(z₁₋α + z_P)² / (m − margin)²⌉)` blocks. `None` with fewer
/// than two blocks, m on the margin, or a count past
/// [`MAX_REQUESTS_TO_RESOLVE`].
pub fn block_oracle_blocks(
    logs: &[f64],
    margin: f64,
    (alpha_pass, alpha_fail): (f64, f64),
) -> Option<usize> {
    if logs.len() < 2 || logs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let effect = (mean - margin).abs();
    // NaN (a non-finite margin) decides nothing either.
    if effect.is_nan() || effect <= 0.0 {
        return None;
    }
    let alpha = if mean > margin {
        alpha_fail
    } else {
        alpha_pass
    };
    let z = normal_quantile(1.0 - alpha) + normal_quantile(POWER);
    let blocks = (sd * z / effect).powi(2).ceil();
    (blocks.is_finite() && blocks <= MAX_REQUESTS_TO_RESOLVE).then(|| (blocks as usize).max(1))
}

/// Rounds of an interleaved schedule that hold `blocks` blocks per side:
/// `⌈blocks / BLOCKS_PER_ROUND⌉`.
pub fn whole_rounds(blocks: usize) -> usize {
    blocks.div_ceil(BLOCKS_PER_ROUND)
}

/// What an adaptive run's design plans its information from
/// (`crate::design::Method::design_spread`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DesignSpread {
    /// The estimate's standard error, the middle of its bootstrap.
    StandardError,
    /// The spread the bounds show: each bound's distance from the point
    /// over t at its level, where that exceeds the standard error. A heavy
    /// tail's bootstrap is wider in its tails, where the gate decides, than
    /// in its middle; planned from the middle, the design's last look can
    /// come before the bounds clear the margin. On normal noise the two agree.
    Bounds,
}

impl DesignSpread {
    /// The standard error (percent) the design plans from, for evidence
    /// `e` whose bounds widen by t with `units − 1` degrees of freedom
    /// (at least 1). At a probe's full levels the bounds' percentiles are
    /// well inside the bootstrap's draws.
    pub fn of(self, e: &Evidence, units: usize) -> f64 {
        let se = e.standard_error_percent;
        if self == DesignSpread::StandardError {
            return se;
        }
        let df = (units.max(2) - 1) as f64;
        let t = |a: f64| t_quantile(1.0 - a, df);
        let w = e.worse_change_percent;
        let below = (w - e.lower_bound_percent) / t(e.alpha_fail);
        let above = (e.upper_bound_percent - w) / t(e.alpha_pass);
        [below, above]
            .into_iter()
            .filter(|x| x.is_finite())
            .fold(se, f64::max)
    }
}

/// Power at which an adaptive run plans the information it needs: the
/// target rate for failing a +10 % runtime against 5 % margins.
pub const DESIGN_POWER: f64 = 0.95;
/// What a group-sequential design's looks cost over a fixed-size one at
/// the same power (O'Brien–Fleming's is 1.02–1.1; the t_{B−1} widening of
/// few blocks is in the simulation that chose it, not in this factor).
pub const DESIGN_INFLATION: f64 = 1.1;

/// Requests per side at which a pair's bounds clear a margin a margin's
/// distance away (a runtime no worse passing it, one twice the margin
/// worse failing it) with probability [`DESIGN_POWER`], at the fixed-size
/// run's fail level `alpha_fail` (the stricter of the two), given the
/// standard error `se_percent` at `n_now` requests per side and times
/// [`DESIGN_INFLATION`] for the looks: `n·k·((z₁₋α + z_P)·se / T)²`.
/// An adaptive run's information fraction is its requests over this, so
/// its error is spent where the evidence will suffice, not over a budget
/// larger than it needs. It reads the spread, never the point, so the
/// looks it plans do not depend on the observed difference. `None`
/// without a spread or a margin.
pub fn design_requests(
    se_percent: f64,
    n_now: usize,
    margin_percent: f64,
    alpha_fail: f64,
) -> Option<usize> {
    if !(se_percent.is_finite() && se_percent > 0.0 && margin_percent > 0.0 && n_now > 0) {
        return None;
    }
    let z = normal_quantile(1.0 - alpha_fail) + normal_quantile(DESIGN_POWER);
    let n = DESIGN_INFLATION * n_now as f64 * (z * se_percent / margin_percent).powi(2);
    (n.is_finite() && n <= MAX_REQUESTS_TO_RESOLVE).then(|| (n.ceil() as usize).max(1))
}

/// The share of the fail side's design information the pass side needs:
/// both plan for a margin's distance at [`DESIGN_POWER`], the pass side at
/// the fixed-size pass level `alpha` (every pair must pass, each at
/// `alpha`), the fail side at `alpha / m` (any pair may fail), so
/// `((z₁₋α + z_P) / (z₁₋α/m + z_P))²`, below 1 for `m > 1`.
pub fn pass_design_share(alpha: f64, m: usize) -> f64 {
    let zp = normal_quantile(DESIGN_POWER);
    let z = |a: f64| normal_quantile(1.0 - a);
    ((z(alpha) + zp) / (z(alpha / m.max(1) as f64) + zp)).powi(2)
}

/// Requests per side at which a true worse change of `shift_percent` fails
/// a margin of `margin_percent` with probability `power`, given the standard
/// error `se_percent` seen at `n_now` requests per side (se ∝ 1/√n; the
/// drift part does not shrink). `None` when the shift is not beyond the
/// margin or the drift alone prevents it.
pub fn requests_to_detect(
    se_percent: f64,
    drift_sd_percent: f64,
    n_now: f64,
    margin_percent: f64,
    shift_percent: f64,
    alpha_fail: f64,
    power: f64,
) -> Option<usize> {
    let (zf, zb) = (normal_quantile(1.0 - alpha_fail), normal_quantile(power));
    let room =
        (shift_percent - margin_percent).powi(2) / (zf + zb).powi(2) - drift_sd_percent.powi(2);
    if shift_percent <= margin_percent || room <= 0.0 || n_now.is_nan() || n_now <= 0.0 {
        return None;
    }
    let within = (se_percent.powi(2) - drift_sd_percent.powi(2)).max(0.0);
    let n = n_now * within / room;
    n.is_finite().then(|| (n.ceil() as usize).max(2))
}

/// `2 / (1/a + 1/b)`: the equal-split size with the same precision.
pub fn n_eff(a: usize, b: usize) -> f64 {
    if a == 0 || b == 0 {
        return 0.0;
    }
    2.0 * a as f64 * b as f64 / (a + b) as f64
}
