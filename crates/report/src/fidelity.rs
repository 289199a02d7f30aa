//! A capture's replay beside the capture (`cells[].fidelity` of a run that
//! replayed an `infergate capture` trace): each quantity's distribution as
//! captured and as replayed, side by side, and one distance between them.
//!
//! The distance is the largest relative difference of the p10, p50 and p90:
//! `|replayed − captured| / max(|captured|, |replayed|)`, in [0, 1], 0 when
//! both are 0. It reads in proportion ("the replay's p90 prompt is 8 %
//! short"). A two-sample KS statistic was not taken: lengths are narrow and
//! discrete, and a replay whose prompts are all 1 % longer than captured has
//! a KS of 1, the same as one that is twice as long.

use serde::{Deserialize, Serialize};

use crate::stats::{percentile_sorted, sorted_finite};

/// One side's distribution: how many values, and their p10, p50, p90 and
/// mean (absent when there are none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub n: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p10: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
}

impl Side {
    /// The finite values of `values` (the others are not measurements).
    pub fn of(values: &[f64]) -> Side {
        let s = sorted_finite(values);
        let q = |p| percentile_sorted(&s, p);
        Side {
            n: s.len(),
            p10: q(0.1),
            p50: q(0.5),
            p90: q(0.9),
            mean: (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64),
        }
    }

    fn quantiles(&self) -> [Option<f64>; 3] {
        [self.p10, self.p50, self.p90]
    }
}

/// One quantity, captured and replayed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub captured: Side,
    pub replayed: Side,
    /// The largest relative difference of the p10, p50 and p90 (see the
    /// module); absent when either side has no value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<f64>,
}

/// `|a − b| / max(|a|, |b|)`: 0 when both are 0.
pub fn relative_difference(a: f64, b: f64) -> f64 {
    let scale = a.abs().max(b.abs());
    if scale == 0.0 {
        0.0
    } else {
        (a - b).abs() / scale
    }
}

/// The captured values beside the replayed ones.
pub fn compare(captured: &[f64], replayed: &[f64]) -> Comparison {
    let (c, r) = (Side::of(captured), Side::of(replayed));
    let distance = c
        .quantiles()
        .into_iter()
        .zip(r.quantiles())
        .map(|(a, b)| Some(relative_difference(a?, b?)))
        .try_fold(0.0f64, |m, d| d.map(|d| m.max(d)));
    Comparison {
        captured: c,
        replayed: r,
        distance,
    }
}

/// A capture's lines the replay did not send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Exchanges that failed when captured (a status other than 2xx, or a zero length).
    pub failed: usize,
    /// Embeddings requests (a trace cell sends chat).
    pub embeddings: usize,
    /// Replayable lines past the cell's `requests`.
    pub not_asked: usize,
}

/// A capture's replay against the capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// The capture's replayable lines, and of them the ones this cell sent.
    pub lines: usize,
    pub sent: usize,
    pub left_out: LeftOut,
    /// Sent requests that failed: in the inter-arrival times, not in the
    /// token counts or the cache share.
    pub replay_failed: usize,
    /// Captured: the lines' `input_length`; replayed: `usage.prompt_tokens`.
    pub prompt_tokens: Comparison,
    /// Captured: `output_length`; replayed: `usage.completion_tokens`.
    pub output_tokens: Comparison,
    /// Between consecutive arrivals, ms: captured from the lines'
    /// `timestamp` (divided by the cell's speed), replayed from the sends.
    pub inter_arrival_ms: Comparison,
    /// Cached prompt tokens / prompt tokens, per request that reported both.
    pub cache_hit_share: Comparison,
}

