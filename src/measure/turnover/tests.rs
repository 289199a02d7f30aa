use super::*;
use crate::measure::record::Failure;

fn spec(text: &str) -> TurnoverWorkload {
    let table: toml::Table = toml::from_str(text).unwrap();
    TurnoverWorkload::alone(TurnoverSpec::from_table(&table).unwrap())
}

fn words_spec() -> TurnoverWorkload {
    spec("name = \"w\"\ncontract = \"words\"\nrequests = 4\nwords = 3\n")
}

fn cap(content: &str, finish: &str) -> StreamCapture {
    StreamCapture {
        http_status: Some(200),
        content: content.to_string(),
        finish_reasons: vec![finish.to_string()],
        saw_done: true,
        ..Default::default()
    }
}

fn failed(class: Outcome, content: &str) -> StreamCapture {
    StreamCapture {
        failure: Some(Failure {
            class,
            message: "boom".into(),
        }),
        ..cap(content, "stop")
    }
}

fn words(code_word: &str, n: usize) -> Expected<'_> {
    Expected::Words { code_word, n }
}

#[test]
fn shipped_suites_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("suites");
    let mut found = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".toml") {
            continue;
        }
        let (suite, _) =
            crate::config::suite::Suite::load(&path).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        if name == "structured-output.toml" {
            // Its schema read and sent with every request of the workload.
            let json = TurnoverWorkload::alone(suite.turnover[0].clone());
            let body = json.request_body(&json.plan(0).requests[0], 0.0);
            assert_eq!(body["response_format"]["type"], "json_schema", "{body}");
            assert_eq!(body["response_format"]["json_schema"]["name"], "answer");
        }
        if !name.starts_with("turnover") {
            continue;
        }
        assert!(!suite.turnover.is_empty(), "{name} has no [[turnover]]");
        found += 1;
    }
    assert!(
        found >= 2,
        "expected the shipped turnover suites in {}",
        dir.display()
    );
}

#[test]
fn plan_gives_each_request_its_marker_and_word() {
    let mut s = words_spec();
    s.spec.code_words = vec!["cedar".into(), "violet".into()];
    let p = s.plan(0);
    assert_eq!(p.requests.len(), 4);
    for r in &p.requests {
        assert_eq!(p.markers.get(r.index), Some(r.marker.as_str()));
        let last = r.messages.as_array().unwrap().last().unwrap();
        assert!(last["content"].as_str().unwrap().contains(&r.marker));
    }
    assert_eq!(p.requests[1].code_word.as_deref(), Some("violet"));
    // A repeat gets fresh markers; the same repeat the same ones.
    let again = s.plan(0);
    let repeat = s.plan(1);
    assert_eq!(p.markers, again.markers);
    assert!(p.markers.iter().all(|m| repeat.markers.owner(m).is_none()));
}

