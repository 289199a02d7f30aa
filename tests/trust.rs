//! The command line's failure modes, tried as a user would, with
//! no engine: no command writes over its own inputs, secrets in targets and
//! ledger addresses are never printed or written, read-only commands create
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn infergate(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(cwd)
        .args(args)
        .env_remove("INFERGATE_LEDGER")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn example_report() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/runtime-profile-comparison.example.json")
}

/// Asserts the command failed before writing, naming the refusal, and left
/// `kept` as it was.
fn assert_refused_overwrite(o: &Output, kept: &Path, before: &[u8]) {
    assert!(!o.status.success(), "exit 0: {}", stderr(o));
    assert!(
        stderr(o).contains("refusing to write"),
        "not refused as an overwrite: {}",
        stderr(o)
    );
    assert_eq!(
        std::fs::read(kept).unwrap(),
        before,
        "{} changed",
        kept.display()
    );
}

#[test]
fn no_writer_overwrites_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for side in ["b", "c"] {
        std::fs::create_dir_all(d.join(side)).unwrap();
        std::fs::write(
            d.join(side).join("run.json"),
            format!("{{\"side\": \"{side}\"}}\n"),
        )
        .unwrap();
    }
    let b_run = d.join("b/run.json");
    let before = std::fs::read(&b_run).unwrap();

    // compare, spelled as given and through `./`.
    for out in ["b/run.json", "./b/../b/run.json", "c/run.json"] {
        let o = infergate(d, &["compare", "b/run.json", "c/run.json", "-o", out]);
        let kept = d.join(out);
        let was = std::fs::read(&kept).unwrap();
        assert_refused_overwrite(&o, &kept, &was);
    }
    std::fs::write(d.join("policy.toml"), "threshold_percent = 5.0\n").unwrap();
    let pol = std::fs::read(d.join("policy.toml")).unwrap();
    let o = infergate(
        d,
        &[
            "compare",
            "b/run.json",
            "c/run.json",
            "--policy",
            "policy.toml",
            "-o",
            "policy.toml",
        ],
    );
    assert_refused_overwrite(&o, &d.join("policy.toml"), &pol);

    // report: the rendered text over the JSON it renders.
    std::fs::copy(example_report(), d.join("r.json")).unwrap();
    let r = std::fs::read(d.join("r.json")).unwrap();
    let o = infergate(d, &["report", "r.json", "--format", "html", "-o", "r.json"]);
    assert_refused_overwrite(&o, &d.join("r.json"), &r);
    // …and to a new file it still works.
    let o = infergate(d, &["report", "r.json", "--format", "html", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));

    // calibrate: -o or --write-policy naming a run (directory or file) or the policy.
    let o = infergate(d, &["calibrate", "b", "c", "-o", "b/run.json"]);
    assert_refused_overwrite(&o, &b_run, &before);
    let o = infergate(
        d,
        &[
            "calibrate",
            "b/run.json",
            "c",
            "-o",
            "cal.json",
            "--write-policy",
            "b/run.json",
        ],
    );
    assert_refused_overwrite(&o, &b_run, &before);
    let o = infergate(
        d,
        &[
            "calibrate",
            "b",
            "c",
            "--policy",
            "policy.toml",
            "-o",
            "cal.json",
            "--write-policy",
            "policy.toml",
        ],
    );
    assert_refused_overwrite(&o, &d.join("policy.toml"), &pol);
    assert!(
        !d.join("cal.json").exists(),
        "calibrate wrote before refusing"
    );
}

