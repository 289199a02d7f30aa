use super::*;

#[test]
fn a_metric_declares_nothing_its_name_contradicts() {
    for (text, field) in [
        (
            "[[metric]]\nname = \"ttft_p50_ms\"\nquantile = 0.9\n",
            "metric[0].quantile",
        ),
        (
            "[[metric]]\nname = \"ttft_p50_ms\"\nsample = \"e2e_ms\"\n",
            "metric[0].sample",
        ),
        (
            "[[metric]]\nname = \"e2e_p50_ms\"\ndirection = \"higher_is_better\"\n",
            "metric[0].direction",
        ),
    ] {
        let e = Policy::from_toml_str(text, "p.toml").expect_err(text);
        assert_eq!(e.field.as_deref(), Some(field), "{e}");
    }
    // Agreeing declarations, and names without a pNN part, are fine.
    Policy::from_toml_str(
        "[[metric]]\nname = \"ttft_p50_ms\"\nquantile = 0.5\n",
        "p.toml",
    )
    .expect("agrees");
    Policy::from_toml_str(
        "[[metric]]\nname = \"queue\"\nsample = \"queue_ms\"\nquantile = 0.9\n",
        "p.toml",
    )
    .expect("no pNN");
}

#[test]
fn a_metric_name_with_a_line_break_is_refused_by_line_and_field() {
    let text = "[[metric]]\nname = \"ttft_p90_ms\\n# forged\"\nsample = \"ttft_ms\"\n";
    let e = Policy::from_toml_str(text, "p.toml").expect_err("a line break in a name");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("metric[0].name")),
        "{e}"
    );
    assert!(
        e.message
            .starts_with("a line break (U+000A) at character 12 is not allowed in a name"),
        "{e}"
    );
}

#[test]
fn control_character_in_a_comment_gets_a_message() {
    // Found by fuzzing: toml's own message is empty here.
    let e = Policy::from_toml_str("# a\u{7}b\nthreshold_percent = 5\n", "p.toml")
        .expect_err("BEL in a comment");
    assert_eq!((e.line, e.column), (Some(1), Some(4)), "{e}");
    assert!(e.message.contains("U+0007"), "{e}");
}

#[test]
fn default_metrics_are_the_seeds_three() {
    let p = Policy::default();
    let got: Vec<(&str, &str, f64, Direction, f64)> = p
        .metrics
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.sample.as_str(),
                m.quantile,
                m.direction,
                m.threshold_percent,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("ttft_p50_ms", "ttft_ms", 0.5, Direction::LowerIsBetter, 5.0),
            ("e2e_p50_ms", "e2e_ms", 0.5, Direction::LowerIsBetter, 5.0),
            (
                "decode_tok_s_p50",
                "decode_tok_s",
                0.5,
                Direction::HigherIsBetter,
                5.0
            ),
        ]
    );
    assert_eq!(p.turnover.gate, TurnoverGateMode::Strict);
}

#[test]
fn sample_policy_file_is_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/default.toml");
    let p = Policy::from_file(&path).expect("policies/default.toml parses");
    assert_eq!(
        Policy {
            source: "defaults".into(),
            ..p
        },
        Policy::default()
    );
}

#[test]
fn quality_cross_runtime_defaults_to_exact_and_parses() {
    let d = Policy::default().quality;
    assert_eq!(
        (d.cross_runtime, d.near_tie_nats),
        (CrossRuntime::Exact, 0.5)
    );
    let p = Policy::from_toml_str(
        "[quality]\ncross_runtime = \"near_tie\"\nnear_tie_nats = 0.25\n",
        "p.toml",
    )
    .expect("valid policy");
    assert_eq!(
        (p.quality.cross_runtime, p.quality.near_tie_nats),
        (CrossRuntime::NearTie, 0.25)
    );
    let e = Policy::from_toml_str("[quality]\nnear_tie_nats = -1\n", "p.toml").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("quality.near_tie_nats"));
    assert!(Policy::from_toml_str("[quality]\ncross_runtime = \"loose\"\n", "p.toml").is_err());
}

