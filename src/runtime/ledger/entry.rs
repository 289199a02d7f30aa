//! One ledger row, as both backends store it: plain data, no database.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Started,
    Ok,
    Failed,
    /// A note that is neither success nor failure (a warning, a skipped step).
    Info,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Started => "started",
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Info => "info",
        }
    }

    pub fn parse(s: &str) -> Result<Status> {
        Ok(match s {
            "started" => Status::Started,
            "ok" => Status::Ok,
            "failed" => Status::Failed,
            "info" => Status::Info,
            other => bail!("unknown ledger status {other:?}"),
        })
    }
}

/// One ledger row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Order of appending, across all qualifications.
    pub seq: i64,
    pub qualification: String,
    /// RFC 3339, UTC.
    pub at: String,
    pub step: String,
    /// "baseline", "candidate", or none for steps about the whole qualification.
    pub runtime: Option<String>,
    pub status: Status,
    pub detail: Value,
}

impl Entry {
    pub fn detail_str(&self, key: &str) -> Option<&str> {
        self.detail.get(key).and_then(Value::as_str)
    }
}

/// A row as a backend reads it: (seq, qualification, at, step, runtime,
/// status, detail as JSON text).
pub type RawRow = (i64, String, String, String, Option<String>, String, String);

/// Decode a raw row; `origin` names the ledger in errors.
pub fn decode(row: RawRow, origin: &str) -> Result<Entry> {
    let (seq, qualification, at, step, runtime, status, detail) = row;
    Ok(Entry {
        seq,
        qualification,
        at,
        step,
        runtime,
        status: Status::parse(&status).with_context(|| format!("ledger {origin} entry {seq}"))?,
        detail: serde_json::from_str(&detail)
            .with_context(|| format!("ledger {origin} entry {seq}: detail is not JSON"))?,
    })
}
