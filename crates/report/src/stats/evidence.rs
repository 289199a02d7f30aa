//! Evidence for gates: a bootstrap that resamples what actually varies
//! (requests, and the clusters they came in), one-sided confidence bounds
//! against a margin, a drift floor where the data cannot see drift, the
//! three-way outcome, and how many requests would decide an undecided one.
//!
//! Everything is in *worse-change* percent: the change of a metric in its
//! worse direction (latency as is, throughput negated), so "≤ T" always means
//! "no more than T percent worse".

use serde::{Deserialize, Serialize};

use super::bootstrap::{independent_median_deltas, rank_sampled_quantile};
use super::percentile::{percentile_sorted, sorted_finite};
use super::special::{chi_square_quantile_approx, normal_cdf, normal_quantile, t_quantile};
use super::{BootstrapConfig, Direction, GateOutcome, delta_percent};

/// How the bootstrap draws a side's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resampling {
    /// Requests as independent draws, each side on its own.
    Independent,
    /// Two stages per side: clusters (passes, process lifetimes, time blocks)
    /// with replacement, then requests within each drawn cluster. Between-
    /// cluster variance is inside the interval.
    Clustered,
    /// Interleaved blocks shared by both sides: block ids drawn once per
    /// iteration for both sides together, then requests within each side's
    /// block. Drift common to a block cancels in the delta.
    Paired,
    /// `Paired`, and within each drawn block the same requests on both
    /// sides (request k of a block is the same prompt on both runtimes):
    /// what the requests themselves vary by (length, turn, cache hit)
    /// cancels in the ratio as drift does. Needs every request of a block
    /// on both sides, in request order.
    PairedRequests,
}

impl Resampling {
    pub fn describe(self) -> &'static str {
        match self {
            Resampling::Independent => {
                "requests resampled with replacement, each side independently"
            }
            Resampling::Clustered => {
                "two-stage cluster bootstrap per side: clusters (passes, process lifetimes or time blocks) with replacement, then requests within each drawn cluster"
            }
            Resampling::Paired => {
                "paired block bootstrap of the geometric mean over interleaved blocks of each block's quantile ratio candidate/baseline: block ids drawn with replacement, then requests within each side's drawn block (drift shared by a block cancels in its ratio)"
            }
            Resampling::PairedRequests => {
                "paired block bootstrap of the geometric mean over interleaved blocks of each block's quantile ratio candidate/baseline: block ids drawn with replacement, then the same request positions on both sides within each drawn block (drift shared by a block, and what its requests vary by, cancel in its ratio)"
            }
        }
    }
}

/// How a paired design combines its blocks' log ratios into one estimate.
/// The host's bursts put a few request pairs astride a change of speed
/// (one side before it, the other after): their ratios are far out,
/// and a mean pays for them in variance. On the reference engine's journals
/// of a bursty hour the mean's bootstrap SE was 2–8 × the trimmed mean's
/// (`scripts/block-estimators.py`). `compare` uses `Trimmed`
/// (`crate::design::Method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockMean {
    /// The mean of the log ratios (their geometric mean).
    Mean,
    /// The mean of the middle log ratios, a fifth of the blocks
    /// ([`TRIM_SHARE`], rounded down) set aside at each end, from
    /// [`MIN_TRIMMED_BLOCKS`] blocks on (the mean below): about 94 % of the
    /// mean's efficiency on normal data, and a burst's few pairs do not
    /// move it. The small-sample widening uses the middle's count
    /// (Tukey–McLaughlin's degrees of freedom).
    Trimmed,
}

/// The share of blocks a trimmed mean sets aside at each end.
pub const TRIM_SHARE: f64 = 0.2;

/// Blocks below which the trimmed mean is the mean: with fewer, the
/// degrees of freedom it gives up widen the bounds more than the outliers
/// it sets aside would (6 blocks of 4: 3 instead of 5, and on the
/// reference engine's demo a decode bound of ±50 % where the mean's was
/// −2 % to +51 %); from 16, t is at most about 10 % wider at the levels of
/// a qualification's looks.
pub const MIN_TRIMMED_BLOCKS: usize = 16;

impl BlockMean {
    /// Blocks set aside at each end of `blocks`.
    pub fn trimmed(self, blocks: usize) -> usize {
        match self {
            BlockMean::Mean => 0,
            BlockMean::Trimmed if blocks >= MIN_TRIMMED_BLOCKS => {
                (TRIM_SHARE * blocks as f64).floor() as usize
            }
            BlockMean::Trimmed => 0,
        }
    }

