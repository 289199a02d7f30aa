//! A corpus of tampered reports: each test makes a real report with
//! `compare` (or takes the seed), applies one alteration as a JSON edit, and
//! requires `verify` to reject it naming the field. The untouched reports
//! verify clean, so every case here is one that could fail.

use infergate_report::artifact::{CellResult, RunArtifact, TurnoverRun};
use infergate_report::design::{Look, Method};
use infergate_report::{self as report, Policy, compare, compare_by, compare_with_look};
use infergate_report::{fixtures, stats, verify, verify_report};
use serde_json::{Value, json};

// ------------------------------------------------------------ inputs ----

fn cell(name: &str, n: usize, centres: (f64, f64, f64), phase: usize) -> CellResult {
    let samples = fixtures::spread_samples(n, centres, phase);
    fixtures::cell(name, fixtures::shape(3000, 2, n), samples, Some(2997.0))
}

fn turnover(repeat: usize, failed: usize) -> TurnoverRun {
    fixtures::turnover(repeat, 60, failed)
}

fn artifact(label: &str, cells: Vec<CellResult>, turnover: Vec<TurnoverRun>) -> RunArtifact {
    fixtures::artifact(fixtures::provenance(label, label), cells, turnover)
}

/// Two cells: `fast` where the candidate is a little faster, `slow` where
/// its e2e p50 is ~8% worse (the performance gate fails there). Baseline
/// turnover 7/60, candidate 2/60 and 3/60; the candidate's first run has
/// one contaminated answer.
fn runs() -> (RunArtifact, RunArtifact) {
    let b = artifact(
        "baseline",
        vec![
            cell("fast", 12, (496.0, 638.0, 288.0), 0),
            cell("slow", 12, (900.0, 1000.0, 250.0), 1),
        ],
        vec![turnover(0, 7)],
    );
    let mut first = turnover(0, 2);
    first.contaminated = 1;
    let f = &mut first.failures[1];
    f.failure_class = "request_canary_failed".into();
    f.canary_passed = false;
    f.foreign_markers = vec!["m-0007".into()];
    let c = artifact(
        "candidate",
        vec![
            cell("fast", 12, (470.0, 607.0, 300.0), 2),
            cell("slow", 12, (905.0, 1080.0, 251.0), 1),
        ],
        vec![first, turnover(1, 3)],
    );
    (b, c)
}

fn policy() -> Policy {
    let mut p = Policy {
        source: "corpus.toml".into(),
        ..Policy::default()
    };
    p.bootstrap.iterations = 2000;
    p
}

/// The report every case alters: made by `compare`, verified clean.
fn report() -> Value {
    let (b, c) = runs();
    let v = compare(&b, &c, &policy()).expect("comparable").to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "the untouched report verifies: {d:#?}");
    v
}

/// [`report`]'s runs interleaved in four blocks of three requests per
/// cell: paired resampling, no drift floor, so an undecided metric says how
/// many requests would decide it.
fn interleaved_report() -> Value {
    interleaved_report_in(4)
}

/// [`interleaved_report`] in `blocks` blocks per cell.
fn interleaved_report_in(blocks: u32) -> Value {
    let (mut b, mut c) = runs();
    for a in [&mut b, &mut c] {
        a.schedule = Some(infergate_report::artifact::Schedule::Interleaved);
        for cell in &mut a.cells {
            let blocks: Vec<u32> = (0..12).map(|i| i * blocks / 12).collect();
            cell.sample_clusters = cell
                .samples
                .keys()
                .map(|k| (k.clone(), blocks.clone()))
                .collect();
        }
    }
    // The candidate here is the baseline times a constant, request by
    // request: paired by request the change is known exactly and decided;
    // these tests need an undecided pair, so blocks are paired only.
    let blocks_only = Method {
        pair_requests: false,
        ..Method::default()
    };
    let v = compare_by(&b, &c, &policy(), &blocks_only, None)
        .expect("comparable")
        .to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "the untouched report verifies: {d:#?}");
    v
}

fn seed() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/runtime-profile-comparison.example.json");
    let v = report::read_report_value(&p).expect("seed");
    assert!(verify(&v).is_empty());
    v
}

/// Paths `verify` names after `edit`.
fn paths(mut v: Value, edit: impl FnOnce(&mut Value)) -> Vec<String> {
    edit(&mut v);
    verify(&v).into_iter().map(|d| d.path).collect()
}

#[track_caller]
fn names(p: &[String], path: &str) {
    assert!(p.iter().any(|x| x == path), "{path} not named in {p:#?}");
}

fn metric_mut<'a>(v: &'a mut Value, cell: &str, m: &str) -> &'a mut Map {
    v["cells"][cell]["metrics"][m]
        .as_object_mut()
        .expect("metric")
}

type Map = serde_json::Map<String, Value>;

const E2E_SLOW: &str = "cells.slow.metrics.e2e_p50_ms";

// ------------------------------------------------ each kind of edit ----

#[test]
fn untouched_reports_verify_clean_and_the_seed_says_what_it_cannot_check() {
    report();
    let s = verify_report(&seed());
    assert!(s.is_clean(), "{:#?}", s.disagreements);
    for what in ["no per-request samples", "no policy block", "--runs"] {
        assert!(
            s.unchecked.iter().any(|u| u.contains(what)),
            "{what} not in {:#?}",
            s.unchecked
        );
    }
}

#[test]
fn the_slow_cell_really_fails() {
    let v = report();
    let m = &v["cells"]["slow"]["metrics"]["e2e_p50_ms"];
    assert_eq!(m["no_more_than_5_percent_regression"], false, "{m}");
    assert!(m["delta_percent"].as_f64().is_some_and(|d| d > 5.0), "{m}");
    assert_eq!(v["performance_gate_passed"], false);
}

#[test]
fn flag_renamed_to_a_larger_threshold() {
    let p = paths(report(), |v| {
        let m = metric_mut(v, "slow", "e2e_p50_ms");
        m.remove("no_more_than_5_percent_regression");
        m.insert("no_more_than_25_percent_regression".into(), true.into());
        m.insert("threshold_percent".into(), 25.0.into());
    });
    names(
        &p,
        &format!("{E2E_SLOW}.no_more_than_25_percent_regression"),
    );
}

