//! The quality gate against the real reference engine: task answers
//! captured and scored, an A/A pair that passes, and a candidate with the
//! wrong RoPE base failed on its share of hard divergences.

mod support;

use std::path::Path;

use infergate::measure::turnover::{self, TurnoverSpec, TurnoverWorkload};
use infergate::report::agreement::CrossRuntime;
use infergate::report::policy::QualityPolicy;
use infergate::report::quality::{self, task_pairs};
use infergate::report::reference::against_baseline;
use infergate::report::stats::GateOutcome;

use support::client;

fn spec(text: &str) -> TurnoverWorkload {
    let table: toml::Table = toml::from_str(text).expect("spec toml");
    let mut s = TurnoverSpec::from_table(&table).expect("valid spec");
    s.read_inputs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("suites"))
        .expect("the shipped task file");
    TurnoverWorkload::alone(s)
}

fn rate() -> QualityPolicy {
    QualityPolicy {
        cross_runtime: CrossRuntime::Rate,
        ..QualityPolicy::default()
    }
}

/// One-sided levels of a qualification with a few gating pairs.
const A: f64 = 0.05 / 4.0;

/// 100 task items on the baseline engine, twice (the same runtime on both
/// sides): every answer scored, the scores agree with a plain reading of
/// the reference texts, and the quality gate passes with no hard
/// divergence and no accuracy drop. The heavy lane
/// (`INFERGATE_TEST_HEAVY=1 scripts/test.sh`): about three minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the heavy lane: INFERGATE_TEST_HEAVY=1 scripts/test.sh"]
async fn the_same_runtime_twice_passes_the_quality_gate() {
    let s = spec(
        "name = \"tasks\"\ncontract = \"reference\"\nprompt = \"task\"\ntasks = \"data/tasks-basic.jsonl\"\nrequests = 100\nconcurrency = 4\nmax_tokens = 8\nextra = { cache_prompt = false }\n",
    );
    // Its own server: references taken "alone" must be alone (this engine's
    // CPU numerics depend on what shares the batch).
    let mut profile = support::profile("baseline");
    profile.name = "baseline-quality-aa".into();
    let mut engine = infergate::driver::engine::start(&profile, &support::log_dir())
        .await
        .expect("reference engine");
    let c = client(&engine.base_url);
    let b = turnover::run_turnover(&c, &s, 0, None).await;
    let a = turnover::run_turnover(&c, &s, 0, None).await;
    engine.stop().expect("engine stopped");
    for run in [&b, &a] {
        assert_eq!(run.task_answers.len(), 100, "{run:#?}");
        assert!(!run.task_answers.contains('-'), "every item answered");
        assert_eq!(run.contaminated, 0);
        // Under load the answers are held to the alone ones. This engine's
        // CPU numerics depend on the batch even without the prompt cache:
        // a run here once gave "CARDIER" at concurrency 4 for "CARPET"
        // alone (1 of 100; another run 0). Such a difference is a
        // controlled-output failure, never a canary or transport one.
        eprintln!("measured pass: {} of 100 differ from alone", run.failed);
        assert!(run.failed <= 5, "{:#?}", run.failures);
        assert!(
            run.failures
                .iter()
                .all(|f| f.failure_class == "controlled_output_failed"),
            "{:#?}",
            run.failures
        );
    }
    // Cross-check the scoring against the texts: a right answer's first
    // line contains an accepted answer; the share is the reference model's.
    let items = &s.task_items;
    for (i, mark) in b.task_answers.chars().enumerate() {
        let text = b.references[i]
            .as_deref()
            .expect("every reference answered");
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_lowercase();
        let contains = items[i]
            .answers
            .iter()
            .any(|a| first.contains(&a.to_lowercase()));
        if mark == '1' {
            assert!(contains, "item {i}: {text:?} scored right");
        }
    }
    let right = b.task_answers.matches('1').count();
    eprintln!(
        "baseline accuracy {right}/100; again {}/100",
        a.task_answers.matches('1').count()
    );
    assert!((35..=90).contains(&right), "{}", b.task_answers);

    let (_, _, refs) =
        against_baseline(std::slice::from_ref(&b), std::slice::from_ref(&a), &rate());
    let refs = refs.expect("reference pairs");
    let tasks = task_pairs(std::slice::from_ref(&b), std::slice::from_ref(&a));
    assert_eq!(tasks.len(), 1);
    let (q, gate) =
        quality::judge(Some(&refs), &tasks, &[], &[], &rate(), A, A).expect("something to judge");
    let gate = gate.expect("gating parts");
    eprintln!("{:#?}", gate.parts);
    // Without `cache_prompt = false` the second run's prompts reuse prefixes
    // the first one cached, computed in another batch shape, and this
    // engine's CPU numerics differ: measured by hand, 3 to 5 of these 100
    // answers flipped at a near-tied token (one logprob moved 0.6 nats).
    // With it, every pass (alone or at concurrency 4) gave the same text.
    let h = q.hard_divergence.as_ref().unwrap();
    for p in refs
        .prompts
        .iter()
        .filter(|p| p.comparison.divergence.is_some())
    {
        eprintln!(
            "  {} {:?}: {:?}",
            p.request_index, p.comparison.class, p.comparison.divergence
        );
    }
    assert_eq!(h.hard, 0, "{}", h.reason());
    let t = &q.tasks[0];
    assert_eq!(
        t.table.baseline_only + t.table.candidate_only,
        0,
        "{}",
        t.reason()
    );
    assert_eq!(gate.outcome, GateOutcome::Pass, "{gate:#?}");
}

