//! Every view of a compared report (terminal, Markdown, HTML, CSV) shows
//! what the report decided, escapes what it quotes, and a report file round
//! trips and is caught when tampered with.

mod common;

use common::{clean, fast_policy};
use infergate_report::artifact::metric;
use infergate_report::fixtures::seed_like;
use infergate_report::{self as report, Decision, DecisionAction, Report, compare, verify};
use serde_json::Value;

#[test]
fn full_report_renders_with_plots() {
    let (b, c) = seed_like();
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    let h = report::html(&r);
    assert!(
        h.matches("<svg").count() >= 7,
        "6 strip plots and the turnover plot"
    );
    assert!(!h.contains("no per-request samples"));
    for bad in ["<script", "<link", " src=", " href=", "https://"] {
        assert!(!h.contains(bad), "{bad} in html");
    }
    // The target URL appears only as escaped text in the provenance table.
    assert!(h.contains("<code>http://127.0.0.1:8080</code>"));
    let t = report::terminal(&r, report::TerminalOptions::verbose(false));
    assert!(t.contains("capacity-4k") && t.contains("capacity-120k") && t.contains("95% CI"));
    assert!(
        t.find("capacity-4k") < t.find("capacity-120k"),
        "natural order of cells"
    );
    let m = report::markdown(&r);
    assert!(m.contains("| `ttft_p50_ms` |"));
    // The verdict comes first: before any cell's table, in both views.
    for text in [&t, &m] {
        let verdict = text.find("verdict      ").expect("a verdict line");
        assert!(verdict < text.find("capacity-4k").unwrap(), "{text}");
        assert!(text.contains("performance  "), "{text}");
        assert!(text.contains("measured     "), "{text}");
    }
}

#[test]
fn html_escapes_report_strings() {
    let (b, c) = seed_like();
    let mut r = compare(&b, &c, &fast_policy()).expect("comparable");
    r.record_decision(Decision {
        action: DecisionAction::RetainBaseline,
        who: Some("<img src=x onerror=alert(1)>".into()),
        when: Some("2025-01-02T03:04:05Z".into()),
        note: Some("\"quoted\" & <b>bold</b>".into()),
    });
    let h = report::html(&r);
    assert!(!h.contains("<img"), "unescaped markup");
    assert!(h.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(h.contains("&lt;b&gt;bold&lt;/b&gt;"));
    assert_eq!(
        r.human_decision,
        "retain-baseline; \"quoted\" & <b>bold</b>"
    );
    assert!(verify(&r.to_value()).is_empty());
}

#[test]
fn files_round_trip_atomically() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, c) = seed_like();
    let bp = dir.path().join("baseline.json");
    let cp = dir.path().join("candidate.json");
    std::fs::write(&bp, serde_json::to_vec(&b).expect("json")).expect("write");
    std::fs::write(&cp, serde_json::to_vec(&c).expect("json")).expect("write");
    let pol = dir.path().join("policy.toml");
    std::fs::write(
        &pol,
        "threshold_percent = 3\n[bootstrap]\niterations = 500\n",
    )
    .expect("write");

    let r = report::compare_files(&bp, &cp, Some(&pol)).expect("compare");
    assert_eq!(
        r.policy.as_ref().map(|p| p.source.clone()),
        Some(pol.display().to_string())
    );
    let out = dir.path().join("report.json");
    report::write_report_atomic(&out, &r).expect("write");
    report::write_report_atomic(&out, &r).expect("overwrite");
    let v = report::read_report_value(&out).expect("read");
    assert!(verify(&v).is_empty());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 4, "no temp files left: {left:?}");

    std::fs::write(&pol, "[turnover]\ngate = \"lenient\"\n").expect("write");
    let e = format!(
        "{:#}",
        report::compare_files(&bp, &cp, Some(&pol)).expect_err("bad policy")
    );
    assert!(
        e.contains("policy.toml:2:") && e.contains("turnover.gate"),
        "{e}"
    );

    std::fs::write(
        &cp,
        "{\"schema\": \"infergate-run/v1\",\n \"provenance\": 3}",
    )
    .expect("write");
    let e = format!(
        "{:#}",
        report::compare_files(&bp, &cp, None).expect_err("bad artifact")
    );
    assert!(e.contains("candidate.json:2:"), "{e}");
}

