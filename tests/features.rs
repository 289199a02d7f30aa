//! Features beyond plain text against the real reference engine: structured
//! output asked of every request, each answer marked, and the quality gate's
//! feature part deciding an A/A pair and a candidate that drops the request's
//! `response_format` on its way (a forwarder in front of the same real
//! engine, standing for a runtime whose grammar backend ignores it).
//!
//! Tool calls likewise, against the same engine with Jinja chat templates
//! off (the `no-jinja` profile), which refuses requests that offer tools.
//!
//! Speculative decoding likewise, against the `spec-ngram` profile.
//!
//! Cost: 5 runs of 20 requests, each asked alone and then at concurrency 4
//! (200 requests of at most 24 output tokens; the refused ones cost
//! nothing); then 2 runs of 8 word-list requests, alone and again one at a
//! time without the prompt cache (32 requests of about 30 tokens). The
//! binary: 115 s in the suite beside another binary (docs/testing.md).

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use infergate::measure::features::{STRUCTURED_OUTPUT, TOOL_CALL};
use infergate::measure::record::RequestRecord;
use infergate::measure::turnover::{self, TurnoverSpec, TurnoverWorkload};
use infergate::report::artifact::TurnoverRun;
use infergate::report::policy::QualityPolicy;
use infergate::report::quality::{self, QualityComparison, feature_pairs, task_pairs};
use infergate::report::stats::GateOutcome;
use infergate_testkit::faultproxy::{Fault, FaultProxy, FaultProxyConfig};

use support::client;

const REQUESTS: usize = 20;

/// 20 generated arithmetic questions asking `feature` (a TOML key and
/// value) of every request, read from the shipped suites' folder.
fn spec(name: &str, feature: &str, max_tokens: u64) -> TurnoverWorkload {
    let text = format!(
        "name = \"{name}\"\ncontract = \"reference\"\nprompt = \"task\"\ngenerate = {{ kind = \"arithmetic\" }}\n{feature}\nrequests = {REQUESTS}\nconcurrency = 4\nmax_tokens = {max_tokens}\nseed = 3\nextra = {{ cache_prompt = false }}\n"
    );
    let table: toml::Table = toml::from_str(&text).expect("spec toml");
    let mut s = TurnoverSpec::from_table(&table).expect("valid spec");
    s.read_inputs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("suites"))
        .expect("the shipped files");
    TurnoverWorkload::alone(s)
}

/// With no discordant pair, Tango's one-sided bound on 20 pairs at these
/// levels is 20.1 points: a 25-point margin passes an A/A pair here, the
/// default 5 needs about 95 pairs (docs/features.md).
fn policy() -> QualityPolicy {
    QualityPolicy {
        feature_margin_points: 25.0,
        ..QualityPolicy::default()
    }
}

/// One-sided levels of a qualification with a few gating pairs.
const A: f64 = 0.05 / 4.0;

fn marks(run: &TurnoverRun) -> &str {
    run.features
        .get(STRUCTURED_OUTPUT)
        .map(String::as_str)
        .unwrap_or_default()
}

/// `infergate compare` of two run directories into `report`, then
/// `infergate verify` of it, which must agree: the report, and what
/// compare printed.
fn compare_and_verify(base: &Path, cand: &Path, report: &Path) -> (serde_json::Value, String) {
    compare_and_verify_by(base, cand, report, None)
}

