//! What in one run artifact contradicts itself, and the checks of one
//! turnover run's counts against its failure records that an artifact's
//! runs and a report's runs share. `compare` refuses an artifact with
//! problems; `verify` checks a report's runs with the same code. Below
//! both: `verify` makes reports again with `compare`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::artifact::{Outcome, RunArtifact};

use super::checker::{Checker, Disagreement, join};
use super::turnover_rates::RunCounts;

/// What in one run artifact contradicts itself, so that `compare` can
/// refuse it rather than write a report `verify` rejects: each turnover
/// run's counts against its failure records (as for a report's runs, and
/// repeats numbered 0, 1, … per name), a skip beside turnover runs, each
/// cell's counts and eligibility.
/// Paths are the artifact's (`turnover[1].contaminated`, `cells[0].failed`).
pub(crate) fn artifact_problems(a: &RunArtifact) -> Vec<Disagreement> {
    let mut ck = Checker::default();
    let mut repeats: std::collections::BTreeMap<&str, usize> = Default::default();
    for (i, t) in a.turnover.iter().enumerate() {
        let key = format!("turnover[{i}]");
        let v = serde_json::to_value(t).unwrap_or(Value::Null);
        check_turnover_run(&mut ck, &key, &v);
        let next = repeats.entry(t.name.as_str()).or_default();
        if t.repeat != *next {
            ck.push(
                format!("{key}.repeat"),
                t.repeat.to_string(),
                format!(
                    "{next}: the runs of `{}` are numbered 0, 1, … in order",
                    t.name
                ),
            );
        }
        *next += 1;
    }
    if let Some(skip) = a.turnover_not_run.filter(|_| !a.turnover.is_empty()) {
        ck.push(
            "turnover_not_run",
            format!("\"{}\"", skip.as_str()),
            format!(
                "absent: the run holds {} turnover run(s), so it did not skip them",
                a.turnover.len()
            ),
        );
    }
    for (i, c) in a.cells.iter().enumerate() {
        let p = |k: &str| format!("cells[{i}].{k}");
        if c.failed > c.requests || c.succeeded + c.failed != c.requests {
            ck.push(
                p("failed"),
                c.failed.to_string(),
                format!("requests {} − succeeded {}", c.requests, c.succeeded),
            );
        }
        if c.performance_eligible && c.failed > 0 {
            ck.push(
                p("performance_eligible"),
                "true".into(),
                "false: the cell has failed requests",
            );
        }
        for (k, v) in &c.samples {
            if v.len() > c.requests {
                ck.push(
                    p(&format!("samples.{k}")),
                    format!("{} values", v.len()),
                    format!("at most requests ({})", c.requests),
                );
            }
            // Every sample is a time, a rate or a count: a negative one
            // (ttft_ms = -1e308) is no measurement, and would be compared as one.
            if let Some(j) = v.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
                ck.push(
                    p(&format!("samples.{k}[{j}]")),
                    format!("{:?}", v[j]),
                    "a finite value ≥ 0 (a time, a rate or a count)",
                );
            }
        }
    }
    ck.out
}

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

/// Check one turnover run's counts against each other and against its
/// failure records; returns them for the gates.
pub(crate) fn check_turnover_run(ck: &mut Checker, key: &str, run: &Value) -> Option<RunCounts> {
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
