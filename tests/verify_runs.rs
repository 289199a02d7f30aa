//! `verify --runs`: a report made again from its run directories. The runs
//! are real `infergate run`s (the runner's own code path: journal appended
//! per request, artifact aggregated from it) against the loopback fast
//! source, so no engine is needed. Each edit of a journal or artifact after
//! the fact must be named by file (and line, for a journal).

use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;

use infergate::measure::client::Timeouts;
use infergate::measure::runner::{self, ARTIFACT_FILE, JOURNAL_FILE, RunOptions};
use infergate::report::{self, Verification};
use infergate::verify_runs::{RunDirs, verify_runs};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use serde_json::Value;

const SUITE: &str = r#"
name = "verify-runs"
[[cell]]
name = "small"
prompt_tokens = 200
tolerance_percent = 50
max_tokens = 8
concurrency = 2
requests = 8
warmup = 1
seed = 3

[[turnover]]
name = "churn"
contract = "words"
requests = 4
concurrency = 2
repeats = 2
"#;

struct Runs {
    _dir: tempfile::TempDir,
    base: PathBuf,
    cand: PathBuf,
    suite: PathBuf,
    report: Value,
    report_file: PathBuf,
}

impl Runs {
    fn dirs(&self, suite: bool) -> RunDirs {
        RunDirs {
            baseline: vec![self.base.clone()],
            candidate: vec![self.cand.clone()],
            suite: suite.then(|| self.suite.clone()),
        }
    }

    fn verify(&self, suite: bool) -> Verification {
        verify_runs(&self.report, &self.dirs(suite))
    }

    fn journal(&self) -> PathBuf {
        self.base.join(JOURNAL_FILE)
    }
}

fn opts(target: &str, suite: &Path, out: PathBuf, label: &str) -> RunOptions {
    RunOptions {
        runtime_label: Some(label.into()),
        image: Some(format!("registry.example/fast@sha256:{label}")),
        timeouts: Timeouts {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            total: Duration::from_secs(20),
            per_1k_prompt_tokens: Duration::ZERO,
        },
        skip_turnover: None,
        ..support::run_opts(target, suite.to_path_buf(), out)
    }
}

/// Two runs against the fast source, compared from their files.
async fn runs() -> Runs {
    runs_skipping(None).await
}

