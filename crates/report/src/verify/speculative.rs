//! Each cell's speculative-decoding counts (`<side>_speculative`), from the
//! report alone: accepted at most drafted, requests reported at most the
//! side's successful requests, counter-read counts made again from the
//! cell's own counters (`<side>_server_metrics`, its known metrics), and an unmet
//! `expect.spec_acceptance_min` reason's rate and counts made again from
//! the counts. Per-response counts come from the journals: only the run
//! directories can say whether they are the server's.

use serde_json::{Map, Value};

use super::super::checker::{Checker, join, show};
use crate::artifact::{Expect, Speculative};
use crate::server_metrics::{Kind, ServerMetrics};

/// The endpoint name of a runtime's own `/metrics` among those scraped:
/// the one the counts are read from.
const TARGET_ENDPOINT: &str = "target";

/// What an unmet acceptance expectation's reason begins with.
const ACCEPTANCE_REASON: &str = "expect.spec_acceptance_min ";

pub(super) fn check(ck: &mut Checker, root: &Map<String, Value>) {
    let Some(cells) = root.get("cells").and_then(Value::as_object) else {
        return;
    };
    let mut per_response = false;
    for (name, cell) in cells {
        let Some(cell) = cell.as_object() else {
            continue;
        };
        let at = join("cells", name);
        for side in ["baseline", "candidate"] {
            let key = format!("{side}_speculative");
            let spec = match cell.get(&key) {
                None | Some(Value::Null) => None,
                Some(v) => counts(ck, &join(&at, &key), v),
            };
            if let Some(s) = &spec {
                per_response |= s.from_counters.is_none();
                check_counts(ck, &join(&at, &key), cell, side, s);
            }
            check_acceptance_reason(ck, &at, cell, side, spec.as_ref());
        }
    }
    if per_response {
        ck.limit("cells.*.<side>_speculative counts summed from per-response timings (drafted, accepted, predicted): held to each other only (accepted at most drafted, requests reported at most the successful ones, an unmet acceptance expectation's rate); what each response reported is in the run journals (infergate verify DIR, or REPORT --runs BASE_DIR CAND_DIR)");
    }
}

fn counts(ck: &mut Checker, path: &str, v: &Value) -> Option<Speculative> {
    match serde_json::from_value::<Speculative>(v.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            ck.push(
                path,
                show(Some(v)),
                format!("speculative counts (reported, drafted, accepted, predicted: whole numbers up to u64::MAX): {e}"),
            );
            None
        }
    }
}

fn check_counts(
    ck: &mut Checker,
    path: &str,
    cell: &Map<String, Value>,
    side: &str,
    s: &Speculative,
) {
    if s.accepted > s.drafted {
        ck.push(
            join(path, "accepted"),
            s.accepted.to_string(),
            format!(
                "at most drafted ({}): a server accepts only tokens it drafted",
                s.drafted
            ),
        );
    }
    if let Some(d) = s.drafts.filter(|&d| d > s.drafted) {
        ck.push(
            join(path, "drafts"),
            d.to_string(),
            format!(
                "at most drafted ({}): each verification step drafts at least one token",
                s.drafted
            ),
        );
    }
    if s.from_counters.is_some() {
        check_from_counters(ck, path, cell, side, s);
        return;
    }
    let succeeded = succeeded(cell, side);
    if s.reported == 0 || succeeded.is_some_and(|n| s.reported as u64 > n) {
        ck.push(
            join(path, "reported"),
            s.reported.to_string(),
            format!(
                "between 1 and the side's successful requests ({}): per-response counts are summed over the responses that reported them",
                succeeded.map_or("unknown".to_string(), |n| n.to_string())
            ),
        );
    }
}

/// The side's successful requests: its requests less its failed ones.
fn succeeded(cell: &Map<String, Value>, side: &str) -> Option<u64> {
    let requests = cell.get(&format!("{side}_requests"))?.as_u64()?;
    let failed = cell
        .get(&format!("{side}_failed"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    requests.checked_sub(failed)
}

/// Counts read from the target's counters, read again from the counters
/// the cell keeps.
fn check_from_counters(
    ck: &mut Checker,
    path: &str,
    cell: &Map<String, Value>,
    side: &str,
    s: &Speculative,
) {
    if s.reported != 0 {
        ck.push(
            join(path, "reported"),
            s.reported.to_string(),
            "0: counters do not count requests",
        );
    }
    let key = format!("{side}_server_metrics");
    let again = cell
        .get(&key)
        .cloned()
        .and_then(|v| serde_json::from_value::<Vec<ServerMetrics>>(v).ok())
        .into_iter()
        .flatten()
        .filter(|m| m.endpoint == TARGET_ENDPOINT)
        .map(with_known_counters)
        .find_map(|m| Speculative::from_counters(&m));
    let Some(again) = again else {
        ck.limit(format!(
            "{path}: read from counters {key} does not keep (its engine's known metrics do not name them); taken as given"
        ));
        return;
    };
    match again {
        Ok(again) => {
            for (field, found, want) in [
                ("drafted", s.drafted, again.drafted),
                ("accepted", s.accepted, again.accepted),
                ("predicted", s.predicted, again.predicted),
            ] {
                if found != want {
                    ck.push(
                        join(path, field),
                        found.to_string(),
                        format!("{want}, the sum of the target's counters in {key}"),
                    );
                }
            }
            if s.drafts != again.drafts {
                ck.push(
                    join(path, "drafts"),
                    format!("{:?}", s.drafts),
                    format!(
                        "{:?}, the sum of the target's counters in {key}",
                        again.drafts
                    ),
                );
            }
        }
        Err(e) => ck.push(
            join(&key, "known"),
            e.to_string(),
            "counts a server could make",
        ),
    }
}

/// A report keeps each known counter's increase (`known`), not the raw
/// `counters`: those are put back from it.
fn with_known_counters(mut m: ServerMetrics) -> ServerMetrics {
    for k in m.known.iter().filter(|k| k.kind == Kind::Counter) {
        m.counters.entry(k.key.clone()).or_insert(k.value);
    }
    m
}

/// An unmet `expect.spec_acceptance_min` reason: its rate and counts made
/// again from the side's counts, and the rate below the minimum it names.
fn check_acceptance_reason(
    ck: &mut Checker,
    at: &str,
    cell: &Map<String, Value>,
    side: &str,
    spec: Option<&Speculative>,
) {
    let key = format!("{side}_ineligible_reasons");
    let Some(reasons) = cell.get(&key).and_then(Value::as_array) else {
        return;
    };
    for (i, r) in reasons.iter().enumerate() {
        let Some(r) = r.as_str().filter(|r| r.starts_with(ACCEPTANCE_REASON)) else {
            continue;
        };
        let Some(Ok(min)) = r[ACCEPTANCE_REASON.len()..]
            .split_once(": ")
            .map(|(min, _)| min.parse::<f64>())
        else {
            continue;
        };
        let expect = Expect {
            spec_acceptance_min: Some(min),
            ..Expect::default()
        };
        let want = expect.unmet(None, spec).pop();
        if want.as_deref() != Some(r) {
            ck.push(
                format!("{}[{i}]", join(at, &key)),
                show(Some(&Value::String(r.to_string()))),
                match want {
                    Some(w) => format!("{w:?}, from {side}_speculative"),
                    None => format!("no such reason: {side}_speculative meets the minimum {min}"),
                },
            );
        }
    }
}