/// A limit, stated: the seed has no policy block, so a flag's name is its
/// only threshold. Renaming one (every seed metric improved, so each flag
/// stays true) is undetectable there, and verify says so.
#[test]
fn flag_renamed_in_the_seed_is_a_stated_limit() {
    let mut v = seed();
    let m = metric_mut(&mut v, "capacity-4k", "ttft_p50_ms");
    m.remove("no_more_than_5_percent_regression");
    m.insert("no_more_than_25_percent_regression".into(), true.into());
    let r = verify_report(&v);
    assert!(r.is_clean(), "{:#?}", r.disagreements);
    assert!(
        r.unchecked
            .iter()
            .any(|u| u.contains("which thresholds were intended is not in the report")),
        "{:#?}",
        r.unchecked
    );
    // With a threshold_percent beside it that disagrees, it is caught.
    let p = paths(v, |v| {
        metric_mut(v, "capacity-4k", "ttft_p50_ms").insert("threshold_percent".into(), 5.0.into());
    });
    names(
        &p,
        "cells.capacity-4k.metrics.ttft_p50_ms.threshold_percent",
    );
}

#[test]
fn direction_contradicting_the_policy_and_the_name() {
    let p = paths(report(), |v| {
        metric_mut(v, "slow", "e2e_p50_ms").insert("direction".into(), "higher_is_better".into());
    });
    names(&p, &format!("{E2E_SLOW}.direction"));
    let p = paths(seed(), |v| {
        metric_mut(v, "capacity-4k", "e2e_p50_ms")
            .insert("direction".into(), "higher_is_better".into());
    });
    names(&p, "cells.capacity-4k.metrics.e2e_p50_ms.direction");
}

#[test]
fn failing_metric_deleted_with_a_matching_policy() {
    let p = paths(report(), |v| {
        for c in ["fast", "slow"] {
            v["cells"][c]["metrics"]
                .as_object_mut()
                .map(|m| m.remove("e2e_p50_ms"));
        }
        v["policy"]["metrics"]
            .as_array_mut()
            .expect("metrics")
            .retain(|x| x["name"] != "e2e_p50_ms");
        v["performance_gate_passed"] = true.into();
    });
    names(&p, "statistics.family_wise.gating_pairs");
    names(&p, "cells.slow.samples.e2e_ms");
}

#[test]
fn every_metric_deleted_with_an_empty_policy() {
    let p = paths(report(), |v| {
        for c in ["fast", "slow"] {
            v["cells"][c]["metrics"] = json!({});
        }
        v["policy"]["metrics"] = json!([]);
        v["performance_gate_passed"] = true.into();
    });
    names(&p, "policy.metrics");
}

#[test]
fn seed_metric_deleted_without_a_policy_block() {
    let p = paths(seed(), |v| {
        v["cells"]["capacity-120k"]["metrics"]
            .as_object_mut()
            .map(|m| m.remove("decode_tok_s_p50"));
    });
    names(&p, "cells.capacity-120k.metrics.decode_tok_s_p50");
    names(&p, "performance_gate_passed");
}

#[test]
fn edited_interval_is_recomputed_from_the_samples() {
    let p = paths(report(), |v| {
        let ci = &mut metric_mut(v, "slow", "e2e_p50_ms")["ci_delta_percent"];
        ci["low"] = (-1.0).into();
        ci["high"] = 4.0.into();
    });
    names(&p, &format!("{E2E_SLOW}.ci_delta_percent.low"));
    names(&p, &format!("{E2E_SLOW}.ci_delta_percent.high"));
}

#[test]
fn edited_verdict_and_interval_together() {
    let p = paths(report(), |v| {
        let m = metric_mut(v, "slow", "e2e_p50_ms");
        m["ci_delta_percent"] = json!({"low": -1.0, "high": 1.0, "confidence": 0.95});
        m["verdict"] = "equivalent".into();
    });
    names(&p, &format!("{E2E_SLOW}.ci_delta_percent.low"));
    names(&p, &format!("{E2E_SLOW}.verdict"));
}

#[test]
fn edited_requests_to_resolve() {
    let v = interleaved_report();
    let m = &v["cells"]["slow"]["metrics"]["e2e_p50_ms"];
    assert!(
        m["requests_to_resolve"].as_u64().is_some_and(|n| n > 12),
        "an undecided pair says how many requests would decide it: {m}"
    );
    let p = paths(v, |v| {
        metric_mut(v, "slow", "e2e_p50_ms")["requests_to_resolve"] = 13.into();
        v["cells"]["slow"]["metrics"]["e2e_p50_ms"]["evidence"]["requests_to_resolve"] = 13.into();
        v["gates"]["performance_evidence"]["requests_to_resolve"] = 13.into();
    });
    names(&p, &format!("{E2E_SLOW}.requests_to_resolve"));
    names(&p, &format!("{E2E_SLOW}.evidence.requests_to_resolve"));
    names(&p, "gates.performance_evidence.requests_to_resolve");
}

/// The requests the design needs (what an adaptive run plans its looks
/// by) follow from each pair's standard error: an edited figure is named.
#[test]
fn edited_design_requests() {
    let v = interleaved_report();
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    let i = parts
        .iter()
        .position(|p| {
            p["design_requests_per_side"]
                .as_u64()
                .is_some_and(|n| n > 1)
        })
        .expect("an evidence pair with a design figure");
    let p = paths(v, |v| {
        v["gates"]["performance_evidence"]["parts"][i]["design_requests_per_side"] = 1.into();
    });
    names(
        &p,
        &format!("gates.performance_evidence.parts[{i}].design_requests_per_side"),
    );
}

/// Whether a pair's bounds inform follows from its evidence and the blocks
/// behind it: on two blocks an undecided pair's flag edited to true, or its
/// words edited, is named, with the words the rule gives.
#[test]
fn edited_informative_flag_and_words() {
    let v = interleaved_report_in(2);
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    let i = parts
        .iter()
        .position(|p| p["informative"] == false)
        .expect("an undecided pair on two blocks");
    let words = "too few blocks to bound: 2 of the 4 a bound needs";
    assert_eq!(parts[i]["not_informative"], words);
    let at = |field: &str| format!("gates.performance_evidence.parts[{i}].{field}");
    let edit = |v: &Value, change: &dyn Fn(&mut Map)| {
        let mut v = v.clone();
        change(
            v["gates"]["performance_evidence"]["parts"][i]
                .as_object_mut()
                .unwrap(),
        );
        verify(&v)
    };
    let d = edit(&v, &|p| {
        p.insert("informative".into(), true.into());
        p.remove("not_informative");
    });
    let flag = d
        .iter()
        .find(|d| d.path == at("informative"))
        .expect("flag named");
    assert!(flag.expected.contains(words), "{flag:?}");
    names(
        &d.iter().map(|d| d.path.clone()).collect::<Vec<_>>(),
        &at("not_informative"),
    );
    let d = edit(&v, &|p| {
        p.insert("not_informative".into(), "fine really".into());
    });
    let named = d
        .iter()
        .find(|d| d.path == at("not_informative"))
        .expect("words named");
    assert!(named.expected.contains(words), "{named:?}");
    // An informative pair edited to say it is not: named too.
    let mut v = interleaved_report();
    let j = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .position(|p| p["informative"] == true)
        .expect("an informative pair on four blocks");
    v["gates"]["performance_evidence"]["parts"][j]["informative"] = false.into();
    let d = verify(&v);
    let flag = format!("gates.performance_evidence.parts[{j}].informative");
    let named = d.iter().find(|d| d.path == flag).expect("flag named");
    assert!(
        named
            .expected
            .starts_with("true, from its metric's evidence"),
        "{named:?}"
    );
}

