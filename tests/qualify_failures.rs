//! Failure paths on real processes (the reference engine): the candidate
//! fails to start, crashes mid-run, or fails readmission on identity; the
//! baseline cannot be restored. In each, the baseline ends up serving (or,
//! refused at preflight, nothing was touched) and the ledger says what happened.

mod qualify_support;

use std::time::Duration;

use infergate::decision::decide;
use infergate::driver::handle::Handle;
use infergate::qualify::{self, Verdict};
use infergate::report::{self, DecisionAction};
use infergate::runtime::ledger::Ledger;
use qualify_support::*;

/// A profiles file whose `broken` profile serves a file that is not a GGUF model.
fn broken_profiles(env: &Env) -> std::path::PathBuf {
    env.write("garbage.gguf", "this is not a GGUF model\n");
    env.write(
        "profiles.toml",
        &format!(
            "[broken]\nctx_size = 8192\nparallel = 2\nbatch = 2048\nubatch = 512\nthreads = 2\nalias = \"{MODEL}\"\nmodel = \"garbage.gguf\"\n"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidate_that_fails_to_start_leaves_the_baseline_serving() {
    let _serial = serial().await;
    let env = Env::new();
    env.suite(2, 4);
    broken_profiles(&env);
    // Passes, one runtime at a time: the baseline is measured before the candidate starts.
    let plan = env.plan(
        "engine_profile = \"broken\"\nengine_profiles = \"profiles.toml\"",
        "schedule = \"alternating\"",
    );
    let o = qualify::run(&plan, &env.opts("q-nostart"))
        .await
        .expect("qualify");
    let entries = env.entries("q-nostart");
    let s = steps(&entries).join("\n");
    assert_eq!(o.verdict, Verdict::Failed, "{s}");
    assert!(o.report.is_none());
    let failure = o.failure.clone().unwrap_or_default();
    assert!(failure.starts_with("candidate start:"), "{failure}");
    // The ledger: baseline measured, candidate start failed with its log kept,
    // then rollback restored and readmitted the baseline.
    assert!(has(&entries, "run baseline ok"), "{s}");
    let failed = detail_of(&entries, "start", "candidate", "failed");
    assert_eq!(failed.len(), 1, "{s}");
    let err = failed[0]["error"].as_str().unwrap();
    assert!(
        err.contains("exited") && err.contains("log kept at"),
        "{err}"
    );
    let log = o.out_dir.join("logs/candidate-pass-1.log");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("garbage.gguf"),
        "{}",
        log.display()
    );
    for want in [
        "rollback - started",
        "restore baseline ok",
        "rollback - ok",
        "done - failed",
    ] {
        assert!(has(&entries, want), "missing {want:?} in\n{s}");
    }
    assert!(!has(&entries, "run candidate started"), "{s}");
    assert_baseline_serving(&entries).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidate_crashing_mid_run_ends_the_pass_and_restores_the_baseline() {
    let _serial = serial().await;
    let env = Env::new();
    env.suite(12, 16);
    let plan = env.plan(
        "engine_profile = \"candidate\"",
        "schedule = \"alternating\"",
    );
    let ledger = Ledger::open(&env.ledger).unwrap();
    let journal = env.out.join("q-crash/candidate-1/journal.jsonl");
    // Kill the candidate's server (SIGKILL, as a crash) once its suite has
    // measured its first request.
    let killer = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if std::fs::read_to_string(&journal).is_ok_and(|j| j.lines().count() >= 1) {
                let e = ledger.entries("q-crash").unwrap_or_default();
                let started = detail_of(&e, "start", "candidate", "ok");
                let Some(Handle::Process { pid, .. }) = started
                    .last()
                    .and_then(|d| Handle::from_value(&d["handle"]))
                else {
                    panic!("no candidate handle");
                };
                // SAFETY: signals the candidate server this test's qualification started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return pid;
            }
        }
    };
    let opts = env.opts("q-crash");
    let t0 = std::time::Instant::now();
    let (o, killed) = tokio::join!(qualify::run(&plan, &opts), killer);
    let o = o.expect("qualify");
    let entries = env.entries("q-crash");
    let s = steps(&entries).join("\n");
    assert_eq!(o.verdict, Verdict::Failed, "{s}");
    let failure = o.failure.clone().unwrap_or_default();
    assert!(failure.starts_with("candidate run:"), "{failure}");
    assert!(
        failure.contains(&format!("process {killed}")) && failure.contains("SIGKILL"),
        "{failure}"
    );
    let failed = detail_of(&entries, "run", "candidate", "failed");
    assert_eq!(failed.len(), 1, "{s}");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("stopped during the suite"),
        "{}",
        failed[0]
    );
    // What it measured before the crash is kept for inspection.
    assert!(std::fs::read_to_string(&journal).unwrap().lines().count() >= 1);
    for want in [
        "run baseline ok",
        "stop candidate ok",
        "rollback - ok",
        "serving baseline ok",
        "done - failed",
    ] {
        assert!(has(&entries, want), "missing {want:?} in\n{s}");
    }
    // The pass ended when the server died, not after every request timed out.
    assert!(
        t0.elapsed() < Duration::from_secs(170),
        "{:?}",
        t0.elapsed()
    );
    assert_baseline_serving(&entries).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotion_failing_identity_readmission_restores_the_baseline() {
    let _serial = serial().await;
    let env = Env::new();
    env.suite(2, 4);
    // The candidate serves the same model as the baseline (so the two compare),
    // but readmission expects another: promotion must not admit it.
    let plan = env.plan(
        "engine_profile = \"candidate\"\nexpected_model = \"SmolLM2-360M-Instruct\"",
        "",
    );
    let o = qualify::run(&plan, &env.opts("q-ident"))
        .await
        .expect("qualify");
    assert!(
        matches!(o.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}",
        o.verdict,
        o.failure
    );
    let report_path = o.report.expect("report");
    let before = env.entries("q-ident");
    assert!(
        detail_of(&before, "run", "candidate", "info")
            .iter()
            .any(|d| d["warning"].as_str().unwrap_or("").contains("SmolLM2-360M")),
        "the mismatch is noted at measurement time:\n{}",
        steps(&before).join("\n")
    );

    let d = decide::run(&decide::Options {
        report: report_path.clone(),
        action: DecisionAction::Promote,
        note: "faster".into(),
        who: Some("bob".into()),
        ledger: Some(env.ledger.clone().into()),
        // Whatever its gates said: this checks the candidate's readmission.
        force: true,
        verify: infergate::verify_runs::check_qualification,
        quiet: false,
    })
    .await
    .expect("decide");
    assert!(!d.carried_out, "{}", d.promotion);
    let entries = env.entries("q-ident");
    let s = steps(&entries).join("\n");
    let ident = entries
        .iter()
        .find(|e| {
            e.step == "readmit-check"
                && e.runtime.as_deref() == Some("candidate")
                && e.detail["check"] == "identity"
        })
        .unwrap_or_else(|| panic!("no candidate identity check:\n{s}"));
    assert_eq!(ident.status.as_str(), "failed");
    let detail = ident.detail["detail"].as_str().unwrap();
    assert!(
        detail.contains(MODEL) && detail.contains("SmolLM2-360M-Instruct"),
        "{detail}"
    );
    // Not admitted: no canary, no serving entry; stopped with its log kept; baseline back.
    assert!(!entries.iter().any(|e| e.step == "readmit-check"
        && e.runtime.as_deref() == Some("candidate")
        && e.detail["check"] == "canary"));
    assert!(!has(&entries, "serving candidate ok"), "{s}");
    for want in [
        "decision - ok",
        "retire baseline ok",
        "start candidate ok",
        "readmit candidate failed",
        "stop candidate ok",
        "rollback - ok",
        "promotion - failed",
    ] {
        assert!(has(&entries, want), "missing {want:?} in\n{s}");
    }
    assert!(o.out_dir.join("logs/candidate-promote.log").is_file());
    assert_baseline_serving(&entries).await;

    let v = report::read_report_value(&report_path).unwrap();
    assert_eq!(v["decision"]["action"], "promote");
    assert_eq!(v["human_decision"], "promote; faster");
    let promotion = v["promotion"].as_str().unwrap();
    assert!(
        promotion.starts_with("bob selected promotion after "),
        "{promotion}"
    );
    assert!(
        promotion.contains("promotion FAILED")
            && promotion.contains("identity")
            && promotion.contains("exact baseline restored and readmitted"),
        "{promotion}"
    );
}

#[tokio::test]
async fn a_baseline_that_could_not_be_restored_refuses_before_changing_anything() {
    let _serial = serial().await;
    let env = Env::new();
    env.suite(2, 4);
    env.write(
        "profiles.toml",
        "[gone]\nctx_size = 8192\nparallel = 2\nbatch = 2048\nubatch = 512\nthreads = 2\nmodel = \"missing.gguf\"\n",
    );
    let plan = env.write(
        "plan.toml",
        "suite = \"suite.toml\"\n[baseline]\ndriver = \"process\"\nengine_profile = \"gone\"\nengine_profiles = \"profiles.toml\"\n\
         [candidate]\ndriver = \"process\"\nengine_profile = \"candidate\"\n",
    );
    let o = qualify::run(&plan, &env.opts("q-refuse"))
        .await
        .expect("qualify");
    let entries = env.entries("q-refuse");
    let s = steps(&entries).join("\n");
    assert_eq!(o.verdict, Verdict::Refused, "{s}");
    assert!(o.failure.unwrap_or_default().contains("missing.gguf"));
    assert_eq!(
        steps(&entries),
        ["plan - ok", "preflight baseline failed", "done - failed"],
        "{s}"
    );
    assert!(o.serving.is_none());
}