    /// The units behind the estimate's small-sample widening: the blocks it averages.
    pub fn units(self, blocks: usize) -> usize {
        blocks - 2 * self.trimmed(blocks)
    }

    /// The estimate from the blocks' log ratios (reordered).
    pub fn of(self, logs: &mut [f64]) -> Option<f64> {
        let k = self.trimmed(logs.len());
        if k > 0 {
            logs.sort_unstable_by(f64::total_cmp);
        }
        let middle = &logs[k..logs.len() - k];
        (!middle.is_empty()).then(|| middle.iter().sum::<f64>() / middle.len() as f64)
    }

    pub fn describe(self) -> &'static str {
        match self {
            BlockMean::Mean => "the geometric mean over blocks",
            BlockMean::Trimmed => {
                "the 20 % trimmed geometric mean over blocks (from 16 blocks, a fifth of the blocks' log ratios set aside at each end; t with the middle's count less one)"
            }
        }
    }
}

/// One side's values of a sample, with the cluster of each (same length).
#[derive(Debug, Clone, Copy)]
pub struct Clustered<'a> {
    pub values: &'a [f64],
    /// `None`: every value in one cluster.
    pub clusters: Option<&'a [u32]>,
}

impl<'a> Clustered<'a> {
    pub fn flat(values: &'a [f64]) -> Self {
        Clustered {
            values,
            clusters: None,
        }
    }

    /// Values grouped by cluster id, groups in ascending id order; non-finite
    /// values dropped. `None` when the cluster list has the wrong length.
    fn groups(&self) -> Option<Vec<(u32, Vec<f64>)>> {
        let mut out: Vec<(u32, Vec<f64>)> = Vec::new();
        match self.clusters {
            None => out.push((0, self.values.to_vec())),
            Some(c) => {
                if c.len() != self.values.len() {
                    return None;
                }
                let mut ids: Vec<u32> = c.to_vec();
                ids.sort_unstable();
                ids.dedup();
                out = ids.into_iter().map(|id| (id, Vec::new())).collect();
                for (&v, &id) in self.values.iter().zip(c) {
                    let g = out.binary_search_by_key(&id, |(k, _)| *k).ok()?;
                    out[g].1.push(v);
                }
            }
        }
        for (_, g) in &mut out {
            g.retain(|x| x.is_finite());
        }
        out.retain(|(_, g)| !g.is_empty());
        Some(out)
    }

    /// Distinct clusters holding at least one finite value.
    pub fn cluster_count(&self) -> usize {
        self.groups().map_or(0, |g| g.len())
    }
}

/// Smallest cluster count per side from which a clustered interval is taken
/// to carry the between-cluster variance: with two clusters a two-stage
/// bootstrap sees almost none of it.
pub const MIN_CLUSTERS: usize = 3;

/// The sorted bootstrap distribution of `delta_percent(q(baseline*), q(candidate*))`.
///
/// `Independent` at `q = 0.5` is exactly [`super::bootstrap_delta_ci`]'s
/// stream (same seed, same resamples). `Paired` needs every block on both
/// sides; otherwise it gives `None` (the caller falls back to `Clustered`).
/// `None` also when a side is empty, `iterations` is 0, `q` is outside
/// [0, 1], or a resampled baseline statistic is 0.
pub fn bootstrap_deltas(
    baseline: Clustered,
    candidate: Clustered,
    q: f64,
    resampling: Resampling,
    iterations: usize,
    seed: u64,
) -> Option<Vec<f64>> {
    bootstrap_deltas_by(
        baseline,
        candidate,
        q,
        (resampling, BlockMean::Mean),
        iterations,
        seed,
    )
}