#[test]
fn edited_evidence_bound_and_outcome() {
    let p = paths(report(), |v| {
        let e = &mut metric_mut(v, "slow", "e2e_p50_ms")["evidence"];
        e["upper_bound_percent"] = 4.0.into();
        e["lower_bound_percent"] = (-1.0).into();
        e["outcome"] = "pass".into();
    });
    names(&p, &format!("{E2E_SLOW}.evidence.upper_bound_percent"));
    names(&p, &format!("{E2E_SLOW}.evidence.lower_bound_percent"));
}

#[test]
fn quantile_disagreeing_with_the_name() {
    let p = paths(report(), |v| {
        metric_mut(v, "slow", "e2e_p50_ms").insert("quantile".into(), 0.1.into());
    });
    names(&p, &format!("{E2E_SLOW}.quantile"));
    let p = paths(report(), |v| {
        v["policy"]["metrics"][1]["quantile"] = 0.1.into();
        metric_mut(v, "slow", "e2e_p50_ms").insert("quantile".into(), 0.1.into());
        metric_mut(v, "fast", "e2e_p50_ms").insert("quantile".into(), 0.1.into());
    });
    names(&p, "policy.metrics[1].quantile");
}

#[test]
fn removed_samples() {
    let p = paths(report(), |v| {
        v["cells"]["slow"]
            .as_object_mut()
            .map(|c| c.remove("samples"));
    });
    names(&p, "cells.slow.samples");
    // Without the promise to keep them, the fields computed from them still need them.
    let p = paths(report(), |v| {
        v["cells"]["slow"]
            .as_object_mut()
            .map(|c| c.remove("samples"));
        v["statistics"]
            .as_object_mut()
            .map(|s| s.remove("samples_kept"));
    });
    names(&p, "cells.slow.samples.e2e_ms");
}

#[test]
fn qualification_wording() {
    let p = paths(report(), |v| v["qualification"] = "pass".into());
    names(&p, "qualification");
    let p = paths(report(), |v| v["qualification"] = "ready to promote".into());
    names(&p, "qualification");
    let p = paths(seed(), |v| v["qualification"] = "ready to promote".into());
    names(&p, "qualification");
}

#[test]
fn turnover_mode_disagreeing_with_the_policy() {
    let p = paths(report(), |v| {
        v["turnover_gate"]["mode"] = "non_inferior".into()
    });
    names(&p, "turnover_gate.mode");
}

#[test]
fn turnover_alpha_disagreeing_or_out_of_range() {
    let p = paths(report(), |v| v["turnover_comparison"]["alpha"] = 0.2.into());
    names(&p, "turnover_comparison.alpha");
    let p = paths(report(), |v| {
        v["turnover_comparison"]["alpha"] = 1.5.into();
        v["policy"]["alpha"] = 1.5.into();
    });
    names(&p, "turnover_comparison.alpha");
    names(&p, "policy.alpha");
}

#[test]
fn contamination_zeroed_while_a_failure_carries_a_foreign_marker() {
    let p = paths(report(), |v| {
        v["candidate_turnover"]["contaminated"] = 0.into()
    });
    names(&p, "candidate_turnover.contaminated");
}

#[test]
fn unknown_failure_class() {
    let p = paths(report(), |v| {
        v["baseline_turnover"]["failures"][0]["failure_class"] = "benign".into();
    });
    names(&p, "baseline_turnover.failures[0].failure_class");
}

#[test]
fn failure_class_breaking_the_check_order() {
    // The canary is checked before the controlled output.
    let p = paths(report(), |v| {
        v["candidate_turnover"]["failures"][1]["failure_class"] = "controlled_output_failed".into();
    });
    names(&p, "candidate_turnover.failures[1].failure_class");
    let p = paths(seed(), |v| {
        v["baseline_turnover"]["failures"][0]["canary_passed"] = false.into();
    });
    names(&p, "baseline_turnover.failures[0].failure_class");
}

#[test]
fn failures_out_of_request_order() {
    let p = paths(seed(), |v| {
        let f = v["baseline_turnover"]["failures"]
            .as_array_mut()
            .expect("failures");
        f.swap(0, 3);
    });
    names(&p, "baseline_turnover.failures[1].request_index");
}

#[test]
fn dropped_turnover_repeat() {
    let p = paths(report(), |v| {
        v.as_object_mut()
            .map(|r| r.remove("candidate_turnover_repeat"));
    });
    names(&p, "candidate_turnover_repeat");
}

#[test]
fn images_disagreeing_with_provenance() {
    let p = paths(report(), |v| {
        v["candidate_image"] = "registry.example/llama-server@sha256:0000".into();
    });
    names(&p, "candidate_image");
    let p = paths(report(), |v| {
        v["provenance"]["baseline"]["image"] = "registry.example/llama-server@sha256:ffff".into();
    });
    names(&p, "baseline_image");
}

// ------------------------------------------------------ found besides ----

#[test]
fn defaults_source_holds_the_policy_to_the_defaults() {
    let (b, c) = runs();
    let v = compare(&b, &c, &Policy::default())
        .expect("comparable")
        .to_value();
    assert!(verify(&v).is_empty());
    let p = paths(v, |v| {
        for m in v["policy"]["metrics"].as_array_mut().expect("metrics") {
            m["threshold_percent"] = 25.0.into();
        }
    });
    names(&p, "policy.metrics");
}

#[test]
fn edited_family_wise_level() {
    let p = paths(report(), |v| {
        v["statistics"]["family_wise"]["alpha_fail"] = 0.05.into();
    });
    names(&p, "statistics.family_wise.alpha_fail");
}

