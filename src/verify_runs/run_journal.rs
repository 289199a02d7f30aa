//! A run's journal as `verify --runs` reads it: every line named by
//! number, each problem kept rather than stopping at the first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value};

use super::inputs::check_input;
use crate::artifact::RunArtifact;
use crate::measure::journal;
use crate::measure::record::RequestRecord;
use crate::measure::scrape::{self, SCRAPE_LOG_FILE, ScrapeEntry};
use crate::report::checker::Checker;
use crate::report::{INPUT_JOURNAL, Side};
use crate::util::sha256_hex;

/// How many lines of one cell or run are named before the rest is summed up.
pub(super) const MAX_LINES_NAMED: usize = 5;

/// The journal the artifact names, its sha256 and record count checked
/// against the artifact's and the report's records. None when the artifact
/// names none (a limit) or it cannot be read (a disagreement).
pub(super) fn read_journal(
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
pub(super) struct Journal {
    pub(super) name: String,
    pub(super) records: Vec<(usize, RequestRecord)>,
    /// The run's scrape log beside it (none when the run scraped nothing).
    pub(super) scrapes: Vec<ScrapeEntry>,
}

impl Journal {
    /// Every complete, non-empty line; a line that is not a record is named.
    pub(super) fn read(ck: &mut Checker, name: &str, bytes: &[u8]) -> Journal {
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

    pub(super) fn at(&self, line: usize) -> String {
        format!("{}:{line}", self.name)
    }

    /// Records of journal cell `cell`, by line.
    pub(super) fn of<'a>(
        &'a self,
        cell: &'a str,
    ) -> impl Iterator<Item = &'a (usize, RequestRecord)> + 'a {
        self.records.iter().filter(move |(_, r)| r.cell == cell)
    }

    /// One record per request `0 .. requests` of `cell`: duplicates,
    /// out-of-range and missing indices named. Returns index → line.
    pub(super) fn check_indices(
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
    pub(super) fn check_cells_known(
        &self,
        ck: &mut Checker,
        art: &RunArtifact,
        turnover: &BTreeSet<String>,
    ) {
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
