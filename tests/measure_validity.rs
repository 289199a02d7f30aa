//! Measurement validity against the real reference engine: the
//! server's own cache counts prove unique prompts are cold, a runtime that
//! stops early does not compare on speed, and an open-loop client that falls
//! behind its schedule is caught.

mod support;
use support::run_opts as opts;

use std::path::Path;

use infergate::artifact::{RunArtifact, metric};
use infergate::measure::journal;
use infergate::measure::record::{Outcome, RequestRecord};
use infergate::measure::runner::{self, RunOptions};
use infergate::report::{self, Policy};
use infergate_testkit::faultproxy::{Fault, FaultProxy, FaultProxyConfig};

async fn run(
    target: &str,
    dir: &Path,
    name: &str,
    suite: &str,
) -> (RunArtifact, Vec<RequestRecord>) {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, suite).unwrap();
    let out = dir.join(name);
    let art = runner::run(&opts(target, path, out.clone()))
        .await
        .unwrap_or_else(|e| panic!("run {name}: {e:#}"));
    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    (art, recs)
}

const CACHE_SUITE: &str = r#"
name = "cache"
[[cell]]
name = "unique"
prompt_tokens = 160
tolerance_percent = 10
max_tokens = 12
concurrency = 2
requests = 6
warmup = 2
seed = 5

[[cell]]
name = "shared"
prompt_tokens = 160
tolerance_percent = 10
max_tokens = 12
concurrency = 1
requests = 3
cache = "shared"
seed = 5
"#;

/// Every measured request of a unique cell, request 0 included, was
/// evaluated cold past the chat template: the server's own cached-token
/// count and its prompt timings say so. A shared cell, on the same server,
/// shows that the count would catch a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_prompts_are_evaluated_cold_past_the_chat_template() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let (art, recs) = run(&engine.base_url, dir.path(), "cache", CACHE_SUITE).await;

    let unique: Vec<&RequestRecord> = recs.iter().filter(|r| r.cell == "unique").collect();
    assert_eq!(unique.len(), 6);
    assert!(unique.iter().any(|r| r.index == 0));
    for r in &unique {
        assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.detail);
        let c = &r.capture;
        let template = r.template_prompt_tokens.expect("template measured");
        let cached = c
            .cached_prompt_tokens
            .expect("llama.cpp reports cached tokens");
        let t = c.server_timings.expect("llama.cpp sends timings");
        let prompt = c.prompt_tokens.unwrap();
        eprintln!(
            "unique request {}: prompt {prompt}, cached {cached}, template {template}, server evaluated {:?} in {:?} ms, client TTFT {:?} ms",
            r.index, t.prompt_n, t.prompt_ms, c.ttft_ms
        );
        assert!(
            cached <= template,
            "request {}: {cached} > {template}",
            r.index
        );
        // The server's two accounts agree, and all past the template was evaluated.
        assert_eq!(t.cache_n, Some(cached));
        assert_eq!(t.prompt_n.unwrap() + cached, prompt, "request {}", r.index);
        assert!(t.prompt_ms.unwrap() > 0.0 && t.predicted_n == Some(12));
    }
    let cell = art.cells.iter().find(|c| c.name == "unique").unwrap();
    support::assert_eligible_but_one_read(cell, &recs);
    let pc = cell.prompt_cache.as_ref().unwrap();
    assert_eq!((pc.reported, pc.beyond_template), (6, 0));

    // Shared prompts after the first are served from cache nearly whole.
    let shared: Vec<&RequestRecord> = recs.iter().filter(|r| r.cell == "shared").collect();
    let template = shared[0].template_prompt_tokens.unwrap();
    let hits = shared
        .iter()
        .filter(|r| r.capture.cached_prompt_tokens.unwrap() > template)
        .count();
    assert!(
        hits >= 2,
        "{:?}",
        shared
            .iter()
            .map(|r| r.capture.cached_prompt_tokens)
            .collect::<Vec<_>>()
    );
    // A shared cell is meant to hit: its hits are no reason against it.
    let cell = art.cells.iter().find(|c| c.name == "shared").unwrap();
    support::assert_eligible_but_one_read(cell, &recs);
    // Those same records, read as a unique cell, are refused with the reason.
    let mut spec = infergate::config::suite::Suite::parse(CACHE_SUITE, "cache.toml")
        .unwrap()
        .cells
        .remove(1);
    spec.cache = infergate::config::suite::CachePolicy::Unique;
    let as_unique = infergate::measure::aggregate::cell(&spec, &recs);
    assert!(!as_unique.performance_eligible);
    assert!(
        as_unique
            .ineligible_reasons
            .iter()
            .any(|w| w.contains("served from the server's prompt cache beyond the chat template")),
        "{:?}",
        as_unique.ineligible_reasons
    );
}