/// [`bootstrap_deltas`], the paired designs' blocks combined by `block_mean`.
pub fn bootstrap_deltas_by(
    baseline: Clustered,
    candidate: Clustered,
    q: f64,
    (resampling, block_mean): (Resampling, BlockMean),
    iterations: usize,
    seed: u64,
) -> Option<Vec<f64>> {
    if iterations == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    match resampling {
        Resampling::Independent => {
            let b = sorted_finite(baseline.values);
            let c = sorted_finite(candidate.values);
            if q == 0.5 {
                let cfg = BootstrapConfig {
                    iterations,
                    confidence: 0.95,
                    seed,
                };
                return independent_median_deltas(&b, &c, &cfg);
            }
            let bg = [(0, b)];
            let cg = [(0, c)];
            clustered_deltas(&bg, &cg, q, iterations, seed)
        }
        Resampling::Clustered => {
            let (bg, cg) = (baseline.groups()?, candidate.groups()?);
            clustered_deltas(&bg, &cg, q, iterations, seed)
        }
        Resampling::Paired => paired_deltas(
            baseline,
            candidate,
            q,
            (iterations, seed),
            false,
            block_mean,
        ),
        Resampling::PairedRequests => {
            paired_deltas(baseline, candidate, q, (iterations, seed), true, block_mean)
        }
    }
}

fn clustered_deltas(
    base: &[(u32, Vec<f64>)],
    cand: &[(u32, Vec<f64>)],
    q: f64,
    iterations: usize,
    seed: u64,
) -> Option<Vec<f64>> {
    if base.is_empty() || cand.is_empty() {
        return None;
    }
    let (rb, rc) = (ranked(base), ranked(cand));
    let mut rng = super::Xoshiro256::new(seed);
    let (mut bb, mut cb) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let vb = two_stage(base, rb.as_deref(), &mut bb, q, &mut rng)?;
        let vc = two_stage(cand, rc.as_deref(), &mut cb, q, &mut rng)?;
        out.push(delta_percent(vb, vc)?);
    }
    out.sort_unstable_by(f64::total_cmp);
    Some(out)
}

/// One big cluster is drawn by rank (see [`rank_sampled_quantile`]): its
/// values sorted once here, not checked or sorted per iteration.
fn ranked(groups: &[(u32, Vec<f64>)]) -> Option<Vec<f64>> {
    match groups {
        [(_, only)] if only.len() >= super::bootstrap::RANK_SAMPLING_MIN_N => {
            let mut v = only.clone();
            v.sort_unstable_by(f64::total_cmp);
            Some(v)
        }
        _ => None,
    }
}

/// One two-stage resample of `groups`' statistic (clusters, then requests
/// within each), or a rank draw from `ranked` when it is given.
fn two_stage(
    groups: &[(u32, Vec<f64>)],
    ranked: Option<&[f64]>,
    buf: &mut Vec<f64>,
    q: f64,
    rng: &mut super::Xoshiro256,
) -> Option<f64> {
    if let Some(sorted) = ranked {
        return Some(rank_sampled_quantile(sorted, q, rng));
    }
    buf.clear();
    let g = groups.len() as u64;
    for _ in 0..groups.len() {
        let (_, vals) = &groups[rng.below(g) as usize];
        draw_within(vals, buf, rng);
    }
    quantile_in_place(buf, q)
}

fn draw_within(vals: &[f64], buf: &mut Vec<f64>, rng: &mut super::Xoshiro256) {
    let n = vals.len() as u64;
    for _ in 0..vals.len() {
        buf.push(vals[rng.below(n) as usize]);
    }
}

/// Request positions drawn with replacement, the same on both sides.
fn draw_pairs(
    b: &[f64],
    c: &[f64],
    bb: &mut Vec<f64>,
    cb: &mut Vec<f64>,
    rng: &mut super::Xoshiro256,
) {
    let n = b.len() as u64;
    for _ in 0..b.len() {
        let i = rng.below(n) as usize;
        bb.push(b[i]);
        cb.push(c[i]);
    }
}

fn paired_deltas(
    baseline: Clustered,
    candidate: Clustered,
    q: f64,
    (iterations, seed): (usize, u64),
    by_request: bool,
    block_mean: BlockMean,
) -> Option<Vec<f64>> {
    let (bg, cg) = paired_groups(baseline, candidate)?;
    if by_request && bg.iter().zip(&cg).any(|(b, c)| b.1.len() != c.1.len()) {
        return None;
    }
    let mut rng = super::Xoshiro256::new(seed);
    let (mut bb, mut cb) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(iterations);
    let mut logs = Vec::with_capacity(bg.len());
    let n = bg.len() as u64;
    for _ in 0..iterations {
        logs.clear();
        for _ in 0..bg.len() {
            let k = rng.below(n) as usize;
            bb.clear();
            cb.clear();
            if by_request {
                draw_pairs(&bg[k].1, &cg[k].1, &mut bb, &mut cb, &mut rng);
            } else {
                draw_within(&bg[k].1, &mut bb, &mut rng);
                draw_within(&cg[k].1, &mut cb, &mut rng);
            }
            logs.push(log_ratio(
                quantile_in_place(&mut bb, q)?,
                quantile_in_place(&mut cb, q)?,
            )?);
        }
        out.push(from_mean_log(block_mean.of(&mut logs)?)?);
    }
    out.sort_unstable_by(f64::total_cmp);
    Some(out)
}

