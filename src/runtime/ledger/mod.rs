//! The append-only ledger: every lifecycle step of every qualification (plan,
//! preflight, start, run, stop, compare, report, decision, restore, readmit,
//! serving, rollback, done) is one row, so an interrupted qualification or
//! promotion can be inspected and resumed, and "what serves, on what
//! decision" is answered from the rows alone.
//!
//! Two backends behind one interface: an embedded SQLite file (the
//! default, one user's) and a PostgreSQL database (`postgres://…`, a team's,
//! shared by every CI runner and laptop). Rows are never updated or
//! deleted: triggers refuse it in both, so a bug here cannot rewrite
//! history; and each row is hash-chained to the one before it (`chain`),
//! so a rewrite by anyone else (the triggers dropped, the file edited) is
//! named when the rows are read. The schema is versioned; opening a ledger
//! applies what it lacks.

pub mod chain;
mod entry;
mod migrate;
mod pg;
mod schema;
mod sqlite;
pub mod verify;

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

pub use chain::{Break, Chain, Head, LedgerCheck};
pub use entry::{Entry, Row, Status};
pub use migrate::{Migrated, migrate};

/// The step of the rows that record a report written (path, sha256, by whom).
pub const REPORT_STEP: &str = "report";

/// The sha256 of the last report recorded among `entries`, and the row's
/// path; None when no row carries a digest.
pub fn latest_report(entries: &[Entry]) -> Option<(&str, Option<&str>)> {
    entries
        .iter()
        .rev()
        .filter(|e| e.step == REPORT_STEP && e.status == Status::Ok)
        .find_map(|e| Some((e.detail_str("sha256")?, e.detail_str("path"))))
}

pub use crate::config::ledger_location::{LEDGER_ENV, Location};

enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(pg::Postgres),
}

pub struct Ledger {
    backend: Backend,
    location: Location,
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("location", &self.location.to_string())
            .finish()
    }
}

/// The one-at-a-time lock on a qualification id: a file lock beside the
/// qualification for a SQLite ledger, a database lock for a shared one.
/// Released when dropped, or by the kernel or the server if we die.
pub enum QualificationLock {
    File(FileLock),
    Database(pg::PgLock),
}

/// An `flock` on a qualification's `.lock` file, released by `LOCK_UN` when
/// dropped.
///
/// Closing the descriptor alone is not enough: an flock belongs to the open
/// file description, and a process forked by another thread (any `Command`
/// spawn) holds a copy of every descriptor until it execs — `O_CLOEXEC`
/// closes the copy only at exec. A lock dropped in that window stayed held
/// by the child's copy, and a second `lock` a moment later failed with "in
/// use by another infergate process" (the flaky
/// `a_qualification_id_is_locked_by_one_infergate_at_a_time`). `LOCK_UN`
/// releases the lock on the description itself, whoever else holds it.
#[derive(Debug)]
pub struct FileLock {
    file: std::fs::File,
}

impl FileLock {
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; no memory is involved.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

impl Ledger {
    /// Open (creating if needed) the SQLite ledger at `path`.
    pub fn open(path: &Path) -> Result<Ledger> {
        Ledger::connect(&Location::Sqlite(path.to_path_buf()))
    }

    /// Open the ledger at `location`, its schema brought up to date.
    pub fn connect(location: &Location) -> Result<Ledger> {
        Ledger::with_sqlite(location, sqlite::Sqlite::open)
    }

    /// [`Ledger::connect`] for commands that act on what a ledger holds
    /// (`decide`, `stop`): a SQLite ledger that does not exist is an error,
    /// never created.
    pub fn connect_existing(location: &Location) -> Result<Ledger> {
        Ledger::with_sqlite(location, sqlite::Sqlite::open_existing)
    }

    /// [`Ledger::connect_existing`] for commands that only read (`status`,
    /// `ledger migrate`'s source): nothing is written, not even the schema,
    /// so a ledger on a read-only mount can be read.
    pub fn connect_read_only(location: &Location) -> Result<Ledger> {
        Ledger::with_sqlite(location, sqlite::Sqlite::open_read_only)
    }

