//! The seed report (`tests/data/runtime-profile-comparison.example.json`: a
//! real `runtime-profile-comparison/v1` from another tool, kept byte for byte)
//! must verify clean, deserialize, and render; altered copies must fail
//! verification naming the altered field.

use std::path::PathBuf;

use infergate_report::{self as report, Report, verify};
use serde_json::{Value, json};

fn data_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/runtime-profile-comparison.example.json")
}

fn seed() -> Value {
    report::read_report_value(&data_path()).expect("seed copy in tests/data")
}

#[test]
fn seed_verifies_clean() {
    let d = verify(&seed());
    assert!(d.is_empty(), "{d:#?}");
}

#[test]
fn seed_deserializes_and_round_trips() {
    let r: Report = serde_json::from_value(seed()).expect("seed is a Report");
    assert_eq!(r.cells.len(), 2);
    let m = r
        .cells
        .get("capacity-4k")
        .and_then(|c| c.metrics.get("ttft_p50_ms"))
        .expect("metric");
    assert_eq!(m.threshold_percent, 5.0);
    assert!(m.within_threshold);
    assert_eq!(r.turnover.baseline.len(), 1);
    assert_eq!(r.turnover.candidate.len(), 2);
    assert_eq!(r.turnover.candidate[1].failed, 3);

    let back = r.to_value();
    assert!(verify(&back).is_empty(), "{:#?}", verify(&back));
    // Every seed field survives with its value.
    let original = seed();
    for key in [
        "schema",
        "baseline_image",
        "candidate_image",
        "performance_gate_passed",
        "strict_turnover_gate_passed",
        "qualification",
        "promotion",
        "baseline_turnover",
        "candidate_turnover",
        "candidate_turnover_repeat",
        "human_decision",
    ] {
        assert_eq!(back[key], original[key], "{key}");
    }
    let flag = &back["cells"]["capacity-120k"]["metrics"]["decode_tok_s_p50"];
    assert_eq!(flag["no_more_than_5_percent_regression"], json!(true));
    assert_eq!(
        flag["delta_percent"],
        original["cells"]["capacity-120k"]["metrics"]["decode_tok_s_p50"]["delta_percent"]
    );
}

fn paths_after(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut v = seed();
    edit(&mut v);
    verify(&v).into_iter().map(|d| d.path).collect()
}

#[test]
fn altered_delta_is_named() {
    let mut v = seed();
    v["cells"]["capacity-4k"]["metrics"]["ttft_p50_ms"]["delta_percent"] = json!(-5.2);
    let d = verify(&v);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(
        d[0].path,
        "cells.capacity-4k.metrics.ttft_p50_ms.delta_percent"
    );
    assert_eq!(d[0].found, "-5.2");
    assert!(
        d[0].expected.starts_with("-5.19084182938"),
        "{}",
        d[0].expected
    );
}

#[test]
fn altered_flag_is_named() {
    let p = paths_after(|v| {
        v["cells"]["capacity-120k"]["metrics"]["decode_tok_s_p50"]["no_more_than_5_percent_regression"] =
            json!(false);
    });
    assert!(
        p.contains(
            &"cells.capacity-120k.metrics.decode_tok_s_p50.no_more_than_5_percent_regression"
                .to_string()
        ),
        "{p:?}"
    );
}

#[test]
fn flag_direction_matters() {
    // A +6% throughput change is an improvement: the flag stays true. The same
    // on a latency is a regression beyond 5%. (The gate is checked against the
    // flags as found, so one wrong flag is reported once.)
    let p = paths_after(|v| {
        let m = &mut v["cells"]["capacity-4k"]["metrics"];
        m["decode_tok_s_p50"]["candidate"] = json!(106.0);
        m["decode_tok_s_p50"]["baseline"] = json!(100.0);
        m["decode_tok_s_p50"]["delta_percent"] = json!(6.0);
        m["e2e_p50_ms"]["candidate"] = json!(106.0);
        m["e2e_p50_ms"]["baseline"] = json!(100.0);
        m["e2e_p50_ms"]["delta_percent"] = json!(6.0);
    });
    assert_eq!(
        p,
        vec!["cells.capacity-4k.metrics.e2e_p50_ms.no_more_than_5_percent_regression".to_string()]
    );
}

#[test]
fn altered_turnover_counts_are_named() {
    let p = paths_after(|v| v["candidate_turnover_repeat"]["failed"] = json!(4));
    assert!(
        p.contains(&"candidate_turnover_repeat.failed".to_string()),
        "{p:?}"
    );
    assert!(
        p.contains(&"candidate_turnover_repeat.failures.length".to_string()),
        "{p:?}"
    );

    let p = paths_after(|v| v["baseline_turnover"]["responses_received"] = json!(61));
    assert_eq!(p, vec!["baseline_turnover.responses_received".to_string()]);
}

