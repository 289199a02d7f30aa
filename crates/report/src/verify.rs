//! `verify`: recompute what a v1 report derives from its own numbers and list
//! every disagreement. Works on `serde_json::Value`, so any v1 report, the seed
//! included, can be checked; added fields are checked only when present.
//!
//! Checked: the schema string; types and finiteness of every seed field;
//! each metric's `delta_percent` from its baseline and candidate (relative
//! tolerance 1e-9); each regression flag from the delta, the threshold in the
//! flag's name and the metric's direction (the `direction` field, else the
//! name: `tok_s` higher is better, `_ms` lower is better);
//! `performance_gate_passed` from the flags and eligibilities (and from the
//! `policy` block's metric list, when present, so a missing metric fails);
//! `strict_turnover_gate_passed` from the candidate turnover runs; each
//! turnover run's counts; `median_prompt_tokens` against the per-side
//! additions; metric values and n against the samples; verdicts against the
//! CIs; the whole `turnover_comparison` block; the `gates`, `turnover_gate`
//! and `qualification` against the recomputed gates.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::stats::{self, Direction, Interval, Verdict};

use super::gate::{
    QUAL_FAIL_BOTH, QUAL_FAIL_PERFORMANCE, QUAL_FAIL_TURNOVER, QUAL_FAIL_TURNOVER_INCONCLUSIVE,
    QUAL_INCONCLUSIVE, QUAL_NOT_BLANKET, QUAL_PASS, QUAL_PASS_NON_INFERIOR, evidence_qualification,
    qualification,
};
use super::model::{REPORT_SCHEMA, Side, parse_regression_flag, parse_turnover_key, turnover_key};
use super::policy::{
    DEFAULT_ALPHA, DEFAULT_TURNOVER_CONFIDENCE, TurnoverGateMode, infer_direction, split_quantile,
};
use super::turnover::{self, RunCounts};
use crate::stats::GateOutcome;

/// One thing in a report that does not follow from the rest of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// JSON path, e.g. `cells.capacity-4k.metrics.ttft_p50_ms.delta_percent`.
    pub path: String,
    /// The value found, as JSON (`missing` when absent).
    pub found: String,
    /// What the rest of the report implies.
    pub expected: String,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{}: found {}, expected {}",
            self.path, self.found, self.expected
        )
    }
}

const REL_TOL: f64 = 1e-9;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= REL_TOL * a.abs().max(b.abs()).max(1.0)
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "missing".to_string(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 80 {
                format!("{}…", s.chars().take(80).collect::<String>())
            } else {
                s
            }
        }
    }
}