impl Fidelity {
    /// Each quantity's row, as the tables name them.
    pub fn rows(&self) -> [(&'static str, &Comparison); 4] {
        [
            ("prompt tokens", &self.prompt_tokens),
            ("output tokens", &self.output_tokens),
            ("inter-arrival ms", &self.inter_arrival_ms),
            ("cache hit share", &self.cache_hit_share),
        ]
    }

    /// A short table: each quantity's n and p10/p50/p90 captured, then
    /// replayed, and the distance; then what was left out.
    pub fn table(&self) -> Vec<String> {
        let num = |x: Option<f64>| match x {
            None => "-".to_string(),
            Some(v) if v.abs() < 10.0 && v.fract() != 0.0 => format!("{v:.2}"),
            Some(v) => format!("{v:.0}"),
        };
        let side = |s: &Side| {
            format!(
                "{:>4} {:>7} {:>7} {:>7}",
                s.n,
                num(s.p10),
                num(s.p50),
                num(s.p90)
            )
        };
        let mut out = vec![format!(
            "{:<17}{:>4} {:>7} {:>7} {:>7} | {:>4} {:>7} {:>7} {:>7} | distance",
            "captured/replayed", "n", "p10", "p50", "p90", "n", "p10", "p50", "p90"
        )];
        for (name, c) in self.rows() {
            out.push(format!(
                "{name:<17}{} | {} | {}",
                side(&c.captured),
                side(&c.replayed),
                c.distance
                    .map_or("-".to_string(), |d| format!("{:.1}%", d * 100.0))
            ));
        }
        let l = &self.left_out;
        out.push(format!(
            "sent {} of {} replayable lines; left out: {} failed, {} embeddings, {} past `requests`; {} replayed requests failed",
            self.sent, self.lines, l.failed, l.embeddings, l.not_asked, self.replay_failed
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distance_is_the_largest_relative_difference_of_the_quantiles() {
        let c = compare(&[100.0, 200.0, 300.0], &[100.0, 220.0, 300.0]);
        assert_eq!(c.captured.n, 3);
        assert_eq!(
            (c.captured.p10, c.captured.p50, c.captured.p90),
            (Some(120.0), Some(200.0), Some(280.0))
        );
        assert_eq!(c.replayed.p50, Some(220.0));
        assert_eq!(c.replayed.mean, Some(620.0 / 3.0));
        // p10: 124 vs 120, p50: 220 vs 200, p90: 284 vs 280.
        let d = c.distance.unwrap();
        assert!((d - 20.0 / 220.0).abs() < 1e-12, "{d}");
        // The same both ways: the distance is symmetric.
        let back = compare(&[100.0, 220.0, 300.0], &[100.0, 200.0, 300.0]);
        assert_eq!(back.distance, c.distance);
        assert_eq!(compare(&[5.0, 6.0], &[5.0, 6.0]).distance, Some(0.0));
    }

    #[test]
    fn an_empty_side_has_no_quantiles_and_no_distance() {
        let c = compare(&[], &[1.0, 2.0]);
        assert_eq!(c.captured, Side::default());
        assert_eq!(c.replayed.n, 2);
        assert_eq!(c.distance, None);
        let both = compare(&[], &[]);
        assert_eq!(
            (both.captured.n, both.replayed.n, both.distance),
            (0, 0, None)
        );
        // Non-finite values are not measurements: none is left.
        assert_eq!(compare(&[f64::NAN], &[1.0]).distance, None);
        let v = serde_json::to_value(both).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"captured": {"n": 0}, "replayed": {"n": 0}})
        );
    }

    #[test]
    fn one_sample_is_its_own_every_quantile() {
        let c = compare(&[40.0], &[50.0]);
        for s in [c.captured, c.replayed] {
            assert_eq!(s.n, 1);
            assert_eq!((s.p10, s.p50), (s.p90, s.mean));
        }
        assert!((c.distance.unwrap() - 0.2).abs() < 1e-12);
        // Zero beside zero is no difference; zero beside anything is all of it.
        assert_eq!(compare(&[0.0], &[0.0]).distance, Some(0.0));
        assert_eq!(compare(&[0.0], &[0.3]).distance, Some(1.0));
    }

    #[test]
    fn the_table_names_every_quantity_and_what_was_left_out() {
        let f = Fidelity {
            lines: 7,
            sent: 6,
            left_out: LeftOut {
                failed: 1,
                embeddings: 2,
                not_asked: 1,
            },
            replay_failed: 0,
            prompt_tokens: compare(&[100.0, 120.0], &[101.0, 119.0]),
            ..Fidelity::default()
        };
        let t = f.table();
        assert_eq!(t.len(), 6);
        assert!(
            t[1].starts_with("prompt tokens") && t[1].ends_with('%'),
            "{}",
            t[1]
        );
        assert!(
            t[4].starts_with("cache hit share") && t[4].ends_with(" -"),
            "{}",
            t[4]
        );
        assert!(
            t[5].contains("1 failed, 2 embeddings, 1 past `requests`"),
            "{}",
            t[5]
        );
    }
}
