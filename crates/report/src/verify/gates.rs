//! Gates and the qualification: the evidence gate from each metric's bounds
//! and margin, the `gates` block and the qualification text from the
//! recomputed gates, the decision, and the images against provenance.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::stats::{self, GateOutcome};

use super::super::checker::{Checker, join, show};
use super::super::compare::{bootstrap_units, clustered};
use super::super::gate::{
    QUAL_FAIL_BOTH, QUAL_FAIL_PERFORMANCE, QUAL_FAIL_TURNOVER, QUAL_FAIL_TURNOVER_INCONCLUSIVE,
    QUAL_INCONCLUSIVE, QUAL_NOT_BLANKET, QUAL_PASS, QUAL_PASS_NON_INFERIOR, evidence_qualification,
    qualification,
};
use super::super::model::{Gate, parse_regression_flag};
use super::super::policy::TurnoverGateMode;
use super::params::Params;
use super::turnover_runs::TurnoverGates;
use crate::design::Method;

fn parse_outcome(v: &Value) -> Option<GateOutcome> {
    serde_json::from_value(v.clone()).ok()
}

/// The evidence gate, when the report has one: each metric's outcome from its
/// own bounds and margin, each gate part against its metric, the gate's
/// outcome from its parts, and `performance_outcome` against the gate.
/// Returns the recomputed gate outcome.
pub(super) fn check_evidence_gate(
    ck: &mut Checker,
    root: &Map<String, Value>,
) -> Option<GateOutcome> {
    let gate = root.get("gates")?.get("performance_evidence")?;
    let metric_outcomes = metric_evidence_outcomes(ck, root);
    let expected = check_evidence_parts(ck, gate, &metric_outcomes);
    match gate.get("outcome").and_then(parse_outcome) {
        Some(found) if found == expected => {}
        _ => ck.push(
            "gates.performance_evidence.outcome",
            show(gate.get("outcome")),
            format!("\"{}\" from its parts", expected.as_str()),
        ),
    }
    if let Some(v) = root.get("performance_outcome")
        && v.as_str() != Some(expected.as_str())
    {
        ck.push(
            "performance_outcome",
            show(Some(v)),
            format!("\"{}\", the evidence gate's outcome", expected.as_str()),
        );
    }
    Some(expected)
}

/// Each part against its metric's outcome, every metric with evidence in
/// the gate; returns the gate's outcome from its parts.
fn check_evidence_parts(
    ck: &mut Checker,
    gate: &Value,
    metric_outcomes: &BTreeMap<String, GateOutcome>,
) -> GateOutcome {
    let listed: &[Value] = gate
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut parts = Vec::new();
    let mut subjects = BTreeSet::new();
    for (i, part) in listed.iter().enumerate() {
        let path = format!("gates.performance_evidence.parts[{i}]");
        let Some(found) = part.get("outcome").and_then(parse_outcome) else {
            ck.wrong(
                &join(&path, "outcome"),
                part.get("outcome"),
                "\"pass\", \"fail\" or \"inconclusive\"",
            );
            continue;
        };
        let subject = part.get("subject").and_then(Value::as_str).unwrap_or("");
        subjects.insert(subject);
        // A part for an eligible metric must carry its metric's outcome; parts
        // for ineligible cells or missing samples can only hold it back.
        if let Some(&m) = metric_outcomes.get(subject)
            && found != m
            && found == GateOutcome::Pass
        {
            ck.push(
                join(&path, "outcome"),
                "\"pass\"".into(),
                format!("\"{}\", its metric's outcome", m.as_str()),
            );
        }
        parts.push(found);
    }
    // Every metric with evidence must be in the gate.
    for subject in metric_outcomes
        .keys()
        .filter(|s| !subjects.contains(s.as_str()))
    {
        ck.push(
            "gates.performance_evidence.parts",
            format!("no part for {subject}"),
            "a part for every metric with evidence",
        );
    }
    stats::combine(parts)
}

