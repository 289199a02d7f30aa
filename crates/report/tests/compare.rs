//! `compare` on synthetic run artifacts: reports verify clean, gates follow
//! the policy, and mismatched runs are refused with the difference named.

mod common;

use common::{clean, fast_policy};
use infergate_report::artifact::{CellResult, CellShape, RunArtifact, TurnoverRun, metric};
use infergate_report::fixtures::{self, seed_like, turnover};
use infergate_report::{
    self as report, CompareError, Policy, QUAL_FAIL_PERFORMANCE, QUAL_NOT_BLANKET, QUAL_PASS,
    QUAL_PASS_NON_INFERIOR, Report, TurnoverGateMode, compare, stats, verify,
};
use serde_json::Value;

fn shape(prompt_tokens: u64, requests: usize) -> CellShape {
    fixtures::shape(prompt_tokens, 2, requests)
}

fn cell(
    name: &str,
    prompt: u64,
    n: usize,
    ttft: f64,
    e2e: f64,
    decode: f64,
    phase: usize,
) -> CellResult {
    fixtures::spread_cell(name, prompt, n, (ttft, e2e, decode), phase)
}

fn artifact(
    label: &str,
    digest: &str,
    cells: Vec<CellResult>,
    turnover: Vec<TurnoverRun>,
) -> RunArtifact {
    fixtures::artifact(fixtures::provenance(label, digest), cells, turnover)
}

#[test]
fn seed_like_runs_make_a_report_verify_accepts() {
    let (b, c) = seed_like();
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    let v = clean(&r);

    assert_eq!(v["schema"], "runtime-profile-comparison/v1");
    assert_eq!(
        v["baseline_image"],
        "registry.example/llama-server@sha256:0c06"
    );
    assert!(r.performance_gate_passed);
    assert!(!r.strict_turnover_gate_passed);
    assert_eq!(r.qualification, QUAL_NOT_BLANKET);
    assert_eq!(
        (r.promotion.as_str(), r.human_decision.as_str()),
        ("pending", "pending")
    );

    // Seed field names, plus the additions.
    let m = &v["cells"]["capacity-4k"]["metrics"]["ttft_p50_ms"];
    for key in [
        "baseline",
        "candidate",
        "delta_percent",
        "no_more_than_5_percent_regression",
        "direction",
        "threshold_percent",
        "baseline_n",
        "candidate_n",
        "ci_delta_percent",
        "verdict",
    ] {
        assert!(m.get(key).is_some(), "{key} missing in {m}");
    }
    assert_eq!(m["baseline_n"], 12);
    assert_eq!(m["direction"], "lower_is_better");
    assert_eq!(
        v["cells"]["capacity-4k"]["metrics"]["decode_tok_s_p50"]["direction"],
        "higher_is_better"
    );
    assert_eq!(
        v["cells"]["capacity-4k"]["samples"]["ttft_ms"]["baseline"]
            .as_array()
            .map(Vec::len),
        Some(12)
    );
    assert_eq!(v["cells"]["capacity-4k"]["median_prompt_tokens"], 2997.0);
    for key in [
        "baseline_turnover",
        "candidate_turnover",
        "candidate_turnover_repeat",
        "statistics",
        "gates",
        "provenance",
        "decision",
        "turnover_comparison",
        "policy",
    ] {
        assert!(v.get(key).is_some(), "{key} missing");
    }
    assert!(v.get("candidate_turnover_repeat_2").is_none());
    assert_eq!(v["decision"]["action"], "pending");
    assert_eq!(v["statistics"]["bootstrap"]["iterations"], 2000);
    // Cells keep the artifact's order in the written JSON.
    let text = serde_json::to_string(&r).expect("serializes");
    assert!(text.find("capacity-4k") < text.find("capacity-120k"));
}

