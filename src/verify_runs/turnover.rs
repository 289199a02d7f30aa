//! Each turnover run counted in its journal, and with the suite, judged
//! again from the journaled answers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::cells::to_value;
use super::inputs::SuiteFile;
use super::run_journal::{Journal, MAX_LINES_NAMED};
use crate::artifact::{RunArtifact, TurnoverRun};
use crate::measure::record::RequestRecord;
use crate::measure::turnover::TurnoverWorkload;
use crate::report::checker::{Checker, show};

/// The journal cell name of a turnover run (`TurnoverSpec::cell_label`).
pub(super) fn turnover_label(t: &TurnoverRun) -> String {
    format!("turnover:{}#{}", t.name, t.repeat)
}

pub(super) fn count_turnover(ck: &mut Checker, j: &Journal, art: &RunArtifact) {
    for t in &art.turnover {
        j.check_indices(
            ck,
            &turnover_label(t),
            t.requests,
            &format!("turnover `{}` repeat {}", t.name, t.repeat),
        );
    }
}

/// Each turnover run judged again from its journaled answers, against the artifact's.
pub(super) fn rejudge_turnover(
    ck: &mut Checker,
    j: &Journal,
    art: &RunArtifact,
    art_name: &str,
    suite: &SuiteFile,
) -> Vec<TurnoverRun> {
    let sha = &suite.sha256;
    if let Some(rec) = &art.provenance.suite_sha256
        && rec != sha
    {
        ck.push(
            format!("{art_name}: provenance.suite_sha256"),
            rec.clone(),
            format!("{sha}, the sha256 of the suite given with --suite"),
        );
    }
    let records: Vec<RequestRecord> = j.records.iter().map(|(_, r)| r.clone()).collect();
    let workloads = TurnoverWorkload::of_suite(&suite.suite.turnover);
    let mut out = Vec::new();
    for (ti, t) in art.turnover.iter().enumerate() {
        let what = format!("turnover `{}` repeat {}", t.name, t.repeat);
        let lines = j.check_indices(ck, &turnover_label(t), t.requests, &what);
        let Some(workload) = workloads.iter().find(|w| w.spec.name == t.name) else {
            ck.push(
                format!("{art_name}: turnover[{ti}].name"),
                show(Some(&Value::String(t.name.clone()))),
                "a turnover run of the suite given with --suite",
            );
            out.push(t.clone());
            continue;
        };
        match workload.from_journal(t.repeat, &records) {
            Some(again) => {
                name_failure_lines(ck, j, &lines, t, &again, art_name, ti);
                out.push(again);
            }
            None => {
                ck.push(
                    &j.name,
                    format!("the answers of {what} are incomplete"),
                    "one record per request, as the run artifact counts",
                );
                out.push(t.clone());
            }
        }
    }
    out
}

/// Requests judged differently from the journal than the artifact says, by line.
pub(super) fn name_failure_lines(
    ck: &mut Checker,
    j: &Journal,
    lines: &BTreeMap<usize, usize>,
    found: &TurnoverRun,
    again: &TurnoverRun,
    art_name: &str,
    ti: usize,
) {
    if found == again {
        return;
    }
    let by_index = |r: &TurnoverRun| -> BTreeMap<usize, Value> {
        r.failures
            .iter()
            .map(|f| (f.request_index, to_value(f)))
            .collect()
    };
    let (f, a) = (by_index(found), by_index(again));
    let indices: BTreeSet<usize> = f.keys().chain(a.keys()).copied().collect();
    for idx in indices
        .into_iter()
        .filter(|i| f.get(i) != a.get(i))
        .take(MAX_LINES_NAMED)
    {
        let class = |m: &BTreeMap<usize, Value>| {
            m.get(&idx)
                .map_or("passed".to_string(), |v| show(v.get("failure_class")))
        };
        let at = lines.get(&idx).map_or(j.name.clone(), |l| j.at(*l));
        ck.push(
            at,
            format!(
                "turnover `{}` repeat {} request {idx} judged {} from the journal",
                found.name,
                found.repeat,
                class(&a)
            ),
            format!("{}, as {art_name} turnover[{ti}] says", class(&f)),
        );
    }
    let mut sub = Checker::default();
    sub.expect_exact("", Some(&to_value(found)), &to_value(again));
    for d in sub
        .out
        .into_iter()
        .filter(|d| !d.path.starts_with("failures"))
        .take(10)
    {
        ck.push(
            format!("{art_name}: turnover[{ti}].{}", d.path),
            d.found,
            format!("{} (judged again from {})", d.expected, j.name),
        );
    }
}