fn type_name(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => format!("boolean {b}"),
        Some(Value::Number(n)) => format!("number {n}"),
        Some(Value::String(_)) => format!("string {}", show(v)),
        Some(Value::Array(_)) => "an array".into(),
        Some(Value::Object(_)) => "an object".into(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Collects disagreements; typed getters report wrong types at their path.
struct Checker {
    out: Vec<Disagreement>,
}

impl Checker {
    fn push(&mut self, path: impl Into<String>, found: String, expected: impl Into<String>) {
        self.out.push(Disagreement {
            path: path.into(),
            found,
            expected: expected.into(),
        });
    }

    fn wrong(&mut self, path: &str, v: Option<&Value>, expected: &str) {
        self.push(path, type_name(v), expected);
    }

    fn num(&mut self, path: &str, v: Option<&Value>) -> Option<f64> {
        match v.and_then(Value::as_f64) {
            Some(x) if x.is_finite() => Some(x),
            _ => {
                self.wrong(path, v, "a finite number");
                None
            }
        }
    }

    /// Absent or null is fine (None); otherwise a finite number.
    fn opt_num(&mut self, path: &str, v: Option<&Value>) -> Option<f64> {
        match v {
            None | Some(Value::Null) => None,
            some => self.num(path, some),
        }
    }

    fn count(&mut self, path: &str, v: Option<&Value>) -> Option<u64> {
        let r = v.and_then(Value::as_u64);
        if r.is_none() {
            self.wrong(path, v, "a non-negative integer");
        }
        r
    }

    fn opt_count(&mut self, path: &str, v: Option<&Value>) -> Option<u64> {
        match v {
            None | Some(Value::Null) => None,
            some => self.count(path, some),
        }
    }

    fn boolean(&mut self, path: &str, v: Option<&Value>) -> Option<bool> {
        let r = v.and_then(Value::as_bool);
        if r.is_none() {
            self.wrong(path, v, "a boolean");
        }
        r
    }

    fn string<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Option<&'a str> {
        let r = v.and_then(Value::as_str);
        if r.is_none() {
            self.wrong(path, v, "a string");
        }
        r
    }

    fn object<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Option<&'a Map<String, Value>> {
        let r = v.and_then(Value::as_object);
        if r.is_none() {
            self.wrong(path, v, "an object");
        }
        r
    }

    fn array<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Option<&'a Vec<Value>> {
        let r = v.and_then(Value::as_array);
        if r.is_none() {
            self.wrong(path, v, "an array");
        }
        r
    }

    fn expect_num(&mut self, path: &str, found: f64, expected: f64) {
        if !close(found, expected) {
            self.push(path, found.to_string(), expected.to_string());
        }
    }

    fn expect_bool(&mut self, path: &str, found: bool, expected: bool) {
        if found != expected {
            self.push(path, found.to_string(), expected.to_string());
        }
    }

    /// Deep comparison of a recomputed block with the one found: numbers
    /// within tolerance, everything else equal; reports at the leaves.
    fn expect_value(&mut self, path: &str, found: Option<&Value>, expected: &Value) {
        match (found, expected) {
            (Some(Value::Number(f)), Value::Number(e)) => {
                if let (Some(f), Some(e)) = (f.as_f64(), e.as_f64())
                    && !close(f, e)
                {
                    self.push(path, f.to_string(), e.to_string());
                }
            }
            (Some(Value::Object(f)), Value::Object(e)) => {
                for (k, ev) in e {
                    self.expect_value(&join(path, k), f.get(k), ev);
                }
            }
            (Some(Value::Array(f)), Value::Array(e)) => {
                if f.len() != e.len() {
                    self.push(
                        format!("{path}.length"),
                        f.len().to_string(),
                        e.len().to_string(),
                    );
                }
                for (i, (fv, ev)) in f.iter().zip(e).enumerate() {
                    self.expect_value(&format!("{path}[{i}]"), Some(fv), ev);
                }
            }
            (f, e) => {
                if f != Some(e) {
                    self.push(path, show(f), show(Some(e)));
                }
            }
        }
    }

    fn f64_array(&mut self, path: &str, v: Option<&Value>) -> Option<Vec<f64>> {
        let arr = self.array(path, v)?;
        let mut out = Vec::with_capacity(arr.len());
        let mut ok = true;
        for (i, x) in arr.iter().enumerate() {
            match self.num(&format!("{path}[{i}]"), Some(x)) {
                Some(x) => out.push(x),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// Per-request samples of one sample name: (baseline, candidate), each None when unreadable.
type SampleSides = (Option<Vec<f64>>, Option<Vec<f64>>);

fn parse_direction(s: &str) -> Option<Direction> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

fn parse_verdict(s: &str) -> Option<Verdict> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

/// Check a report; an empty list means it is internally consistent.
pub fn verify(json: &Value) -> Vec<Disagreement> {
    let mut ck = Checker { out: Vec::new() };
    let Some(root) = json.as_object() else {
        ck.wrong("", Some(json), "a JSON object");
        return ck.out;
    };
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

    let perf_found = ck.boolean(
        "performance_gate_passed",
        root.get("performance_gate_passed"),
    );
    let strict_found = ck.boolean(
        "strict_turnover_gate_passed",
        root.get("strict_turnover_gate_passed"),
    );

    // Metrics the report's policy says every cell must have.
    let gating: Option<Vec<String>> = root
        .get("policy")
        .and_then(|p| p.get("metrics"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| m.get("name").and_then(Value::as_str).map(String::from))
                .collect()
        });

    let mut perf_expected = true;
    match ck.object("cells", root.get("cells")) {
        Some(cells) => {
            if cells.is_empty() {
                perf_expected = false;
            }
            for (name, cell) in cells {
                perf_expected &=
                    check_cell(&mut ck, &format!("cells.{name}"), cell, gating.as_deref());
            }
        }
        None => perf_expected = false,
    }
    if let Some(found) = perf_found {
        ck.expect_bool("performance_gate_passed", found, perf_expected);
    }
    let evidence_outcome = check_evidence_gate(&mut ck, root);
    let decides_by_evidence = root
        .get("statistics")
        .and_then(|s| s.get("gate_decides"))
        .and_then(Value::as_str)
        == Some("evidence");

    // Turnover runs, by side and ordinal.
    let mut runs: BTreeMap<(Side, usize), (&str, &Value)> = BTreeMap::new();
    for (k, v) in root {
        if let Some(pos) = parse_turnover_key(k) {
            runs.insert(pos, (k.as_str(), v));
        }
    }
    let mut counts: BTreeMap<Side, Vec<RunCounts>> = BTreeMap::new();
    for ((side, ordinal), (key, run)) in &runs {
        let list = counts.entry(*side).or_default();
        if *ordinal != list.len() && !runs.contains_key(&(*side, list.len())) {
            ck.push(
                turnover_key(*side, list.len()),
                "missing".into(),
                format!("present, since {key} is"),
            );
        }
        if let Some(c) = check_turnover_run(&mut ck, key, run) {
            list.push(c);
        }
    }
    let no_runs = Vec::new();
    let b_counts = counts.get(&Side::Baseline).unwrap_or(&no_runs);
    let c_counts = counts.get(&Side::Candidate).unwrap_or(&no_runs);
    let strict = super::gate::strict_gate(c_counts);
    if let Some(found) = strict_found {
        ck.expect_bool("strict_turnover_gate_passed", found, strict.passed);
    }

    // The turnover comparison, recomputed from the runs with the report's alpha and confidence.
    let tc = root.get("turnover_comparison");
    let alpha = tc
        .and_then(|t| t.get("alpha"))
        .and_then(Value::as_f64)
        .unwrap_or(DEFAULT_ALPHA);
    let confidence = tc
        .and_then(|t| t.get("confidence"))
        .and_then(Value::as_f64)
        .unwrap_or(DEFAULT_TURNOVER_CONFIDENCE);
    let margin = tc.and_then(|t| t.get("margin")).and_then(Value::as_f64);
    let cmp = turnover::compare_turnover(b_counts, c_counts, alpha, confidence, margin);
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
    let non_inferior = super::gate::non_inferior_gate(&cmp);

    let mode = root
        .get("turnover_gate")
        .and_then(|g| g.get("mode"))
        .and_then(|m| serde_json::from_value::<TurnoverGateMode>(m.clone()).ok());
    if let Some(g) = root.get("turnover_gate") {
        if mode.is_none() {
            ck.wrong(
                "turnover_gate.mode",
                g.get("mode"),
                "\"strict\" or \"non_inferior\"",
            );
        }
        if let (Some(mode), Some(found)) =
            (mode, ck.boolean("turnover_gate.passed", g.get("passed")))
        {
            let expected = match mode {
                TurnoverGateMode::Strict => strict.passed,
                TurnoverGateMode::NonInferior => strict.passed || non_inferior.passed,
            };
            ck.expect_bool("turnover_gate.passed", found, expected);
        }
    }

    if let Some(g) = root.get("gates") {
        for (key, expected) in [
            ("performance", perf_expected),
            ("strict_turnover", strict.passed),
            ("non_inferior_turnover", non_inferior.passed),
        ] {
            let path = format!("gates.{key}.passed");
            if let Some(found) = ck.boolean(&path, g.get(key).and_then(|x| x.get("passed"))) {
                ck.expect_bool(&path, found, expected);
            }
        }
        if let Some(mode) = mode {
            let (_, qualified) = match (decides_by_evidence, evidence_outcome) {
                (true, Some(o)) => {
                    evidence_qualification(o, strict.passed, non_inferior.passed, mode)
                }
                _ => qualification(perf_expected, strict.passed, non_inferior.passed, mode),
            };
            if let Some(found) = ck.boolean("gates.qualified", g.get("qualified")) {
                ck.expect_bool("gates.qualified", found, qualified);
            }
        }
    }

    if let (true, Some(o), Some(mode), Some(q)) = (
        decides_by_evidence,
        evidence_outcome,
        mode,
        root.get("qualification").and_then(Value::as_str),
    ) {
        let (expected, _) = evidence_qualification(o, strict.passed, non_inferior.passed, mode);
        if q != expected {
            ck.push(
                "qualification",
                format!("\"{q}\""),
                format!("\"{expected}\""),
            );
        }
    } else if let Some(q) = ck.string("qualification", root.get("qualification")) {
        check_qualification(
            &mut ck,
            q,
            perf_expected,
            strict.passed,
            mode,
            non_inferior.passed,
        );
    }

    if let Some(d) = root.get("decision") {
        match d.get("action").and_then(Value::as_str) {
            Some("pending") => {
                if root.get("human_decision").and_then(Value::as_str) != Some("pending") {
                    ck.push(
                        "human_decision",
                        show(root.get("human_decision")),
                        "\"pending\", as decision.action is pending",
                    );
                }
            }
            Some("promote" | "retain-baseline") => {}
            _ => ck.wrong(
                "decision.action",
                d.get("action"),
                "\"promote\", \"retain-baseline\" or \"pending\"",
            ),
        }
    }
    ck.out
}

fn parse_outcome(v: &Value) -> Option<GateOutcome> {
    serde_json::from_value(v.clone()).ok()
}

/// The evidence gate, when the report has one: each metric's outcome from its
/// own bounds and margin, each gate part against its metric, the gate's
/// outcome from its parts, and `performance_outcome` against the gate.
/// Returns the recomputed gate outcome.
fn check_evidence_gate(ck: &mut Checker, root: &Map<String, Value>) -> Option<GateOutcome> {
    let gate = root.get("gates")?.get("performance_evidence")?;
    let mut metric_outcomes: BTreeMap<String, GateOutcome> = BTreeMap::new();
    if let Some(cells) = root.get("cells").and_then(Value::as_object) {
        for (cell, c) in cells {
            let Some(metrics) = c.get("metrics").and_then(Value::as_object) else {
                continue;
            };
            for (name, m) in metrics {
                let Some(e) = m.get("evidence") else { continue };
                let path = format!("cells.{cell}.metrics.{name}.evidence");
                let lo = ck.num(
                    &join(&path, "lower_bound_percent"),
                    e.get("lower_bound_percent"),
                );
                let hi = ck.num(
                    &join(&path, "upper_bound_percent"),
                    e.get("upper_bound_percent"),
                );
                let t = ck.num(&join(&path, "margin_percent"), e.get("margin_percent"));
                if let (Some(t), Some(flag_t)) = (
                    t,
                    m.as_object()
                        .and_then(|o| o.keys().find_map(|k| parse_regression_flag(k))),
                ) && t != flag_t
                {
                    ck.push(
                        join(&path, "margin_percent"),
                        t.to_string(),
                        format!("{flag_t}, the threshold in the flag's name"),
                    );
                }
                let (Some(lo), Some(hi), Some(t)) = (lo, hi, t) else {
                    continue;
                };
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
                metric_outcomes.insert(format!("cells.{cell}.metrics.{name}"), expected);
            }
        }
    }
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
    let expected = stats::combine(parts);
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

/// The qualification must be one the gates allow. Unknown wordings (other
/// tools) are accepted; the ones `compare` writes are checked, against the
/// exact table of [`qualification`] when the report names its turnover mode.
fn check_qualification(
    ck: &mut Checker,
    q: &str,
    perf: bool,
    strict: bool,
    mode: Option<TurnoverGateMode>,
    non_inferior: bool,
) {
    let allowed = match q {
        QUAL_PASS => perf && strict,
        QUAL_NOT_BLANKET => perf && !strict,
        QUAL_PASS_NON_INFERIOR => perf && !strict && non_inferior,
        QUAL_FAIL_TURNOVER => perf && !strict && !non_inferior,
        QUAL_FAIL_PERFORMANCE | QUAL_FAIL_BOTH => !perf,
        // Evidence-rule wordings need the evidence gate, checked above.
        QUAL_INCONCLUSIVE | QUAL_FAIL_TURNOVER_INCONCLUSIVE => false,
        _ => return,
    };
    let expected = mode.map(|m| qualification(perf, strict, non_inferior, m).0);
    if !allowed || expected.is_some_and(|e| e != q) {
        let expected = match expected {
            Some(e) => format!("\"{e}\""),
            None if perf && strict => format!("\"{QUAL_PASS}\""),
            None if perf => format!("\"{QUAL_NOT_BLANKET}\""),
            None => format!("\"{QUAL_FAIL_PERFORMANCE}\" or \"{QUAL_FAIL_BOTH}\""),
        };
        ck.push("qualification", format!("\"{q}\""), expected);
    }
}

/// Check one cell; returns whether it passes the performance gate as found.
fn check_cell(ck: &mut Checker, path: &str, cell: &Value, gating: Option<&[String]>) -> bool {
    let Some(cell) = ck.object(path, Some(cell)) else {
        return false;
    };
    let p = |k: &str| join(path, k);
    let mut passes = true;
    let mut requests = BTreeMap::new();
    for side in ["baseline", "candidate"] {
        let r = ck.count(
            &p(&format!("{side}_requests")),
            cell.get(&format!("{side}_requests")),
        );
        requests.insert(side, r);
        let key = format!("{side}_performance_eligible");
        let eligible = ck.boolean(&p(&key), cell.get(&key));
        passes &= eligible == Some(true);
        let rkey = format!("{side}_ineligible_reasons");
        if let Some(v) = cell.get(&rkey)
            && let Some(reasons) = ck.array(&p(&rkey), Some(v))
        {
            for (i, r) in reasons.iter().enumerate() {
                ck.string(&format!("{}[{i}]", p(&rkey)), Some(r));
            }
            if eligible == Some(true) && !reasons.is_empty() {
                ck.push(
                    p(&key),
                    "true".into(),
                    format!("false, as {rkey} is not empty"),
                );
            }
        }
    }

    let found_median = ck.opt_num(&p("median_prompt_tokens"), cell.get("median_prompt_tokens"));
    if cell.get("median_prompt_tokens").is_none() {
        ck.wrong(&p("median_prompt_tokens"), None, "a finite number");
    }
    let bm = ck.opt_num(
        &p("baseline_median_prompt_tokens"),
        cell.get("baseline_median_prompt_tokens"),
    );
    let cm = ck.opt_num(
        &p("candidate_median_prompt_tokens"),
        cell.get("candidate_median_prompt_tokens"),
    );
    if let Some(expected) = bm.or(cm) {
        match found_median {
            Some(f) => ck.expect_num(&p("median_prompt_tokens"), f, expected),
            None => ck.push(
                p("median_prompt_tokens"),
                show(cell.get("median_prompt_tokens")),
                expected.to_string(),
            ),
        }
    }

    // Samples, keyed by sample name.
    let mut samples: BTreeMap<String, SampleSides> = BTreeMap::new();
    if let Some(v) = cell.get("samples").filter(|v| !v.is_null())
        && let Some(s) = ck.object(&p("samples"), Some(v))
    {
        for (k, pair) in s {
            let sp = format!("{}.{k}", p("samples"));
            let b = ck.f64_array(&join(&sp, "baseline"), pair.get("baseline"));
            let c = ck.f64_array(&join(&sp, "candidate"), pair.get("candidate"));
            samples.insert(k.clone(), (b, c));
        }
    }

    let Some(metrics) = ck.object(&p("metrics"), cell.get("metrics")) else {
        return false;
    };
    if let Some(gating) = gating {
        for g in gating {
            if !metrics.contains_key(g) {
                passes = false;
            }
        }
    }
    for (name, m) in metrics {
        passes &= check_metric(
            ck,
            &format!("{}.{name}", p("metrics")),
            name,
            m,
            &samples,
            &requests,
        );
    }
    passes
}

/// Check one metric; returns its regression flag as found (or as implied when unreadable).
fn check_metric(
    ck: &mut Checker,
    path: &str,
    name: &str,
    m: &Value,
    samples: &BTreeMap<String, SampleSides>,
    requests: &BTreeMap<&str, Option<u64>>,
) -> bool {
    let Some(m) = ck.object(path, Some(m)) else {
        return false;
    };
    let p = |k: &str| join(path, k);
    let b = ck.num(&p("baseline"), m.get("baseline"));
    let c = ck.num(&p("candidate"), m.get("candidate"));
    let delta_found = match m.get("delta_percent") {
        Some(Value::Null) => None,
        v => ck.num(&p("delta_percent"), v),
    };

    let flags: Vec<(&String, f64)> = m
        .keys()
        .filter_map(|k| parse_regression_flag(k).map(|t| (k, t)))
        .collect();
    let (flag_key, threshold) = match flags.as_slice() {
        [(k, t)] => (Some(k.as_str()), Some(*t)),
        [] => {
            ck.push(
                p("no_more_than_<T>_percent_regression"),
                "missing".into(),
                "a boolean regression flag",
            );
            (None, None)
        }
        more => {
            ck.push(
                path,
                format!(
                    "{} regression flags ({})",
                    more.len(),
                    more.iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "exactly one",
            );
            (None, None)
        }
    };
    let flag_found = flag_key.and_then(|k| ck.boolean(&p(k), m.get(k)));
    if let (Some(t), Some(v)) = (threshold, m.get("threshold_percent"))
        && let Some(found) = ck.num(&p("threshold_percent"), Some(v))
        && found != t
    {
        ck.push(
            p("threshold_percent"),
            found.to_string(),
            format!("{t}, as the flag's name says"),
        );
    }

    let inferred = split_quantile(name);
    let direction = match m.get("direction") {
        Some(v) => {
            let d = v.as_str().and_then(parse_direction);
            if d.is_none() {
                ck.wrong(
                    &p("direction"),
                    Some(v),
                    "\"lower_is_better\" or \"higher_is_better\"",
                );
            }
            d
        }
        None => {
            let base = inferred.as_ref().map_or(name, |(s, _)| s.as_str());
            let d = infer_direction(base);
            if d.is_none() {
                ck.push(
                    p("direction"),
                    "missing".into(),
                    "a direction: the name says neither `_ms` (lower is better) nor `tok_s` (higher is better)",
                );
            }
            d
        }
    };

    // n beside each value: a count, at most the cell's requests, and equal
    // to the number of samples when the report carries them.
    let n_of = |ck: &mut Checker, side: &str| {
        ck.opt_count(&p(&format!("{side}_n")), m.get(&format!("{side}_n")))
    };
    let ns = [
        ("baseline", n_of(ck, "baseline")),
        ("candidate", n_of(ck, "candidate")),
    ];
    for (side, n) in ns {
        if let (Some(n), Some(Some(r))) = (n, requests.get(side))
            && n > *r
        {
            ck.push(
                p(&format!("{side}_n")),
                n.to_string(),
                format!("at most {side}_requests ({r})"),
            );
        }
    }

    // Values from the samples, when the report carries them.
    let sample_key = m
        .get("sample")
        .and_then(Value::as_str)
        .map(String::from)
        .or_else(|| inferred.as_ref().map(|(s, _)| s.clone()));
    let quantile = m
        .get("quantile")
        .and_then(Value::as_f64)
        .or(inferred.as_ref().map(|(_, q)| *q));
    if let (Some((bs, cs)), Some(q)) = (sample_key.as_ref().and_then(|k| samples.get(k)), quantile)
    {
        for ((side, found, vals), (_, n)) in [("baseline", b, bs), ("candidate", c, cs)]
            .into_iter()
            .zip(ns)
        {
            let Some(vals) = vals else { continue };
            let mut sorted = vals.clone();
            sorted.sort_by(f64::total_cmp);
            if let (Some(found), Some(expected)) = (found, stats::percentile_sorted(&sorted, q)) {
                ck.expect_num(&p(side), found, expected);
            }
            if let Some(n) = n
                && n != vals.len() as u64
            {
                ck.push(
                    p(&format!("{side}_n")),
                    n.to_string(),
                    format!("{}, the number of samples", vals.len()),
                );
            }
        }
    }

    let delta_expected = match (b, c) {
        (Some(b), Some(c)) => Some(stats::delta_percent(b, c)),
        _ => None,
    };
    if let Some(expected) = delta_expected {
        match (delta_found, expected) {
            (Some(f), Some(e)) => ck.expect_num(&p("delta_percent"), f, e),
            (None, None) => {}
            (f, e) => ck.push(
                p("delta_percent"),
                f.map_or_else(|| show(m.get("delta_percent")), |x| x.to_string()),
                e.map_or_else(|| "null (baseline is 0)".to_string(), |x| x.to_string()),
            ),
        }
    }
    let flag_expected = match (delta_expected, direction, threshold) {
        (Some(d), Some(dir), Some(t)) => {
            Some(d.is_some_and(|d| stats::within_regression_threshold(dir, d, t)))
        }
        _ => None,
    };
    if let (Some(k), Some(f), Some(e)) = (flag_key, flag_found, flag_expected) {
        ck.expect_bool(&p(k), f, e);
    }

    // CI and verdict, when present.
    let ci = match m.get("ci_delta_percent") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let cp = p("ci_delta_percent");
            let low = ck.num(&join(&cp, "low"), v.get("low"));
            let high = ck.num(&join(&cp, "high"), v.get("high"));
            let conf = ck.num(&join(&cp, "confidence"), v.get("confidence"));
            match (low, high, conf) {
                (Some(low), Some(high), Some(confidence)) => {
                    if low > high {
                        ck.push(
                            join(&cp, "low"),
                            low.to_string(),
                            format!("at most high ({high})"),
                        );
                    }
                    if !(confidence > 0.0 && confidence < 1.0) {
                        ck.push(join(&cp, "confidence"), confidence.to_string(), "in (0, 1)");
                    }
                    Some(Interval {
                        low,
                        high,
                        confidence,
                    })
                }
                _ => None,
            }
        }
    };
    match m.get("verdict") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_str().and_then(parse_verdict) {
            None => ck.wrong(
                &p("verdict"),
                Some(v),
                "\"improved\", \"regressed\", \"equivalent\" or \"inconclusive\"",
            ),
            Some(found) => {
                if let (Some(ci), Some(dir), Some(t)) = (ci, direction, threshold) {
                    let expected = stats::verdict(dir, &ci, t);
                    if found != expected {
                        ck.push(
                            p("verdict"),
                            show(Some(v)),
                            show(serde_json::to_value(expected).ok().as_ref()),
                        );
                    }
                }
            }
        },
    }
    ck.opt_count(&p("requests_to_resolve"), m.get("requests_to_resolve"));

    flag_found.or(flag_expected).unwrap_or(false)
}

/// Check one turnover run's counts; returns them for the gates.
fn check_turnover_run(ck: &mut Checker, key: &str, run: &Value) -> Option<RunCounts> {
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
    if let (Some(r), Some(rr)) = (requests, received)
        && rr > r
    {
        ck.push(
            p("responses_received"),
            rr.to_string(),
            format!("at most requests ({r})"),
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
    if let Some(failures) = ck.array(&p("failures"), run.get("failures")) {
        if let Some(f) = failed
            && failures.len() as u64 != f
        {
            ck.push(
                format!("{}.length", p("failures")),
                failures.len().to_string(),
                format!("{f} (failed)"),
            );
        }
        let mut seen = BTreeSet::new();
        for (i, fl) in failures.iter().enumerate() {
            let fp = format!("{}[{i}]", p("failures"));
            let Some(fo) = ck.object(&fp, Some(fl)) else {
                continue;
            };
            if let Some(idx) = ck.count(&join(&fp, "request_index"), fo.get("request_index")) {
                if requests.is_some_and(|r| idx >= r) {
                    ck.push(
                        join(&fp, "request_index"),
                        idx.to_string(),
                        format!("below requests ({})", requests.unwrap_or(0)),
                    );
                }
                if !seen.insert(idx) {
                    ck.push(
                        join(&fp, "request_index"),
                        idx.to_string(),
                        "an index not already listed",
                    );
                }
            }
            ck.string(&join(&fp, "failure_class"), fo.get("failure_class"));
            ck.count(&join(&fp, "words"), fo.get("words"));
            if let Some(fr) = ck.array(&join(&fp, "finish_reasons"), fo.get("finish_reasons")) {
                for (j, r) in fr.iter().enumerate() {
                    ck.string(&format!("{}[{j}]", join(&fp, "finish_reasons")), Some(r));
                }
            }
            ck.boolean(&join(&fp, "canary_passed"), fo.get("canary_passed"));
        }
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