const LENGTH_SUITE: &str = r#"
name = "length"
[[cell]]
name = "decode"
prompt_tokens = 120
tolerance_percent = 10
max_tokens = 24
concurrency = 2
requests = 4
seed = 2
"#;

/// A candidate that stops early (here: the fault proxy lowers `max_tokens`
/// on its way to the same engine) makes e2e look better; the comparison
/// refuses to read it as a speed-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_stops_early_is_not_performance_comparable() {
    let engine = support::engine("baseline");
    let proxy = FaultProxy::start(FaultProxyConfig::new(&engine.base_url), |r| {
        match r.body.and_then(|b| b.get("stream")) {
            Some(serde_json::Value::Bool(true)) => Fault::CapMaxTokens(16),
            _ => Fault::Pass,
        }
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (b, b_recs) = run(&engine.base_url, dir.path(), "baseline", LENGTH_SUITE).await;
    let (c, _) = run(&proxy.base_url(), dir.path(), "candidate", LENGTH_SUITE).await;

    // Fixed length was asked in llama.cpp's dialect and held on the baseline.
    let sent = b_recs
        .iter()
        .all(|r| r.capture.completion_tokens == Some(24));
    assert!(sent, "ignore_eos: every baseline answer is max_tokens long");
    assert!(b.method["output_length"].contains("ignore_eos"));
    let (bo, co) = (
        b.cells[0].output_length.clone().unwrap(),
        c.cells[0].output_length.clone().unwrap(),
    );
    assert!(bo.fixed && bo.held, "{bo:?}");
    assert!(co.fixed && !co.held && co.at_max_tokens == 0, "{co:?}");
    assert_eq!(c.cells[0].metrics[metric::COMPLETION_TOKENS].p50, 16.0);

    // A modified default policy must not call itself "defaults" (verify checks).
    let mut policy = Policy {
        source: "tests: defaults with 500 bootstrap iterations".into(),
        ..Policy::default()
    };
    policy.bootstrap.iterations = 500;
    let r = report::compare(&b, &c, &policy).expect("comparable runs");
    let v = r.to_value();
    assert!(report::verify(&v).is_empty(), "{:#?}", report::verify(&v));
    let cell = &v["cells"]["decode"];
    let why = cell["not_comparable"].as_str().expect("named");
    eprintln!("{why}");
    assert!(why.contains("baseline 24, candidate 16"), "{why}");
    assert_eq!(cell["candidate_performance_eligible"], false);
    assert!(!r.performance_gate_passed);
}

const OPEN_LOOP_SUITE: &str = r#"
name = "open"
[[cell]]
name = "open"
prompt_tokens = 120
tolerance_percent = 10
max_tokens = 4
concurrency = 1
requests = 5
arrival = "constant:50"
seed = 4
"#;

/// 50 requests/s with one in flight: the client cannot keep its schedule.
/// Queue time reaches the artifact and the report, latency from the
/// scheduled send includes it, and the cell warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_client_that_falls_behind_is_reported() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let (art, recs) = run(&engine.base_url, dir.path(), "open", OPEN_LOOP_SUITE).await;
    let cell = &art.cells[0];
    let queue = &cell.samples[metric::QUEUE_MS];
    assert_eq!(queue.len(), 5);
    eprintln!("queue_ms {queue:?}; warnings {:?}", cell.warnings);
    // Request k waits for the k before it, each far longer than the 20 ms gap.
    assert!(queue[4] > queue[1], "{queue:?}");
    assert!(
        cell.warnings
            .iter()
            .any(|w| w.contains("fell behind its schedule"))
    );
    let mut by_index: Vec<&RequestRecord> = recs.iter().collect();
    by_index.sort_by_key(|r| r.index);
    for (r, sched) in by_index.iter().zip(&cell.samples[metric::TTFT_SCHED_MS]) {
        assert_eq!(*sched, r.capture.ttft_ms.unwrap() + r.queue_ms);
    }
    // A/A comparison: the queue samples travel into the report, the warning too.
    let r = report::compare(&art, &art, &Policy::default()).expect("comparable");
    let v = r.to_value();
    assert_eq!(
        v["cells"]["open"]["samples"]["queue_ms"]["candidate"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("fell behind its schedule"))
    );
}