/// `[[quality.embeddings]]`: a workload's own floors, what it leaves
/// out taken from `[quality]`; a second table for one workload, an
/// empty name, a cosine out of range or an unknown field is refused
/// with its line and field.
#[test]
fn a_workload_may_have_its_own_embedding_floors() {
    let p = Policy::from_toml_str(
        "[quality]\nembedding_cosine_mean_min = 0.9\n[[quality.embeddings]]\nworkload = \"alone\"\ncosine_min = 0.99\n",
        "p.toml",
    )
    .expect("valid policy");
    assert_eq!(p.quality.embedding_floors_for("alone"), (0.99, 0.9));
    assert_eq!(p.quality.embedding_floors_for("other"), (0.85, 0.9));
    let refused = |text: &str| Policy::from_toml_str(text, "p.toml").unwrap_err();
    let twice =
        "[[quality.embeddings]]\nworkload = \"a\"\n[[quality.embeddings]]\nworkload = \"a\"\n";
    let e = refused(twice);
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("quality.embeddings[1].workload"))
    );
    assert!(e.message.contains("a second floor for workload `a`"), "{e}");
    let e = refused("[[quality.embeddings]]\nworkload = \" \"\n");
    assert!(e.message.contains("empty workload name"), "{e}");
    let e = refused("[[quality.embeddings]]\nworkload = \"a\"\ncosine_min = 1.5\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("quality.embeddings[0].cosine_min"))
    );
    let e = refused("[[quality.embeddings]]\nworkload = \"a\"\ncosine = 0.9\n");
    assert!(format!("{e}").contains("cosine"), "{e}");
    assert!(
        refused("[[quality.embeddings]]\ncosine_min = 0.9\n")
            .to_string()
            .contains("workload")
    );
}

#[test]
fn quantile_names() {
    assert_eq!(
        split_quantile("e2e_p999_ms"),
        Some(("e2e_ms".into(), 0.999))
    );
    assert_eq!(split_quantile("itl_p90_ms"), Some(("itl_ms".into(), 0.9)));
    assert_eq!(split_quantile("x_p5_ms"), Some(("x_ms".into(), 0.05)));
    assert_eq!(split_quantile("x_p100_ms"), Some(("x_ms".into(), 1.0)));
    assert_eq!(split_quantile("ttft_ms"), None);
}

#[test]
fn file_overrides_and_inherits() {
    let p = Policy::from_toml_str(
        "threshold_percent = 3\n[[metric]]\nname = \"ttft_p50_ms\"\n[[metric]]\nname = \"e2e_p90_ms\"\nthreshold_percent = 10\n[turnover]\ngate = \"non_inferior\"\nalpha = 0.01\n[bootstrap]\niterations = 500\nseed = 9\n",
        "p.toml",
    )
    .expect("valid policy");
    assert_eq!(p.metrics.len(), 2);
    assert_eq!(p.metrics[0].threshold_percent, 3.0);
    assert_eq!(
        (p.metrics[1].quantile, p.metrics[1].threshold_percent),
        (0.9, 10.0)
    );
    assert_eq!(p.turnover.gate, TurnoverGateMode::NonInferior);
    assert_eq!(p.turnover.alpha, 0.01);
    assert_eq!((p.bootstrap.iterations, p.bootstrap.seed), (500, 9));
    assert_eq!(p.source, "p.toml");
}

#[test]
fn top_level_threshold_applies_to_default_metrics() {
    let p = Policy::from_toml_str("threshold_percent = 2.5\n", "p.toml").expect("valid");
    assert!(p.metrics.iter().all(|m| m.threshold_percent == 2.5));
    assert_eq!(p.metrics.len(), 3);
}

#[test]
fn slo_specs_parse_and_a_cells_own_wins_over_every_cells() {
    let p = Policy::from_toml_str(
        "[[slo]]\nttft_ms = 2000\n[[slo]]\ncell = \"c1\"\nttft_ms = 500\ntpot_ms = 40\nmargin_points = 2\n",
        "p.toml",
    )
    .unwrap();
    let own = p.slo_for("c1").unwrap();
    assert_eq!(
        (own.targets.ttft_ms, own.targets.tpot_ms, own.margin_points),
        (Some(500.0), Some(40.0), 2.0)
    );
    let any = p.slo_for("c2").unwrap();
    assert_eq!(
        (any.targets.ttft_ms, any.margin_points),
        (Some(2000.0), DEFAULT_SLO_MARGIN_POINTS)
    );
    assert!(Policy::default().slo_for("c1").is_none());
    for (text, field) in [
        ("[[slo]]\ncell = \"c\"\n", "slo[0]"),
        ("[[slo]]\ncell = \"c\"\nttft_ms = -1\n", "slo[0]"),
        (
            "[[slo]]\nttft_ms = 1\nmargin_points = 100\n",
            "slo[0].margin_points",
        ),
        ("[[slo]]\nttft_ms = 1\n[[slo]]\ne2e_ms = 1\n", "slo[1].cell"),
        ("[[slo]]\nttft = 1\n", "slo"),
    ] {
        let e = Policy::from_toml_str(text, "p.toml").expect_err(text);
        assert!(
            e.field.as_deref().is_some_and(|f| f.starts_with(field)),
            "{text}: {e}"
        );
    }
}

