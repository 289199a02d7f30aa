//! `verify`: recompute what a v1 report derives and list every
//! disagreement, and say what could not be recomputed. Works on
//! `serde_json::Value`, so any v1 report, the seed included, can be
//! checked; added fields are checked when present.
//!
//! By job:
//! - [`params`]: declared parameters — the `policy` block against its metric
//!   names (and the defaults when it says so), the `statistics` block
//!   (family-wise levels, design, bootstrap settings), the turnover mode and
//!   alpha wherever repeated; a report with some of `compare`'s blocks must
//!   have all of them.
//! - [`cells`]: each cell and metric — the metric set against the policy
//!   (the seed's three without one), thresholds, directions, samples and
//!   quantiles against the policy and the names, values against the
//!   samples, deltas, flags, CIs and verdicts (relative tolerance 1e-9).
//! - [`turnover_runs`]: each turnover run's counts, failure classes and
//!   check order, contamination, keys and repeats; the turnover comparison
//!   and gates from the counts; the first-request TTFTs are times.
//! - [`speculative`]: each side's speculative-decoding counts against each
//!   other, the cell's counters and its unmet acceptance expectation.
//! - [`gates`]: the evidence gate, the `gates` block, the qualification
//!   (only the wordings the recomputed gates give), the decision, the images
//!   against provenance.
//! - [`recompute`]: a compare-made report is made again from its own
//!   samples, runs and policy, and must agree bit for bit.
//! - [`references`]: the cross-runtime reference comparison, each pair's
//!   class decided again from its kept per-token logprobs.
//! - [`runs`]: `--runs`: the report made again from the run directories'
//!   journals, and each input's sha256 against the report's record of it.

mod cells;
mod gates;
mod params;
mod recompute;
mod references;
mod speculative;
mod turnover_runs;

use serde::Serialize;
use serde_json::{Map, Value};

use super::checker::{Checker, Disagreement, show};

use super::model::REPORT_SCHEMA;

/// The result of verifying a report: what disagrees, and what this report
/// does not let `verify` check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verification {
    pub disagreements: Vec<Disagreement>,
    /// Plain sentences: what could not be recomputed, and why.
    pub unchecked: Vec<String>,
}

impl Verification {
    pub fn is_clean(&self) -> bool {
        self.disagreements.is_empty()
    }
}

/// Check a report; an empty list means everything verify can recompute agrees.
pub fn verify(json: &Value) -> Vec<Disagreement> {
    verify_report(json).disagreements
}

/// [`verify`], with the list of what could not be checked.
pub fn verify_report(json: &Value) -> Verification {
    let mut ck = Checker::default();
    let Some(root) = json.as_object() else {
        ck.wrong("", Some(json), "a JSON object");
        return finish(ck);
    };
    check_header(&mut ck, root);
    let params = params::check(&mut ck, root);
    let performance = cells::check_cells(&mut ck, root, &params);
    let evidence = gates::check_evidence_gate(&mut ck, root);
    gates::check_informative(&mut ck, root, &params);
    let turnover = turnover_runs::check_turnover(&mut ck, root, &params);
    turnover_runs::check_ttfts(&mut ck, root);
    speculative::check(&mut ck, root);
    let recomputed = gates::Recomputed {
        performance,
        evidence,
        turnover: &turnover,
    };
    gates::check_gates(&mut ck, root, &params, &recomputed);
    gates::check_decision(&mut ck, root);
    gates::check_images(&mut ck, root);
    recompute::check(&mut ck, root, &params);
    references::check(&mut ck, root);
    limits(&mut ck, root, &params);
    finish(ck)
}

/// One disagreement per path: the first found (the consistency checks run
/// before the recomputation and say more about why).
fn finish(ck: Checker) -> Verification {
    let mut seen = std::collections::BTreeSet::new();
    Verification {
        disagreements: ck
            .out
            .into_iter()
            .filter(|d| seen.insert(d.path.clone()))
            .collect(),
        unchecked: ck.unchecked,
    }
}

fn check_header(ck: &mut Checker, root: &Map<String, Value>) {
    match root.get("schema").and_then(Value::as_str) {
        Some(REPORT_SCHEMA) => {}
        _ => ck.push(
            "schema",
            show(root.get("schema")),
            format!("\"{REPORT_SCHEMA}\""),
        ),
    }
    for key in [
        "baseline_image",
        "candidate_image",
        "promotion",
        "human_decision",
    ] {
        ck.string(key, root.get(key));
    }
}

