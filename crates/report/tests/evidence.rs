//! The evidence gate on synthetic run artifacts: the design decides the
//! resampling, a one-pass-per-side pair is held back by the drift floor,
//! interleaved data decides, and verify catches an edited outcome.

use std::collections::BTreeMap;

use infergate_report::artifact::{RunArtifact, Schedule, metric};
use infergate_report::fixtures;
use infergate_report::stats::{GateOutcome, Resampling, Xoshiro256};
use infergate_report::{
    self as report, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS, Policy, compare, verify,
};

/// Latencies ×(1 + shift%) with ±8 % noise, in `blocks` blocks that share a
/// drift `drift[k]` (the same on both sides: interleaved).
fn values(n: usize, blocks: usize, shift: f64, drift: &[f64], seed: u64) -> (Vec<f64>, Vec<u32>) {
    let mut r = Xoshiro256::new(seed);
    let per = n / blocks;
    (0..n)
        .map(|i| {
            let k = (i / per).min(blocks - 1);
            let noise = 1.0 + 0.08 * (2.0 * r.next_f64() - 1.0);
            (
                1000.0 * (1.0 + shift / 100.0) * (1.0 + drift[k]) * noise,
                k as u32,
            )
        })
        .unzip()
}

fn artifact(
    label: &str,
    n: usize,
    blocks: usize,
    shift: f64,
    drift: &[f64],
    schedule: Option<Schedule>,
    seed: u64,
) -> RunArtifact {
    let mut samples = BTreeMap::new();
    let mut clusters = BTreeMap::new();
    for (k, base, dir) in [
        (metric::TTFT_MS, 1.0, 1.0),
        (metric::E2E_MS, 3.0, 1.0),
        (metric::DECODE_TOK_S, 0.2, -1.0),
    ] {
        let (v, c) = values(n, blocks, dir * shift, drift, seed + k.len() as u64);
        samples.insert(
            k.to_string(),
            v.iter().map(|x| x * base).collect::<Vec<_>>(),
        );
        clusters.insert(k.to_string(), c);
    }
    let mut cell = fixtures::cell("c1", fixtures::shape(1000, 1, n), samples, Some(1000.0));
    if blocks > 1 {
        cell.sample_clusters = clusters;
    }
    let provenance = fixtures::bare_provenance(label, "s", "0");
    RunArtifact {
        schedule,
        ..fixtures::artifact(provenance, vec![cell], vec![])
    }
}

fn policy() -> Policy {
    let mut p = Policy {
        source: "tests: defaults with 2000 iterations".into(),
        ..Policy::default()
    };
    p.bootstrap.iterations = 2000;
    p
}

const DRIFT: [f64; 8] = [0.0, 0.08, -0.05, 0.11, -0.02, 0.06, -0.09, 0.03];

#[test]
fn interleaved_same_runtime_passes_and_verifies() {
    let b = artifact("b", 96, 8, 0.0, &DRIFT, Some(Schedule::Interleaved), 1);
    let c = artifact("c", 96, 8, 0.0, &DRIFT, Some(Schedule::Interleaved), 2);
    let r = compare(&b, &c, &policy()).unwrap();
    let d = verify(&r.to_value());
    assert!(d.is_empty(), "{d:#?}");
    let stats = r.statistics.as_ref().unwrap();
    assert_eq!(
        stats.design.as_ref().unwrap().resampling,
        Resampling::Paired
    );
    assert_eq!(stats.family_wise.as_ref().unwrap().gating_pairs, 3);
    assert_eq!(
        r.performance_outcome,
        Some(GateOutcome::Pass),
        "{:#?}",
        r.gates
    );
    // No turnover run: the strict gate fails, so not qualified, but not inconclusive either.
    assert_eq!(report::exit_code(&r), EXIT_FAIL);
}

#[test]
fn interleaved_fifteen_percent_regression_fails() {
    let b = artifact("b", 96, 8, 0.0, &DRIFT, Some(Schedule::Interleaved), 1);
    let c = artifact("c", 96, 8, 15.0, &DRIFT, Some(Schedule::Interleaved), 2);
    let r = compare(&b, &c, &policy()).unwrap();
    assert_eq!(r.performance_outcome, Some(GateOutcome::Fail));
    let m = r
        .cells
        .get("c1")
        .unwrap()
        .metrics
        .get("ttft_p50_ms")
        .unwrap();
    let e = m.evidence.as_ref().unwrap();
    assert!(e.lower_bound_percent > 5.0, "{e:?}");
    assert!(verify(&r.to_value()).is_empty());
}

