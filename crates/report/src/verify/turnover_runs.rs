//! Turnover runs: each run's counts against each other and against its
//! failure records (classes, the check order, contamination), the keys and
//! repeats in sequence, and the turnover comparison and gates recomputed
//! from the counts with the policy's alpha.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::artifact::Outcome;

use super::super::model::{Gate, Side, parse_turnover_key, turnover_key};
use super::super::policy::{DEFAULT_ALPHA, DEFAULT_TURNOVER_CONFIDENCE, TurnoverGateMode};
use super::super::turnover_rates::{self, RunCounts};
use super::checker::{Checker, join};
use super::params::Params;

/// Failure classes a turnover failure can have, in check order: transport
/// and HTTP, stream validity, canary, controlled output. The first three
/// mean no valid response arrived.
const CLASSES: [Outcome; 5] = [
    Outcome::RequestError,
    Outcome::HttpError,
    Outcome::StreamValidationFailed,
    Outcome::RequestCanaryFailed,
    Outcome::ControlledOutputFailed,
];

fn class_of(s: &str) -> Option<Outcome> {
    CLASSES.into_iter().find(|c| c.as_str() == s)
}

fn no_response(c: Outcome) -> bool {
    matches!(
        c,
        Outcome::RequestError | Outcome::HttpError | Outcome::StreamValidationFailed
    )
}

