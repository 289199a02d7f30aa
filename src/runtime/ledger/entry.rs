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

/// A row as a backend reads it: its columns as stored, the chain's two
/// (`prev`, `hash`) None in rows that predate the chain.
#[derive(Debug, Clone)]
pub struct RawRow {
    pub seq: i64,
    pub qualification: String,
    pub at: String,
    pub step: String,
    pub runtime: Option<String>,
    pub status: String,
    /// The detail as its JSON text, byte for byte.
    pub detail: String,
    pub prev: Option<String>,
    pub hash: Option<String>,
}

/// A row decoded: its entry, and what the chain needs of it as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub entry: Entry,
    /// The detail's JSON text as stored: what the row's hash covers, so a
    /// row hashes alike in every backend and after every copy.
    pub detail_text: String,
    /// The hash of the row this one follows in its qualification ("" for
    /// its first); None before the chain.
    pub prev: Option<String>,
    /// sha256 of the row (`chain::row_hash`); None before the chain.
    pub hash: Option<String>,
}

/// Decode a raw row; `origin` names the ledger in errors.
pub fn decode(row: RawRow, origin: &str) -> Result<Row> {
    let seq = row.seq;
    let entry = Entry {
        seq,
        qualification: row.qualification,
        at: row.at,
        step: row.step,
        runtime: row.runtime,
        status: Status::parse(&row.status)
            .with_context(|| format!("ledger {origin} entry {seq}"))?,
        detail: serde_json::from_str(&row.detail)
            .with_context(|| format!("ledger {origin} entry {seq}: detail is not JSON"))?,
    };
    Ok(Row {
        entry,
        detail_text: row.detail,
        prev: row.prev,
        hash: row.hash,
    })
}
