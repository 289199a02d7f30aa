//! The ledger's hash chain against a hand-edited SQLite file: a rewritten
//! decision, a rewritten verdict and deleted rows are each named by
//! `infergate ledger verify` and `infergate status`; a ledger made before
//! the chain is migrated once and its old rows named as not covered; `ledger
//! migrate` carries the chain and refuses a broken source. No engine, no
//! server.

use std::path::Path;
use std::process::{Command, Output};

use infergate::runtime::ledger::{Ledger, Location, Status};
use serde_json::json;

fn infergate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .env_remove("INFERGATE_LEDGER")
        .output()
        .expect("infergate")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `ledger verify` on `file`: (exit success, output).
fn verify(file: &Path, extra: &[&str]) -> (bool, String) {
    let f = file.display().to_string();
    let mut args = vec!["ledger", "verify", "--ledger", &f];
    args.extend_from_slice(extra);
    let o = infergate(&args);
    (o.status.success(), text(&o))
}

fn status(file: &Path, id: &str) -> String {
    let f = file.display().to_string();
    let o = infergate(&["status", id, "--ledger", &f]);
    assert!(o.status.success(), "{}", text(&o));
    text(&o)
}

/// A finished, decided qualification `q` (seqs 1, 2, 4, 5, 6) with another,
/// `r`, interleaved (seq 3).
fn decided(file: &Path) {
    let l = Ledger::open(file).unwrap();
    let rows = [
        ("q", "plan", json!({"plan": "p.toml"})),
        ("q", "done", json!({"verdict": "not_qualified"})),
        ("r", "plan", json!({"plan": "other.toml"})),
        (
            "q",
            "report",
            json!({"path": "report.json", "sha256": "ab"}),
        ),
        (
            "q",
            "decision",
            json!({"action": "retain_baseline", "who": "ana"}),
        ),
        ("q", "serving", json!({"note": "baseline kept"})),
    ];
    for (q, step, detail) in rows {
        l.append(q, step, None, Status::Ok, detail).unwrap();
    }
}

/// Edit the file as someone with write access would: the append-only
/// triggers dropped first.
fn tamper(file: &Path, sql: &str) {
    let c = rusqlite::Connection::open(file).unwrap();
    c.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS entries_no_update; DROP TRIGGER IF EXISTS entries_no_delete; {sql}"
    ))
    .unwrap();
}

#[test]
fn an_untouched_ledger_verifies_and_status_shows_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.sqlite");
    decided(&file);
    let (ok, out) = verify(&file, &[]);
    assert!(ok, "{out}");
    assert!(out.contains("6 rows, 2 qualifications"), "{out}");
    assert!(out.contains("  q: intact, 5 rows, head q:6:"), "{out}");
    assert!(out.contains("\nverified: "), "{out}");
    let s = status(&file, "q");
    assert!(s.contains("  chain:     intact, head seq 6 sha256 "), "{s}");
    // The rows `status` prints are unchanged by the chain.
    assert!(
        s.contains(" decision       -         ok      action=retain_baseline"),
        "{s}"
    );
}

#[test]
fn an_edited_decision_row_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.sqlite");
    decided(&file);
    tamper(
        &file,
        r#"UPDATE entries SET detail = '{"action":"promote","who":"ana"}' WHERE seq = 5;"#,
    );
    let (ok, out) = verify(&file, &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "broken: qualification q, seq 5 (decision): edited: its contents do not match its hash"
        ),
        "{out}"
    );
    assert!(out.contains("  r: intact"), "{out}");
    assert!(out.contains("NOT VERIFIED: 1 broken row(s)"), "{out}");
    let s = status(&file, "q");
    assert!(
        s.contains("  chain:     BROKEN: 1 row(s) do not verify, the first: qualification q, seq 5 (decision): edited"),
        "{s}"
    );
}

#[test]
fn an_edited_done_row_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.sqlite");
    decided(&file);
    tamper(
        &file,
        r#"UPDATE entries SET detail = '{"verdict":"qualified"}' WHERE seq = 2;"#,
    );
    let (ok, out) = verify(&file, &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("qualification q, seq 2 (done): edited"),
        "{out}"
    );
    let s = status(&file, "q");
    assert!(s.contains("state:     qualified"), "the edit is read: {s}");
    assert!(
        s.contains("the first: qualification q, seq 2 (done): edited"),
        "{s}"
    );
    let json = status_json(&file);
    assert!(json.contains("\"intact\": false"), "{json}");
}