    /// The ledger at `location`, a SQLite file opened by `open`.
    fn with_sqlite(
        location: &Location,
        open: fn(&Path) -> Result<sqlite::Sqlite>,
    ) -> Result<Ledger> {
        let backend = match location {
            Location::Sqlite(p) => Backend::Sqlite(open(p)?),
            Location::Postgres(u) => Backend::Postgres(pg::Postgres::connect(u)?),
        };
        Ok(Ledger {
            backend,
            location: location.clone(),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The schema version the ledger is at.
    pub fn schema_version(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(b) => b.schema_version(),
            Backend::Postgres(b) => b.schema_version(),
        }
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
        let e = Entry {
            seq: 0,
            qualification: qualification.to_string(),
            at: crate::util::now_rfc3339(),
            step: step.to_string(),
            runtime: runtime.map(str::to_string),
            status,
            detail,
        };
        match &self.backend {
            Backend::Sqlite(b) => b.append(&e),
            Backend::Postgres(b) => b.append(&e),
        }
    }

    /// Every entry of one qualification, in order.
    pub fn entries(&self, qualification: &str) -> Result<Vec<Entry>> {
        Ok(entries_of(self.rows(Some(qualification))?))
    }

    /// Every entry of every qualification, in order.
    pub fn all_entries(&self) -> Result<Vec<Entry>> {
        Ok(entries_of(self.rows(None)?))
    }

    /// The rows of one qualification, or all, in order, as stored (the
    /// chain's columns with them).
    pub fn rows(&self, qualification: Option<&str>) -> Result<Vec<Row>> {
        match &self.backend {
            Backend::Sqlite(b) => b.rows(qualification),
            Backend::Postgres(b) => b.rows(qualification),
        }
    }

    /// Every entry of one qualification, and its chain checked over
    /// exactly those rows.
    pub fn checked_entries(&self, qualification: &str) -> Result<(Vec<Entry>, Chain)> {
        let rows = self.rows(Some(qualification))?;
        let chain = chain::verify(&rows, self.unchained_through()?);
        Ok((entries_of(rows), chain))
    }

    /// Every qualification's chain, over the whole ledger read once.
    pub fn verify(&self) -> Result<(Vec<Row>, LedgerCheck)> {
        let rows = self.rows(None)?;
        let check = chain::verify_all(&rows, self.unchained_through()?);
        Ok((rows, check))
    }

    /// The last seq of the rows that predate the chain (0: none).
    pub fn unchained_through(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(b) => b.unchained_through(),
            Backend::Postgres(b) => b.unchained_through(),
        }
    }

    /// Qualification ids, oldest first.
    pub fn qualifications(&self) -> Result<Vec<String>> {
        match &self.backend {
            Backend::Sqlite(b) => b.qualifications(),
            Backend::Postgres(b) => b.qualifications(),
        }
    }

    pub fn exists(&self, qualification: &str) -> Result<bool> {
        match &self.backend {
            Backend::Sqlite(b) => b.exists(qualification),
            Backend::Postgres(b) => b.exists(qualification),
        }
    }

    /// Take the one-at-a-time lock on qualification `id` (whose directory
    /// is `out_dir`), or say who holds it.
    pub fn lock(&self, id: &str, out_dir: &Path) -> Result<QualificationLock> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(QualificationLock::File(file_lock(out_dir, id)?)),
            Backend::Postgres(b) => Ok(QualificationLock::Database(b.lock(id)?)),
        }
    }

