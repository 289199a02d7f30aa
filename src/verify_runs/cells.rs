//! Each cell aggregated again from its journal and held to the artifact's,
//! differing samples named by journal line.

use std::path::Path;

use serde_json::Value;

use super::inputs::SuiteFile;
use super::run_journal::{Journal, MAX_LINES_NAMED};
use crate::artifact::{CellResult, RunArtifact};
use crate::config::suite::{CachePolicy, CellEndpoint, CellSpec, OutputPolicy};
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::scrape::SCRAPE_LOG_FILE;
use crate::measure::{aggregate, windows};
use crate::report::checker::{Checker, show};

/// The cell's spec as the artifact's shape gives it (all `aggregate` reads).
pub(super) fn spec_of(c: &CellResult) -> CellSpec {
    let s = &c.shape;
    CellSpec {
        name: c.name.clone(),
        prompt_tokens: s.prompt_tokens,
        tolerance_percent: s.tolerance_percent,
        max_tokens: s.max_tokens,
        concurrency: s.concurrency,
        requests: s.requests,
        warmup: s.warmup,
        cache: if s.cache == "shared" {
            CachePolicy::Shared
        } else {
            CachePolicy::Unique
        },
        arrival: s.arrival.clone(),
        temperature: s.temperature,
        seed: s.seed,
        output: match &c.output_length {
            Some(o) if !o.fixed => OutputPolicy::Free,
            _ => OutputPolicy::Fixed,
        },
        endpoint: CellEndpoint::of_shape(s.endpoint.as_deref()),
        extra: toml::Table::new(),
        slo: c.slo.as_ref().map(|a| a.targets),
        expect: c.expect,
        workload: None,
        capacity: None,
        dataset: None,
        dataset_sha256: None,
    }
}

/// The cell aggregated again from its journal records, against the artifact's.
pub(super) fn rebuild_cell(
    ck: &mut Checker,
    j: &Journal,
    art_name: &str,
    i: usize,
    cell: &CellResult,
) -> CellResult {
    let spec = spec_of(cell);
    j.check_indices(
        ck,
        &cell.name,
        spec.requests,
        &format!("cell `{}`", cell.name),
    );
    let records: Vec<RequestRecord> = j.of(&cell.name).map(|(_, r)| r.clone()).collect();
    let mut rebuilt = aggregate::cell(&spec, &records);
    // The workload's description is the suite's, not the journal's: carried
    // here, held against the suite in `check_workloads` when it is given.
    rebuilt.shape.workload = cell.shape.workload.clone();
    // A replay's fidelity sets the journal beside the captured trace, which
    // the journal does not hold: carried as the workload is.
    rebuilt.fidelity = cell.fidelity.clone();
    let w = windows::cell_windows(&j.scrapes, &cell.name, &records, usize::MAX);
    windows::attach(&mut rebuilt, w);
    cell_differences(ck, j, &spec, &rebuilt, cell, art_name, i);
    rebuilt
}

/// Each cell's workload (with its dataset's sha256) against the suite's.
pub(super) fn check_workloads(ck: &mut Checker, art: &RunArtifact, name: &str, suite: &SuiteFile) {
    for (i, cell) in art.cells.iter().enumerate() {
        let Some(spec) = suite.suite.cells.iter().find(|c| c.name == cell.name) else {
            continue;
        };
        let want = spec.shape().workload;
        if want != cell.shape.workload {
            ck.push(
                format!("{name}: cells[{i}].shape.workload"),
                show(Some(&to_value(&cell.shape.workload))),
                format!(
                    "{}, the suite's (a different dataset file gives a different sha256)",
                    show(Some(&to_value(&want)))
                ),
            );
        }
    }
}

/// Where the cell made again from the journal differs from the artifact's:
/// the journal lines behind differing samples, then the fields.
pub(super) fn cell_differences(
    ck: &mut Checker,
    j: &Journal,
    spec: &CellSpec,
    rebuilt: &CellResult,
    cell: &CellResult,
    art_name: &str,
    i: usize,
) {
    if rebuilt == cell {
        return;
    }
    name_sample_lines(ck, j, spec, rebuilt, cell, art_name, i);
    let mut sub = Checker::default();
    sub.expect_exact("", Some(&to_value(cell)), &to_value(rebuilt));
    for d in sub.out.into_iter().take(20) {
        let path = format!("{art_name}: cells[{i}].{}", d.path);
        let from = if d.path.starts_with("server_metrics") {
            format!("{} with {SCRAPE_LOG_FILE}", j.name)
        } else {
            j.name.clone()
        };
        ck.push(
            path,
            d.found,
            format!("{} (aggregated again from {from})", d.expected),
        );
    }
}

