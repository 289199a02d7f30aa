//! What in one run artifact contradicts itself: used by `compare` (to refuse
//! it) and by `verify`; below both, so that `compare` does not depend on
//! `verify`'s module (which makes reports again with `compare`).

use serde_json::Value;

use super::checker::{Checker, Disagreement};
use super::turnover_runs;

/// What in one run artifact contradicts itself, so that `compare` can
/// refuse it rather than write a report `verify` rejects: each turnover
/// run's counts against its failure records (as for a report's runs, and
/// repeats numbered 0, 1, … per name), each cell's counts and eligibility.
/// Paths are the artifact's (`turnover[1].contaminated`, `cells[0].failed`).
pub(crate) fn artifact_problems(a: &crate::artifact::RunArtifact) -> Vec<Disagreement> {
    let mut ck = Checker::default();
    let mut repeats: std::collections::BTreeMap<&str, usize> = Default::default();
    for (i, t) in a.turnover.iter().enumerate() {
        let key = format!("turnover[{i}]");
        let v = serde_json::to_value(t).unwrap_or(Value::Null);
        turnover_runs::check_artifact_run(&mut ck, &key, &v);
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
