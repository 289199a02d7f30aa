//! Turnover runs: each run's counts against each other and against its
//! failure records (classes, the check order, contamination: the checks
//! in `consistency`, shared with a run artifact's), the keys and repeats in
//! sequence, and the turnover comparison and gates recomputed from the
//! counts with the policy's alpha; or, when the report says the gates did
//! not run, that it holds no candidate run to have judged.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::super::artifact::TurnoverSkip;
use super::super::checker::{Checker, join, show};
use super::super::consistency::check_turnover_run;
use super::super::model::{Gate, Side, parse_turnover_key, turnover_key};
use super::super::policy::{DEFAULT_ALPHA, DEFAULT_TURNOVER_CONFIDENCE, TurnoverGateMode};
use super::super::turnover_rates::{self, RunCounts};
use super::params::Params;

/// The turnover gates as recomputed.
pub(super) struct TurnoverGates {
    pub strict: Gate,
    pub non_inferior: Gate,
    /// The report's word that they did not run (`turnover_gate.not_run`).
    pub not_run: Option<TurnoverSkip>,
}

pub(super) fn check_turnover(
    ck: &mut Checker,
    root: &Map<String, Value>,
    params: &Params,
) -> TurnoverGates {
    let counts = check_runs(ck, root);
    check_listed_runs(ck, root);
    let none = Vec::new();
    let b = counts.get(&Side::Baseline).unwrap_or(&none);
    let c = counts.get(&Side::Candidate).unwrap_or(&none);
    let not_run = check_not_run(ck, root, c);
    let strict = match not_run {
        Some(skip) => Gate::not_run(super::super::gate::STRICT_RULE, skip.describe()),
        None => super::super::gate::strict_gate(c),
    };
    if let Some(found) = ck.boolean(
        "strict_turnover_gate_passed",
        root.get("strict_turnover_gate_passed"),
    ) {
        ck.expect_bool("strict_turnover_gate_passed", found, strict.passed);
    }

    // Recomputed with the policy's alpha where the report has one.
    let tc = root.get("turnover_comparison");
    let policy_alpha = root
        .get("policy")
        .and_then(|p| p.get("alpha"))
        .and_then(Value::as_f64);
    let alpha = policy_alpha
        .or(tc.and_then(|t| t.get("alpha")).and_then(Value::as_f64))
        .filter(|a| *a > 0.0 && *a < 1.0)
        .unwrap_or(DEFAULT_ALPHA);
    let confidence = tc
        .and_then(|t| t.get("confidence"))
        .and_then(Value::as_f64)
        .filter(|a| *a > 0.0 && *a < 1.0)
        .unwrap_or(DEFAULT_TURNOVER_CONFIDENCE);
    let margin = root
        .get("statistics")
        .and_then(|s| s.get("turnover_margin"))
        .or(tc.and_then(|t| t.get("margin")))
        .and_then(Value::as_f64);
    let cmp = turnover_rates::compare_turnover(b, c, alpha, confidence, margin);
    if tc.is_some() {
        match serde_json::to_value(&cmp) {
            Ok(expected) => ck.expect_value("turnover_comparison", tc, &expected),
            Err(e) => ck.push(
                "turnover_comparison",
                "unserializable".into(),
                e.to_string(),
            ),
        }
    }
    let non_inferior = match not_run {
        Some(skip) => Gate::not_run(super::super::gate::NON_INFERIOR_RULE, skip.describe()),
        None => super::super::gate::non_inferior_gate(&cmp),
    };
    if let (Some(g), Some(mode)) = (root.get("turnover_gate"), params.mode)
        && let Some(found) = ck.boolean("turnover_gate.passed", g.get("passed"))
    {
        let expected = match mode {
            TurnoverGateMode::Strict => strict.passed,
            TurnoverGateMode::NonInferior => strict.passed || non_inferior.passed,
        };
        ck.expect_bool("turnover_gate.passed", found, expected);
    }
    TurnoverGates {
        strict,
        non_inferior,
        not_run,
    }
}

/// The report's `turnover_gate.not_run`: readable, and beside no candidate
/// turnover run (a run that skipped its turnover has none to judge). Who
/// skipped is the report's word: the plan is not in it.
fn check_not_run(
    ck: &mut Checker,
    root: &Map<String, Value>,
    candidate: &[RunCounts],
) -> Option<TurnoverSkip> {
    let v = root.get("turnover_gate")?.get("not_run")?;
    let Ok(skip) = serde_json::from_value::<TurnoverSkip>(v.clone()) else {
        ck.wrong(
            "turnover_gate.not_run",
            Some(v),
            "\"skipped_by_plan\" or \"skipped_by_run\"",
        );
        return None;
    };
    if let Some(run) = candidate.first() {
        ck.push(
            "turnover_gate.not_run",
            show(Some(v)),
            format!(
                "absent: the report holds candidate turnover runs ({}), so they ran",
                run.key
            ),
        );
        return None;
    }
    ck.limit(format!(
        "turnover_gate.not_run: that the turnover check was {} is the report's word until `verify --runs` (or `verify QUALIFICATION_DIR`) makes the report again from the run artifacts, which record the skip",
        skip.describe()
    ));
    Some(skip)
}