pub(super) fn to_value<T: serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

/// For each sample whose values differ, the journal lines behind the first
/// differing positions: each value in the order `aggregate` takes them.
pub(super) fn name_sample_lines(
    ck: &mut Checker,
    j: &Journal,
    spec: &CellSpec,
    rebuilt: &CellResult,
    cell: &CellResult,
    art_name: &str,
    i: usize,
) {
    let mut ordered: Vec<&(usize, RequestRecord)> = j
        .of(&cell.name)
        .filter(|(_, r)| r.outcome == Outcome::Ok)
        .collect();
    ordered.sort_by_key(|(_, r)| r.index);
    for (key, want) in &cell.samples {
        let got = rebuilt.samples.get(key).map_or(&[][..], Vec::as_slice);
        if got == want.as_slice() {
            continue;
        }
        // (line, request index, value) per value, as aggregate pools them.
        let sources: Vec<(usize, usize, f64)> = ordered
            .iter()
            .filter_map(|(line, r)| {
                let one = aggregate::cell(spec, std::slice::from_ref(r));
                Some((*line, r.index, *one.samples.get(key)?.first()?))
            })
            .collect();
        let mut named = 0;
        for (k, w) in want.iter().enumerate() {
            let src = sources.get(k);
            if src.map(|s| s.2) == Some(*w) || named >= MAX_LINES_NAMED {
                continue;
            }
            named += 1;
            let expected = format!("{w}, as {art_name} cells[{i}].samples.{key}[{k}] says");
            match src {
                Some((line, idx, v)) => ck.push(
                    j.at(*line),
                    format!("cell `{}` request {idx}: {key} {v}", cell.name),
                    expected,
                ),
                None => ck.push(
                    &j.name,
                    format!("no record gives cell `{}` {key}[{k}]", cell.name),
                    expected,
                ),
            }
        }
        if named == 0 && sources.len() > want.len() {
            let (line, idx, _) = sources[want.len()];
            ck.push(
                j.at(line),
                format!("an extra record: cell `{}` request {idx}", cell.name),
                format!("{} values of {key}, as {art_name} says", want.len()),
            );
        }
    }
}

/// Without a suite: each turnover run has one record per request.
/// Each embeddings workload's requests, failures and latencies, as its
/// journal beside the artifact recorded them (the vectors are the
/// artifact's alone; `compare` recomputes every cosine from them).
pub(super) fn count_embeddings(ck: &mut Checker, artifact: &Path, art: &RunArtifact) {
    use crate::measure::embeddings::{EmbeddingRecord, JOURNAL_FILE};
    if art.embeddings.is_empty() {
        return;
    }
    let path = artifact.with_file_name(JOURNAL_FILE);
    let text = match crate::report::read_regular(&path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            ck.push(
                path.display().to_string(),
                format!("unreadable: {e}"),
                "the embeddings journal",
            );
            return;
        }
    };
    let records: Vec<EmbeddingRecord> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for e in &art.embeddings {
        let mine: Vec<&EmbeddingRecord> = records.iter().filter(|r| r.name == e.name).collect();
        let ok: Vec<f64> = mine
            .iter()
            .filter(|r| r.outcome == crate::report::artifact::Outcome::Ok)
            .map(|r| r.latency_ms)
            .collect();
        let found = (mine.len(), mine.len() - ok.len());
        let key = format!("{}: embeddings `{}`", path.display(), e.name);
        if found != (e.requests, e.failed) || ok != e.latency_ms {
            ck.push(
                key,
                format!(
                    "{} requests, {} failed, latencies {:?}",
                    found.0, found.1, ok
                ),
                format!(
                    "the artifact's {} requests, {} failed, latencies {:?}",
                    e.requests, e.failed, e.latency_ms
                ),
            );
        }
    }
}
