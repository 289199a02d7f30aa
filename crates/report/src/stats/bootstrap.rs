//! Bootstrap confidence intervals of median deltas, and how many requests
//! would resolve them.

use serde::{Deserialize, Serialize};

use super::percentile::{lerp, percentile_sorted, sorted_finite};
use super::{Interval, delta_percent};

/// SplitMix64 (Steele, Lea & Flood 2014): used only to expand a `u64` seed
/// into xoshiro state, as its authors recommend.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// xoshiro256** (Blackman & Vigna 2018). Hand-written so a given seed gives
/// the same resamples, and the same report, across crate versions.
#[derive(Debug, Clone)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    /// State from SplitMix64(seed); never all-zero.
    pub fn new(seed: u64) -> Self {
        let mut sm = SplitMix64::new(seed);
        Xoshiro256 {
            s: std::array::from_fn(|_| sm.next_u64()),
        }
    }

    /// Raw state, for checking against the reference vectors.
    pub fn from_state(s: [u64; 4]) -> Self {
        assert!(s != [0; 4], "xoshiro256** state must not be all zero");
        Xoshiro256 { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, n)`, without modulo bias (Lemire 2019: multiply, and
    /// reject the few low products that would over-represent some values).
    /// `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Settings of [`bootstrap_delta_ci`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapConfig {
    /// Resamples; 10 000 puts the Monte Carlo error of a 95% bound well
    /// below the sampling error it describes.
    pub iterations: usize,
    /// Nominal two-sided coverage, in (0, 1).
    pub confidence: f64,
    /// PRNG seed; record it so a report can be reproduced.
    pub seed: u64,
}

/// Default seed: fixed so that two `compare` runs on the same artifacts agree.
pub const DEFAULT_BOOTSTRAP_SEED: u64 = 0x1F6E_6761_7465_2021;

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig {
            iterations: 10_000,
            confidence: 0.95,
            seed: DEFAULT_BOOTSTRAP_SEED,
        }
    }
}

/// The point estimate that [`bootstrap_delta_ci`] brackets:
/// `delta_percent(median(baseline), median(candidate))`.
pub fn median_delta_percent(baseline: &[f64], candidate: &[f64]) -> Option<f64> {
    delta_percent(super::median(baseline)?, super::median(candidate)?)
}

/// Percentile bootstrap CI of `delta_percent(median(baseline*), median(candidate*))`,
/// resampling each side independently with replacement.
///
/// Non-finite values are dropped first (as everywhere in this module). `None`
/// if either side is then empty, if `iterations` is 0 or `confidence` is not
/// in (0, 1), or if some resample's baseline median is 0 (the relative change
/// is undefined there, and silently skipping such resamples would bias the
/// interval). Deterministic for a given seed: each iteration draws the
/// baseline resample, then the candidate resample, from one xoshiro256** stream.
///
/// The bounds are the type-7 `α/2` and `1 − α/2` percentiles of the resampled
/// deltas. With very few requests the median of a resample can take only a
/// handful of values, so the interval is coarse and tends to be too narrow;
/// with one request per side it collapses to the point estimate.
pub fn bootstrap_delta_ci(
    baseline: &[f64],
    candidate: &[f64],
    cfg: &BootstrapConfig,
) -> Option<Interval> {
    if !(cfg.confidence > 0.0 && cfg.confidence < 1.0) {
        return None;
    }
    let deltas =
        independent_median_deltas(&sorted_finite(baseline), &sorted_finite(candidate), cfg)?;
    let alpha = 1.0 - cfg.confidence;
    Some(Interval {
        low: percentile_sorted(&deltas, alpha / 2.0)?,
        high: percentile_sorted(&deltas, 1.0 - alpha / 2.0)?,
        confidence: cfg.confidence,
    })
}

/// The sorted resampled median deltas behind [`bootstrap_delta_ci`], from
/// sorted finite sides. `None` as there (confidence is not used here).
pub(super) fn independent_median_deltas(
    base: &[f64],
    cand: &[f64],
    cfg: &BootstrapConfig,
) -> Option<Vec<f64>> {
    if base.is_empty() || cand.is_empty() || cfg.iterations == 0 {
        return None;
    }
    let mut rng = Xoshiro256::new(cfg.seed);
    let mut base_side = Resampler::new(base);
    let mut cand_side = Resampler::new(cand);
    let mut deltas = Vec::with_capacity(cfg.iterations);
    for _ in 0..cfg.iterations {
        let mb = base_side.median(&mut rng);
        let mc = cand_side.median(&mut rng);
        deltas.push(delta_percent(mb, mc)?);
    }
    deltas.sort_unstable_by(f64::total_cmp);
    Some(deltas)
}