#[test]
fn altered_gates_are_named() {
    let p = paths_after(|v| v["strict_turnover_gate_passed"] = json!(true));
    assert!(
        p.contains(&"strict_turnover_gate_passed".to_string()),
        "{p:?}"
    );
    let p = paths_after(|v| v["performance_gate_passed"] = json!(false));
    assert_eq!(p, vec!["performance_gate_passed".to_string()]);
    // The seed's qualification no longer fits a failed performance gate either.
    assert_eq!(
        paths_after(
            |v| v["cells"]["capacity-120k"]["baseline_performance_eligible"] = json!(false)
        ),
        vec![
            "performance_gate_passed".to_string(),
            "qualification".to_string()
        ]
    );
    let p = paths_after(|v| v["qualification"] = json!("pass"));
    assert_eq!(p, vec!["qualification".to_string()]);
}

#[test]
fn wrong_types_and_schema_are_named() {
    let p = paths_after(|v| v["schema"] = json!("runtime-profile-comparison/v2"));
    assert_eq!(p, vec!["schema".to_string()]);
    let p = paths_after(|v| {
        v["cells"]["capacity-4k"]["metrics"]["ttft_p50_ms"]["baseline"] = Value::Null
    });
    assert!(
        p.contains(&"cells.capacity-4k.metrics.ttft_p50_ms.baseline".to_string()),
        "{p:?}"
    );
    let p = paths_after(|v| v["baseline_turnover"]["failures"][0]["words"] = json!("497"));
    assert_eq!(p, vec!["baseline_turnover.failures[0].words".to_string()]);
}

#[test]
fn hostile_strings_cannot_drive_the_terminal() {
    let mut v = seed();
    let text = serde_json::to_string(&v).unwrap();
    // An escape sequence that would clear the screen, a carriage return that
    // would overwrite a verdict, and a bidi override, in names the renderer shows.
    let hostile = text.replace("capacity-4k", r"cap\u001b[2J\r\u202eacity-4k");
    assert_ne!(hostile, text);
    v = serde_json::from_str(&hostile).unwrap();
    for color in [false, true] {
        let t = report::terminal(&v, report::TerminalOptions::verbose(color));
        assert!(!t.contains("\x1b[2J") && !t.contains('\r') && !t.contains('\u{202e}'));
        assert!(
            t.contains("cap\\u{001b}[2J\\u{000d}\\u{202e}acity-4k"),
            "{t}"
        );
    }
}

#[test]
fn seed_renders_in_the_terminal() {
    let t = report::terminal(&seed(), report::TerminalOptions::verbose(false));
    for needle in [
        "capacity-4k",
        "capacity-120k",
        "-5.19%",
        "+17.21%",
        "-1.31%",
        "ttft_p50_ms",
        "decode_tok_s_p50",
        "baseline_turnover",
        "candidate_turnover_repeat",
        "not a blanket deterministic pass",
        "11.7%",
        "3.3%",
        "5.0%",
        "retain-baseline",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
    assert!(!t.contains('\x1b'), "no ANSI without color");
    assert!(report::terminal(&seed(), report::TerminalOptions::verbose(true)).contains("\x1b[32m"));
    // Columns line up: the rows of one cell's table end their delta in the same column.
    let rows: Vec<&str> = t
        .lines()
        .skip_while(|l| !l.starts_with("cell capacity-4k"))
        .filter(|l| {
            l.trim_start().starts_with("ttft_p50_ms") || l.trim_start().starts_with("e2e_p50_ms")
        })
        .take(2)
        .collect();
    assert_eq!(rows.len(), 2, "{t}");
    let col = |l: &str| l.find('%').map(|i| l[..i].chars().count());
    assert_eq!(col(rows[0]), col(rows[1]));
}

#[test]
fn seed_renders_as_markdown() {
    let m = report::markdown(&seed());
    assert!(m.contains("### Cell `capacity-4k`"));
    assert!(m.contains("| `ttft_p50_ms` | 496.1 | 470.3 |"), "{m}");
    assert!(m.contains("### Turnover"));
    assert!(
        m.contains("| `candidate_turnover` | 60 | 58 | 2 | 60 |"),
        "{m}"
    );
    assert!(m.contains("❌ fail"));
}

#[test]
fn seed_renders_as_html() {
    let h = report::html(&seed());
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert!(
        h.contains("no per-request samples"),
        "seed has no samples: say so"
    );
    assert!(h.contains("capacity-120k") && h.contains("+17.21%"));
    assert!(h.contains("<svg"), "turnover plot");
    for bad in ["http://", "https://", "<script", "<link", " src=", " href="] {
        assert!(!h.contains(bad), "{bad} in html");
    }
    assert_eq!(h.matches("<table").count(), h.matches("</table>").count());
    assert_eq!(h.matches("<svg").count(), h.matches("</svg>").count());
}
