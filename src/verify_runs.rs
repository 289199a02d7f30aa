//! `verify REPORT --runs BASE_DIR CAND_DIR`: the report made again from the
//! run directories it came from. Each run artifact and journal must have
//! the sha256 the report (`provenance.inputs`) and the artifact
//! (`provenance.journal`) recorded; each journal must hold exactly one
//! record per request; each cell is aggregated again from the journal and
//! must equal the artifact's; with the suite, each turnover run is judged
//! again from its journaled answers. Then `compare` runs on the rebuilt
//! artifacts with what the report was made with (its policy, method and
//! look), and every derived field must agree bit for bit. An edited
//! journal line is named by file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::artifact::{CellResult, RunArtifact, Schedule, TurnoverRun};
use crate::config::suite::{CachePolicy, CellEndpoint, CellSpec, OutputPolicy, Suite};
use crate::measure::journal;
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::runner::ARTIFACT_FILE;
use crate::measure::scrape::{self, SCRAPE_LOG_FILE, ScrapeEntry};
use crate::measure::turnover::TurnoverWorkload;
use crate::measure::{aggregate, windows};
use crate::report::checker::{Checker, Disagreement, show};
use crate::report::verify::{self as report_verify, Verification};
use crate::report::{INPUT_JOURNAL, INPUT_RUN_ARTIFACT, Side};
use crate::util::sha256_hex;

/// How many lines of one cell or run are named before the rest is summed up.
const MAX_LINES_NAMED: usize = 5;

/// The run directories (or run artifact files) of a report, and optionally
/// the suite they ran, to judge turnover answers again. A side of several
/// passes (`qualify` with repeats) lists each pass directory in order; they
/// are pooled as `qualify` pools them, which needs the suite.
#[derive(Debug, Clone)]
pub struct RunDirs {
    pub baseline: Vec<PathBuf>,
    pub candidate: Vec<PathBuf>,
    pub suite: Option<PathBuf>,
}

/// The report and run directories of a qualification directory, as
/// `qualify` wrote them: an interleaved side's pooled `<side>.json`, or each
/// side's pass directories in order; the suite the plan named.
pub fn qualification_dirs(dir: &Path) -> anyhow::Result<(PathBuf, RunDirs)> {
    use crate::config::plan::{BASELINE, CANDIDATE, PlanSchedule};
    use crate::runtime::state::{QualificationFile, REPORT_FILE, pass_dir, side_artifact};
    let plan = QualificationFile::read(dir)?.load_plan(dir)?;
    let side = |label: &str| match plan.schedule {
        PlanSchedule::Interleaved => vec![side_artifact(dir, label)],
        PlanSchedule::Alternating => (1..=plan.repeats)
            .map(|n| pass_dir(dir, label, n))
            .collect(),
    };
    Ok((
        dir.join(REPORT_FILE),
        RunDirs {
            baseline: side(BASELINE),
            candidate: side(CANDIDATE),
            suite: Some(plan.suite.clone()),
        },
    ))
}

/// A qualification's report (as JSON) against the runs in its directory
/// `dir`: what `infergate verify DIR` checks, and what `decide` requires.
pub fn check_qualification(report: &Value, dir: &Path) -> anyhow::Result<Verification> {
    let (_, dirs) = qualification_dirs(dir)?;
    Ok(verify_runs(report, &dirs))
}

/// [`crate::report::verify_report`], then the report made again from its runs.
pub fn verify_runs(report: &Value, dirs: &RunDirs) -> Verification {
    let mut v = crate::report::verify_report(report);
    v.unchecked.retain(|u| !u.contains("--runs"));
    let Some(root) = report.as_object() else {
        return v;
    };
    let mut ck = Checker::default();
    let suite = dirs.suite.as_deref().and_then(|p| load_suite(&mut ck, p));
    let mut arts = Vec::new();
    for (side, passes) in [
        (Side::Baseline, &dirs.baseline),
        (Side::Candidate, &dirs.candidate),
    ] {
        let rebuilt = match passes.as_slice() {
            [dir] => rebuild_side(&mut ck, Some(root), side, dir, suite.as_ref()),
            _ => pool_passes(
                &mut ck,
                root,
                side,
                passes,
                dirs.suite.as_deref(),
                suite.as_ref(),
            ),
        };
        arts.push(rebuilt);
    }
    if let [Some(b), Some(c)] = arts.as_slice() {
        recompute_from_runs(&mut ck, root, b, c);
    }
    // One file can disagree in several ways: distinct findings are all kept.
    let key = |d: &Disagreement| (d.path.clone(), d.found.clone(), d.expected.clone());
    let mut seen: BTreeSet<_> = v.disagreements.iter().map(key).collect();
    v.disagreements
        .extend(ck.out.into_iter().filter(|d| seen.insert(key(d))));
    for u in ck.unchecked {
        if !v.unchecked.contains(&u) {
            v.unchecked.push(u);
        }
    }
    v
}