#[test]
fn design_resampling_disagreeing_with_its_schedule() {
    let p = paths(report(), |v| {
        v["statistics"]["design"]["resampling"] = "paired".into();
    });
    names(&p, "statistics.design.resampling");
}

/// What a report was made with is read from it whole: the method's fields
/// (`statistics.design`, `statistics.family_wise.bound_scale`), the look
/// and the drift floor. Each removed is named; the method changed is read
/// and computed by, and the numbers no longer agree with it.
#[test]
fn the_method_and_the_look_are_read_whole_from_the_report() {
    let v = interleaved_report();
    for (block, key) in [
        ("design", "block_mean"),
        ("design", "design_spread"),
        ("family_wise", "bound_scale"),
        ("family_wise", "look"),
        ("family_wise", "spending"),
    ] {
        let p = paths(v.clone(), |v| {
            v["statistics"][block].as_object_mut().unwrap().remove(key);
        });
        names(&p, &format!("statistics.{block}.{key}"));
    }
    for block in ["design", "family_wise", "drift_floor"] {
        let p = paths(v.clone(), |v| {
            v["statistics"].as_object_mut().unwrap().remove(block);
        });
        names(&p, &format!("statistics.{block}"));
    }
    let p = paths(v.clone(), |v| {
        v["statistics"]["design"]["design_spread"] = "standard_error".into();
    });
    assert!(
        p.iter().any(|x| x.ends_with("design_requests_per_side")),
        "{p:#?}"
    );
    let p = paths(v, |v| {
        v["statistics"]["family_wise"]["bound_scale"] = "percent".into();
    });
    assert!(
        p.iter().any(|x| x.ends_with("upper_bound_percent")),
        "{p:#?}"
    );
}

#[test]
fn edited_bootstrap_seed_moves_every_interval() {
    let p = paths(report(), |v| {
        v["statistics"]["bootstrap"]["seed"] = 1.into()
    });
    names(&p, &format!("{E2E_SLOW}.ci_delta_percent.low"));
}

#[test]
fn compare_block_removed() {
    let p = paths(report(), |v| {
        v.as_object_mut().map(|r| r.remove("gates"));
    });
    names(&p, "gates");
}

#[test]
fn field_compare_never_writes() {
    let p = paths(report(), |v| {
        metric_mut(v, "fast", "ttft_p50_ms").insert("note".into(), "reviewed".into());
    });
    names(&p, "cells.fast.metrics.ttft_p50_ms.note");
}

#[test]
fn eligible_cell_with_failed_requests() {
    let p = paths(report(), |v| {
        v["cells"]["fast"]["candidate_failed"] = 2.into()
    });
    names(&p, "cells.fast.candidate_performance_eligible");
}

#[test]
fn responses_received_against_the_failure_classes() {
    let p = paths(report(), |v| {
        v["baseline_turnover"]["failures"][0]["failure_class"] = "http_error".into();
    });
    names(&p, "baseline_turnover.responses_received");
}

#[test]
fn repeat_numbering() {
    let p = paths(report(), |v| {
        v["candidate_turnover_repeat"]["repeat"] = 2.into()
    });
    names(&p, "candidate_turnover_repeat.repeat");
}

#[test]
fn human_decision_disagreeing_with_the_decision() {
    let p = paths(report(), |v| v["human_decision"] = "promote".into());
    names(&p, "human_decision");
}

#[test]
fn edited_sample_value() {
    let p = paths(report(), |v| {
        v["cells"]["slow"]["samples"]["e2e_ms"]["candidate"][0] = 1000.0.into();
    });
    assert!(p.iter().any(|x| x.starts_with(E2E_SLOW)), "{p:#?}");
}

#[test]
fn compare_refuses_an_artifact_that_contradicts_itself() {
    // What verify would reject in the report is refused at the source.
    let (b, mut c) = runs();
    c.turnover[0].contaminated = 0;
    let e = compare(&b, &c, &policy()).expect_err("contradicting artifact");
    let text = e.to_string();
    assert!(
        text.contains("candidate run artifact contradicts itself")
            && text.contains("turnover[0].contaminated"),
        "{text}"
    );
    let (mut b, c) = runs();
    b.cells[0].failed = 3;
    let e = compare(&b, &c, &policy()).expect_err("contradicting artifact");
    assert!(e.to_string().contains("cells[0].failed"), "{e}");
}

#[test]
fn a_negative_sample_is_no_measurement_for_compare_nor_verify() {
    let (b, mut c) = runs();
    c.cells[0].samples.get_mut("ttft_ms").expect("ttft_ms")[3] = -1e308;
    let e = compare(&b, &c, &policy()).expect_err("not a latency");
    let text = e.to_string();
    assert!(
        text.contains("candidate run artifact contradicts itself")
            && text.contains(
                "cells[0].samples.ttft_ms[3]: found -1e308, expected a finite value ≥ 0 (a time, a rate or a count)"
            ),
        "{text}"
    );
    // A report keeping that sample: recomputing it is refused the same way.
    let p = paths(report(), |v| {
        v["cells"]["fast"]["samples"]["ttft_ms"]["candidate"][3] = json!(-1e308);
    });
    names(&p, "cells");
}

/// A limit, stated: the seed does not say how many turnover runs were
/// planned, and its dropped repeat leaves every count consistent.
#[test]
fn dropped_repeat_in_the_seed_is_a_stated_limit() {
    let mut v = seed();
    v.as_object_mut()
        .map(|r| r.remove("candidate_turnover_repeat"));
    let r = verify_report(&v);
    assert!(r.is_clean(), "{:#?}", r.disagreements);
    assert!(
        r.unchecked
            .iter()
            .any(|u| u.contains("candidate_turnover_repeat")),
        "{:#?}",
        r.unchecked
    );
}

