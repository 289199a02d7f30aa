//! The ledger's two backends under one set of test bodies: an embedded
//! SQLite file, and a PostgreSQL server on loopback owned by the test run
//! (scripts/test.sh starts it with scripts/setup-postgres.sh). Without the
//! server these fail and say how to start one; they never skip.

mod qualify_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use infergate::runtime::ledger::{Ledger, Location, Status};
use serde_json::{Value, json};

use qualify_support::{Env, files_under, steps, stop_everything};

const PG_ENV: &str = "INFERGATE_TEST_POSTGRES";

fn pg_admin() -> String {
    std::env::var(PG_ENV).unwrap_or_else(|_| {
        panic!(
            "{PG_ENV} is not set: these tests need a PostgreSQL server; run scripts/test.sh, or export what scripts/setup-postgres.sh prints"
        )
    })
}

/// `psql` against the test server (a second client: libpq, not ours).
fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            url,
            "-c",
            sql,
        ])
        .output()
        .expect("psql (Debian's postgresql-client)");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A database of its own on the test server, as a ledger location.
fn fresh_pg(name: &str) -> Location {
    static N: AtomicUsize = AtomicUsize::new(0);
    let admin = pg_admin();
    let db = format!(
        "ig_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        name
    );
    psql(&admin, &format!("CREATE DATABASE {db}"));
    let base = admin.rsplit_once('/').expect("a URL with a database").0;
    Location::parse(&format!("{base}/{db}")).unwrap()
}

/// The same body runs against both: a SQLite file and a fresh database.
fn backends(dir: &Path, name: &str) -> Vec<Location> {
    vec![
        Location::Sqlite(dir.join(format!("{name}.sqlite"))),
        fresh_pg(name),
    ]
}

#[test]
fn entries_append_in_order_and_no_row_is_ever_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    for at in backends(dir.path(), "order") {
        let l = Ledger::connect(&at).unwrap();
        assert_eq!(l.schema_version().unwrap(), 2, "{at}");
        let a = l
            .append("q1", "plan", None, Status::Ok, json!({"plan": "p.toml"}))
            .unwrap();
        let b = l.append("q2", "plan", None, Status::Ok, json!({})).unwrap();
        let c = l
            .append(
                "q1",
                "start",
                Some("baseline"),
                Status::Started,
                json!({"n": 1}),
            )
            .unwrap();
        assert!(a < b && b < c, "{at}: {a} {b} {c}");
        let e = l.entries("q1").unwrap();
        assert_eq!(steps(&e), ["plan - ok", "start baseline started"], "{at}");
        assert_eq!(e[0].detail_str("plan"), Some("p.toml"));
        assert_eq!(e[1].detail["n"], 1);
        assert_eq!(l.qualifications().unwrap(), ["q1", "q2"], "{at}");
        assert!(l.exists("q2").unwrap() && !l.exists("q3").unwrap());
        for sql in ["UPDATE entries SET status = 'ok'", "DELETE FROM entries"] {
            let err = l.execute_unchecked(sql).unwrap_err();
            assert!(
                format!("{err:#}").contains("append-only"),
                "{at}: {sql}: {err:#}"
            );
        }
        if at.is_shared() {
            let err = l.execute_unchecked("TRUNCATE entries").unwrap_err();
            assert!(format!("{err:#}").contains("append-only"), "{err:#}");
        }
        drop(l);
        let again = Ledger::connect(&at).unwrap();
        assert_eq!(again.all_entries().unwrap().len(), 3, "{at}: reopened");
        assert_eq!(again.schema_version().unwrap(), 2);
    }
}