#[test]
fn spending_defaults_to_obrien_fleming_and_can_be_bonferroni() {
    assert_eq!(Policy::default().gate.spending, Spending::OBrienFleming);
    let p = Policy::from_toml_str("[gate]\nspending = \"bonferroni\"\n", "p.toml").unwrap();
    assert_eq!(p.gate.spending, Spending::Bonferroni);
    let p = Policy::from_toml_str("[gate]\nspending = \"pocock\"\n", "p.toml").unwrap();
    assert_eq!(p.gate.spending, Spending::Pocock);
}

#[test]
fn the_method_is_no_gate_setting() {
    // How compare computes (`design::Method`) is not the user's to set.
    for (text, field) in [
        ("[gate]\nblock_mean = \"mean\"\n", "gate.block_mean"),
        (
            "[gate]\n\ndesign_spread = \"bounds\"\n",
            "gate.design_spread",
        ),
        (
            "[gate]\nalpha = 0.05\npair_requests = false\n",
            "gate.pair_requests",
        ),
    ] {
        let e = Policy::from_toml_str(text, "pol.toml").expect_err(text);
        let line = text.lines().count();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(line), Some(field)),
            "{text}: {e}"
        );
        assert!(
            e.to_string().starts_with(&format!("pol.toml:{line}:")),
            "{e}"
        );
    }
}

#[test]
fn a_threshold_past_1000_percent_is_refused_with_its_value() {
    let e = Policy::from_toml_str("threshold_percent = 1e308\n", "p.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "p.toml:1:21: field `threshold_percent`: 1e308 is not a percentage in [0, 1000]"
    );
    let p = Policy::from_toml_str("threshold_percent = 1000\n", "p.toml").unwrap();
    assert!(p.metrics.iter().all(|m| m.threshold_percent == 1000.0));
}

#[test]
fn errors_name_file_line_and_field() {
    let cases = [
        ("[turnover]\ngate = \"bogus\"\n", 2, "turnover.gate"),
        ("[turnover]\nalpah = 0.1\n", 2, "turnover.alpah"),
        ("[turnover]\nalpha = 1.5\n", 2, "turnover.alpha"),
        ("[bootstrap]\niterations = 0\n", 2, "bootstrap.iterations"),
        (
            "[bootstrap]\niterations = 1000000000000\n",
            2,
            "bootstrap.iterations",
        ),
        (
            "[[metric]]\nname = \"ttft_p50_ms\"\n[[metric]]\nname = \"queue_depth\"\n",
            4,
            "metric[1].name",
        ),
        (
            "[[metric]]\nname = \"ttft_p50_ms\"\nthreshold_percent = \"x\"\n",
            3,
            "metric[0].threshold_percent",
        ),
        ("threshold_percent = -1\n", 1, "threshold_percent"),
        ("\nthreshold_percent = 1e308\n", 2, "threshold_percent"),
        (
            "[[metric]]\nname = \"ttft_p50_ms\"\nthreshold_percent = 1000.5\n",
            3,
            "metric[0].threshold_percent",
        ),
        (
            "[[metric]]\nname = \"ttft_p50_ms\"\n\n[[metric]]\nname = \"foo_p50_ms\"\n",
            5,
            "metric[1].name",
        ),
        (
            "[[metric]]\nname = \"q\"\nsample = \"foo_ms\"\nquantile = 0.5\n",
            2,
            "metric[0].sample",
        ),
        ("[gate]\nspending = \"haybittle\"\n", 2, "gate.spending"),
    ];
    for (text, line, field) in cases {
        let e = Policy::from_toml_str(text, "pol.toml").expect_err(text);
        assert_eq!(e.line, Some(line), "{text}: {e}");
        assert_eq!(e.field.as_deref(), Some(field), "{text}: {e}");
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("pol.toml:{line}:")), "{shown}");
        assert!(shown.contains(field), "{shown}");
    }
}

#[test]
fn a_capacity_margin_is_read_and_one_out_of_range_is_refused_by_file_line_and_field() {
    assert_eq!(
        Policy::default().capacity.margin_percent,
        crate::capacity::DEFAULT_MARGIN_PERCENT
    );
    let p = Policy::from_toml_str("[capacity]\nmargin_percent = 10\n", "p.toml").unwrap();
    assert_eq!(p.capacity.margin_percent, 10.0);
    for bad in ["100", "-1", "nan"] {
        let text = format!("[capacity]\nmargin_percent = {bad}\n");
        let e = Policy::from_toml_str(&text, "pol.toml").expect_err(&text);
        assert_eq!(e.field.as_deref(), Some("capacity.margin_percent"), "{e}");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.to_string().starts_with("pol.toml:2:"), "{e}");
        assert!(e.to_string().contains("a percentage in [0, 100)"), "{e}");
    }
    let e = Policy::from_toml_str("[capacity]\nmargin = 5\n", "pol.toml").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("capacity.margin"), "{e}");
}
