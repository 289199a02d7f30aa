//! Whether two runs compare at all: the same model and suite, the same
//! cells with equal shapes and SLOs, turnover and embeddings workloads of
//! one name alike on both sides, and each run consistent in itself;
//! otherwise every difference, named. And whether they are one run given
//! twice.

use std::collections::BTreeSet;

use crate::artifact::{CellResult, CellShape, RUN_SCHEMA, RunArtifact};
use crate::model::Side;

use super::CompareError;

fn shape_differences(a: &CellShape, b: &CellShape) -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! field {
        ($($f:ident),*) => {$(
            if a.$f != b.$f {
                out.push(format!("{} {:?} vs {:?}", stringify!($f), a.$f, b.$f));
            }
        )*};
    }
    field!(
        prompt_tokens,
        tolerance_percent,
        max_tokens,
        concurrency,
        requests,
        warmup,
        cache,
        arrival,
        temperature,
        seed,
        workload,
        endpoint
    );
    out
}

/// Every reason the two runs cannot be compared; empty when they can.
fn differences(b: &RunArtifact, c: &RunArtifact) -> Vec<String> {
    let mut out = Vec::new();
    let (bp, cp) = (&b.provenance, &c.provenance);
    if bp.model != cp.model {
        out.push(format!(
            "model: baseline {:?} vs candidate {:?}",
            bp.model, cp.model
        ));
    }
    if bp.suite != cp.suite {
        out.push(format!(
            "suite: baseline {:?} vs candidate {:?}",
            bp.suite, cp.suite
        ));
    }
    if let (Some(x), Some(y)) = (&bp.suite_sha256, &cp.suite_sha256)
        && x != y
    {
        out.push(format!("suite_sha256: baseline {x} vs candidate {y}"));
    }
    for (side, art) in [(Side::Baseline, b), (Side::Candidate, c)] {
        let mut seen = BTreeSet::new();
        for cell in &art.cells {
            if !seen.insert(cell.name.as_str()) {
                out.push(format!("{side} has two cells named `{}`", cell.name));
            }
        }
    }
    for cell in &b.cells {
        match c.cells.iter().find(|x| x.name == cell.name) {
            None => out.push(format!("cell `{}` is in the baseline run only", cell.name)),
            Some(other) => {
                let slo = |c: &CellResult| c.slo.as_ref().map(|a| a.targets);
                if slo(cell) != slo(other) {
                    out.push(format!(
                        "cell `{}` SLOs differ: baseline {:?} vs candidate {:?}",
                        cell.name,
                        slo(cell).map(|s| s.describe()),
                        slo(other).map(|s| s.describe())
                    ));
                }
                let d = shape_differences(&cell.shape, &other.shape);
                if !d.is_empty() {
                    out.push(format!(
                        "cell `{}` shape differs (baseline vs candidate): {}",
                        cell.name,
                        d.join(", ")
                    ));
                }
            }
        }
    }
    for cell in &c.cells {
        if !b.cells.iter().any(|x| x.name == cell.name) {
            out.push(format!("cell `{}` is in the candidate run only", cell.name));
        }
    }
    turnover_differences(b, c, &mut out);
    for e in &c.embeddings {
        for base in b.embeddings.iter().filter(|x| x.name == e.name) {
            out.extend(crate::embedding::mismatch(base, e));
        }
    }
    out
}

/// Turnover runs of one name are one workload on both sides: each
/// difference between a candidate run and a baseline run of its name, once.
fn turnover_differences(b: &RunArtifact, c: &RunArtifact, out: &mut Vec<String>) {
    for run in &c.turnover {
        for base in b.turnover.iter().filter(|x| x.name == run.name) {
            let mut d = Vec::new();
            if base.contract != run.contract {
                d.push(format!(
                    "contract {:?} vs {:?}",
                    base.contract, run.contract
                ));
            }
            if base.concurrency != run.concurrency {
                d.push(format!(
                    "concurrency {} vs {}",
                    base.concurrency, run.concurrency
                ));
            }
            if base.requests != run.requests {
                d.push(format!("requests {} vs {}", base.requests, run.requests));
            }
            if let (Some(x), Some(y)) = (&base.task_set_sha256, &run.task_set_sha256)
                && x != y
            {
                d.push(format!("task items (sha256) {x} vs {y}"));
            }
            if !d.is_empty() {
                let msg = format!(
                    "turnover `{}` differs (baseline vs candidate): {}",
                    run.name,
                    d.join(", ")
                );
                if !out.contains(&msg) {
                    out.push(msg);
                }
            }
        }
    }
}

/// Both runs are of this schema, consistent in themselves, and comparable.
pub(super) fn check_comparable(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
) -> Result<(), CompareError> {
    for (side, a) in [(Side::Baseline, baseline), (Side::Candidate, candidate)] {
        if a.schema != RUN_SCHEMA {
            return Err(CompareError::Schema {
                side,
                found: a.schema.clone(),
            });
        }
    }
    // A report made from a self-contradicting artifact would not verify.
    for (side, a) in [(Side::Baseline, baseline), (Side::Candidate, candidate)] {
        let problems = crate::consistency::artifact_problems(a);
        if !problems.is_empty() {
            return Err(CompareError::Inconsistent {
                side,
                problems: problems.iter().map(ToString::to_string).collect(),
            });
        }
    }
    let diffs = differences(baseline, candidate);
    if !diffs.is_empty() {
        return Err(CompareError::Incomparable { differences: diffs });
    }
    Ok(())
}

/// Why `a` and `b` are one run given twice, if they are: the same journal
/// of records (by sha256), or the same artifact in every field. Compared
/// with itself a run shows no difference by construction. Two empty
/// journals (a suite of embeddings only) say nothing of it.
pub fn same_run(a: &RunArtifact, b: &RunArtifact) -> Option<String> {
    if let (Some(x), Some(y)) = (&a.provenance.journal, &b.provenance.journal)
        && x.sha256 == y.sha256
        && x.records > 0
    {
        return Some(format!(
            "both were aggregated from the journal with sha256 {}",
            x.sha256
        ));
    }
    (a == b).then(|| "the two artifacts are identical".to_string())
}