fn status_json(file: &Path) -> String {
    let f = file.display().to_string();
    text(&infergate(&["status", "q", "--json", "--ledger", &f]))
}

#[test]
fn deleted_rows_are_named_at_the_row_that_followed_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.sqlite");
    decided(&file);
    tamper(&file, "DELETE FROM entries WHERE seq IN (4, 5);");
    let (ok, out) = verify(&file, &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("qualification q, seq 6 (serving): deleted: the row it follows is missing: deleted between seq 2 and seq 6"),
        "{out}"
    );
    let s = status(&file, "q");
    assert!(
        s.contains(
            "BROKEN: 1 row(s) do not verify, the first: qualification q, seq 6 (serving): deleted"
        ),
        "{s}"
    );
}

#[test]
fn an_exported_head_notices_a_whole_chain_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.sqlite");
    decided(&file);
    let l = Ledger::open(&file).unwrap();
    let head = l.checked_entries("q").unwrap().1.head.unwrap();
    let exported = format!("q:{}:{}", head.seq, head.hash);
    assert!(verify(&file, &["--head", &exported]).0);
    // The last row's detail changed and its hash recomputed, as someone
    // who knows the format would: the chain holds, the head does not.
    let rows = l.rows(Some("q")).unwrap();
    let last = rows.last().unwrap();
    let mut e = last.entry.clone();
    e.detail = json!({"note": "candidate promoted"});
    let s = infergate::runtime::ledger::chain::seal(&e, last.prev.clone());
    tamper(
        &file,
        &format!(
            "UPDATE entries SET detail = '{}', hash = '{}' WHERE seq = {};",
            s.detail, s.hash, e.seq
        ),
    );
    let (ok, out) = verify(&file, &["--head", &exported]);
    assert!(!ok, "{out}");
    assert!(out.contains("q: intact"), "{out}");
    assert!(
        out.contains(&format!(
            "head {exported}: DIFFERS: qualification q, seq 6: its hash is"
        )),
        "{out}"
    );
}

/// A ledger as infergate made it before the chain: schema version 1.
fn pre_chain(file: &Path) {
    let c = rusqlite::Connection::open(file).unwrap();
    c.execute_batch(
        "CREATE TABLE infergate_schema (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL);
         INSERT INTO infergate_schema VALUES (1, 'entries', '2026-01-01T00:00:00Z');
         CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, qualification TEXT NOT NULL, at TEXT NOT NULL, step TEXT NOT NULL, runtime TEXT, status TEXT NOT NULL, detail TEXT NOT NULL);
         INSERT INTO entries (qualification, at, step, runtime, status, detail) VALUES
           ('old', '2026-01-01T00:00:01Z', 'plan', NULL, 'ok', '{}'),
           ('old', '2026-01-01T00:00:02Z', 'done', NULL, 'ok', '{\"verdict\":\"qualified\"}'),
           ('q', '2026-01-01T00:00:03Z', 'plan', NULL, 'ok', '{}');",
    )
    .unwrap();
}

#[test]
fn a_ledger_from_before_the_chain_is_migrated_once_and_its_old_rows_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.sqlite");
    pre_chain(&file);
    // Read only (not migrated): every row is from before the chain.
    let (ok, out) = verify(&file, &[]);
    assert!(ok, "{out}");
    assert!(
        out.contains("seq 1–3: written before the ledger had a hash chain, not covered by it"),
        "{out}"
    );
    let l = Ledger::open(&file).unwrap();
    assert_eq!(l.schema_version().unwrap(), 2);
    l.append(
        "q",
        "done",
        None,
        Status::Ok,
        json!({"verdict": "qualified"}),
    )
    .unwrap();
    drop(l);
    let l = Ledger::open(&file).unwrap();
    assert_eq!(l.unchained_through().unwrap(), 3, "recorded once");
    drop(l);
    let (ok, out) = verify(&file, &[]);
    assert!(ok, "{out}");
    assert!(out.contains("  q: intact, 2 rows, head q:4:"), "{out}");
    assert!(out.contains("seq 1–3: written before"), "{out}");
    assert!(status(&file, "q").contains("; seq 3: written before the chain, not covered"));
    // A hash removed after the chain began is not an old row.
    tamper(&file, "UPDATE entries SET hash = NULL WHERE seq = 4;");
    let (ok, out) = verify(&file, &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("qualification q, seq 4 (done): no hash"),
        "{out}"
    );
}