/// [`rank_sampled_median`] for any quantile `q`: the resample's q-quantile
/// has rank ≈ `Binomial`-driven, normal with mean `n·q` and s.d. `√(n·q(1−q))`.
pub(super) fn rank_sampled_quantile(sorted: &[f64], q: f64, rng: &mut Xoshiro256) -> f64 {
    let n = sorted.len() as f64;
    let z = standard_normal(rng);
    let j = (n * q + z * (n * q * (1.0 - q)).sqrt()).floor();
    sorted[j.clamp(0.0, n - 1.0) as usize]
}

/// From this many values on, a resample's median is drawn by its rank
/// (see [`rank_sampled_median`]) instead of by drawing the resample: O(1)
/// instead of O(n) per iteration, which turns a 1M-request compare from
/// minutes into well under a second. Below it, the exact method is cheap.
pub const RANK_SAMPLING_MIN_N: usize = 20_000;

/// One side of the bootstrap, with the method fit for its size.
enum Resampler<'a> {
    /// Draw each resample in full; `counts` is the reused draw-count buffer.
    Exact { sorted: &'a [f64], counts: Vec<u32> },
    /// Draw each resample's median by its rank.
    Ranked(&'a [f64]),
}

impl<'a> Resampler<'a> {
    fn new(sorted: &'a [f64]) -> Self {
        if sorted.len() >= RANK_SAMPLING_MIN_N {
            Resampler::Ranked(sorted)
        } else {
            Resampler::Exact {
                sorted,
                counts: vec![0; sorted.len()],
            }
        }
    }

    fn median(&mut self, rng: &mut Xoshiro256) -> f64 {
        match self {
            Resampler::Exact { sorted, counts } => resampled_median(sorted, counts, rng),
            Resampler::Ranked(sorted) => rank_sampled_median(sorted, rng),
        }
    }
}

/// Median of a with-replacement resample of `sorted`, drawn by its rank.
///
/// The resample has at least `k + 1` values ≤ `sorted[k]` with probability
/// `P(Binomial(n, (k+1)/n) > n/2)`, so the resample median's rank `J` in
/// `sorted` has that distribution; for large n its CDF is the normal one
/// with mean `n/2` and s.d. `√n/2` (de Moivre–Laplace; the error is
/// O(1/√n) in probability, far below the Monte Carlo error of the bounds at
/// n ≥ [`RANK_SAMPLING_MIN_N`]). An even-n resample median is the mean of
/// two adjacent resample order statistics; taking `sorted[J]` for it moves
/// the value by one spacing, O(1/n), against an interval width of O(1/√n).
fn rank_sampled_median(sorted: &[f64], rng: &mut Xoshiro256) -> f64 {
    let n = sorted.len() as f64;
    let z = standard_normal(rng);
    let j = (n / 2.0 + z * n.sqrt() / 2.0).floor();
    sorted[j.clamp(0.0, n - 1.0) as usize]
}

/// One N(0, 1) draw (Box–Muller, cosine branch; `1 − u` keeps ln away from 0).
fn standard_normal(rng: &mut Xoshiro256) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Median of one with-replacement resample of `sorted`.
///
/// A resample of sorted data is fully described by how often each index was
/// drawn, so we count draws and walk the counts to the middle rank: O(n) with
/// no comparisons, cheaper than materialising the resample and running
/// `select_nth_unstable` on it. `counts` is a reused buffer of `sorted.len()`.
fn resampled_median(sorted: &[f64], counts: &mut [u32], rng: &mut Xoshiro256) -> f64 {
    let n = sorted.len();
    counts.fill(0);
    for _ in 0..n {
        counts[rng.below(n as u64) as usize] += 1;
    }
    // Order statistics (0-based) that define the median: n/2 for odd n,
    // n/2 − 1 and n/2 for even n.
    let upper_rank = n / 2;
    let lower_rank = if n.is_multiple_of(2) {
        upper_rank - 1
    } else {
        upper_rank
    };
    let mut seen = 0usize;
    let mut lower = None;
    for (i, &c) in counts.iter().enumerate() {
        seen += c as usize;
        if lower.is_none() && seen > lower_rank {
            lower = Some(sorted[i]);
        }
        if seen > upper_rank {
            // Same interpolation as percentile_sorted(…, 0.5), bit for bit.
            let lower = lower.unwrap_or(sorted[i]);
            return if n.is_multiple_of(2) {
                lerp(lower, sorted[i], 0.5)
            } else {
                sorted[i]
            };
        }
    }
    unreachable!("counts sum to n > upper_rank")
}

/// Requests per side that should shrink the CI's half-width to about
/// `threshold_percent / 2`, enough to resolve an "equivalent" verdict when
/// the true change is within ±threshold/2 (and "regressed" beyond 1.5×).
///
/// Approximation: a median's sampling error falls as 1/√n, and the delta's
/// variance as `1/n_baseline + 1/n_candidate` (equal spread assumed on both
/// sides). So with half-width `h` now,
/// `n = n_eff × (h / (threshold/2))²` per side, where
/// `n_eff = 2 / (1/n_baseline + 1/n_candidate)` is the equal-split size with
/// the same precision as the current pair (just n when both sides have n).
/// Rounded up, and at least 2. A rough guide, not a power analysis: below
/// ~10 requests per side the bootstrap of a median is coarse and usually too
/// narrow, so the figure is then an underestimate.
///
/// `None` when either side has fewer than 2 finite values (no observed
/// spread to scale), or when the threshold is not positive or the CI is unusable.
pub fn requests_to_resolve(
    baseline: &[f64],
    candidate: &[f64],
    ci: &Interval,
    threshold_percent: f64,
) -> Option<usize> {
    let nb = baseline.iter().filter(|x| x.is_finite()).count();
    let nc = candidate.iter().filter(|x| x.is_finite()).count();
    if nb < 2 || nc < 2 || !(threshold_percent > 0.0 && threshold_percent.is_finite()) {
        return None;
    }
    let h = ci.half_width();
    if !(h.is_finite() && h >= 0.0) {
        return None;
    }
    // 2 / (1/nb + 1/nc), written so that equal sides give exactly n.
    let n_eff = 2.0 * nb as f64 * nc as f64 / (nb + nc) as f64;
    let needed = (n_eff * (h / (threshold_percent / 2.0)).powi(2)).ceil();
    // Float-to-int `as` saturates, so an absurd answer becomes usize::MAX.
    Some((needed as usize).max(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Direction, Verdict, median, verdict};

    /// Reference: SplitMix64 outputs for seed 1234567 as published with
    /// Java's SplittableRandom / Vigna's splitmix64.c (rechecked with a
    /// 10-line Python port).
    #[test]
    fn splitmix64_reference_vector() {
        let mut r = SplitMix64::new(1_234_567);
        let want = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    /// Reference: xoshiro256** from state [1, 2, 3, 4], the vector in the
    /// `rand_xoshiro` crate's tests (rechecked with a Python port of xoshiro256starstar.c).
    #[test]
    fn xoshiro256starstar_reference_vector() {
        let mut r = Xoshiro256::from_state([1, 2, 3, 4]);
        let want = [
            11520u64,
            0,
            1509978240,
            1215971899390074240,
            1216172134540287360,
            607988272756665600,
            16172922978634559625,
            8476171486693032832,
            10595114339597558777,
            2904607092377533576,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Xoshiro256::new(7);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[r.below(6) as usize] += 1;
        }
        // Expected 10 000 each, sd ≈ 91; 600 is > 6 sd.
        for c in counts {
            assert!((9_400..=10_600).contains(&c), "{counts:?}");
        }
        assert_eq!(r.below(1), 0);
        let x = r.next_f64();
        assert!((0.0..1.0).contains(&x));
    }

    /// Deterministic noisy samples around `center`: mean of four uniforms
    /// (roughly normal), scaled to ±`spread`.
    fn sample(n: usize, center: f64, spread: f64, seed: u64) -> Vec<f64> {
        let mut r = Xoshiro256::new(seed);
        (0..n)
            .map(|_| {
                let u: f64 = (0..4).map(|_| r.next_f64()).sum::<f64>() / 4.0;
                center + (u - 0.5) * 2.0 * spread
            })
            .collect()
    }

    #[test]
    fn resampled_median_agrees_with_median() {
        // A resample that draws every index once is the sample itself; check
        // the walk on many random resamples against materialising them.
        let mut r = Xoshiro256::new(3);
        for n in [1usize, 2, 3, 4, 7, 10] {
            let sorted = sorted_finite(&sample(n, 50.0, 10.0, n as u64));
            let mut counts = vec![0; n];
            for _ in 0..200 {
                let mut twin = r.clone();
                let got = resampled_median(&sorted, &mut counts, &mut r);
                let drawn: Vec<f64> = (0..n)
                    .map(|_| sorted[twin.below(n as u64) as usize])
                    .collect();
                assert_eq!(got, median(&drawn).unwrap(), "n={n}");
            }
        }
    }

    #[test]
    fn same_seed_same_interval_other_seed_differs() {
        let b = sample(40, 100.0, 10.0, 1);
        let c = sample(40, 103.0, 10.0, 2);
        let cfg = BootstrapConfig::default();
        let a1 = bootstrap_delta_ci(&b, &c, &cfg).unwrap();
        let a2 = bootstrap_delta_ci(&b, &c, &cfg).unwrap();
        assert_eq!(a1, a2);
        let other = BootstrapConfig { seed: 99, ..cfg };
        assert_ne!(a1, bootstrap_delta_ci(&b, &c, &other).unwrap());
        assert_eq!(a1.confidence, 0.95);
    }

    #[test]
    fn clearly_shifted_data_brackets_the_true_delta() {
        // Candidate latency 10% higher, noise ±4%.
        let b = sample(200, 100.0, 4.0, 11);
        let c = sample(200, 110.0, 4.0, 12);
        let ci = bootstrap_delta_ci(&b, &c, &BootstrapConfig::default()).unwrap();
        assert!(ci.contains(10.0), "{ci:?}");
        assert!(ci.low > 5.0, "{ci:?}");
        assert!(ci.contains(median_delta_percent(&b, &c).unwrap()));
        assert_eq!(
            verdict(Direction::LowerIsBetter, &ci, 5.0),
            Verdict::Regressed
        );
        // The same numbers as a rate: 10% more throughput is an improvement
        // beyond the band when the whole interval is past 5%.
        assert_eq!(
            verdict(Direction::HigherIsBetter, &ci, 5.0),
            Verdict::Improved
        );
    }

    #[test]
    fn identical_distributions_give_an_interval_containing_zero() {
        let b = sample(100, 100.0, 10.0, 21);
        let c = sample(100, 100.0, 10.0, 22);
        let ci = bootstrap_delta_ci(&b, &c, &BootstrapConfig::default()).unwrap();
        assert!(ci.contains(0.0), "{ci:?}");
        let same = bootstrap_delta_ci(&b, &b, &BootstrapConfig::default()).unwrap();
        assert!(
            same.contains(0.0) && same.low < 0.0 && same.high > 0.0,
            "{same:?}"
        );
    }

    #[test]
    fn three_requests_cannot_resolve_five_percent() {
        // The seed's capacity-120k cell: 3 requests per side, ~3% noise.
        let b = [1000.0, 1030.0, 975.0];
        let c = [1020.0, 990.0, 1050.0];
        let ci = bootstrap_delta_ci(&b, &c, &BootstrapConfig::default()).unwrap();
        assert_eq!(
            verdict(Direction::LowerIsBetter, &ci, 5.0),
            Verdict::Inconclusive
        );
        let n = requests_to_resolve(&b, &c, &ci, 5.0).unwrap();
        assert!(n > 3, "{n} {ci:?}");
    }

    #[test]
    fn single_values_collapse_to_the_point_delta() {
        let ci = bootstrap_delta_ci(&[100.0], &[90.0], &BootstrapConfig::default()).unwrap();
        assert_eq!((ci.low, ci.high), (-10.0, -10.0));
    }

    #[test]
    fn bootstrap_none_cases() {
        let cfg = BootstrapConfig::default();
        assert_eq!(bootstrap_delta_ci(&[], &[1.0], &cfg), None);
        assert_eq!(bootstrap_delta_ci(&[1.0], &[f64::NAN], &cfg), None);
        assert_eq!(bootstrap_delta_ci(&[0.0, 0.0, 1.0], &[1.0], &cfg), None);
        let zero = BootstrapConfig {
            iterations: 0,
            ..cfg
        };
        assert_eq!(bootstrap_delta_ci(&[1.0], &[1.0], &zero), None);
        let bad = BootstrapConfig {
            confidence: 1.0,
            ..cfg
        };
        assert_eq!(bootstrap_delta_ci(&[1.0], &[1.0], &bad), None);
    }

    #[test]
    fn bootstrap_half_width_shrinks_like_one_over_sqrt_n() {
        // The premise of requests_to_resolve: 4× the requests, ~half the width.
        let cfg = BootstrapConfig::default();
        let w = |n: usize| {
            let ci = bootstrap_delta_ci(
                &sample(n, 100.0, 10.0, 31),
                &sample(n, 100.0, 10.0, 32),
                &cfg,
            )
            .unwrap();
            ci.half_width()
        };
        let ratio = w(100) / w(400);
        assert!((1.5..2.7).contains(&ratio), "ratio {ratio}");
    }

    #[test]
    fn requests_to_resolve_scales_quadratically() {
        let ci = |h: f64| Interval {
            low: 1.0 - h,
            high: 1.0 + h,
            confidence: 0.95,
        };
        let ten = [1.0; 10];
        // Half-width equal to the threshold: twice the target, 4× the requests.
        assert_eq!(requests_to_resolve(&ten, &ten, &ci(5.0), 5.0), Some(40));
        // Already at the target half-width: the current size.
        assert_eq!(requests_to_resolve(&ten, &ten, &ci(2.5), 5.0), Some(10));
        // Unequal sides: n_eff = 2 / (1/10 + 1/40) = 16.
        let forty = [1.0; 40];
        assert_eq!(requests_to_resolve(&ten, &forty, &ci(5.0), 5.0), Some(64));
        // No spread at all still asks for a minimum of 2.
        assert_eq!(requests_to_resolve(&ten, &ten, &ci(0.0), 5.0), Some(2));
        assert_eq!(requests_to_resolve(&[1.0], &ten, &ci(5.0), 5.0), None);
        assert_eq!(requests_to_resolve(&ten, &ten, &ci(5.0), 0.0), None);
        assert_eq!(requests_to_resolve(&ten, &ten, &ci(f64::NAN), 5.0), None);
    }

    /// The rank method and the exact resample agree on large samples: same
    /// data, same confidence, independent random streams.
    #[test]
    fn rank_sampling_agrees_with_exact_resampling() {
        let n = RANK_SAMPLING_MIN_N + 1;
        // Skewed, like latencies: exp of a normal-ish sum.
        let b: Vec<f64> = sample(n, 0.0, 1.0, 51)
            .iter()
            .map(|x| 100.0 * x.exp())
            .collect();
        let c: Vec<f64> = sample(n, 0.02, 1.0, 52)
            .iter()
            .map(|x| 100.0 * x.exp())
            .collect();
        let (bs, cs) = (sorted_finite(&b), sorted_finite(&c));
        let iterations = 400;
        let deltas = |exact: bool, seed: u64| -> Vec<f64> {
            let mut rng = Xoshiro256::new(seed);
            let (mut cb, mut cc) = (vec![0u32; n], vec![0u32; n]);
            let mut d: Vec<f64> = (0..iterations)
                .map(|_| {
                    let (mb, mc) = if exact {
                        (
                            resampled_median(&bs, &mut cb, &mut rng),
                            resampled_median(&cs, &mut cc, &mut rng),
                        )
                    } else {
                        (
                            rank_sampled_median(&bs, &mut rng),
                            rank_sampled_median(&cs, &mut rng),
                        )
                    };
                    delta_percent(mb, mc).unwrap()
                })
                .collect();
            d.sort_unstable_by(f64::total_cmp);
            d
        };
        let (exact, ranked) = (deltas(true, 1), deltas(false, 2));
        let sd = |d: &[f64]| {
            let m = d.iter().sum::<f64>() / d.len() as f64;
            (d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (d.len() - 1) as f64).sqrt()
        };
        let (se, sr) = (sd(&exact), sd(&ranked));
        // 400 draws estimate an s.d. to about ±7% (1σ); allow 25%.
        assert!((sr / se - 1.0).abs() < 0.25, "s.d. exact {se}, ranked {sr}");
        let (me, mr) = (median(&exact).unwrap(), median(&ranked).unwrap());
        assert!(
            (me - mr).abs() < 0.5 * se,
            "centres {me} vs {mr}, s.d. {se}"
        );
        // The public function takes the rank path at this size and brackets the point delta.
        let ci = bootstrap_delta_ci(&b, &c, &BootstrapConfig::default()).unwrap();
        let point = median_delta_percent(&b, &c).unwrap();
        assert!(ci.low < point && point < ci.high, "{ci:?} vs {point}");
    }

    #[test]
    fn normal_draws_have_mean_0_and_sd_1() {
        let mut rng = Xoshiro256::new(9);
        let z: Vec<f64> = (0..200_000).map(|_| standard_normal(&mut rng)).collect();
        let m = z.iter().sum::<f64>() / z.len() as f64;
        let v = z.iter().map(|x| (x - m).powi(2)).sum::<f64>() / z.len() as f64;
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.01, "{m} {v}");
        let tail = z.iter().filter(|x| x.abs() > 1.959_964).count() as f64 / z.len() as f64;
        assert!((tail - 0.05).abs() < 0.003, "{tail}");
    }
}
