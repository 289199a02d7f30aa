//! Seeded simulations of the quality gate's two parts (error rates at the
//! levels a qualification with a few gating pairs uses) and its rules.
//! `cargo test -p infergate-report quality -- --nocapture` prints the
//! tables docs/quality.md quotes.

use super::*;
use crate::agreement::CrossRuntime;
use crate::stats::Xoshiro256;

/// One-sided levels of a qualification with 4 gating pairs at α = 0.05.
const A: f64 = 0.05 / 4.0;

fn policy(rate: bool) -> QualityPolicy {
    QualityPolicy {
        cross_runtime: if rate {
            CrossRuntime::Rate
        } else {
            CrossRuntime::NearTie
        },
        ..Default::default()
    }
}

fn refs(pairs: usize, hard: usize) -> ReferenceComparison {
    ReferenceComparison {
        cross_runtime: CrossRuntime::Rate,
        near_tie_nats: 0.5,
        pairs,
        identical: pairs - hard,
        near_tie: 0,
        hard,
        text_only: 0,
        prompts: Vec::new(),
    }
}

/// Outcome shares (pass, fail, inconclusive) of the hard-divergence part
/// over `trials` qualifications of `pairs` pairs at true share `p`.
fn hard_rates(seed: u64, pairs: usize, p: f64, trials: usize) -> (f64, f64, f64) {
    let mut rng = Xoshiro256::new(seed);
    let mut counts = [0usize; 3];
    for _ in 0..trials {
        let hard = (0..pairs).filter(|_| rng.next_f64() < p).count();
        let h = hard_divergence(&refs(pairs, hard), &policy(true), A, A);
        counts[match h.outcome {
            GateOutcome::Pass => 0,
            GateOutcome::Fail => 1,
            GateOutcome::Inconclusive => 2,
        }] += 1;
    }
    let t = trials as f64;
    (
        counts[0] as f64 / t,
        counts[1] as f64 / t,
        counts[2] as f64 / t,
    )
}

/// Answer strings of one simulated task: item i is answered right by the
/// baseline with probability `p`; the candidate loses a right answer with
/// probability `loss` and gains a wrong one with probability `gain`.
fn answers(rng: &mut Xoshiro256, items: usize, p: f64, loss: f64, gain: f64) -> (String, String) {
    let (mut b, mut c) = (String::new(), String::new());
    for _ in 0..items {
        let right = rng.next_f64() < p;
        let u = rng.next_f64();
        let cand = if right { u >= loss } else { u < gain };
        b.push(if right { '1' } else { '0' });
        c.push(if cand { '1' } else { '0' });
    }
    (b, c)
}

/// (pass, fail, inconclusive, coverage of the one-sided upper bound) of
/// the accuracy part, margin 5 points.
fn accuracy_rates(seed: u64, items: usize, loss: f64, gain: f64, trials: usize) -> [f64; 4] {
    let mut rng = Xoshiro256::new(seed);
    let p = 0.65;
    let truth = 100.0 * (p * loss - (1.0 - p) * gain);
    let mut counts = [0usize; 4];
    for _ in 0..trials {
        let (b, c) = answers(&mut rng, items, p, loss, gain);
        let t = task_accuracy("t", &b, &c, 5.0, A, A);
        counts[match t.outcome {
            GateOutcome::Pass => 0,
            GateOutcome::Fail => 1,
            GateOutcome::Inconclusive => 2,
        }] += 1;
        counts[3] += usize::from(t.upper_bound_points >= truth);
    }
    counts.map(|k| k as f64 / trials as f64)
}

