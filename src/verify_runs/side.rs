//! One side made again from its run directory, or from several passes
//! pooled as `qualify` pools them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::cells::{check_workloads, count_embeddings, rebuild_cell};
use super::inputs::{SuiteFile, check_input, read_artifact};
use super::interleaved::rebuild_interleaved;
use super::run_journal::read_journal;
use super::turnover::{count_turnover, rejudge_turnover, turnover_label};
use crate::artifact::{RunArtifact, Schedule, TurnoverRun};
use crate::report::checker::Checker;
use crate::report::{INPUT_RUN_ARTIFACT, Side};

/// The side's artifact, each cell aggregated again from the journal (and,
/// with a suite, each turnover run judged again); None when unreadable.
pub(super) fn rebuild_side(
    ck: &mut Checker,
    root: Option<&Map<String, Value>>,
    side: Side,
    dir: &Path,
    suite: Option<&SuiteFile>,
) -> Option<RunArtifact> {
    let (file, art) = read_artifact(ck, root, side, dir)?;
    let name = file.display().to_string();
    if art.schedule == Some(Schedule::Interleaved) {
        return rebuild_interleaved(ck, side, &file, art, suite);
    }
    if art.schedule.is_some_and(|s| s != Schedule::Single) {
        ck.limit(format!("{name}: pooled from several passes, so taken as given; give the pass directories instead (comma-separated, with --suite)"));
        return Some(art);
    }
    let Some(journal) = read_journal(ck, root, side, &file, &art) else {
        return art.provenance.journal.is_none().then_some(art);
    };
    let mut rebuilt = art.clone();
    rebuilt.cells = art
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| rebuild_cell(ck, &journal, &name, i, c))
        .collect();
    let turnover_labels: BTreeSet<String> = art.turnover.iter().map(turnover_label).collect();
    journal.check_cells_known(ck, &art, &turnover_labels);
    if let Some(s) = suite {
        check_workloads(ck, &art, &name, s);
    }
    count_embeddings(ck, &file, &art);
    rebuilt.turnover = match suite {
        Some(s) => rejudge_turnover(ck, &journal, &art, &name, s),
        None => {
            count_turnover(ck, &journal, &art);
            ck.limit("turnover answers were counted in the journals but not judged again: pass --suite SUITE (the suite the runs used)");
            art.turnover.clone()
        }
    };
    Some(rebuilt)
}

/// A side of several passes: each pass checked against its own journal,
/// then the passes pooled from their journals as `qualify` pools them
/// (`measure::pool::merge_passes`), with the turnover runs as judged again.
pub(super) fn pool_passes(
    ck: &mut Checker,
    root: &Map<String, Value>,
    side: Side,
    passes: &[PathBuf],
    suite_path: Option<&Path>,
    suite: Option<&SuiteFile>,
) -> Option<RunArtifact> {
    let Some(suite_path) = suite_path else {
        ck.push(
            format!("--runs ({side})"),
            format!("{} pass directories", passes.len()),
            "one run directory, or --suite SUITE to pool several as qualify does",
        );
        return None;
    };
    // What compare read is the pooled artifact beside the passes
    // (`qualify` writes `<side>.json`): its sha256 is the one recorded; each
    // pass is held to its own journal instead.
    if let Some(pooled) = passes
        .first()
        .and_then(|d| Some(d.parent()?.join(format!("{side}.json"))))
        .filter(|p| p.is_file())
        && let Ok(bytes) = std::fs::read(&pooled)
    {
        check_input(ck, Some(root), side, INPUT_RUN_ARTIFACT, &pooled, &bytes);
    }
    let mut turnover: Vec<TurnoverRun> = Vec::new();
    for dir in passes {
        let pass = rebuild_side(ck, None, side, dir, suite)?;
        for mut t in pass.turnover {
            t.repeat = turnover.iter().filter(|x| x.name == t.name).count();
            turnover.push(t);
        }
    }
    let dirs: Vec<PathBuf> = passes
        .iter()
        .map(|d| {
            if d.is_dir() {
                d.clone()
            } else {
                d.parent().unwrap_or(Path::new(".")).to_path_buf()
            }
        })
        .collect();
    match crate::measure::pool::merge_passes(suite_path, &dirs) {
        Ok(mut merged) => {
            merged.turnover = turnover;
            Some(merged)
        }
        Err(e) => {
            ck.push(
                format!("--runs ({side})"),
                format!("{e:#}"),
                "passes that pool as qualify pools them",
            );
            None
        }
    }
}