/// A look the clock closed early spends what the earlier looks left; the
/// report says so (`closing`), verify recomputes those levels, and a
/// `closing` that was not (dropped, or claimed at the planned last look) is named.
#[test]
fn a_closing_look_is_recomputed_and_cannot_be_claimed_or_dropped() {
    let (b, c) = runs();
    let open = Look::planned(17, 20, stats::evidence::Spending::OBrienFleming);
    let look = open.clone().closing();
    let v = compare_with_look(&b, &c, &policy(), Some(&look))
        .expect("comparable")
        .to_value();
    assert!(verify(&v).is_empty(), "{:#?}", verify(&v));
    let fw = &v["statistics"]["family_wise"];
    assert_eq!(fw["closing"], true);
    let (pass, _) = look.levels(0.05, 3);
    assert_eq!(fw["alpha_pass"].as_f64(), Some(pass));
    let open = compare_with_look(&b, &c, &policy(), Some(&open))
        .unwrap()
        .to_value();
    assert!(
        open["statistics"]["family_wise"]["alpha_pass"]
            .as_f64()
            .unwrap()
            * 3.0
            < pass,
        "closing spends far more than the look's own share"
    );

    let dropped = paths(v.clone(), |v| {
        v["statistics"]["family_wise"]
            .as_object_mut()
            .unwrap()
            .remove("closing");
    });
    names(&dropped, "statistics.family_wise.alpha_pass");
    let at_the_last = paths(v, |v| {
        v["statistics"]["family_wise"]["look"] = 20.into();
    });
    names(&at_the_last, "statistics.family_wise.closing");
}

/// The fractions of a run's first three looks, re-planned at the third.
const THIRD_LOOK: [f64; 3] = [1.0 / 14.0, 2.0 / 14.0, 3.0 / 13.0];

/// The third look of an adaptive run of 50 at [`THIRD_LOOK`], the pass
/// side at `pass` when it spends by its own fractions.
fn third_look(pass: Option<Vec<f64>>) -> Look {
    Look::planned(3, 50, stats::evidence::Spending::OBrienFleming)
        .at_fractions(THIRD_LOOK.to_vec(), pass)
}

/// What verify names in `v` with its `statistics.family_wise` edited by `f`.
fn family_edited(v: &Value, f: &dyn Fn(&mut Map)) -> Vec<String> {
    paths(v.clone(), |v| {
        f(v["statistics"]["family_wise"].as_object_mut().unwrap())
    })
}

/// Exact group-sequential boundaries over every look's fraction:
/// the report names the method and the fractions, verify recomputes the
/// levels from them, and names a history edited, out of order, not ending
/// at this look, present without its method, or absent beside this look's
/// fractions; and this look's fractions edited, out of order or half there.
#[test]
fn group_sequential_levels_are_recomputed_from_every_looks_fraction() {
    let (b, c) = runs();
    let history = THIRD_LOOK.to_vec();
    let look = third_look(None);
    let v = compare_with_look(&b, &c, &policy(), Some(&look))
        .expect("comparable")
        .to_value();
    assert!(verify(&v).is_empty(), "{:#?}", verify(&v));
    let fw = &v["statistics"]["family_wise"];
    assert_eq!(fw["boundaries"], "group_sequential");
    assert_eq!(fw["information_fractions"], json!(history));
    assert_eq!(fw["information_fraction"].as_f64(), Some(3.0 / 13.0));
    assert_eq!(
        fw["previous_information_fraction"].as_f64(),
        Some(2.0 / 14.0)
    );
    let spending = stats::evidence::Spending::OBrienFleming;
    let m = fw["gating_pairs"].as_u64().unwrap() as usize;
    let (pass, fail) = look.levels(0.05, m);
    assert_eq!(fw["alpha_pass"].as_f64(), Some(pass));
    assert_eq!(fw["alpha_fail"].as_f64(), Some(fail));
    // Above the share the union bound would have used: the earlier looks'
    // boundaries took some paths already.
    let share = spending.spent(0.05, 3.0 / 13.0) - spending.spent(0.05, 2.0 / 14.0);
    assert!(pass > share, "{pass} vs {share}");
    // The same look by look / looks (3 of 50) spends far less: the point
    // of the fractions.
    let (by_count, _) = Look::planned(3, 50, spending).levels(0.05, 3);
    assert!(pass > 100.0 * by_count, "{pass} vs {by_count}");

    let family = |f: &dyn Fn(&mut Map)| family_edited(&v, f);
    let earlier = family(&|fw| {
        fw.insert(
            "information_fractions".into(),
            json!([0.5, 2.0 / 14.0, 3.0 / 13.0]),
        );
    });
    names(&earlier, "statistics.family_wise.information_fractions");
    let moved = family(&|fw| {
        fw.insert(
            "information_fractions".into(),
            json!([0.02, 2.0 / 14.0, 3.0 / 13.0]),
        );
    });
    names(&moved, "statistics.family_wise.alpha_pass");
    let other_end = family(&|fw| {
        fw.insert(
            "information_fractions".into(),
            json!([1.0 / 14.0, 2.0 / 14.0]),
        );
    });
    names(&other_end, "statistics.family_wise.information_fractions");
    let no_method = family(&|fw| {
        fw.remove("boundaries");
    });
    names(&no_method, "statistics.family_wise.information_fractions");
    let union = family(&|fw| {
        fw.remove("boundaries");
        fw.remove("information_fractions");
    });
    names(&union, "statistics.family_wise.information_fractions");

    let edited = family(&|fw| {
        fw.insert("information_fraction".into(), json!(0.5));
    });
    names(&edited, "statistics.family_wise.information_fractions");
    let backwards = family(&|fw| {
        fw.insert("previous_information_fraction".into(), json!(0.9));
    });
    names(&backwards, "statistics.family_wise.information_fraction");
    let half = family(&|fw| {
        fw.remove("previous_information_fraction");
    });
    names(
        &half,
        "statistics.family_wise.previous_information_fraction",
    );
}

/// The pass side spending by its own information: the report
/// records its fractions beside the fail side's, its pass level is the
/// exact boundary over them (above the level over the fail side's), the
/// fail level is unchanged, and verify recomputes both and names pass
/// fractions edited, of another length, or out of order.
#[test]
fn the_pass_side_spends_over_its_own_fractions() {
    let (b, c) = runs();
    let history = THIRD_LOOK.to_vec();
    let pass = vec![1.0 / 14.0, 2.0 / 10.0, 3.0 / 10.0];
    let look = third_look(Some(pass.clone()));
    let v = compare_with_look(&b, &c, &policy(), Some(&look))
        .expect("comparable")
        .to_value();
    assert!(verify(&v).is_empty(), "{:#?}", verify(&v));
    let fw = &v["statistics"]["family_wise"];
    assert_eq!(fw["pass_information_fractions"], json!(pass));
    let m = fw["gating_pairs"].as_u64().unwrap() as usize;
    let (shared_pass, shared_fail) = third_look(None).levels(0.05, m);
    assert_eq!(third_look(None).fractions(), Some(&history[..]));
    assert!(fw["alpha_pass"].as_f64().unwrap() > shared_pass);
    assert_eq!(fw["alpha_fail"].as_f64(), Some(shared_fail));

    let family = |f: &dyn Fn(&mut Map)| family_edited(&v, f);
    let moved = family(&|fw| {
        fw.insert(
            "pass_information_fractions".into(),
            json!([1.0 / 14.0, 2.0 / 14.0, 3.0 / 13.0]),
        );
    });
    names(&moved, "statistics.family_wise.alpha_pass");
    let shorter = family(&|fw| {
        fw.insert("pass_information_fractions".into(), json!([0.1, 0.3]));
    });
    names(
        &shorter,
        "statistics.family_wise.pass_information_fractions",
    );
    let back = family(&|fw| {
        fw.insert("pass_information_fractions".into(), json!([0.2, 0.1, 0.3]));
    });
    names(&back, "statistics.family_wise.pass_information_fractions");
    // Without them the pass side spends over information_fractions.
    let shared = family(&|fw| {
        fw.remove("pass_information_fractions");
    });
    names(&shared, "statistics.family_wise.alpha_pass");
}