/// A side of several passes: each pass checked against its own journal,
/// then the passes pooled from their journals as `qualify` pools them
/// (`measure::pool::merge_passes`), with the turnover runs as judged again.
fn pool_passes(
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

/// The suite given with `--suite`, and the sha256 of its text.
struct SuiteFile {
    suite: Suite,
    sha256: String,
}

fn load_suite(ck: &mut Checker, path: &Path) -> Option<SuiteFile> {
    match Suite::load(path) {
        Ok((suite, text)) => Some(SuiteFile {
            suite,
            sha256: sha256_hex(text.as_bytes()),
        }),
        Err(e) => {
            ck.push(
                path.display().to_string(),
                format!("{e:#}"),
                "a readable suite",
            );
            None
        }
    }
}

/// The report made with `compare` from the rebuilt artifacts and what the
/// report was made with (its policy, method and look), against the report.
fn recompute_from_runs(
    ck: &mut Checker,
    root: &Map<String, Value>,
    b: &RunArtifact,
    c: &RunArtifact,
) {
    let made = match report_verify::made_with(root) {
        Ok(m) => m,
        Err(why) => {
            ck.limit(format!("the report made again from its runs: {why}"));
            return;
        }
    };
    match made.compare(b, c) {
        Ok(r) => {
            let mut sub = Checker::default();
            report_verify::expect_report(&mut sub, root, &r);
            for mut d in sub.out {
                d.expected = format!("{} (made again from the run directories)", d.expected);
                ck.out.push(d);
            }
        }
        Err(e) => ck.push("cells", "runs that compare refuses".into(), e.to_string()),
    }
}

/// The recorded sha256 of `role` on `side` in the report's inputs.
fn recorded_input(root: &Map<String, Value>, side: Side, role: &str) -> Option<(usize, String)> {
    let inputs = root.get("provenance")?.get("inputs")?.as_array()?;
    inputs.iter().enumerate().find_map(|(i, x)| {
        (x.get("side")?.as_str()? == side.as_str() && x.get("role")?.as_str()? == role)
            .then(|| Some((i, x.get("sha256")?.as_str()?.to_string())))
            .flatten()
    })
}

/// The file's sha256 against the report's record of it; `root` None: the
/// file is not one compare read (a pass of a pooled side, a block journal).
fn check_input(
    ck: &mut Checker,
    root: Option<&Map<String, Value>>,
    side: Side,
    role: &str,
    file: &Path,
    bytes: &[u8],
) {
    let Some(root) = root else {
        return;
    };
    let now = sha256_hex(bytes);
    match recorded_input(root, side, role) {
        Some((i, rec)) if rec != now => ck.push(
            file.display().to_string(),
            format!("sha256 {now}"),
            format!("{rec}, as provenance.inputs[{i}] records: the file changed after compare read it"),
        ),
        Some(_) => {}
        None => ck.limit(format!(
            "the {side} {role}'s sha256: the report does not record it (made by an older compare, or from artifacts in memory)"
        )),
    }
}

/// The side's artifact, each cell aggregated again from the journal (and,
/// with a suite, each turnover run judged again); None when unreadable.
fn rebuild_side(
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

/// The run artifact of `dir` (a run directory, or the artifact itself),
/// its sha256 checked against the report's record.
fn read_artifact(
    ck: &mut Checker,
    root: Option<&Map<String, Value>>,
    side: Side,
    dir: &Path,
) -> Option<(PathBuf, RunArtifact)> {
    let file = if dir.is_dir() {
        dir.join(ARTIFACT_FILE)
    } else {
        dir.to_path_buf()
    };
    let name = file.display().to_string();
    let bytes = match crate::report::read_regular(&file) {
        Ok(b) => b,
        Err(e) => {
            ck.push(&name, format!("unreadable: {e}"), "a run artifact");
            return None;
        }
    };
    check_input(ck, root, side, INPUT_RUN_ARTIFACT, &file, &bytes);
    match serde_json::from_slice(crate::report::without_bom(&bytes)) {
        Ok(a) => Some((file, a)),
        Err(e) => {
            ck.push(
                format!("{name}:{}:{}", e.line(), e.column()),
                format!("not a run artifact: {e}"),
                "a run artifact",
            );
            None
        }
    }
}

/// The journal the artifact names, its sha256 and record count checked
/// against the artifact's and the report's records. None when the artifact
/// names none (a limit) or it cannot be read (a disagreement).
fn read_journal(
    ck: &mut Checker,
    root: Option<&Map<String, Value>>,
    side: Side,
    file: &Path,
    art: &RunArtifact,
) -> Option<Journal> {
    let name = file.display().to_string();
    let Some(digest) = &art.provenance.journal else {
        ck.limit(format!(
            "{name}: it records no journal, so its cells are not aggregated again"
        ));
        return None;
    };
    let jfile = file.parent().unwrap_or(Path::new(".")).join(&digest.file);
    let jname = jfile.display().to_string();
    let jbytes = match crate::report::read_regular(&jfile) {
        Ok(b) => b,
        Err(e) => {
            ck.push(
                &jname,
                format!("unreadable: {e}"),
                format!("the journal {name} was aggregated from"),
            );
            return None;
        }
    };
    check_input(ck, root, side, INPUT_JOURNAL, &jfile, &jbytes);
    let now = sha256_hex(&jbytes);
    if now != digest.sha256 {
        ck.push(
            &jname,
            format!("sha256 {now}"),
            format!(
                "{}, as {name} provenance.journal records: the journal changed after the run",
                digest.sha256
            ),
        );
    }
    let mut journal = Journal::read(ck, &jname, &jbytes);
    let sfile = jfile.with_file_name(SCRAPE_LOG_FILE);
    match scrape::read_log(&sfile) {
        Ok(s) => journal.scrapes = s,
        Err(e) => ck.push(
            sfile.display().to_string(),
            format!("{e:#}"),
            "the scrape log the cells' server metrics came from",
        ),
    }
    if journal.records.len() != digest.records {
        ck.push(
            &jname,
            format!("{} records", journal.records.len()),
            format!("{}, as {name} provenance.journal records", digest.records),
        );
    }
    Some(journal)
}

/// One journal's records with their 1-based line numbers.
struct Journal {
    name: String,
    records: Vec<(usize, RequestRecord)>,
    /// The run's scrape log beside it (none when the run scraped nothing).
    scrapes: Vec<ScrapeEntry>,
}

impl Journal {
    /// Every complete, non-empty line; a line that is not a record is named.
    fn read(ck: &mut Checker, name: &str, bytes: &[u8]) -> Journal {
        let mut records = Vec::new();
        for (lineno, line) in journal::lines(bytes) {
            match line {
                journal::Line::Record(r) => records.push((lineno, *r)),
                journal::Line::Torn => ck.push(
                    format!("{name}:{lineno}"),
                    "a torn last line".into(),
                    "a complete record ending in a newline",
                ),
                journal::Line::Invalid(e) => ck.push(
                    format!("{name}:{lineno}"),
                    format!("not a valid record: {e}"),
                    "a request record",
                ),
            }
        }
        Journal {
            name: name.to_string(),
            records,
            scrapes: Vec::new(),
        }
    }

    fn at(&self, line: usize) -> String {
        format!("{}:{line}", self.name)
    }

    /// Records of journal cell `cell`, by line.
    fn of<'a>(&'a self, cell: &'a str) -> impl Iterator<Item = &'a (usize, RequestRecord)> + 'a {
        self.records.iter().filter(move |(_, r)| r.cell == cell)
    }

    /// One record per request `0 .. requests` of `cell`: duplicates,
    /// out-of-range and missing indices named. Returns index → line.
    fn check_indices(
        &self,
        ck: &mut Checker,
        cell: &str,
        requests: usize,
        what: &str,
    ) -> BTreeMap<usize, usize> {
        let mut lines: BTreeMap<usize, usize> = BTreeMap::new();
        for (line, r) in self.of(cell) {
            if r.index >= requests {
                ck.push(
                    self.at(*line),
                    format!("a record of {what} request {}", r.index),
                    format!("indices below {requests}, the requests the run artifact says it made"),
                );
            } else if let Some(first) = lines.get(&r.index) {
                ck.push(
                    self.at(*line),
                    format!("a second record of {what} request {}", r.index),
                    format!("one record per request (the first is at line {first})"),
                );
            } else {
                lines.insert(r.index, *line);
            }
        }
        let missing: Vec<String> = (0..requests)
            .filter(|i| !lines.contains_key(i))
            .map(|i| i.to_string())
            .collect();
        if !missing.is_empty() {
            ck.push(
                &self.name,
                format!("no record of {what} request(s) {}", missing.join(", ")),
                format!("one record for each of its {requests} requests"),
            );
        }
        lines
    }

    /// Records of cells the artifact does not have are named.
    fn check_cells_known(&self, ck: &mut Checker, art: &RunArtifact, turnover: &BTreeSet<String>) {
        let cells: BTreeSet<&str> = art.cells.iter().map(|c| c.name.as_str()).collect();
        let mut named = 0;
        for (line, r) in &self.records {
            let reference = r
                .cell
                .strip_suffix("/reference")
                .is_some_and(|l| turnover.contains(l));
            if cells.contains(r.cell.as_str()) || turnover.contains(&r.cell) || reference {
                continue;
            }
            if named < MAX_LINES_NAMED {
                ck.push(
                    self.at(*line),
                    format!("a record of `{}`", r.cell),
                    "a cell or turnover run of the run artifact",
                );
            }
            named += 1;
        }
    }
}

/// The journal cell name of a turnover run (`TurnoverSpec::cell_label`).
fn turnover_label(t: &TurnoverRun) -> String {
    format!("turnover:{}#{}", t.name, t.repeat)
}

/// The cell's spec as the artifact's shape gives it (all `aggregate` reads).
fn spec_of(c: &CellResult) -> CellSpec {
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
        dataset: None,
        dataset_sha256: None,
    }
}