/// Each evidence part's `informative` and `not_informative` from its
/// metric's recorded evidence, direction and resampling units (counted on
/// the samples the report keeps) through the rule `compare` used
/// (`stats::evidence::informative`): a report edited to show absurd bounds
/// as numbers, or with other words, is named. Parts whose metric has no
/// evidence must read as informative; a cell without its samples is left
/// to the stated limits.
pub(super) fn check_informative(ck: &mut Checker, root: &Map<String, Value>, params: &Params) {
    let Some(parts) = root
        .get("gates")
        .and_then(|g| g.get("performance_evidence"))
        .and_then(|g| g.get("parts"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for (i, part) in parts.iter().enumerate() {
        let Some(expected) = part_informative(root, params, part) else {
            continue;
        };
        let path = format!("gates.performance_evidence.parts[{i}]");
        let found = part.get("informative").unwrap_or(&Value::Bool(true));
        let why = expected.as_ref().err();
        let said = why.map_or(String::new(), |w| format!(": {w}"));
        if found.as_bool() != Some(expected.is_ok()) {
            ck.push(
                join(&path, "informative"),
                show(Some(found)),
                format!("{}, from its metric's evidence{said}", expected.is_ok()),
            );
        }
        let words = part.get("not_informative");
        if words.and_then(Value::as_str) != why.map(String::as_str) {
            ck.push(
                join(&path, "not_informative"),
                show(words),
                why.map_or("absent: its bounds inform".to_string(), |w| {
                    format!("\"{w}\", from its metric's evidence")
                }),
            );
        }
    }
}

/// What [`stats::evidence::informative`] says of a part's metric; `None`
/// where the report does not hold what it needs (the subject's metric,
/// readable evidence, the samples to count units on).
fn part_informative(
    root: &Map<String, Value>,
    params: &Params,
    part: &Value,
) -> Option<Result<(), String>> {
    let subject = part.get("subject")?.as_str()?;
    let (cell, metric) = subject.strip_prefix("cells.")?.split_once(".metrics.")?;
    let c = root.get("cells")?.get(cell)?;
    let m = c.get("metrics")?.get(metric)?;
    let Some(e) = m.get("evidence") else {
        return Some(Ok(()));
    };
    let e: stats::Evidence = serde_json::from_value(e.clone()).ok()?;
    let policy = params.metric(metric);
    let direction = policy
        .map(|p| p.direction)
        .or_else(|| serde_json::from_value(m.get("direction")?.clone()).ok())?;
    let sample = policy
        .map(|p| p.sample.clone())
        .or_else(|| Some(m.get("sample")?.as_str()?.to_string()))?;
    let pair = c.get("samples")?.get(&sample)?;
    let values =
        |side: &str| -> Option<Vec<f64>> { serde_json::from_value(pair.get(side)?.clone()).ok() };
    let clusters = |side: &str| -> Option<Vec<u32>> {
        serde_json::from_value(pair.get(format!("{side}_clusters"))?.clone()).ok()
    };
    let (b, c) = (values("baseline")?, values("candidate")?);
    let (bcl, ccl) = (clusters("baseline"), clusters("candidate"));
    let block_mean = params
        .method
        .as_ref()
        .map_or(Method::default().block_mean, |m| m.block_mean);
    let units = bootstrap_units(
        e.resampling,
        clustered(&b, bcl.as_deref()),
        clustered(&c, ccl.as_deref()),
        block_mean,
    );
    Some(stats::evidence::informative(&e, direction, units))
}

/// Each metric's evidence outcome from its own bounds and margin, keyed by
/// the metric's path; a stated outcome that disagrees is named.
fn metric_evidence_outcomes(
    ck: &mut Checker,
    root: &Map<String, Value>,
) -> BTreeMap<String, GateOutcome> {
    let mut out = BTreeMap::new();
    let cells = root.get("cells").and_then(Value::as_object);
    for (cell, c) in cells.into_iter().flatten() {
        let metrics = c.get("metrics").and_then(Value::as_object);
        for (name, m) in metrics.into_iter().flatten() {
            let path = format!("cells.{cell}.metrics.{name}");
            if let Some(o) = metric_evidence_outcome(ck, &path, m) {
                out.insert(path, o);
            }
        }
    }
    out
}

/// One metric's evidence: margin against the flag's threshold, bounds in
/// order, the outcome from bounds and margin (fail if lower > margin, pass
/// if upper <= margin, else inconclusive).
fn metric_evidence_outcome(ck: &mut Checker, metric: &str, m: &Value) -> Option<GateOutcome> {
    let e = m.get("evidence")?;
    let path = join(metric, "evidence");
    let lo = ck.num(
        &join(&path, "lower_bound_percent"),
        e.get("lower_bound_percent"),
    );
    let hi = ck.num(
        &join(&path, "upper_bound_percent"),
        e.get("upper_bound_percent"),
    );
    let t = ck.num(&join(&path, "margin_percent"), e.get("margin_percent"));
    let flag_t = m
        .as_object()
        .and_then(|o| o.keys().find_map(|k| parse_regression_flag(k)));
    if let (Some(t), Some(flag_t)) = (t, flag_t)
        && t != flag_t
    {
        ck.push(
            join(&path, "margin_percent"),
            t.to_string(),
            format!("{flag_t}, the threshold in the flag's name"),
        );
    }
    let (lo, hi, t) = (lo?, hi?, t?);
    let expected = if lo > t {
        GateOutcome::Fail
    } else if hi <= t {
        GateOutcome::Pass
    } else {
        GateOutcome::Inconclusive
    };
    if lo > hi {
        ck.push(
            join(&path, "lower_bound_percent"),
            lo.to_string(),
            format!("at most the upper bound ({hi})"),
        );
    }
    match e.get("outcome").and_then(parse_outcome) {
        Some(found) if found == expected => {}
        _ => ck.push(
            join(&path, "outcome"),
            show(e.get("outcome")),
            format!("\"{}\" from its bounds and margin", expected.as_str()),
        ),
    }
    Some(expected)
}

/// Every qualification wording `compare` writes.
const WORDINGS: [&str; 8] = [
    QUAL_PASS,
    QUAL_NOT_BLANKET,
    QUAL_PASS_NON_INFERIOR,
    QUAL_FAIL_TURNOVER,
    QUAL_FAIL_PERFORMANCE,
    QUAL_FAIL_BOTH,
    QUAL_INCONCLUSIVE,
    QUAL_FAIL_TURNOVER_INCONCLUSIVE,
];

/// The recomputed gates the `gates` block and the qualification must agree with.
pub(super) struct Recomputed<'a> {
    pub performance: bool,
    pub evidence: Option<GateOutcome>,
    pub turnover: &'a TurnoverGates,
}

/// The `gates` block, the qualification text and `gates.qualified`.
pub(super) fn check_gates(
    ck: &mut Checker,
    root: &Map<String, Value>,
    params: &Params,
    r: &Recomputed,
) {
    if let Some(found) = ck.boolean(
        "performance_gate_passed",
        root.get("performance_gate_passed"),
    ) {
        ck.expect_bool("performance_gate_passed", found, r.performance);
    }
    let (strict, ni) = (r.turnover.strict.passed, r.turnover.non_inferior.passed);
    // Turnover gates that did not run count as passed in the gates'
    // verdict, which the note that they did not run then caps.
    let not_run = r.turnover.not_run;
    let (q_strict, q_ni) = if not_run.is_some() {
        (true, true)
    } else {
        (strict, ni)
    };
    // The quality gate's outcome (itself recomputed with the report) folds in.
    let quality: Option<GateOutcome> = root
        .get("gates")
        .and_then(|g| g.pointer("/quality/outcome"))
        .and_then(|o| serde_json::from_value(o.clone()).ok());
    let expected = params.mode.map(|mode| {
        let (q, ok) = match (params.decides_by_evidence, r.evidence) {
            (true, Some(o)) => evidence_qualification(o, q_strict, q_ni, mode),
            _ => qualification(r.performance, q_strict, q_ni, mode),
        };
        let (q, ok) = crate::gate::with_quality(q, ok, quality);
        crate::gate::with_turnover_not_run(q, ok, not_run)
    });
    if let Some(g) = root.get("gates") {
        for (key, expected) in [
            ("performance", r.performance),
            ("strict_turnover", strict),
            ("non_inferior_turnover", ni),
        ] {
            let path = format!("gates.{key}.passed");
            if let Some(found) = ck.boolean(&path, g.get(key).and_then(|x| x.get("passed"))) {
                ck.expect_bool(&path, found, expected);
            }
        }
        for (key, gate) in [
            ("strict_turnover", &r.turnover.strict),
            ("non_inferior_turnover", &r.turnover.non_inferior),
        ] {
            check_not_run_text(ck, key, g.get(key), gate);
        }
        if let Some((_, qualified)) = expected
            && let Some(found) = ck.boolean("gates.qualified", g.get("qualified"))
        {
            ck.expect_bool("gates.qualified", found, qualified);
        }
    }
    let Some(q) = ck.string("qualification", root.get("qualification")) else {
        return;
    };
    match expected {
        Some((e, _)) if q != e.as_str() => {
            ck.push("qualification", format!("\"{q}\""), format!("\"{e}\""))
        }
        Some(_) => {}
        None => check_wording(ck, q, r.performance, strict, ni),
    }
}

/// A turnover gate's `not_run`, against the turnover gates' state: the
/// reason when they did not run, absent when they ran.
fn check_not_run_text(ck: &mut Checker, key: &str, found: Option<&Value>, expected: &Gate) {
    let Some(found) = found else { return };
    let path = format!("gates.{key}.not_run");
    let found = found.get("not_run");
    match (&expected.not_run, found) {
        (None, None) => {}
        (Some(why), Some(f)) if f.as_str() == Some(why) => {}
        (Some(why), _) => ck.push(
            path,
            show(found),
            format!("\"{why}\", as turnover_gate.not_run says"),
        ),
        (None, Some(_)) => ck.push(
            path,
            show(found),
            "absent: turnover_gate.not_run does not say the gates did not run",
        ),
    }
}

/// Without a turnover mode (the seed), the qualification must be a wording
/// the gates allow under some mode.
fn check_wording(ck: &mut Checker, q: &str, perf: bool, strict: bool, non_inferior: bool) {
    let allowed = [TurnoverGateMode::Strict, TurnoverGateMode::NonInferior]
        .map(|m| qualification(perf, strict, non_inferior, m).0);
    if !allowed.contains(&q) {
        let known = if WORDINGS.contains(&q) {
            "a wording the gates allow"
        } else {
            "one of compare's wordings that the gates allow"
        };
        ck.push(
            "qualification",
            format!("\"{q}\""),
            format!(
                "{known}: \"{}\" (strict turnover) or \"{}\" (non-inferior)",
                allowed[0], allowed[1]
            ),
        );
    }
}

/// `decision.action` and the `human_decision` text it is written into.
pub(super) fn check_decision(ck: &mut Checker, root: &Map<String, Value>) {
    let Some(d) = root.get("decision") else {
        return;
    };
    let human = root.get("human_decision").and_then(Value::as_str);
    match d.get("action").and_then(Value::as_str) {
        Some(a @ ("pending" | "promote" | "retain-baseline")) => {
            let ok = match human {
                Some(h) => h == a || h.starts_with(&format!("{a}; ")),
                None => true,
            };
            if !ok {
                ck.push(
                    "human_decision",
                    show(root.get("human_decision")),
                    format!("\"{a}\" or \"{a}; <note>\", as decision.action is {a}"),
                );
            }
        }
        _ => ck.wrong(
            "decision.action",
            d.get("action"),
            "\"promote\", \"retain-baseline\" or \"pending\"",
        ),
    }
}

/// `baseline_image` / `candidate_image`: the provenance's pinned image, else
/// its runtime label, else its target (as `compare` writes them).
pub(super) fn check_images(ck: &mut Checker, root: &Map<String, Value>) {
    let Some(prov) = root.get("provenance") else {
        ck.limit("baseline_image and candidate_image: no provenance block to check them against");
        return;
    };
    for side in ["baseline", "candidate"] {
        let key = format!("{side}_image");
        let Some(p) = prov.get(side) else {
            ck.wrong(&format!("provenance.{side}"), None, "an object");
            continue;
        };
        let expected = ["image", "runtime", "target"]
            .iter()
            .find_map(|k| p.get(*k).and_then(Value::as_str));
        let found = root.get(&key).and_then(Value::as_str);
        if let (Some(e), Some(f)) = (expected, found)
            && e != f
        {
            ck.push(
                &key,
                format!("\"{f}\""),
                format!("\"{e}\", from provenance.{side}"),
            );
        }
    }
}