#[test]
fn a_tampered_report_renders_with_its_verification_failure_as_the_heading() {
    let mut v = report();
    // Claim a pass the gates do not give.
    v["qualification"] = json!("pass");
    assert!(!verify(&v).is_empty(), "the edit is caught");
    let html = report::html(&v);
    let h1 = html
        .split("<h1>")
        .nth(1)
        .and_then(|s| s.split("</h1>").next())
        .unwrap();
    assert!(h1.contains("VERIFICATION FAILED"), "{h1}");
    let title = html
        .split("<title>")
        .nth(1)
        .and_then(|s| s.split("</title>").next())
        .unwrap();
    assert!(title.contains("VERIFICATION FAILED"), "{title}");
    let md = report::markdown(&v);
    assert!(
        md.lines().next().unwrap().contains("VERIFICATION FAILED"),
        "{md}"
    );
    let term = report::terminal(&v, report::TerminalOptions::verbose(false));
    let head: Vec<&str> = term.lines().take(2).collect();
    assert!(head[1].contains("VERIFICATION FAILED"), "{head:?}");
    // The untouched report keeps its qualification as the heading.
    let clean = report();
    let q = clean["qualification"].as_str().unwrap().to_string();
    assert!(report::html(&clean).contains(&format!("<h1>Runtime comparison: {q}</h1>")));
    assert!(
        !report::terminal(&clean, report::TerminalOptions::verbose(false))
            .contains("VERIFICATION FAILED")
    );
}

// ------------------------------------- cross-runtime reference pairs ----

fn tok(token: &str, logprob: f64, top: &[(&str, f64)]) -> report::agreement::TokenLogprob {
    report::agreement::TokenLogprob {
        token: token.into(),
        bytes: None,
        id: None,
        logprob,
        top: top
            .iter()
            .map(|(t, l)| report::agreement::TopLogprob {
                token: (*t).into(),
                bytes: None,
                logprob: *l,
            })
            .collect(),
    }
}

fn reference_run(texts: &[&str], tokens: Vec<Vec<report::agreement::TokenLogprob>>) -> TurnoverRun {
    TurnoverRun {
        name: "ref".into(),
        contract: "reference".into(),
        requests: texts.len(),
        exact_output_passed: texts.len(),
        failed: 0,
        responses_received: texts.len(),
        failures: vec![],
        references: texts.iter().map(|t| Some(t.to_string())).collect(),
        reference_tokens: tokens.into_iter().map(Some).collect(),
        ..turnover(0, 0)
    }
}

/// [`report`]'s runs plus a reference workload: the candidate parts from
/// the baseline at a near-tie (" red"/" blue", 0.2 and 0.05 nats), at a hard
/// divergence (" dog"/" cat", 3 nats) and not at all ("Hi").
fn reference_report(cross_runtime: report::policy::CrossRuntime) -> Value {
    let (mut b, mut c) = runs();
    let a = || tok("A", -0.1, &[("A", -0.1), ("The", -2.5)]);
    let hi = || vec![tok("Hi", -0.01, &[("Hi", -0.01)])];
    b.turnover.push(reference_run(
        &["A red", "A dog", "Hi"],
        vec![
            vec![a(), tok(" red", -1.0, &[(" red", -1.0), (" blue", -1.2)])],
            vec![a(), tok(" dog", -0.1, &[(" dog", -0.1), (" cat", -3.1)])],
            hi(),
        ],
    ));
    c.turnover.push(reference_run(
        &["A blue", "A cat", "Hi"],
        vec![
            vec![
                a(),
                tok(" blue", -1.05, &[(" blue", -1.05), (" red", -1.1)]),
            ],
            vec![a(), tok(" cat", -0.2, &[(" cat", -0.2), (" dog", -2.0)])],
            hi(),
        ],
    ));
    let mut p = policy();
    p.quality.cross_runtime = cross_runtime;
    let v = compare(&b, &c, &p).expect("comparable").to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "the untouched report verifies: {d:#?}");
    v
}