/// Every `<side>_turnover…` key, in ordinal order, with no gap; each run's
/// repeat numbering within its name.
fn check_runs(ck: &mut Checker, root: &Map<String, Value>) -> BTreeMap<Side, Vec<RunCounts>> {
    let mut runs: BTreeMap<(Side, usize), (&str, &Value)> = BTreeMap::new();
    for (k, v) in root {
        if let Some(pos) = parse_turnover_key(k) {
            runs.insert(pos, (k.as_str(), v));
        }
    }
    let mut counts: BTreeMap<Side, Vec<RunCounts>> = BTreeMap::new();
    let mut repeats: BTreeMap<(Side, String), usize> = BTreeMap::new();
    for ((side, ordinal), (key, run)) in &runs {
        let list = counts.entry(*side).or_default();
        if *ordinal != list.len() && !runs.contains_key(&(*side, list.len())) {
            ck.push(
                turnover_key(*side, list.len()),
                "missing".into(),
                format!("present, since {key} is"),
            );
        }
        if let Some(c) = check_turnover_run(ck, key, run) {
            let next = repeats.entry((*side, c.name.clone())).or_default();
            check_repeat(ck, key, run, *next);
            *next += 1;
            list.push(c);
        }
    }
    counts
}

/// Every run key the turnover comparison or the strict gate lists is in
/// the report: a dropped run is named, not silently left out of the counts.
fn check_listed_runs(ck: &mut Checker, root: &Map<String, Value>) {
    let mut listed: Vec<(String, &str)> = Vec::new();
    let groups = root
        .get("turnover_comparison")
        .and_then(|t| t.get("groups"))
        .and_then(Value::as_array);
    for g in groups.into_iter().flatten() {
        let rates = g
            .get("candidate_runs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(g.get("candidate_pooled"))
            .chain(g.get("baseline"));
        for r in rates {
            for k in r
                .get("runs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(k) = k.as_str() {
                    listed.push((k.to_string(), "turnover_comparison"));
                }
            }
        }
    }
    let parts = root
        .get("gates")
        .and_then(|g| g.get("strict_turnover"))
        .and_then(|s| s.get("parts"))
        .and_then(Value::as_array);
    for p in parts.into_iter().flatten() {
        if let Some(k) = p.get("subject").and_then(Value::as_str)
            && root.get("candidate_turnover").is_some()
        {
            listed.push((k.to_string(), "gates.strict_turnover"));
        }
    }
    let mut named = BTreeSet::new();
    for (key, by) in listed {
        if parse_turnover_key(&key).is_some()
            && root.get(&key).is_none()
            && named.insert(key.clone())
        {
            ck.push(
                &key,
                "missing".into(),
                format!("present: {by} lists this run"),
            );
        }
    }
}

/// A run's `repeat`, when given: the runs of one name count 0, 1, 2, … in key order.
fn check_repeat(ck: &mut Checker, key: &str, run: &Value, expected: usize) {
    let Some(v) = run.get("repeat") else { return };
    if let Some(found) = ck.count(&join(key, "repeat"), Some(v))
        && found != expected as u64
    {
        ck.push(
            join(key, "repeat"),
            found.to_string(),
            format!("{expected}: runs of one name are numbered in key order (a repeat is missing or out of place)"),
        );
    }
}

/// Each turnover run's first-request TTFT and its later requests' median:
/// times in ms (finite, not negative) when present. Which times the
/// requests took is in the run journals, not the report: the limit line
/// says so when any run carries them.
pub(super) fn check_ttfts(ck: &mut Checker, root: &Map<String, Value>) {
    let mut any = false;
    for (key, run) in root {
        if parse_turnover_key(key).is_none() {
            continue;
        }
        for field in ["first_ttft_ms", "later_ttft_p50_ms"] {
            let Some(v) = run.get(field).filter(|v| !v.is_null()) else {
                continue;
            };
            any = true;
            let path = join(key, field);
            if let Some(ms) = ck.num(&path, Some(v))
                && ms < 0.0
            {
                ck.push(path, ms.to_string(), "a time in ms, not negative");
            }
        }
    }
    if any {
        ck.limit("turnover runs' first_ttft_ms and later_ttft_p50_ms: taken as given; the times their requests took are in the run journals (infergate verify DIR, or REPORT --runs BASE_DIR CAND_DIR with --suite)");
    }
}
