//! Embeddings across runtimes: the same inputs, in the same batches, sent
//! to each side's `/v1/embeddings`; per input the cosine of the two
//! vectors, and a quality-gate part that holds the lowest and the mean
//! cosine to the policy's floors.
//!
//! The floors are thresholds, not estimates: a runtime's vectors for fixed
//! inputs are deterministic, so there is no sampling error to bound. They
//! are set from an A/A pair of the reference engine's two profiles
//! (docs/features.md, "Embeddings"), where batching alone moves vectors.

use serde::{Deserialize, Serialize};

use crate::stats::{GateOutcome, median};

/// How a quality-gate part of an embeddings workload is named, before the
/// workload's name.
pub const PART_PREFIX: &str = "quality: embeddings ";

/// One embeddings workload as one side ran it (a run artifact's
/// `embeddings[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingRun {
    pub name: String,
    /// Inputs embedded, in order; `vectors` has one entry per input.
    pub inputs: usize,
    /// Inputs per request (a capture's replay: the most any request had).
    pub batch: usize,
    /// SHA-256 of the inputs (each followed by a newline): two sides that
    /// embedded different texts do not compare.
    pub inputs_sha256: String,
    /// Requests sent (`ceil(inputs / batch)`, or a capture's own), and how many failed.
    pub requests: usize,
    pub failed: usize,
    /// Failed requests per failure class.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub failures_by_class: std::collections::BTreeMap<String, usize>,
    /// Milliseconds from send to the whole response, per succeeded request.
    pub latency_ms: Vec<f64>,
    /// The vectors' length (the first returned), when any came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<usize>,
    /// Per input its vector; none where its request failed.
    pub vectors: Vec<Option<Vec<f32>>>,
}

/// One workload both sides embedded, as the gate judges it: what
/// `compare` takes from the two runs and `verify` from a report.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingPair {
    pub name: String,
    /// Per input the cosine of the two sides' vectors; none where a side
    /// has no vector or the lengths differ.
    pub cosines: Vec<Option<f64>>,
    pub baseline_missing: usize,
    pub candidate_missing: usize,
    pub baseline_dimension: Option<usize>,
    pub candidate_dimension: Option<usize>,
    pub baseline_latency_p50_ms: Option<f64>,
    pub candidate_latency_p50_ms: Option<f64>,
    /// Inputs (0-based) whose candidate vector is all zeros where the
    /// baseline's is not: a broken candidate, whose cosine is undefined.
    pub candidate_zero: Vec<usize>,
    /// Inputs whose vectors are all zeros on both sides: nothing to compare.
    pub both_zero: Vec<usize>,
}

/// The report's account of one workload's agreement (`quality.embeddings[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingAgreement {
    pub name: String,
    pub inputs: usize,
    /// Inputs with a vector on both sides, of equal length.
    pub compared: usize,
    pub baseline_missing: usize,
    pub candidate_missing: usize,
    pub baseline_dimension: Option<usize>,
    pub candidate_dimension: Option<usize>,
    pub cosine_min: Option<f64>,
    pub cosine_mean: Option<f64>,
    /// The policy's floors, as applied.
    pub cosine_min_floor: f64,
    pub cosine_mean_floor: f64,
    /// Median milliseconds per request on each side (shown, not gated).
    pub baseline_latency_p50_ms: Option<f64>,
    pub candidate_latency_p50_ms: Option<f64>,
    pub outcome: GateOutcome,
    /// Per input, the cosine (null where not compared).
    pub cosines: Vec<Option<f64>>,
    /// [`EmbeddingPair::candidate_zero`]: these fail the workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_zero: Vec<usize>,
    /// [`EmbeddingPair::both_zero`]: named, not failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub both_zero: Vec<usize>,
}

/// The cosine of two vectors; none when their lengths differ or one is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    let norm = (aa * bb).sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| (ab / norm).clamp(-1.0, 1.0))
}

/// The workloads both sides embedded, by name, in the baseline's order.
pub fn pairs(baseline: &[EmbeddingRun], candidate: &[EmbeddingRun]) -> Vec<EmbeddingPair> {
    baseline
        .iter()
        .filter_map(|b| {
            let c = candidate.iter().find(|c| c.name == b.name)?;
            Some(pair_of(b, c))
        })
        .collect()
}