/// The turnover gates as recomputed.
pub(super) struct TurnoverGates {
    pub strict: Gate,
    pub non_inferior: Gate,
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
    let strict = super::super::gate::strict_gate(c);
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
    let non_inferior = super::super::gate::non_inferior_gate(&cmp);
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
    }
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
        if let Some(c) = check_run(ck, key, run) {
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

/// A run artifact's turnover run, with the checks a report's run gets.
pub(super) fn check_artifact_run(ck: &mut Checker, key: &str, run: &Value) {
    check_run(ck, key, run);
}

/// Check one turnover run's counts; returns them for the gates.
fn check_run(ck: &mut Checker, key: &str, run: &Value) -> Option<RunCounts> {
    let run = ck.object(key, Some(run))?;
    let p = |k: &str| join(key, k);
    let requests = ck.count(&p("requests"), run.get("requests"));
    let passed = ck.count(&p("exact_output_passed"), run.get("exact_output_passed"));
    let failed = ck.count(&p("failed"), run.get("failed"));
    let received = ck.count(&p("responses_received"), run.get("responses_received"));
    if let Some(true) = ck.boolean(&p("performance_eligible"), run.get("performance_eligible")) {
        ck.push(
            p("performance_eligible"),
            "true".into(),
            "false: turnover runs are never performance evidence",
        );
    }
    let contaminated = ck.opt_count(&p("contaminated"), run.get("contaminated"));
    if let (Some(r), Some(pa), Some(f)) = (requests, passed, failed)
        && pa.checked_add(f) != Some(r)
    {
        ck.push(
            p("failed"),
            f.to_string(),
            format!(
                "{} (requests {r} − exact_output_passed {pa})",
                r.saturating_sub(pa)
            ),
        );
    }
    if let (Some(f), Some(c)) = (failed, contaminated)
        && c > f
    {
        ck.push(
            p("contaminated"),
            c.to_string(),
            format!("at most failed ({f}): a contaminated answer is a failed request"),
        );
    }
    let tally = ck
        .array(&p("failures"), run.get("failures"))
        .map(|f| check_failures(ck, &p("failures"), f, requests));
    if let (Some(t), Some(f)) = (&tally, failed)
        && t.listed != f
    {
        ck.push(
            format!("{}.length", p("failures")),
            t.listed.to_string(),
            format!("{f} (failed)"),
        );
    }
    check_received(ck, key, requests, received, tally.as_ref());
    if let (Some(t), Some(c)) = (&tally, contaminated)
        && t.foreign != c
    {
        ck.push(
            p("contaminated"),
            c.to_string(),
            format!(
                "{}: the failures carrying another request's marker",
                t.foreign
            ),
        );
    }
    let name = match run.get("name") {
        Some(v) => ck
            .string(&p("name"), Some(v))
            .unwrap_or("turnover")
            .to_string(),
        None => "turnover".to_string(),
    };
    Some(RunCounts {
        key: key.to_string(),
        name,
        requests: requests?,
        failed: failed?,
        contaminated,
    })
}

/// `responses_received`: every request whose response arrived complete,
/// i.e. all but the failures of a transport, HTTP or stream class.
fn check_received(
    ck: &mut Checker,
    key: &str,
    requests: Option<u64>,
    received: Option<u64>,
    tally: Option<&Tally>,
) {
    let (Some(r), Some(rr)) = (requests, received) else {
        return;
    };
    let expected = match tally {
        Some(t) if t.all_classes_known => r.saturating_sub(t.no_response),
        _ if rr > r => r,
        _ => return,
    };
    if rr != expected {
        ck.push(
            join(key, "responses_received"),
            rr.to_string(),
            format!("{expected} (requests {r} − failures with no valid response)"),
        );
    }
}

/// What a run's failure list adds up to.
#[derive(Default)]
struct Tally {
    listed: u64,
    /// Failures carrying another request's marker.
    foreign: u64,
    /// Failures of a class that means no valid response arrived.
    no_response: u64,
    all_classes_known: bool,
}

fn check_failures(
    ck: &mut Checker,
    path: &str,
    failures: &[Value],
    requests: Option<u64>,
) -> Tally {
    let mut t = Tally {
        listed: failures.len() as u64,
        all_classes_known: true,
        ..Tally::default()
    };
    let mut seen = BTreeSet::new();
    let mut last: Option<u64> = None;
    for (i, fl) in failures.iter().enumerate() {
        let fp = format!("{path}[{i}]");
        let Some(fo) = ck.object(&fp, Some(fl)) else {
            t.all_classes_known = false;
            continue;
        };
        if let Some(idx) = ck.count(&join(&fp, "request_index"), fo.get("request_index")) {
            check_index(ck, &fp, idx, requests, &mut seen, last);
            last = Some(idx);
        }
        let foreign = check_markers(ck, &fp, fo);
        t.foreign += u64::from(foreign);
        match check_class(ck, &fp, fo, foreign) {
            Some(c) => t.no_response += u64::from(no_response(c)),
            None => t.all_classes_known = false,
        }
        ck.count(&join(&fp, "words"), fo.get("words"));
        if let Some(fr) = ck.array(&join(&fp, "finish_reasons"), fo.get("finish_reasons")) {
            for (j, r) in fr.iter().enumerate() {
                ck.string(&format!("{}[{j}]", join(&fp, "finish_reasons")), Some(r));
            }
        }
    }
    t
}

/// A request index below `requests`, listed once, in ascending order.
fn check_index(
    ck: &mut Checker,
    fp: &str,
    idx: u64,
    requests: Option<u64>,
    seen: &mut BTreeSet<u64>,
    last: Option<u64>,
) {
    let p = join(fp, "request_index");
    if let Some(r) = requests.filter(|r| idx >= *r) {
        ck.push(&p, idx.to_string(), format!("below requests ({r})"));
    }
    if !seen.insert(idx) {
        ck.push(&p, idx.to_string(), "an index not already listed");
    } else if let Some(prev) = last.filter(|prev| idx < *prev) {
        ck.push(
            &p,
            idx.to_string(),
            format!("above {prev}: failures are listed by request index"),
        );
    }
}

/// `foreign_markers`: strings; returns whether there are any.
fn check_markers(ck: &mut Checker, fp: &str, fo: &Map<String, Value>) -> bool {
    let Some(v) = fo.get("foreign_markers") else {
        return false;
    };
    let Some(list) = ck.array(&join(fp, "foreign_markers"), Some(v)) else {
        return false;
    };
    for (j, m) in list.iter().enumerate() {
        ck.string(&format!("{}[{j}]", join(fp, "foreign_markers")), Some(m));
    }
    !list.is_empty()
}

/// The class is a known one and the first failing check: a failed canary
/// (or a foreign marker) comes before the controlled output.
fn check_class(
    ck: &mut Checker,
    fp: &str,
    fo: &Map<String, Value>,
    foreign: bool,
) -> Option<Outcome> {
    let cp = join(fp, "failure_class");
    let canary = ck.boolean(&join(fp, "canary_passed"), fo.get("canary_passed"));
    let class = ck.string(&cp, fo.get("failure_class"))?;
    let Some(c) = class_of(class) else {
        let known: Vec<&str> = CLASSES.iter().map(|c| c.as_str()).collect();
        ck.push(
            &cp,
            format!("\"{class}\""),
            format!("one of {}", known.join(", ")),
        );
        return None;
    };
    if foreign && canary == Some(true) {
        ck.push(
            join(fp, "canary_passed"),
            "true".into(),
            "false: the answer carries another request's marker",
        );
    }
    let canary_failed = canary == Some(false) || foreign;
    if c == Outcome::ControlledOutputFailed && canary_failed {
        ck.push(
            &cp,
            format!("\"{class}\""),
            format!(
                "\"{}\" (or a transport class): the canary is checked before the controlled output",
                Outcome::RequestCanaryFailed.as_str()
            ),
        );
    }
    if c == Outcome::RequestCanaryFailed && canary == Some(true) && !foreign {
        ck.push(
            join(fp, "canary_passed"),
            "true".into(),
            "false, as failure_class is request_canary_failed",
        );
    }
    Some(c)
}