#[test]
fn turnover_comparison_shows_the_candidate_beats_the_baseline() {
    let (b, c) = seed_like();
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    assert!(
        !r.strict_turnover_gate_passed,
        "2/60 and 3/60 fail the strict gate"
    );
    let tc = r.turnover_comparison.as_ref().expect("comparison");
    let g = &tc.groups[0];
    let base = g.baseline.as_ref().expect("baseline");
    assert_eq!((base.failed, base.requests), (7, 60));
    let base_rate = base.failure_rate.expect("rate");
    assert_eq!(g.candidate_runs.len(), 2);
    let pooled = g.candidate_pooled.as_ref().expect("pooled");
    assert_eq!((pooled.counts.failed, pooled.counts.requests), (5, 120));
    for run in g.candidate_runs.iter().chain([pooled]) {
        let rate = run.counts.failure_rate.expect("rate");
        assert!(rate < base_rate, "{rate} < {base_rate}");
        let t = run.vs_baseline.expect("Fisher test");
        assert!(t.p_candidate_worse > 0.5, "{t:?}");
        assert!(t.p_candidate_better < t.p_candidate_worse);
        assert!((0.0..=1.0).contains(&t.p_two_sided));
        let ci = run.counts.failure_rate_ci.expect("CI");
        assert!(ci.low <= rate && rate <= ci.high);
        assert_eq!(run.non_inferior, Some(true));
    }
    let gates = r.gates.as_ref().expect("gates");
    assert!(!gates.strict_turnover.passed);
    assert!(gates.non_inferior_turnover.passed);
    assert!(
        gates
            .strict_turnover
            .parts
            .iter()
            .any(|p| p.subject == "candidate_turnover" && p.reason.contains("2 of 60 failed"))
    );

    // Under the non-inferior policy the same runs qualify.
    let mut p = fast_policy();
    p.turnover.gate = TurnoverGateMode::NonInferior;
    let r2 = compare(&b, &c, &p).expect("comparable");
    assert_eq!(r2.qualification, QUAL_PASS_NON_INFERIOR);
    assert!(r2.gates.as_ref().is_some_and(|g| g.qualified));
    clean(&r2);

    // The terminal shows the exact test.
    let t = report::terminal(&r, report::TerminalOptions::verbose(false));
    assert!(
        t.contains("p worse") && t.contains("11.7%") && t.contains("candidate pooled"),
        "{t}"
    );
}

#[test]
fn clean_turnover_passes() {
    let (b, mut c) = seed_like();
    c.turnover = vec![turnover(0, 60, 0), turnover(1, 60, 0)];
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    assert!(r.strict_turnover_gate_passed);
    assert_eq!(r.qualification, QUAL_PASS);
    clean(&r);
}

#[test]
fn contamination_fails_even_non_inferior() {
    let (b, mut c) = seed_like();
    c.turnover[0].contaminated = 1;
    // A contaminated answer is a failure carrying another request's marker.
    let f = &mut c.turnover[0].failures[0];
    f.foreign_markers = vec!["m-0001".into()];
    f.canary_passed = false;
    f.failure_class = "request_canary_failed".into();
    let mut p = fast_policy();
    p.turnover.gate = TurnoverGateMode::NonInferior;
    let r = compare(&b, &c, &p).expect("comparable");
    assert!(
        !r.gates
            .as_ref()
            .expect("gates")
            .non_inferior_turnover
            .passed
    );
    assert!(!r.gates.as_ref().expect("gates").qualified);
    clean(&r);
}

#[test]
fn regression_and_ineligibility_fail_the_performance_gate() {
    let (b, mut c) = seed_like();
    c.cells[1] = cell("capacity-120k", 97000, 3, 16500.0, 16700.0, 299.0, 3);
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    assert!(!r.performance_gate_passed);
    assert_eq!(r.qualification, "fail: performance and turnover gates");
    let m = r
        .cells
        .get("capacity-120k")
        .and_then(|c| c.metrics.get("ttft_p50_ms"))
        .expect("metric");
    assert!(!m.within_threshold);
    assert!(m.delta_percent.is_some_and(|d| d > 5.0));
    clean(&r);

    let (b, mut c) = seed_like();
    c.turnover = vec![turnover(0, 60, 0)];
    c.cells[0].performance_eligible = false;
    c.cells[0].ineligible_reasons =
        vec!["prompts missed the target: median 2100 vs 3000 ±5%".into()];
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    assert!(!r.performance_gate_passed);
    assert_eq!(r.qualification, QUAL_FAIL_PERFORMANCE);
    let parts = &r.gates.as_ref().expect("gates").performance.parts;
    let failed: Vec<_> = parts.iter().filter(|p| !p.passed).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].subject,
        "cells.capacity-4k.candidate_performance_eligible"
    );
    assert!(failed[0].reason.contains("prompts missed the target"));
    let v = clean(&r);
    assert_eq!(
        v["cells"]["capacity-4k"]["candidate_ineligible_reasons"][0],
        "prompts missed the target: median 2100 vs 3000 ±5%"
    );
}

