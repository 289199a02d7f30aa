//! `infergate compare` and `infergate report` on synthetic run artifacts:
//! the JUnit XML a parser reads and the job summary `compare` appends to,
//! and the CSV tables Python's `csv` module reads. `compare` itself on the
//! same runs is tested in the report crate (`crates/report/tests/compare.rs`).

use std::path::Path;

use infergate::artifact::metric;
use infergate::report::{self, Policy, compare};
use infergate_report::fixtures::seed_like;
use serde_json::Value;

/// These tests check the seed's point-delta table and wordings, so they
/// decide by the point rule; the evidence rule has tests of its own.
fn fast_policy() -> Policy {
    let mut p = Policy {
        source: "tests: defaults with 2000 iterations, point rule".into(),
        ..Policy::default()
    };
    p.bootstrap.iterations = 2000;
    p.gate.decide = report::GateRule::Point;
    p
}

/// What CI reads: `compare --junit` writes JUnit XML that a real consumer
/// (junitparser, from PyPI; `scripts/setup-junitparser.sh`) reads back as
/// one case per deciding gate part with the report's outcome and reason,
/// and `$GITHUB_STEP_SUMMARY` gets the Markdown report appended.
#[test]
fn compare_writes_junit_a_parser_reads_and_appends_the_job_summary() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (b, mut c) = seed_like();
    // A regression in one cell: failures and passes both in the XML.
    for cell in &mut c.cells {
        if cell.name == "capacity-4k" {
            for s in cell.samples.get_mut(metric::TTFT_MS).into_iter().flatten() {
                *s *= 1.4;
            }
        }
    }
    std::fs::write(d.join("b.json"), serde_json::to_vec(&b).unwrap()).unwrap();
    std::fs::write(d.join("c.json"), serde_json::to_vec(&c).unwrap()).unwrap();
    std::fs::write(
        d.join("policy.toml"),
        "threshold_percent = 5\n[bootstrap]\niterations = 500\n",
    )
    .unwrap();
    let summary = d.join("summary.md");
    std::fs::write(&summary, "# earlier step\n").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(d)
        .args(["compare", "b.json", "c.json", "--policy", "policy.toml"])
        .args(["-o", "r.json", "--junit", "r.xml"])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let v = report::read_report_value(&d.join("r.json")).expect("the report");
    assert!(
        o.status.code().is_some_and(|c| c != 2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The job summary: appended after what was there, verdict included.
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("# earlier step\n"), "{md}");
    let qual = v["qualification"].as_str().unwrap();
    assert!(md.contains(qual), "{qual:?} not in {md}");

    // What the report says each deciding gate part was.
    let mut want: Vec<(String, String, String, String)> = vec![(
        "qualification".into(),
        "qualification".into(),
        if v["gates"]["qualified"] == true {
            "passed"
        } else {
            "failure"
        }
        .into(),
        qual.into(),
    )];
    let evidence = v["statistics"]["gate_decides"] == "evidence";
    for (gate, g) in v["gates"].as_object().unwrap() {
        let deciding = match gate.as_str() {
            "performance" => !evidence,
            "performance_evidence" => evidence,
            "non_inferior_turnover" => v["turnover_gate"]["mode"] == "non_inferior",
            "strict_turnover" => v["turnover_gate"]["mode"] != "non_inferior",
            _ => g.is_object(),
        };
        if !deciding {
            continue;
        }
        for p in g["parts"].as_array().unwrap() {
            let result = match (p["outcome"].as_str(), p["passed"].as_bool()) {
                (Some("pass"), _) | (None, Some(true)) => "passed",
                (Some("inconclusive"), _) => "skipped",
                _ => "failure",
            };
            let reason = p["reason"].as_str().unwrap().to_string();
            let message = if result == "skipped" {
                format!("inconclusive: {reason}")
            } else if result == "failure" {
                reason
            } else {
                String::new()
            };
            want.push((
                format!("gates.{gate}"),
                p["subject"].as_str().unwrap().into(),
                result.into(),
                message,
            ));
        }
    }
    assert!(
        want.iter()
            .any(|w| w.2 == "failure" && w.0 != "qualification"),
        "{want:?}"
    );
    assert!(want.iter().any(|w| w.2 == "passed"), "{want:?}");

    // junitparser's reading of the file.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup-junitparser.sh");
    let setup = std::process::Command::new(&script).output().unwrap();
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let python = String::from_utf8(setup.stdout).unwrap();
    let python = python.lines().last().unwrap().trim();
    let got = python_json(
        python,
        "import json, sys\n\
             from junitparser import JUnitXml\n\
             xml = JUnitXml.fromfile(sys.argv[1])\n\
             out = []\n\
             for suite in xml:\n\
             \x20   for case in suite:\n\
             \x20       r = case.result\n\
             \x20       kind = r[0]._tag if r else 'passed'\n\
             \x20       msg = (r[0].message or '') if r else ''\n\
             \x20       out.append([suite.name, case.name, kind, msg])\n\
             print(json.dumps({'tests': xml.tests, 'failures': xml.failures, 'skipped': xml.skipped, 'cases': out}))\n",
        &d.join("r.xml"),
    );
    let cases: Vec<(String, String, String, String)> =
        serde_json::from_value(got["cases"].clone()).unwrap();
    let key = |c: &(String, String, String, String)| (c.0.clone(), c.1.clone(), c.2.clone());
    assert_eq!(
        cases.iter().map(key).collect::<Vec<_>>(),
        want.iter().map(key).collect::<Vec<_>>()
    );
    // Each message is the report's reason as the views show it: the
    // estimate named (two runs: the point delta), a rate's bounds as the
    // candidate's speed over the baseline's, bounds that inform no one as
    // their part's words; the rest of the reason as stored.
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for (c, w) in cases.iter().zip(&want) {
        if c.3 == w.3 {
            continue;
        }
        let thin = parts
            .iter()
            .find(|p| w.0 == "gates.performance_evidence" && p["subject"] == c.1.as_str())
            .filter(|p| p["informative"] == false);
        if let Some(p) = thin {
            let words = p["not_informative"].as_str().unwrap();
            let (_, tail) = w.3.split_once("%)").unwrap();
            assert_eq!(c.3, format!("inconclusive: {words}{tail}"), "{}", c.1);
            continue;
        }
        let shown =
            w.3.replace("worse-direction change", "point delta, worse direction");
        let rate = c.1.contains("_tok_s") || c.1.contains("_per_s");
        let tail = |m: &str| m.split_once("; ").map(|(_, t)| t.to_string());
        assert!(
            c.3 == shown || (rate && c.3.contains(" as fast") && tail(&c.3) == tail(&w.3)),
            "{}: {:?} against the stored {:?}",
            c.1,
            c.3,
            w.3
        );
    }
    let count = |r: &str| want.iter().filter(|w| w.2 == r).count();
    assert_eq!(got["tests"], want.len());
    assert_eq!(got["failures"], count("failure"));
    assert_eq!(got["skipped"], count("skipped"));
}

