//! The per-request journal: one JSON line per finished request, appended as
//! it completes, so a killed run keeps everything it finished.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::measure::record::RequestRecord;

pub struct Journal {
    path: PathBuf,
    file: File,
    line: Vec<u8>,
}

impl Journal {
    /// Open for appending, creating the file if needed.
    pub fn open(path: &Path) -> Result<Journal> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening journal {}", path.display()))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            line: Vec::with_capacity(4096),
        })
    }

    /// Append one record as a single write(2), so a kill leaves at most one torn line.
    pub fn append(&mut self, rec: &RequestRecord) -> Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, rec).context("serializing journal record")?;
        self.line.push(b'\n');
        self.file
            .write_all(&self.line)
            .with_context(|| format!("appending to journal {}", self.path.display()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The digest of the journal at `path` as it is now: sha256 of its bytes
/// and its record count (complete, non-empty lines).
pub fn digest(path: &Path) -> Result<crate::artifact::JournalDigest> {
    let bytes = crate::report::read_regular(path)
        .with_context(|| format!("reading journal {}", path.display()))?;
    let records = bytes
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| l.ends_with(b"\n") && !l.trim_ascii().is_empty())
        .count();
    Ok(crate::artifact::JournalDigest {
        file: path
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
        sha256: crate::util::sha256_hex(&bytes),
        records,
    })
}

/// One non-empty line of a journal, as read.
#[derive(Debug)]
pub enum Line {
    Record(Box<RequestRecord>),
    /// A last line without its newline: the run was killed while writing it.
    Torn,
    /// A complete line that is not a request record.
    Invalid(serde_json::Error),
}

/// One line of a journal as it was read (its newline kept, when it has one):
/// the one reading of journal lines, for resuming a run and for `verify --runs`.
/// None for a blank line.
pub fn parse_line(line: &[u8]) -> Option<Line> {
    if line.trim_ascii().is_empty() {
        return None;
    }
    Some(if !line.ends_with(b"\n") {
        Line::Torn
    } else {
        match serde_json::from_slice::<RequestRecord>(line) {
            Ok(r) => Line::Record(Box::new(r)),
            Err(e) => Line::Invalid(e),
        }
    })
}

/// Every non-empty line of a journal's bytes with its 1-based number.
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, Line)> + '_ {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| Some((i + 1, parse_line(line)?)))
}

/// Read every record, a line at a time. A line that does not parse is an
/// error naming the file and line; a torn last line (no newline, as left by
/// a kill mid-write) says so.
pub fn read(path: &Path) -> Result<Vec<RequestRecord>> {
    #[cfg(feature = "read-counts")]
    crate::util::read_counts::count(path);
    let f = File::open(path).with_context(|| format!("opening journal {}", path.display()))?;
    let mut reader = BufReader::new(f);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut lineno = 0usize;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading journal {}", path.display()))?;
        if n == 0 {
            break;
        }
        lineno += 1;
        match parse_line(&buf) {
            None => {}
            Some(Line::Record(r)) => out.push(*r),
            Some(Line::Torn) => bail!(
                "journal {} line {lineno} is torn (it ends without a newline: the run was killed while writing it). \
                 The {} records before it are intact; delete the last line to resume from them",
                path.display(),
                out.len()
            ),
            Some(Line::Invalid(e)) => bail!(
                "journal {} line {lineno}: not a valid record: {e}",
                path.display()
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::{Outcome, StreamCapture};

    fn rec(i: usize) -> RequestRecord {
        RequestRecord {
            cell: "c".into(),
            index: i,
            send_offset_ms: i as f64,
            queue_ms: 0.0,
            target_prompt_tokens: Some(10),
            template_prompt_tokens: None,
            turn: None,
            capture: StreamCapture {
                ttft_ms: Some(1.5),
                ..Default::default()
            },
            outcome: Outcome::Ok,
            detail: None,
            capacity: None,
        }
    }

    #[test]
    fn round_trips_and_reports_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.jsonl");
        let mut j = Journal::open(&p).unwrap();
        for i in 0..3 {
            j.append(&rec(i)).unwrap();
        }
        drop(j);
        assert_eq!(read(&p).unwrap(), vec![rec(0), rec(1), rec(2)]);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"cell":"c","ind"#).unwrap();
        let err = read(&p).unwrap_err().to_string();
        assert!(
            err.contains("line 4 is torn") && err.contains("3 records"),
            "{err}"
        );
    }

    #[test]
    fn corrupt_middle_line_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.jsonl");
        std::fs::write(&p, "{\"nope\":1}\n").unwrap();
        let err = read(&p).unwrap_err().to_string();
        assert!(err.contains("line 1: not a valid record"), "{err}");
    }
}