#[test]
fn migrate_carries_the_chain_and_refuses_a_broken_source() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("a.sqlite"), dir.path().join("b.sqlite"));
    pre_chain(&src);
    Ledger::open(&src)
        .unwrap()
        .append(
            "q",
            "done",
            None,
            Status::Ok,
            json!({"verdict": "qualified"}),
        )
        .unwrap();
    let (a, b) = (src.display().to_string(), dst.display().to_string());
    let o = infergate(&["ledger", "migrate", &a, &b]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("hash chain carried and verified in the copy: 2 qualification(s), every chained row intact; seq 1–3: written before the ledger had a chain, not covered"),
        "{}",
        text(&o)
    );
    let rows = |f: &Path| {
        Ledger::connect(&Location::Sqlite(f.into()))
            .unwrap()
            .rows(None)
            .unwrap()
    };
    assert_eq!(rows(&src), rows(&dst), "prev and hash byte for byte");
    let (ok, out) = verify(&dst, &[]);
    assert!(ok && out.contains("seq 1–3: written before"), "{out}");
    // A broken source is not copied.
    tamper(
        &src,
        r#"UPDATE entries SET detail = '{"verdict":"not_qualified"}' WHERE seq = 4;"#,
    );
    let c = dir.path().join("c.sqlite").display().to_string();
    let o = infergate(&["ledger", "migrate", &a, &c]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains(
            "does not verify (1 broken row(s); the first: qualification q, seq 4 (done): edited"
        ),
        "{}",
        text(&o)
    );
}

/// A qualification directory real enough for `decide` to reach the ledger
/// `file` (the plan copy and the sidecar file beside the report).
fn qualification_dir(d: &Path, file: &Path) -> std::path::PathBuf {
    use infergate::runtime::state;
    let q = d.join("q");
    std::fs::create_dir(&q).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        root.join("tests/data/runtime-profile-comparison.example.json"),
        q.join("report.json"),
    )
    .unwrap();
    let plans = root.join("plans");
    let plan = infergate::config::plan::Plan::load(&plans.join("reference.toml")).unwrap();
    std::fs::write(q.join(state::PLAN_COPY), &plan.text).unwrap();
    let qf = state::QualificationFile {
        schema: state::QUALIFICATION_SCHEMA.into(),
        id: "q".into(),
        plan: plan.path.clone(),
        plan_dir: plans,
        plan_sha256: plan.sha256.clone(),
        ledger: Location::Sqlite(file.to_path_buf()),
        default_window: None,
    };
    std::fs::write(
        q.join(state::QUALIFICATION_FILE),
        serde_json::to_vec(&qf).unwrap(),
    )
    .unwrap();
    q.join("report.json")
}

#[test]
fn decide_refuses_to_act_on_a_rewritten_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.sqlite");
    decided(&file);
    let report = qualification_dir(dir.path(), &file).display().to_string();
    let decide = || {
        infergate(&[
            "decide",
            &report,
            "--promote",
            "--force",
            "--note",
            "x",
            "--who",
            "eve",
        ])
    };
    // Untouched, it gets past the chain (and stops at the report's digest).
    let o = decide();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("is not the report infergate last wrote"),
        "{}",
        text(&o)
    );
    tamper(
        &file,
        r#"UPDATE entries SET detail = '{"verdict":"qualified"}' WHERE seq = 2;"#,
    );
    let o = decide();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("was changed outside infergate: 1 row(s) of qualification q do not verify, the first: qualification q, seq 2 (done): edited"),
        "{}",
        text(&o)
    );
    assert_eq!(
        Ledger::open(&file).unwrap().entries("q").unwrap().len(),
        5,
        "nothing recorded"
    );
}