#[test]
fn threshold_is_in_the_flag_name() {
    let (b, c) = seed_like();
    let r = compare(&b, &c, &fast_policy().with_threshold(3.0)).expect("comparable");
    let v = clean(&r);
    let m = &v["cells"]["capacity-4k"]["metrics"]["e2e_p50_ms"];
    assert!(m.get("no_more_than_3_percent_regression").is_some(), "{m}");
    assert!(m.get("no_more_than_5_percent_regression").is_none());
    assert_eq!(m["threshold_percent"], 3.0);
    // Read back from text, so the key order (cells, metrics) survives too.
    // (Floats may move by an ulp: serde_json here parses without `float_roundtrip`.)
    let text = serde_json::to_string(&r).expect("serializes");
    let back: Report = serde_json::from_str(&text).expect("reads back");
    let names =
        |r: &Report| -> Vec<String> { r.cells.iter().map(|(k, _)| k.to_string()).collect() };
    assert_eq!(names(&back), names(&r));
    let m = back
        .cells
        .get("capacity-4k")
        .and_then(|c| c.metrics.get("e2e_p50_ms"))
        .expect("metric");
    assert_eq!((m.threshold_percent, m.within_threshold), (3.0, true));
    assert_eq!(back.turnover, r.turnover);
    assert_eq!(back.gates, r.gates);
    assert!(verify(&back.to_value()).is_empty());

    let p = Policy::from_toml_str(
        "threshold_percent = 2.5\n[[metric]]\nname = \"ttft_p50_ms\"\n",
        "t.toml",
    )
    .expect("policy");
    let r = compare(&b, &c, &p).expect("comparable");
    let v = clean(&r);
    let cell = &v["cells"]["capacity-4k"]["metrics"];
    assert!(
        cell["ttft_p50_ms"]
            .get("no_more_than_2.5_percent_regression")
            .is_some()
    );
    assert!(
        cell.get("e2e_p50_ms").is_none(),
        "only the policy's metrics gate"
    );
}