/// A side's values grouped by cluster id, ascending.
type Groups = Vec<(u32, Vec<f64>)>;

/// Both sides grouped by block; `None` unless they hold the same blocks.
fn paired_groups(baseline: Clustered, candidate: Clustered) -> Option<(Groups, Groups)> {
    let (bg, cg) = (baseline.groups()?, candidate.groups()?);
    let same =
        !bg.is_empty() && bg.len() == cg.len() && bg.iter().zip(&cg).all(|((a, _), (b, _))| a == b);
    same.then_some((bg, cg))
}

fn log_ratio(base: f64, cand: f64) -> Option<f64> {
    (base > 0.0 && cand > 0.0).then(|| (cand / base).ln())
}

fn from_mean_log(m: f64) -> Option<f64> {
    let d = (m.exp() - 1.0) * 100.0;
    d.is_finite().then_some(d)
}

/// The paired design's point estimate of `delta_percent`: the geometric
/// mean over blocks of each block's `q(candidate) / q(baseline)`, in percent.
/// Under a multiplicative change it estimates the same shift as the delta of
/// pooled quantiles, but drift between blocks (which moves both sides of a
/// block together) cancels in each ratio instead of blurring both quantiles.
/// `None` when the blocks differ between the sides or a block's quantile is
/// not positive.
pub fn paired_point_delta(baseline: Clustered, candidate: Clustered, q: f64) -> Option<f64> {
    paired_point_delta_by(baseline, candidate, q, BlockMean::Mean)
}

/// [`paired_point_delta`] with the blocks' log ratios combined by `block_mean`.
pub fn paired_point_delta_by(
    baseline: Clustered,
    candidate: Clustered,
    q: f64,
    block_mean: BlockMean,
) -> Option<f64> {
    let (mut bg, mut cg) = paired_groups(baseline, candidate)?;
    let mut logs = Vec::with_capacity(bg.len());
    for ((_, b), (_, c)) in bg.iter_mut().zip(cg.iter_mut()) {
        logs.push(log_ratio(
            quantile_in_place(b, q)?,
            quantile_in_place(c, q)?,
        )?);
    }
    from_mean_log(block_mean.of(&mut logs)?)
}

/// Type-7 quantile of unsorted finite values, reordering them (O(n)).
fn quantile_in_place(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let h = (v.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let (_, &mut a, rest) = v.select_nth_unstable_by(lo, f64::total_cmp);
    let t = h - lo as f64;
    if t == 0.0 || rest.is_empty() {
        return Some(a);
    }
    let b = rest.iter().copied().fold(f64::INFINITY, f64::min);
    Some(super::percentile::lerp(a, b, t))
}

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
fn worse_log(direction: Direction, w: f64) -> Option<f64> {
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
    // The same widening on either scale: distances from the point, the
    // drift floor in quadrature; on the log scale the floor is ln(1 + sd).
    let widen = |w: f64, up: f64, lo: f64, drift: f64| {
        (
            w + ((kp * (up - w).max(0.0)).powi(2) + (zp * drift).powi(2)).sqrt(),
            w - ((kf * (w - lo).max(0.0)).powi(2) + (zf * drift).powi(2)).sqrt(),
        )
    };
    let (upper, lower) = match inp.scale {
        BoundScale::Percent => widen(w, up, lo, drift_sd),
        BoundScale::Log => {
            let g = |x| worse_log(inp.direction, x);
            let (u, l) = widen(g(w)?, g(up)?, g(lo)?, (drift_sd / 100.0).ln_1p());
            (
                worse_from_log(inp.direction, u),
                worse_from_log(inp.direction, l),
            )
        }
    };
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
        let m = super::median(v)?;
        let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
        Some(1.4826 * super::median(&dev)?)
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
    let (x, n) = (x.min(n) as f64, n as f64);
    let p = x / n;
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