#[test]
fn hard_divergence_share_simulated_error_rates() {
    println!("hard-divergence share, margin 10 %, one-sided α = {A}");
    println!("| pairs | true share | pass | fail | inconclusive |");
    // A/A: the same runtime never diverges hard.
    let (pass, fail, _) = hard_rates(1, 44, 0.0, 2000);
    println!(
        "| 44 | 0 % | {pass:.3} | {fail:.3} | {:.3} |",
        1.0 - pass - fail
    );
    assert_eq!(fail, 0.0);
    assert_eq!(pass, 1.0, "0 of 44 passes a 10 % margin at α = {A}");
    // A benign change with an occasional hard flip: never a false fail.
    for (pairs, p) in [(44, 0.02), (100, 0.05), (200, 0.08)] {
        let (pass, fail, inc) = hard_rates(2, pairs, p, 2000);
        println!(
            "| {pairs} | {:.0} % | {pass:.3} | {fail:.3} | {inc:.3} |",
            p * 100.0
        );
        assert!(fail <= A, "false fail {fail} at {p} with {pairs} pairs");
    }
    // At the margin itself the false fail is the level (Monte Carlo error
    // of 2000 trials: 3 s.e. ≈ 0.0075).
    let (pass, fail, inc) = hard_rates(2, 200, 0.10, 2000);
    println!("| 200 | 10 % | {pass:.3} | {fail:.3} | {inc:.3} |");
    assert!(fail <= A + 0.0075, "false fail {fail} at the margin");
    // A broken runtime (the wrong RoPE base measured 14 hard of 20).
    for (pairs, p, power) in [(20, 0.5, 0.95), (44, 0.3, 0.85), (100, 0.3, 0.95)] {
        let (pass, fail, inc) = hard_rates(3, pairs, p, 2000);
        println!(
            "| {pairs} | {:.0} % | {pass:.3} | {fail:.3} | {inc:.3} |",
            p * 100.0
        );
        assert!(fail >= power, "power {fail} at {p} with {pairs} pairs");
        assert_eq!(pass, 0.0);
    }
}

#[test]
fn hard_divergence_bounds_cover_the_true_share() {
    let mut rng = Xoshiro256::new(4);
    for (pairs, p) in [(20, 0.1), (44, 0.05), (100, 0.3)] {
        let trials = 2000;
        let (mut up, mut low) = (0, 0);
        for _ in 0..trials {
            let hard = (0..pairs).filter(|_| rng.next_f64() < p).count();
            let h = hard_divergence(&refs(pairs, hard), &policy(true), 0.05, 0.05);
            up += usize::from(h.upper_bound_percent >= p * 100.0);
            low += usize::from(h.lower_bound_percent <= p * 100.0);
        }
        let (up, low) = (up as f64 / trials as f64, low as f64 / trials as f64);
        // Clopper-Pearson is conservative; 3 Monte Carlo s.e. below 0.95.
        assert!(up >= 0.935 && low >= 0.935, "{pairs} at {p}: {up} {low}");
    }
}

#[test]
fn accuracy_drop_simulated_error_rates() {
    println!("task accuracy drop, margin 5 points, one-sided α = {A}, baseline accuracy 65 %");
    println!(
        "| items | loss | gain | true drop | pass | fail | inconclusive | upper-bound coverage |"
    );
    let row = |items: usize, loss: f64, gain: f64, r: [f64; 4]| {
        println!(
            "| {items} | {loss} | {gain} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} |",
            100.0 * (0.65 * loss - 0.35 * gain),
            r[0],
            r[1],
            r[2],
            r[3]
        )
    };
    // A/A: identical answers, and a benign change that flips 3 % each way.
    for (items, loss, gain) in [(60, 0.0, 0.0), (60, 0.03, 0.055), (200, 0.03, 0.055)] {
        let r = accuracy_rates(5, items, loss, gain, 2000);
        row(items, loss, gain, r);
        assert!(r[1] <= A, "false fail {} at {items} items", r[1]);
        assert!(r[3] >= 1.0 - 2.0 * A, "coverage {}", r[3]);
    }
    // Identical answers: with no discordant item of n the upper bound is
    // d / (1 − d) = z² / n, so passing a 5-point margin at α = 0.0125
    // (z = 2.24) takes 96 items; 60 never do.
    let r = accuracy_rates(5, 100, 0.0, 0.0, 500);
    row(100, 0.0, 0.0, r);
    assert_eq!(r[0], 1.0, "A/A of 100 items passes");
    // A real loss: 30 % of right answers lost (a 19.5-point drop).
    for (items, power) in [(60, 0.80), (100, 0.98)] {
        let r = accuracy_rates(6, items, 0.30, 0.0, 2000);
        row(items, 0.30, 0.0, r);
        assert!(r[1] >= power, "power {} at {items} items", r[1]);
    }
    // At the margin: the upper bound covers at its level, so the gate
    // passes a drop of exactly the margin at most α of the time.
    let r = accuracy_rates(7, 200, 0.077, 0.0, 2000);
    row(200, 0.077, 0.0, r);
    assert!(r[3] >= 1.0 - A && r[0] <= A, "{r:?}");
}

