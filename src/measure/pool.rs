//! One artifact per side from its passes or blocks: each cell re-aggregated
//! over every request it measured, with the server windows and turnover.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::interleave::{self, CellLayout};
use crate::artifact::{RunArtifact, Schedule, TurnoverSkip};
use crate::config::plan::BASELINE;
use crate::config::suite::Suite;
use crate::measure::record::RequestRecord;
use crate::measure::runner::Measured;
use crate::measure::runner::{ARTIFACT_FILE, JOURNAL_FILE};
use crate::measure::scrape::{self, SCRAPE_LOG_FILE};
use crate::measure::{aggregate, journal, windows};
use crate::report;

/// `method.prompt_tokens_achieved` over the pooled records.
fn set_prompt_tokens_achieved(
    method: &mut BTreeMap<String, String>,
    cells: &[crate::config::suite::CellSpec],
    records: &[crate::measure::record::RequestRecord],
) {
    let achieved = crate::measure::exact::achieved(cells, records);
    if !achieved.is_empty() {
        method.insert("prompt_tokens_achieved".into(), achieved);
    }
}

/// One side's interleaved blocks, held in memory as they are measured:
/// every record and scrape in the order its journal and scrape log have
/// them, and the last block's artifact (provenance, method). Those files are
/// the durability contract; they are read back only to recover a
/// qualification that a new invocation resumes.
#[derive(Debug, Default)]
pub struct SideBlocks {
    pub records: Vec<RequestRecord>,
    pub scrapes: Vec<scrape::ScrapeEntry>,
    pub last: Option<RunArtifact>,
}

impl SideBlocks {
    /// What the side's directory holds (nothing, before its first block).
    pub fn recover(dir: &Path) -> Result<SideBlocks> {
        let journal_file = dir.join(JOURNAL_FILE);
        if !journal_file.exists() {
            return Ok(SideBlocks::default());
        }
        let last_file = dir.join(ARTIFACT_FILE);
        Ok(SideBlocks {
            records: journal::read(&journal_file)?,
            scrapes: scrape::read_log(&dir.join(SCRAPE_LOG_FILE))?,
            last: match last_file.exists() {
                true => Some(report::read_artifact(&last_file)?),
                false => None,
            },
        })
    }

    /// A block's measurements, after those before it.
    pub fn add(&mut self, block: Measured) {
        self.records.extend(block.records);
        self.scrapes.extend(block.scrapes);
        self.last = Some(block.artifact);
    }
}

/// Both sides' blocks.
#[derive(Debug, Default)]
pub struct Blocks {
    pub baseline: SideBlocks,
    pub candidate: SideBlocks,
}

impl Blocks {
    /// Both sides as their blocks' directories hold them.
    pub fn recover(baseline_dir: &Path, candidate_dir: &Path) -> Result<Blocks> {
        Ok(Blocks {
            baseline: SideBlocks::recover(baseline_dir)?,
            candidate: SideBlocks::recover(candidate_dir)?,
        })
    }

    pub fn side(&self, label: &str) -> &SideBlocks {
        if label == BASELINE {
            &self.baseline
        } else {
            &self.candidate
        }
    }

    pub fn side_mut(&mut self, label: &str) -> &mut SideBlocks {
        if label == BASELINE {
            &mut self.baseline
        } else {
            &mut self.candidate
        }
    }
}

/// One side of an interleaved qualification as one artifact: each cell pooled
/// over its blocks (requests `0 .. totals[i]`, `sample_clusters` = block
/// index, the same numbering on both sides), the turnover from its own run
/// when there was one (else `skip`, who skipped it), provenance from the
/// last block.
pub fn merge_interleaved(
    suite: &Suite,
    cells: &[CellLayout],
    totals: &[usize],
    blocks: &SideBlocks,
    turnover_dir: &Path,
    started_at: Option<String>,
    skip: Option<TurnoverSkip>,
) -> Result<RunArtifact> {
    let last = blocks.last.as_ref().context("no block measured")?;
    let records = &blocks.records;
    let pooled = pool_interleaved_cells(suite, cells, totals, records, &blocks.scrapes)?;
    let mut provenance = last.provenance.clone();
    // Pooled from blocks: no one journal state describes the merged artifact.
    provenance.journal = None;
    if let Some(at) = started_at {
        provenance.started_at = at;
    }
    let tfile = turnover_dir.join(ARTIFACT_FILE);
    let (turnover, embeddings, turnover_not_run) = if tfile.exists() {
        let t = report::read_artifact(&tfile)?;
        provenance.ended_at = t.provenance.ended_at.clone();
        (t.turnover, t.embeddings, None)
    } else {
        (Vec::new(), Vec::new(), skip)
    };
    let mut method = last.method.clone();
    // Over every block's requests, not the last block's run.
    set_prompt_tokens_achieved(&mut method, &suite.cells, records);
    let windows: Vec<String> = cells
        .iter()
        .zip(&suite.cells)
        .map(|(c, s)| format!("{} {} (+{} warmup)", c.name, c.window, s.warmup))
        .collect();
    method.insert(
        "schedule".into(),
        format!(
            "interleaved: both runtimes up at once; each cell's requests in blocks alternating between them in one timeline (block k: baseline then candidate for even k, candidate then baseline for odd k), never both loaded at once; each block after the cell's warmup requests (not recorded); requests per block: {}; sample_clusters is the block index, shared by the two sides",
            windows.join(", ")
        ),
    );
    Ok(RunArtifact {
        schema: last.schema.clone(),
        provenance,
        method,
        rate_sweeps: crate::slo::rate_sweeps(&pooled),
        cells: pooled,
        turnover,
        schedule: Some(Schedule::Interleaved),
        embeddings,
        turnover_not_run,
    })
}