    /// Record the report at `path` as written for `qualification` by `by`
    /// (qualify, decide, --then-stop): its sha256, read back from the file,
    /// so `decide` can refuse a report whose bytes are not the last ones
    /// infergate wrote. Returns the digest.
    pub fn record_report(&self, qualification: &str, path: &Path, by: &str) -> Result<String> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let sha256 = crate::report::digest::sha256_hex(&bytes);
        self.append(
            qualification,
            REPORT_STEP,
            None,
            Status::Ok,
            serde_json::json!({"path": path, "sha256": sha256, "by": by}),
        )?;
        Ok(sha256)
    }

    /// Who holds qualification `id`'s lock now, if anyone: a qualify or
    /// decide under way. Read without taking the lock, so asking never
    /// makes a starting infergate fail.
    pub fn lock_holder(&self, id: &str, out_dir: &Path) -> Result<Option<String>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(file_lock_holder(&out_dir.join(".lock"))),
            Backend::Postgres(b) => b.lock_holder(id),
        }
    }

    /// Raw SQL, for tests of the append-only triggers.
    #[doc(hidden)]
    pub fn execute_unchecked(&self, sql: &str) -> Result<u64> {
        match &self.backend {
            Backend::Sqlite(b) => b.execute_raw(sql).map(|n| n as u64),
            Backend::Postgres(b) => b.execute_raw(sql),
        }
    }
}

/// One infergate at a time per qualification: a second `qualify --id` or a
/// `decide` while one runs would start or stop runtimes under its feet.
fn file_lock(out_dir: &Path, id: &str) -> Result<FileLock> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let path = out_dir.join(".lock");
    // std opens with O_CLOEXEC: no runtime or engine infergate starts keeps
    // the descriptor (and so the lock) past its exec.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        bail!(
            "qualification {id} is in use by another infergate process (lock {})",
            path.display()
        );
    }
    Ok(FileLock { file: f })
}

/// The process holding an flock on `path`, from `/proc/locks` (Linux): its
/// id and command line. None when the file is absent or unlocked.
fn file_lock_holder(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = flock_holder_in(&locks, meta.dev(), meta.ino())?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .filter(|a| !a.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    Some(if cmdline.is_empty() {
        format!("process {pid}")
    } else {
        format!("process {pid} ({})", crate::util::redact(&cmdline))
    })
}

/// The pid of the FLOCK on (dev, ino) among `/proc/locks` lines
/// (`1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`; the device's major
/// and minor in hex). Lines marked `->` are waiters, not holders.
fn flock_holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&"FLOCK") {
            return None;
        }
        let mut id = f.get(5)?.split(':');
        let (ma, mi, i) = (id.next()?, id.next()?, id.next()?);
        let same = u32::from_str_radix(ma, 16).ok()? == major
            && u32::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        same.then(|| f.get(4)?.parse().ok()).flatten()
    })
}

