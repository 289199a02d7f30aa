//! `verify` of a report alone on the server's speculative-decoding counts
//! and the turnover runs' first-request TTFTs: what the report lets it
//! check is checked (counts against each other, counter-read counts
//! against the cell's counters, an unmet acceptance expectation's rate),
//! and what it does not is listed as not checked.

use infergate_report::artifact::{RunArtifact, Speculative};
use infergate_report::server_metrics::{VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS};
use infergate_report::{Policy, Verification, compare, fixtures, verify_report};
use serde_json::{Value, json};

const REASON: &str =
    "expect.spec_acceptance_min 0.5: the server accepted 0.375 of its drafted tokens (30 of 80)";

fn side(label: &str) -> RunArtifact {
    let samples = fixtures::spread_samples(12, (500.0, 640.0, 290.0), 0);
    let mut cell = fixtures::cell("fast", fixtures::shape(3000, 2, 12), samples, Some(2997.0));
    if label == "baseline" {
        // Per-response counts (llama.cpp), below the cell's expectation.
        cell.speculative = Some(Speculative {
            reported: 12,
            drafted: 80,
            accepted: 30,
            predicted: 200,
            ..Speculative::default()
        });
        cell.performance_eligible = false;
        cell.ineligible_reasons = vec![REASON.into()];
    } else {
        // Counter-read counts (vLLM), from the cell's own counters.
        let known = |key: &str, value: f64| json!({"key": key, "meaning": "speculative", "kind": "counter", "value": value});
        let metrics = serde_json::from_value(json!({
            "endpoint": "target", "url": "http://127.0.0.1:1/metrics", "engine": "vllm",
            "windows": 1, "scrapes": 2, "window_s": 3.0,
            "counters": {VLLM_DRAFT_TOKENS: 90.0, VLLM_ACCEPTED: 60.0, VLLM_DRAFTS: 30.0},
            "known": [known(VLLM_DRAFT_TOKENS, 90.0), known(VLLM_ACCEPTED, 60.0), known(VLLM_DRAFTS, 30.0)]
        }))
        .expect("server metrics");
        cell.speculative = Speculative::from_counters(&metrics).map(|s| s.expect("consistent"));
        cell.server_metrics = vec![metrics];
    }
    let mut run = fixtures::turnover(0, 60, 0);
    run.first_ttft_ms = Some(120.0);
    run.later_ttft_p50_ms = Some(40.0);
    fixtures::artifact(fixtures::provenance(label, label), vec![cell], vec![run])
}

fn report() -> Value {
    let v = compare(&side("baseline"), &side("candidate"), &Policy::default())
        .expect("comparable")
        .to_value();
    let r = verify_report(&v);
    assert!(
        r.is_clean(),
        "the untouched report verifies: {:#?}",
        r.disagreements
    );
    v
}

fn edited(edit: impl FnOnce(&mut Value)) -> Verification {
    let mut v = report();
    edit(&mut v);
    verify_report(&v)
}

#[track_caller]
fn names(v: &Verification, path: &str) {
    assert!(
        v.disagreements.iter().any(|d| d.path == path),
        "{path} not named in {:#?}",
        v.disagreements
    );
}

#[track_caller]
fn lists(v: &Verification, what: &str) {
    assert!(
        v.unchecked.iter().any(|u| u.contains(what)),
        "{what} not listed as not checked: {:#?}",
        v.unchecked
    );
}

const B: &str = "cells.fast.baseline_speculative";
const C: &str = "cells.fast.candidate_speculative";

#[test]
fn counts_past_what_was_drafted_are_named() {
    let v = edited(|v| v["cells"]["fast"]["baseline_speculative"]["accepted"] = json!(81));
    names(&v, &format!("{B}.accepted"));
    let v = edited(|v| v["cells"]["fast"]["candidate_speculative"]["drafts"] = json!(91));
    names(&v, &format!("{C}.drafts"));
    let v = edited(|v| v["cells"]["fast"]["baseline_speculative"]["reported"] = json!(13));
    names(&v, &format!("{B}.reported"));
    let v = edited(|v| {
        v["cells"]["fast"]["baseline_speculative"]["drafted"] = json!(u64::MAX as f64 * 2.0)
    });
    names(&v, B);
}

#[test]
fn counter_read_counts_are_read_again_from_the_cells_counters() {
    let v = edited(|v| v["cells"]["fast"]["candidate_speculative"]["accepted"] = json!(70));
    names(&v, &format!("{C}.accepted"));
    let v = edited(|v| v["cells"]["fast"]["candidate_speculative"]["drafted"] = json!(95));
    names(&v, &format!("{C}.drafted"));
}

#[test]
fn an_unmet_expectation_rate_is_made_again_from_the_counts() {
    // Still consistent counts, but not the ones the reason's rate came from.
    let v = edited(|v| v["cells"]["fast"]["baseline_speculative"]["drafted"] = json!(60));
    names(&v, "cells.fast.baseline_ineligible_reasons[0]");
    // Counts that meet the minimum: the reason cannot stand.
    let v = edited(|v| v["cells"]["fast"]["baseline_speculative"]["accepted"] = json!(70));
    names(&v, "cells.fast.baseline_ineligible_reasons[0]");
}

#[test]
fn per_response_counts_and_first_ttfts_are_listed_as_not_checked() {
    // Per-response counts consistent with each other, and a first TTFT
    // edited to another time, cannot be told from the report alone: it says so.
    let r = edited(|v| v["candidate_turnover"]["first_ttft_ms"] = json!(9999.0));
    assert!(r.is_clean(), "{:#?}", r.disagreements);
    lists(&r, "_speculative counts summed from per-response timings");
    lists(&r, "first_ttft_ms");
    lists(&r, "infergate verify DIR");
    // A time that is no time is named.
    let v = edited(|v| v["candidate_turnover"]["first_ttft_ms"] = json!(-5.0));
    names(&v, "candidate_turnover.first_ttft_ms");
}