#[test]
fn writers_at_once_are_totally_ordered_and_readers_only_see_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    for at in backends(dir.path(), "writers") {
        Ledger::connect(&at).unwrap();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let at = at.clone();
                std::thread::spawn(move || {
                    let l = Ledger::connect(&at).unwrap();
                    for n in 0..20 {
                        l.append(
                            &format!("w{w}"),
                            "step",
                            None,
                            Status::Info,
                            json!({"n": n}),
                        )
                        .unwrap();
                        // One qualification appended to by every writer:
                        // its chain must still be one line.
                        l.append("shared", "step", None, Status::Info, json!({"w": w}))
                            .unwrap();
                    }
                })
            })
            .collect();
        let reader = {
            let at = at.clone();
            std::thread::spawn(move || {
                let l = Ledger::connect(&at).unwrap();
                let mut seen = Vec::new();
                for _ in 0..40 {
                    seen.push(l.all_entries().unwrap());
                    std::thread::sleep(Duration::from_millis(5));
                }
                seen
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        let snapshots = reader.join().unwrap();
        let l = Ledger::connect(&at).unwrap();
        let all = l.all_entries().unwrap();
        assert_eq!(all.len(), 160, "{at}");
        let (_, chains) = l.verify().unwrap();
        assert!(
            chains.is_intact(),
            "{at}: {:?}",
            chains.broken().collect::<Vec<_>>()
        );
        assert_eq!(chains.chains.len(), 5, "{at}");
        assert!(all.windows(2).all(|p| p[0].seq < p[1].seq), "{at}");
        for w in 0..4 {
            let ns: Vec<i64> = all
                .iter()
                .filter(|e| e.qualification == format!("w{w}"))
                .map(|e| e.detail["n"].as_i64().unwrap())
                .collect();
            assert_eq!(ns, (0..20).collect::<Vec<_>>(), "{at}: writer {w}");
        }
        // No reader ever saw an entry before one with a smaller seq.
        for s in &snapshots {
            assert_eq!(
                s.as_slice(),
                &all[..s.len()],
                "{at}: a snapshot that is not a prefix"
            );
        }
    }
}

#[test]
fn a_row_edited_outside_infergate_is_named_by_ledger_verify_in_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    for at in backends(dir.path(), "tampered") {
        let l = Ledger::connect(&at).unwrap();
        for (step, detail) in [
            ("plan", json!({})),
            ("done", json!({"verdict": "not_qualified"})),
            ("decision", json!({"action": "retain_baseline"})),
        ] {
            l.append("q", step, None, Status::Ok, detail).unwrap();
        }
        let seq = l.entries("q").unwrap()[2].seq;
        let shown = at.to_string();
        let verify = || infergate(&["ledger", "verify", "--ledger", &shown]);
        assert!(verify().status.success(), "{at}");
        let edit =
            format!(r#"UPDATE entries SET detail = '{{"action":"promote"}}' WHERE seq = {seq}"#);
        match &at {
            Location::Sqlite(p) => rusqlite::Connection::open(p)
                .unwrap()
                .execute_batch(&format!("DROP TRIGGER entries_no_update; {edit}"))
                .unwrap(),
            Location::Postgres(url) => {
                psql(
                    url,
                    &format!("ALTER TABLE entries DISABLE TRIGGER entries_no_rewrite; {edit}"),
                );
            }
        }
        let o = verify();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!o.status.success(), "{at}: {text}");
        assert!(
            text.contains(&format!(
                "qualification q, seq {seq} (decision): edited: its contents do not match its hash"
            )),
            "{at}: {text}"
        );
    }
}

#[test]
fn a_qualification_id_is_locked_by_one_infergate_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    for at in backends(dir.path(), "locks") {
        let (a, b) = (Ledger::connect(&at).unwrap(), Ledger::connect(&at).unwrap());
        // Different directories: a shared ledger's lock cannot live in one.
        let held = a.lock("q", &dir.path().join("one")).unwrap();
        let other = if at.is_shared() { "two" } else { "one" };
        let err = b.lock("q", &dir.path().join(other)).err().expect("locked");
        assert!(
            err.to_string().contains("in use by another infergate"),
            "{at}: {err}"
        );
        // `status` names the holder without taking the lock.
        let who = b
            .lock_holder("q", &dir.path().join(other))
            .unwrap()
            .expect("held");
        let want = if at.is_shared() {
            "database session ".to_string()
        } else {
            format!("process {} ", std::process::id())
        };
        assert!(who.starts_with(&want), "{at}: {who}");
        assert_eq!(b.lock_holder("q3", &dir.path().join("q3")).unwrap(), None);
        let _q2 = b
            .lock("q2", &dir.path().join("q2"))
            .expect("another id is free");
        drop(held);
        b.lock("q", &dir.path().join(other))
            .expect("released when dropped");
    }
}

#[test]
fn status_reads_a_ledger_on_a_read_only_mount() {
    // A private mount namespace (unshare -m): the read-only tmpfs is seen
    // by this command alone and gone with it, whatever the test does.
    if !unshare_works() {
        eprintln!("skipped: needs root and unshare(1) to mount a read-only filesystem");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("ledger.sqlite");
    let l = Ledger::open(&src).unwrap();
    l.append("q-ro", "plan", None, Status::Ok, json!({"plan": "p.toml"}))
        .unwrap();
    drop(l);
    let mnt = dir.path().join("ro");
    std::fs::create_dir(&mnt).unwrap();
    let script = format!(
        "mount -t tmpfs none {m} && cp {s} {m}/ && mount -o remount,ro {m} && exec {bin} status --ledger {m}/ledger.sqlite --json",
        m = mnt.display(),
        s = src.display(),
        bin = env!("CARGO_BIN_EXE_infergate"),
    );
    let o = Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["id"], "q-ro", "{v}");
}