#[test]
fn tampered_full_report_is_caught() {
    let (b, c) = seed_like();
    let v = compare(&b, &c, &fast_policy())
        .expect("comparable")
        .to_value();
    let paths = |edit: &dyn Fn(&mut Value)| -> Vec<String> {
        let mut w = v.clone();
        edit(&mut w);
        verify(&w).into_iter().map(|d| d.path).collect()
    };
    let p = paths(&|w| {
        w["cells"]["capacity-120k"]["samples"]["ttft_ms"]["baseline"] =
            serde_json::json!([1.0, 2.0, 3.0]);
    });
    // Named first; the recomputation then names everything derived from it.
    assert_eq!(p[0], "cells.capacity-120k.metrics.ttft_p50_ms.baseline");
    assert!(
        p.contains(&"cells.capacity-120k.metrics.ttft_p50_ms.ci_delta_percent.low".to_string()),
        "{p:?}"
    );
    let p = paths(&|w| {
        w["cells"]["capacity-4k"]["metrics"]["e2e_p50_ms"]["verdict"] = "regressed".into();
    });
    assert_eq!(p, vec!["cells.capacity-4k.metrics.e2e_p50_ms.verdict"]);
    let p = paths(&|w| {
        w["turnover_comparison"]["groups"][0]["candidate_runs"][1]["vs_baseline"]["p_candidate_worse"] =
            0.5.into();
    });
    assert_eq!(
        p,
        vec!["turnover_comparison.groups[0].candidate_runs[1].vs_baseline.p_candidate_worse"]
    );
    let p = paths(&|w| w["gates"]["qualified"] = true.into());
    assert_eq!(p, vec!["gates.qualified"]);
    let p = paths(&|w| {
        w["cells"]["capacity-4k"]["metrics"]
            .as_object_mut()
            .map(|m| m.remove("decode_tok_s_p50"));
    });
    assert_eq!(
        p,
        vec![
            "cells.capacity-4k.metrics.decode_tok_s_p50",
            "performance_gate_passed",
            "gates.performance.passed",
            "qualification"
        ],
        "a gating metric named by the policy block is missing (and its samples are there)"
    );
}

/// A conversation cell's turns travel from the runs into the report, are
/// shown side by side in every view, and are carried through verify.
#[test]
fn per_turn_slices_reach_the_report_and_every_view() {
    use infergate_report::artifact::Slice;
    let slice = |turn: usize, ttft: f64, cached: f64| Slice {
        by: "turn".into(),
        label: turn.to_string(),
        requests: 4,
        succeeded: 4,
        ttft_p50_ms: Some(ttft),
        e2e_p50_ms: Some(ttft + 400.0),
        prompt_tokens_p50: Some(200.0 * turn as f64),
        cached_share: Some(cached),
    };
    let sessions = |duration: f64| infergate_report::artifact::Sessions {
        turns: 2,
        sessions: 4,
        complete: 4,
        duration_p50_ms: Some(duration),
        duration_max_ms: Some(duration * 1.5),
        ttft_sum_p50_ms: Some(duration / 2.0),
    };
    let (mut b, mut c) = seed_like();
    b.cells[0].slices = vec![slice(1, 530.0, 0.1), slice(2, 822.0, 0.63)];
    c.cells[0].slices = vec![slice(1, 685.0, 0.0), slice(2, 1708.0, 0.0)];
    b.cells[0].sessions = Some(sessions(2000.0));
    c.cells[0].sessions = Some(sessions(3000.0));
    let r = compare(&b, &c, &fast_policy()).expect("comparable");
    let v = r.to_value();
    assert_eq!(
        v["cells"]["capacity-4k"]["candidate_slices"][1]["ttft_p50_ms"],
        1708.0
    );
    let want =
        "turn 2: 4/4 requests, prompt p50 400.0 tokens; TTFT p50 822.0 → 1708.0 ms (+107.8%)";
    for (view, text) in [
        (
            "terminal",
            report::terminal(&r, report::TerminalOptions::verbose(false)),
        ),
        ("markdown", report::markdown(&r)),
        ("html", report::html(&r)),
    ] {
        assert!(text.contains(want), "{view}: {text}");
        assert!(text.contains("cached 63% → 0%"), "{view}");
        assert!(
            text.contains("sessions of 2 turns: 4/4 complete baseline, 4/4 candidate; duration p50 2000.0 → 3000.0 ms (+50.0%)"),
            "{view}"
        );
    }
    assert!(verify(&v).is_empty(), "{:#?}", verify(&v));
}