#[test]
fn reference_pairs_are_classified_and_the_policy_decides_which_fail() {
    use report::policy::CrossRuntime;
    let v = reference_report(CrossRuntime::NearTie);
    let rc = &v["reference_comparison"];
    assert_eq!(
        [
            &rc["identical"],
            &rc["near_tie"],
            &rc["hard"],
            &rc["text_only"]
        ],
        [1, 1, 1, 0]
    );
    let classes: Vec<&str> = rc["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["near_tie", "hard", "identical"]);
    let run = &v["candidate_turnover_repeat_2"];
    assert_eq!(run["name"], "ref");
    assert_eq!(
        (&run["failed"], &run["failures"][0]["request_index"]),
        (&json!(1), &json!(1))
    );
    // One line per divergence in the terminal, with both tokens and the gaps.
    let t = report::terminal(&v, report::TerminalOptions::verbose(false));
    assert!(
        t.contains("✗ hard ref repeat 0 request 1 at token 1: baseline \" dog\" -0.100 vs candidate \" cat\" -0.200; gaps 3.000 / 1.800 nats"),
        "{t}"
    );
    assert!(
        t.contains("✓ near_tie ref repeat 0 request 0 at token 1"),
        "{t}"
    );
    assert!(
        t.contains("3 pairs: 1 identical, 1 near-tie, 1 hard"),
        "{t}"
    );
    assert!(report::markdown(&v).contains("### Reference pairs"));
    // `exact` (the default) fails the near-tie too, as before #28.
    let v = reference_report(CrossRuntime::Exact);
    assert_eq!(v["candidate_turnover_repeat_2"]["failed"], 2);
    assert_eq!(v["reference_comparison"]["prompts"][0]["passed"], false);
}

#[test]
fn edited_divergence_class_pass_or_logprob_is_named() {
    use report::policy::CrossRuntime;
    let v = reference_report(CrossRuntime::NearTie);
    let p = paths(v.clone(), |v| {
        v["reference_comparison"]["prompts"][1]["class"] = json!("near_tie");
    });
    names(&p, "reference_comparison.prompts[1].class");
    let p = paths(v.clone(), |v| {
        v["reference_comparison"]["prompts"][1]["passed"] = json!(true);
    });
    names(&p, "reference_comparison.prompts[1].passed");
    // The candidate's " blue" made 2 nats less likely than it was: the pair
    // is no near-tie by its own kept tokens.
    let p = paths(v.clone(), |v| {
        v["reference_comparison"]["prompts"][0]["candidate_tokens"][1]["logprob"] = json!(-3.05);
    });
    names(&p, "reference_comparison.prompts[0].class");
    // A logprob before the divergence changes the agreement.
    let p = paths(v.clone(), |v| {
        v["reference_comparison"]["prompts"][2]["baseline_tokens"][0]["logprob"] = json!(-0.5);
    });
    names(
        &p,
        "reference_comparison.prompts[2].agreement.mean_abs_dlogprob",
    );
    let p = paths(v, |v| {
        v["reference_comparison"]["hard"] = json!(0);
    });
    names(&p, "reference_comparison.hard");
}

/// The reference workload of [`reference_report`] under `rate`, plus a
/// task workload of 100 items: the baseline right on 60, the candidate on
/// 60 of its own (two lost, two gained).
fn quality_report() -> Value {
    quality_report_with("00".to_string() + &"1".repeat(58) + "11" + &"0".repeat(38))
}

fn quality_report_with(cand: String) -> Value {
    let (mut b, mut c) = runs();
    let a = || tok("A", -0.1, &[("A", -0.1), ("The", -2.5)]);
    b.turnover.push(reference_run(
        &["A dog"],
        vec![vec![
            a(),
            tok(" dog", -0.1, &[(" dog", -0.1), (" cat", -3.1)]),
        ]],
    ));
    c.turnover.push(reference_run(
        &["A cat"],
        vec![vec![
            a(),
            tok(" cat", -0.2, &[(" cat", -0.2), (" dog", -2.0)]),
        ]],
    ));
    let task = |answers: String| TurnoverRun {
        name: "tasks".into(),
        contract: "reference".into(),
        requests: 100,
        exact_output_passed: 100,
        responses_received: 100,
        failed: 0,
        failures: vec![],
        task_answers: answers,
        task_set_sha256: None,
        features: Default::default(),
        ..turnover(0, 0)
    };
    let base = "1".repeat(60) + &"0".repeat(40);
    b.turnover.push(task(base));
    c.turnover.push(task(cand));
    let mut p = policy();
    p.quality.cross_runtime = report::policy::CrossRuntime::Rate;
    let v = compare(&b, &c, &p).expect("comparable").to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "the untouched report verifies: {d:#?}");
    v
}

#[test]
fn the_quality_gate_is_in_the_report_and_recomputed() {
    let v = quality_report();
    let t = &v["quality"]["tasks"][0];
    assert_eq!(
        (&t["baseline_correct"], &t["candidate_correct"]),
        (&json!(60), &json!(60))
    );
    assert_eq!(
        (&t["table"]["baseline_only"], &t["table"]["candidate_only"]),
        (&json!(2), &json!(2))
    );
    let h = &v["quality"]["hard_divergence"];
    assert_eq!(
        (&h["pairs"], &h["hard"], &h["gating"]),
        (&json!(1), &json!(1), &json!(true))
    );
    // Under `rate` the hard pair fails no request; the share decides.
    assert_eq!(v["candidate_turnover_repeat_2"]["failed"], json!(0));
    let parts = v["gates"]["quality"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    // One pair, and it is hard: neither confidently above nor within 10 %.
    assert_eq!(v["gates"]["quality"]["outcome"], "inconclusive");
    assert!(
        v["qualification"]
            .as_str()
            .unwrap()
            .starts_with("inconclusive")
            || v["qualification"].as_str().unwrap().starts_with("fail")
    );
    // Every gating quality part is one more pair of the family.
    assert!(
        v["statistics"]["family_wise"]["method"]
            .as_str()
            .unwrap()
            .contains("gating quality part")
    );
    let text = report::terminal(&v, report::TerminalOptions::verbose(false));
    assert!(text.contains("task tasks: accuracy 60/100"), "{text}");
}

#[test]
fn an_edited_accuracy_count_or_answer_is_named() {
    let v = quality_report();
    let p = paths(v.clone(), |v| {
        v["quality"]["tasks"][0]["candidate_correct"] = json!(61)
    });
    names(&p, "quality.tasks[0].candidate_correct");
    // The answers edited, counts left alone: the counts no longer match them.
    let p = paths(v.clone(), |v| {
        v["quality"]["tasks"][0]["candidate_answers"] = json!("1".repeat(100))
    });
    names(&p, "quality.tasks[0].candidate_correct");
    let p = paths(v.clone(), |v| {
        v["quality"]["hard_divergence"]["hard"] = json!(0)
    });
    names(&p, "quality.hard_divergence.hard");
    let p = paths(v, |v| v["gates"]["quality"]["outcome"] = json!("pass"));
    names(&p, "gates.quality.outcome");
}

/// [`runs`] with a structured-output workload of 60 requests: the baseline
/// valid on all but one (cut off), the candidate on `cand`'s `1`s.
fn feature_report(cand: &str) -> Value {
    let (mut b, mut c) = runs();
    let json = |marks: &str| TurnoverRun {
        name: "json".into(),
        contract: "reference".into(),
        requests: 60,
        exact_output_passed: 60,
        responses_received: 60,
        failed: 0,
        failures: vec![],
        features: [("structured_output".to_string(), marks.to_string())].into(),
        ..turnover(0, 0)
    };
    b.turnover.push(json(&("1".repeat(59) + "c")));
    c.turnover.push(json(cand));
    let v = compare(&b, &c, &policy()).expect("comparable").to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "the untouched report verifies: {d:#?}");
    v
}

