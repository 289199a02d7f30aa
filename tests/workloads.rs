//! The dataset workloads on the real reference engine: a
//! ShareGPT file (two turns, recorded history), an OpenAI request log and a
//! Mooncake trace replayed at its timestamps. Two runs of the same suite are
//! compared and the report is made again from their journals.

mod support;

use std::path::{Path, PathBuf};

use infergate::artifact::metric;
use infergate::measure::runner::{self, ARTIFACT_FILE};
use infergate::report::{self, Policy};
use infergate::verify_runs::{RunDirs, verify_runs};

/// The shipped samples, by absolute path (the suite is written elsewhere).
fn sample(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("suites/data")
        .join(name)
        .display()
        .to_string()
}

fn suite() -> String {
    format!(
        r#"
name = "datasets"
[[cell]]
name = "sharegpt"
max_tokens = 16
concurrency = 2
requests = 8
warmup = 1
seed = 4
workload = {{ kind = "sharegpt", path = "{sg}", turns = 2 }}

[[cell]]
name = "openai-log"
max_tokens = 16
concurrency = 2
requests = 8
warmup = 1
seed = 5
workload = {{ kind = "openai", path = "{oa}" }}

[[cell]]
name = "trace"
max_tokens = 16
concurrency = 4
requests = 8
seed = 6
workload = {{ kind = "trace", path = "{tr}", speed = 4.0 }}
"#,
        sg = sample("sharegpt-sample.json"),
        oa = sample("openai-sample.jsonl"),
        tr = sample("mooncake-sample.jsonl"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_workloads_run_compare_and_verify_on_the_real_engine() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let suite_path = dir.path().join("datasets.toml");
    std::fs::write(&suite_path, suite()).unwrap();
    let mut outs: Vec<PathBuf> = Vec::new();
    for label in ["a", "b"] {
        let out = dir.path().join(label);
        let art = runner::run(&support::run_opts(
            &engine.base_url,
            suite_path.clone(),
            out.clone(),
        ))
        .await
        .unwrap_or_else(|e| panic!("run {label}: {e:#}"));
        for c in &art.cells {
            assert_eq!((c.requests, c.failed), (8, 0), "{label} {}: {c:?}", c.name);
            assert!(
                c.shape
                    .workload
                    .as_deref()
                    .is_some_and(|w| w.contains("sha256"))
            );
        }
        let sg = art.cells.iter().find(|c| c.name == "sharegpt").unwrap();
        let turns: Vec<&str> = sg.slices.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(turns, ["1", "2"], "sharegpt by turn: {:?}", sg.slices);
        // Turn 2 carries turn 1 and its recorded answer: a longer prompt.
        assert!(sg.slices[1].prompt_tokens_p50 > sg.slices[0].prompt_tokens_p50);
        let s = sg.sessions.as_ref().expect("sessions");
        assert_eq!((s.turns, s.sessions, s.complete), (2, 4, 4), "{s:?}");
        // A session lasts at least its two turns' waits for a first token.
        assert!(s.duration_p50_ms >= s.ttft_sum_p50_ms, "{s:?}");
        // The trace is open loop: its schedule lag is measured per request.
        let tr = art.cells.iter().find(|c| c.name == "trace").unwrap();
        assert!(tr.shape.arrival.starts_with("trace:"), "{:?}", tr.shape);
        assert_eq!(
            tr.samples[metric::QUEUE_MS].len(),
            8,
            "{:?}",
            tr.samples.keys()
        );
        outs.push(out);
    }
    let r = report::compare_paths(
        &outs[0].join(ARTIFACT_FILE),
        &outs[1].join(ARTIFACT_FILE),
        &Policy::default(),
    )
    .expect("the two runs compare");
    let v = r.to_value();
    for cell in ["sharegpt", "openai-log", "trace"] {
        assert!(
            v["cells"][cell]["metrics"]["ttft_p50_ms"].is_object(),
            "{cell}"
        );
    }
    assert!(v["cells"]["sharegpt"]["candidate_slices"].is_array());
    let dirs = |suite: PathBuf| RunDirs {
        baseline: vec![outs[0].clone()],
        candidate: vec![outs[1].clone()],
        suite: Some(suite),
    };
    let checked = verify_runs(&v, &dirs(suite_path.clone()));
    assert!(checked.is_clean(), "{:#?}", checked.disagreements);

    // The same suite naming an edited copy of the request log: named.
    let copy = dir.path().join("openai-sample.jsonl");
    let mut log = std::fs::read_to_string(sample("openai-sample.jsonl")).unwrap();
    let first = log.lines().next().unwrap().to_string();
    log.push_str(&first);
    log.push('\n');
    std::fs::write(&copy, log).unwrap();
    let edited = dir.path().join("edited.toml");
    std::fs::write(
        &edited,
        suite().replace(&sample("openai-sample.jsonl"), &copy.display().to_string()),
    )
    .unwrap();
    let checked = verify_runs(&v, &dirs(edited));
    assert!(
        checked
            .disagreements
            .iter()
            .any(|d| d.path.ends_with("cells[1].shape.workload")),
        "{:#?}",
        checked.disagreements
    );
}