/// Under the evidence rule each metric's row says one thing: its interval
/// and its decision are the evidence gate's, in all three views, and the
/// seed's point flag is shown as a fact (the point change against T),
/// never as a second verdict (no "verdict" or "gate" column).
#[test]
fn each_metric_row_shows_one_decision_in_every_view() {
    let (b, c) = seed_like();
    let mut p = fast_policy();
    p.gate.decide = report::GateRule::Evidence;
    let r = compare(&b, &c, &p).unwrap();
    let v = clean(&r);
    let t = report::terminal(&r, report::TerminalOptions::verbose(false));
    let m = report::markdown(&r);
    let h = report::html(&r);
    for (name, text) in [("terminal", &t), ("markdown", &m), ("html", &h)] {
        assert!(
            text.contains("evidence bounds, worse-direction"),
            "{name}: {text}"
        );
        assert!(text.contains("seed flag (point vs T)"), "{name}");
        // (The turnover table's failure-rate CI is another statistic.)
        let metric_heads: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("metric") && l.contains("delta"))
            .collect();
        assert!(!metric_heads.is_empty(), "{name}");
        assert!(
            metric_heads
                .iter()
                .all(|l| !l.contains("% CI") && !l.contains("verdict")),
            "{name}: a second interval or verdict: {metric_heads:?}"
        );
        assert!(
            !text.contains("% worse</td>") && !text.contains("≤5% worse"),
            "{name}: a point-delta gate column"
        );
    }
    // A rate's worse change w is its delta negated: the candidate runs at
    // c/b = 1 − w/100 of the baseline's speed, shown as such.
    let speed = |w: f64| {
        let r = 1.0 - w / 100.0;
        if r <= 0.0 {
            "0×".to_string()
        } else if !(0.001..1000.0).contains(&r) {
            format!("{r:.1e}×")
        } else if r >= 10.0 {
            format!("{r:.1}×")
        } else if r >= 0.1 {
            format!("{r:.2}×")
        } else {
            format!("{r:.3}×")
        }
    };
    let (mut rows, mut thin) = (0, 0);
    for (cell, cv) in v["cells"].as_object().unwrap() {
        for (metric, mv) in cv["metrics"].as_object().unwrap() {
            let e = &mv["evidence"];
            let outcome = e["outcome"].as_str().unwrap();
            let (lo, hi, margin) = (
                e["lower_bound_percent"].as_f64().unwrap(),
                e["upper_bound_percent"].as_f64().unwrap(),
                e["margin_percent"].as_f64().unwrap(),
            );
            let rate = mv["direction"] == "higher_is_better";
            // Bounds that inform no one (three requests a side here) read
            // as their gate part's words instead.
            let subject = format!("cells.{cell}.metrics.{metric}");
            let part = v["gates"]["performance_evidence"]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["subject"] == subject.as_str())
                .unwrap();
            let words = (part["informative"] == false)
                .then(|| part["not_informative"].as_str().unwrap().to_string());
            let bounds = if let Some(w) = &words {
                w.clone()
            } else if rate {
                format!("{}–{} as fast vs ≥{}", speed(hi), speed(lo), speed(margin))
            } else {
                format!("[{lo:+.2}, {hi:+.2}]% vs {margin}%")
            };
            // The terminal row of this metric, under this cell's heading.
            let section = &t[t.find(&format!("cell {cell} ")).unwrap()..];
            let line = section
                .lines()
                .find(|l| l.trim_start().starts_with(metric.as_str()))
                .unwrap();
            assert!(line.contains(&bounds) && line.contains(outcome), "{line}");
            let others = ["pass", "fail", "inconclusive"]
                .into_iter()
                .filter(|o| *o != outcome);
            for o in others {
                assert!(!line.contains(&format!(" {o} ")), "two decisions: {line}");
            }
            // Markdown escapes the brackets; the bound numbers are there as is.
            let key = if rate || words.is_some() {
                bounds.clone()
            } else {
                format!("{lo:+.2}")
            };
            let md_row = m
                .lines()
                .find(|l| l.starts_with(&format!("| `{metric}` |")) && l.contains(&key))
                .unwrap_or_else(|| panic!("markdown row of {metric}: {m}"));
            assert!(md_row.contains(outcome), "{md_row}");
            assert!(
                h.contains(&format!("{}</td><td class=\"v-{outcome}\">", bounds)),
                "html row of {metric}"
            );
            rows += 1;
            thin += usize::from(words.is_some());
        }
    }
    assert!(rows >= 6, "{rows}");
    assert!(
        thin > 0 && thin < rows,
        "{thin} of {rows} rows not informative"
    );
}