#[test]
fn a_feature_rate_is_gated_recomputed_and_its_edits_named() {
    // The candidate's answers stop validating: its own part fails.
    let v = feature_report(
        &"s".repeat(30)
            .chars()
            .chain("1".repeat(30).chars())
            .collect::<String>(),
    );
    let f = &v["quality"]["features"][0];
    assert_eq!(f["feature"], "structured_output");
    assert_eq!(
        (&f["baseline_correct"], &f["candidate_correct"]),
        (&json!(59), &json!(30))
    );
    assert_eq!(f["candidate_marks"]["schema_invalid"], json!(30));
    assert_eq!(f["baseline_marks"]["cut_off"], json!(1));
    assert_eq!(v["gates"]["quality"]["outcome"], "fail");
    let parts = v["gates"]["quality"]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["subject"], "quality: structured_output json");
    assert_eq!(v["gates"]["qualified"], json!(false));
    // The marks edited to all valid, the counts left: named.
    let p = paths(v.clone(), |v| {
        v["quality"]["features"][0]["candidate_answers"] = json!("1".repeat(60))
    });
    names(&p, "quality.features[0].candidate_correct");
    let p = paths(v, |v| {
        v["quality"]["features"][0]["outcome"] = json!("pass")
    });
    names(&p, "quality.features[0].outcome");
    // The same answers on both sides pass at the default margin with 60.
    let same = feature_report(&("1".repeat(59) + "c"));
    assert_eq!(
        same["quality"]["features"][0]["outcome"], "pass",
        "{}",
        same["quality"]
    );
}

#[test]
fn a_failed_quality_gate_fails_the_qualification_and_verifies() {
    // The candidate loses 30 of the baseline's 60 right answers.
    let v = quality_report_with("0".repeat(30) + &"1".repeat(30) + &"0".repeat(40));
    assert_eq!(v["gates"]["quality"]["outcome"], "fail");
    let q = v["qualification"].as_str().unwrap();
    assert!(q.contains("quality gate"), "{q}");
    assert_eq!(v["gates"]["qualified"], json!(false));
    let p = paths(v, |v| v["qualification"] = json!("fail: performance gate"));
    names(&p, "qualification");
}

/// [`report`]'s runs with a row per request kept (as a run's cells keep
/// them), each succeeded row carrying its samples' values.
fn report_with_rows() -> Value {
    let (mut b, mut c) = runs();
    for a in [&mut b, &mut c] {
        for cell in &mut a.cells {
            let s = &cell.samples;
            cell.request_rows = (0..cell.requests)
                .map(|i| infergate_report::artifact::RequestRow {
                    ok: true,
                    send_offset_ms: i as f64 * 10.0,
                    queue_ms: 0.0,
                    ttft_ms: s.get("ttft_ms").map(|v| v[i]),
                    tpot_ms: s.get("tpot_ms").map(|v| v[i]),
                    e2e_ms: s.get("e2e_ms").map(|v| v[i]),
                    completion_tokens: Some(64),
                    cluster: 0,
                })
                .collect();
        }
    }
    let v = compare(&b, &c, &policy()).expect("comparable").to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "the untouched report verifies: {d:#?}");
    v
}

#[test]
fn request_counts_and_rows_are_checked_against_what_the_cell_keeps() {
    let v = report_with_rows();
    for side in ["baseline", "candidate"] {
        let p = paths(v.clone(), |v| {
            v["cells"]["fast"][format!("{side}_requests")] = 13.into();
        });
        names(&p, &format!("cells.fast.{side}_requests"));
        let p = paths(v.clone(), |v| {
            v["cells"]["slow"]["request_rows"][side][3]["ttft_ms"] = 1.0.into();
        });
        names(&p, &format!("cells.slow.request_rows.{side}"));
        let p = paths(v.clone(), |v| {
            v["cells"]["slow"]["request_rows"][side]
                .as_array_mut()
                .unwrap()
                .pop();
        });
        names(&p, &format!("cells.slow.{side}_requests"));
    }
    // Without rows, a count below the samples it keeps is named…
    let p = paths(report(), |v| {
        v["cells"]["fast"]["baseline_requests"] = 11.into();
    });
    names(&p, "cells.fast.baseline_requests");
    // …and what no sample can show is listed as not checked.
    let unchecked = verify_report(&report()).unchecked.join("\n");
    for field in [
        "cells.fast.baseline_requests",
        "output_tolerance_percent",
        "provenance (target",
    ] {
        assert!(
            unchecked.contains(field),
            "{field} not listed:\n{unchecked}"
        );
    }
}

// ------------------------------------------- turnover skipped or not ----

/// [`runs`] with both sides' turnover skipped by the plan.
fn skipped_report() -> Value {
    let (mut b, mut c) = runs();
    for a in [&mut b, &mut c] {
        a.turnover.clear();
        a.turnover_not_run = Some(infergate_report::artifact::TurnoverSkip::SkippedByPlan);
    }
    let v = compare(&b, &c, &policy()).expect("comparable").to_value();
    let s = verify_report(&v);
    assert!(s.is_clean(), "{:#?}", s.disagreements);
    assert!(
        s.unchecked
            .iter()
            .any(|u| u.starts_with("turnover_gate.not_run") && u.contains("--runs")),
        "the skip is the report's word until the runs are read: {:#?}",
        s.unchecked
    );
    v
}

/// A report whose candidate ran its turnover, edited to say the plan
/// skipped it (state, gates and qualification alike), is caught.
#[test]
fn a_report_edited_to_skipped_turnover_is_caught() {
    let skipped = skipped_report();
    let p = paths(report(), |v| {
        v["turnover_gate"]["not_run"] = json!("skipped_by_plan");
        for g in ["strict_turnover", "non_inferior_turnover"] {
            v["gates"][g] = skipped["gates"][g].clone();
        }
        v["qualification"] =
            json!("fail: performance gate; turnover not run (skipped by the plan)");
    });
    names(&p, "turnover_gate.not_run");
}

/// The other way round: a skipped turnover edited to say it ran (the state
/// removed) fails the recomputed strict gate, and an unknown skip is named.
#[test]
fn a_skipped_turnover_edited_away_or_garbled_is_caught() {
    let p = paths(skipped_report(), |v| {
        v["turnover_gate"]
            .as_object_mut()
            .expect("turnover gate")
            .remove("not_run");
    });
    names(&p, "qualification");
    let p = paths(skipped_report(), |v| {
        v["turnover_gate"]["not_run"] = json!("skipped_by_nobody");
    });
    names(&p, "turnover_gate.not_run");
    let p = paths(skipped_report(), |v| {
        v["gates"]["strict_turnover"]["not_run"] = json!("skipped by the operator");
    });
    names(&p, "gates.strict_turnover.not_run");
}
