//! The shared ledger: a PostgreSQL database a team points every infergate
//! at. The `postgres` client runs its own runtime, which cannot start
//! inside infergate's; so one thread owns the connection and runs each
//! call, and callers wait for its answer (ledger calls are few and small).
//!
//! Total order across machines: each append takes a transaction-scoped
//! advisory lock before it draws its `seq` and reads the hash it chains
//! after, so appends commit in `seq` order, no reader ever sees a later
//! entry without the earlier ones, and no two appends chain after one row.
//! The one-at-a-time lock on a qualification id is a session advisory lock:
//! the server releases it when the holder's connection ends, even by a kill.

use std::sync::Mutex;
use std::sync::mpsc;

use anyhow::{Context, Result, anyhow, bail};

use super::chain;
use super::entry::{Entry, RawRow, Row, decode};
use super::schema::{self, SCHEMA_TABLE_POSTGRES};

/// Advisory-lock keys (one namespace: infergate's).
const APPEND_KEY: i64 = 0x1f6e_7e9a_0000_0001;
const MIGRATE_KEY: i64 = 0x1f6e_7e9a_0000_0002;

type Job = Box<dyn FnOnce(&mut postgres::Client) + Send>;

pub struct Postgres {
    jobs: Mutex<mpsc::Sender<Job>>,
    /// The URL as shown (it never holds a password).
    shown: String,
}

impl Postgres {
    pub fn connect(url: &str) -> Result<Postgres> {
        let config = config(url)?;
        let shown = crate::util::redact(url);
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), postgres::Error>>(1);
        std::thread::Builder::new()
            .name("infergate-ledger".into())
            .spawn(move || match config.connect(postgres::NoTls) {
                Ok(mut client) => {
                    let _ = ready_tx.send(Ok(()));
                    for job in rx {
                        job(&mut client);
                    }
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            })
            .context("starting the ledger's connection thread")?;
        ready_rx
            .recv()
            .map_err(|_| anyhow!("ledger {shown}: the connection thread ended"))?
            .with_context(|| format!("connecting to ledger {shown}"))?;
        let pg = Postgres {
            jobs: Mutex::new(tx),
            shown,
        };
        let origin = pg.shown.clone();
        pg.call(move |c| migrate(c, &origin))
            .with_context(|| format!("initialising ledger {}", pg.shown))?;
        Ok(pg)
    }

    fn sender(&self) -> Result<mpsc::Sender<Job>> {
        Ok(self
            .jobs
            .lock()
            .map_err(|_| anyhow!("ledger lock poisoned"))?
            .clone())
    }

