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
        "--slo",
        "ttft:60000,e2e:120000",
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
    let recs =
        infergate::measure::journal::read(&first.join(infergate::measure::runner::JOURNAL_FILE))
            .unwrap();
    for c in &a.cells {
        assert_eq!((c.requests, c.succeeded), (3, 3), "{}", c.name);
        support::assert_eligible_but_one_read(c, &recs);
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
    let deferred = most_deferred(&first);
    slo_in_the_runs_the_report_and_every_renderer(&a, &rep, &stdout, deferred);

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

/// `--slo` on the real engine: attainment and goodput in the run (its
/// summary line and artifact), in the report with its evidence, and in all
/// three renderers. The targets are generous, so every request meets them.
/// The most requests llama.cpp's own gauge saw waiting for a slot in the
/// run at `dir`, read from the raw scrapes (not through infergate's report).
fn most_deferred(dir: &std::path::Path) -> f64 {
    let text = std::fs::read_to_string(dir.join("server-metrics.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .flat_map(|v| v["samples"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["name"] == "llamacpp:requests_deferred")
        .filter_map(|s| s["value"].as_f64())
        .fold(0.0, f64::max)
}

fn slo_in_the_runs_the_report_and_every_renderer(
    a: &RunArtifact,
    rep: &report::Report,
    stdout: &str,
    deferred: f64,
) {
    for c in &a.cells {
        let slo = c.slo.as_ref().expect("the run reports SLO attainment");
        assert_eq!((slo.met, slo.of), (3, 3), "{}", c.name);
        assert_eq!(slo.attainment, 1.0);
        assert_eq!(c.request_rows.len(), 3);
        // Goodput: the 3 requests over the cell's own window.
        let rps = slo.goodput_rps.expect("a window");
        assert!((rps - 3.0 / slo.window_s).abs() < 1e-9, "{rps}");
        let tokens: u64 = c
            .request_rows
            .iter()
            .filter_map(|r| r.completion_tokens)
            .sum();
        assert!((slo.goodput_tok_s.unwrap() - tokens as f64 / slo.window_s).abs() < 1e-9);
        // The window is bounded by the cell's own requests.
        let last_end = c
            .request_rows
            .iter()
            .map(|r| r.send_offset_ms + r.e2e_ms.unwrap())
            .fold(0.0, f64::max);
        let first = c
            .request_rows
            .iter()
            .map(|r| r.send_offset_ms)
            .fold(f64::MAX, f64::min);
        assert!((slo.window_s - (last_end - first) / 1000.0).abs() < 1e-9);
    }
    assert!(
        stdout.contains("SLO ttft_ms <= 60000, e2e_ms <= 120000: 3/3 met"),
        "{stdout}"
    );
    let value = rep.to_value();
    let cell = &value["cells"]["p128-o4-c1"];
    assert_eq!(cell["slo"]["source"], "suite");
    assert_eq!(cell["slo"]["baseline"]["met"], 3);
    assert_eq!(
        cell["slo"]["evidence"]["outcome"], "inconclusive",
        "3 requests a side cannot show a 5-point margin"
    );
    assert!(
        cell["slo"]["evidence"]["requests_to_resolve"]
            .as_u64()
            .unwrap()
            > 3
    );
    // The suite's SLOs are reported; only a policy's gate.
    assert_eq!(cell["slo"]["gating"], false);
    let parts = value["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    assert!(
        !parts
            .iter()
            .any(|p| p["subject"] == "cells.p128-o4-c1.slo_attainment"),
        "the suite's attainment is not a gate part"
    );
    let found = report::verify(&value);
    assert!(found.is_empty(), "the report verifies: {found:?}");
    for (name, text) in [
        (
            "terminal",
            report::terminal(&value, report::TerminalOptions::verbose(false)),
        ),
        // Markdown escapes `_` (emphasis) in report text.
        ("markdown", report::markdown(&value).replace("\\_", "_")),
        ("html", report::html(&value)),
    ] {
        assert!(
            text.contains("SLO (ttft_ms") && text.contains("60000, e2e_ms"),
            "{name} shows the SLO"
        );
        assert!(
            text.contains("3/3 met = 100.0%"),
            "{name} shows the attainment"
        );
        assert!(text.contains("req/s"), "{name} shows the goodput");
        let timings = text
            .lines()
            .find(|l| l.contains("server timings, baseline (3 requests): "))
            .unwrap_or_else(|| panic!("{name} shows the server timings"));
        // Two slots, at most two in flight: a request waits for a slot only
        // when it is sent between the server's last chunk of the one before
        // and that slot's release (seen once under load, 2026-12-05). The
        // line names queueing exactly when the server's own gauge saw a wait.
        assert!(
            timings.contains("client overhead (")
                && timings.contains("client TTFT − server prompt time p50"),
            "{name} shows the client-minus-server overhead: {timings}"
        );
        assert_eq!(
            timings.contains("queueing +"),
            deferred > 0.0,
            "{name} names queueing as llama.cpp's requests_deferred ({deferred}) says: {timings}"
        );
    }
    let html = report::html(&value);
    assert!(
        html.contains("ttft_ms by request, in send order") && html.contains("e2e_ms by request"),
        "the HTML plots each request over the run"
    );
}

/// An open-loop sweep with an SLO on the real engine: every rate holds the
/// generous target, so the highest rate holding is the highest swept; 3
/// requests a rate cannot show 90 % with confidence, and the run says so.
#[test]
fn an_open_loop_rate_sweep_reports_the_highest_rate_holding_its_slo() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let res = infergate(
        &[
            "run",
            "--quiet",
            "--target",
            engine.base_url.as_str(),
            "--prompt-tokens",
            "128",
            "--tolerance-percent",
            "25",
            "--max-tokens",
            "2",
            "--requests",
            "3",
            "--rate",
            "0.5,1",
            "--arrival",
            "constant",
            "--slo",
            "e2e:60000",
        ],
        &out,
    );
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let a = artifact(&out);
    assert_eq!(a.rate_sweeps.len(), 1, "{:?}", a.rate_sweeps);
    let s = &a.rate_sweeps[0];
    assert_eq!(s.rates, vec![0.5, 1.0]);
    assert_eq!(s.attainment, vec![1.0, 1.0]);
    assert_eq!(s.highest_rate_holding, Some(1.0));
    assert_eq!(
        s.highest_rate_confidently_holding, None,
        "3 of 3 has a Wilson lower bound of 0.44"
    );
    assert!(
        stdout.contains("highest rate holding 90% attainment: 1 req/s (with 95% confidence: none)"),
        "{stdout}"
    );
}
