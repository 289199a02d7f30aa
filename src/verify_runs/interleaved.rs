//! An interleaved side pooled again from its blocks' journal, inside its
//! qualification directory, as `qualify` pooled it.

use std::path::Path;

use super::cells::cell_differences;
use super::inputs::{SuiteFile, load_suite};
use super::run_journal::{Journal, read_journal};
use crate::artifact::{CellResult, RunArtifact};
use crate::config::suite::Suite;
use crate::measure::record::RequestRecord;
use crate::measure::runner::ARTIFACT_FILE;
use crate::report::Side;
use crate::report::checker::Checker;

/// An interleaved side (`qualify`'s `{label}.json`, in its qualification
/// directory): the blocks' journal checked against the last block's record
/// of it, and every cell pooled again from it as `qualify` pools them, with
/// the plan the qualification ran (its `plan.toml` copy: the window) and
/// its suite (`--suite`, else the plan's). Turnover runs are taken as their
/// own run judged them.
pub(super) fn rebuild_interleaved(
    ck: &mut Checker,
    side: Side,
    file: &Path,
    art: RunArtifact,
    suite: Option<&SuiteFile>,
) -> Option<RunArtifact> {
    use crate::measure::interleave;
    use crate::runtime::state::{QualificationFile, interleaved_dir, turnover_dir};
    let name = file.display().to_string();
    let out_dir = file.parent().unwrap_or(Path::new("."));
    let label = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let read = QualificationFile::read(out_dir).and_then(|q| Ok((q.load_plan(out_dir)?, q)));
    let (plan, qf) = match read {
        Ok(p) => p,
        Err(e) => {
            ck.limit(format!("{name}: interleaved blocks are pooled again only inside their qualification directory, with its plan.toml ({e:#}); taken as given"));
            return Some(art);
        }
    };
    let loaded;
    let suite = match suite {
        Some(s) => &s.suite,
        None => {
            loaded = load_suite(ck, &plan.suite)?;
            if let Some(ran) = art
                .provenance
                .suite_sha256
                .as_ref()
                .filter(|h| **h != loaded.sha256)
            {
                ck.push(
                    plan.suite.display().to_string(),
                    format!("sha256 {}", loaded.sha256),
                    format!("{ran}, the suite {name} ran: it changed since"),
                );
            }
            &loaded.suite
        }
    };
    let dir = interleaved_dir(out_dir, label);
    let block_file = dir.join(ARTIFACT_FILE);
    let block = match crate::report::read_artifact(&block_file) {
        Ok(b) => b,
        Err(e) => {
            ck.push(
                block_file.display().to_string(),
                format!("{e:#}"),
                format!("the last block's run artifact beside {name}"),
            );
            return None;
        }
    };
    // The blocks' journal is not a file compare read: held to the last block's record.
    let journal = read_journal(ck, None, side, &block_file, &block)?;
    let layout = interleave::layout_by(&suite.cells, plan.window.as_ref(), qf.window_rule());
    let totals: Vec<usize> = layout
        .iter()
        .map(|l| {
            art.cells
                .iter()
                .find(|c| c.name == l.name)
                .map_or(0, |c| c.shape.requests)
        })
        .collect();
    // Pooled from the records read above, as `measure::pool::merge_interleaved` pools them.
    let records: Vec<RequestRecord> = journal.records.iter().map(|(_, r)| r.clone()).collect();
    let pooled = crate::measure::pool::pool_interleaved_cells(
        suite,
        &layout,
        &totals,
        &records,
        &journal.scrapes,
    );
    let pooled = match pooled {
        Ok(p) => p,
        Err(e) => {
            ck.push(
                format!("{name}: cells"),
                format!("{e:#}"),
                "every cell pooled again from the blocks' journal".to_string(),
            );
            return None;
        }
    };
    let rebuilt = held_to_pooled(ck, &journal, suite, &pooled, &art, &plan.suite, &name);
    if !art.turnover.is_empty() {
        ck.limit(format!(
            "{name}: its turnover runs are taken as their own run ({}) judged them",
            turnover_dir(out_dir, label).display()
        ));
    }
    Some(rebuilt)
}

/// Each of the artifact's cells held to the one pooled again from the
/// journal (named by journal line where they differ); the artifact with the
/// pooled cells.
fn held_to_pooled(
    ck: &mut Checker,
    journal: &Journal,
    suite: &Suite,
    pooled: &[CellResult],
    art: &RunArtifact,
    suite_path: &Path,
    name: &str,
) -> RunArtifact {
    let mut rebuilt = art.clone();
    for (i, cell) in art.cells.iter().enumerate() {
        let (Some(got), Some(spec)) = (
            pooled.iter().find(|c| c.name == cell.name),
            suite.cells.iter().find(|c| c.name == cell.name),
        ) else {
            ck.push(
                format!("{name}: cells[{i}]"),
                format!("cell `{}`", cell.name),
                format!("a cell of the suite {}", suite_path.display()),
            );
            continue;
        };
        let mut spec = spec.clone();
        spec.requests = cell.shape.requests;
        cell_differences(ck, journal, &spec, got, cell, name, i);
        rebuilt.cells[i] = got.clone();
    }
    rebuilt
}