/// The cell aggregated again from its journal records, against the artifact's.
fn rebuild_cell(
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
    let w = windows::cell_windows(&j.scrapes, &cell.name, &records, usize::MAX);
    windows::attach(&mut rebuilt, w);
    cell_differences(ck, j, &spec, &rebuilt, cell, art_name, i);
    rebuilt
}

/// Each cell's workload (with its dataset's sha256) against the suite's.
fn check_workloads(ck: &mut Checker, art: &RunArtifact, name: &str, suite: &SuiteFile) {
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
fn cell_differences(
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

/// An interleaved side (`qualify`'s `{label}.json`, in its qualification
/// directory): the blocks' journal checked against the last block's record
/// of it, and every cell pooled again from it as `qualify` pools them, with
/// the plan the qualification ran (its `plan.toml` copy: the window) and
/// its suite (`--suite`, else the plan's). Turnover runs are taken as their
/// own run judged them.
fn rebuild_interleaved(
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
    let layout = interleave::layout_by(&suite.cells, plan.window, qf.window_rule());
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
    let mut rebuilt = art.clone();
    for (i, cell) in art.cells.iter().enumerate() {
        let (Some(got), Some(spec)) = (
            pooled.iter().find(|c| c.name == cell.name),
            suite.cells.iter().find(|c| c.name == cell.name),
        ) else {
            ck.push(
                format!("{name}: cells[{i}]"),
                format!("cell `{}`", cell.name),
                format!("a cell of the suite {}", plan.suite.display()),
            );
            continue;
        };
        let mut spec = spec.clone();
        spec.requests = cell.shape.requests;
        cell_differences(ck, &journal, &spec, got, cell, &name, i);
        rebuilt.cells[i] = got.clone();
    }
    if !art.turnover.is_empty() {
        ck.limit(format!(
            "{name}: its turnover runs are taken as their own run ({}) judged them",
            turnover_dir(out_dir, label).display()
        ));
    }
    Some(rebuilt)
}

fn to_value<T: serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

/// For each sample whose values differ, the journal lines behind the first
/// differing positions: each value in the order `aggregate` takes them.
fn name_sample_lines(
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
fn count_embeddings(ck: &mut Checker, artifact: &Path, art: &RunArtifact) {
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

fn count_turnover(ck: &mut Checker, j: &Journal, art: &RunArtifact) {
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
fn rejudge_turnover(
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
fn name_failure_lines(
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