/// Why the bounds are Tango's: Newcombe's paired interval lets a runtime
/// that only loses answers through at the margin more often than α.
#[test]
fn newcombes_paired_interval_undercovers_where_the_score_bounds_hold() {
    let mut rng = Xoshiro256::new(7);
    let (trials, items, loss) = (2000, 200, 0.077);
    let truth = 0.65 * loss;
    let (mut newcombe, mut score) = (0, 0);
    for _ in 0..trials {
        let (b, c) = answers(&mut rng, items, 0.65, loss, 0.0);
        let t = table(&b, &c);
        newcombe += usize::from(crate::stats::paired_difference(&t, 1.0 - 2.0 * A).1 >= truth);
        score += usize::from(drop_bounds_score(&t, A, A).1 >= truth);
    }
    let (newcombe, score) = (
        newcombe as f64 / trials as f64,
        score as f64 / trials as f64,
    );
    println!(
        "one-sided {:.4} upper bound at a 5-point drop, 200 items: Newcombe covers {newcombe:.3}, Tango {score:.3}",
        1.0 - A
    );
    assert!(newcombe < 1.0 - A && score >= 1.0 - A, "{newcombe} {score}");
}

#[test]
fn the_hard_share_gates_only_under_rate_and_tasks_always() {
    let r = refs(20, 14);
    let answers = "10".repeat(60);
    let tasks = vec![("caps".to_string(), answers.clone(), answers)];
    assert_eq!(gating_parts(1, Some(&r), &policy(false)), 1);
    assert_eq!(gating_parts(1, Some(&r), &policy(true)), 2);
    let (q, g) = judge(Some(&r), &tasks, &[], &[], &policy(false), A, A).unwrap();
    let g = g.unwrap();
    assert_eq!(
        g.parts.len(),
        1,
        "near_tie: the share is reported, not gated"
    );
    assert_eq!(g.outcome, GateOutcome::Pass);
    let h = q.hard_divergence.unwrap();
    assert!(!h.gating);
    assert_eq!(h.outcome, GateOutcome::Fail);
    let (_, g) = judge(Some(&r), &tasks, &[], &[], &policy(true), A, A).unwrap();
    let g = g.unwrap();
    assert_eq!(g.outcome, GateOutcome::Fail);
    assert_eq!(g.parts[0].subject, "quality: hard divergences");
    assert!(
        g.parts[0].reason.starts_with("14 hard of 20"),
        "{}",
        g.parts[0].reason
    );
    assert!(judge(None, &[], &[], &[], &policy(true), A, A).is_none());
}

#[test]
fn an_unanswered_item_is_wrong_and_named() {
    let t = task_accuracy("t", "11110", "1-1-0", 5.0, A, A);
    assert_eq!((t.baseline_correct, t.candidate_correct), (4, 2));
    assert_eq!((t.baseline_unanswered, t.candidate_unanswered), (0, 2));
    assert_eq!(t.table.baseline_only, 2);
    assert!((t.drop_points - 40.0).abs() < 1e-9);
}