/// [`runs`], both made with `skip` (their turnover left out as asked).
async fn runs_skipping(skip: Option<infergate::artifact::TurnoverSkip>) -> Runs {
    let (_, src) = FastSource::start(FastSourceConfig {
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).expect("suite");
    let (base, cand) = (dir.path().join("base"), dir.path().join("cand"));
    for (label, out) in [("baseline", &base), ("candidate", &cand)] {
        let o = RunOptions {
            skip_turnover: skip,
            ..opts(&src.base_url(), &suite, out.clone(), label)
        };
        runner::run(&o).await.expect("run");
    }
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[bootstrap]\niterations = 500\n").expect("policy");
    let r = report::compare_files(
        &base.join(ARTIFACT_FILE),
        &cand.join(ARTIFACT_FILE),
        Some(&policy),
    )
    .expect("compare");
    let report_file = dir.path().join("report.json");
    report::write_report_atomic(&report_file, &r).expect("write");
    let report = report::read_report_value(&report_file).expect("read");
    Runs {
        _dir: dir,
        base,
        cand,
        suite,
        report,
        report_file,
    }
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .expect("journal")
        .lines()
        .map(String::from)
        .collect()
}

fn write_lines(p: &Path, lines: &[String]) {
    std::fs::write(p, lines.join("\n") + "\n").expect("write journal");
}

/// 1-based line of the first successful record of cell `small`.
fn first_cell_line(lines: &[String]) -> usize {
    lines
        .iter()
        .position(|l| {
            let v: Value = serde_json::from_str(l).expect("record");
            v["cell"] == "small" && v["outcome"] == "ok"
        })
        .expect("a cell record")
        + 1
}

#[track_caller]
fn names(v: &Verification, path: &str) {
    assert!(
        v.disagreements.iter().any(|d| d.path == path),
        "{path} not named in {:#?}",
        v.disagreements
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_verifies_against_its_own_runs() {
    let r = runs().await;
    let inputs = r.report["provenance"]["inputs"].as_array().expect("inputs");
    assert_eq!(inputs.len(), 4, "two artifacts, two journals: {inputs:?}");
    for suite in [false, true] {
        let v = r.verify(suite);
        assert!(v.is_clean(), "{:#?}", v.disagreements);
        assert!(
            !v.unchecked.iter().any(|u| u.contains("--runs")),
            "{:?}",
            v.unchecked
        );
    }
    assert!(
        r.verify(false)
            .unchecked
            .iter()
            .any(|u| u.contains("--suite"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_edited_journal_line_is_named_by_file_and_line() {
    let r = runs().await;
    let j = r.journal();
    let mut ls = lines(&j);
    let n = first_cell_line(&ls);
    let mut rec: Value = serde_json::from_str(&ls[n - 1]).expect("record");
    let t = rec["capture"]["ttft_ms"].as_f64().expect("ttft");
    rec["capture"]["ttft_ms"] = (t * 0.5).into();
    ls[n - 1] = rec.to_string();
    write_lines(&j, &ls);
    let v = r.verify(false);
    let file = j.display().to_string();
    names(&v, &format!("{file}:{n}"));
    names(&v, &file);

    // The CLI says the same, and fails.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("verify")
        .arg(&r.report_file)
        .arg("--runs")
        .args([&r.base, &r.cand])
        .output()
        .expect("infergate verify");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{file}:{n}: found cell `small`")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_record_is_named() {
    let r = runs().await;
    let j = r.journal();
    let mut ls = lines(&j);
    let n = first_cell_line(&ls);
    let rec: Value = serde_json::from_str(&ls[n - 1]).expect("record");
    ls.remove(n - 1);
    write_lines(&j, &ls);
    let v = r.verify(false);
    let file = j.display().to_string();
    let idx = rec["index"].as_u64().expect("index");
    assert!(
        v.disagreements.iter().any(|d| d.path == file
            && d.found
                .contains(&format!("no record of cell `small` request(s) {idx}"))),
        "{:#?}",
        v.disagreements
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_added_record_is_named_by_line() {
    let r = runs().await;
    let j = r.journal();
    let mut ls = lines(&j);
    let n = first_cell_line(&ls);
    ls.push(ls[n - 1].clone());
    write_lines(&j, &ls);
    let v = r.verify(false);
    names(&v, &format!("{}:{}", j.display(), ls.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_artifact_that_disagrees_with_its_journal_is_named() {
    let r = runs().await;
    let art = r.base.join(ARTIFACT_FILE);
    let mut a: Value =
        serde_json::from_slice(&std::fs::read(&art).expect("artifact")).expect("json");
    let s = &mut a["cells"][0]["samples"]["ttft_ms"][0];
    *s = (s.as_f64().expect("sample") + 1.0).into();
    std::fs::write(&art, serde_json::to_vec_pretty(&a).expect("json")).expect("write");
    let v = r.verify(false);
    let name = art.display().to_string();
    names(&v, &name);
    assert!(
        v.disagreements.iter().any(
            |d| d.path.starts_with(&format!("{}:", r.journal().display()))
                && d.expected
                    .contains(&format!("{name} cells[0].samples.ttft_ms[0]"))
        ),
        "{:#?}",
        v.disagreements
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_turnover_answer_is_judged_again_with_the_suite() {
    let r = runs().await;
    let j = r.journal();
    let mut ls = lines(&j);
    let n = ls
        .iter()
        .position(|l| l.contains("\"cell\":\"turnover:churn#1\""))
        .expect("a turnover record")
        + 1;
    let mut rec: Value = serde_json::from_str(&ls[n - 1]).expect("record");
    rec["capture"]["content"] = "rewritten after the run".into();
    ls[n - 1] = rec.to_string();
    write_lines(&j, &ls);
    let v = r.verify(true);
    names(&v, &format!("{}:{n}", j.display()));
}

/// A qualification's alternating passes: two per side, pooled as `qualify`
/// pools them, verify against their own pass directories; one edited
/// journal line in a pass is named by file and line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_passes_verify_against_their_pass_directories() {
    let (_, src) = FastSource::start(FastSourceConfig {
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).expect("suite");
    let mut sides = Vec::new();
    for label in ["baseline", "candidate"] {
        let mut passes = Vec::new();
        for n in 1..=2 {
            let out = infergate::qualify::pass_dir(dir.path(), label, n);
            runner::run(&opts(&src.base_url(), &suite, out.clone(), label))
                .await
                .expect("run");
            passes.push(out);
        }
        sides.push(passes);
    }
    let mut policy = report::Policy {
        source: "tests".into(),
        ..report::Policy::default()
    };
    policy.bootstrap.iterations = 500;
    let merged: Vec<_> = sides
        .iter()
        .map(|p| infergate::measure::pool::merge_passes(&suite, p).expect("merge"))
        .collect();
    let report = report::compare(&merged[0], &merged[1], &policy)
        .expect("compare")
        .to_value();
    let dirs = RunDirs {
        baseline: sides[0].clone(),
        candidate: sides[1].clone(),
        suite: Some(suite.clone()),
    };
    let v = verify_runs(&report, &dirs);
    assert!(v.is_clean(), "{:#?}", v.disagreements);

    let j = sides[0][1].join(JOURNAL_FILE);
    let mut ls = lines(&j);
    let n = first_cell_line(&ls);
    let mut rec: Value = serde_json::from_str(&ls[n - 1]).expect("record");
    let t = rec["capture"]["e2e_ms"].as_f64().expect("e2e");
    rec["capture"]["e2e_ms"] = (t * 3.0).into();
    ls[n - 1] = rec.to_string();
    write_lines(&j, &ls);
    let v = verify_runs(&report, &dirs);
    names(&v, &format!("{}:{n}", j.display()));
    assert!(
        v.disagreements
            .iter()
            .any(|d| d.path.starts_with("cells.small.")),
        "the pooled report disagrees too: {:#?}",
        v.disagreements
    );
}

/// Runs made with the plan's skip record it in their artifacts; the report
/// says the turnover gates did not run and verifies against those runs. A
/// candidate artifact that says it did not skip makes a different report,
/// so the report's "skipped" is caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skip_is_recorded_by_the_run_and_held_to_it() {
    use infergate::artifact::TurnoverSkip;
    let r = runs_skipping(Some(TurnoverSkip::SkippedByPlan)).await;
    let art: Value =
        serde_json::from_str(&std::fs::read_to_string(r.cand.join(ARTIFACT_FILE)).unwrap())
            .unwrap();
    assert_eq!(art["turnover_not_run"], "skipped_by_plan", "{art:#}");
    assert!(
        art.get("turnover")
            .is_none_or(|t| t == &serde_json::json!([]))
    );
    assert_eq!(r.report["turnover_gate"]["not_run"], "skipped_by_plan");
    let q = r.report["qualification"].as_str().unwrap();
    assert!(q.ends_with("turnover not run (skipped by the plan)"), "{q}");
    let v = r.verify(true);
    assert!(v.is_clean(), "{:#?}", v.disagreements);
    assert!(
        !v.unchecked
            .iter()
            .any(|u| u.contains("turnover_gate.not_run")),
        "the runs hold the skip: {:?}",
        v.unchecked
    );

    // The candidate's run, as if it had not skipped: its report differs.
    let file = r.cand.join(ARTIFACT_FILE);
    let mut art = art;
    art.as_object_mut().unwrap().remove("turnover_not_run");
    std::fs::write(&file, serde_json::to_string_pretty(&art).unwrap()).unwrap();
    let v = r.verify(true);
    names(&v, "turnover_gate.not_run");
}

/// The suite given is the one the runs ran: a suite edited since is named
/// by its file, as the report's `provenance.<side>.suite_sha256` records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_suite_is_named_by_file() {
    let r = runs().await;
    let mut text = std::fs::read_to_string(&r.suite).expect("suite");
    text.push_str("# edited after the run\n");
    std::fs::write(&r.suite, text).expect("suite");
    let v = r.verify(true);
    names(&v, &r.suite.display().to_string());
}

/// `infergate verify DIR` of a two-URL qualification (interleaved, its
/// suite copied into DIR) names an edited `DIR/suite.toml`, as it names an
/// edited plan copy.
#[test]
fn verify_dir_names_an_edited_suite_copy() {
    let (_, src) = FastSource::start(FastSourceConfig {
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let infergate = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .current_dir(d)
            .args(args)
            .env_remove("INFERGATE_LEDGER")
            .output()
            .expect("infergate");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    };
    let url = src.base_url();
    let (code, out) = infergate(&[
        "qualify",
        "--baseline",
        &url,
        "--candidate",
        &url,
        "--cells",
        "64x1",
        "--no-turnover",
        "--max-requests",
        "4",
        "--max-minutes",
        "1",
        "--out",
        "out",
        "--id",
        "q",
        "--ledger",
        "L.sqlite",
    ]);
    assert!(matches!(code, Some(0 | 1 | 3 | 4)), "{out}");
    let q = d.join("out/q");
    let (code, out) = infergate(&["verify", q.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    let suite = q.join("suite.toml");
    let mut text = std::fs::read_to_string(&suite).expect("suite copy");
    text.push_str("# edited after the run\n");
    std::fs::write(&suite, text).expect("suite copy");
    let (code, out) = infergate(&["verify", q.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&suite.display().to_string()), "{out}");
}