/// 20 free-text prompts against the engine with RoPE's base at 10000
/// instead of the model's 100000: under `cross_runtime = "rate"` no single
/// difference fails a request, and the share of hard divergences fails
/// the quality gate by its lower bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_rope_base_fails_the_quality_gate_by_its_hard_divergences() {
    let s = spec(
        "name = \"sentences\"\ncontract = \"reference\"\nprompt = \"sentence\"\nrequests = 20\nconcurrency = 4\nmax_tokens = 48\n",
    );
    let base = support::engine("baseline");
    let broken = support::engine("rope-default");
    let b = turnover::run_turnover(&client(&base.base_url), &s, 0, None).await;
    let c = turnover::run_turnover(&client(&broken.base_url), &s, 0, None).await;
    let (runs, _, refs) =
        against_baseline(std::slice::from_ref(&b), std::slice::from_ref(&c), &rate());
    let refs = refs.expect("reference pairs");
    assert_eq!(
        runs[0].failed, c.failed,
        "rate: no difference fails a request"
    );
    let (q, gate) = quality::judge(Some(&refs), &[], &[], &[], &rate(), A, A).unwrap();
    let h = q.hard_divergence.unwrap();
    eprintln!("{}", h.reason());
    assert_eq!(h.pairs, 20);
    assert!(h.lower_bound_percent > h.margin_percent, "{h:#?}");
    assert_eq!(gate.unwrap().outcome, GateOutcome::Fail);
}

/// 60 task items against the reference model with layer 10's FFN norm
/// perturbed (`scripts/setup-perturbed-model.sh`): it still answers, right
/// far less often, and the accuracy part fails the quality gate by its
/// lower bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_perturbed_layer_fails_the_quality_gate_on_accuracy() {
    let s = spec(
        "name = \"tasks\"\ncontract = \"reference\"\nprompt = \"task\"\ntasks = \"data/tasks-basic.jsonl\"\nrequests = 60\nconcurrency = 4\nmax_tokens = 8\nextra = { cache_prompt = false }\n",
    );
    let base = support::engine("baseline");
    let broken = support::engine("perturbed");
    let b = turnover::run_turnover(&client(&base.base_url), &s, 0, None).await;
    let c = turnover::run_turnover(&client(&broken.base_url), &s, 0, None).await;
    assert!(
        !c.task_answers.contains('-'),
        "the perturbed model answers: {c:#?}"
    );
    let tasks = task_pairs(std::slice::from_ref(&b), std::slice::from_ref(&c));
    let (q, gate) = quality::judge(None, &tasks, &[], &[], &rate(), A, A).unwrap();
    let t = &q.tasks[0];
    eprintln!("{}", t.reason());
    assert!(t.drop_points >= 15.0, "{}", t.reason());
    assert!(t.lower_bound_points > t.margin_points, "{}", t.reason());
    assert_eq!(gate.unwrap().outcome, GateOutcome::Fail);
}

/// Generated items the reference model can do: copying a code and finding a
/// number planted at every depth of a filler context. Each reference answer
/// is scored here from its text (not by the crate's rule): the crate's
/// score agrees item by item, and the model answers most of them right, so
/// a runtime that breaks copying or retrieval has accuracy to lose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_copy_and_needle_items_are_answered_and_scored() {
    let base = support::engine("baseline");
    let c = client(&base.base_url);
    for (kind, n, want) in [
        ("\"copy\"", 20, 16),
        ("\"needle\", context_words = 120", 11, 9),
    ] {
        let s = spec(&format!(
            "name = \"gen\"\ncontract = \"reference\"\nprompt = \"task\"\ngenerate = {{ kind = {kind} }}\nrequests = {n}\nconcurrency = 4\nmax_tokens = 12\nseed = 1\nextra = {{ cache_prompt = false }}\n"
        ));
        let run = turnover::run_turnover(&c, &s, 0, None).await;
        assert_eq!(run.task_answers.len(), n, "{run:#?}");
        assert!(run.task_set_sha256.is_some());
        let mut right = 0;
        for (i, mark) in run.task_answers.chars().enumerate() {
            let q = &s.task_items[i].question;
            let text = run.references[i].as_deref().expect("answered");
            let first = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("");
            let mine = if q.starts_with("Copy this code exactly: ") {
                first.trim_end_matches('.') == q.rsplit(' ').next().unwrap()
            } else {
                let planted = q.split("The secret number is ").nth(1).unwrap();
                let planted = &planted[..4];
                let digits: Vec<&str> = first
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|d| !d.is_empty())
                    .collect();
                digits.last() == Some(&planted)
            };
            assert_eq!(mark == '1', mine, "item {i}: {q:?} answered {text:?}");
            right += usize::from(mine);
        }
        eprintln!("{kind}: {right}/{n} right ({})", run.task_answers);
        assert!(right >= want, "{kind}: {right}/{n}");
    }
}