fn unshare_works() -> bool {
    Command::new("unshare")
        .args(["--mount", "sh", "-c", "mount -t tmpfs none /mnt"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn infergate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .output()
        .expect("infergate")
}

#[test]
fn a_migrated_ledger_equals_its_source_entry_for_entry() {
    let dir = tempfile::tempdir().unwrap();
    let src = Location::Sqlite(dir.path().join("team.sqlite"));
    let l = Ledger::connect(&src).unwrap();
    for (q, step) in [
        ("qa", "plan"),
        ("qb", "plan"),
        ("qa", "run"),
        ("qa", "done"),
    ] {
        l.append(
            q,
            step,
            Some("baseline"),
            Status::Ok,
            json!({"q": q, "s": step}),
        )
        .unwrap();
    }
    let source = l.all_entries().unwrap();
    let to = fresh_pg("migrated");
    let (from_s, to_s) = (src.to_string(), to.to_string());
    let out = infergate(&["ledger", "migrate", &from_s, &to_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("4 entries copied"), "{text}");
    assert!(
        text.contains("hash chain carried and verified in the copy: 2 qualification(s)"),
        "{text}"
    );
    let dest = Ledger::connect(&to).unwrap();
    assert_eq!(
        dest.rows(None).unwrap(),
        l.rows(None).unwrap(),
        "each row's detail text, prev and hash byte for byte"
    );
    assert_eq!(
        dest.all_entries().unwrap(),
        source,
        "entry for entry, ids kept"
    );
    // libpq's view of the same rows: the ids are the source's.
    let Location::Postgres(url) = &to else {
        panic!()
    };
    assert_eq!(
        psql(
            url,
            "SELECT string_agg(seq::text, ',' ORDER BY seq) FROM entries"
        ),
        source
            .iter()
            .map(|e| e.seq.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    // Run again: nothing copied twice. Appending continues after the ids.
    let again = infergate(&["ledger", "migrate", &from_s, &to_s]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 entries copied"));
    let next = dest
        .append("qc", "plan", None, Status::Ok, json!({}))
        .unwrap();
    assert!(next > source.last().unwrap().seq);
    // A destination holding entries the source lacks is refused.
    let refused = infergate(&["ledger", "migrate", &from_s, &to_s]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("refusing to merge"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn two_qualifications_share_one_ledger_and_a_killed_one_resumes() {
    let env = Env::new();
    env.suite(6, 12);
    let plan = env.plan(
        "engine_profile = \"candidate\"",
        "schedule = \"alternating\"",
    );
    let at = fresh_pg("shared");
    let url = at.to_string();
    let ledger = Ledger::connect(&at).unwrap();
    struct Cleanup<'a>(&'a Ledger);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            stop_everything(self.0);
        }
    }
    let _cleanup = Cleanup(&ledger);
    let qualify = |id: &str| {
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .arg("qualify")
            .arg(&plan)
            .args([
                "--id",
                id,
                "--ledger",
                &url,
                "--then-stop",
                "--quiet",
                "--out",
            ])
            .arg(&env.out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("infergate qualify")
    };
    let a = qualify("qa");
    let mut b = qualify("qb");
    // Kill qb once its candidate pass has begun (its runtimes left running).
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let e = ledger.entries("qb").unwrap();
        if e.iter()
            .any(|e| e.step == "run" && e.runtime.as_deref() == Some("candidate"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "qb never reached its candidate pass: {:?}",
            steps(&e)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    b.kill().unwrap();
    b.wait().unwrap();
    let killed_at = ledger.entries("qb").unwrap().len();
    // While qa runs, its lock is in the database: a second qa is refused
    // (unless qa has finished by then: then there is nothing to do).
    let second = qualify("qa").wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    if !said.contains("in use by another infergate process") {
        assert!(
            ledger
                .entries("qa")
                .unwrap()
                .iter()
                .any(|e| e.step == "done"),
            "a second qa while the first ran: {said}"
        );
    }
    let a_done = a.wait_with_output().unwrap();
    assert!(
        a_done.status.code().is_some_and(|c| c <= 1),
        "qa: {}",
        String::from_utf8_lossy(&a_done.stderr)
    );
    let resumed = qualify("qb").wait_with_output().unwrap();
    assert!(
        resumed.status.code().is_some_and(|c| c <= 1),
        "qb resumed: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );

    let all = ledger.all_entries().unwrap();
    assert!(
        all.windows(2).all(|p| p[0].seq < p[1].seq),
        "one total order"
    );
    for q in ["qa", "qb"] {
        let e: Vec<_> = all
            .iter()
            .filter(|e| e.qualification == q)
            .cloned()
            .collect();
        let s = steps(&e);
        assert_eq!(
            s.iter().filter(|x| *x == "plan - ok").count(),
            1,
            "{q}: {s:#?}"
        );
        assert_eq!(
            s.iter().filter(|x| x.starts_with("done ")).count(),
            1,
            "{q}: {s:#?}"
        );
        let runs_ok = s
            .iter()
            .filter(|x| x.starts_with("run ") && x.ends_with(" ok"))
            .count();
        assert_eq!(runs_ok, 2, "{q}: each pass finished once: {s:#?}");
    }
    let qb = ledger.entries("qb").unwrap();
    assert!(qb.len() > killed_at);
    assert!(
        steps(&qb).iter().any(|x| x == "resume - info"),
        "{:#?}",
        steps(&qb)
    );
    // `status` answers for both from the ledger alone.
    let out = infergate(&["status", "--ledger", &url, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v:#}");
    for r in rows {
        assert!(r["verdict"].is_string(), "{r:#}");
        assert!(r["serving"].is_null(), "--then-stop retired it: {r:#}");
        assert!(r["leftovers"].as_array().unwrap().is_empty(), "{r:#}");
    }
    // The ledger's URL is recorded beside each qualification; its password never.
    let pgpass = std::fs::read_to_string(std::env::var("PGPASSFILE").unwrap()).unwrap();
    let password = pgpass.trim().rsplit(':').next().unwrap();
    let mut files = Vec::new();
    files_under(env.dir.path(), &mut files);
    let recorded: Vec<_> = files
        .iter()
        .filter(|f| f.ends_with("qualification.json"))
        .collect();
    assert_eq!(recorded.len(), 2);
    for f in recorded {
        // `decide` finds the shared ledger from here.
        let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        assert_eq!(v["ledger"], url.as_str(), "{}", f.display());
    }
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(
            !bytes
                .windows(password.len())
                .any(|w| w == password.as_bytes()),
            "the ledger password in {}",
            f.display()
        );
    }
    for out in [&a_done, &resumed] {
        assert!(!String::from_utf8_lossy(&out.stderr).contains(password));
        assert!(!String::from_utf8_lossy(&out.stdout).contains(password));
    }
}

/// The history of builds reads the same lineage from either backend: the
/// chain follows the promotion, and the watchers' lock holds in both.
#[test]
fn a_history_reads_alike_from_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let image = |b: char| format!("127.0.0.1:5000/e@sha256:{}", b.to_string().repeat(64));
    for location in backends(dir.path(), "history") {
        let l = Ledger::connect(&location).unwrap();
        for (q, from, to, log_ratio, decision) in [
            ("h1", 'a', 'b', 0.02, Some("promote")),
            ("h2", 'b', 'c', 0.01, None),
        ] {
            l.append(q, "plan", None, Status::Ok, json!({})).unwrap();
            let step = json!({"cell": "c", "metric": "ttft_p50_ms", "direction": "lower_is_better",
                "baseline": 100.0, "candidate": 100.0, "log_ratio": log_ratio,
                "standard_error": 0.01, "df": 30, "outcome": "pass"});
            let lineage = json!({"schema": "infergate-lineage/1", "baseline_image": image(from),
                "candidate_image": image(to), "steps": [step]});
            l.append(q, "compare", None, Status::Ok, json!({"lineage": lineage}))
                .unwrap();
            l.append(q, "done", None, Status::Ok, json!({"verdict": "qualified"}))
                .unwrap();
            if let Some(action) = decision {
                l.append(q, "decision", None, Status::Ok, json!({"action": action}))
                    .unwrap();
            }
        }
        let h = infergate::history::read(&l, &infergate::history::Filter::default()).unwrap();
        let c = h.series[0].chain.as_ref().expect("a chain");
        assert_eq!(c.chain, ["h1", "h2"], "{location}");
        assert!((c.cumulative.log_ratio - 0.03).abs() < 1e-12, "{location}");
        assert_eq!(h.builds[0].decision, "promote", "{location}");
    }
}