fn pair_of(b: &EmbeddingRun, c: &EmbeddingRun) -> EmbeddingPair {
    let cosines = b
        .vectors
        .iter()
        .zip(&c.vectors)
        .map(|(x, y)| cosine(x.as_deref()?, y.as_deref()?))
        .collect();
    let missing = |r: &EmbeddingRun| r.vectors.iter().filter(|v| v.is_none()).count();
    let zero = |v: &Option<Vec<f32>>| v.as_deref().map(is_zero);
    let (mut candidate_zero, mut both_zero) = (Vec::new(), Vec::new());
    for (i, (x, y)) in b.vectors.iter().zip(&c.vectors).enumerate() {
        match (zero(x), zero(y)) {
            (Some(false), Some(true)) => candidate_zero.push(i),
            (Some(true), Some(true)) => both_zero.push(i),
            _ => {}
        }
    }
    EmbeddingPair {
        name: b.name.clone(),
        cosines,
        baseline_missing: missing(b),
        candidate_missing: missing(c),
        baseline_dimension: b.dimension,
        candidate_dimension: c.dimension,
        baseline_latency_p50_ms: median(&b.latency_ms),
        candidate_latency_p50_ms: median(&c.latency_ms),
        candidate_zero,
        both_zero,
    }
}

/// A vector with no non-zero component (an empty one has none to point).
fn is_zero(v: &[f32]) -> bool {
    v.iter().all(|&x| x == 0.0)
}

/// Why two sides' runs of one workload do not compare (different inputs or
/// batches); none when they do.
pub fn mismatch(b: &EmbeddingRun, c: &EmbeddingRun) -> Option<String> {
    (b.inputs_sha256 != c.inputs_sha256 || b.batch != c.batch || b.inputs != c.inputs).then(|| {
        format!(
            "embeddings `{}` differ: {} inputs in batches of {} (sha256 {}) vs {} in batches of {} (sha256 {})",
            b.name,
            b.inputs,
            b.batch,
            short(&b.inputs_sha256),
            c.inputs,
            c.batch,
            short(&c.inputs_sha256)
        )
    })
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// A pair judged against the floors: it fails when the dimensions differ,
/// the candidate lacks a vector the baseline has, returns all zeros where
/// the baseline's vector is not (no direction at all: broken, not merely
/// far), or a cosine (the lowest, or the mean) falls below its floor; it is
/// inconclusive when no input has both vectors; else it passes. Inputs all
/// zeros on both sides are named but do not fail: the two runtimes agree
/// there and no angle exists to hold to a floor.
pub fn judge(p: &EmbeddingPair, min_floor: f64, mean_floor: f64) -> EmbeddingAgreement {
    let got: Vec<f64> = p.cosines.iter().flatten().copied().collect();
    let cosine_min = got.iter().copied().reduce(f64::min);
    let cosine_mean = (!got.is_empty()).then(|| got.iter().sum::<f64>() / got.len() as f64);
    let dims_differ = matches!(
        (p.baseline_dimension, p.candidate_dimension),
        (Some(b), Some(c)) if b != c
    );
    let lost = p.candidate_missing > p.baseline_missing || !p.candidate_zero.is_empty();
    let below =
        cosine_min.is_some_and(|m| m < min_floor) || cosine_mean.is_some_and(|m| m < mean_floor);
    let outcome = if dims_differ || lost || below {
        GateOutcome::Fail
    } else if got.is_empty() {
        GateOutcome::Inconclusive
    } else {
        GateOutcome::Pass
    };
    EmbeddingAgreement {
        name: p.name.clone(),
        inputs: p.cosines.len(),
        compared: got.len(),
        baseline_missing: p.baseline_missing,
        candidate_missing: p.candidate_missing,
        baseline_dimension: p.baseline_dimension,
        candidate_dimension: p.candidate_dimension,
        cosine_min,
        cosine_mean,
        cosine_min_floor: min_floor,
        cosine_mean_floor: mean_floor,
        baseline_latency_p50_ms: p.baseline_latency_p50_ms,
        candidate_latency_p50_ms: p.candidate_latency_p50_ms,
        outcome,
        cosines: p.cosines.clone(),
        candidate_zero: p.candidate_zero.clone(),
        both_zero: p.both_zero.clone(),
    }
}

impl EmbeddingAgreement {
    /// The pair it was judged from (`verify` judges it again).
    pub fn pair(&self) -> EmbeddingPair {
        EmbeddingPair {
            name: self.name.clone(),
            cosines: self.cosines.clone(),
            baseline_missing: self.baseline_missing,
            candidate_missing: self.candidate_missing,
            baseline_dimension: self.baseline_dimension,
            candidate_dimension: self.candidate_dimension,
            baseline_latency_p50_ms: self.baseline_latency_p50_ms,
            candidate_latency_p50_ms: self.candidate_latency_p50_ms,
            candidate_zero: self.candidate_zero.clone(),
            both_zero: self.both_zero.clone(),
        }
    }

    pub fn reason(&self) -> String {
        let f = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.5}"));
        let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1} ms"));
        let mut s = format!(
            "cosine over {} of {} inputs: lowest {} (floor {}), mean {} (floor {}); per request {} → {}",
            self.compared,
            self.inputs,
            f(self.cosine_min),
            self.cosine_min_floor,
            f(self.cosine_mean),
            self.cosine_mean_floor,
            ms(self.baseline_latency_p50_ms),
            ms(self.candidate_latency_p50_ms),
        );
        if let (Some(b), Some(c)) = (self.baseline_dimension, self.candidate_dimension)
            && b != c
        {
            s += &format!("; dimensions differ: {b} vs {c}");
        }
        if self.baseline_missing + self.candidate_missing > 0 {
            s += &format!(
                "; inputs without a vector: baseline {}, candidate {}",
                self.baseline_missing, self.candidate_missing
            );
        }
        if !self.candidate_zero.is_empty() {
            s += &format!(
                "; candidate vector all zeros where the baseline's is not: {}",
                inputs_named(&self.candidate_zero)
            );
        }
        if !self.both_zero.is_empty() {
            s += &format!(
                "; all zeros on both sides, nothing to compare: {}",
                inputs_named(&self.both_zero)
            );
        }
        s
    }
}