#[test]
fn single_passes_are_held_back_by_the_drift_floor() {
    // The same runtime twice, one pass each, at different times (drift +8 %).
    let b = artifact("b", 24, 1, 0.0, &[0.0], None, 1);
    let c = artifact("c", 24, 1, 0.0, &[0.08], None, 2);
    let r = compare(&b, &c, &policy()).unwrap();
    // The point rule would call it a regression; the evidence cannot tell.
    assert!(!r.performance_gate_passed);
    assert_eq!(r.performance_outcome, Some(GateOutcome::Inconclusive));
    assert_eq!(r.qualification, report::QUAL_FAIL_TURNOVER_INCONCLUSIVE);
    let e = r
        .cells
        .get("c1")
        .unwrap()
        .metrics
        .get("ttft_p50_ms")
        .unwrap();
    let e = e.evidence.as_ref().unwrap();
    assert!(e.drift_floor.is_some() && e.unresolvable.is_some(), "{e:?}");
    assert!(r.warnings.iter().any(|w| w.contains("drift")));
    assert!(verify(&r.to_value()).is_empty());
}

#[test]
fn alternating_passes_resample_clusters() {
    let b = artifact(
        "b",
        96,
        8,
        0.0,
        &DRIFT,
        Some(Schedule::AlternatingPasses),
        1,
    );
    let c = artifact(
        "c",
        96,
        8,
        0.0,
        &DRIFT,
        Some(Schedule::AlternatingPasses),
        2,
    );
    let r = compare(&b, &c, &policy()).unwrap();
    let d = r.statistics.as_ref().unwrap().design.as_ref().unwrap();
    assert_eq!(d.resampling, Resampling::Clustered);
    let e = r
        .cells
        .get("c1")
        .unwrap()
        .metrics
        .get("ttft_p50_ms")
        .unwrap();
    assert!(e.evidence.as_ref().unwrap().drift_floor.is_none());
}

#[test]
fn exit_codes_are_distinct() {
    let b = artifact("b", 24, 1, 0.0, &[0.0], None, 1);
    let c = artifact("c", 24, 1, 0.0, &[0.0], None, 2);
    let mut p = policy();
    p.gate.drift_sd_percent = 0.0;
    p.turnover.gate = report::TurnoverGateMode::NonInferior;
    let r = compare(&b, &c, &p).unwrap();
    // Without turnover runs the turnover gate fails: exit 1 whatever the evidence.
    assert_eq!(report::exit_code(&r), EXIT_FAIL);
    let mut q = r.clone();
    q.qualification = report::QUAL_INCONCLUSIVE.into();
    assert_eq!(report::exit_code(&q), EXIT_INCONCLUSIVE);
    if let Some(g) = q.gates.as_mut() {
        g.qualified = true;
    }
    assert_eq!(report::exit_code(&q), EXIT_PASS);
}

fn paths_of(v: &serde_json::Value) -> Vec<String> {
    verify(v).into_iter().map(|d| d.path).collect()
}

#[test]
fn verify_catches_an_edited_outcome() {
    let b = artifact("b", 96, 8, 0.0, &DRIFT, Some(Schedule::Interleaved), 1);
    let c = artifact("c", 96, 8, 15.0, &DRIFT, Some(Schedule::Interleaved), 2);
    let r = compare(&b, &c, &policy()).unwrap();
    let mut v = r.to_value();
    v["cells"]["c1"]["metrics"]["ttft_p50_ms"]["evidence"]["outcome"] = "pass".into();
    let paths = paths_of(&v);
    assert!(
        paths.contains(&"cells.c1.metrics.ttft_p50_ms.evidence.outcome".to_string()),
        "{paths:?}"
    );
    let mut v = r.to_value();
    v["gates"]["performance_evidence"]["outcome"] = "pass".into();
    v["performance_outcome"] = "pass".into();
    let paths = paths_of(&v);
    assert!(
        paths.contains(&"gates.performance_evidence.outcome".to_string()),
        "{paths:?}"
    );
    let mut v = r.to_value();
    v["qualification"] = "pass".into();
    let paths = paths_of(&v);
    assert!(paths.contains(&"qualification".to_string()), "{paths:?}");
}

#[test]
fn an_early_look_too_small_to_bound_says_so_and_decides_nothing() {
    let b = artifact("b", 96, 8, 0.0, &DRIFT, Some(Schedule::Interleaved), 1);
    let c = artifact("c", 96, 8, 0.0, &DRIFT, Some(Schedule::Interleaved), 2);
    // O'Brien-Fleming at look 1 of 40: a share of alpha that 1 − α loses.
    let look = infergate_report::design::Look::planned(1, 40, policy().gate.spending);
    let r = infergate_report::compare_with_look(&b, &c, &policy(), Some(&look)).unwrap();
    assert_eq!(r.performance_outcome, Some(GateOutcome::Inconclusive));
    let gate = r
        .gates
        .as_ref()
        .unwrap()
        .performance_evidence
        .as_ref()
        .unwrap();
    assert!(
        gate.parts
            .iter()
            .all(|x| x.reason.contains("too small for any bound")),
        "{gate:#?}"
    );
    assert!(verify(&r.to_value()).is_empty());
}