const REFERENCE_SUITE: &str = r#"
name = "reference"
[[turnover]]
name = "reference-sentence"
contract = "reference"
prompt = "sentence"
requests = 3
concurrency = 2
max_tokens = 24
"#;

/// A candidate that is consistently wrong (here it stops after 10 tokens,
/// the fault proxy capping every request on its way to the same engine)
/// passes its own reference contract, since its references come from
/// itself; held against the baseline's references it fails, and the report
/// says where the texts first differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistently_wrong_candidate_fails_against_the_baselines_references() {
    let engine = support::engine("baseline");
    let proxy = FaultProxy::start(FaultProxyConfig::new(&engine.base_url), |r| {
        match r.body.and_then(|b| b.get("stream")) {
            Some(serde_json::Value::Bool(true)) => Fault::CapMaxTokens(10),
            _ => Fault::Pass,
        }
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let with_turnover = |target: &str, name: &str| {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, REFERENCE_SUITE).unwrap();
        RunOptions {
            skip_turnover: None,
            ..opts(target, path, dir.path().join(name))
        }
    };
    let b = runner::run(&with_turnover(&engine.base_url, "baseline"))
        .await
        .expect("baseline run");
    let c = runner::run(&with_turnover(&proxy.base_url(), "candidate"))
        .await
        .expect("candidate run");
    let (bt, ct) = (&b.turnover[0], &c.turnover[0]);
    assert_eq!(bt.exact_output_passed, 3, "{bt:#?}");
    assert_eq!(
        ct.exact_output_passed, 3,
        "its own contract passes: {ct:#?}"
    );
    assert_eq!(ct.references.len(), 3);
    assert!(ct.references.iter().flatten().count() == 3);

    let r = report::compare(&b, &c, &Policy::default()).expect("comparable runs");
    let v = r.to_value();
    assert!(report::verify(&v).is_empty(), "{:#?}", report::verify(&v));
    assert!(!r.strict_turnover_gate_passed);
    let run = &v["candidate_turnover"];
    assert_eq!(run["failed"], 3, "{run:#}");
    let f = &run["failures"][0];
    assert_eq!(f["failure_class"], "controlled_output_failed");
    let d = &f["divergence"];
    let (at, expected) = (d["char_index"].as_u64().unwrap(), &d["expected_snippet"]);
    assert_eq!(
        d["actual_snippet"], "",
        "the candidate's text ends where it differs"
    );
    assert_eq!(
        at as usize,
        ct.references[0].as_ref().unwrap().chars().count()
    );
    assert!(!expected.as_str().unwrap().is_empty());
    let note = r
        .warnings
        .iter()
        .find(|w| w.contains("reference texts differ from the baseline's"))
        .expect("a warning names it");
    eprintln!("{note}");
    assert!(
        note.contains("3 of the candidate's reference texts"),
        "{note}"
    );
}