#[test]
fn an_undecided_part_says_how_many_items_decide_it() {
    // 20 items answered alike: too few to pass a 5-point margin.
    let b = "1".repeat(12) + &"0".repeat(8);
    let t = task_accuracy("t", &b, &b, 5.0, A, A);
    assert_eq!(t.outcome, GateOutcome::Inconclusive);
    let n = t.items_to_resolve.expect("more items decide it");
    assert!(n > 20);
    let scaled = t.table.scaled(n);
    let (l, u) = drop_bounds(&scaled, A, A);
    assert_ne!(outcome(l, u, 5.0), GateOutcome::Inconclusive);
    let h = hard_divergence(&refs(10, 0), &policy(true), A, A);
    assert_eq!(h.outcome, GateOutcome::Inconclusive);
    let n = h.pairs_to_resolve.unwrap();
    let (_, u) = hard_bounds(0, n, A, A);
    assert!(u <= 10.0);
    let (_, u) = hard_bounds(0, n - 1, A, A);
    assert!(u > 10.0, "the smallest such n");
}

#[test]
fn a_failed_quality_gate_fails_the_qualification_and_is_named() {
    use crate::gate::{self, QUAL_FAIL_PERFORMANCE, QUAL_INCONCLUSIVE, QUAL_PASS};
    assert_eq!(
        gate::with_quality(QUAL_PASS, true, Some(GateOutcome::Fail)),
        (gate::QUAL_FAIL_QUALITY.to_string(), false)
    );
    assert_eq!(
        gate::with_quality(QUAL_INCONCLUSIVE, false, Some(GateOutcome::Fail)),
        (gate::QUAL_FAIL_QUALITY.to_string(), false)
    );
    assert_eq!(
        gate::with_quality(QUAL_FAIL_PERFORMANCE, false, Some(GateOutcome::Fail)).0,
        format!("{QUAL_FAIL_PERFORMANCE}; quality gate failed")
    );
    assert_eq!(
        gate::with_quality(QUAL_PASS, true, Some(GateOutcome::Inconclusive)),
        (gate::QUAL_INCONCLUSIVE_QUALITY.to_string(), false)
    );
    assert_eq!(
        gate::with_quality(QUAL_PASS, true, Some(GateOutcome::Pass)),
        (QUAL_PASS.to_string(), true)
    );
    assert_eq!(
        gate::with_quality(QUAL_PASS, true, None),
        (QUAL_PASS.to_string(), true)
    );
}

/// How many requests a feature part needs before every answer delivered on
/// both sides can pass: with no discordant pair, Tango's one-sided upper
/// bound is about z² / (n + z²), so n ≥ z² (1 − m) / m. The numbers
/// docs/features.md quotes, and the A/A pair of `tests/features.rs` (20
/// requests pass 25 points, not 20).
#[test]
fn a_feature_part_passes_an_a_a_pair_only_with_enough_requests() {
    let smallest = |margin: f64, alpha: f64| {
        (1..1000u64)
            .find(|&n| {
                let all = "1".repeat(n as usize);
                let p = FeaturePair {
                    workload: "w".into(),
                    feature: "structured_output".into(),
                    baseline: all.clone(),
                    candidate: all,
                };
                feature_rate(&p, margin, alpha, alpha).rate.outcome == GateOutcome::Pass
            })
            .unwrap()
    };
    let (at_default, alone) = (smallest(5.0, A), smallest(5.0, 0.05));
    eprintln!("5 points: {at_default} requests at {A}, {alone} at 0.05");
    assert!((90..=100).contains(&at_default), "{at_default}");
    assert!((48..=60).contains(&alone), "{alone}");
    assert!(smallest(25.0, A) <= 20 && smallest(20.0, A) > 20);
    // A part that lost every answer fails at once, whatever the margin.
    let p = FeaturePair {
        workload: "w".into(),
        feature: "structured_output".into(),
        baseline: "1".repeat(20),
        candidate: "j".repeat(20),
    };
    let f = feature_rate(&p, 25.0, A, A);
    assert_eq!(f.rate.outcome, GateOutcome::Fail);
    assert_eq!(f.candidate_marks.get("invalid_json"), Some(&20));
}