/// [`compare_and_verify`] under the policy file `policy`, when given.
fn compare_and_verify_by(
    base: &Path,
    cand: &Path,
    report: &Path,
    policy: Option<&Path>,
) -> (serde_json::Value, String) {
    let infergate = || std::process::Command::new(env!("CARGO_BIN_EXE_infergate"));
    let mut compare = infergate();
    compare
        .arg("compare")
        .arg(base.join("run.json"))
        .arg(cand.join("run.json"))
        .arg("-o")
        .arg(report);
    if let Some(p) = policy {
        compare.arg("--policy").arg(p);
    }
    let o = compare.output().unwrap();
    assert!(report.is_file(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = infergate().arg("verify").arg(report).output().unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let r = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    (r, String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The quality gate's parts of a report: (subject, outcome).
fn quality_parts(r: &serde_json::Value) -> Vec<(String, String)> {
    r["gates"]["quality"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["subject"].as_str().unwrap().to_string(),
                p["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A journal that keeps the records of cell `label`.
fn kept<'a>(label: &'a str, into: &'a mut Vec<RequestRecord>) -> impl FnMut(&RequestRecord) + 'a {
    move |r: &RequestRecord| {
        if r.cell == label {
            into.push(r.clone());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_fails_only_its_own_part_when_a_runtime_drops_it() {
    let s = spec(
        "json-answers",
        "response_format = { schema = \"schemas/answer.json\" }",
        24,
    );
    let base = support::engine("baseline");
    // Every request through the forwarder loses its `response_format`; the
    // rest of the body, and the stream back, are the engine's own.
    let dropping = FaultProxy::start(FaultProxyConfig::new(&base.base_url), |_| {
        Fault::DropField("response_format")
    })
    .await
    .expect("forwarder");
    // The reference requests (each prompt alone) as journaled, per run.
    let label = s.spec.reference_label(0);
    let mut journals: [Vec<RequestRecord>; 3] = Default::default();
    let [jb, ja, jc] = &mut journals;
    let b =
        turnover::run_turnover(&client(&base.base_url), &s, 0, Some(&mut kept(&label, jb))).await;
    let a =
        turnover::run_turnover(&client(&base.base_url), &s, 0, Some(&mut kept(&label, ja))).await;
    let dropped_url = format!("http://{}", dropping.addr());
    let c = turnover::run_turnover(&client(&dropped_url), &s, 0, Some(&mut kept(&label, jc))).await;

    // The schema's first request timed apart from the rest (llama.cpp
    // compiles the grammar for every request: no difference expected here),
    // cross-checked by the server's own prompt timer: no reference answer's
    // first token reached the client before the server had evaluated its
    // prompt (1 ms slack between the clocks), and what the grammar costs
    // is outside that timer (client TTFT less the server's prompt time).
    for (run, journal) in [&b, &a, &c].into_iter().zip(&journals) {
        let (first, later) = (run.first_ttft_ms, run.later_ttft_p50_ms);
        assert!(first.is_some() && later.is_some(), "{run:#?}");
        let first_journaled = journal
            .iter()
            .find(|r| r.index == 0)
            .map(|r| r.capture.ttft_ms);
        assert_eq!(first_journaled, Some(first), "{}", run.name);
        let outside: Vec<f64> = journal
            .iter()
            .map(|r| {
                let c = &r.capture;
                let prompt_ms = c.server_timings.as_ref().and_then(|t| t.prompt_ms);
                let (ttft, prompt_ms) =
                    (c.ttft_ms.unwrap(), prompt_ms.expect("llama.cpp's timings"));
                assert!(
                    ttft + 1.0 >= prompt_ms,
                    "request {}: TTFT {ttft} < server prompt {prompt_ms}",
                    r.index
                );
                ttft - prompt_ms
            })
            .collect();
        assert_eq!(outside.len(), REQUESTS);
        eprintln!(
            "{}: first request TTFT {first:?} ms, later p50 {later:?} ms; TTFT outside the server's prompt time, p50 {:?} ms",
            run.name,
            infergate::report::stats::median(&outside)
        );
    }
    // Each answer as the marks say, read again here from its text.
    for run in [&b, &a, &c] {
        assert_eq!(marks(run).len(), REQUESTS, "{run:#?}");
        for (i, m) in marks(run).chars().enumerate() {
            let text = run.references[i].as_deref().unwrap_or("");
            let parsed: Option<serde_json::Value> = serde_json::from_str(text.trim()).ok();
            let valid = parsed.as_ref().is_some_and(|v| {
                v.as_object().is_some_and(|o| o.len() == 1) && v["answer"].is_i64()
            });
            assert_eq!(m == '1', valid, "item {i}: {text:?} marked {m}");
        }
    }
    eprintln!(
        "marks: baseline {}, again {}, response_format dropped {}",
        marks(&b),
        marks(&a),
        marks(&c)
    );
    // With the grammar, this small model sometimes falls into a run of
    // blank lines inside the object until `max_tokens` cuts it (measured:
    // 4 of these 20, the same 4 every run): named apart as cut off, and
    // the same on both sides of an A/A pair.
    let valid = |run| marks(run).chars().filter(|&m| m == '1').count();
    assert!(
        marks(&b).chars().all(|m| m == '1' || m == 'c'),
        "{}",
        marks(&b)
    );
    assert!(valid(&b) >= REQUESTS * 3 / 4, "{}", marks(&b));
    assert_eq!(marks(&a), marks(&b), "greedy and alone: the same answers");
    // Without it, the model answers in prose ("10"): JSON, not the object
    // the schema asks for.
    assert_eq!(valid(&c), 0, "{}", marks(&c));

    let (q, aa) = judged(&b, &a);
    eprintln!("A/A: {}", q.features[0].reason());
    // The only part: a feature workload's items are not scored for accuracy.
    assert_eq!(aa.len(), 1, "{aa:?}");
    assert_eq!(
        aa["quality: structured_output json-answers"],
        GateOutcome::Pass
    );

    let (q, broken) = judged(&b, &c);
    eprintln!("dropped: {}", q.features[0].reason());
    assert_eq!(
        broken["quality: structured_output json-answers"],
        GateOutcome::Fail
    );
    let f = &q.features[0];
    assert_eq!(f.baseline_marks.get("valid"), Some(&(valid(&b) as u64)));
    assert_eq!(f.candidate_marks.get("valid"), None, "{f:#?}");
    assert_eq!(f.rate.table.baseline_only, valid(&b) as u64, "{f:#?}");
    drop(dropping);
}

/// The quality comparison of `b` against `c` (features and tasks), and its
/// gate's parts by name.
fn judged(b: &TurnoverRun, c: &TurnoverRun) -> (QualityComparison, BTreeMap<String, GateOutcome>) {
    let (bs, cs) = (std::slice::from_ref(b), std::slice::from_ref(c));
    let features = feature_pairs(bs, cs);
    assert!(!features.is_empty());
    let (q, gate) = quality::judge(None, &task_pairs(bs, cs), &features, &[], &policy(), A, A)
        .expect("something to judge");
    let parts = gate
        .expect("gating parts")
        .parts
        .into_iter()
        .map(|p| (p.subject, p.outcome))
        .collect();
    (q, parts)
}

/// Tool calls on the real engine: every request offers `submit_answer` and
/// requires a call. The baseline answers every request (its reference pass
/// without logprobs, which llama.cpp refuses beside tools on a stream),
/// each answer marked by its calls; the same engine with Jinja
/// chat templates off (the `no-jinja` profile) refuses every such request,
/// and each is marked as no answer with its refusal kept.
///
/// Measured here: the reference model answers in prose even under
/// `tool_choice = "required"` (this llama.cpp build forces no call for its
/// chat template), so every baseline answer is `n` and a live A/A pair
/// cannot show delivered calls; the assembly of streamed calls and their
/// marks are tested on llama.cpp-shaped streams (`client` and `features`
/// unit tests), the gate on marks in `quality` and `verify_tamper`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_requests_are_marked_and_a_runtime_that_refuses_tools_is_named() {
    let s = spec(
        "tool-answers",
        "tools = { file = \"tools/answer.json\", choice = \"required\" }",
        16,
    );
    let base = support::engine("baseline");
    let no_jinja = support::engine("no-jinja");
    let b = turnover::run_turnover(&client(&base.base_url), &s, 0, None).await;
    let c = turnover::run_turnover(&client(&no_jinja.base_url), &s, 0, None).await;
    let marks = |run: &TurnoverRun| run.features.get(TOOL_CALL).cloned().unwrap_or_default();
    eprintln!("marks: baseline {}, no-jinja {}", marks(&b), marks(&c));
    assert_eq!(marks(&b).len(), REQUESTS);
    assert!(!marks(&b).contains('-'), "every request answered: {b:#?}");
    assert_eq!(b.failed, 0, "{:#?}", b.failures);
    // Refused: no answer, and the refusal is the request's failure.
    assert_eq!(marks(&c), "-".repeat(REQUESTS));
    assert_eq!(c.failed, REQUESTS);
    let f = &c.failures[0];
    assert_eq!(f.failure_class, "http_error", "{f:#?}");
    assert!(f.error.as_deref().unwrap_or("").contains("jinja"), "{f:#?}");
    let (q, _) = judged(&b, &c);
    eprintln!("no-jinja: {}", q.features[0].reason());
    assert_eq!(
        q.features[0].candidate_marks.get("no_answer"),
        Some(&(REQUESTS as u64))
    );
}

/// Speculative decoding on the real engine: the `spec-ngram` profile (the
/// baseline drafting from n-grams already in the context) against the
/// baseline, on a prompt that repeats a word. The server's own per-response
/// counts (`timings.draft_n`, `draft_n_accepted`) give the acceptance; its
/// log's per-task lines ("draft acceptance = … (A accepted / G generated)")
/// must sum to the same; the baseline drafts nothing; and the greedy
/// reference texts are the same with it on and off (lossless at
/// temperature 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculative_decoding_is_counted_by_the_server_and_changes_no_greedy_text() {
    let _alone = spec_engine_alone().await;
    let text = "name = \"words12\"\ncontract = \"reference\"\nprompt = \"words\"\nwords = 12\ncode_words = [\"cedar\", \"violet\"]\nrequests = 8\nconcurrency = 1\nseed = 5\nextra = { cache_prompt = false }\n";
    let table: toml::Table = toml::from_str(text).expect("spec toml");
    let s = TurnoverWorkload::alone(TurnoverSpec::from_table(&table).expect("valid spec"));
    let base = support::engine("baseline");
    let spec = support::engine("spec-ngram");
    // The log file outlives this binary (it is appended to): read what
    // this test's requests wrote.
    let log_from = std::fs::metadata(&spec.log_path).map_or(0, |m| m.len() as usize);
    let mut records: Vec<(bool, infergate::measure::record::RequestRecord)> = Vec::new();
    let b = {
        let mut keep =
            |r: &infergate::measure::record::RequestRecord| records.push((false, r.clone()));
        turnover::run_turnover(&client(&base.base_url), &s, 0, Some(&mut keep)).await
    };
    let c = {
        let mut keep =
            |r: &infergate::measure::record::RequestRecord| records.push((true, r.clone()));
        turnover::run_turnover(&client(&spec.base_url), &s, 0, Some(&mut keep)).await
    };
    let counts = |on: bool| {
        let t = records
            .iter()
            .filter(|(side, _)| *side == on)
            .filter_map(|(_, r)| r.capture.server_timings);
        t.fold((0u64, 0u64, 0u64), |(d, a, p), t| {
            (
                d + t.draft_n.unwrap_or(0),
                a + t.draft_n_accepted.unwrap_or(0),
                p + t.predicted_n.unwrap_or(0),
            )
        })
    };
    let (drafted, accepted, predicted) = counts(true);
    eprintln!(
        "spec-ngram: {accepted} of {drafted} drafted tokens accepted ({:.1} %), {:.1} % of {predicted} output tokens",
        100.0 * accepted as f64 / drafted.max(1) as f64,
        100.0 * accepted as f64 / predicted.max(1) as f64
    );
    assert!(
        drafted > 0 && accepted > 0 && accepted <= drafted,
        "{drafted} {accepted}"
    );
    assert_eq!(counts(false).0, 0, "the baseline drafts nothing");

    // The server's log, a source apart from its responses, says the same.
    let logged = || {
        let log = std::fs::read(&spec.log_path).unwrap_or_default();
        let log = String::from_utf8_lossy(log.get(log_from..).unwrap_or_default()).into_owned();
        log.lines()
            .filter_map(|l| l.split("draft acceptance = ").nth(1))
            .filter_map(|rest| {
                let inner = rest.split('(').nth(1)?.split(')').next()?;
                let mut nums = inner
                    .split_whitespace()
                    .filter_map(|w| w.parse::<u64>().ok());
                Some((nums.next()?, nums.next()?))
            })
            .fold((0u64, 0u64), |(a, g), (x, y)| (a + x, g + y))
    };
    let mut from_log = logged();
    for _ in 0..20 {
        if from_log == (accepted, drafted) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        from_log = logged();
    }
    assert_eq!(
        from_log,
        (accepted, drafted),
        "log (accepted, generated) against the responses"
    );

    // Lossless at temperature 0: the same reference texts with drafting on
    // and off, and each side's measured pass the same as its references
    // (one at a time and without the prompt cache: this engine's CPU
    // numerics move with the batch and with a cached prefix, drafting or
    // not, as tests/quality.rs measured).
    let differing: Vec<usize> = (0..s.spec.requests)
        .filter(|&i| b.references[i] != c.references[i])
        .collect();
    assert!(
        differing.is_empty(),
        "greedy texts differ with drafting on: {differing:?}"
    );
    assert_eq!(b.failed, 0, "{:#?}", b.failures);
    assert_eq!(c.failed, 0, "{:#?}", c.failures);
}

/// One test at a time on the shared `spec-ngram` server: the counting test
/// sums the server's log over its own requests, so no other test's
/// drafting may land in that log meanwhile.
async fn spec_engine_alone() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A cell that expects speculative decoding (`expect = {
/// spec_acceptance_min }`): the engine that drafts meets it, by the
/// server's own counts (summed from the journal's per-response counts);
/// the one that drafts nothing is named, its cell not eligible; and a
/// comparison whose candidate lost the feature fails on that cell. About
/// 7 s: two runs of 6 requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_expecting_speculative_decoding_names_the_side_that_did_not_draft() {
    let _alone = spec_engine_alone().await;
    let dir = tempfile::tempdir().unwrap();
    // Answers that repeat a word: n-gram drafting finds its n-grams in the
    // context (on filler prompts it may draft nothing at all).
    let log: String = ["cedar", "violet", "amber", "maple", "river", "stone"]
        .iter()
        .map(|w| {
            format!(
                "{{\"messages\": [{{\"role\": \"user\", \"content\": \"Write the word {w} twelve times, separated by spaces, and nothing else.\"}}], \"max_tokens\": 48}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("words.jsonl"), log).unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"spec\"\n[[cell]]\nname = \"spec\"\nmax_tokens = 48\nconcurrency = 1\nrequests = 6\n\
         warmup = 0\nseed = 3\nworkload = { kind = \"openai\", path = \"words.jsonl\" }\n\
         expect = { spec_acceptance_min = 0.0 }\n",
    )
    .unwrap();
    let run = |engine: &str, name: &str| {
        let e = support::engine(engine);
        let out = dir.path().join(name);
        let opts = support::run_opts(&e.base_url, suite.clone(), out.clone());
        async move {
            let art = infergate::measure::runner::run(&opts).await.expect("run");
            (art, out)
        }
    };
    let (on, on_dir) = run("spec-ngram", "on").await;
    let (off, off_dir) = run("baseline", "off").await;

    let cell = &on.cells[0];
    let s = cell
        .speculative
        .as_ref()
        .expect("the drafting engine says so");
    let journal =
        infergate::measure::journal::read(&on_dir.join(infergate::measure::runner::JOURNAL_FILE))
            .unwrap();
    let drafted: u64 = journal
        .iter()
        .filter_map(|r| r.capture.server_timings.and_then(|t| t.draft_n))
        .sum();
    eprintln!(
        "spec-ngram cell: {} of {} drafted tokens accepted over {} responses",
        s.accepted, s.drafted, s.reported
    );
    assert!(s.drafted > 0 && s.drafted == drafted, "{s:?} vs {drafted}");
    assert!(
        !cell
            .ineligible_reasons
            .iter()
            .any(|r| r.starts_with("expect.")),
        "{:?}",
        cell.ineligible_reasons
    );
    let off_cell = &off.cells[0];
    assert!(!off_cell.performance_eligible);
    assert!(
        off_cell
            .ineligible_reasons
            .iter()
            .any(|r| r
                .contains("expect.spec_acceptance_min 0: the server reported no drafted tokens")),
        "{:?}",
        off_cell.ineligible_reasons
    );

    // The candidate without it fails that cell's part, naming why.
    let report = dir.path().join("report.json");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("compare")
        .arg(on_dir.join("run.json"))
        .arg(off_dir.join("run.json"))
        .arg("-o")
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(
        text.contains("the candidate did not do what the cell expects, where the baseline did"),
        "{text}"
    );
    // Both sides' drafting side by side, in the report and on the screen.
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        r["cells"]["spec"]["baseline_speculative"]["drafted"],
        s.drafted
    );
    assert_eq!(
        r["cells"]["spec"]["baseline_speculative"]["accepted"],
        s.accepted
    );
    let shown = String::from_utf8_lossy(&o.stdout);
    let line = format!(
        "speculative decoding: baseline {} of {} drafted tokens accepted",
        s.accepted, s.drafted
    );
    assert!(shown.contains(&line), "{shown}");
    let v = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("verify")
        .arg(&report)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}

/// A cell on `/v1/completions`: every measured request goes there with its
/// prompt as text (seen on the wire by a pass-through forwarder), and the
/// prompt tokens the run records are the engine's own count of that text
/// (its `/tokenize`: no chat template), which its per-response timings
/// (`prompt_n + cache_n`, `predicted_n`) agree with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completions_cell_sends_text_prompts_and_the_server_counts_them_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"text\"\n[[cell]]\nname = \"text\"\nendpoint = \"completions\"\nprompt_tokens = 96\n\
         max_tokens = 8\nrequests = 4\nwarmup = 1\nseed = 3\n",
    )
    .unwrap();
    let base = support::engine("baseline");
    let proxy = FaultProxy::start(FaultProxyConfig::new(&base.base_url), |_| Fault::Pass)
        .await
        .unwrap();
    let out = dir.path().join("run");
    let opts = support::run_opts(&proxy.base_url(), suite, out.clone());
    let art = infergate::measure::runner::run(&opts).await.expect("run");
    let cell = &art.cells[0];
    assert_eq!(cell.shape.endpoint.as_deref(), Some("completions"));
    assert_eq!((cell.requests, cell.succeeded), (4, 4), "{cell:?}");
    assert!(cell.performance_eligible, "{:?}", cell.ineligible_reasons);

    let streamed: Vec<_> = proxy
        .events()
        .into_iter()
        .filter(|e| e.body.as_ref().is_some_and(|b| b["stream"] == true))
        .collect();
    assert_eq!(streamed.len(), 5, "a warmup and 4 measured requests");
    let http = support::http();
    let journal =
        infergate::measure::journal::read(&out.join(infergate::measure::runner::JOURNAL_FILE))
            .unwrap();
    for e in &streamed {
        assert_eq!(e.path, "/v1/completions");
        let body = e.body.as_ref().unwrap();
        assert!(body.get("messages").is_none(), "{body}");
        let prompt = body["prompt"].as_str().expect("a text prompt");
        if prompt.contains("-warm]") {
            continue; // the warmup, never recorded
        }
        let r = journal
            .iter()
            .find(|r| prompt.contains(&format!(" request {} run ", r.index)))
            .expect("a measured request's record");
        let counted: serde_json::Value = http
            .post(format!("{}/tokenize", base.base_url))
            .json(&serde_json::json!({ "content": prompt }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let by_engine = counted["tokens"].as_array().unwrap().len() as u64;
        let c = &r.capture;
        assert_eq!(c.prompt_tokens, Some(by_engine), "request {}", r.index);
        let t = c.server_timings.expect("llama.cpp's timings");
        assert_eq!(
            t.prompt_n.unwrap() + t.cache_n.unwrap_or(0),
            by_engine,
            "request {}",
            r.index
        );
        assert_eq!(t.predicted_n, c.completion_tokens);
        assert_eq!(c.completion_tokens, Some(8));
    }
    eprintln!(
        "completions cell: prompt tokens {:?}, template {:?}",
        journal
            .iter()
            .map(|r| r.capture.prompt_tokens)
            .collect::<Vec<_>>(),
        journal.first().and_then(|r| r.template_prompt_tokens)
    );
}

/// Embeddings on the reference engine: the two reference profiles (2 and 4
/// slots) embed the same 48 inputs, 8 per request; their agreement is what
/// the policy's floors were set from, and must hold them; the
/// perturbed-weights model, measured after, falls below them and fails
/// that part alone. A second client asks the first batch again and gets
/// the artifact's vectors. A second workload sends one input per request,
/// which batching cannot move: it holds floors of its own (0.999, 0.9999)
/// the batched workload could not, and the perturbed model fails them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_agree_across_the_reference_profiles_and_a_perturbed_model_falls_outside() {
    use infergate::report::embedding::PART_PREFIX;
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"emb\"\n[[embeddings]]\nname = \"sentences\"\ninputs = 48\nbatch = 8\nseed = 3\n\
         [[embeddings]]\nname = \"alone\"\ninputs = 16\nbatch = 1\nseed = 5\n",
    )
    .unwrap();
    // Strict floors: for `alone` alone, and for every workload.
    let own = dir.path().join("own-floors.toml");
    let strict = "cosine_min = 0.999\ncosine_mean_min = 0.9999\n";
    std::fs::write(
        &own,
        format!("[[quality.embeddings]]\nworkload = \"alone\"\n{strict}"),
    )
    .unwrap();
    let everywhere = dir.path().join("strict-floors.toml");
    std::fs::write(
        &everywhere,
        format!(
            "[quality]\nembedding_{}",
            strict.replace("\nc", "\nembedding_c")
        ),
    )
    .unwrap();
    let run = |engine: &str, name: &str| {
        let e = support::engine(engine);
        let out = dir.path().join(name);
        let mut opts = support::run_opts(&e.base_url, suite.clone(), out.clone());
        opts.skip_turnover = None;
        async move {
            let art = infergate::measure::runner::run(&opts).await.expect("run");
            (art, out, e.base_url.clone())
        }
    };
    let (base, base_dir, base_url) = run("embed-baseline", "baseline").await;
    let b = &base.embeddings[0];
    assert_eq!((b.requests, b.failed, b.vectors.len()), (6, 0, 48), "{b:?}");

    // The first batch again, from another client.
    let inputs = infergate::measure::embeddings::inputs(
        &infergate::config::suite::Suite::load(&suite)
            .unwrap()
            .0
            .embeddings[0],
    );
    let again: serde_json::Value = support::http()
        .post(format!("{base_url}/v1/embeddings"))
        .json(&serde_json::json!({ "input": &inputs[..8] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for item in again["data"].as_array().unwrap() {
        let i = item["index"].as_u64().unwrap() as usize;
        let v: Vec<f32> = serde_json::from_value(item["embedding"].clone()).unwrap();
        assert_eq!(b.vectors[i].as_ref(), Some(&v), "input {i}");
    }

    // Each workload's agreement and part outcome, in the suite's order.
    let judged_by = |cand_dir: &Path, name: &str, policy: Option<&Path>| {
        let report = dir.path().join(format!("{name}.json"));
        let (r, _) = compare_and_verify_by(&base_dir, cand_dir, &report, policy);
        let parts = quality_parts(&r);
        let names: Vec<&str> = parts.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(
            names,
            [
                format!("{PART_PREFIX}sentences"),
                format!("{PART_PREFIX}alone")
            ]
        );
        let agreement = |i: usize| (r["quality"]["embeddings"][i].clone(), parts[i].1.clone());
        [agreement(0), agreement(1)]
    };
    let judged = |cand_dir: &Path, name: &str| judged_by(cand_dir, name, None);
    let (_, cand_dir, _) = run("embed-candidate", "candidate").await;
    let [(aa, outcome), (aa_alone, _)] = judged(&cand_dir, "aa");
    let floors = QualityPolicy::default();
    eprintln!(
        "A/A embeddings: lowest cosine {}, mean {}",
        aa["cosine_min"], aa["cosine_mean"]
    );
    assert_eq!(outcome, "pass", "{aa}");
    assert!(aa["cosine_min"].as_f64().unwrap() >= floors.embedding_cosine_min);
    assert!(aa["cosine_mean"].as_f64().unwrap() >= floors.embedding_cosine_mean_min);
    // One input per request: the two profiles agree to the strict floors,
    // which only a workload's own floors can ask of it.
    eprintln!(
        "A/A embeddings, one input per request: lowest cosine {}, mean {}",
        aa_alone["cosine_min"], aa_alone["cosine_mean"]
    );
    let outcomes = |j: [(serde_json::Value, String); 2]| [j[0].1.clone(), j[1].1.clone()];
    assert_eq!(
        outcomes(judged_by(&cand_dir, "aa-own", Some(&own))),
        ["pass", "pass"]
    );
    assert_eq!(
        outcomes(judged_by(&cand_dir, "aa-strict", Some(&everywhere))),
        ["fail", "pass"]
    );

    let (_, bad_dir, _) = run("embed-perturbed", "perturbed").await;
    let [(bad, outcome), (bad_alone, _)] = judged(&bad_dir, "perturbed");
    eprintln!(
        "perturbed embeddings, one input per request: lowest cosine {}, mean {}",
        bad_alone["cosine_min"], bad_alone["cosine_mean"]
    );
    assert_eq!(
        outcomes(judged_by(&bad_dir, "perturbed-own", Some(&own))),
        ["fail", "fail"]
    );
    eprintln!(
        "perturbed embeddings: lowest cosine {}, mean {}",
        bad["cosine_min"], bad["cosine_mean"]
    );
    assert_eq!(outcome, "fail", "{bad}");
    assert!(bad["cosine_min"].as_f64().unwrap() < floors.embedding_cosine_min);
}

/// Reasoning, on the fast source (the reference model never reasons): a
/// workload expecting each answer's reasoning apart from it, its requests
/// asking the source to reason for 3 chunks first. Two sources that send
/// it as `reasoning_content` pass the reasoning part as an A/A pair; a
/// source that leaves it in the content (`<think>…</think>`, a runtime
/// whose reasoning parser broke) fails that part alone, its answers
/// marked `t`. The answer's first token is timed at the first answer chunk,
/// apart from the first output (the client's unit tests hold the two apart
/// on a scripted stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_left_in_the_content_fails_only_its_part_and_an_a_a_pair_passes() {
    use infergate::measure::features::REASONING;
    use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"reasoning\"\n[[turnover]]\nname = \"thinks\"\ncontract = \"reference\"\nprompt = \"words\"\n\
         words = 4\nreasoning = true\nrequests = 100\nconcurrency = 4\nmax_tokens = 8\nseed = 3\n\
         extra = { fastsource = { reasoning_chunks = 3 } }\n",
    )
    .unwrap();
    let source = |think_in_content: bool| {
        FastSource::start(FastSourceConfig {
            itl: std::time::Duration::from_millis(1),
            think_in_content,
            ..FastSourceConfig::default()
        })
        .expect("fast source")
    };
    let run = |url: String, name: &str| {
        let out = dir.path().join(name);
        let mut opts = support::run_opts(&url, suite.clone(), out.clone());
        opts.skip_turnover = None;
        async move {
            let art = infergate::measure::runner::run(&opts).await.expect("run");
            (art, out)
        }
    };
    // Each source stops when dropped: all three are held to the end.
    let (a, a2, broken) = (source(false).1, source(false).1, source(true).1);
    let (base, base_dir) = run(a.base_url(), "a").await;
    let (_, again_dir) = run(a2.base_url(), "a2").await;
    let (cand, cand_dir) = run(broken.base_url(), "broken").await;
    let marks = |art: &infergate::report::artifact::RunArtifact| {
        art.turnover[0].features[REASONING].clone()
    };
    assert_eq!(marks(&base), "1".repeat(100));
    assert_eq!(marks(&cand), "t".repeat(100));

    let journal =
        infergate::measure::journal::read(&base_dir.join(infergate::measure::runner::JOURNAL_FILE))
            .unwrap();
    let reasoned: Vec<_> = journal
        .iter()
        .filter(|r| !r.capture.reasoning.is_empty())
        .collect();
    assert!(reasoned.len() >= 100, "{}", reasoned.len());
    // Output begins at the first reasoning chunk, the answer at the first
    // chunk after the 3 reasoning ones. Times are per read, so chunks the
    // source wrote late in one burst share one time (seen on a loaded
    // machine): the test holds each time to its chunk, not to a gap.
    for r in reasoned {
        let c = &r.capture;
        assert_eq!(c.ttfo_ms, c.chunk_ms.first().copied(), "{c:?}");
        assert_eq!(c.ttft_ms, c.chunk_ms.get(3).copied(), "{c:?}");
        assert!(!c.reasoning_from_content && !c.content.contains("<think>"));
    }

    let outcome = |cand: &Path, name: &str| {
        let (r, _) = compare_and_verify(&base_dir, cand, &dir.path().join(format!("{name}.json")));
        (quality_parts(&r), r)
    };
    let (aa, _) = outcome(&again_dir, "aa");
    assert_eq!(
        aa,
        vec![("quality: reasoning thinks".to_string(), "pass".to_string())]
    );
    let (bad, r) = outcome(&cand_dir, "broken");
    assert_eq!(
        bad,
        vec![("quality: reasoning thinks".to_string(), "fail".to_string())]
    );
    assert_eq!(
        r["quality"]["features"][0]["candidate_marks"]["reasoning_in_content"],
        100
    );
    // Its text and speed parts do not carry the blame.
    assert_eq!(r["strict_turnover_gate_passed"], true, "{}", r["turnover"]);
}

/// Tool calls that are delivered, on the fast source (the reference model
/// never calls a tool): every request offers two functions and requires a
/// call. Two sources that call the first pass both the tool-call and the
/// same-function parts as an A/A pair; a source that calls the last, a
/// valid call of an offered function, passes the tool-call part and fails
/// the same-function part alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_calls_another_offered_function_fails_only_the_same_function_part() {
    use infergate_testkit::fastsource::{FastSource, FastSourceConfig, ToolPick};
    let dir = tempfile::tempdir().unwrap();
    let function = |name: &str| {
        serde_json::json!({"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {"answer": {"type": "integer"}},
            "required": ["answer"], "additionalProperties": false}}})
    };
    std::fs::write(
        dir.path().join("tools.json"),
        serde_json::json!([function("submit_answer"), function("ask_again")]).to_string(),
    )
    .unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"tools\"\n[[turnover]]\nname = \"calls\"\ncontract = \"reference\"\nprompt = \"words\"\n\
         words = 4\ntools = { file = \"tools.json\", choice = \"required\" }\nrequests = 100\n\
         concurrency = 4\nmax_tokens = 8\nseed = 3\n",
    )
    .unwrap();
    let source = |pick| {
        FastSource::start(FastSourceConfig {
            tool_calls: Some(pick),
            ..FastSourceConfig::default()
        })
        .expect("fast source")
        .1
    };
    let (a, a2, other) = (
        source(ToolPick::First),
        source(ToolPick::First),
        source(ToolPick::Last),
    );
    let run = |url: String, name: &str| {
        let out = dir.path().join(name);
        let mut opts = support::run_opts(&url, suite.clone(), out.clone());
        opts.skip_turnover = None;
        async move {
            infergate::measure::runner::run(&opts).await.expect("run");
            out
        }
    };
    let base_dir = run(a.base_url(), "a").await;
    let again_dir = run(a2.base_url(), "a2").await;
    let other_dir = run(other.base_url(), "other").await;
    let parts = |cand: &Path, name: &str| {
        let report = dir.path().join(format!("{name}.json"));
        quality_parts(&compare_and_verify(&base_dir, cand, &report).0)
    };
    let want = |call: &str, function: &str| {
        vec![
            ("quality: tool_call calls".to_string(), call.to_string()),
            (
                "quality: tool_function calls".to_string(),
                function.to_string(),
            ),
        ]
    };
    assert_eq!(parts(&again_dir, "aa"), want("pass", "pass"));
    assert_eq!(parts(&other_dir, "other"), want("pass", "fail"));
}

/// Tool results in a conversation, on the fast source: a two-turn
/// conversation offering a tool, each session's history its own answers.
/// The source answers the first turn with a call; the second turn's
/// request (seen on the wire by a pass-through forwarder) carries that
/// call, with the id the source gave it, and the tool's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_feeds_each_tool_call_its_result_in_the_next_turn() {
    use infergate_testkit::fastsource::{FastSource, FastSourceConfig, ToolPick};
    let (_, src) = FastSource::start(FastSourceConfig {
        tool_calls: Some(ToolPick::First),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let proxy = FaultProxy::start(FaultProxyConfig::new(src.base_url()), |_| Fault::Pass)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"agent\"\n[[cell]]\nname = \"agent\"\nprompt_tokens = 64\ntolerance_percent = 50\n\
         max_tokens = 8\nrequests = 4\nseed = 3\n\
         workload = { kind = \"conversation\", turns = 2, turn_tokens = 16, history = \"own\" }\n\
         extra = { tools = [{ type = \"function\", function = { name = \"submit_answer\", \
         parameters = { type = \"object\", properties = { answer = { type = \"integer\" } } } } }] }\n",
    )
    .unwrap();
    let opts = support::run_opts(&proxy.base_url(), suite, dir.path().join("run"));
    let art = infergate::measure::runner::run(&opts).await.expect("run");
    assert_eq!(art.cells[0].succeeded, 4, "{:?}", art.cells[0]);
    let streamed: Vec<serde_json::Value> = proxy
        .events()
        .into_iter()
        .filter_map(|e| e.body.filter(|b| b["stream"] == true))
        .collect();
    let second: Vec<&serde_json::Value> = streamed
        .iter()
        .filter(|b| b["messages"].as_array().unwrap().len() > 1)
        .collect();
    assert_eq!(second.len(), 2, "one second turn per session");
    for b in second {
        let m = b["messages"].as_array().unwrap();
        let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "user"], "{b}");
        let id = m[1]["tool_calls"][0]["id"].as_str().unwrap();
        assert!(id.starts_with("call_"), "the source's own id: {id}");
        assert_eq!(m[1]["tool_calls"][0]["function"]["name"], "submit_answer");
        assert_eq!(m[2]["tool_call_id"], id);
        assert_eq!(m[2]["content"], infergate::measure::source::TOOL_RESULT);
    }
}
