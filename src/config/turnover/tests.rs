use super::*;

fn spec(text: &str) -> TurnoverSpec {
    let table: toml::Table = toml::from_str(text).unwrap();
    TurnoverSpec::from_table(&table).unwrap()
}

fn words_spec() -> TurnoverSpec {
    spec("name = \"w\"\ncontract = \"words\"\nrequests = 4\nwords = 3\n")
}

#[test]
fn spec_defaults_and_labels() {
    let s = spec("name = \"t\"\ncontract = \"reference\"\n");
    assert_eq!((s.requests, s.concurrency, s.repeats), (60, 4, 1));
    assert_eq!(s.prompt_style(), PromptStyle::Words);
    assert_eq!(
        (s.words, s.code_words.as_slice()),
        (5, &["cedar".to_string()][..])
    );
    assert_eq!((s.shots(), s.max_tokens()), (3, 26));
    assert_eq!(s.temperature, 0.0);
    assert_eq!(s.cell_label(1), "turnover:t#1");
    assert_eq!(s.reference_label(0), "turnover:t#0/reference");
    let s = spec("name = \"t\"\ncontract = \"reference\"\nprompt = \"sentence\"\n");
    assert_eq!((s.shots(), s.max_tokens()), (2, 64));
}

#[test]
fn huge_word_count_saturates_max_tokens() {
    // Found by review, replayed through `fuzzing::plan`: 2 × words + 16 overflowed.
    // The suite's limits refuse such a count when read; the sum must still saturate.
    let mut s = words_spec();
    s.words = 9223372036854775807;
    assert_eq!(s.max_tokens(), u64::MAX);
}

#[test]
fn spec_rejects_nonsense_with_its_name() {
    let bad = |text: &str| {
        let table: toml::Table = toml::from_str(text).unwrap();
        format!("{:#}", TurnoverSpec::from_table(&table).unwrap_err())
    };
    let e = bad("name = \"x\"\ncontract = \"words\"\nprompt = \"sentence\"\n");
    assert!(
        e.contains("turnover 'x'") && e.contains("words contract"),
        "{e}"
    );
    let e = bad("name = \"x\"\ncontract = \"words\"\nconcurrency = 0\n");
    assert!(e.contains("> 0"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"words\"\ncode_words = [\"two words\"]\n");
    assert!(e.contains("without spaces"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"words\"\ncode_words = [\"K12345\"]\n");
    assert!(e.contains("canary"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"words\"\nrequets = 5\n");
    assert!(e.contains("requets"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"exact\"\n");
    assert!(e.contains("turnover 'x'"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"words\"\nshots = 9\n");
    assert!(e.contains("shots"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"words\"\nrequests = 10000\nrepeats = 200\n");
    assert!(e.contains("distinct canary markers"), "{e}");
    let e = bad("name = \"x\"\ncontract = \"words\"\nrequests = 2000000\n");
    assert!(e.contains("requests = 2000000 is above the maximum"), "{e}");

    let tables: Vec<toml::Table> = vec![
        toml::from_str("name = \"a\"\ncontract = \"words\"").unwrap(),
        toml::from_str("name = \"a\"\ncontract = \"reference\"").unwrap(),
    ];
    let e = format!(
        "{:#}",
        TurnoverSpec::from_tables(&tables, |i| format!("table {i}")).unwrap_err()
    );
    assert!(
        e.starts_with("table 1: turnover 'a' is defined twice"),
        "{e}"
    );
}

#[test]
fn task_workloads_need_a_file_the_reference_contract_and_one_repeat() {
    let parse = |extra: &str| {
        let t: toml::Table = toml::from_str(&format!(
            "name = \"t\"\ncontract = \"reference\"\nprompt = \"task\"\n{extra}"
        ))
        .unwrap();
        TurnoverSpec::from_table(&t).map_err(|e| format!("{e:#}"))
    };
    assert!(parse("").unwrap_err().contains("needs tasks"));
    assert!(
        parse("tasks = \"t.jsonl\"\nrepeats = 2")
            .unwrap_err()
            .contains("runs once")
    );
    let t: toml::Table =
        toml::from_str("name = \"t\"\ncontract = \"words\"\ntasks = \"t.jsonl\"").unwrap();
    assert!(
        format!("{:#}", TurnoverSpec::from_table(&t).unwrap_err()).contains("prompt = \"task\"")
    );
    assert!(parse("tasks = \"t.jsonl\"").is_ok());
}
