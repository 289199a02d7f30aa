//! The append-only ledger: every lifecycle step of every qualification (plan,
//! preflight, start, run, stop, compare, report, decision, restore, readmit,
//! serving, rollback, done) is one row of an embedded SQLite database, so an
//! interrupted qualification or promotion can be inspected and resumed.
//!
//! Rows are never updated or deleted: triggers refuse it, so a bug here cannot
//! rewrite history. Where things stand is derived by reading the rows in order.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

/// Environment variable overriding the ledger's location.
pub const LEDGER_ENV: &str = "INFERGATE_LEDGER";

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

    fn parse(s: &str) -> Result<Status> {
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

pub struct Ledger {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).finish()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    qualification TEXT NOT NULL,
    at            TEXT NOT NULL,
    step          TEXT NOT NULL,
    runtime       TEXT,
    status        TEXT NOT NULL CHECK (status IN ('started', 'ok', 'failed', 'info')),
    detail        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_qualification ON entries (qualification, seq);
CREATE TRIGGER IF NOT EXISTS entries_no_update BEFORE UPDATE ON entries
    BEGIN SELECT RAISE(ABORT, 'the infergate ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_no_delete BEFORE DELETE ON entries
    BEGIN SELECT RAISE(ABORT, 'the infergate ledger is append-only'); END;
";

impl Ledger {
    /// `$INFERGATE_LEDGER`, else `$XDG_DATA_HOME/infergate/ledger.sqlite`,
    /// else `~/.local/share/infergate/ledger.sqlite`.
    pub fn default_path() -> Result<PathBuf> {
        if let Some(p) = std::env::var_os(LEDGER_ENV).filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(p));
        }
        let data = match std::env::var_os("XDG_DATA_HOME").filter(|p| !p.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => {
                let home = std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .with_context(|| {
                        format!(
                            "neither {LEDGER_ENV}, XDG_DATA_HOME nor HOME is set; pass --ledger"
                        )
                    })?;
                PathBuf::from(home).join(".local/share")
            }
        };
        Ok(data.join("infergate/ledger.sqlite"))
    }

    /// Open (creating if needed) the ledger at `path`.
    pub fn open(path: &Path) -> Result<Ledger> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let conn =
            Connection::open(path).with_context(|| format!("opening ledger {}", path.display()))?;
        // Another infergate (a `status` while `qualify` runs) may hold the lock briefly.
        conn.busy_timeout(Duration::from_secs(10))
            .with_context(|| format!("configuring ledger {}", path.display()))?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .and_then(|_| conn.execute_batch(SCHEMA))
            .with_context(|| format!("initialising ledger {}", path.display()))?;
        Ok(Ledger {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one step; returns its sequence number.
    pub fn append(
        &self,
        qualification: &str,
        step: &str,
        runtime: Option<&str>,
        status: Status,
        detail: Value,
    ) -> Result<i64> {
        let at = crate::util::now_rfc3339();
        let detail = serde_json::to_string(&detail).context("serializing ledger detail")?;
        self.conn
            .execute(
                "INSERT INTO entries (qualification, at, step, runtime, status, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![qualification, at, step, runtime, status.as_str(), detail],
            )
            .with_context(|| format!("appending to ledger {}", self.path.display()))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Every entry of one qualification, in order.
    pub fn entries(&self, qualification: &str) -> Result<Vec<Entry>> {
        self.query(
            "SELECT seq, qualification, at, step, runtime, status, detail FROM entries WHERE qualification = ?1 ORDER BY seq",
            Some(qualification),
        )
    }

    /// Qualification ids, oldest first.
    pub fn qualifications(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT qualification FROM entries GROUP BY qualification ORDER BY MIN(seq)")
            .context("reading ledger")?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .context("reading ledger")?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .context("reading ledger")
    }

    pub fn exists(&self, qualification: &str) -> Result<bool> {
        let found: Option<i64> = self
            .conn
            .query_row(
                "SELECT seq FROM entries WHERE qualification = ?1 LIMIT 1",
                [qualification],
                |r| r.get(0),
            )
            .optional()
            .context("reading ledger")?;
        Ok(found.is_some())
    }

    fn query(&self, sql: &str, arg: Option<&str>) -> Result<Vec<Entry>> {
        let mut stmt = self.conn.prepare(sql).context("reading ledger")?;
        let map = |r: &rusqlite::Row<'_>| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
            ))
        };
        let rows = match arg {
            Some(a) => stmt.query_map([a], map),
            None => stmt.query_map([], map),
        }
        .context("reading ledger")?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, qualification, at, step, runtime, status, detail) =
                row.context("reading ledger")?;
            out.push(Entry {
                seq,
                qualification,
                at,
                step,
                runtime,
                status: Status::parse(&status)
                    .with_context(|| format!("ledger {} entry {seq}", self.path.display()))?,
                detail: serde_json::from_str(&detail).with_context(|| {
                    format!(
                        "ledger {} entry {seq}: detail is not JSON",
                        self.path.display()
                    )
                })?,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn appends_in_order_and_refuses_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/ledger.sqlite");
        let l = Ledger::open(&path).unwrap();
        l.append("q1", "plan", None, Status::Ok, json!({"plan": "p.toml"}))
            .unwrap();
        l.append("q2", "plan", None, Status::Ok, json!({})).unwrap();
        l.append("q1", "start", Some("baseline"), Status::Started, json!({}))
            .unwrap();
        let e = l.entries("q1").unwrap();
        assert_eq!(
            e.iter().map(|e| e.step.as_str()).collect::<Vec<_>>(),
            ["plan", "start"]
        );
        assert_eq!(e[1].runtime.as_deref(), Some("baseline"));
        assert_eq!(e[0].detail_str("plan"), Some("p.toml"));
        assert_eq!(l.qualifications().unwrap(), ["q1", "q2"]);
        assert!(l.exists("q2").unwrap() && !l.exists("q3").unwrap());

        let upd = l
            .conn
            .execute("UPDATE entries SET status = 'ok'", [])
            .unwrap_err();
        assert!(upd.to_string().contains("append-only"), "{upd}");
        let del = l.conn.execute("DELETE FROM entries", []).unwrap_err();
        assert!(del.to_string().contains("append-only"), "{del}");
        drop(l);
        // Reopening keeps everything.
        assert_eq!(Ledger::open(&path).unwrap().entries("q1").unwrap().len(), 2);
    }
}