fn entries_of(rows: Vec<Row>) -> Vec<Entry> {
    rows.into_iter().map(|r| r.entry).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_dropped_file_lock_is_free_while_a_forked_child_still_holds_its_descriptor() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let held = file_lock(dir.path(), "q").unwrap();
        assert!(file_lock(dir.path(), "q").is_err(), "locked");
        // What a child forked by another thread holds between fork and exec:
        // a second descriptor of the same open file description.
        // SAFETY: dup and close of a descriptor we own.
        let copy = unsafe { libc::dup(held.file().as_raw_fd()) };
        assert!(copy >= 0);
        drop(held);
        let again = file_lock(dir.path(), "q");
        // SAFETY: `copy` is ours and closed once.
        unsafe { libc::close(copy) };
        again.expect("released when dropped, though a copy of its descriptor is still open");
    }

    #[test]
    fn another_programs_database_is_refused_untouched_and_a_missing_one_not_made() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other.sqlite");
        let conn = rusqlite::Connection::open(&other).unwrap();
        conn.execute_batch("CREATE TABLE users (id INTEGER, name TEXT)")
            .unwrap();
        drop(conn);
        let before = std::fs::read(&other).unwrap();
        let at = Location::Sqlite(other.clone());
        for (how, r) in [
            ("connect", Ledger::connect(&at)),
            ("existing", Ledger::connect_existing(&at)),
            ("read only", Ledger::connect_read_only(&at)),
        ] {
            let e = format!("{:#}", r.unwrap_err());
            assert!(e.contains("not an infergate ledger"), "{how}: {e}");
            assert!(e.contains("users"), "{how}: {e}");
        }
        assert_eq!(std::fs::read(&other).unwrap(), before, "untouched");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["other.sqlite"], "no journal or WAL file made");

        let missing = Location::Sqlite(dir.path().join("missing.sqlite"));
        for r in [
            Ledger::connect_existing(&missing),
            Ledger::connect_read_only(&missing),
        ] {
            let e = format!("{:#}", r.unwrap_err());
            assert!(e.contains("does not exist"), "{e}");
        }
        assert!(!dir.path().join("missing.sqlite").exists());
    }

    #[test]
    fn a_held_lock_names_its_process_and_a_free_one_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("l.sqlite")).unwrap();
        assert_eq!(
            l.lock_holder("q", dir.path()).unwrap(),
            None,
            "no lock file"
        );
        let held = l.lock("q", dir.path()).unwrap();
        let who = l.lock_holder("q", dir.path()).unwrap().expect("held");
        assert!(
            who.starts_with(&format!("process {} (", std::process::id())),
            "{who}"
        );
        drop(held);
        assert_eq!(l.lock_holder("q", dir.path()).unwrap(), None, "released");
    }

    #[test]
    fn proc_locks_lines_are_matched_by_device_and_inode() {
        let dev = libc::makedev(0xfd, 0x01);
        let locks = "1: POSIX  ADVISORY  WRITE 10 fd:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 20 fd:01:78 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 30 fd:01:77 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 40 fd:01:77 0 EOF\n";
        assert_eq!(flock_holder_in(locks, dev, 77), Some(40));
        assert_eq!(flock_holder_in(locks, dev, 78), Some(20));
        assert_eq!(flock_holder_in(locks, dev, 79), None);
        assert_eq!(flock_holder_in(locks, libc::makedev(8, 1), 77), None);
    }

    #[test]
    fn appends_in_order_and_refuses_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/ledger.sqlite");
        let l = Ledger::open(&path).unwrap();
        assert_eq!(l.schema_version().unwrap(), 2);
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
            .execute_unchecked("UPDATE entries SET status = 'ok'")
            .unwrap_err();
        assert!(upd.to_string().contains("append-only"), "{upd}");
        let del = l.execute_unchecked("DELETE FROM entries").unwrap_err();
        assert!(del.to_string().contains("append-only"), "{del}");
        // Nor is the record of where the chain begins rewritten.
        for sql in [
            "UPDATE infergate_chain SET unchained_through = 99",
            "DELETE FROM infergate_chain",
        ] {
            let e = l.execute_unchecked(sql).unwrap_err();
            assert!(e.to_string().contains("append-only"), "{sql}: {e}");
        }
        drop(l);
        // Reopening keeps everything.
        assert_eq!(Ledger::open(&path).unwrap().entries("q1").unwrap().len(), 2);
    }

    #[test]
    fn a_ledger_from_before_schema_versions_is_taken_as_version_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(schema::SQLITE[0].sql).unwrap();
        conn.execute(
            "INSERT INTO entries (qualification, at, step, runtime, status, detail) VALUES ('q', 't', 'plan', NULL, 'ok', '{}')",
            [],
        )
        .unwrap();
        drop(conn);
        let l = Ledger::open(&path).unwrap();
        // Version 1 taken as applied, then the chain added: the old row
        // named as before it, the next one chained.
        assert_eq!(l.schema_version().unwrap(), 2);
        assert_eq!(l.entries("q").unwrap().len(), 1);
        l.append("q", "done", None, Status::Ok, json!({})).unwrap();
        let (_, chain) = l.checked_entries("q").unwrap();
        assert!(chain.intact, "{chain:?}");
        assert_eq!(chain.unchained, [1]);
        assert_eq!(chain.head.map(|h| h.seq), Some(2));
    }
}
