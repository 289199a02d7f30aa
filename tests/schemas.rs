//! The published JSON Schemas (`schemas/*.json`) hold for what infergate
//! really writes: the run artifact and journal of real `infergate run`s
//! against the reference engine (a cell with SLOs, so attainment, goodput
//! and request rows are in them), the report `compare` makes of them
//! (before and after a decision), and the seed report; the optional parts a
//! clean run leaves out come from infergate's own types. An artifact missing a required field
//! must not validate, or the schemas would promise nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;

use boon::{Compiler, SchemaIndex, Schemas};
use infergate::measure::client::Timeouts;
use infergate::measure::runner::{self, ARTIFACT_FILE, JOURNAL_FILE, RunOptions};
use infergate::report::{self, Decision, DecisionAction};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use serde_json::Value;

const RUN: &str = "infergate-run.v1.json";
const RECORD: &str = "journal-record.v1.json";
const REPORT: &str = "runtime-profile-comparison.v1.json";

/// A suite with a cell and a turnover run, so both parts of the artifact
/// (and of the report) are exercised.
const SUITE: &str = r#"
name = "schemas"
[[cell]]
name = "small"
prompt_tokens = 200
tolerance_percent = 50
max_tokens = 8
concurrency = 2
requests = 6
warmup = 1
seed = 3
slo = { ttft_ms = 60000, e2e_ms = 120000 }

[[turnover]]
name = "churn"
contract = "words"
requests = 4
concurrency = 2
repeats = 2
"#;

struct Validator {
    schemas: Schemas,
    run: SchemaIndex,
    record: SchemaIndex,
    report: SchemaIndex,
}

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

/// Compiling also checks each schema against its draft's meta-schema.
fn validator() -> Validator {
    let mut compiler = Compiler::new();
    let mut schemas = Schemas::new();
    let mut compile = |file: &str| {
        let path = schema_dir().join(file);
        let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let loc = format!("file://{}", path.display());
        compiler.add_resource(&loc, value).unwrap();
        compiler
            .compile(&loc, &mut schemas)
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
    };
    let (run, record, report) = (compile(RUN), compile(RECORD), compile(REPORT));
    Validator {
        schemas,
        run,
        record,
        report,
    }
}

impl Validator {
    fn check(&self, schema: SchemaIndex, v: &Value) -> Result<(), String> {
        self.schemas.validate(v, schema).map_err(|e| format!("{e}"))
    }

    fn assert_valid(&self, schema: SchemaIndex, v: &Value, what: &str) {
        if let Err(e) = self.check(schema, v) {
            panic!("{what} does not validate:\n{e}");
        }
    }