/// The seed-like runs with every candidate TTFT 8 % higher, decided by
/// evidence: the point deltas pass T where the evidence cannot say.
fn ttft_eight_percent_worse_by_evidence() -> (Report, Value) {
    let (b, mut c) = seed_like();
    for cell in &mut c.cells {
        for s in cell.samples.get_mut(metric::TTFT_MS).into_iter().flatten() {
            *s *= 1.08;
        }
    }
    let mut p = fast_policy();
    p.gate.decide = report::GateRule::Evidence;
    let r = compare(&b, &c, &p).unwrap();
    let v = clean(&r);
    (r, v)
}

/// Under the evidence rule a point delta beyond T that the evidence cannot
/// call is not a failure anywhere a person reads: the gates table shows the
/// seed's point gate as not deciding, and no view lists its point deltas
/// as failed checks.
#[test]
fn the_seed_point_gate_is_never_a_second_verdict() {
    let (r, v) = ttft_eight_percent_worse_by_evidence();
    let evidence = v["gates"]["performance_evidence"]["outcome"]
        .as_str()
        .unwrap();
    assert!(
        !r.performance_gate_passed && evidence != "fail",
        "the case needs a failed point gate the evidence does not fail: {evidence}"
    );
    let t = report::terminal(&r, report::TerminalOptions::default());
    let gates = &t[t.find("\ngates\n").unwrap()..];
    let gates = &gates[..gates.find("\n\n").unwrap()];
    let row = |name: &str| {
        let line = gates
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {gates}"));
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    assert!(
        row("performance (evidence)").ends_with(&format!("? {evidence}")),
        "{gates}"
    );
    assert!(
        row("seed point gate").starts_with("seed point gate · fail not deciding"),
        "{gates}"
    );
    assert!(!gates.contains("✗ performance"), "{gates}");
    let m = report::markdown(&r);
    assert!(
        m.contains("| seed point gate | · fail |") && !m.contains("- performance: "),
        "{m}"
    );
    let h = report::html(&r);
    assert!(
        h.contains(&format!(
            "badge {evidence}\">? performance (evidence): {evidence}"
        )) && !h.contains("badge fail\">✗ performance")
            && !h.contains("<td>performance</td>"),
        "{h}"
    );
    // One interval per metric: the plots name the evidence bounds too.
    assert!(
        h.contains("per request: baseline vs candidate"),
        "plots drawn"
    );
    assert!(!h.contains("· CI [") && h.contains("· bounds ["), "{h}");
}

/// A reader gets the verdict, the metrics that decide it (here: still
/// undecided, with the requests that would decide them) and the cost in
/// the terminal report's first 15 lines, before any cell table.
#[test]
fn the_verdict_and_decisive_metrics_come_first() {
    let (r, v) = ttft_eight_percent_worse_by_evidence();
    let t = report::terminal(&r, report::TerminalOptions::default());
    let head: Vec<&str> = t.lines().take(15).collect();
    let head = head.join("\n");
    let qualification = v["qualification"].as_str().unwrap();
    assert!(
        head.contains(&format!("verdict      {qualification}")),
        "{head}"
    );
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    let undecided: Vec<&str> = parts
        .iter()
        .filter(|p| p["outcome"] == "inconclusive")
        .map(|p| p["subject"].as_str().unwrap())
        .collect();
    assert!(!undecided.is_empty(), "the case needs undecided metrics");
    for subject in undecided.iter().take(3) {
        let short = subject
            .strip_prefix("cells.")
            .unwrap()
            .replacen(".metrics.", " ", 1);
        assert!(head.contains(&format!("? {short}: ")), "{short} in\n{head}");
    }
    // What would decide them: more requests, or (one run per side, as
    // here) a design that sees the drift.
    assert!(
        (head.contains("requests per side would decide")
            || head.contains("more requests of this design cannot decide it: interleave"))
            && head.contains("measured "),
        "{head}"
    );
    assert!(
        !head.contains("cell capacity"),
        "the cells come after: {head}"
    );
}