/// Most inputs named one by one in a reason before the rest is counted.
const INPUTS_NAMED: usize = 8;

/// `input 0, 2, 5` (0-based, in order), the rest counted.
fn inputs_named(inputs: &[usize]) -> String {
    let named: Vec<String> = inputs
        .iter()
        .take(INPUTS_NAMED)
        .map(ToString::to_string)
        .collect();
    let mut s = format!(
        "{} {}",
        if inputs.len() == 1 { "input" } else { "inputs" },
        named.join(", ")
    );
    if inputs.len() > INPUTS_NAMED {
        s += &format!(" and {} more", inputs.len() - INPUTS_NAMED);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, vectors: Vec<Option<Vec<f32>>>) -> EmbeddingRun {
        EmbeddingRun {
            name: name.into(),
            inputs: vectors.len(),
            batch: 2,
            inputs_sha256: "00".into(),
            requests: vectors.len().div_ceil(2),
            failed: 0,
            failures_by_class: Default::default(),
            latency_ms: vec![10.0, 12.0],
            dimension: vectors.iter().flatten().next().map(Vec::len),
            vectors,
        }
    }

    fn pair(b: &EmbeddingRun, c: &EmbeddingRun) -> EmbeddingPair {
        pairs(std::slice::from_ref(b), std::slice::from_ref(c)).remove(0)
    }

    #[test]
    fn cosine_is_the_angle_and_refuses_what_has_none() {
        assert_eq!(cosine(&[1.0, 0.0], &[2.0, 0.0]), Some(1.0));
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).unwrap().abs() < 1e-12);
        assert_eq!(cosine(&[1.0, 1.0], &[-1.0, -1.0]), Some(-1.0));
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[], &[]), None);
    }

    #[test]
    fn each_floor_fails_on_its_own_and_a_lost_vector_or_dimension_fails() {
        let same = run("e", vec![Some(vec![1.0, 0.0]), Some(vec![0.0, 1.0])]);
        let a = judge(&pair(&same, &same), 0.9, 0.95);
        assert_eq!(a.outcome, GateOutcome::Pass, "{}", a.reason());
        assert_eq!((a.cosine_min, a.compared), (Some(1.0), 2));

        // One input at 0.8, one at 1: the lowest fails a 0.85 floor, the
        // mean (0.9) passes a 0.85 one and fails a 0.95 one.
        let tilted = run("e", vec![Some(vec![0.8, 0.6]), Some(vec![0.0, 1.0])]);
        let p = &pair(&same, &tilted);
        assert_eq!(judge(p, 0.85, 0.5).outcome, GateOutcome::Fail);
        assert_eq!(judge(p, 0.5, 0.85).outcome, GateOutcome::Pass);
        assert_eq!(judge(p, 0.5, 0.95).outcome, GateOutcome::Fail);
        assert!(judge(p, 0.85, 0.5).reason().contains("lowest 0.80000"));

        let lost = run("e", vec![Some(vec![1.0, 0.0]), None]);
        let a = judge(&pair(&same, &lost), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Fail);
        assert!(a.reason().contains("candidate 1"), "{}", a.reason());

        let wide = run(
            "e",
            vec![Some(vec![1.0, 0.0, 0.0]), Some(vec![0.0, 1.0, 0.0])],
        );
        let a = judge(&pair(&same, &wide), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Fail);
        assert!(a.reason().contains("dimensions differ: 2 vs 3"));

        let none = run("e", vec![None, None]);
        let a = judge(&pair(&none, &none), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Inconclusive);
    }

    /// An all-zero candidate vector against a real baseline one fails,
    /// naming the inputs; all zeros on both sides is named, not failed.
    #[test]
    fn zero_candidate_vectors_fail_and_zeros_on_both_sides_are_named() {
        let real = run(
            "e",
            vec![
                Some(vec![1.0, 0.0]),
                Some(vec![0.0, 1.0]),
                Some(vec![0.6, 0.8]),
                Some(vec![0.8, 0.6]),
            ],
        );
        let zeros = run("e", vec![Some(vec![0.0, 0.0]); 4]);
        let a = judge(&pair(&real, &zeros), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Fail, "{}", a.reason());
        assert_eq!(a.candidate_zero, vec![0, 1, 2, 3]);
        assert!(
            a.reason().contains(
                "candidate vector all zeros where the baseline's is not: inputs 0, 1, 2, 3"
            ),
            "{}",
            a.reason()
        );
        // One zero among real ones fails too, though the others agree.
        let mut one = real.clone();
        one.vectors[2] = Some(vec![0.0, 0.0]);
        let a = judge(&pair(&real, &one), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Fail, "{}", a.reason());
        assert!(a.reason().contains("not: input 2"), "{}", a.reason());
        // Zeros on both sides: said, not failed (the others decide).
        let mut b = real.clone();
        b.vectors[2] = Some(vec![0.0, 0.0]);
        let a = judge(&pair(&b, &one), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Pass, "{}", a.reason());
        assert_eq!((a.both_zero.clone(), a.compared), (vec![2], 3));
        assert!(
            a.reason()
                .contains("all zeros on both sides, nothing to compare: input 2"),
            "{}",
            a.reason()
        );
        let a = judge(&pair(&zeros, &zeros), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Inconclusive, "{}", a.reason());
        // A baseline of zeros is not the candidate's failure.
        let a = judge(&pair(&zeros, &real), 0.5, 0.5);
        assert_eq!(a.outcome, GateOutcome::Inconclusive, "{}", a.reason());
        // The report keeps what judges it again.
        let a = judge(&pair(&real, &one), 0.5, 0.5);
        let again: EmbeddingAgreement =
            serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(judge(&again.pair(), 0.5, 0.5), a);
    }

    #[test]
    fn a_report_keeps_what_judges_it_again() {
        let b = run("e", vec![Some(vec![1.0, 0.2]), Some(vec![0.3, 1.0])]);
        let c = run("e", vec![Some(vec![0.9, 0.3]), Some(vec![0.2, 1.0])]);
        let a = judge(&pair(&b, &c), 0.9, 0.95);
        let again: EmbeddingAgreement =
            serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(judge(&again.pair(), 0.9, 0.95), a);
    }

    #[test]
    fn different_inputs_or_batches_are_named() {
        let a = run("e", vec![None]);
        let mut b = a.clone();
        assert_eq!(mismatch(&a, &b), None);
        b.batch = 4;
        assert!(mismatch(&a, &b).unwrap().contains("batches of 2"));
    }
}