#[test]
fn only_the_reference_pass_asks_for_logprobs() {
    let s = spec("name = \"r\"\ncontract = \"reference\"\nrequests = 2\n");
    let p = s.plan(0);
    let r = s.reference_body(&p.requests[0]);
    assert_eq!(
        (&r["logprobs"], &r["top_logprobs"]),
        (&Value::Bool(true), &Value::from(5))
    );
    assert_eq!(r["temperature"], 0.0);
    let m = s.request_body(&p.requests[0], 0.0);
    assert!(m.get("logprobs").is_none() && m.get("top_logprobs").is_none());
    // 0 asks for none (a server that rejects the fields).
    let off = spec("name = \"r\"\ncontract = \"reference\"\nrequests = 2\ntop_logprobs = 0\n");
    assert!(off.reference_body(&p.requests[0]).get("logprobs").is_none());
    // Tokens are kept where the text is, and not at all when no server sent any.
    let mut a = cap("Hi", "stop");
    a.tokens = vec![crate::report::agreement::TokenLogprob {
        token: "Hi".into(),
        bytes: None,
        id: None,
        logprob: -0.1,
        top: vec![],
    }];
    let mut cut = a.clone();
    cut.truncated = true;
    let kept = workload::reference_tokens([&a, &cut, &cap("Hi", "stop")]);
    assert_eq!(
        kept.iter().map(Option::is_some).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert!(workload::reference_tokens([&cap("Hi", "stop")]).is_empty());
}

#[test]
fn request_body_streams_with_usage_and_lets_the_contract_win() {
    let mut s = words_spec();
    s.spec.model = Some("m".into());
    s.spec.seed = Some(9);
    s.spec
        .extra
        .insert("cache_prompt".into(), Value::Bool(false));
    s.spec.extra.insert("max_tokens".into(), Value::from(1));
    let p = s.plan(0);
    let b = s.request_body(&p.requests[0], 0.0);
    assert_eq!(b["model"], "m");
    assert_eq!(b["max_tokens"], 2 * 3 + 16);
    assert_eq!(b["temperature"], 0.0);
    assert_eq!(b["seed"], 9);
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"]["include_usage"], true);
    assert_eq!(b["cache_prompt"], false);
}

#[test]
fn exact_answer_passes_every_check() {
    let s = words_spec();
    let p = s.plan(0);
    let m = &p.requests[2].marker;
    let j = judge(
        &p.markers,
        2,
        &cap(&format!("{m} cedar cedar cedar"), "stop"),
        words("cedar", 3),
    );
    assert_eq!(j.outcome, Outcome::Ok);
    assert!(j.received && j.canary.passed() && j.failure.is_none());
}

#[test]
fn transport_failures_win_over_everything() {
    let s = words_spec();
    let p = s.plan(0);
    let foreign = p.markers.get(1).unwrap();
    for class in [
        Outcome::RequestError,
        Outcome::HttpError,
        Outcome::StreamValidationFailed,
    ] {
        let j = judge(
            &p.markers,
            0,
            &failed(class, &format!("{foreign} x")),
            words("cedar", 3),
        );
        assert_eq!(j.outcome, class);
        assert!(!j.received);
        let f = j.failure.unwrap();
        assert_eq!(f.failure_class, class.as_str());
        assert_eq!(f.error.as_deref(), Some("boom"));
        // Contamination is still seen in a broken stream.
        assert_eq!(f.foreign_markers, [foreign]);
        assert!(!f.canary_passed);
    }
}

#[test]
fn canary_failure_wins_over_a_wrong_answer() {
    let s = words_spec();
    let p = s.plan(0);
    let (m0, m3) = (p.markers.get(0).unwrap(), p.markers.get(3).unwrap());

    let j = judge(
        &p.markers,
        0,
        &cap("cedar cedar", "stop"),
        words("cedar", 3),
    );
    let f = j.failure.unwrap();
    assert_eq!(f.failure_class, "request_canary_failed");
    assert!(
        f.error
            .unwrap()
            .contains(&format!("does not begin with its marker {m0}"))
    );
    assert!(f.foreign_markers.is_empty() && !f.canary_passed);
    assert_eq!(f.words, 2);

    // Swapped content: B's answer in A's stream.
    let j = judge(
        &p.markers,
        0,
        &cap(&format!("{m3} cedar cedar cedar"), "stop"),
        words("cedar", 3),
    );
    let f = j.failure.unwrap();
    assert_eq!(f.failure_class, "request_canary_failed");
    assert_eq!(f.foreign_markers, [m3]);
    let e = f.error.unwrap();
    assert!(
        e.contains("does not begin") && e.contains(&format!("other requests' markers: {m3}")),
        "{e}"
    );
}

#[test]
fn controlled_output_failures_carry_the_seed_fields() {
    let s = words_spec();
    let p = s.plan(0);
    let m = p.markers.get(1).unwrap();
    let runaway = format!("{m} {}", "cedar ".repeat(20));
    let j = judge(&p.markers, 1, &cap(&runaway, "length"), words("cedar", 3));
    assert!(j.received);
    let f = j.failure.unwrap();
    assert_eq!(f.failure_class, "controlled_output_failed");
    assert_eq!(
        (f.words, f.finish_reasons.as_slice()),
        (20, &["length".to_string()][..])
    );
    assert!(f.canary_passed);
    assert!(f.error.unwrap().starts_with("runaway"));
    assert!(f.output.unwrap().starts_with(m));

    let j = judge(&p.markers, 1, &cap(m, "stop"), words("cedar", 3));
    let f = j.failure.unwrap();
    assert_eq!(f.words, 0);
    assert!(f.error.unwrap().starts_with("empty answer"));
    assert_eq!(f.output.as_deref(), Some(m));
}

#[test]
fn long_outputs_and_errors_are_bounded() {
    let s = words_spec();
    let p = s.plan(0);
    let m = p.markers.get(0).unwrap();
    let long = format!("{m} {}", "cedar ".repeat(1000));
    let f = judge(&p.markers, 0, &cap(&long, "length"), words("cedar", 3))
        .failure
        .unwrap();
    assert!(f.output.unwrap().chars().count() < OUTPUT_CHARS + 40);
    let mut c = failed(Outcome::HttpError, "");
    c.failure.as_mut().unwrap().message = "x".repeat(5000);
    let f = judge(&p.markers, 0, &c, words("cedar", 3)).failure.unwrap();
    assert!(f.error.unwrap().chars().count() < ERROR_CHARS + 40);
    assert_eq!(f.output, None);
}

#[test]
fn reference_contract_reports_where_text_diverges() {
    let s = words_spec();
    let p = s.plan(0);
    let m = p.markers.get(0).unwrap();
    let reference = cap(&format!("{m} The sea is vast and deep."), "stop");

    let same = judge(
        &p.markers,
        0,
        &reference.clone(),
        Expected::Reference(&reference),
    );
    assert_eq!(same.outcome, Outcome::Ok);

    let other = cap(&format!("{m} The sea is wide and deep."), "stop");
    let f = judge(&p.markers, 0, &other, Expected::Reference(&reference))
        .failure
        .unwrap();
    assert_eq!(f.failure_class, "controlled_output_failed");
    assert!(f.canary_passed);
    let d = f.divergence.unwrap();
    assert_eq!(d.char_index, m.len() + 12);
    assert_eq!(d.expected_snippet, "vast and deep.");
    assert_eq!(d.actual_snippet, "wide and deep.");
    assert!(
        f.error
            .unwrap()
            .contains(&format!("from character {}", d.char_index))
    );

    // A canary failure keeps the divergence as a clue.
    let f = judge(
        &p.markers,
        0,
        &cap("The sea", "stop"),
        Expected::Reference(&reference),
    )
    .failure
    .unwrap();
    assert_eq!(f.failure_class, "request_canary_failed");
    assert_eq!(f.divergence.unwrap().char_index, 0);

    // Whitespace counts: byte-identical means byte-identical.
    let f = judge(
        &p.markers,
        0,
        &cap(&format!("{m} The sea is vast and deep. "), "stop"),
        Expected::Reference(&reference),
    )
    .failure
    .unwrap();
    assert_eq!(f.divergence.unwrap().actual_snippet, " ");
}

#[test]
fn reference_contract_without_a_reference_fails_the_output_check() {
    let s = words_spec();
    let p = s.plan(0);
    let m = p.markers.get(0).unwrap();
    let broken = failed(Outcome::RequestError, "");
    let f = judge(
        &p.markers,
        0,
        &cap(&format!("{m} x"), "stop"),
        Expected::Reference(&broken),
    )
    .failure
    .unwrap();
    assert_eq!(f.failure_class, "controlled_output_failed");
    assert!(
        f.error
            .unwrap()
            .contains("reference request failed (request_error: boom)")
    );
    assert!(f.divergence.is_none());
}

#[test]
fn summary_arithmetic_matches_the_seed_shape() {
    let s = words_spec();
    let p = s.plan(0);
    let m = |i: usize| p.markers.get(i).unwrap().to_string();
    let judged = vec![
        judge(
            &p.markers,
            3,
            &cap(&format!("{} cedar cedar cedar", m(3)), "stop"),
            words("cedar", 3),
        ),
        judge(
            &p.markers,
            1,
            &cap(&format!("{} cedar", m(0)), "stop"),
            words("cedar", 3),
        ),
        judge(
            &p.markers,
            0,
            &failed(Outcome::RequestError, ""),
            words("cedar", 3),
        ),
        judge(
            &p.markers,
            2,
            &cap(&format!("{} cedar cedar", m(2)), "stop"),
            words("cedar", 3),
        ),
    ];
    let run = summarize(&s.spec, 1, judged);
    assert_eq!(
        (run.requests, run.exact_output_passed, run.failed),
        (4, 1, 3)
    );
    assert_eq!(run.responses_received, 3);
    assert_eq!(run.contaminated, 1);
    assert!(!run.performance_eligible);
    assert_eq!(
        (run.repeat, run.contract.as_str(), run.concurrency),
        (1, "words", 4)
    );
    let idx: Vec<usize> = run.failures.iter().map(|f| f.request_index).collect();
    assert_eq!(idx, [0, 1, 2]);

    // The seed's field names, exactly.
    let v = serde_json::to_value(&run).unwrap();
    for k in [
        "requests",
        "exact_output_passed",
        "failed",
        "responses_received",
        "performance_eligible",
    ] {
        assert!(v.get(k).is_some(), "{k}");
    }
    let f = &v["failures"][1];
    for k in [
        "request_index",
        "failure_class",
        "words",
        "finish_reasons",
        "canary_passed",
    ] {
        assert!(f.get(k).is_some(), "{k}");
    }
    assert_eq!(f["foreign_markers"][0], m(0));
}

fn journaled(s: &TurnoverWorkload, label: &str, caps: Vec<StreamCapture>) -> Vec<RequestRecord> {
    caps.into_iter()
        .enumerate()
        .map(|(index, capture)| RequestRecord {
            cell: label.to_string(),
            index,
            send_offset_ms: 0.0,
            queue_ms: 0.0,
            target_prompt_tokens: None,
            template_prompt_tokens: None,
            turn: None,
            capture,
            outcome: Outcome::Ok,
            detail: None,
            capacity: None,
        })
        .inspect(|r| assert!(r.index < s.spec.requests))
        .collect()
}

#[test]
fn a_whole_repeat_is_rebuilt_from_the_journal_and_a_partial_one_is_not() {
    let s = words_spec();
    let plan = s.plan(1);
    let answers: Vec<StreamCapture> = plan
        .requests
        .iter()
        .map(|r| {
            let n = if r.index == 2 { 4 } else { 3 };
            cap(
                &prompt::words_answer(&r.marker, r.code_word.as_deref().unwrap(), n),
                "stop",
            )
        })
        .collect();
    let recs = journaled(&s, &s.spec.cell_label(1), answers.clone());
    let run = s.from_journal(1, &recs).expect("complete");
    // The same judgement as a live run: one wrong count.
    let live = summarize(
        &s.spec,
        1,
        answers.iter().enumerate().map(|(i, c)| {
            judge(
                &plan.markers,
                i,
                c,
                words(plan.requests[i].code_word.as_deref().unwrap(), 3),
            )
        }),
    );
    assert_eq!(run, live);
    assert_eq!(
        (run.requests, run.exact_output_passed, run.failed),
        (4, 3, 1)
    );
    assert_eq!(run.failures[0].request_index, 2);

    // Another repeat's records do not count for this one.
    assert!(s.from_journal(0, &recs).is_none());
    // Missing one request: must run again.
    assert!(s.from_journal(1, &recs[..3]).is_none());
    // A request journaled twice (a re-run after an interruption): run again.
    let mut doubled = recs.clone();
    doubled.push(recs[0].clone());
    assert!(s.from_journal(1, &doubled).is_none());
}

#[test]
fn a_reference_repeat_needs_its_reference_pass_in_the_journal() {
    let s = spec(
        "name = \"r\"\ncontract = \"reference\"\nprompt = \"words\"\nrequests = 3\nwords = 3\n",
    );
    let plan = s.plan(0);
    let answers: Vec<StreamCapture> = plan
        .requests
        .iter()
        .map(|r| {
            cap(
                &prompt::words_answer(&r.marker, r.code_word.as_deref().unwrap(), 3),
                "stop",
            )
        })
        .collect();
    let mut recs = journaled(&s, &s.spec.cell_label(0), answers.clone());
    assert!(s.from_journal(0, &recs).is_none(), "no reference pass");
    recs.extend(journaled(&s, &s.spec.reference_label(0), answers));
    let run = s.from_journal(0, &recs).expect("complete");
    assert_eq!((run.exact_output_passed, run.failed), (3, 0));
}

#[test]
fn task_answers_are_scored_from_the_references_and_a_failure_is_unanswered() {
    use crate::config::tasks::TaskItem;
    use crate::measure::record::StreamCapture;
    let t: toml::Table = toml::from_str(
        "name = \"t\"\ncontract = \"reference\"\nprompt = \"task\"\ntasks = \"t.jsonl\"\nrequests = 3",
    )
    .unwrap();
    let mut spec = TurnoverSpec::from_table(&t).unwrap();
    let item = |a: &str| TaskItem {
        question: format!("q {a}"),
        answers: vec![a.into()],
        kind: None,
        rule: Default::default(),
    };
    spec.task_file_items = std::sync::Arc::new(vec![item("Paris"), item("Rome"), item("Oslo")]);
    let spec = TurnoverWorkload::alone(spec);
    let cap = |text: &str| StreamCapture {
        content: text.into(),
        ..StreamCapture::default()
    };
    let failed = StreamCapture {
        failure: Some(Failure {
            class: Outcome::RequestError,
            message: "reset".into(),
        }),
        ..StreamCapture::default()
    };
    let refs = [cap("Paris."), cap("Milan"), failed];
    assert_eq!(spec.task_answers(refs.iter()), "10-");
    // No marker asked: the plan's messages are the worked examples and the question.
    let plan = spec.plan(0);
    let m = plan.requests[1].messages.as_array().unwrap();
    assert_eq!(m.last().unwrap()["content"], "q Rome");
    assert_eq!(m[0]["content"], "q Oslo");
    assert!(!spec.spec.asks_marker());
}

#[test]
fn an_answer_identical_to_its_markerless_reference_passes_its_canary() {
    let s = words_spec();
    let p = s.plan(0);
    let m0 = p.markers.get(0).unwrap();
    let m1 = p.markers.get(1).unwrap();
    // Alone, the model skipped the marker (a near-tie at the first token).
    let reference = cap("The city of New York at night.", "stop");
    let same = judge(
        &p.markers,
        0,
        &reference.clone(),
        Expected::Reference(&reference),
    );
    assert_eq!(same.outcome, Outcome::Ok, "{:?}", same.failure);
    // Not when it differs from that reference: nothing shows it is its own.
    let other = cap("The city at night.", "stop");
    let f = judge(&p.markers, 0, &other, Expected::Reference(&reference))
        .failure
        .unwrap();
    assert_eq!(f.failure_class, "request_canary_failed");
    // Not when the reference had the marker and the answer lost it.
    let marked = cap(&format!("{m0} The city at night."), "stop");
    let f = judge(&p.markers, 0, &other, Expected::Reference(&marked))
        .failure
        .unwrap();
    assert_eq!(f.failure_class, "request_canary_failed");
    // And another request's marker fails it whatever the reference says.
    let leaked = cap(&format!("The city of {m1} at night."), "stop");
    let f = judge(&p.markers, 0, &leaked.clone(), Expected::Reference(&leaked))
        .failure
        .unwrap();
    assert_eq!(f.failure_class, "request_canary_failed");
    assert_eq!(f.foreign_markers, [m1.to_string()]);
}
