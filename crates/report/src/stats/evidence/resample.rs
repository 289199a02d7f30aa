//! How the bootstrap draws each design's samples: requests as independent,
//! clusters then requests within them, or blocks shared by both sides
//! (pairing requests within a block where every request has its value),
//! and the paired design's point estimate, the blocks' ratios combined.

use serde::{Deserialize, Serialize};

use crate::stats::bootstrap::{independent_median_deltas, rank_sampled_quantile};
use crate::stats::percentile::sorted_finite;
use crate::stats::{BootstrapConfig, delta_percent};

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
/// `Independent` at `q = 0.5` is exactly [`crate::stats::bootstrap_delta_ci`]'s
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
    let mut rng = crate::stats::Xoshiro256::new(seed);
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
        [(_, only)] if only.len() >= crate::stats::bootstrap::RANK_SAMPLING_MIN_N => {
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
    rng: &mut crate::stats::Xoshiro256,
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

fn draw_within(vals: &[f64], buf: &mut Vec<f64>, rng: &mut crate::stats::Xoshiro256) {
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
    rng: &mut crate::stats::Xoshiro256,
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
    let small = |g: &Groups| g.iter().all(|(_, v)| v.len() <= DRAWS_MAX_BLOCK);
    if !(small(&bg) && small(&cg)) {
        return paired_deltas_drawn(&bg, &cg, q, (iterations, seed), by_request, block_mean);
    }
    let mut rng = crate::stats::Xoshiro256::new(seed);
    let mut out = Vec::with_capacity(iterations);
    let mut logs = Vec::with_capacity(bg.len());
    let n = bg.len() as u64;
    let trimmed = block_mean.trimmed(bg.len());
    let single = |g: &Groups| g.iter().all(|(_, v)| v.len() == 1);
    if trimmed > 0 && single(&bg) && single(&cg) {
        // Blocks of one request: a block's log ratio is fixed, so a
        // resample is how often each block was drawn, and its sorted logs
        // are the blocks in the order of their logs, each as often as drawn
        // (the trimmed mean sums its middle in that order). Counting
        // replaces a sort per resample.
        let fixed: Vec<Option<f64>> = bg
            .iter()
            .zip(&cg)
            .map(|((_, b), (_, c))| {
                log_ratio(
                    quantile_in_place(&mut b.clone(), q)?,
                    quantile_in_place(&mut c.clone(), q)?,
                )
            })
            .collect();
        let mut order: Vec<(usize, f64)> = fixed
            .iter()
            .enumerate()
            .filter_map(|(k, l)| Some((k, (*l)?)))
            .collect();
        order.sort_unstable_by(|x, y| x.1.total_cmp(&y.1));
        let middle = bg.len() - 2 * trimmed;
        // A block's one request drawn, on both sides together or on each.
        let positions = if by_request { 1 } else { 2 };
        let mut counts = vec![0usize; bg.len()];
        for _ in 0..iterations {
            counts.fill(0);
            for _ in 0..bg.len() {
                let k = rng.below(n) as usize;
                for _ in 0..positions {
                    rng.below(1);
                }
                // A block with no log: no distribution, as when drawn in full.
                fixed[k]?;
                counts[k] += 1;
            }
            logs.clear();
            let mut skip = trimmed;
            for &(k, log) in &order {
                let here = counts[k] - counts[k].min(skip);
                skip -= counts[k].min(skip);
                logs.extend(std::iter::repeat_n(log, here.min(middle - logs.len())));
                if logs.len() == middle {
                    break;
                }
            }
            // Summed as `BlockMean::of` sums the middle of the sorted logs.
            out.push(from_mean_log(logs.iter().sum::<f64>() / middle as f64)?);
        }
        out.sort_unstable_by(f64::total_cmp);
        return Some(out);
    }
    let mut draws = BlockDraws::new(&bg, &cg, q, by_request);
    for _ in 0..iterations {
        logs.clear();
        for _ in 0..bg.len() {
            let k = rng.below(n) as usize;
            logs.push(draws.log_ratio(k, &mut rng)?);
        }
        out.push(from_mean_log(block_mean.of(&mut logs)?)?);
    }
    out.sort_unstable_by(f64::total_cmp);
    Some(out)
}

/// [`paired_deltas`] of blocks grouped, each block's resample drawn in full
/// and its quantiles selected.
fn paired_deltas_drawn(
    bg: &Groups,
    cg: &Groups,
    q: f64,
    (iterations, seed): (usize, u64),
    by_request: bool,
    block_mean: BlockMean,
) -> Option<Vec<f64>> {
    let mut rng = crate::stats::Xoshiro256::new(seed);
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

/// Blocks up to this many requests draw through [`BlockDraws`] (a table of
/// `(w + 1)^w` entries per block and side: 625 at 4).
const DRAWS_MAX_BLOCK: usize = 4;

/// A resampled block's quantiles, or its log ratio, by the request
/// positions drawn: a quantile is a function of the multiset of values
/// drawn (its order statistics), so of the multiset of positions, of which
/// a small block has few (35 of 4 positions drawn 4 times) against the
/// hundreds of times a bootstrap draws it. Each is computed as
/// [`paired_deltas_drawn`] does, once.
struct BlockDraws<'a> {
    bg: &'a Groups,
    cg: &'a Groups,
    q: f64,
    by_request: bool,
    /// Where each block's entries begin in `table`, by side (`by_request`:
    /// the one log ratio's).
    at: Vec<[usize; 2]>,
    /// By block and multiset: the log ratio (`by_request`: one draw of
    /// positions for both sides), else each side's quantile. `None`: not
    /// yet computed.
    table: Vec<Option<Option<f64>>>,
    buf: (Vec<f64>, Vec<f64>),
}

impl<'a> BlockDraws<'a> {
    fn new(bg: &'a Groups, cg: &'a Groups, q: f64, by_request: bool) -> Self {
        let entries = |v: &Vec<f64>| (v.len() + 1).pow(v.len() as u32);
        let mut end = 0;
        let at = bg
            .iter()
            .zip(cg)
            .map(|((_, b), (_, c))| {
                let base = end;
                end += entries(b);
                let cand = if by_request { base } else { end };
                if !by_request {
                    end += entries(c);
                }
                [base, cand]
            })
            .collect();
        BlockDraws {
            bg,
            cg,
            q,
            by_request,
            at,
            table: vec![None; end],
            buf: (Vec::new(), Vec::new()),
        }
    }

    /// Block `k` resampled (its positions drawn from `rng` as
    /// [`draw_pairs`], or [`draw_within`] each side, draws them): its log
    /// ratio; `None` where [`paired_deltas_drawn`] gives up.
    #[inline]
    fn log_ratio(&mut self, k: usize, rng: &mut crate::stats::Xoshiro256) -> Option<f64> {
        let (b, c) = (&self.bg[k].1, &self.cg[k].1);
        let [at_b, at_c] = self.at[k];
        if self.by_request {
            let drawn = multiset(b.len(), rng);
            let q = self.q;
            let (bb, cb) = &mut self.buf;
            return *self.table[at_b + drawn].get_or_insert_with(|| {
                fill(bb, b, drawn);
                fill(cb, c, drawn);
                log_ratio(quantile_in_place(bb, q)?, quantile_in_place(cb, q)?)
            });
        }
        let (db, dc) = (multiset(b.len(), rng), multiset(c.len(), rng));
        let (buf, q) = (&mut self.buf.0, self.q);
        let mut side = |at: usize, values: &[f64], drawn: usize| {
            *self.table[at + drawn].get_or_insert_with(|| {
                fill(buf, values, drawn);
                quantile_in_place(buf, q)
            })
        };
        let qb = side(at_b, b, db)?;
        let qc = side(at_c, c, dc)?;
        log_ratio(qb, qc)
    }
}

/// `w` positions of `0..w` drawn with replacement as [`draw_within`] draws
/// them, as their multiset: how often position `i` was drawn is digit `i`
/// in base `w + 1`.
#[inline]
fn multiset(w: usize, rng: &mut crate::stats::Xoshiro256) -> usize {
    const DIGIT: [[usize; DRAWS_MAX_BLOCK]; DRAWS_MAX_BLOCK + 1] = {
        let mut digit = [[0; DRAWS_MAX_BLOCK]; DRAWS_MAX_BLOCK + 1];
        let mut w = 1;
        while w <= DRAWS_MAX_BLOCK {
            let (mut i, mut place) = (0, 1);
            while i < w {
                digit[w][i] = place;
                place *= w + 1;
                i += 1;
            }
            w += 1;
        }
        digit
    };
    let mut key = 0;
    for _ in 0..w {
        key += DIGIT[w][rng.below(w as u64) as usize];
    }
    key
}

/// `buf` holds `values` at the positions of `drawn` (a [`multiset`]), each
/// as often as drawn (in position order: the quantile of a multiset is its
/// order statistics', whatever the order).
fn fill(buf: &mut Vec<f64>, values: &[f64], mut drawn: usize) {
    buf.clear();
    let base = values.len() + 1;
    for &v in values {
        for _ in 0..drawn % base {
            buf.push(v);
        }
        drawn /= base;
    }
}

/// A side's values grouped by cluster id, ascending.
type Groups = Vec<(u32, Vec<f64>)>;

/// Both sides grouped by block; `None` unless they hold the same blocks.
pub(super) fn paired_groups(baseline: Clustered, candidate: Clustered) -> Option<(Groups, Groups)> {
    let (bg, cg) = (baseline.groups()?, candidate.groups()?);
    let same =
        !bg.is_empty() && bg.len() == cg.len() && bg.iter().zip(&cg).all(|((a, _), (b, _))| a == b);
    same.then_some((bg, cg))
}

pub(super) fn log_ratio(base: f64, cand: f64) -> Option<f64> {
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
pub(super) fn quantile_in_place(v: &mut [f64], q: f64) -> Option<f64> {
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
    Some(crate::stats::percentile::lerp(a, b, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;

    /// Blocks of 1 to `largest` requests (some values tied, so a
    /// quantile's order statistics, and blocks' log ratios, repeat),
    /// `blocks` of them.
    fn sample(blocks: u32, largest: u32, r: &mut Xoshiro256) -> (Vec<f64>, Vec<f64>, Vec<u32>) {
        let (mut b, mut c, mut cl) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..blocks {
            for _ in 0..=k % largest {
                b.push((1000.0 + 40.0 * r.next_f64()).round());
                c.push((1000.0 + 40.0 * r.next_f64()).round());
                cl.push(k);
            }
        }
        (b, c, cl)
    }

    /// The table of small blocks' draws, and the counted draws of blocks of
    /// one, give every resample the plain draw's value, bit for bit: both
    /// designs, both block means (trimmed from 16 blocks), the median and
    /// other quantiles, and give up where the plain draw does.
    #[test]
    fn small_blocks_drawn_by_table_are_the_plain_draws_bit_for_bit() {
        let mut r = Xoshiro256::new(5);
        for (blocks, seed, largest) in [
            (3, 1u64, 4),
            (8, 2, 4),
            (20, 3, 4),
            (33, 4, 4),
            (5, 5, 1),
            (16, 6, 1),
            (40, 7, 1),
        ] {
            let (b, mut c, cl) = sample(blocks, largest, &mut r);
            for poisoned in [false, true] {
                if poisoned {
                    // A request of 0: its block's ratio has no log.
                    c[1] = 0.0;
                }
                let (bs, cs) = (
                    Clustered {
                        values: &b,
                        clusters: Some(&cl),
                    },
                    Clustered {
                        values: &c,
                        clusters: Some(&cl),
                    },
                );
                let (bg, cg) = paired_groups(bs, cs).unwrap();
                for by_request in [false, true] {
                    for block_mean in [BlockMean::Mean, BlockMean::Trimmed] {
                        for q in [0.5, 0.9, 0.0, 1.0, 0.3] {
                            let design = (200, seed);
                            let table = paired_deltas(bs, cs, q, design, by_request, block_mean);
                            let plain =
                                paired_deltas_drawn(&bg, &cg, q, design, by_request, block_mean);
                            let bits = |v: Option<Vec<f64>>| {
                                v.map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                            };
                            assert_eq!(
                                bits(table),
                                bits(plain),
                                "{blocks} blocks, by request {by_request}, {block_mean:?}, q {q}, poisoned {poisoned}"
                            );
                        }
                    }
                }
            }
        }
    }
}
