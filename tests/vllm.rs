//! A second engine family: vLLM's CPU build serving the reference model
//! (scripts/setup-vllm.sh), measured by `infergate run` and qualified against
//! llama.cpp by the shipped cross-engine plan. Everything here talks to a
//! real vLLM server on loopback; nothing is skipped.

mod qualify_support;
mod support;
use support::vllm;

use std::path::{Path, PathBuf};
use std::time::Duration;

use infergate::artifact::metric;
use infergate::measure::journal;
use infergate::measure::record::Outcome;
use infergate::measure::runner;
use infergate::qualify;
use infergate::report;

/// One test at a time: the counters of a cell must see that cell's
/// requests only, and the machine has two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CELLS: &str = r#"
name = "vllm-cells"
[[cell]]
name = "c1"
prompt_tokens = 300
tolerance_percent = 5
max_tokens = 16
concurrency = 1
requests = 5
warmup = 1
cache = "unique"
seed = 3
extra = { ignore_eos = true }

# Every request shares one long prefix: after the warmup, vLLM serves it
# from its prefix cache, and both usage and /metrics must say so.
[[cell]]
name = "c2-shared"
prompt_tokens = 300
tolerance_percent = 5
max_tokens = 8
concurrency = 2
requests = 4
warmup = 1
cache = "shared"
seed = 5
extra = { ignore_eos = true }
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_on_vllm_are_sized_by_its_tokenizer_and_agree_with_its_counters() {
    let _serial = SERIAL.lock().await;
    let server = vllm::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut o = support::run_opts(
        &server.base_url,
        write(dir.path(), "suite.toml", CELLS),
        out.clone(),
    );
    o.scrape.interval = Some(Duration::from_millis(500));
    let art = runner::run(&o).await.expect("run against vLLM");

    // Discovery: vLLM's own model entry, context and version.
    assert_eq!(art.provenance.model, vllm::MODEL);
    assert_eq!(
        art.provenance.context_window,
        Some(4096),
        "max_model_len of /v1/models"
    );
    assert_eq!(art.provenance.server_build.as_deref(), Some("0.32.0"));
    assert!(
        art.method["prompt_sizing"].contains("server /tokenize"),
        "{}",
        art.method["prompt_sizing"]
    );

    let recs = journal::read(&out.join(runner::JOURNAL_FILE)).unwrap();
    assert_eq!(recs.len(), 9, "warmups are never journaled");
    for r in &recs {
        assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.detail);
        let c = &r.capture;
        let want = if r.cell == "c1" { 16 } else { 8 };
        // ignore_eos: vLLM's usage says exactly max_tokens, each in its own chunk.
        assert_eq!(c.completion_tokens, Some(want), "{c:?}");
        assert!(!c.completion_tokens_estimated);
        assert_eq!(
            c.chunk_ms.len(),
            want as usize,
            "one content chunk per token"
        );
        assert_eq!(c.finish_reasons, vec!["length".to_string()]);
        let p = c.prompt_tokens.unwrap();
        assert!((285..=315).contains(&p), "prompt {p} outside 300 ± 5 %");
        // --enable-prompt-tokens-details: every request says what was cached.
        let cached = c.cached_prompt_tokens.expect("usage names cached tokens");
        if r.cell == "c2-shared" {
            assert!(
                cached >= 256,
                "the shared prefix is served from cache: {cached}"
            );
        }
    }

    for cell in &art.cells {
        support::assert_eligible_but_one_read(cell, &recs);
        assert!(cell.warnings.is_empty(), "{:?}", cell.warnings);
        let [m] = cell.server_metrics.as_slice() else {
            panic!("one endpoint: {:?}", cell.server_metrics)
        };
        assert_eq!(m.engine.as_deref(), Some("vllm"));
        assert_eq!((m.windows, m.incomplete_windows), (1, 0));
        // The journal's own sums, added up here, against the server's counters.
        let mine: Vec<_> = recs.iter().filter(|r| r.cell == cell.name).collect();
        let prompt: u64 = mine.iter().map(|r| r.capture.prompt_tokens.unwrap()).sum();
        let generated: u64 = mine
            .iter()
            .map(|r| r.capture.completion_tokens.unwrap())
            .sum();
        let cached: u64 = mine
            .iter()
            .map(|r| r.capture.cached_prompt_tokens.unwrap())
            .sum();
        let delta = |name: &str| support::sum_over_labels(&m.counters, name);
        assert_eq!(delta("vllm:prompt_tokens_total"), prompt as f64);
        assert_eq!(delta("vllm:generation_tokens_total"), generated as f64);
        assert_eq!(delta("vllm:prompt_tokens_cached_total"), cached as f64);
        let check = m.check.as_ref().expect("a counter check");
        assert!(check.agrees && check.lines.len() == 3, "{check:?}");

        // The server's own clock: vLLM times TTFT from arrival in its API
        // server, so the client's mean is no smaller and the gap (HTTP,
        // streaming) is small.
        let ttft = m
            .histograms
            .iter()
            .find(|(k, _)| k.starts_with("vllm:time_to_first_token_seconds"))
            .map(|(_, h)| h)
            .expect("vLLM's TTFT histogram");
        assert_eq!(ttft.count, mine.len() as f64, "one TTFT per request");
        let server_ms = ttft.sum / ttft.count * 1000.0;
        let client_ms = cell.metrics[metric::TTFT_MS].mean;
        assert!(
            server_ms <= client_ms + 1.0 && client_ms - server_ms < 500.0,
            "client TTFT mean {client_ms:.1} ms, server {server_ms:.1} ms"
        );
    }

    // The crate's parse of the last scrape equals this test's own read.
    let log = infergate::measure::scrape::read_log(&out.join("server-metrics.jsonl")).unwrap();
    let last = log.iter().rev().find(|e| e.samples.is_some()).unwrap();
    let parsed: f64 = last
        .samples
        .as_ref()
        .unwrap()
        .iter()
        .filter(|s| s.name == "vllm:generation_tokens_total")
        .map(|s| s.value)
        .sum();
    assert_eq!(
        parsed,
        support::served_total(&server.base_url, "vllm:generation_tokens_total").await
    );

    // A cell beyond vLLM's max_model_len is refused before any request.
    let big = CELLS
        .replacen("prompt_tokens = 300", "prompt_tokens = 5000", 1)
        .replacen("name = \"c1\"", "name = \"too-big\"", 1);
    support::assert_refused_before_any_request(
        &server.base_url,
        write(dir.path(), "big.toml", &big),
        dir.path().join("big"),
        "too-big",
        4096,
    )
    .await;
}