fn refusal(b: &RunArtifact, c: &RunArtifact) -> String {
    match compare(b, c, &fast_policy()) {
        Err(e @ CompareError::Incomparable { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn mismatched_runs_are_refused_naming_the_difference() {
    let (b, mut c) = seed_like();
    c.provenance.model = "other-model".into();
    let e = refusal(&b, &c);
    assert!(
        e.contains("model") && e.contains("other-model") && e.contains("smollm2-135m-instruct"),
        "{e}"
    );

    let (b, mut c) = seed_like();
    c.cells.pop();
    let e = refusal(&b, &c);
    assert!(
        e.contains("cell `capacity-120k` is in the baseline run only"),
        "{e}"
    );

    let (b, mut c) = seed_like();
    c.cells[0].name = "capacity-8k".into();
    let e = refusal(&b, &c);
    assert!(
        e.contains("`capacity-4k` is in the baseline run only")
            && e.contains("`capacity-8k` is in the candidate run only"),
        "{e}"
    );

    let (b, mut c) = seed_like();
    c.cells[0].shape.concurrency = 4;
    c.cells[0].shape.cache = "shared".into();
    let e = refusal(&b, &c);
    assert!(
        e.contains("cell `capacity-4k` shape differs")
            && e.contains("concurrency 2 vs 4")
            && e.contains("cache"),
        "{e}"
    );

    // The same suite reading another dataset file under the same name.
    let (mut b, mut c) = seed_like();
    b.cells[0].shape.workload = Some("openai: traffic.jsonl, sha256 0011".into());
    c.cells[0].shape.workload = Some("openai: traffic.jsonl, sha256 ffee".into());
    let e = refusal(&b, &c);
    assert!(
        e.contains("cell `capacity-4k` shape differs") && e.contains("workload"),
        "{e}"
    );

    // One side measured /v1/completions, the other chat.
    let (b, mut c) = seed_like();
    c.cells[0].shape.endpoint = Some("completions".into());
    let e = refusal(&b, &c);
    assert!(
        e.contains("cell `capacity-4k` shape differs")
            && e.contains("endpoint None vs Some(\"completions\")"),
        "{e}"
    );

    let (b, mut c) = seed_like();
    c.provenance.suite = "nightly".into();
    c.provenance.suite_sha256 = Some("ff00".into());
    let e = refusal(&b, &c);
    assert!(
        e.contains("suite: baseline \"smoke\" vs candidate \"nightly\"")
            && e.contains("suite_sha256"),
        "{e}"
    );

    // One task workload answering another task file (or generated set) under
    // the same name: its answers cannot be paired item by item.
    let (mut b, mut c) = seed_like();
    b.turnover[0].task_set_sha256 = Some("aa".repeat(32));
    c.turnover[0].task_set_sha256 = Some("bb".repeat(32));
    let e = refusal(&b, &c);
    assert!(
        e.contains("differs (baseline vs candidate): task items (sha256)"),
        "{e}"
    );

    // A missing hash on one side is not a difference.
    let (b, mut c) = seed_like();
    c.provenance.suite_sha256 = None;
    assert!(compare(&b, &c, &fast_policy()).is_ok());

    let (b, mut c) = seed_like();
    c.schema = "infergate-run/v0".into();
    assert!(matches!(
        compare(&b, &c, &fast_policy()),
        Err(CompareError::Schema { .. })
    ));
}

/// Give a cell `completion_tokens` samples (and summary) of `tokens` each.
fn with_completion(mut c: CellResult, tokens: f64) -> CellResult {
    let v = vec![tokens; c.requests];
    c.metrics.insert(
        metric::COMPLETION_TOKENS.into(),
        stats::summarize(&v).unwrap(),
    );
    c.samples.insert(metric::COMPLETION_TOKENS.into(), v);
    c
}

#[test]
fn different_output_lengths_are_not_performance_comparable() {
    let (mut b, mut c) = seed_like();
    b.cells[0] = with_completion(b.cells[0].clone(), 64.0);
    // 52 of 64 tokens: an early stop that would "improve" e2e.
    c.cells[0] = with_completion(c.cells[0].clone(), 52.0);
    b.cells[1] = with_completion(b.cells[1].clone(), 64.0);
    c.cells[1] = with_completion(c.cells[1].clone(), 63.0); // within 5%
    let r = compare(&b, &c, &fast_policy()).expect("comparable runs");
    let v = clean(&r);
    assert!(!r.performance_gate_passed);
    let cell = &v["cells"]["capacity-4k"];
    let why = cell["not_comparable"].as_str().unwrap();
    assert!(
        why.contains("median completion tokens differ by -18.8% (baseline 64, candidate 52), more than the cell's 5% tolerance"),
        "{why}"
    );
    assert_eq!(cell["candidate_performance_eligible"], false);
    assert_eq!(cell["baseline_performance_eligible"], false);
    assert_eq!(cell["candidate_median_completion_tokens"], 52.0);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("capacity-4k") && w.contains(why))
    );
    let other = &v["cells"]["capacity-120k"];
    assert!(other.get("not_comparable").is_none());
    assert_eq!(other["candidate_performance_eligible"], true);
}

#[test]
fn open_loop_queue_samples_and_client_lag_reach_the_report() {
    let (mut b, mut c) = seed_like();
    for (a, lag) in [(&mut b, 0.0), (&mut c, 250.0)] {
        let cell = &mut a.cells[0];
        let n = cell.requests;
        cell.samples.insert(metric::QUEUE_MS.into(), vec![lag; n]);
        if lag > 0.0 {
            cell.warnings
                .push("the client fell behind its schedule".into());
        }
    }
    let r = compare(&b, &c, &fast_policy()).expect("comparable runs");
    let v = clean(&r);
    let q = &v["cells"]["capacity-4k"]["samples"]["queue_ms"];
    assert_eq!(q["candidate"][0], 250.0);
    assert_eq!(q["baseline"][0], 0.0);
    assert!(
        r.warnings
            .iter()
            .any(|w| w == "cell `capacity-4k`: candidate: the client fell behind its schedule"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_policy_can_gate_on_latency_from_the_scheduled_send() {
    let (mut b, mut c) = seed_like();
    for (a, lag) in [(&mut b, 0.0), (&mut c, 300.0)] {
        for cell in &mut a.cells {
            let ttft = cell.samples[metric::TTFT_MS].clone();
            let sched: Vec<f64> = ttft.iter().map(|t| t + lag).collect();
            cell.metrics.insert(
                metric::TTFT_SCHED_MS.into(),
                stats::summarize(&sched).unwrap(),
            );
            cell.samples.insert(metric::TTFT_SCHED_MS.into(), sched);
        }
    }
    let mut policy =
        Policy::from_toml_str("[[metric]]\nname = \"ttft_sched_p50_ms\"\n", "policy.toml").unwrap();
    policy.bootstrap.iterations = 2000;
    policy.gate.decide = report::GateRule::Point;
    let r = compare(&b, &c, &policy).expect("comparable runs");
    let v = clean(&r);
    let m = &v["cells"]["capacity-4k"]["metrics"]["ttft_sched_p50_ms"];
    assert_eq!(m["no_more_than_5_percent_regression"], false, "{m:#}");
    assert!(!r.performance_gate_passed);
    // The same runs gated on TTFT from the actual send pass: the client queue
    // is what regressed, and only the scheduled-send metric sees it.
    let r = compare(&b, &c, &fast_policy()).unwrap();
    assert!(r.performance_gate_passed);
}

/// Request rows for a cell's samples: the first `slow` requests take ten
/// times as long to the first token (over a 500 ms SLO), the rest as
/// sampled. Rows and samples agree, as a run's do (verify checks it).
fn with_rows(mut c: CellResult, slow: usize) -> CellResult {
    let ttft = c.samples.get_mut(metric::TTFT_MS).unwrap();
    for t in ttft.iter_mut().take(slow) {
        *t *= 10.0;
    }
    let (ttft, e2e) = (&c.samples[metric::TTFT_MS], &c.samples[metric::E2E_MS]);
    c.request_rows = (0..ttft.len())
        .map(|i| infergate_report::artifact::RequestRow {
            ok: true,
            send_offset_ms: i as f64 * 100.0,
            queue_ms: 0.0,
            ttft_ms: Some(ttft[i]),
            tpot_ms: None,
            e2e_ms: Some(e2e[i]),
            completion_tokens: Some(64),
            cluster: 0,
        })
        .collect();
    c.metrics = c
        .samples
        .iter()
        .filter_map(|(k, v)| stats::summarize(v).map(|s| (k.clone(), s)))
        .collect();
    c
}

#[test]
fn slo_attainment_is_gated_as_a_proportion_and_recomputed_by_verify() {
    let policy = Policy::from_toml_str(
        "[[slo]]\ncell = \"c\"\nttft_ms = 500\n[bootstrap]\niterations = 200\n",
        "slo.toml",
    )
    .unwrap();
    let side = |label: &str, slow: usize| {
        let c = with_rows(cell("c", 512, 400, 100.0, 1000.0, 50.0, 0), slow);
        artifact(label, label, vec![c], vec![])
    };
    // 60 of 400 candidate requests over the SLO: 15 points worse, margin 5.
    let rep = compare(&side("base", 0), &side("cand", 60), &policy).unwrap();
    let v = rep.to_value();
    let slo = &v["cells"]["c"]["slo"];
    assert_eq!(
        (&slo["source"], &slo["gating"]),
        (&"policy".into(), &true.into())
    );
    assert_eq!(
        (
            slo["baseline"]["met"].as_u64(),
            slo["candidate"]["met"].as_u64()
        ),
        (Some(400), Some(340))
    );
    assert_eq!(slo["evidence"]["outcome"], "fail", "{slo}");
    assert!((slo["evidence"]["drop_points"].as_f64().unwrap() - 15.0).abs() < 1e-9);
    assert_eq!(
        v["performance_outcome"], "fail",
        "the attainment alone fails the gate"
    );
    assert_eq!(
        v["statistics"]["family_wise"]["gating_pairs"], 4,
        "3 metrics + 1 SLO cell"
    );
    assert!(
        v["statistics"]["attainment_rule"]
            .as_str()
            .unwrap()
            .contains("Newcombe")
    );
    assert!(verify(&v).is_empty(), "{:?}", verify(&v));
    assert!(!rep.warnings.iter().any(|w| w.contains("judged nothing")));

    // An SLO for a cell the runs do not have (a typo) is named.
    let typo =
        Policy::from_toml_str("[[slo]]\ncell = \"c2\"\nttft_ms = 500\n", "slo.toml").unwrap();
    let warned = compare(&side("base", 0), &side("cand", 60), &typo)
        .unwrap()
        .warnings;
    assert!(
        warned
            .iter()
            .any(|w| w.contains("the SLO for cell `c2` names no cell")),
        "{warned:?}"
    );

    // verify recomputes the attainment from the rows: edits are named.
    type Edit = (&'static str, fn(&mut Value));
    let edits: [Edit; 4] = [
        ("/cells/c/slo/evidence/outcome", |v| {
            v["cells"]["c"]["slo"]["evidence"]["outcome"] = "pass".into()
        }),
        ("/cells/c/slo/candidate/met", |v| {
            v["cells"]["c"]["slo"]["candidate"]["met"] = 400.into()
        }),
        ("/cells/c/request_rows/candidate/0/ttft_ms", |v| {
            v["cells"]["c"]["request_rows"]["candidate"][0]["ttft_ms"] = 90.0.into()
        }),
        ("/policy/slo/0/margin_points", |v| {
            v["policy"]["slo"][0]["margin_points"] = 20.0.into()
        }),
    ];
    for (what, edit) in edits {
        let mut t = v.clone();
        edit(&mut t);
        let found = verify(&t);
        assert!(
            found.iter().any(|d| d.path.starts_with("cells.c.slo")),
            "{what}: {found:?}"
        );
    }

    // The same runtime on both sides: the attainment part passes at 400 a side.
    let rep = compare(&side("base", 0), &side("cand", 0), &policy).unwrap();
    let v = rep.to_value();
    assert_eq!(v["cells"]["c"]["slo"]["evidence"]["outcome"], "pass");
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    let part = parts
        .iter()
        .find(|p| p["subject"] == "cells.c.slo_attainment")
        .unwrap();
    assert_eq!(part["outcome"], "pass", "{part}");

    // A run without request rows: the part is inconclusive and says why.
    let mut rowless = side("cand", 0);
    rowless.cells[0].request_rows.clear();
    let rep = compare(&side("base", 0), &rowless, &policy).unwrap();
    let v = rep.to_value();
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    let part = parts
        .iter()
        .find(|p| p["subject"] == "cells.c.slo_attainment")
        .unwrap();
    assert_eq!(part["outcome"], "inconclusive");
}

/// Interleaved blocks of one request, the candidate 1 % slower in every
/// pair but one astride a host's burst (1.5×): the default policy combines
/// the blocks by a trimmed mean, which sets that pair aside, and says so in
/// the report; `verify` recomputes it as made, and refuses the report when
/// its `block_mean` is changed or removed.
#[test]
fn interleaved_blocks_combine_by_the_trimmed_mean_the_report_names() {
    let n = 20;
    let interleaved = |label: &str, digest: &str, factor: &dyn Fn(usize) -> f64| {
        let base = fixtures::spread_samples(n, (500.0, 900.0, 100.0), 0);
        let samples = base
            .into_iter()
            .map(|(k, v)| {
                // Decode speed is higher-is-better: slower is less.
                let slower = k == metric::DECODE_TOK_S;
                let v = v
                    .iter()
                    .enumerate()
                    .map(|(i, x)| if slower { x / factor(i) } else { x * factor(i) });
                (k, v.collect())
            })
            .collect();
        let mut c = fixtures::cell("c1", shape(256, n), samples, Some(253.0));
        c.sample_clusters = c
            .samples
            .keys()
            .map(|k| (k.clone(), (0..n as u32).collect()))
            .collect();
        let mut a = artifact(label, digest, vec![c], vec![]);
        a.schedule = Some(infergate_report::artifact::Schedule::Interleaved);
        a
    };
    let b = interleaved("baseline", "0c06", &|_| 1.0);
    let c = interleaved("candidate", "877a", &|i| if i == 7 { 1.5 } else { 1.01 });
    let mut policy = Policy {
        source: "tests: defaults with 2000 iterations".into(),
        ..Policy::default()
    };
    policy.bootstrap.iterations = 2000;
    let r = compare(&b, &c, &policy).expect("comparable");
    let v = clean(&r);
    assert_eq!(
        v["statistics"]["design"]["block_mean"], "trimmed",
        "{}",
        v["statistics"]["design"]
    );
    let method = v["statistics"]["design"]["resampling_method"]
        .as_str()
        .unwrap();
    assert!(method.contains("trimmed"), "{method}");
    let point_of = |v: &Value| {
        v["cells"]["c1"]["metrics"]["ttft_p50_ms"]["evidence"]["worse_change_percent"]
            .as_f64()
            .expect("evidence")
    };
    let point = point_of(&v);
    assert!(
        (point - 1.0).abs() < 1e-6,
        "the burst's pair moved the estimate: {point}"
    );

    // The mean (a method compare does not use, measured against it): the
    // burst's pair is in the estimate, and in the report.
    let mean = report::design::Method {
        block_mean: stats::BlockMean::Mean,
        ..Default::default()
    };
    let m = report::compare_by(&b, &c, &policy, &mean, None).expect("comparable");
    let mv = clean(&m);
    assert_eq!(mv["statistics"]["design"]["block_mean"], "mean");
    let mean_point = point_of(&mv);
    assert!(mean_point > 2.5, "{mean_point}");

    // Changed or removed, the field no longer matches what was computed.
    for edit in [Some("mean"), None] {
        let mut t = v.clone();
        let design = t["statistics"]["design"].as_object_mut().unwrap();
        match edit {
            Some(s) => design.insert("block_mean".into(), s.into()),
            None => design.remove("block_mean"),
        };
        assert!(!verify(&t).is_empty(), "{edit:?} verified");
    }
}

/// A candidate run that skipped its turnover as the plan asked: the
/// turnover gates did not run (not failed), the qualification says what was
/// not checked and does not qualify, with its own exit code; the report
/// verifies, and every view shows the gates as not run.
#[test]
fn a_skipped_turnover_is_not_run_and_caps_the_verdict() {
    use infergate_report::artifact::TurnoverSkip;
    use infergate_report::gate::{EXIT_GATES_NOT_RUN, QUAL_PASS_GATES_RAN};
    let (mut b, mut c) = seed_like();
    for a in [&mut b, &mut c] {
        a.turnover.clear();
        a.turnover_not_run = Some(TurnoverSkip::SkippedByPlan);
    }
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    assert!(r.performance_gate_passed);
    assert!(!r.strict_turnover_gate_passed, "nothing passed");
    let g = r.turnover_gate.as_ref().expect("turnover gate");
    assert_eq!(g.not_run, Some(TurnoverSkip::SkippedByPlan));
    assert!(!g.passed);
    let gates = r.gates.as_ref().expect("gates");
    for gate in [&gates.strict_turnover, &gates.non_inferior_turnover] {
        assert_eq!(gate.not_run.as_deref(), Some("skipped by the plan"));
        assert!(gate.parts.is_empty(), "{gate:?}");
    }
    assert!(!gates.qualified);
    assert_eq!(
        r.qualification,
        format!("{QUAL_PASS_GATES_RAN}; turnover not run (skipped by the plan)")
    );
    assert!(!r.qualification.contains("fail"), "{}", r.qualification);
    assert_eq!(report::exit_code(&r), EXIT_GATES_NOT_RUN);
    assert!(!report::gate::qualified(&r));
    let v = clean(&r);
    assert_eq!(v["turnover_gate"]["not_run"], "skipped_by_plan");
    assert_eq!(v["strict_turnover_gate_passed"], false);
    assert_eq!(
        report::gate::summary(&r),
        "performance gate passed, turnover not run (skipped by the plan)"
    );

    // Every view says the gates did not run, and none calls them failed.
    let t = report::terminal(&r, report::TerminalOptions::verbose(false));
    let m = report::markdown(&r);
    let h = report::html(&r);
    for (name, text) in [("terminal", &t), ("markdown", &m), ("html", &h)] {
        assert!(
            text.contains("not run (skipped by the plan)"),
            "{name}: {text}"
        );
        assert!(
            !text.contains("the candidate has no turnover run"),
            "{name}: {text}"
        );
    }
    assert!(!t.contains("✗ strict turnover"), "{t}");
    // In JUnit the turnover gate is skipped, not failed; the qualification
    // case fails, as any that does not qualify does.
    let x = report::junit(&r);
    assert!(
        x.contains("<skipped message=\"not run (skipped by the plan)\"/>"),
        "{x}"
    );
    assert!(
        x.contains(
            "<testsuite name=\"gates.strict_turnover\" tests=\"1\" failures=\"0\" skipped=\"1\">"
        ),
        "{x}"
    );
    assert_eq!(x.matches("<failure").count(), 1, "{x}");

    // A failing performance gate keeps its words and its exit code.
    let mut slow = c.clone();
    slow.cells = vec![
        cell("capacity-4k", 3000, 12, 940.0, 1214.0, 300.0, 2),
        cell("capacity-120k", 97000, 3, 29488.0, 29762.0, 299.0, 3),
    ];
    let r = compare(&b, &slow, &fast_policy()).expect("comparable");
    assert_eq!(
        r.qualification,
        format!("{QUAL_FAIL_PERFORMANCE}; turnover not run (skipped by the plan)")
    );
    assert_eq!(report::exit_code(&r), report::EXIT_FAIL);
    clean(&r);
}

/// A declared turnover the candidate did not run, with no recorded skip,
/// still fails the strict gate.
#[test]
fn a_missing_turnover_without_a_skip_still_fails() {
    let (b, mut c) = seed_like();
    c.turnover.clear();
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    assert!(!r.strict_turnover_gate_passed);
    assert_eq!(r.turnover_gate.as_ref().and_then(|g| g.not_run), None);
    assert_eq!(r.qualification, QUAL_NOT_BLANKET);
    assert_eq!(report::exit_code(&r), report::EXIT_FAIL);
    let gates = r.gates.as_ref().expect("gates");
    assert!(
        gates
            .strict_turnover
            .parts
            .iter()
            .any(|p| p.reason == "the candidate has no turnover run")
    );
    clean(&r);
}

/// A run that holds turnover runs cannot also say it skipped them.
#[test]
fn a_skip_beside_turnover_runs_is_refused() {
    let (b, mut c) = seed_like();
    c.turnover_not_run = Some(infergate_report::artifact::TurnoverSkip::SkippedByPlan);
    let e = compare(&b, &c, &fast_policy()).expect_err("contradictory");
    assert!(format!("{e}").contains("turnover_not_run"), "{e}");
}
