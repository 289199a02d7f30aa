//! End to end on the real reference engine: qualify two profiles through the
//! process driver, decide, see the ledger, stop; and resume an interrupted
//! qualification.

mod qualify_support;
mod support;

use std::time::Duration;

use infergate::artifact::Schedule;
use infergate::decision::decide;
use infergate::decision::status;
use infergate::driver::handle::Handle;
use infergate::qualify::{self, Verdict};
use infergate::report::{self, DecisionAction};
use infergate::runtime::ledger::Ledger;
use infergate::runtime::lifecycle;
use qualify_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qualify_then_retain_baseline_restores_and_readmits_it() {
    let _serial = serial().await;
    let env = Env::new();
    env.suite(3, 8);
    // Two passes each, alternating: baseline, candidate, candidate, baseline.
    let plan = env.plan("engine_profile = \"candidate\"", "repeats = 2");
    let o = qualify::run(&plan, &env.opts("q-happy"))
        .await
        .expect("qualify");
    let entries = env.entries("q-happy");
    assert!(
        matches!(o.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}\n{}",
        o.verdict,
        o.failure,
        steps(&entries).join("\n")
    );
    // Both runtimes measured in A B B A order, each started and stopped; then the
    // baseline restored and readmitted while the decision is pending.
    let s = steps(&entries);
    let order: Vec<&String> = s
        .iter()
        .filter(|x| x.starts_with("run ") && x.ends_with(" ok"))
        .collect();
    assert_eq!(
        order,
        [
            "run baseline ok",
            "run candidate ok",
            "run candidate ok",
            "run baseline ok"
        ],
        "{}",
        s.join("\n")
    );
    let passes: Vec<u64> = entries
        .iter()
        .filter(|e| e.step == "run" && e.status.as_str() == "ok")
        .filter_map(|e| e.detail["pass"].as_u64())
        .collect();
    assert_eq!(passes, [1, 1, 2, 2]);
    for want in [
        "preflight - ok",
        "compare - ok",
        "report - ok",
        "restore baseline ok",
        "readmit baseline ok",
        "serving baseline ok",
        "done - ok",
    ] {
        assert!(has(&entries, want), "missing {want:?} in\n{}", s.join("\n"));
    }
    for check in ["health", "identity", "canary"] {
        assert!(
            entries.iter().any(|e| e.step == "readmit-check"
                && e.detail["check"] == check
                && e.status.as_str() == "ok"),
            "{check}"
        );
    }
    let first = assert_baseline_serving(&entries).await;

    let report_path = o.report.clone().expect("report");
    let v = report::read_report_value(&report_path).unwrap();
    assert_eq!(v["schema"], "runtime-profile-comparison/v1");
    assert_eq!(v["human_decision"], "pending");
    assert!(
        v["promotion"]
            .as_str()
            .unwrap()
            .starts_with("pending; baseline restored and readmitted"),
        "{}",
        v["promotion"]
    );
    assert!(
        v["baseline_image"]
            .as_str()
            .unwrap()
            .contains("engine profile baseline"),
        "{}",
        v["baseline_image"]
    );
    // The passes of each runtime are pooled: 2 × 3 requests per side.
    assert_eq!(
        v["cells"]["tiny"]["baseline_requests"], 6,
        "{}",
        v["cells"]["tiny"]
    );
    assert_eq!(v["cells"]["tiny"]["candidate_requests"], 6);
    let pooled = report::read_artifact(&o.out_dir.join("candidate.json")).unwrap();
    assert_eq!(pooled.cells[0].requests, 6);
    assert!(pooled.method["passes"].contains("pooled over 2 passes"));

    // The report verifies against its own pass directories; one edited
    // journal line is named by file and line (issue 14).
    let pass = |label: &str| -> Vec<std::path::PathBuf> {
        (1..=2)
            .map(|n| qualify::pass_dir(&o.out_dir, label, n))
            .collect()
    };
    let dirs = infergate::verify_runs::RunDirs {
        baseline: pass("baseline"),
        candidate: pass("candidate"),
        suite: Some(env.dir.path().join("suite.toml")),
    };
    let checked = infergate::verify_runs::verify_runs(&v, &dirs);
    assert!(checked.is_clean(), "{:#?}", checked.disagreements);
    // The directory alone names the same runs (`infergate verify DIR`).
    let (report_file, found) = infergate::verify_runs::qualification_dirs(&o.out_dir).unwrap();
    assert_eq!(report_file, report_path);
    assert_eq!(
        (&found.baseline, &found.candidate),
        (&dirs.baseline, &dirs.candidate)
    );
    let journal = dirs.baseline[1].join(infergate::measure::runner::JOURNAL_FILE);
    let (original, at) = edit_first_ok_record(&journal, "e2e_ms", 2.0);
    let edited = infergate::verify_runs::verify_runs(&v, &dirs);
    assert!(
        edited.disagreements.iter().any(|d| d.path == at),
        "{at} not named: {:#?}",
        edited.disagreements
    );
    // Nor is a decision taken on a report its runs no longer bear out.
    let recorded = env.entries("q-happy").len();
    let e = decide_err(&report_path, DecisionAction::RetainBaseline, true).await;
    assert!(e.contains("does not verify") && e.contains(&at), "{e}");
    std::fs::write(&journal, original).unwrap();

    // A decision on a forged copy is refused, naming the digests, and
    // records nothing.
    let copy = env.dir.path().join("forged");
    copy_dir(&o.out_dir, &copy);
    let forged = copy.join(report_path.file_name().unwrap());
    let mut f: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&forged).unwrap()).unwrap();
    f["strict_turnover_gate_passed"] = true.into();
    f["qualification"] = report::QUAL_PASS.into();
    std::fs::write(&forged, serde_json::to_vec_pretty(&f).unwrap()).unwrap();
    let e = decide_err(&forged, DecisionAction::Promote, true).await;
    assert!(
        e.contains("is not the report infergate last wrote") && e.contains("sha256"),
        "{e}"
    );
    // A promotion of a failed qualification needs --force.
    if !report::gate::qualified(&serde_json::from_value(v.clone()).unwrap()) {
        let e = decide_err(&report_path, DecisionAction::Promote, false).await;
        assert!(e.contains("--force"), "{e}");
    }
    assert_eq!(env.entries("q-happy").len(), recorded, "nothing recorded");

    // The human decides: retain the baseline. It is still serving, so it is
    // verified and readmitted again rather than restarted.
    let d = decide::run(&decide::Options {
        report: report_path.clone(),
        action: DecisionAction::RetainBaseline,
        note: "strict turnover failed".into(),
        who: Some("alice".into()),
        ledger: None, // found through qualification.json
        force: false,
        verify: infergate::verify_runs::check_qualification,
        quiet: false,
    })
    .await
    .expect("decide");
    assert!(d.carried_out, "{}", d.promotion);
    let v = report::read_report_value(&report_path).unwrap();
    assert_eq!(
        v["human_decision"],
        "retain-baseline; strict turnover failed"
    );
    assert_eq!(v["decision"]["action"], "retain-baseline");
    assert_eq!(v["decision"]["who"], "alice");
    assert!(
        v["decision"]["when"]
            .as_str()
            .is_some_and(|w| w.ends_with('Z'))
    );
    let promotion = v["promotion"].as_str().unwrap();
    assert!(
        promotion.starts_with("alice selected retain-baseline/no-promotion after "),
        "{promotion}"
    );
    assert!(
        promotion.contains("exact baseline verified and readmitted"),
        "{promotion}"
    );
    let entries = env.entries("q-happy");
    let decision = detail_of(&entries, "decision", "-", "ok");
    assert_eq!(decision.len(), 1);
    assert_eq!(decision[0]["who"], "alice");
    assert_eq!(decision[0]["note"], "strict turnover failed");
    assert_eq!(assert_baseline_serving(&entries).await, first);

    // Status derives all of this from the ledger alone.
    let text = status::run(&status::Options {
        id: Some("q-happy".into()),
        ledger: Some(env.ledger.clone().into()),
        json: false,
    })
    .await
    .unwrap();
    assert!(text.contains("decision:  retain-baseline"), "{text}");
    assert!(text.contains("serving:   baseline"), "{text}");
    assert!(text.contains("(running)"), "{text}");

    // Re-running a finished qualification changes nothing.
    let again = qualify::run(&plan, &env.opts("q-happy")).await.unwrap();
    assert_eq!(again.verdict, o.verdict);
    assert_eq!(env.entries("q-happy").len(), entries.len());

    // `infergate stop` retires it.
    let out = infergate::runtime::stop::stop("q-happy", Some(env.ledger.clone().into()), true)
        .await
        .unwrap();
    assert!(out.contains("retired baseline"), "{out}");
    let Handle::Process {
        pid, start_ticks, ..
    } = first
    else {
        panic!("{first:?}")
    };
    assert!(!infergate::driver::detached::ProcessIdentity { pid, start_ticks }.is_alive());
    assert!(lifecycle::serving(&env.entries("q-happy")).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_qualification_resumes_where_it_stopped() {
    let _serial = serial().await;
    let env = Env::new();
    env.suite(8, 16);
    let plan = env.plan(
        "engine_profile = \"candidate\"",
        "schedule = \"alternating\"",
    );
    // Interrupt mid-way (as a crash or Ctrl-C would): drop the future once the
    // candidate's pass has begun, leaving its server running.
    let ledger = Ledger::open(&env.ledger).unwrap();
    let opts = env.opts("q-resume");
    let interrupted = tokio::select! {
        r = qualify::run(&plan, &opts) => Some(r),
        _ = async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let e = ledger.entries("q-resume").unwrap_or_default();
                if e.iter().any(|e| e.step == "run" && e.runtime.as_deref() == Some("candidate")) {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    break;
                }
            }
        } => None,
    };
    assert!(
        interrupted.is_none(),
        "qualification finished before it could be interrupted"
    );
    let before = env.entries("q-resume");
    let left = lifecycle::leftovers(&before);
    assert_eq!(left.len(), 1, "{}", steps(&before).join("\n"));
    assert_eq!(left[0].0, "candidate");
    let text = status::run(&status::Options {
        id: Some("q-resume".into()),
        ledger: Some(env.ledger.clone().into()),
        json: false,
    })
    .await
    .unwrap();
    assert!(
        text.contains("unfinished") && text.contains("LEFT RUNNING"),
        "{text}"
    );

    // Rerunning the id: the leftover is stopped, the baseline pass is kept,
    // the candidate pass continues from its journal.
    let o = qualify::run(&plan, &env.opts("q-resume"))
        .await
        .expect("resume");
    let entries = env.entries("q-resume");
    let s = steps(&entries);
    assert!(
        matches!(o.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}\n{}",
        o.verdict,
        o.failure,
        s.join("\n")
    );
    assert!(has(&entries, "resume - info"), "{}", s.join("\n"));
    let runs_ok: Vec<&String> = s
        .iter()
        .filter(|x| x.starts_with("run ") && x.ends_with(" ok"))
        .collect();
    assert_eq!(
        runs_ok,
        ["run baseline ok", "run candidate ok"],
        "baseline pass must not rerun:\n{}",
        s.join("\n")
    );
    let resumed = detail_of(&entries, "run", "candidate", "started");
    assert_eq!(resumed.len(), 2);
    assert_eq!(resumed[1]["resume"], true);
    assert!(
        entries.iter().any(|e| e.step == "stop"
            && e.runtime.as_deref() == Some("candidate")
            && e.detail["reason"] == "left running by an interrupted invocation"),
        "{}",
        s.join("\n")
    );
    let Handle::Process {
        pid, start_ticks, ..
    } = &left[0].1
    else {
        panic!()
    };
    assert!(
        !infergate::driver::detached::ProcessIdentity {
            pid: *pid,
            start_ticks: *start_ticks
        }
        .is_alive()
    );
    assert!(lifecycle::leftovers(&entries).is_empty());
    assert_baseline_serving(&entries).await;
    // Every candidate request is in the pooled journal exactly once.
    let art = report::read_artifact(&o.out_dir.join("candidate-1/run.json")).unwrap();
    assert_eq!(art.cells[0].requests, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interleaved_qualification_alternates_blocks_and_pairs_them_by_block() {
    let _serial = serial().await;
    let env = Env::new();
    // 5 requests per side in blocks of 2: blocks 0 and 1 whole, block 2 of one.
    env.suite(5, 8);
    let plan = env.plan(
        "engine_profile = \"candidate\"",
        "schedule = \"interleaved\"\nwindow = 2",
    );
    let o = qualify::run(&plan, &env.opts("q-inter"))
        .await
        .expect("qualify");
    let entries = env.entries("q-inter");
    let s = steps(&entries);
    assert!(
        matches!(o.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}\n{}",
        o.verdict,
        o.failure,
        s.join("\n")
    );
    // Both up at once (one start each before any block), blocks in one
    // timeline, A B B A, each finished before the next began.
    let first_block = s.iter().position(|x| x.starts_with("block ")).unwrap();
    assert_eq!(
        s[..first_block]
            .iter()
            .filter(|x| x.starts_with("start ") && x.ends_with(" ok"))
            .collect::<Vec<_>>(),
        ["start baseline ok", "start candidate ok"],
        "{}",
        s.join("\n")
    );
    let blocks: Vec<String> = entries
        .iter()
        .filter(|e| e.step == "block")
        .map(|e| {
            format!(
                "{} {} {}",
                e.detail["block"],
                e.runtime.as_deref().unwrap_or("-"),
                e.status.as_str()
            )
        })
        .collect();
    let want: Vec<String> = [
        (0, "baseline"),
        (0, "candidate"),
        (1, "candidate"),
        (1, "baseline"),
        (2, "baseline"),
        (2, "candidate"),
    ]
    .iter()
    .flat_map(|(k, side)| [format!("{k} {side} started"), format!("{k} {side} ok")])
    .collect();
    assert_eq!(blocks, want, "{}", s.join("\n"));
    // Turnover-free suite: each side's run entry names the model, then both stop.
    for want in [
        "run baseline ok",
        "run candidate ok",
        "stop baseline ok",
        "stop candidate ok",
        "interleaved - ok",
        "compare - ok",
        "report - ok",
        "serving baseline ok",
        "done - ok",
    ] {
        assert!(has(&entries, want), "missing {want:?} in\n{}", s.join("\n"));
    }
    assert!(!has(&entries, "round - ok"), "not adaptive");
    assert!(
        o.spent
            .as_deref()
            .unwrap_or("")
            .starts_with("5 measured requests per side"),
        "{:?}",
        o.spent
    );

    // One merged artifact per side: every block pooled, clusters = blocks,
    // the same ids on both sides; every block's requests in the journal.
    // The blocks were pooled in memory: no block, merge or comparison read
    // a journal back.
    for label in ["baseline", "candidate"] {
        let journal = qualify::interleaved_dir(&o.out_dir, label).join("journal.jsonl");
        assert_eq!(infergate::util::read_counts::reads(&journal), 0, "{label}");
    }
    let mut clusters = Vec::new();
    for label in ["baseline", "candidate"] {
        let art = report::read_artifact(&o.out_dir.join(format!("{label}.json"))).unwrap();
        assert_eq!(art.schedule, Some(Schedule::Interleaved), "{label}");
        assert!(art.method["schedule"].contains("interleaved"), "{label}");
        let cell = &art.cells[0];
        assert_eq!((cell.requests, cell.succeeded), (5, 5), "{label}: {cell:?}");
        let journal = infergate::measure::journal::read(
            &o.out_dir.join(format!("{label}-interleaved/journal.jsonl")),
        )
        .unwrap();
        support::assert_eligible_but_one_read(cell, &journal);
        let mut idx: Vec<usize> = journal.iter().map(|r| r.index).collect();
        idx.sort();
        assert_eq!(idx, [0, 1, 2, 3, 4], "{label}");
        for (k, v) in &cell.samples {
            assert_eq!(cell.sample_clusters[k].len(), v.len(), "{label} {k}");
        }
        clusters.push(cell.sample_clusters["ttft_ms"].clone());
    }
    assert_eq!(clusters[0], [0, 0, 1, 1, 2]);
    assert_eq!(clusters[0], clusters[1]);

    // The report compares the pooled blocks; the baseline serves again.
    let v = report::read_report_value(&o.report.clone().expect("report")).unwrap();
    assert_eq!(
        v["cells"]["tiny"]["baseline_requests"], 5,
        "{}",
        v["cells"]["tiny"]
    );
    assert_eq!(v["cells"]["tiny"]["candidate_requests"], 5);

    // verify --runs pools the blocks again from their journal:
    // clean as made, and an edited journal line is named by file and line.
    let side = |label: &str| vec![o.out_dir.join(format!("{label}.json"))];
    let dirs = infergate::verify_runs::RunDirs {
        baseline: side("baseline"),
        candidate: side("candidate"),
        suite: None,
    };
    let checked = infergate::verify_runs::verify_runs(&v, &dirs);
    assert!(checked.is_clean(), "{:#?}", checked.disagreements);
    assert!(
        !checked
            .unchecked
            .iter()
            .any(|u| u.contains("taken as given") || u.contains("run_artifact's sha256")),
        "{:#?}",
        checked.unchecked
    );
    let journal = o.out_dir.join("candidate-interleaved/journal.jsonl");
    let (original, at) = edit_first_ok_record(&journal, "ttft_ms", 3.0);
    let edited = infergate::verify_runs::verify_runs(&v, &dirs);
    assert!(
        edited.disagreements.iter().any(|d| d.path == at),
        "{at} not named: {:#?}",
        edited.disagreements
    );
    // `infergate verify DIR` says the same: exit 1, the line named.
    let cli = |dir: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .arg("verify")
            .arg(dir)
            .output()
            .unwrap()
    };
    let out = cli(&o.out_dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&at));
    std::fs::write(&journal, original).unwrap();
    let out = cli(&o.out_dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    assert!(
        v["promotion"]
            .as_str()
            .unwrap()
            .starts_with("pending; baseline restored and readmitted"),
        "{}",
        v["promotion"]
    );
    assert_baseline_serving(&entries).await;
    assert!(lifecycle::leftovers(&entries).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adaptive_qualification_stops_at_its_budget_and_resumes_by_rounds() {
    let _serial = serial().await;
    let env = Env::new();
    let suite = env.suite(4, 8);
    // The shipped default policy, from a file of this test's own, so the
    // reads of it can be counted.
    let policy = env.write(
        "policy.toml",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/policies/default.toml"
        )),
    );
    // Blocks of 4; 16 requests per side per cell allow 2 rounds (A B B A
    // each: two blocks of 4, a round's 8 requests per side).
    let plan = env.plan(
        "engine_profile = \"candidate\"",
        "window = 4\npolicy = \"policy.toml\"\n[adaptive]\nmax_requests = 16\nmax_minutes = 30",
    );
    // Adaptive by the flag (as `--adaptive`); interrupted inside round 2.
    let ledger = Ledger::open(&env.ledger).unwrap();
    let mut opts = env.opts("q-adaptive");
    opts.adaptive = true;
    let interrupted = tokio::select! {
        r = qualify::run(&plan, &opts) => Some(r),
        _ = async {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let e = ledger.entries("q-adaptive").unwrap_or_default();
                let round = e.iter().any(|e| e.step == "round");
                let blocks = e.iter().filter(|e| e.step == "block" && e.status.as_str() == "started").count();
                if round && blocks >= 6 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    break;
                }
            }
        } => None,
    };
    assert!(
        interrupted.is_none(),
        "finished before it could be interrupted"
    );
    // One reading of the suite and of the policy for the whole invocation:
    // not one per block, look or comparison.
    let reads = || {
        (
            infergate::util::read_counts::reads(&suite),
            infergate::util::read_counts::reads(&policy),
        )
    };
    assert_eq!(reads(), (1, 1), "reads of the suite and the policy");
    let before = env.entries("q-adaptive");
    assert_eq!(
        lifecycle::leftovers(&before).len(),
        2,
        "both runtimes up at once:\n{}",
        steps(&before).join("\n")
    );

    // Resumed without the flag: it keeps the mode it began with.
    let o = qualify::run(&plan, &env.opts("q-adaptive"))
        .await
        .expect("resume");
    // The resumed invocation read each once more, through its two looks.
    assert_eq!(reads(), (2, 2), "reads of the suite and the policy");
    let entries = env.entries("q-adaptive");
    let s = steps(&entries);
    assert!(
        matches!(o.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}\n{}",
        o.verdict,
        o.failure,
        s.join("\n")
    );
    let rounds = detail_of(&entries, "round", "-", "ok");
    assert_eq!(rounds.len(), 2, "{}", s.join("\n"));
    for (i, r) in rounds.iter().enumerate() {
        assert_eq!(r["round"], i as u64 + 1);
        // Every look is told how many looks the budget allows.
        assert_eq!(r["looks"], 2);
        assert_eq!(r["requests_per_side"]["tiny"], 8 * (i as u64 + 1));
    }
    assert!(rounds[0]["stop"].is_null());
    // The budget's last round ends the run; its look may also resolve the
    // gate (both engines serve the same requests, paired request by request).
    let stop = rounds[1]["stop"].as_str().unwrap_or_default();
    assert!(
        stop == "budget spent: max_requests" || stop.starts_with("resolved: "),
        "{stop}"
    );
    let spent = detail_of(&entries, "adaptive", "-", "ok");
    assert_eq!(spent.len(), 1, "{}", s.join("\n"));
    assert_eq!(spent[0]["rounds"], 2);
    assert_eq!(spent[0]["requests_per_side"], 16);
    assert!(spent[0]["minutes"].as_f64().unwrap() > 0.0);
    assert!(
        o.spent
            .as_deref()
            .unwrap_or("")
            .contains("adaptive: 2 rounds"),
        "{:?}",
        o.spent
    );
    // The blocks were pooled in memory: the resumed invocation read each
    // side's journal once, to recover what the interrupted one measured;
    // no block, look or merge read it again.
    for label in ["baseline", "candidate"] {
        let journal = qualify::interleaved_dir(&o.out_dir, label).join("journal.jsonl");
        assert_eq!(infergate::util::read_counts::reads(&journal), 1, "{label}");
    }
    // Blocks finished before the interruption were kept, none ran twice.
    let mut done: Vec<String> = entries
        .iter()
        .filter(|e| e.step == "block" && e.status.as_str() == "ok")
        .map(|e| {
            format!(
                "{} {}",
                e.detail["block"],
                e.runtime.as_deref().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(done.len(), 8, "{}", s.join("\n"));
    done.sort();
    done.dedup();
    assert_eq!(done.len(), 8, "a block ran twice:\n{}", s.join("\n"));
    assert!(
        entries.iter().any(|e| e.step == "stop"
            && e.detail["reason"] == "left running by an interrupted invocation"),
        "{}",
        s.join("\n")
    );
    let mut clusters = Vec::new();
    for label in ["baseline", "candidate"] {
        let journal = infergate::measure::journal::read(
            &o.out_dir.join(format!("{label}-interleaved/journal.jsonl")),
        )
        .unwrap();
        let mut idx: Vec<usize> = journal.iter().map(|r| r.index).collect();
        idx.sort();
        assert_eq!(
            idx,
            (0..16).collect::<Vec<_>>(),
            "{label}: each request once"
        );
        let art = report::read_artifact(&o.out_dir.join(format!("{label}.json"))).unwrap();
        assert_eq!(art.schedule, Some(Schedule::Interleaved));
        assert_eq!(art.cells[0].requests, 16);
        clusters.push(art.cells[0].sample_clusters["ttft_ms"].clone());
    }
    assert_eq!(clusters[0], clusters[1]);
    let blocks_of_4: Vec<u32> = (0..16).map(|i| i / 4).collect();
    assert_eq!(clusters[0], blocks_of_4);
    // The report is the look after the last round, at that look's share of alpha.
    let v = report::read_report_value(&o.report.clone().expect("report")).unwrap();
    let fw = &v["statistics"]["family_wise"];
    assert_eq!(
        (fw["look"].as_u64(), fw["looks"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(fw["spending"], "o_brien_fleming");
    // Each look spends by the share of the rounds the run will have:
    // the request budget allows 2 (the clock far more), so the first look is
    // at 1/2, and the last, which the budget ends, at 1 after it, across the
    // interruption.
    assert_eq!(
        (
            rounds[0]["previous_information_fraction"].as_f64(),
            rounds[0]["information_fraction"].as_f64()
        ),
        (Some(0.0), Some(0.5))
    );
    assert_eq!(
        (
            fw["previous_information_fraction"].as_f64(),
            fw["information_fraction"].as_f64()
        ),
        (Some(0.5), Some(1.0))
    );
    assert_eq!(rounds[1]["information_fraction"].as_f64(), Some(1.0));
    // Its levels are exact group-sequential boundaries over every look's
    // fraction, the one before the interruption included (the ledger's).
    assert_eq!(fw["boundaries"], "group_sequential");
    assert_eq!(fw["information_fractions"], serde_json::json!([0.5, 1.0]));
    // Looks by the design (the default): the pass side's own fractions are
    // recorded too, from the ledger's rounds across the interruption; the
    // design plans nothing from two rounds, so they are the same.
    assert_eq!(rounds[0]["pass_information_fraction"].as_f64(), Some(0.5));
    assert_eq!(
        fw["pass_information_fractions"],
        serde_json::json!([0.5, 1.0])
    );
    let m = fw["gating_pairs"].as_u64().unwrap() as usize;
    let spending = infergate_report::stats::evidence::Spending::OBrienFleming;
    let exact = infergate_report::design::Look::planned(2, 2, spending)
        .at_fractions(vec![0.5, 1.0], Some(vec![0.5, 1.0]))
        .levels(0.05, m);
    assert_eq!(
        (fw["alpha_pass"].as_f64(), fw["alpha_fail"].as_f64()),
        (Some(exact.0), Some(exact.1))
    );
    // A cell warms up on each runtime once per process lifetime (two here:
    // before and after the interruption), not before every block; each
    // block says how many warmup requests it ran.
    let warmed = entries
        .iter()
        .filter(|e| e.step == "block" && e.status.as_str() == "started")
        .filter(|e| e.detail["warmup"].as_u64().unwrap_or(0) > 0)
        .count();
    assert!(
        (2..=4).contains(&warmed),
        "{warmed} blocks warmed up:\n{}",
        s.join("\n")
    );
    // The cost line counts the warmups as sent (per side, the larger),
    // not one per block.
    let sent = |side: &str| -> u64 {
        entries
            .iter()
            .filter(|e| e.step == "block" && e.status.as_str() == "started")
            .filter(|e| e.runtime.as_deref() == Some(side))
            .filter_map(|e| e.detail["warmup"].as_u64())
            .sum()
    };
    assert_eq!(
        spent[0]["warmup_requests_per_side"].as_u64(),
        Some(sent("baseline").max(sent("candidate"))),
        "{}",
        s.join("\n")
    );
    assert!(has(&entries, "report - ok"), "{}", s.join("\n"));
    assert_baseline_serving(&entries).await;
    assert!(lifecycle::leftovers(&entries).is_empty());
}

/// Multiply `field` of the journal's first successful record by `factor`,
/// written in place. Returns the original text (to put back) and the
/// `file:line` verify must name.
/// `decide` on `report`, which must be refused: the error's text.
async fn decide_err(report: &std::path::Path, action: DecisionAction, force: bool) -> String {
    let e = decide::run(&decide::Options {
        report: report.to_path_buf(),
        action,
        note: "n".into(),
        who: Some("mallory".into()),
        ledger: None,
        force,
        verify: infergate::verify_runs::check_qualification,
        quiet: true,
    })
    .await
    .expect_err("refused");
    format!("{e:#}")
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn edit_first_ok_record(journal: &std::path::Path, field: &str, factor: f64) -> (String, String) {
    let original = std::fs::read_to_string(journal).unwrap();
    let mut lines: Vec<String> = original.lines().map(String::from).collect();
    let k = lines
        .iter()
        .position(|l| l.contains("\"outcome\":\"ok\""))
        .expect("a successful request");
    let mut rec: serde_json::Value = serde_json::from_str(&lines[k]).unwrap();
    let t = rec["capture"][field].as_f64().unwrap();
    rec["capture"][field] = (t * factor).into();
    lines[k] = rec.to_string();
    std::fs::write(journal, lines.join("\n") + "\n").unwrap();
    (original, format!("{}:{}", journal.display(), k + 1))
}

/// `qualify --baseline URL --candidate URL`: no plan file. One endpoint
/// twice is an A/A run and says so; the plan and suite land beside the
/// report, and `qualify DIR/plan.toml` repeats the qualification from them.
/// Bad input is refused before anything is written. About 30 s: one small
/// cell, no turnover, a budget of 4 requests per side, twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_endpoints_qualify_without_a_plan_file_and_the_written_plan_repeats_it() {
    let _serial = serial().await;
    let engine = support::engine("baseline");
    let env = Env::new();
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .arg("qualify")
            .args(args)
            .arg("--ledger")
            .arg(&env.ledger)
            .arg("--out")
            .arg(env.path("out"))
            .output()
            .unwrap()
    };
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let url = engine.base_url.as_str();
    let small = [
        "--cells",
        "128x1",
        "--no-turnover",
        "--max-requests",
        "4",
        "--max-minutes",
        "1",
    ];
    // Refused before a request or a file: not http(s), a cell the server
    // cannot hold, a candidate missing.
    for (args, want) in [
        (
            vec!["--baseline", "file:///etc", "--candidate", url],
            "--baseline: \"file:///etc\" is not an http(s) URL",
        ),
        (
            vec!["--baseline", url, "--candidate", url, "--cells", "9000x1"],
            "--cells 9000x1: up to 9450 prompt tokens",
        ),
        (vec!["--baseline", url], "--candidate <URL>"),
    ] {
        let o = cli(&args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(want), "{want:?} not in {}", text(&o));
    }
    assert!(!env.path("out").exists(), "nothing written");

    let mut args = vec!["--baseline", url, "--candidate", url, "--id", "aa-1"];
    args.extend(small);
    let o = cli(&args);
    let out = text(&o);
    // Turnover skipped: never qualified, and never failed for the skip.
    assert!(matches!(o.status.code(), Some(1 | 3 | 4)), "{out}");
    assert!(out.contains("an A/A run"), "{out}");
    assert!(!out.contains("the candidate has no turnover run"), "{out}");
    let dir = env.path("out").join("aa-1");
    for f in ["plan.toml", "suite.toml", "report.json"] {
        assert!(dir.join(f).is_file(), "{f} in {}", dir.display());
    }
    let plan = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    assert!(
        plan.contains("driver = \"external\"") && plan.contains("max_requests = 4"),
        "{plan}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    let cells: Vec<&String> = report["cells"].as_object().unwrap().keys().collect();
    assert_eq!(cells, ["p128-c1"], "{report}");
    assert_eq!(
        report["turnover_gate"]["not_run"], "skipped_by_plan",
        "{report}"
    );

    // The written plan repeats it: same suite, same endpoints.
    let again = cli(&[dir.join("plan.toml").to_str().unwrap(), "--id", "aa-2"]);
    assert!(
        matches!(again.status.code(), Some(1 | 3 | 4)),
        "{}",
        text(&again)
    );
    let suite = |id: &str| {
        let v: serde_json::Value = serde_json::from_slice(
            &std::fs::read(env.path("out").join(id).join("report.json")).unwrap(),
        )
        .unwrap();
        v["provenance"]["baseline"]["suite_sha256"].clone()
    };
    assert!(suite("aa-1").is_string());
    assert_eq!(suite("aa-1"), suite("aa-2"));
}

/// A loopback receiver for URL hooks: every request's body, answered 200.
fn receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/infergate", listener.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            keep.lock()
                .unwrap()
                .push(format!("{head}\n{}", String::from_utf8_lossy(&body)));
            let _ = (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, got)
}

/// A plan's `[hooks]`: the summary reaches a command's standard input and
/// a loopback URL once per verdict and once per decision, with no secret
/// in it; a hook that fails and one that hangs are recorded and change
/// nothing else. About 15 s: an A/A qualification of the shared engine
/// through the external driver, then a decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_hear_the_verdict_and_the_decision_and_their_failures_change_nothing() {
    let _serial = serial().await;
    let engine = support::engine("baseline");
    let env = Env::new();
    env.suite(2, 4);
    let (url, got) = receiver();
    let stdin_copy = env.path("verdict.json");
    let runtime = |label: &str| {
        format!(
            "[{label}]\ndriver = \"external\"\nurl = \"{}\"\napi_key_env = \"INFERGATE_HOOK_TEST_KEY\"\n",
            engine.base_url
        )
    };
    let plan = env.write(
        "plan.toml",
        &format!(
            "name = \"hooks\"\nsuite = \"suite.toml\"\nschedule = \"alternating\"\nrepeats = 1\n{}{}\
             [hooks]\non_verdict = [\n  {{ command = [\"sh\", \"-c\", \"cat > {}\"] }},\n  {{ url = \"{url}\" }},\n  \
             {{ command = [\"sh\", \"-c\", \"echo refused by the pager >&2; exit 3\"] }},\n  \
             {{ command = [\"sleep\", \"30\"], timeout_s = 1 }},\n]\non_decision = [{{ url = \"{url}\" }}]\n",
            runtime("baseline"),
            runtime("candidate"),
            stdin_copy.display()
        ),
    );
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(args)
            .arg("--ledger")
            .arg(&env.ledger)
            .env("INFERGATE_HOOK_TEST_KEY", "sekrit-hook-key")
            .current_dir(plan.parent().unwrap())
            .output()
            .unwrap()
    };
    let q = run(&["qualify", "plan.toml", "--id", "q-hooks", "--out", "out"]);
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&q.stdout),
        String::from_utf8_lossy(&q.stderr)
    );
    assert!(matches!(q.status.code(), Some(0 | 1 | 3)), "{shown}");
    assert!(
        shown.contains("hook on verdict FAILED (nothing else changes)"),
        "{shown}"
    );
    let entries = env.entries("q-hooks");
    let hooks: Vec<(String, String)> = entries
        .iter()
        .filter(|e| e.step == "hook")
        .map(|e| (e.status.as_str().to_string(), e.detail.to_string()))
        .collect();
    assert_eq!(hooks.len(), 4, "{hooks:#?}");
    assert_eq!(
        hooks.iter().filter(|(s, _)| s == "ok").count(),
        2,
        "{hooks:#?}"
    );
    assert!(
        hooks[2].1.contains("exited 3: refused by the pager"),
        "{hooks:#?}"
    );
    assert!(
        hooks[3].1.contains("did not finish within 1s; killed"),
        "{hooks:#?}"
    );
    let done = entries.iter().rfind(|e| e.step == "done").unwrap();
    assert_eq!(
        done.status.as_str(),
        "ok",
        "the hooks' failures fail nothing"
    );

    // The command's standard input and the URL's body: one verdict summary.
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stdin_copy).unwrap()).unwrap();
    assert_eq!(verdict["event"], "verdict");
    assert_eq!(verdict["qualification"], "q-hooks");
    assert!(verdict["gates"].is_string(), "{verdict}");
    let report = env.path("out/q-hooks/report.json");
    let at_verdict = verdict["report"]["sha256"].as_str().unwrap().to_string();
    let bodies = got.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "{bodies:#?}");
    assert!(bodies[0].contains("\"event\":\"verdict\""), "{}", bodies[0]);

    let d = run(&[
        "decide",
        report.to_str().unwrap(),
        "--retain-baseline",
        "--note",
        "hooks test",
    ]);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let bodies = got.lock().unwrap().clone();
    assert_eq!(
        bodies.len(),
        2,
        "once per verdict, once per decision: {bodies:#?}"
    );
    let decision: serde_json::Value =
        serde_json::from_str(bodies[1].split_once("\n\n").unwrap().1.trim()).unwrap();
    assert_eq!(decision["event"], "decision");
    assert_eq!(decision["action"], "retain-baseline");
    assert_eq!(decision["note"], "hooks test");
    // The decision rewrote the report: its summary names the new bytes.
    let now = infergate::report::digest::sha256_hex(&std::fs::read(&report).unwrap());
    assert_eq!(decision["report"]["sha256"], now.as_str());
    assert_ne!(at_verdict, now);
    for b in &bodies {
        assert!(!b.contains("sekrit"), "{b}");
    }
    assert!(
        !std::fs::read_to_string(&stdin_copy)
            .unwrap()
            .contains("sekrit")
    );
}