const TURNOVER: &str = r#"
name = "vllm-turnover"
[[turnover]]
name = "reference-words5-c4"
contract = "reference"
prompt = "words"
words = 5
code_words = ["cedar"]
requests = 16
concurrency = 4
repeats = 1
seed = 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turnover_on_vllm_is_reference_exact_with_canaries() {
    let _serial = SERIAL.lock().await;
    let server = vllm::shared();
    let dir = tempfile::tempdir().unwrap();
    let mut o = support::run_opts(
        &server.base_url,
        write(dir.path(), "suite.toml", TURNOVER),
        dir.path().join("out"),
    );
    o.skip_turnover = None;
    let art = runner::run(&o).await.expect("turnover against vLLM");
    let [t] = art.turnover.as_slice() else {
        panic!("one turnover run: {:?}", art.turnover)
    };
    assert_eq!(t.contract, "reference");
    assert_eq!((t.requests, t.responses_received), (16, 16));
    // Under churn at concurrency 4, every answer equals its prompt's answer
    // alone, byte for byte, and carries its own canary only.
    assert_eq!(
        (t.exact_output_passed, t.failed, t.contaminated),
        (16, 0, 0),
        "{:#?}",
        t.failures
    );
    assert_eq!(t.references.len(), 16);
    assert!(t.references.iter().all(|r| {
        r.as_deref()
            .is_some_and(|s| s.split_whitespace().count() >= 5)
    }));
}

