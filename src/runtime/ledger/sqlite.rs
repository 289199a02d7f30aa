//! The embedded ledger: one SQLite file (WAL), for one user or one machine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};

use super::chain;
use super::entry::{Entry, RawRow, Row, decode};
use super::schema::{self, SCHEMA_TABLE_SQLITE};

pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
}

impl Sqlite {
    /// Open (creating if needed) the ledger at `path`, its schema brought up to date.
    pub fn open(path: &Path) -> Result<Sqlite> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let conn =
            Connection::open(path).with_context(|| format!("opening ledger {}", path.display()))?;
        // Before the WAL pragma, which writes: another program's database
        // is left as it was.
        refuse_foreign(&conn, path, true)?;
        Sqlite::configure(conn, path)
    }

    /// Open the ledger at `path` only if it exists: for commands that read
    /// (`status`, `stop`, `ledger migrate`'s source), which must never
    /// create a ledger (a typo would look like an empty one).
    pub fn open_existing(path: &Path) -> Result<Sqlite> {
        must_exist(path)?;
        // Without SQLITE_OPEN_CREATE: a file removed meanwhile is not made again.
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .with_context(|| format!("opening ledger {}", path.display()))?;
        refuse_foreign(&conn, path, false)?;
        Sqlite::configure(conn, path)
    }

    /// Open an existing ledger to read only: nothing is written to it (no
    /// pragma, no schema), so it may sit on a read-only mount. A WAL ledger
    /// there has no `-shm` file and cannot get one; it is then opened as
    /// immutable, which is what a read-only mount guarantees.
    pub fn open_read_only(path: &Path) -> Result<Sqlite> {
        must_exist(path)?;
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let opened = Connection::open_with_flags(path, flags).and_then(|c| {
            c.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(c)
        });
        let conn = match opened {
            Ok(c) => c,
            Err(first) => Connection::open_with_flags(immutable_uri(path), flags)
                .with_context(|| format!("opening ledger {} to read ({first})", path.display()))?,
        };
        conn.busy_timeout(Duration::from_secs(10))
            .with_context(|| format!("configuring ledger {}", path.display()))?;
        refuse_foreign(&conn, path, false)?;
        let l = Sqlite {
            conn,
            path: path.to_path_buf(),
        };
        schema::pending(schema::SQLITE, l.schema_version()?, &l.origin())
            .map_err(anyhow::Error::msg)?;
        Ok(l)
    }

    fn configure(conn: Connection, path: &Path) -> Result<Sqlite> {
        // Another infergate (a `status` while `qualify` runs) may hold the lock briefly.
        conn.busy_timeout(Duration::from_secs(10))
            .with_context(|| format!("configuring ledger {}", path.display()))?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .with_context(|| format!("configuring ledger {}", path.display()))?;
        let mut l = Sqlite {
            conn,
            path: path.to_path_buf(),
        };
        l.migrate()
            .with_context(|| format!("initialising ledger {}", path.display()))?;
        Ok(l)
    }

    fn origin(&self) -> String {
        self.path.display().to_string()
    }

    /// Apply the migrations the file lacks, all in one immediate transaction
    /// (a second infergate opening it at once waits, then finds them applied).
    fn migrate(&mut self) -> Result<()> {
        let origin = self.origin();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute_batch(SCHEMA_TABLE_SQLITE)?;
        let applied: i64 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM infergate_schema",
            [],
            |r| r.get(0),
        )?;
        for m in schema::pending(schema::SQLITE, applied, &origin).map_err(anyhow::Error::msg)? {
            tx.execute_batch(m.sql)
                .with_context(|| format!("schema version {}", m.version))?;
            tx.execute(
                "INSERT INTO infergate_schema (version, description, applied_at) VALUES (?1, ?2, ?3)",
                params![m.version, m.description, crate::util::now_rfc3339()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<i64> {
        if !has_table(&self.conn, "infergate_schema")? {
            // A ledger from before versions were recorded (read only, so
            // not brought up to date): version 1's objects.
            return Ok(1);
        }
        Ok(self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM infergate_schema",
            [],
            |r| r.get(0),
        )?)
    }

    /// Append `e`, chained after its qualification's last row: the seq is
    /// drawn, the predecessor read and the row written in one immediate
    /// transaction, so two writers never chain after the same row.
    pub fn append(&self, e: &Entry) -> Result<i64> {
        let origin = self.origin();
        let write = || -> rusqlite::Result<i64> {
            let tx = rusqlite::Transaction::new_unchecked(
                &self.conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            // AUTOINCREMENT's next id: past every id ever drawn.
            let seq: i64 = tx.query_row(
                "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'entries'), 0), COALESCE((SELECT MAX(seq) FROM entries), 0)) + 1",
                [],
                |r| r.get(0),
            )?;
            let last: Option<String> = tx
                .query_row(
                    "SELECT hash FROM entries WHERE qualification = ?1 ORDER BY seq DESC LIMIT 1",
                    [&e.qualification],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            let e = Entry { seq, ..e.clone() };
            let s = chain::seal(&e, last);
            tx.execute(
                "INSERT INTO entries (seq, qualification, at, step, runtime, status, detail, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![seq, e.qualification, e.at, e.step, e.runtime, e.status.as_str(), s.detail, s.prev, s.hash],
            )?;
            tx.commit()?;
            Ok(seq)
        };
        write().with_context(|| format!("appending to ledger {origin}"))
    }

    /// Rows kept as they are (a migration: seq, detail text and chain
    /// columns byte for byte), in one transaction.
    pub fn insert_exact(&self, rows: &[Row]) -> Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        for r in rows {
            let e = &r.entry;
            tx.execute(
                "INSERT INTO entries (seq, qualification, at, step, runtime, status, detail, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![e.seq, e.qualification, e.at, e.step, e.runtime, e.status.as_str(), r.detail_text, r.prev, r.hash],
            )
            .with_context(|| format!("ledger {} entry {}", self.path.display(), e.seq))?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The last seq of the rows that predate the chain (0: none). A ledger
    /// read before its chain was added: all its rows.
    pub fn unchained_through(&self) -> Result<i64> {
        let sql = if self.chained()? {
            "SELECT COALESCE(MAX(unchained_through), 0) FROM infergate_chain"
        } else {
            "SELECT COALESCE(MAX(seq), 0) FROM entries"
        };
        self.conn
            .query_row(sql, [], |r| r.get(0))
            .with_context(|| format!("reading ledger {}", self.origin()))
    }

    /// Record that rows up to `seq` predate the chain (a migration from a
    /// ledger whose rows do).
    pub fn set_unchained_through(&self, seq: i64) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO infergate_chain (unchained_through) VALUES (?1)",
                [seq],
            )
            .with_context(|| format!("writing ledger {}", self.origin()))?;
        Ok(())
    }

    /// The schema has the chain's columns (false only for a ledger opened
    /// read-only before its schema was brought up to date).
    fn chained(&self) -> Result<bool> {
        has_table(&self.conn, "infergate_chain")
    }

    /// Rows of one qualification, or all, in order, with the chain's columns.
    pub fn rows(&self, qualification: Option<&str>) -> Result<Vec<Row>> {
        let sql = if self.chained()? {
            "SELECT seq, qualification, at, step, runtime, status, detail, prev, hash FROM entries WHERE ?1 IS NULL OR qualification = ?1 ORDER BY seq"
        } else {
            "SELECT seq, qualification, at, step, runtime, status, detail, NULL, NULL FROM entries WHERE ?1 IS NULL OR qualification = ?1 ORDER BY seq"
        };
        let mut stmt = self.conn.prepare(sql).context("reading ledger")?;
        let rows = stmt
            .query_map([qualification], |r| {
                Ok(RawRow {
                    seq: r.get(0)?,
                    qualification: r.get(1)?,
                    at: r.get(2)?,
                    step: r.get(3)?,
                    runtime: r.get(4)?,
                    status: r.get(5)?,
                    detail: r.get(6)?,
                    prev: r.get(7)?,
                    hash: r.get(8)?,
                })
            })
            .context("reading ledger")?;
        let origin = self.origin();
        rows.map(|r| decode(r.context("reading ledger")?, &origin))
            .collect()
    }

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

    /// For tests: run raw SQL (a rewrite the triggers must refuse).
    pub fn execute_raw(&self, sql: &str) -> Result<usize> {
        Ok(self.conn.execute(sql, [])?)
    }
}

fn must_exist(path: &Path) -> Result<()> {
    if !path.is_file() {
        anyhow::bail!(
            "no ledger at {}: the file does not exist (this command does not create one; check the path)",
            path.display()
        );
    }
    Ok(())
}

/// `file:` URI for `path` with `immutable=1`; `?`, `#` and `%` in the path
/// are escaped so they stay part of the name.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for c in path.display().to_string().chars() {
        match c {
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            '%' => uri.push_str("%25"),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Refuse a database that is not an infergate ledger: one with tables but
/// no `entries` of infergate's columns. An empty database is a new ledger
/// only for a command that creates one (`creating`).
fn refuse_foreign(conn: &Connection, path: &Path, creating: bool) -> Result<()> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .with_context(|| format!("reading ledger {}", path.display()))?;
    let tables = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .with_context(|| format!("reading ledger {}", path.display()))?;
    if tables.is_empty() {
        if creating {
            return Ok(());
        }
        anyhow::bail!(
            "{} is not an infergate ledger: it is an empty database (this command does not create a ledger; check the path)",
            path.display()
        );
    }
    let columns: Vec<String> = if tables.iter().any(|t| t == "entries") {
        let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('entries')")?;
        stmt.query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    const LEDGER_COLUMNS: [&str; 7] = [
        "seq",
        "qualification",
        "at",
        "step",
        "runtime",
        "status",
        "detail",
    ];
    if LEDGER_COLUMNS
        .iter()
        .all(|c| columns.iter().any(|have| have == c))
    {
        return Ok(());
    }
    anyhow::bail!(
        "{} is a SQLite database but not an infergate ledger (its tables: {}): refusing to read or change it; name the ledger's file",
        path.display(),
        tables.join(", ")
    )
}