    /// Run `f` on the connection's thread and wait for its result.
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let (rtx, rrx) = mpsc::sync_channel(1);
        self.sender()?
            .send(Box::new(move |c| {
                let _ = rtx.send(f(c));
            }))
            .map_err(|_| anyhow!("ledger {}: the connection thread ended", self.shown))?;
        rrx.recv()
            .map_err(|_| anyhow!("ledger {}: the connection thread ended", self.shown))?
    }

    pub fn schema_version(&self) -> Result<i64> {
        self.call(|c| {
            Ok(c.query_one(
                "SELECT COALESCE(MAX(version), 0) FROM infergate_schema",
                &[],
            )?
            .get(0))
        })
    }

    pub fn append(&self, e: &Entry) -> Result<i64> {
        let e = e.clone();
        let origin = self.shown.clone();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&APPEND_KEY])?;
            let seq: i64 = tx
                .query_one("SELECT nextval(pg_get_serial_sequence('entries', 'seq'))", &[])?
                .get(0);
            let last: Option<String> = tx
                .query_opt(
                    "SELECT hash FROM entries WHERE qualification = $1 ORDER BY seq DESC LIMIT 1",
                    &[&e.qualification],
                )?
                .and_then(|r| r.get(0));
            let e = Entry { seq, ..e };
            let s = chain::seal(&e, last);
            tx.execute(
                "INSERT INTO entries (seq, qualification, at, step, runtime, status, detail, prev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[&seq, &e.qualification, &e.at, &e.step, &e.runtime, &e.status.as_str(), &s.detail, &s.prev, &s.hash],
            )?;
            tx.commit()?;
            Ok(seq)
        })
        .with_context(|| format!("appending to ledger {origin}"))
    }

    /// Rows kept as they are (a migration: seq, detail text and chain
    /// columns byte for byte), in one transaction; the sequence then
    /// continues after the largest.
    pub fn insert_exact(&self, rows: &[Row]) -> Result<()> {
        let rows = rows.to_vec();
        let origin = self.shown.clone();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&APPEND_KEY])?;
            for r in &rows {
                let e = &r.entry;
                tx.execute(
                    "INSERT INTO entries (seq, qualification, at, step, runtime, status, detail, prev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    &[&e.seq, &e.qualification, &e.at, &e.step, &e.runtime, &e.status.as_str(), &r.detail_text, &r.prev, &r.hash],
                )
                .with_context(|| format!("ledger {origin} entry {}", e.seq))?;
            }
            tx.execute(
                "SELECT setval(pg_get_serial_sequence('entries', 'seq'), GREATEST((SELECT MAX(seq) FROM entries), 1))",
                &[],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// The last seq of the rows that predate the chain (0: none).
    pub fn unchained_through(&self) -> Result<i64> {
        self.call(|c| {
            Ok(c.query_one(
                "SELECT COALESCE(MAX(unchained_through), 0)::BIGINT FROM infergate_chain",
                &[],
            )?
            .get(0))
        })
        .context("reading ledger")
    }

    /// Record that rows up to `seq` predate the chain (a migration from a
    /// ledger whose rows do).
    pub fn set_unchained_through(&self, seq: i64) -> Result<()> {
        self.call(move |c| {
            c.execute(
                "INSERT INTO infergate_chain (unchained_through) VALUES ($1)",
                &[&seq],
            )?;
            Ok(())
        })
        .with_context(|| format!("writing ledger {}", self.shown))
    }

    /// Rows of one qualification, or all, in order, with the chain's columns.
    pub fn rows(&self, qualification: Option<&str>) -> Result<Vec<Row>> {
        let q = qualification.map(str::to_string);
        let origin = self.shown.clone();
        let rows: Vec<RawRow> = self
            .call(move |c| {
                let rows = c.query(
                    "SELECT seq, qualification, at, step, runtime, status, detail, prev, hash FROM entries WHERE $1::TEXT IS NULL OR qualification = $1 ORDER BY seq",
                    &[&q],
                )?;
                Ok(rows
                    .iter()
                    .map(|r| RawRow {
                        seq: r.get(0),
                        qualification: r.get(1),
                        at: r.get(2),
                        step: r.get(3),
                        runtime: r.get(4),
                        status: r.get(5),
                        detail: r.get(6),
                        prev: r.get(7),
                        hash: r.get(8),
                    })
                    .collect())
            })
            .context("reading ledger")?;
        rows.into_iter().map(|r| decode(r, &origin)).collect()
    }

    pub fn qualifications(&self) -> Result<Vec<String>> {
        self.call(|c| {
            Ok(c.query(
                "SELECT qualification FROM entries GROUP BY qualification ORDER BY MIN(seq)",
                &[],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
        .context("reading ledger")
    }

    pub fn exists(&self, qualification: &str) -> Result<bool> {
        let q = qualification.to_string();
        self.call(move |c| {
            Ok(c.query_opt(
                "SELECT seq FROM entries WHERE qualification = $1 LIMIT 1",
                &[&q],
            )?
            .is_some())
        })
        .context("reading ledger")
    }

    /// The one-at-a-time lock on a qualification id, held by this
    /// connection until the guard drops (or the process dies).
    pub fn lock(&self, id: &str) -> Result<PgLock> {
        let key = lock_key(id);
        let got: bool = self.call(move |c| {
            Ok(c.query_one("SELECT pg_try_advisory_lock($1)", &[&key])?
                .get(0))
        })?;
        if !got {
            bail!(
                "qualification {id} is in use by another infergate process (a lock in ledger {})",
                self.shown
            );
        }
        Ok(PgLock {
            key,
            jobs: self.sender()?,
        })
    }

    /// The database session holding qualification `id`'s advisory lock, if
    /// any (a single-bigint key is stored as classid = high 32 bits, objid =
    /// low 32 bits, objsubid = 1).
    pub fn lock_holder(&self, id: &str) -> Result<Option<String>> {
        let key = lock_key(id);
        let (hi, lo) = ((key >> 32) & 0xffff_ffff, key & 0xffff_ffff);
        let pid: Option<i32> = self.call(move |c| {
            Ok(c.query_opt(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND classid = $1::bigint::oid AND objid = $2::bigint::oid",
                &[&hi, &lo],
            )?
            .map(|r| r.get(0)))
        })?;
        Ok(pid.map(|p| format!("database session {p} on ledger {}", self.shown)))
    }

    /// For tests: run raw SQL (a rewrite the triggers must refuse).
    pub fn execute_raw(&self, sql: &str) -> Result<u64> {
        let sql = sql.to_string();
        self.call(move |c| Ok(c.execute(sql.as_str(), &[])?))
    }
}

/// Releases the qualification's advisory lock when dropped.
pub struct PgLock {
    key: i64,
    jobs: mpsc::Sender<Job>,
}

impl Drop for PgLock {
    /// Waits for the unlock, so whoever asks next finds the id free.
    fn drop(&mut self) {
        let key = self.key;
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let sent = self.jobs.send(Box::new(move |c| {
            let _ = c.execute("SELECT pg_advisory_unlock($1)", &[&key]);
            let _ = done_tx.send(());
        }));
        if sent.is_ok() {
            let _ = done_rx.recv_timeout(std::time::Duration::from_secs(10));
        }
    }
}

/// A qualification id's advisory-lock key: the first 8 bytes of its sha256.
fn lock_key(id: &str) -> i64 {
    let hex = crate::util::sha256_hex(format!("infergate qualification {id}").as_bytes());
    u64::from_str_radix(&hex[..16], 16).map_or(0, |k| k as i64)
}

/// Bring the schema up to date, serialized across every infergate opening
/// the ledger at once.
fn migrate(c: &mut postgres::Client, origin: &str) -> Result<()> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_KEY])?;
    tx.batch_execute(SCHEMA_TABLE_POSTGRES)?;
    let applied: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM infergate_schema",
            &[],
        )?
        .get(0);
    for m in schema::pending(schema::POSTGRES, applied, origin).map_err(anyhow::Error::msg)? {
        tx.batch_execute(m.sql)
            .with_context(|| format!("schema version {}", m.version))?;
        tx.execute(
            "INSERT INTO infergate_schema (version, description, applied_at) VALUES ($1, $2, $3)",
            &[&m.version, &m.description, &crate::util::now_rfc3339()],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// The connection settings of `url`, with the password from PGPASSWORD or
/// a pgpass file.
fn config(url: &str) -> Result<postgres::Config> {
    let mut config = crate::config::ledger_location::parse_postgres_url(url)?;
    if let Some(p) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(p.as_encoded_bytes());
    } else if let Some(p) = pgpass_password(&config)? {
        config.password(p);
    }
    Ok(config)
}

/// The password a pgpass file (PGPASSFILE, else ~/.pgpass) gives for this
/// host, port, database and user: the first matching line, `*` matching
/// anything, `\:` and `\\` escaped.
fn pgpass_password(config: &postgres::Config) -> Result<Option<String>> {
    let path = match std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        Some(p) => std::path::PathBuf::from(p),
        None => match std::env::var_os("HOME") {
            Some(h) => std::path::PathBuf::from(h).join(".pgpass"),
            None => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    Ok(pgpass_lookup(&text, [&host, &port, &db, &user]))
}

pub fn pgpass_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_pgpass(line);
        let [h, p, d, u, pw] = fields.as_slice() else {
            continue;
        };
        let ok = |f: &String, w: &str| f == "*" || f == w;
        if ok(h, want[0]) && ok(p, want[1]) && ok(d, want[2]) && ok(u, want[3]) {
            return Some(pw.clone());
        }
    }
    None
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.last_mut().unwrap().push(n);
                }
            }
            ':' if out.len() < 5 => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_matches_the_first_line_with_wildcards_and_escapes() {
        let text =
            "# comment\nother:5432:*:u:no\n127.0.0.1:*:ledger:u:p\\:w\\\\d\n*:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, ["127.0.0.1", "5433", "ledger", "u"]).as_deref(),
            Some("p:w\\d")
        );
        assert_eq!(
            pgpass_lookup(text, ["h", "1", "d", "x"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("a:b:c:d\n", ["a", "b", "c", "d"]), None);
    }

    #[test]
    fn a_password_in_the_url_is_refused_without_printing_it() {
        let e = config("postgres://u:hunter2@127.0.0.1:5432/ledger")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("PGPASSWORD") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn lock_keys_differ_by_id() {
        assert_ne!(lock_key("a"), lock_key("b"));
        assert_eq!(lock_key("a"), lock_key("a"));
    }
}