/// The shipped cross-engine plan, end to end: llama.cpp (baseline) against
/// vLLM (candidate), interleaved, on a smaller suite and a free port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llamacpp_to_vllm_plan_qualifies_end_to_end_and_its_report_verifies() {
    let _serial = SERIAL.lock().await;
    let _engines = qualify_support::serial().await;
    vllm::setup();
    let env = qualify_support::Env::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = std::fs::read_to_string(root.join("plans/llamacpp-to-vllm.toml")).unwrap();
    let suite = std::fs::read_to_string(root.join("suites/llamacpp-to-vllm.toml"))
        .unwrap()
        .replace("requests = 12", "requests = 4")
        .replace("requests = 16", "requests = 4")
        .replace("requests = 24", "requests = 8")
        .replace("warmup = 4", "warmup = 2")
        .replace("max_tokens = 32", "max_tokens = 8");
    let suite = env.write("suite.toml", &suite);
    let port = vllm::free_port().to_string();
    let plan = shipped
        .replace(
            "../suites/llamacpp-to-vllm.toml",
            &suite.display().to_string(),
        )
        .replace(
            "../engine/vllm-serve.sh",
            &root.join("engine/vllm-serve.sh").display().to_string(),
        )
        .replace("18431", &port);
    assert!(
        plan.contains(&port),
        "the plan's port is 18431 in two places"
    );
    let plan = env.write("plan.toml", &plan);

    let o = qualify::run(&plan, &env.opts("q-vllm"))
        .await
        .expect("qualify llama.cpp → vLLM");
    let entries = env.entries("q-vllm");
    let steps = qualify_support::steps(&entries).join("\n");
    for want in [
        "start candidate ok",
        "compare - ok",
        "report - ok",
        "readmit baseline ok",
        "serving baseline ok",
        "done - ok",
    ] {
        assert!(
            qualify_support::has(&entries, want),
            "missing {want:?} in\n{steps}"
        );
    }
    let report_path = o.report.clone().expect("a report");
    let v = report::read_report_value(&report_path).unwrap();
    assert_eq!(v["schema"], "runtime-profile-comparison/v1");
    for cell in ["capacity-256", "concurrent-256"] {
        let c = &v["cells"][cell];
        assert_eq!(c["baseline_requests"], 4, "{c}");
        assert_eq!(c["candidate_requests"], 4, "{c}");
        assert_eq!(c["baseline_server_metrics"][0]["engine"], "llama.cpp");
        assert_eq!(c["candidate_server_metrics"][0]["engine"], "vllm");
        for side in ["baseline_server_metrics", "candidate_server_metrics"] {
            assert_eq!(c[side][0]["check"]["agrees"], true, "{side}: {}", c[side]);
        }
    }
    // The engine change is judged on its outputs too: vLLM's reference
    // texts are held against llama.cpp's. The words prompts agree; the free
    // text ones part (measured: 3 of 20 at seed 1), each named in one
    // warning per run and classified by the two sides' per-token logprobs.
    let runs = |side: &str| -> Vec<infergate::artifact::TurnoverRun> {
        report::read_artifact(&o.out_dir.join(format!("{side}.json")))
            .unwrap()
            .turnover
    };
    let (base, cand) = (runs("baseline"), runs("candidate"));
    let warnings = v["warnings"].to_string();
    let pairs = v["reference_comparison"]["prompts"].as_array().unwrap();
    for (b, c) in base.iter().zip(&cand) {
        assert_eq!(b.name, c.name);
        let differ: Vec<usize> = (0..b.references.len())
            .filter(|&i| b.references[i] != c.references[i])
            .collect();
        eprintln!(
            "{}: {} of {} reference texts differ",
            b.name,
            differ.len(),
            b.references.len()
        );
        if b.name.starts_with("reference-words") {
            assert!(differ.is_empty(), "{}: {differ:?}", b.name);
            continue;
        }
        assert!(
            !differ.is_empty(),
            "{}: llama.cpp and vLLM agreed on every free text",
            b.name
        );
        assert!(
            warnings.contains(&format!(
                "turnover `{}` repeat 0: {} of the candidate's reference texts differ",
                b.name,
                differ.len()
            )),
            "{warnings}"
        );
        // Each differing text is a near-tie or a hard divergence, at a
        // token position with both sides' logprob gaps (both engines send
        // logprobs), and under "rate" passes as a request.
        for &i in &differ {
            let p = pairs
                .iter()
                .find(|p| p["turnover"] == b.name.as_str() && p["request_index"] == i)
                .unwrap_or_else(|| panic!("request {i} of {} unclassified", b.name));
            assert!(
                p["class"] == "near_tie" || p["class"] == "hard",
                "request {i}: {p}"
            );
            let d = &p["divergence"];
            assert!(d["position"].is_u64(), "{p}");
            assert!(
                d["baseline"].is_object() || d["candidate"].is_object(),
                "{p}"
            );
            if p["class"] == "near_tie" {
                // Each side's choice was in the other's top-k, within the tolerance.
                for gap in ["baseline_gap_nats", "candidate_gap_nats"] {
                    let g = d[gap].as_f64().unwrap_or_else(|| panic!("{gap}: {p}"));
                    assert!(
                        g <= v["reference_comparison"]["near_tie_nats"].as_f64().unwrap(),
                        "{p}"
                    );
                }
            }
            assert_eq!(p["passed"], true, "{p}");
        }
    }
    // No request failed for its text; the share of hard divergences is the
    // quality gate's, with the turnover pairs counted once.
    let sentence = v
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("candidate_turnover"))
        .map(|(_, r)| r)
        .find(|r| r["name"] == "reference-sentence-c4")
        .expect("the free-text run in the report");
    assert_eq!(
        sentence["failures"].as_array().unwrap().len(),
        0,
        "{sentence}"
    );
    let hard = &v["quality"]["hard_divergence"];
    assert_eq!(hard["gating"], true, "{hard}");
    assert_eq!(hard["pairs"].as_u64().unwrap() as usize, pairs.len());
    assert!(
        ["pass", "fail", "inconclusive"]
            .contains(&v["gates"]["quality"]["outcome"].as_str().unwrap()),
        "{}",
        v["gates"]
    );
    // The report verifies: every derived number recomputed from its samples.
    let check = report::verify_report(&v);
    assert!(check.is_clean(), "{:#?}", check.disagreements);
}

