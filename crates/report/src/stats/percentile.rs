//! Order statistics: percentiles, median, per-metric summaries.

use serde::{Deserialize, Serialize};

/// How every percentile in infergate is computed; written into artifacts so a
/// reader need not guess.
pub const PERCENTILE_METHOD: &str = "linear interpolation between closest ranks \
(Hyndman-Fan type 7, numpy's default 'linear'); p50 of an even count is the mean of \
the two middle values; non-finite values (NaN, ±inf) are excluded and n counts only \
the values used";

/// The finite values of `values`, sorted ascending.
///
/// NaN and ±inf are dropped: neither is a measurement (an infinite rate means a
/// zero-length interval upstream), and keeping them would make means and
/// deltas undefined.
pub fn sorted_finite(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_unstable_by(f64::total_cmp);
    v
}

/// Type-7 percentile of an ascending, NaN-free slice; `q` in `[0, 1]`.
///
/// `None` when the slice is empty or `q` is outside `[0, 1]` (or NaN).
/// Matches `numpy.percentile(x, 100*q)` including its interpolation rounding.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    debug_assert!(
        sorted.is_sorted_by(|a, b| a <= b),
        "percentile_sorted needs ascending, NaN-free input"
    );
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(lerp(sorted[lo], sorted[hi], h - lo as f64))
}

/// numpy's `_lerp`: interpolating from the nearer end keeps the result exact at
/// `t = 0` and `t = 1` and bit-identical to numpy in between.
pub(super) fn lerp(a: f64, b: f64, t: f64) -> f64 {
    // Guard equal ends so that inf..inf does not turn into inf - inf = NaN.
    if t == 0.0 || a == b {
        return a;
    }
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// Type-7 percentile of unsorted values (copies and sorts; non-finite values excluded).
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    percentile_sorted(&sorted_finite(values), q)
}

/// Median of the finite values; `None` when there are none.
/// For an even count it is the mean of the two middle values.
pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 0.5)
}

/// n and order statistics of one metric over a cell's requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// n, p50, p90, p99, mean, min and max of the finite values; `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let v = sorted_finite(values);
    let (&min, &max) = (v.first()?, v.last()?);
    Some(Summary {
        n: v.len(),
        p50: percentile_sorted(&v, 0.5)?,
        p90: percentile_sorted(&v, 0.9)?,
        p99: percentile_sorted(&v, 0.99)?,
        mean: mean_finite(&v),
        min,
        max,
    })
}

/// Mean with Neumaier-compensated summation, so long runs of similar latencies
/// do not lose their low digits.
fn mean_finite(v: &[f64]) -> f64 {
    let (mut sum, mut comp) = (0.0f64, 0.0f64);
    for &x in v {
        let t = sum + x;
        comp += if sum.abs() >= x.abs() {
            (sum - t) + x
        } else {
            (x - t) + sum
        };
        sum = t;
    }
    (sum + comp) / v.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const QS: [f64; 7] = [0.0, 0.1, 0.25, 0.5, 0.9, 0.99, 1.0];

    /// Expected values from numpy 2.4.6 `np.percentile(a, 100*q)` (default method).
    fn check(values: &[f64], expected: [f64; 7]) {
        let sorted = sorted_finite(values);
        for (q, want) in QS.iter().zip(expected) {
            let got = percentile_sorted(&sorted, *q).unwrap();
            assert!(
                (got - want).abs() <= 1e-12,
                "q={q}: got {got}, numpy {want}"
            );
        }
    }

    #[test]
    fn percentiles_match_numpy_linear() {
        check(
            &[15.0, 20.0, 35.0, 40.0, 50.0],
            [15.0, 17.0, 20.0, 35.0, 46.0, 49.6, 50.0],
        );
        check(
            &[1.0, 2.0, 3.0, 4.0],
            [1.0, 1.3, 1.75, 2.5, 3.7, 3.9699999999999998, 4.0],
        );
        check(
            &[7.5, 1.25, 3.0, 9.0, 2.0, 4.75],
            [1.25, 1.625, 2.25, 3.875, 8.25, 8.925, 9.0],
        );
        check(
            &[3.1, 0.2, 9.9, 4.4, 5.5, 7.0, 1.1, 8.8, 2.6, 6.3],
            [0.2, 1.01, 2.725, 4.95, 8.91, 9.801, 9.9],
        );
        check(&[42.0], [42.0; 7]);
    }

    #[test]
    fn p50_of_even_count_is_mean_of_middle_two() {
        assert_eq!(median(&[10.0, 20.0]), Some(15.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[1.0, 100.0, 3.0, 7.0, 5.0, 9.0]), Some(6.0));
        // Odd count: the middle value itself.
        assert_eq!(median(&[9.0, 1.0, 5.0]), Some(5.0));
    }

    #[test]
    fn empty_input_and_bad_q_give_none() {
        assert_eq!(percentile_sorted(&[], 0.5), None);
        assert_eq!(percentile_sorted(&[1.0], -0.01), None);
        assert_eq!(percentile_sorted(&[1.0], 1.01), None);
        assert_eq!(percentile_sorted(&[1.0], f64::NAN), None);
        assert_eq!(median(&[]), None);
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn non_finite_values_are_excluded() {
        assert_eq!(median(&[f64::NAN, 1.0, 3.0, f64::INFINITY]), Some(2.0));
        assert_eq!(median(&[f64::NAN, f64::NEG_INFINITY]), None);
        let s = summarize(&[2.0, f64::NAN, 4.0]).unwrap();
        assert_eq!((s.n, s.p50, s.mean, s.min, s.max), (2, 3.0, 3.0, 2.0, 4.0));
    }

    #[test]
    fn summarize_matches_numpy() {
        let v = [3.1, 0.2, 9.9, 4.4, 5.5, 7.0, 1.1, 8.8, 2.6, 6.3];
        let s = summarize(&v).unwrap();
        assert_eq!(s.n, 10);
        assert!((s.p50 - 4.95).abs() < 1e-12);
        assert!((s.p90 - 8.91).abs() < 1e-12);
        assert!((s.p99 - 9.801).abs() < 1e-12);
        assert!((s.mean - 4.89).abs() < 1e-12);
        assert_eq!((s.min, s.max), (0.2, 9.9));
    }

    #[test]
    fn mean_keeps_low_digits() {
        // Naive summation of 1e16 + 1 + ... loses every 1.0.
        let mut v = vec![1e16];
        v.extend(std::iter::repeat_n(1.0, 1000));
        v.push(-1e16);
        let s = summarize(&v).unwrap();
        assert_eq!(s.mean, 1000.0 / 1002.0);
    }
}