/// What this report does not let `verify` recompute.
fn limits(ck: &mut Checker, root: &Map<String, Value>, params: &Params) {
    let has_samples = root
        .get("cells")
        .and_then(Value::as_object)
        .is_some_and(|c| c.values().any(|c| c.get("samples").is_some()));
    if !has_samples {
        ck.limit("metric values (baseline, candidate): the report carries no per-request samples, so they are taken as given; only delta_percent, the regression flags and the gates are recomputed from them");
        ck.limit("confidence intervals, verdicts, evidence bounds and requests_to_resolve: there are no samples to compute them from");
    }
    if root.get("policy").is_none() {
        ck.limit(format!(
            "gating parameters: no policy block, so the seed's metrics ({}) are required and each threshold is the one its flag's name carries; which thresholds were intended is not in the report",
            super::policy::DEFAULT_METRICS.join(", ")
        ));
    }
    if !params.made_by_compare {
        ck.limit("turnover comparison (exact tests) and the non-inferior gate: computed from the run counts, but the report has no turnover_comparison block to check them against");
        ck.limit("turnover repeats: the report does not say how many runs were planned, so a dropped run (e.g. candidate_turnover_repeat) cannot be told from one never made");
    } else {
        ck.limit("warnings: they depend on run fields a report does not keep (client-side token counts, prompt tolerance), and are not recomputed");
    }
    ck.limit("turnover failure records and per-request samples: taken as given; whether they came from real requests needs the run directories (infergate verify REPORT --runs BASE_DIR CAND_DIR)");
    ck.limit("promotion, human_decision and the decision's note: written by a person, not derived");
    ck.limit("cells.*.output_tolerance_percent: the suite's, taken as written (the output-length check uses it); `infergate verify --runs` reads it from the suite");
    ck.limit("provenance (target, model, runtime, image, host, suite and its sha256, times): taken as written; `infergate verify --runs` checks it against the run artifacts");
}

use params::Params;

pub use params::MadeWith;

/// What a report was made with (its policy, method and look), rebuilt from
/// its `policy` and `statistics` blocks (for making the report again from
/// its runs: `infergate::verify_runs`).
pub fn made_with(root: &Map<String, Value>) -> Result<MadeWith, String> {
    let params = params::check(&mut Checker::default(), root);
    params::made_with(root, &params)
}

/// Every field of `expected` (a report made again) against the report
/// `root`, as disagreements in `ck`.
pub fn expect_report(ck: &mut Checker, root: &Map<String, Value>, expected: &crate::Report) {
    recompute::expect_report(ck, root, expected);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "schema": REPORT_SCHEMA,
            "baseline_image": "a", "candidate_image": "b",
            "cells": {"c": {
                "baseline_requests": 3, "candidate_requests": 3,
                "baseline_performance_eligible": true, "candidate_performance_eligible": true,
                "median_prompt_tokens": 10.0,
                "metrics": {"e2e_p50_ms": {"baseline": 100.0, "candidate": 104.0, "delta_percent": 4.0,
                    "no_more_than_3_percent_regression": false}}
            }},
            "performance_gate_passed": false,
            "strict_turnover_gate_passed": true,
            "qualification": "fail: performance gate",
            "promotion": "pending",
            "candidate_turnover": {"requests": 2, "exact_output_passed": 2, "failed": 0,
                "responses_received": 2, "performance_eligible": false, "failures": []},
            "human_decision": "pending"
        })
    }

    #[test]
    fn consistent_minimal_report_is_clean() {
        assert_eq!(verify(&minimal()), vec![]);
    }

    #[test]
    fn threshold_comes_from_the_flag_name() {
        let mut v = minimal();
        v["cells"]["c"]["metrics"]["e2e_p50_ms"]["no_more_than_3_percent_regression"] = json!(true);
        let d = verify(&v);
        assert!(
            d.iter()
                .any(|d| d.path == "cells.c.metrics.e2e_p50_ms.no_more_than_3_percent_regression"),
            "{d:?}"
        );
    }

    #[test]
    fn wrong_types_and_missing_fields_name_the_path() {
        let mut v = minimal();
        v["cells"]["c"]["metrics"]["e2e_p50_ms"]["baseline"] = json!("100");
        v["candidate_turnover"]["failed"] = Value::Null;
        let paths: Vec<String> = verify(&v).into_iter().map(|d| d.path).collect();
        assert!(
            paths.contains(&"cells.c.metrics.e2e_p50_ms.baseline".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"candidate_turnover.failed".to_string()),
            "{paths:?}"
        );
    }

    #[test]
    fn not_an_object() {
        assert_eq!(verify(&json!([])).len(), 1);
    }

    #[test]
    fn gap_in_repeats_is_reported() {
        let mut v = minimal();
        v["candidate_turnover_repeat_2"] = v["candidate_turnover"].clone();
        let d = verify(&v);
        assert!(
            d.iter().any(|d| d.path == "candidate_turnover_repeat"),
            "{d:?}"
        );
    }
}
