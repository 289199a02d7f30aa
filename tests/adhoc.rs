//! Ad-hoc runs: `infergate run` with cell flags and no suite file, against
//! the real reference engine. The suite it writes, run again with `--suite`,
//! must give a run `compare` accepts as the same workload.

mod support;

use std::path::Path;
use std::process::Command;

use infergate::artifact::RunArtifact;
use infergate::config::adhoc::SUITE_FILE;
use infergate::measure::runner::ARTIFACT_FILE;
use infergate::report;

fn infergate(args: &[&str], out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn artifact(dir: &Path) -> RunArtifact {
    serde_json::from_slice(&std::fs::read(dir.join(ARTIFACT_FILE)).unwrap()).unwrap()
}

#[test]
fn a_suite_file_and_cell_flags_together_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let res = infergate(
        &[
            "run",
            "--target",
            "http://127.0.0.1:9",
            "--suite",
            "suites/gate-calibration.toml",
            "--concurrency",
            "4",
        ],
        &out,
    );
    assert_eq!(res.status.code(), Some(2));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("--suite") && err.contains("--concurrency"),
        "{err}"
    );
    assert!(!err.contains("--max-tokens"), "only the flag given: {err}");
    assert!(!out.exists(), "nothing written");

    // Neither a suite nor a whole cell: the missing flags are named.
    let res = infergate(
        &["run", "--target", "http://127.0.0.1:9", "--max-tokens", "4"],
        &out,
    );
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("--prompt-tokens, --requests missing"), "{err}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn an_adhoc_run_writes_a_suite_that_reproduces_a_comparable_run() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("adhoc"), dir.path().join("again"));
    let target = engine.base_url.as_str();
    let cell_flags = [
        "--prompt-tokens",
        "128",
        "--tolerance-percent",
        "25",
        "--max-tokens",
        "4",
        "--requests",
        "3",
        "--concurrency",
        "1,2",
        "--seed",
        "1",
        "--ignore-eos",
    ];
    let mut args = vec!["run", "--quiet", "--target", target];
    args.extend(cell_flags);
    let res = infergate(&args, &first);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let suite = first.join(SUITE_FILE);
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(stdout.contains(&suite.display().to_string()), "{stdout}");

    let a = artifact(&first);
    let names: Vec<&str> = a.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["p128-o4-c1", "p128-o4-c2"]);
    for c in &a.cells {
        assert_eq!((c.requests, c.succeeded), (3, 3), "{}", c.name);
        assert!(c.performance_eligible, "{:?}", c.ineligible_reasons);
    }
    assert_eq!(a.cells[1].shape.concurrency, 2);
    let text = std::fs::read(&suite).unwrap();
    assert_eq!(
        a.provenance.suite_sha256.as_deref(),
        Some(infergate::util::sha256_hex(&text).as_str()),
        "the run recorded the sha256 of the file it wrote"
    );

    let suite_arg = suite.display().to_string();
    let res = infergate(
        &["run", "--quiet", "--target", target, "--suite", &suite_arg],
        &second,
    );
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let b = artifact(&second);
    assert_eq!(b.provenance.suite, a.provenance.suite);
    assert_eq!(b.provenance.suite_sha256, a.provenance.suite_sha256);

    let rep = report::compare_files(
        &first.join(ARTIFACT_FILE),
        &second.join(ARTIFACT_FILE),
        None,
    )
    .expect("compare accepts the ad-hoc run and its rerun");
    let cells: Vec<&str> = rep.cells.iter().map(|(k, _)| k).collect();
    assert_eq!(cells, ["p128-o4-c1", "p128-o4-c2"]);

    // The same flags with one value changed are another workload: refused.
    let mut other = cell_flags.to_vec();
    other[7] = "2";
    let mut args = vec!["run", "--quiet", "--target", target];
    args.extend(other);
    let third = dir.path().join("other");
    let res = infergate(&args, &third);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let e = report::compare_files(&first.join(ARTIFACT_FILE), &third.join(ARTIFACT_FILE), None)
        .unwrap_err();
    // The error's Display is its headline; the differences are in its source.
    let e = format!("{:#}", anyhow::Error::from(e));
    assert!(
        e.contains("suite_sha256") && e.contains("requests 3 vs 2"),
        "{e}"
    );
}