/// `report --csv DIR`: Python's `csv` reads one row per cell metric (values
/// and the deciding bounds as in the JSON) and one per recorded request.
#[test]
fn report_csv_is_read_by_pythons_csv_module() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut b, mut c) = seed_like();
    // Request rows as a run keeps them: one failed request among them.
    for (art, failed) in [(&mut b, Some(1)), (&mut c, None)] {
        let cell = &mut art.cells[0];
        let ttft = cell.samples[metric::TTFT_MS].clone();
        cell.request_rows = ttft
            .iter()
            .enumerate()
            .map(|(i, t)| infergate::artifact::RequestRow {
                ok: failed != Some(i),
                send_offset_ms: i as f64 * 100.0,
                queue_ms: 0.0,
                ttft_ms: (failed != Some(i)).then_some(*t),
                tpot_ms: None,
                e2e_ms: None,
                completion_tokens: None,
                cluster: 0,
            })
            .collect();
    }
    let r = compare(&b, &c, &fast_policy()).expect("compare");
    report::write_report_atomic(&d.join("r.json"), &r).unwrap();
    let v = report::read_report_value(&d.join("r.json")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(d)
        .args(["report", "r.json", "--csv", "tables"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = python_json(
        "python3",
        "import csv, json, sys\n\
             rows = {n: list(csv.DictReader(open(sys.argv[1] + '/' + n + '.csv', newline=''))) for n in ('metrics', 'requests')}\n\
             print(json.dumps(rows))\n",
        &d.join("tables"),
    );
    let metrics = got["metrics"].as_array().unwrap();
    let mut want_metrics = 0;
    let mut want_requests = 0;
    for (cell, cv) in v["cells"].as_object().unwrap() {
        for (name, m) in cv["metrics"].as_object().unwrap() {
            want_metrics += 1;
            let row = metrics
                .iter()
                .find(|r| r["cell"] == cell.as_str() && r["metric"] == name.as_str())
                .unwrap_or_else(|| panic!("{cell} {name} missing"));
            let num = |k: &str| row[k].as_str().unwrap().parse::<f64>().unwrap();
            assert_eq!(num("baseline"), m["baseline"].as_f64().unwrap());
            assert_eq!(num("candidate"), m["candidate"].as_f64().unwrap());
            let decision = m["evidence"]["outcome"]
                .as_str()
                .or(m["verdict"].as_str())
                .unwrap();
            assert_eq!(row["decision"], decision, "{row}");
        }
        for side in ["baseline", "candidate"] {
            want_requests += cv["request_rows"][side].as_array().map_or(0, Vec::len);
        }
    }
    assert_eq!(metrics.len(), want_metrics);
    assert!(want_requests > 0, "the fixture keeps request rows");
    let rows = got["requests"].as_array().unwrap();
    assert_eq!(rows.len(), want_requests);
    let failed: Vec<&Value> = rows.iter().filter(|r| r["ok"] == "false").collect();
    assert_eq!(failed.len(), 1, "the failed request is a row too");
    assert_eq!(failed[0]["side"], "baseline");
    assert_eq!(failed[0]["ttft_ms"], "");
}

/// Run `script` with `python` on `arg`; what it printed, as JSON.
fn python_json(python: &str, script: &str, arg: &Path) -> Value {
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(arg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