/// Each cell of `suite` pooled over its blocks (requests `0 .. totals[i]`)
/// from the blocks' records, with its server windows from the scrape log.
pub fn pool_interleaved_cells(
    suite: &Suite,
    cells: &[CellLayout],
    totals: &[usize],
    records: &[crate::measure::record::RequestRecord],
    scrapes: &[scrape::ScrapeEntry],
) -> Result<Vec<crate::artifact::CellResult>> {
    suite
        .cells
        .iter()
        .zip(cells)
        .zip(totals)
        .map(|((spec, c), &n)| {
            if spec.capacity.is_some() {
                return capacity_cell(spec, records, scrapes);
            }
            let mut cell = interleave::pool_cell(spec, c.window, n, records);
            let w = windows::cell_windows(scrapes, &spec.name, records, n);
            windows::attach(&mut cell, w);
            Ok(cell)
        })
        .collect()
}

/// A capacity cell of one side, as `infergate run` makes it: its measured
/// requests aggregated (warm-ups left out) and its search from their marks.
fn capacity_cell(
    spec: &crate::config::suite::CellSpec,
    records: &[RequestRecord],
    scrapes: &[scrape::ScrapeEntry],
) -> Result<crate::artifact::CellResult> {
    let mut cell = aggregate::cell(spec, records);
    windows::attach(
        &mut cell,
        windows::cell_windows(scrapes, &spec.name, records, usize::MAX),
    );
    cell.capacity = Some(crate::measure::runner::capacity_run(spec, records)?);
    Ok(cell)
}

/// Pool the passes of one runtime into one artifact: each cell re-aggregated
/// over every pass's requests (same shape, `requests` × passes), turnover runs
/// listed in pass order.
pub fn merge_passes(suite_path: &Path, dirs: &[PathBuf]) -> Result<RunArtifact> {
    let (suite, _) = Suite::load(suite_path)?;
    merge_passes_of(&suite, dirs)
}

/// [`merge_passes`] with the suite already read.
pub fn merge_passes_of(suite: &Suite, dirs: &[PathBuf]) -> Result<RunArtifact> {
    let arts: Vec<RunArtifact> = dirs
        .iter()
        .map(|d| report::read_artifact(&d.join(ARTIFACT_FILE)))
        .collect::<Result<_, _>>()?;
    let first = arts.first().context("no passes to merge")?;
    let mut records = Vec::new();
    // Per cell, every pass's server windows (each pass its own log and indices).
    let mut server: BTreeMap<String, BTreeMap<String, windows::EndpointWindows>> = BTreeMap::new();
    for (k, dir) in dirs.iter().enumerate() {
        let pass = journal::read(&dir.join(JOURNAL_FILE))?;
        let scrapes = scrape::read_log(&dir.join(SCRAPE_LOG_FILE))?;
        for spec in &suite.cells {
            let w = windows::cell_windows(&scrapes, &spec.name, &pass, spec.requests);
            windows::merge(server.entry(spec.name.clone()).or_default(), w);
        }
        for mut r in pass {
            if let Some(spec) = suite.cells.iter().find(|c| c.name == r.cell) {
                // Distinct indices per pass, so pooled requests never collide.
                r.index += k * spec.requests;
                records.push(r);
            }
        }
    }
    let cells: Vec<crate::artifact::CellResult> = first
        .cells
        .iter()
        .filter_map(|c| suite.cells.iter().find(|s| s.name == c.name))
        .map(|spec| {
            let mut pooled = spec.clone();
            pooled.requests = spec.requests * dirs.len();
            // Each pass is a fresh start of the runtime: a cluster of its own.
            let per_pass = spec.requests;
            let mut cell =
                aggregate::cell_clustered(&pooled, &records, |r| (r.index / per_pass) as u32);
            windows::attach(&mut cell, server.remove(&spec.name).unwrap_or_default());
            cell
        })
        .collect();
    let mut turnover = Vec::new();
    for a in &arts {
        for t in &a.turnover {
            let mut t = t.clone();
            t.repeat = turnover
                .iter()
                .filter(|x: &&crate::artifact::TurnoverRun| x.name == t.name)
                .count();
            turnover.push(t);
        }
    }
    let mut method = first.method.clone();
    set_prompt_tokens_achieved(&mut method, &suite.cells, &records);
    method.insert(
        "passes".into(),
        format!("pooled over {} passes of this runtime, each from a fresh start, in alternating order with the other runtime", dirs.len()),
    );
    let mut provenance = first.provenance.clone();
    // Pooled from several passes' journals: none of them alone describes it.
    provenance.journal = None;
    if let Some(last) = arts.last() {
        provenance.ended_at = last.provenance.ended_at.clone();
    }
    // Every pass runs with the same plan: the first's skip is the side's.
    let turnover_not_run = first.turnover_not_run.filter(|_| turnover.is_empty());
    Ok(RunArtifact {
        schema: first.schema.clone(),
        provenance,
        method,
        rate_sweeps: crate::slo::rate_sweeps(&cells),
        cells,
        turnover,
        schedule: Some(Schedule::AlternatingPasses),
        turnover_not_run,
        // One pass embeds (the vectors of fixed inputs do not vary by pass).
        embeddings: arts
            .iter()
            .find(|a| !a.embeddings.is_empty())
            .map_or_else(Vec::new, |a| a.embeddings.clone()),
    })
}