/// The cross-engine plan's free-text reference workload
/// (`reference-sentence-c4` of suites/llamacpp-to-vllm.toml) on llama.cpp
/// (baseline profile) and on vLLM: vLLM streams per-token logprobs too, and
/// every reference pair is classified from them (identical, near-tie or
/// hard) instead of only "differs". Prints each divergence with its gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_engine_reference_divergences_are_classified_from_logprobs() {
    use infergate::measure::turnover::{self, TurnoverSpec, TurnoverWorkload};
    use report::agreement::DivergenceClass;
    use report::policy::{CrossRuntime, QualityPolicy};

    let _serial = SERIAL.lock().await;
    let server = vllm::shared();
    let llama = support::engine("baseline");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/llamacpp-to-vllm.toml");
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(suite).unwrap()).unwrap();
    let spec = table["turnover"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_table())
        .find(|t| t["name"].as_str() == Some("reference-sentence-c4"))
        .map(|t| TurnoverWorkload::alone(TurnoverSpec::from_table(t).expect("valid spec")))
        .expect("the plan's free-text workload");
    let client = support::client;
    let b = turnover::run_turnover(&client(&llama.base_url), &spec, 0, None).await;
    let c = turnover::run_turnover(&client(&server.base_url), &spec, 0, None).await;
    for run in [&b, &c] {
        assert_eq!(run.reference_tokens.len(), spec.spec.requests, "{run:#?}");
        for t in run.reference_tokens.iter().flatten().flatten() {
            assert!(t.logprob.is_finite() && t.logprob <= 0.0, "{t:?}");
            assert!(!t.top.is_empty(), "{t:?}");
        }
    }
    let near = QualityPolicy {
        cross_runtime: CrossRuntime::NearTie,
        ..QualityPolicy::default()
    };
    let (runs, notes, cmp) = report::reference::against_baseline(
        std::slice::from_ref(&b),
        std::slice::from_ref(&c),
        &near,
    );
    let cmp = cmp.expect("pairs");
    eprintln!(
        "llama.cpp vs vLLM: {} pairs, {} identical, {} near-tie, {} hard, {} text-only; candidate run failed {} of {}; {notes:?}",
        cmp.pairs,
        cmp.identical,
        cmp.near_tie,
        cmp.hard,
        cmp.text_only,
        runs[0].failed,
        runs[0].requests
    );
    let (mut n, mut sum, mut max) = (0, 0.0, 0.0f64);
    for p in &cmp.prompts {
        let a = &p.comparison.agreement;
        n += a.tokens;
        sum += a.mean_abs_dlogprob.unwrap_or(0.0) * a.tokens as f64;
        max = max.max(a.max_abs_dlogprob.unwrap_or(0.0));
        if p.comparison.class != DivergenceClass::Identical {
            let d = p.comparison.divergence.as_ref();
            eprintln!(
                "  request {} {}: token {:?}: baseline {:?} vs candidate {:?}, gaps {:?} / {:?}",
                p.request_index,
                p.comparison.class.as_str(),
                d.map(|d| d.position),
                d.and_then(|d| d.baseline.as_ref().map(|t| (&t.token, t.logprob, &t.top))),
                d.and_then(|d| d.candidate.as_ref().map(|t| (&t.token, t.logprob, &t.top))),
                d.and_then(|d| d.baseline_gap_nats),
                d.and_then(|d| d.candidate_gap_nats),
            );
        }
    }
    eprintln!(
        "agreement before divergence: {n} tokens, mean |Δ logprob| {:.3}, max {max:.3}",
        sum / n.max(1) as f64
    );
    assert_eq!(cmp.pairs, spec.spec.requests);
    assert_eq!(cmp.text_only, 0, "both engines sent logprobs");
    // Measured: 3 of 20 differ, each at a near-tie of 0.001-0.18 nats (on
    // llama.cpp alone this model's first tokens had runners-up within
    // 0.06-0.31 nats); same weights on two engines part at near-ties only.
    assert_eq!(cmp.hard, 0, "{:#?}", cmp.prompts);
}