    /// `v` without the field at `pointer` must fail, naming the field.
    fn assert_required(&self, schema: SchemaIndex, v: &Value, pointer: &str) {
        let (parent, field) = pointer.rsplit_once('/').unwrap();
        let mut cut = v.clone();
        let removed = cut
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .and_then(|o| o.remove(field));
        assert!(removed.is_some(), "{pointer} is not in the artifact");
        let e = self
            .check(schema, &cut)
            .expect_err(&format!("valid without {pointer}"));
        assert!(e.contains(field), "{pointer}: {e}");
    }
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
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

#[test]
fn the_seed_report_validates_and_its_required_fields_are_required() {
    let v = validator();
    let seed = read_json(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/runtime-profile-comparison.example.json"),
    );
    v.assert_valid(v.report, &seed, "the seed report");
    for field in [
        "/qualification",
        "/human_decision",
        "/cells/capacity-4k/baseline_requests",
        "/cells/capacity-4k/metrics/ttft_p50_ms/candidate",
        "/baseline_turnover/failures/0/canary_passed",
    ] {
        v.assert_required(v.report, &seed, field);
    }
    // The regression flag's name is the seed's way to carry the threshold.
    let mut no_flag = seed.clone();
    no_flag["cells"]["capacity-4k"]["metrics"]["e2e_p50_ms"]
        .as_object_mut()
        .unwrap()
        .remove("no_more_than_5_percent_regression");
    assert!(
        v.check(v.report, &no_flag).is_err(),
        "a metric without its flag"
    );
    let mut wrong = seed;
    wrong["schema"] = "runtime-profile-comparison/v2".into();
    assert!(v.check(v.report, &wrong).is_err(), "another schema version");
}

/// A report's `reference_comparison` (every class, tokens with bytes, ids
/// and a side that ended) validates, and its class is required.
#[test]
fn a_reference_comparison_validates() {
    use infergate::artifact::TurnoverRun;
    use infergate::report::agreement::{TokenLogprob, TopLogprob};
    use infergate::report::policy::QualityPolicy;
    use infergate::report::reference::against_baseline;
    let tok = |t: &str, lp: f64, alt: &[(&str, f64)]| TokenLogprob {
        token: t.into(),
        bytes: (t == "\u{fffd}").then(|| vec![0xE2]),
        id: Some(7),
        logprob: lp,
        top: alt
            .iter()
            .map(|(a, l)| TopLogprob {
                token: (*a).into(),
                bytes: None,
                logprob: *l,
            })
            .collect(),
    };
    let run = |texts: &[&str], toks: Vec<Option<Vec<TokenLogprob>>>| TurnoverRun {
        name: "ref".into(),
        repeat: 0,
        contract: "reference".into(),
        concurrency: 1,
        requests: texts.len(),
        exact_output_passed: texts.len(),
        failed: 0,
        responses_received: texts.len(),
        performance_eligible: false,
        contaminated: 0,
        failures: vec![],
        references: texts.iter().map(|t| Some(t.to_string())).collect(),
        reference_tokens: toks,
        task_answers: String::new(),
        task_set_sha256: None,
        features: Default::default(),
        first_ttft_ms: None,
        later_ttft_p50_ms: None,
    };
    let b = run(
        &["ab", "x", "\u{fffd}", "q"],
        vec![
            Some(vec![
                tok("a", -0.1, &[("a", -0.1)]),
                tok("b", -0.3, &[("b", -0.3), ("c", -0.4)]),
            ]),
            Some(vec![tok("x", -0.2, &[("x", -0.2)])]),
            Some(vec![tok("\u{fffd}", -0.2, &[])]),
            None,
        ],
    );
    let c = run(
        &["ac", "xy", "\u{fffd}", "r"],
        vec![
            Some(vec![
                tok("a", -0.1, &[("a", -0.1)]),
                tok("c", -0.35, &[("c", -0.35), ("b", -0.36)]),
            ]),
            Some(vec![
                tok("x", -0.2, &[("x", -0.2)]),
                tok("y", -0.1, &[("y", -0.1)]),
            ]),
            Some(vec![tok("\u{fffd}", -0.2, &[])]),
            None,
        ],
    );
    let (_, _, cmp) = against_baseline(&[b], &[c], &QualityPolicy::default());
    let cmp = cmp.unwrap();
    assert_eq!(
        (cmp.identical, cmp.near_tie, cmp.hard, cmp.text_only),
        (1, 1, 1, 1)
    );
    let v = validator();
    let mut report = read_json(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/runtime-profile-comparison.example.json"),
    );
    report["reference_comparison"] = serde_json::to_value(&cmp).unwrap();
    v.assert_valid(v.report, &report, "a report with a reference comparison");
    v.assert_required(v.report, &report, "/reference_comparison/prompts/1/class");
    v.assert_required(
        v.report,
        &report,
        "/reference_comparison/prompts/0/baseline_tokens/1/logprob",
    );

    // The quality block and its gate, from these pairs and a task.
    let tasks = vec![(
        "tasks".to_string(),
        "1101-".to_string(),
        "1001-".to_string(),
    )];
    let rate = QualityPolicy {
        cross_runtime: infergate::report::agreement::CrossRuntime::Rate,
        ..QualityPolicy::default()
    };
    let features = vec![infergate::report::quality::FeaturePair {
        workload: "json".into(),
        feature: "structured_output".into(),
        baseline: "11111s1".into(),
        candidate: "1jjc-11".into(),
    }];
    let (q, gate) = infergate::report::quality::judge(
        Some(&cmp),
        &tasks,
        &features,
        &[],
        &rate,
        0.0125,
        0.0125,
    )
    .unwrap();
    report["quality"] = serde_json::to_value(&q).unwrap();
    report["gates"] = serde_json::json!({
        "performance": {"rule": "r", "passed": true, "parts": []},
        "strict_turnover": {"rule": "r", "passed": true, "parts": []},
        "non_inferior_turnover": {"rule": "r", "passed": true, "parts": []},
        "quality": serde_json::to_value(gate.unwrap()).unwrap(),
        "qualified": false
    });
    v.assert_valid(v.report, &report, "a report with a quality gate");
    v.assert_required(v.report, &report, "/quality/tasks/0/table/baseline_only");
    v.assert_required(v.report, &report, "/quality/hard_divergence/outcome");
}

/// A report whose turnover gates did not run (the plan skipped them) and
/// whose candidate answered an embedding with zeros validates, with the
/// states it adds; an unknown skip does not.
#[test]
fn a_skipped_turnover_and_zero_embeddings_validate() {
    use infergate::artifact::TurnoverSkip;
    use infergate::report::embedding::EmbeddingRun;
    let (mut b, mut c) = report::fixtures::seed_like();
    for (a, second) in [(&mut b, [0.0f32, 1.0]), (&mut c, [0.0, 0.0])] {
        a.turnover.clear();
        a.turnover_not_run = Some(TurnoverSkip::SkippedByPlan);
        a.provenance.suite_sha256 = Some("ab".repeat(32));
        a.embeddings = vec![EmbeddingRun {
            name: "e".into(),
            inputs: 2,
            batch: 1,
            inputs_sha256: "cd".repeat(32),
            requests: 2,
            failed: 0,
            failures_by_class: Default::default(),
            latency_ms: vec![10.0, 12.0],
            dimension: Some(2),
            vectors: vec![Some(vec![0.0, 0.0]), Some(second.to_vec())],
        }];
    }
    let mut policy = report::Policy::default();
    policy.bootstrap.iterations = 200;
    let r = report::compare(&b, &c, &policy).expect("compare");
    let v = validator();
    let written = r.to_value();
    v.assert_valid(v.report, &written, "a report with turnover not run");
    assert_eq!(written["turnover_gate"]["not_run"], "skipped_by_plan");
    assert_eq!(
        written["gates"]["strict_turnover"]["not_run"],
        "skipped by the plan"
    );
    let e = &written["quality"]["embeddings"][0];
    assert_eq!(
        (&e["candidate_zero"], &e["both_zero"]),
        (&serde_json::json!([1]), &serde_json::json!([0]))
    );
    let mut bad = written.clone();
    bad["turnover_gate"]["not_run"] = "skipped_by_nobody".into();
    assert!(v.check(v.report, &bad).is_err(), "an unknown skip");
    let mut run = serde_json::to_value(&c).unwrap();
    assert_eq!(run["turnover_not_run"], "skipped_by_plan");
    run["turnover_not_run"] = "skipped_by_nobody".into();
    let mut good = run.clone();
    good["turnover_not_run"] = "skipped_by_run".into();
    v.assert_valid(v.run, &good, "a run that skipped its turnover");
    assert!(v.check(v.run, &run).is_err(), "an unknown skip in a run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_runs_their_journals_and_their_report_validate() {
    let v = validator();
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let (base, cand) = (dir.path().join("base"), dir.path().join("cand"));
    for (label, out) in [("baseline", &base), ("candidate", &cand)] {
        runner::run(&opts(engine.base_url.as_str(), &suite, out.clone(), label))
            .await
            .expect("run");
    }

    let run = read_json(&base.join(ARTIFACT_FILE));
    v.assert_valid(v.run, &run, "run.json");
    assert!(
        !run["turnover"].as_array().unwrap().is_empty(),
        "turnover ran"
    );
    for field in [
        "/schema",
        "/provenance/suite",
        "/cells/0/shape/arrival",
        "/cells/0/metrics/ttft_ms/p50",
        "/turnover/0/contaminated",
        "/cells/0/slo/met",
        "/cells/0/request_rows/0/ok",
    ] {
        v.assert_required(v.run, &run, field);
    }
    let mut bad = run.clone();
    bad["cells"][0]["slo"]["targets"]["ttft"] = 5.into();
    assert!(v.check(v.run, &bad).is_err(), "an unknown SLO target");

    let journal = std::fs::read_to_string(base.join(JOURNAL_FILE)).unwrap();
    let records: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        records.len() > 6,
        "cell and turnover requests: {}",
        records.len()
    );
    for (i, r) in records.iter().enumerate() {
        v.assert_valid(v.record, r, &format!("journal line {}", i + 1));
    }
    v.assert_required(v.record, &records[0], "/outcome");
    v.assert_required(v.record, &records[0], "/capture/e2e_ms");
    let mut bad = records[0].clone();
    bad["outcome"] = "fine".into();
    assert!(v.check(v.record, &bad).is_err(), "an unknown outcome");

    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[bootstrap]\niterations = 200\n").unwrap();
    let mut rep = report::compare_files(
        &base.join(ARTIFACT_FILE),
        &cand.join(ARTIFACT_FILE),
        Some(&policy),
    )
    .expect("compare");
    let file = dir.path().join("report.json");
    report::write_report_atomic(&file, &rep).unwrap();
    let written = read_json(&file);
    v.assert_valid(v.report, &written, "compare's report");
    for key in [
        "statistics",
        "gates",
        "policy",
        "provenance",
        "turnover_comparison",
    ] {
        assert!(
            written.get(key).is_some(),
            "the additions are exercised: {key}"
        );
    }
    v.assert_required(
        v.report,
        &written,
        "/cells/small/metrics/ttft_p50_ms/baseline",
    );
    v.assert_required(v.report, &written, "/provenance/baseline/model");
    v.assert_required(v.report, &written, "/cells/small/slo/baseline/attainment");
    v.assert_required(v.report, &written, "/cells/small/slo/evidence/outcome");

    rep.record_decision(Decision {
        action: DecisionAction::RetainBaseline,
        who: Some("ops".into()),
        when: Some("2026-01-01T00:00:00Z".into()),
        note: Some("schema test".into()),
    });
    v.assert_valid(v.report, &rep.to_value(), "a decided report");
}

/// `--help` of the commands that write or read these files, and the README,
/// name schema files that exist.
#[test]
fn help_and_readme_point_to_the_schemas() {
    let mentioned = |text: &str| -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || "()[]`,".contains(c))
            .filter_map(|w| w.strip_prefix("schemas/"))
            .map(|w| w.trim_end_matches('.').to_string())
            .filter(|w| w.ends_with(".json"))
            .collect()
    };
    for (sub, want) in [("run", RUN), ("compare", REPORT), ("report", REPORT)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args([sub, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
        let names = mentioned(&help);
        assert!(names.iter().any(|n| n == want), "{sub} --help: {names:?}");
        for n in names {
            assert!(schema_dir().join(&n).is_file(), "{sub} --help names {n}");
        }
    }
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let names = mentioned(&readme);
    for f in [RUN, RECORD, REPORT] {
        assert!(names.iter().any(|n| n == f), "README: {names:?}");
    }
    for n in names {
        assert!(schema_dir().join(&n).is_file(), "README names {n}");
    }
}

/// The parts a clean fast-source run leaves out (a failed request, a
/// qualify schedule and clusters, a diverged turnover answer), as serde
/// writes them from infergate's own types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_optional_parts_validate_as_infergate_writes_them() {
    use infergate::artifact::{Divergence, RunArtifact, Schedule, TurnoverFailure};
    use infergate::measure::record::{
        CapacityMark, Failure, Outcome, RequestRecord, StreamCapture,
    };
    let v = validator();
    let failed = RequestRecord {
        cell: "small".into(),
        index: 3,
        send_offset_ms: 12.5,
        queue_ms: 0.0,
        target_prompt_tokens: Some(200),
        template_prompt_tokens: Some(30),
        turn: None,
        capture: StreamCapture {
            http_status: Some(503),
            failure: Some(Failure {
                class: Outcome::HttpError,
                message: "HTTP 503".into(),
            }),
            ..StreamCapture::default()
        },
        outcome: Outcome::HttpError,
        detail: Some("HTTP 503".into()),
        capacity: Some(CapacityMark {
            load: 2.5,
            segment: 4,
            warmup: false,
        }),
    };
    let rec = serde_json::to_value(&failed).unwrap();
    v.assert_valid(v.record, &rec, "a failed request");
    v.assert_required(v.record, &rec, "/capture/failure/class");

    let (_, src) = FastSource::start(FastSourceConfig::default()).expect("fast source");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let out = dir.path().join("run");
    let mut art: RunArtifact = runner::run(&opts(&src.base_url(), &suite, out, "baseline"))
        .await
        .expect("run");
    art.schedule = Some(Schedule::Interleaved);
    let n = art.cells[0].samples["ttft_ms"].len();
    let clusters = (0..n as u32).map(|i| i / 2).collect();
    art.cells[0]
        .sample_clusters
        .insert("ttft_ms".into(), clusters);
    art.turnover[0].failures.insert(
        0,
        TurnoverFailure {
            request_index: 1,
            failure_class: "controlled_output_failed".into(),
            words: 3,
            finish_reasons: vec!["stop".into()],
            canary_passed: true,
            foreign_markers: vec!["cedar-2".into()],
            error: None,
            output: Some("cedar-1 one two".into()),
            divergence: Some(Divergence {
                char_index: 8,
                expected_snippet: "one".into(),
                actual_snippet: "two".into(),
            }),
        },
    );
    art.cells[0].capacity = Some(capacity_run());
    let value = serde_json::to_value(&art).unwrap();
    v.assert_valid(
        v.run,
        &value,
        "a run with a schedule, clusters, a divergence and a capacity search",
    );
    v.assert_required(
        v.run,
        &value,
        "/cells/0/capacity/levels/0/segments/0/client_lag_p99_ms",
    );
    v.assert_required(v.run, &value, "/cells/0/capacity/estimate/fitted");
    v.assert_required(
        v.run,
        &value,
        "/turnover/0/failures/0/divergence/char_index",
    );
    let mut bad = value;
    bad["schedule"] = "sometimes".into();
    assert!(v.check(v.run, &bad).is_err(), "an unknown schedule");

    // A completions cell and an embeddings workload with a failed request,
    // and the report's agreement of two such runs.
    art.cells[0].shape.endpoint = Some("completions".into());
    art.embeddings
        .push(infergate::report::embedding::EmbeddingRun {
            name: "sentences".into(),
            inputs: 3,
            batch: 2,
            inputs_sha256: "ab".repeat(32),
            requests: 2,
            failed: 1,
            failures_by_class: [("http_error".to_string(), 1)].into(),
            latency_ms: vec![12.5],
            dimension: Some(2),
            vectors: vec![Some(vec![1.0, 0.0]), Some(vec![0.6, 0.8]), None],
        });
    let value = serde_json::to_value(&art).unwrap();
    v.assert_valid(v.run, &value, "a completions cell and embeddings");
    v.assert_required(v.run, &value, "/embeddings/0/vectors");
    // The turnover edited above is not one a run could hold: left out.
    art.turnover.clear();
    let mut cand = art.clone();
    cand.embeddings[0].vectors[0] = Some(vec![0.0, 1.0]);
    let report = infergate::report::compare(&art, &cand, &report::Policy::default())
        .expect("comparable")
        .to_value();
    v.assert_valid(v.report, &report, "a report with embeddings");
    // The cell carries a capacity search: the report compares it.
    v.assert_required(v.report, &report, "/cells/small/capacity/ratio/confidence");
    v.assert_required(v.report, &report, "/cells/small/capacity/candidate/levels");
    v.assert_required(v.report, &report, "/cells/small/capacity/outcome");
    v.assert_required(v.report, &report, "/quality/embeddings/0/cosine_min");
    assert_eq!(report["quality"]["embeddings"][0]["cosines"][0], 0.0);
}

/// A capacity search as a run records it: levels that held, one that did
/// not, one client that fell behind, and the fitted estimate.
fn capacity_run() -> infergate::report::capacity::CapacityRun {
    use infergate::report::capacity::run::assemble;
    use infergate::report::capacity::{Segment, SegmentRun, Stopped};
    let spec =
        toml::from_str("by = \"rate\"\nlow = 1\nhigh = 8\nprecision_percent = 50\n").unwrap();
    let seg = |met, lag| SegmentRun {
        counts: Segment {
            met,
            of: 16,
            warmup: 4,
        },
        client_lag_p99_ms: lag,
    };
    let segments = [
        (1.0, seg(16, 0.5)),
        (1.0, seg(16, 0.5)),
        (8.0, seg(0, 0.5)),
        (8.0, seg(1, 40.0)),
        (2.83, seg(14, 0.5)),
        (2.83, seg(12, 0.5)),
        (4.76, seg(3, 0.5)),
        (4.76, seg(2, 0.5)),
    ];
    assemble(
        &spec,
        "TTFT ≤ 2000 ms".into(),
        0.5,
        &segments,
        Stopped::Resolved,
    )
}