/// A feature neither side delivered on any request (a reasoning workload
/// against two runtimes without reasoning, tools a model never calls) is
/// undecided and says so, however many requests: no drop is not evidence
/// that the feature works. One side delivering is judged as usual.
#[test]
fn a_feature_neither_side_delivered_is_undecided_and_named() {
    let pair = |b: &str, c: &str| FeaturePair {
        workload: "w".into(),
        feature: "reasoning".into(),
        baseline: b.repeat(200),
        candidate: c.repeat(200),
    };
    let none = feature_rate(&pair("m", "m"), 5.0, A, A);
    assert_eq!(none.rate.outcome, GateOutcome::Inconclusive);
    assert_eq!(none.rate.items_to_resolve, None);
    assert!(
        none.reason().contains("did not engage"),
        "{}",
        none.reason()
    );
    assert_eq!(none.baseline_marks.get("no_reasoning"), Some(&200));
    assert_eq!(
        feature_rate(&pair("1", "m"), 5.0, A, A).rate.outcome,
        GateOutcome::Fail
    );
    assert_eq!(
        feature_rate(&pair("m", "1"), 5.0, A, A).rate.outcome,
        GateOutcome::Pass
    );
}

/// Each answer's first called function, compared with the baseline's on
/// the same request: another offered function is not delivered, and the
/// pairing of its own output gives the same marks again (what `verify`
/// does with a report's).
#[test]
fn the_same_function_as_the_baseline_is_what_a_tool_function_part_counts() {
    let run = |marks: &str| TurnoverRun {
        features: [(TOOL_FUNCTION.to_string(), marks.to_string())].into(),
        ..crate::fixtures::turnover(0, marks.len(), 0)
    };
    let pairs = feature_pairs(&[run("AABn-A")], &[run("ABBAAn")]);
    let p = &pairs[0];
    assert_eq!(
        (p.baseline.as_str(), p.candidate.as_str()),
        ("111n-1", "1f1ffn")
    );
    let again = feature_pairs(&[run(&p.baseline)], &[run(&p.candidate)]);
    assert_eq!(again[0], *p);
    let f = feature_rate(p, 5.0, A, A);
    assert_eq!((f.rate.baseline_correct, f.rate.candidate_correct), (4, 2));
}

/// A report judged by a policy's own embedding floors, one workload's its
/// own, verifies: `verify` reads the floors each pair was judged by from the
/// report, and an edited floor is named.
#[test]
fn embedding_floors_of_the_policy_are_what_verify_judges_again() {
    use crate::embedding::EmbeddingRun;
    let workload = |name: &str, second: [f32; 2]| EmbeddingRun {
        name: name.into(),
        inputs: 2,
        batch: 1,
        inputs_sha256: "00".into(),
        requests: 2,
        failed: 0,
        failures_by_class: Default::default(),
        latency_ms: vec![10.0, 12.0],
        dimension: Some(2),
        vectors: vec![Some(vec![1.0, 0.0]), Some(second.to_vec())],
    };
    let run = |label: &str, second: [f32; 2]| {
        let mut a = crate::fixtures::artifact(
            crate::fixtures::provenance(label, &format!("sha256:{label}")),
            vec![crate::fixtures::cell(
                "c",
                crate::fixtures::shape(128, 1, 8),
                crate::fixtures::spread_samples(8, (100.0, 400.0, 50.0), 0),
                Some(128.0),
            )],
            Vec::new(),
        );
        a.embeddings = vec![workload("alone", second), workload("batched", second)];
        a
    };
    // Each workload's second input has cosine 0.8 across the two sides:
    // below the default floor (0.85) and `alone`'s own (0.9), above the
    // policy's 0.5 for the rest.
    let (b, c) = (run("base", [0.0, 1.0]), run("cand", [0.6, 0.8]));
    let policy = crate::policy::Policy::from_toml_str(
        "[quality]\nembedding_cosine_min = 0.5\nembedding_cosine_mean_min = 0.8\n\
         [[quality.embeddings]]\nworkload = \"alone\"\ncosine_min = 0.9\n",
        "p.toml",
    )
    .unwrap();
    let report = crate::compare::compare(&b, &c, &policy).unwrap();
    let judged: Vec<(&str, f64, f64, GateOutcome)> = report
        .quality
        .as_ref()
        .unwrap()
        .embeddings
        .iter()
        .map(|e| {
            (
                e.name.as_str(),
                e.cosine_min_floor,
                e.cosine_mean_floor,
                e.outcome,
            )
        })
        .collect();
    assert_eq!(
        judged,
        vec![
            ("alone", 0.9, 0.8, GateOutcome::Fail),
            ("batched", 0.5, 0.8, GateOutcome::Pass)
        ]
    );
    assert!(
        !report.warnings.iter().any(|w| w.contains("judged nothing")),
        "{:?}",
        report.warnings
    );
    let mut json = serde_json::to_value(&report).unwrap();
    assert_eq!(crate::verify::verify(&json), vec![]);
    // A floor for a workload the runs do not have (a typo) is named.
    let typo = crate::policy::Policy::from_toml_str(
        "[[quality.embeddings]]\nworkload = \"alon\"\ncosine_min = 0.9\n",
        "p.toml",
    )
    .unwrap();
    let warned = crate::compare::compare(&b, &c, &typo).unwrap().warnings;
    assert!(
        warned
            .iter()
            .any(|w| w.contains("workload `alon` name no embeddings workload")),
        "{warned:?}"
    );
    json["quality"]["embeddings"][1]["cosine_min_floor"] = serde_json::json!(0.9);
    let named = crate::verify::verify(&json);
    assert!(
        named
            .iter()
            .any(|d| d.path == "quality.embeddings[1].outcome"),
        "{named:?}"
    );
}