#[test]
fn outputs_replace_only_regular_files_and_never_the_ledger_plan_or_suite() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(example_report(), d.join("r.json")).unwrap();

    // A symbolic link, a FIFO and a device are not replaced by a file.
    std::fs::write(d.join("target.html"), "kept").unwrap();
    std::os::unix::fs::symlink(d.join("target.html"), d.join("link.html")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(d.join("fifo"))
            .status()
            .unwrap()
            .success()
    );
    for (out, kind) in [
        ("link.html", "a symbolic link"),
        ("fifo", "a FIFO"),
        ("/dev/full", "a character device"),
    ] {
        let o = infergate(d, &["report", "r.json", "--format", "html", "-o", out]);
        assert!(!o.status.success(), "{out}: exit 0");
        assert!(
            stderr(&o).contains(kind) && stderr(&o).contains("not a regular file"),
            "{out}: {}",
            stderr(&o)
        );
    }
    assert!(
        std::fs::symlink_metadata(d.join("link.html"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(d.join("target.html")).unwrap(), b"kept");
    assert!(
        std::fs::symlink_metadata(d.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(
        std::fs::symlink_metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device()
    );

    // An existing regular file keeps its mode.
    std::fs::write(d.join("r.html"), "old").unwrap();
    std::fs::set_permissions(d.join("r.html"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = infergate(d, &["report", "r.json", "--format", "html", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = std::fs::metadata(d.join("r.html")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    assert!(m.len() > 3, "rewritten");

    // An input that is a FIFO is refused at once instead of blocking.
    let o = infergate(d, &["report", "fifo"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("a FIFO"), "{}", stderr(&o));

    // qualify --junit naming the ledger, the plan or its suite: refused
    // before anything runs.
    let plans = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("plans");
    let plan = plans.join("reference.toml");
    let suite = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("suites/reference-engine.toml");
    let suite_bytes = std::fs::read(&suite).unwrap();
    std::fs::write(d.join("L.sqlite"), "").unwrap();
    for (junit, what) in [
        (d.join("L.sqlite"), "ledger"),
        (plan.clone(), "plan"),
        (suite.clone(), "plan's suite"),
    ] {
        let o = infergate(
            d,
            &[
                "qualify",
                plan.to_str().unwrap(),
                "--ledger",
                "L.sqlite",
                "--junit",
                junit.to_str().unwrap(),
            ],
        );
        assert!(!o.status.success(), "{what}: exit 0");
        let e = stderr(&o);
        assert!(
            e.contains("refusing to write") && e.contains(&format!("the {what} ")),
            "{what}: {e}"
        );
    }
    assert_eq!(std::fs::read(&suite).unwrap(), suite_bytes);
    assert_eq!(
        std::fs::read(d.join("L.sqlite")).unwrap(),
        b"",
        "ledger untouched"
    );
}

#[test]
fn commands_that_read_a_ledger_change_no_other_database_and_make_none() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let other = d.join("other.sqlite");
    assert!(
        Command::new("sqlite3")
            .arg(&other)
            .arg("CREATE TABLE accounts (id INTEGER);")
            .status()
            .is_ok_and(|s| s.success())
            || {
                // No sqlite3 client: make it through the library instead.
                infergate_sqlite(&other);
                true
            }
    );
    let before = std::fs::read(&other).unwrap();
    for args in [
        vec!["status", "--ledger", "other.sqlite"],
        vec!["stop", "q", "--ledger", "other.sqlite"],
        vec!["ledger", "migrate", "other.sqlite", "new.sqlite"],
    ] {
        let o = infergate(d, &args);
        assert!(!o.status.success(), "{args:?}: exit 0");
        assert!(
            stderr(&o).contains("not an infergate ledger"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(std::fs::read(&other).unwrap(), before, "changed");

    // decide on a ledger that does not exist: refused, none made. The
    // qualification directory is real enough for decide to reach the ledger.
    let q = d.join("q");
    std::fs::create_dir(&q).unwrap();
    std::fs::copy(example_report(), q.join("report.json")).unwrap();
    let plans = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("plans");
    let plan = infergate::config::plan::Plan::load(&plans.join("reference.toml")).unwrap();
    std::fs::write(q.join(infergate::runtime::state::PLAN_COPY), &plan.text).unwrap();
    let qf = infergate::runtime::state::QualificationFile {
        schema: infergate::runtime::state::QUALIFICATION_SCHEMA.into(),
        id: "q".into(),
        plan: plan.path.clone(),
        plan_dir: plans,
        plan_sha256: plan.sha256.clone(),
        ledger: infergate::runtime::ledger::Location::Sqlite(d.join("missing.sqlite")),
        default_window: None,
    };
    std::fs::write(
        q.join(infergate::runtime::state::QUALIFICATION_FILE),
        serde_json::to_vec(&qf).unwrap(),
    )
    .unwrap();
    let o = infergate(
        d,
        &[
            "decide",
            "q/report.json",
            "--retain-baseline",
            "--note",
            "x",
            "--ledger",
            "missing.sqlite",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no ledger at"), "{}", stderr(&o));
    // Who decided is a name: no escape sequence in it.
    let o = infergate(
        d,
        &[
            "decide",
            "q/report.json",
            "--retain-baseline",
            "--note",
            "x",
            "--who",
            "a\u{1b}[2Jb",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--who: an escape (ESC)"),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("missing.sqlite").exists(), "decide made a ledger");
}

#[test]
fn a_resumed_run_must_be_the_run_its_directory_holds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let suites = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("suites");
    let (one, other) = (
        suites.join("reference-engine.toml"),
        suites.join("turnover-words.toml"),
    );
    // A run directory as a run of `one` against port 1 leaves it.
    std::fs::create_dir(d.join("prev")).unwrap();
    std::fs::write(d.join("prev/journal.jsonl"), "").unwrap();
    let id = infergate::measure::runner::RunIdentity {
        suite: "reference-engine".into(),
        suite_sha256: infergate::util::sha256_hex(&std::fs::read(&one).unwrap()),
        target: "http://127.0.0.1:1".into(),
        model: "m".into(),
    };
    std::fs::write(
        d.join("prev")
            .join(infergate::measure::runner::IDENTITY_FILE),
        serde_json::to_vec(&id).unwrap(),
    )
    .unwrap();
    let journal = std::fs::read(d.join("prev/journal.jsonl")).unwrap();
    let run = |suite: &Path, target: &str| {
        infergate(
            d,
            &[
                "run",
                "--resume",
                "--suite",
                suite.to_str().unwrap(),
                "--target",
                target,
                "--out",
                "prev",
            ],
        )
    };
    let o = run(&other, "http://127.0.0.1:1");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("holds another run")
            && stderr(&o).contains("ran suite reference-engine"),
        "{}",
        stderr(&o)
    );
    let o = run(&one, "http://127.0.0.1:2/");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("target http://127.0.0.1:2 where it ran http://127.0.0.1:1"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(d.join("prev/journal.jsonl")).unwrap(),
        journal
    );
    // The same run goes on to discovery (nothing listens on port 1).
    let o = run(&one, "http://127.0.0.1:1");
    assert!(stderr(&o).contains("discovering"), "{}", stderr(&o));
}

#[test]
fn qualify_check_names_what_is_wrong_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A cell too large for the baseline profile's 4096 tokens per slot, an
    // API key variable that is not set, an image not present locally.
    std::fs::write(
        d.join("suite.toml"),
        "name = \"big\"\n[[cell]]\nname = \"big\"\nprompt_tokens = 6000\nmax_tokens = 8\nconcurrency = 1\nrequests = 3\n",
    )
    .unwrap();
    let digest = "0".repeat(64);
    std::fs::write(
        d.join("plan.toml"),
        format!(
            "name = \"c\"\nsuite = \"suite.toml\"\n[baseline]\ndriver = \"process\"\nengine_profile = \"baseline\"\n\
             api_key_env = \"INFERGATE_CHECK_UNSET_KEY\"\n[candidate]\ndriver = \"container\"\n\
             image = \"example.invalid/engine@sha256:{digest}\"\nport = 18080\ngpus = \"all\"\nruntime = \"nvidia\"\n"
        ),
    )
    .unwrap();
    let before: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let o = infergate(
        d,
        &["qualify", "plan.toml", "--ledger", "L.sqlite", "--check"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}{}", stderr(&o));
    for want in [
        "WRONG     baseline context: cell 'big' cannot fit",
        "WRONG     baseline.api_key_env INFERGATE_CHECK_UNSET_KEY: not set",
        "checked   ledger: L.sqlite does not exist yet",
        "checked   spend per side: 3 requests (+0 warmup) over 1 cell(s)",
        "not ready: ",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    // The daemon's API is new enough for the fields sent (or, without a
    // daemon, wrong: the container could not be started).
    assert!(
        out.contains("checked   docker daemon: Docker ")
            || out.contains("WRONG     docker daemon: /var/run/docker.sock: not reachable here"),
        "{out}"
    );
    // The image is never pulled: absent is wrong, or unchecked without Docker.
    assert!(
        out.contains("WRONG     candidate runtime: image example.invalid/engine@sha256:")
            || out.contains("unchecked candidate runtime: image"),
        "{out}"
    );
    // A GPU the host cannot grant (no NVIDIA Container Toolkit here), and a
    // runtime the daemon does not know (or unchecked without a daemon).
    assert!(
        out.contains("WRONG     candidate.gpus: gpus = all: nvidia-container-runtime-hook is not on this host's PATH"),
        "{out}"
    );
    assert!(
        out.contains("WRONG     candidate.runtime: nvidia: the daemon knows only")
            || out.contains("unchecked candidate.runtime"),
        "{out}"
    );
    let after: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "--check wrote nothing: no ledger, no out/");
    // The pull policy decides what an absent image means: a pull by digest
    // from the registry (unchecked, none is reached), or wrong under "never".
    let plan = std::fs::read_to_string(d.join("plan.toml")).unwrap();
    for (pull, want) in [
        (
            "missing",
            "unchecked candidate runtime: image example.invalid/engine@sha256:",
        ),
        ("never", "[docker] pull = \"never\": load the image"),
    ] {
        let with = plan.replacen(
            "[baseline]",
            &format!("[docker]\nregistry = \"example.invalid\"\npull = \"{pull}\"\n[baseline]"),
            1,
        );
        std::fs::write(d.join("pull.toml"), with).unwrap();
        let o = infergate(d, &["qualify", "pull.toml", "--check"]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(want) || out.contains("Docker is not reachable here"),
            "{pull}: {want:?} not in:\n{out}"
        );
    }
    std::fs::remove_file(d.join("pull.toml")).unwrap();
    // A calibrate output turns the spend into minutes: 3 requests of 4 s,
    // 1 pass, 2 runtimes = 0.4 minutes; a cell it lacks is unchecked.
    let cal = |cell: &str| {
        serde_json::json!({
            "schema": "infergate-calibration/v1", "created_at": "2026-12-06T00:00:00Z",
            "model": "m", "runtime": null, "suite": "big", "suite_sha256": null, "runs": [],
            "cells": [{"cell": cell, "metrics": [], "seconds_per_request": 4.0,
                       "requests_per_side": null, "minutes": null}],
            "aa_pairs": {"pairs": 0, "point_rule_failed": 0, "evidence_pass": 0,
                         "evidence_fail": 0, "evidence_inconclusive": 0},
            "minutes": null, "drift_sd_percent": 0.0, "policy_snippet": "", "method": ""
        })
        .to_string()
    };
    for (cell, want) in [
        (
            "big",
            "checked   spend in minutes: about 0.4 minutes of requests",
        ),
        (
            "other",
            "unchecked spend in minutes: cal.json has no seconds per request for cell(s) big",
        ),
    ] {
        std::fs::write(d.join("cal.json"), cal(cell)).unwrap();
        let o = infergate(
            d,
            &[
                "qualify",
                "plan.toml",
                "--check",
                "--calibration",
                "cal.json",
            ],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    std::fs::remove_file(d.join("cal.json")).unwrap();
    // A plan that does not read is one wrong line, with its file and line.
    std::fs::write(d.join("bad.toml"), "name = \"x\"\nsuite = 3\n").unwrap();
    let o = infergate(d, &["qualify", "bad.toml", "--check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("WRONG     plan: bad.toml"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

fn infergate_sqlite(path: &Path) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch("CREATE TABLE accounts (id INTEGER);")
        .unwrap();
}

/// Every file under `dir` (names and contents) and both streams of every
/// output: none may hold `secret`.
fn assert_no_secret(dir: &Path, outputs: &[(&str, &Output)]) {
    for (what, o) in outputs {
        for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains("secret"),
                "{what}: {stream} holds the secret: {text}"
            );
        }
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !name.contains("secret"),
                "a file is named with the secret: {}",
                p.display()
            );
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains("secret"),
                    "{} holds the secret",
                    p.display()
                );
            }
        }
    }
}

/// A loopback server that lists one model at `/v1/models`, answers other
/// GETs with 404 and every POST with HTTP 500: discovery succeeds, prompt
/// sizing fails.
fn models_only_server() -> u16 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let mut r = BufReader::new(conn);
            let mut first = String::new();
            if r.read_line(&mut first).is_err() {
                continue;
            }
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let (status, body) = if first.starts_with("GET /v1/models ") {
                (
                    "200 OK",
                    r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#,
                )
            } else if first.starts_with("GET ") {
                ("404 Not Found", r#"{"error":"not found"}"#)
            } else {
                ("500 Internal Server Error", r#"{"error":"no"}"#)
            };
            let _ = write!(
                r.get_mut(),
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn secrets_in_targets_and_ledger_addresses_are_never_printed_or_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = infergate(
        d,
        &[
            "status",
            "--ledger",
            "postgres://alice@127.0.0.1:1/db?password=secret",
        ],
    );
    assert!(!url.status.success());
    assert!(stderr(&url).contains("password"), "{}", stderr(&url));
    // A libpq key=value string is PostgreSQL, refused for its password: never a SQLite file.
    let kv = infergate(
        d,
        &[
            "status",
            "--ledger",
            "host=127.0.0.1 port=1 password=secret",
        ],
    );
    assert!(!kv.status.success());
    assert!(stderr(&kv).contains("holds a password"), "{}", stderr(&kv));
    let kv_nopw = infergate(
        d,
        &[
            "status",
            "--ledger",
            "host=127.0.0.1 port=1 dbname=ledgerdb",
        ],
    );
    assert!(!kv_nopw.status.success());
    assert!(
        stderr(&kv_nopw).contains("connecting to ledger"),
        "{}",
        stderr(&kv_nopw)
    );
    // The same string as the environment's ledger.
    let env = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(d)
        .args(["status"])
        .env("INFERGATE_LEDGER", "host=127.0.0.1 port=1 password=secret")
        .output()
        .unwrap();
    assert!(!env.status.success());

    // A target with userinfo: a refused connection (discovery), then a
    // server that lists a model but fails every request (sizing).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let cell = [
        "--prompt-tokens",
        "10",
        "--max-tokens",
        "4",
        "--requests",
        "2",
    ];
    let target = format!("http://user:secret@127.0.0.1:{closed_port}");
    let mut args = vec!["run", "--target", &target, "--out", "discovery"];
    args.extend(cell);
    let discovery = infergate(d, &args);
    assert!(!discovery.status.success());
    assert!(
        stderr(&discovery).contains("discovering"),
        "{}",
        stderr(&discovery)
    );
    let target = format!("http://user:secret@127.0.0.1:{}", models_only_server());
    let mut args = vec!["run", "--target", &target, "--out", "sizing"];
    args.extend(cell);
    let sizing = infergate(d, &args);
    assert!(!sizing.status.success());
    assert!(stderr(&sizing).contains("sizing"), "{}", stderr(&sizing));
    assert!(stderr(&sizing).contains("127.0.0.1"), "{}", stderr(&sizing));
    // A token in the target's query string: refused before anything runs
    // (the endpoints are joined to the path), the token not shown.
    let target = format!("http://127.0.0.1:{closed_port}/?token=secret");
    let mut args = vec!["run", "--target", &target, "--out", "query"];
    args.extend(cell);
    let query = infergate(d, &args);
    assert!(!query.status.success());
    assert!(
        stderr(&query).contains("query string"),
        "{}",
        stderr(&query)
    );
    // …and the API key is not sent to a third party's metrics endpoint
    // (src/measure/scrape.rs tests it on the wire).
    let metrics = format!("dcgm=http://u:secret@127.0.0.1:{closed_port}/?sig=secret");
    let mut args = vec!["run", "--target", "http://127.0.0.1:1", "--out", "m"];
    args.extend(["--metrics-endpoint", &metrics]);
    args.extend(cell);
    let endpoint = infergate(d, &args);
    assert!(!endpoint.status.success());
    assert!(
        stderr(&endpoint).contains("query string"),
        "{}",
        stderr(&endpoint)
    );

    let outputs = [
        ("target query", &query),
        ("metrics endpoint", &endpoint),
        ("postgres URL", &url),
        ("libpq string", &kv),
        ("libpq string without password", &kv_nopw),
        ("INFERGATE_LEDGER", &env),
        ("discovery", &discovery),
        ("sizing", &sizing),
    ];
    assert_no_secret(d, &outputs);
    for (what, o) in outputs {
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("user:"),
            "{what}: {}",
            stderr(o)
        );
    }
    // Nothing but the run directories' suites: no ledger file was created.
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["discovery", "sizing"]);
}

#[test]
fn read_only_commands_create_no_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = d.join("no/such/dir/x.sqlite");
    let o = infergate(d, &["status", "--ledger", missing.to_str().unwrap()]);
    assert!(
        !o.status.success(),
        "status on a missing ledger exited 0: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(stderr(&o).contains("no ledger at"), "{}", stderr(&o));
    let o = infergate(d, &["stop", "q", "--ledger", "typo.sqlite"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no ledger at"), "{}", stderr(&o));
    let o = infergate(d, &["ledger", "migrate", "typo.sqlite", "out.sqlite"]);
    assert!(
        !o.status.success(),
        "migrate from a missing ledger exited 0: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(stderr(&o).contains("typo.sqlite"), "{}", stderr(&o));
    assert!(!d.join("no").exists(), "status created directories");
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "read-only commands created {left:?}");
    // The default ledger not made yet: an empty answer, and still nothing created.
    let o = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(d)
        .arg("status")
        .env_remove("INFERGATE_LEDGER")
        .env("XDG_DATA_HOME", d.join("data"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no qualifications"));
    assert!(
        !d.join("data").exists(),
        "status created the default ledger"
    );
}

#[test]
fn a_run_compared_with_itself_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("b")).unwrap();
    std::fs::write(d.join("b/run.json"), "{}").unwrap();
    let o = infergate(
        d,
        &["compare", "b/run.json", "./b/run.json", "-o", "r.json"],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("are the same file"), "{}", stderr(&o));
    assert!(!d.join("r.json").exists());
}

#[test]
fn a_target_ending_in_v1_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("http://127.0.0.1:{}/v1", models_only_server());
    let o = infergate(
        dir.path(),
        &[
            "run",
            "--target",
            &target,
            "--out",
            "o",
            "--prompt-tokens",
            "10",
            "--max-tokens",
            "4",
            "--requests",
            "1",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("/v1/v1/models"), "{}", stderr(&o));
    assert!(stderr(&o).contains("without /v1"), "{}", stderr(&o));
}

#[test]
fn discovery_waits_the_first_byte_timeout_not_a_fixed_30_s() {
    // Accepts every connection and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let target = format!("http://127.0.0.1:{port}");
    let o = infergate(
        dir.path(),
        &[
            "run",
            "--target",
            &target,
            "--first-byte-timeout",
            "1",
            "--out",
            "o",
            "--prompt-tokens",
            "10",
            "--max-tokens",
            "4",
            "--requests",
            "1",
        ],
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("no answer within 1.0 s"), "{e}");
    assert!(e.contains("--first-byte-timeout"), "{e}");
}

#[test]
fn a_suite_asking_for_a_billion_requests_is_refused_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("suite.toml"),
        "name = \"typo\"\n\n[[cell]]\nname = \"c\"\nprompt_tokens = 10\nmax_tokens = 4\nrequests = 1000000000\n",
    )
    .unwrap();
    // Nothing listens there: the suite must be refused before any contact.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let o = infergate(
        d,
        &[
            "run",
            "--target",
            &target,
            "--suite",
            "suite.toml",
            "--out",
            "o",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("suite.toml: line 3: [[cell]]"), "{e}");
    assert!(
        e.contains("requests = 1000000000 is above the maximum"),
        "{e}"
    );
    assert!(!e.contains("discovering"), "{e}");
}

/// Every plan and suite the project ships loads: its suite (with any
/// dataset), its policy, and the engine profiles it names. A shipped
/// example that fails when tried is the first thing a newcomer meets.
#[test]
fn every_shipped_plan_and_suite_loads() {
    use infergate::config::plan::{Driver, Plan, ProcessDriver};
    use infergate::config::suite::Suite;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let profiles = infergate::driver::engine::builtin_profiles().unwrap();
    let toml_in = |dir: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        v.sort();
        v
    };
    let plans = toml_in("plans");
    assert!(plans.len() >= 4, "{plans:?}");
    for path in &plans {
        let plan = Plan::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        plan.policy
            .load(path)
            .unwrap_or_else(|e| panic!("{}: policy: {e:#}", path.display()));
        Suite::load(&plan.suite).unwrap_or_else(|e| panic!("{}: suite: {e:#}", path.display()));
        for rt in [&plan.baseline, &plan.candidate] {
            if let Driver::Process(ProcessDriver::Engine {
                profile,
                profiles_file: None,
            }) = &rt.driver
            {
                assert!(
                    profiles.contains_key(profile),
                    "{}: engine profile {profile} is not in engine/profiles.toml",
                    path.display()
                );
            }
        }
    }
    for path in toml_in("suites") {
        Suite::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
    }
}

/// `infergate init` writes a plan and its suite that `--check` reads, for
/// each kind; it never writes over a file that is there.
#[test]
fn init_writes_a_plan_check_reads_and_never_overwrites() {
    for (kind, ready) in [
        ("endpoints", true),
        ("profiles", true),
        ("containers", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let o = infergate(d, &["init", "--kind", kind]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        for f in ["plan.toml", "suite.toml"] {
            assert!(d.join(f).is_file(), "{kind}: {f}");
        }
        let check = infergate(
            d,
            &["qualify", "plan.toml", "--check", "--ledger", "L.sqlite"],
        );
        let out = String::from_utf8_lossy(&check.stdout);
        assert!(
            out.starts_with("checked   plan: plan.toml reads"),
            "{kind}: {out}"
        );
        if ready {
            assert_eq!(check.status.code(), Some(0), "{kind}: {out}");
        } else {
            // The placeholder digests are not present here (or no daemon
            // is reachable): named, nothing else.
            assert!(
                out.lines().filter(|l| l.starts_with("WRONG")).all(|l| l
                    .contains("is not present locally")
                    || l.starts_with(
                        "WRONG     docker daemon: /var/run/docker.sock: not reachable here"
                    )),
                "{out}"
            );
        }
        let plan = std::fs::read(d.join("plan.toml")).unwrap();
        let again = infergate(d, &["init", "--kind", kind]);
        assert_eq!(again.status.code(), Some(2));
        assert!(stderr(&again).contains("plan.toml already exists: nothing was written"));
        assert_eq!(std::fs::read(d.join("plan.toml")).unwrap(), plan);
    }
}

/// A command whose standard output is closed under it (`infergate status
/// --json | head -c 600`) ends as a Unix tool does, by SIGPIPE and saying
/// nothing: no panic, no exit 101.
#[test]
fn a_closed_standard_output_ends_a_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let report = example_report();
    let report = report.to_str().unwrap();
    for args in [
        &["status", "--json"][..],
        &["completions", "bash"],
        &["man"],
        &["report", report],
        &["verify", report],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        // The reader is gone before the command writes its first byte.
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_infergate"))
            .current_dir(d)
            .args(args)
            .env_remove("INFERGATE_LEDGER")
            .env("XDG_DATA_HOME", d.join("data"))
            .stdout(writer)
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_ne!(o.status.code(), Some(101), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
        assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{args:?}: {e}");
        assert_eq!(e, "", "{args:?}");
    }
}

/// `infergate` run in `d` with `args`, killed (and the test failed) if it
/// has not ended within a minute: a command blocked on a FIFO.
fn infergate_unblocked(d: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(d)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    let o = child.wait_with_output().unwrap();
    panic!("infergate {args:?} blocked: {}", stderr(&o));
}

/// `man --out DIR` writes its pages as every other output is written: a
/// symbolic link or a FIFO where a page goes is refused, named, and
/// nothing is written through it.
#[test]
fn man_pages_replace_only_regular_files() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = infergate_unblocked(d, &["man", "--out", "fresh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for page in ["infergate.1", "infergate-qualify.1"] {
        assert!(d.join("fresh").join(page).is_file(), "{page}");
    }

    std::fs::create_dir(d.join("man")).unwrap();
    std::fs::write(d.join("target"), "kept").unwrap();
    std::os::unix::fs::symlink(d.join("target"), d.join("man/infergate-qualify.1")).unwrap();
    let o = infergate_unblocked(d, &["man", "--out", "man"]);
    assert!(!o.status.success(), "a page was written through a link");
    let e = stderr(&o);
    assert!(
        e.contains("infergate-qualify.1")
            && e.contains("a symbolic link")
            && e.contains("not a regular file"),
        "{e}"
    );
    assert_eq!(std::fs::read(d.join("target")).unwrap(), b"kept");
    assert!(
        std::fs::symlink_metadata(d.join("man/infergate-qualify.1"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    std::fs::remove_file(d.join("man/infergate-qualify.1")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(d.join("man/infergate.1"))
            .status()
            .unwrap()
            .success()
    );
    let o = infergate_unblocked(d, &["man", "--out", "man"]);
    assert!(!o.status.success(), "a page was written into a FIFO");
    let e = stderr(&o);
    assert!(
        e.contains("infergate.1") && e.contains("a FIFO") && e.contains("not a regular file"),
        "{e}"
    );
    assert!(
        std::fs::symlink_metadata(d.join("man/infergate.1"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

/// A container plan whose Docker daemon cannot be reached is not ready:
/// neither runtime could be started. `--check` names the socket, exit 2.
#[test]
fn qualify_check_of_containers_without_a_reachable_daemon_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = infergate(d, &["init", "--kind", "containers"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let socket = d.join("no-such-dir/docker.sock");
    let mut plan = std::fs::read_to_string(d.join("plan.toml")).unwrap();
    plan.push_str(&format!(
        "\n[docker]\nsocket = {:?}\n",
        socket.to_str().unwrap()
    ));
    std::fs::write(d.join("plan.toml"), plan).unwrap();
    let check = infergate(
        d,
        &["qualify", "plan.toml", "--check", "--ledger", "L.sqlite"],
    );
    let out = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(2), "{out}");
    let want = format!(
        "WRONG     docker daemon: {}: not reachable here",
        socket.display()
    );
    assert!(out.contains(&want), "{want:?} not in:\n{out}");
    assert!(out.contains("not ready: 1 wrong"), "{out}");
}

/// `infergate init -o PATH` checks both paths it would write (the plan
/// and `suite.toml` beside it) before writing either: a plan that would
/// be its own suite, a directory, a dangling link where the plan goes are
/// refused with nothing written.
#[test]
fn init_checks_the_plan_and_its_suite_before_writing_either() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let listing = |d: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    for (out, want) in [
        ("suite.toml", "the plan would be its own suite"),
        ("./suite.toml", "the plan would be its own suite"),
        ("foo/", "names a directory"),
        ("sub/.", "names a directory"),
    ] {
        let o = infergate(d, &["init", "-o", out]);
        assert_eq!(o.status.code(), Some(2), "{out}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{out}: {}", stderr(&o));
        assert!(listing(d).is_empty(), "{out}: wrote {:?}", listing(d));
    }
    // A dangling link where the plan goes is there: refused, no suite written.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.join("nowhere.toml"), d.join("plan.toml")).unwrap();
        let o = infergate(d, &["init"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("plan.toml already exists: nothing was written"),
            "{}",
            stderr(&o)
        );
        assert!(!d.join("suite.toml").exists(), "{:?}", listing(d));
        assert!(!d.join("nowhere.toml").exists());
    }
}

/// `qualify --baseline URL --candidate URL --out OUT --id ID` (against a
/// server that answers discovery): the id and OUT/ID are checked before
/// anything is written. A directory holding a user's files is left as it
/// was; an id that climbs out of OUT, or is absolute, writes nowhere.
#[test]
fn two_endpoints_write_their_plan_only_into_a_new_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = format!("http://127.0.0.1:{}", models_only_server());
    let qualify = |out: &str, id: &str| {
        infergate(
            d,
            &[
                "qualify",
                "--baseline",
                &url,
                "--candidate",
                &url,
                "--out",
                out,
                "--id",
                id,
                "--ledger",
                "L.sqlite",
            ],
        )
    };
    let proj = d.join("out/proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("suite.toml"), "# the user's own suite\n").unwrap();
    let o = qualify("out", "proj");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("already exists and is not empty"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(proj.join("suite.toml")).unwrap(),
        "# the user's own suite\n"
    );
    assert!(!proj.join("plan.toml").exists());
    let abs = d.join("abs");
    for (out, id, written) in [
        ("a/b", "../../victim", d.join("victim")),
        ("out", abs.to_str().unwrap(), abs.clone()),
    ] {
        let o = qualify(out, id);
        assert_eq!(o.status.code(), Some(2), "{id}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("qualification id"),
            "{id}: {}",
            stderr(&o)
        );
        assert!(!written.exists(), "{id}: {} was written", written.display());
    }
    assert!(!d.join("L.sqlite").exists(), "no ledger made");
}

/// Flags that pass a loose check but would write a plan or suite that
/// does not read back (a newline, a size past the integers a suite or plan
/// holds, a cell twice) are refused at the flag, before a file or a
/// directory is written; the size arithmetic never wraps.
#[test]
fn two_endpoints_flags_that_would_write_an_unreadable_plan_are_refused_at_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = format!("http://127.0.0.1:{}", models_only_server());
    let newline = format!("{url}\n");
    for (extra, want) in [
        (vec!["--cells", "64x1\n"], "--cells"),
        (vec!["--cells", "18446744073709551553x1"], "--cells"),
        (vec!["--cells", "64x1,64x1"], "--cells: 64x1 is given twice"),
        (
            vec!["--max-requests", "9223372036854775808"],
            "--max-requests must be from 1 to",
        ),
        (vec!["--baseline", &newline], "--baseline: "),
        (vec!["--candidate", &newline], "--candidate: "),
    ] {
        let mut args = vec!["qualify", "--out", "out", "--ledger", "L.sqlite"];
        if !extra.contains(&"--baseline") {
            args.extend(["--baseline", &url]);
        }
        if !extra.contains(&"--candidate") {
            args.extend(["--candidate", &url]);
        }
        args.extend(&extra);
        let o = infergate(d, &args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
        assert!(!d.join("out").exists(), "{extra:?}: out/ was written");
    }
}

/// A plan's `[adaptive] max_requests` below one round of a cell is wrong
/// under `--check` and refused at preflight, before either server is
/// contacted.
#[test]
fn a_plan_budget_below_one_round_is_wrong_at_check_and_refused_before_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::fs::write(
        d.join("suite.toml"),
        "name = \"wide\"\n[[cell]]\nname = \"wide\"\nprompt_tokens = 64\nmax_tokens = 8\nconcurrency = 64\nrequests = 3\n",
    )
    .unwrap();
    std::fs::write(
        d.join("plan.toml"),
        format!(
            "name = \"w\"\nsuite = \"suite.toml\"\n[baseline]\ndriver = \"external\"\nurl = \"{url}\"\n\
             [candidate]\ndriver = \"external\"\nurl = \"{url}\"\n[adaptive]\nenabled = true\nmax_requests = 10\n"
        ),
    )
    .unwrap();
    let why = "[adaptive] max_requests = 10 (requests per side per cell) cannot hold one adaptive round of cell wide: a round is 2 blocks of 128 requests per side (the default window at concurrency 64) = 256";
    let o = infergate(
        d,
        &["qualify", "plan.toml", "--ledger", "L.sqlite", "--check"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}{}", stderr(&o));
    assert!(
        out.contains(&format!("WRONG     adaptive budget: {why}")),
        "{out}"
    );
    let o = infergate(
        d,
        &[
            "qualify",
            "plan.toml",
            "--ledger",
            "L.sqlite",
            "--out",
            "out",
        ],
    );
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("REFUSED at preflight") && out.contains(why),
        "{out}"
    );
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a connection reached the server"
    );
}

/// `--max-requests` caps what each side is sent: a budget below one
/// adaptive round of some cell (`--cells 64x64`: 2 blocks of 128 requests
/// per side) is refused at the flag, before any connection or file, rather
/// than sending the round whole.
#[test]
fn two_endpoints_refuse_a_budget_below_one_round_before_sending_anything() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let args = [
        "qualify",
        "--baseline",
        &url,
        "--candidate",
        &url,
        "--cells",
        "64x64",
        "--max-requests",
        "10",
        "--out",
        "out",
        "--id",
        "cap",
        "--ledger",
        "L.sqlite",
    ];
    let o = infergate(d, &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--max-requests 10 (requests per side per cell) cannot hold one adaptive round of cell p64-c64: a round is 2 blocks of 128 requests per side"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a connection reached the server"
    );
    assert!(!d.join("out").exists() && !d.join("L.sqlite").exists());
}

/// `qualify --baseline U --candidate U --no-turnover` against the loopback
/// fast source: the plan skips turnover, the runs record it, and the
/// qualification says the turnover gates did not run instead of failing
/// the candidate for having no turnover run.
#[test]
fn two_endpoints_without_turnover_say_it_did_not_run() {
    use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
    let (_, src) = FastSource::start(FastSourceConfig {
        ttft: std::time::Duration::from_millis(2),
        itl: std::time::Duration::from_millis(1),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = src.base_url();
    let o = infergate(
        d,
        &[
            "qualify",
            "--baseline",
            &url,
            "--candidate",
            &url,
            "--cells",
            "64x1",
            "--no-turnover",
            "--max-requests",
            "12",
            "--max-minutes",
            "1",
            "--out",
            "out",
            "--id",
            "nt",
            "--ledger",
            "L.sqlite",
        ],
    );
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(matches!(o.status.code(), Some(1 | 3 | 4)), "{text}");
    assert!(!text.contains("no turnover run"), "{text}");
    assert!(text.contains("not run (skipped by the plan)"), "{text}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("out/nt/report.json")).unwrap()).unwrap();
    assert_eq!(report["turnover_gate"]["not_run"], "skipped_by_plan");
    let q = report["qualification"].as_str().unwrap();
    assert!(
        q.ends_with("; turnover not run (skipped by the plan)"),
        "{q}"
    );
}
