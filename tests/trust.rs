//! Issue #26: the command line's failure modes, tried as a user would, with
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