/// A pair of synthetic runs whose candidate answers every input with a zero
/// vector against a normal baseline: the embeddings part fails, naming the
/// inputs, the qualification fails on quality, and the report verifies.
#[test]
fn zero_candidate_embeddings_fail_the_qualification_naming_the_inputs() {
    use crate::embedding::EmbeddingRun;
    let workload = |vectors: Vec<Vec<f32>>| EmbeddingRun {
        name: "e".into(),
        inputs: vectors.len(),
        batch: 2,
        inputs_sha256: "00".into(),
        requests: vectors.len().div_ceil(2),
        failed: 0,
        failures_by_class: Default::default(),
        latency_ms: vec![10.0, 12.0],
        dimension: Some(2),
        vectors: vectors.into_iter().map(Some).collect(),
    };
    let run = |label: &str, vectors: Vec<Vec<f32>>| {
        let mut a = crate::fixtures::artifact(
            crate::fixtures::provenance(label, &format!("sha256:{label}")),
            vec![crate::fixtures::cell(
                "c",
                crate::fixtures::shape(128, 1, 8),
                crate::fixtures::spread_samples(8, (100.0, 400.0, 50.0), 0),
                Some(128.0),
            )],
            Vec::new(),
        );
        a.embeddings = vec![workload(vectors)];
        a
    };
    let real = vec![
        vec![1.0, 0.0],
        vec![0.0, 1.0],
        vec![0.6, 0.8],
        vec![0.8, 0.6],
    ];
    let b = run("base", real);
    let c = run("cand", vec![vec![0.0, 0.0]; 4]);
    let report = crate::compare::compare(&b, &c, &crate::policy::Policy::default()).unwrap();
    let e = &report.quality.as_ref().unwrap().embeddings[0];
    assert_eq!(e.outcome, GateOutcome::Fail, "{}", e.reason());
    assert_eq!(e.candidate_zero, vec![0, 1, 2, 3]);
    let gate = report.gates.as_ref().unwrap().quality.as_ref().unwrap();
    let part = gate
        .parts
        .iter()
        .find(|p| p.subject == "quality: embeddings e")
        .expect("the embeddings part");
    assert_eq!(part.outcome, GateOutcome::Fail);
    assert!(
        part.reason
            .contains("all zeros where the baseline's is not: inputs 0, 1, 2, 3"),
        "{}",
        part.reason
    );
    assert!(!crate::gate::qualified(&report), "{}", report.qualification);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(crate::verify::verify(&json), vec![]);
}
