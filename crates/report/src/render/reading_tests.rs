//! How the views read to someone deciding whether to ship: the design in
//! one line unless asked for, each estimate named where it is shown, a
//! rate's bounds as speeds, and no hard divergence ticked as fine.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::artifact::{RunArtifact, Schedule, metric};
use crate::fixtures;
use crate::stats::Xoshiro256;

/// Values around 1000 × (1 + shift %) with ± `noise` spread, in `blocks`
/// interleaved blocks.
fn values(n: usize, blocks: usize, shift: f64, noise: f64, seed: u64) -> (Vec<f64>, Vec<u32>) {
    let mut r = Xoshiro256::new(seed);
    let per = n / blocks;
    (0..n)
        .map(|i| {
            let k = (i / per).min(blocks - 1);
            let z = 1.0 + noise * (2.0 * r.next_f64() - 1.0);
            (1000.0 * (1.0 + shift / 100.0) * z, k as u32)
        })
        .unzip()
}

/// An interleaved side in `blocks` blocks of three requests: latencies
/// `shift` % slower, the decode speed as much slower and so noisy that its
/// bounds span a wide range of speeds.
fn side_in_blocks(label: &str, shift: f64, seed: u64, blocks: usize) -> RunArtifact {
    let n = 3 * blocks;
    let mut samples = BTreeMap::new();
    let mut clusters = BTreeMap::new();
    for (k, scale, sign, noise) in [
        (metric::TTFT_MS, 1.0, 1.0, 0.08),
        (metric::E2E_MS, 3.0, 1.0, 0.08),
        (metric::DECODE_TOK_S, 0.05, -1.0, 0.9),
    ] {
        let (v, c) = values(n, blocks, sign * shift, noise, seed + k.len() as u64);
        samples.insert(k.to_string(), v.iter().map(|x| x * scale).collect());
        clusters.insert(k.to_string(), c);
    }
    let mut cell = fixtures::cell("c1", fixtures::shape(1000, 1, n), samples, Some(1000.0));
    cell.sample_clusters = clusters;
    let turnover = vec![fixtures::turnover(0, 20, 0)];
    RunArtifact {
        schedule: Some(Schedule::Interleaved),
        ..fixtures::artifact(
            fixtures::bare_provenance(label, "s", "0"),
            vec![cell],
            turnover,
        )
    }
}

/// A report decided by evidence on interleaved blocks: TTFT and e2e 30 %
/// worse, the decode speed undecided.
fn paired_report() -> Value {
    report_in_blocks(4)
}

fn report_in_blocks(blocks: usize) -> Value {
    let mut p = crate::Policy {
        source: "tests: 2000 iterations".into(),
        ..crate::Policy::default()
    };
    p.bootstrap.iterations = 2000;
    let (b, c) = (
        side_in_blocks("b", 0.0, 1, blocks),
        side_in_blocks("c", 30.0, 2, blocks),
    );
    crate::compare(&b, &c, &p).unwrap().to_value()
}

fn term(v: &Value) -> String {
    crate::terminal(v, crate::TerminalOptions::default())
}

fn verbose(v: &Value) -> String {
    crate::terminal(v, crate::TerminalOptions::verbose(false))
}

/// A phrase only the design's whole paragraph holds.
const FULL_DESIGN: &str = "block ids drawn with replacement";

#[test]
fn the_design_is_one_line_by_default_and_whole_when_asked() {
    let mut v = paired_report();
    let line = "design: interleaved blocks, paired bootstrap of request pairs (trimmed block mean), alpha 0.05 over 3 pairs and 1 look — the whole of it with --verbose";
    let t = term(&v);
    assert!(t.contains(line), "{t}");
    assert!(!t.contains(FULL_DESIGN), "{t}");
    let t = verbose(&v);
    assert!(t.contains(FULL_DESIGN) && !t.contains(line), "{t}");
    // From the report's fields, not a fixed text.
    v["statistics"]["family_wise"]["alpha"] = json!(0.1);
    v["statistics"]["family_wise"]["gating_pairs"] = json!(6);
    v["statistics"]["family_wise"]["looks"] = json!(12);
    assert!(
        term(&v).contains("(trimmed block mean), alpha 0.1 over 6 pairs and 12 looks — "),
        "{}",
        term(&v)
    );
}

#[test]
fn markdown_and_html_show_the_designs_line_and_fold_the_rest() {
    let mut v = paired_report();
    // Report text in both places, escaped for each.
    v["statistics"]["design"]["schedule"] = json!("odd_<b>*x*</b>");
    let m = crate::markdown(&v);
    assert!(
        m.contains(
            "\n<details><summary>design: odd_&lt;b&gt;*x*&lt;/b&gt;, paired bootstrap of request pairs"
        ),
        "{m}"
    );
    let folded = m.split("<details><summary>design: ").nth(1).unwrap();
    let (summary, rest) = folded.split_once("</summary>\n\n").unwrap();
    assert!(!summary.contains(FULL_DESIGN), "{summary}");
    assert!(
        rest.starts_with("schedule odd\\_&lt;b&gt;\\*x\\*&lt;/b&gt;, paired block bootstrap")
            && rest.contains(FULL_DESIGN),
        "{rest}"
    );
    assert!(!m.contains("- design:"), "{m}");
    let h = crate::html(&v);
    assert!(
        h.contains("<details><summary>Design: odd_&lt;b&gt;*x*&lt;/b&gt;, paired bootstrap of request pairs (trimmed block mean), alpha 0.05 over 3 pairs and 1 look</summary><p>schedule odd_&lt;b&gt;"),
        "{h}"
    );
    assert!(!h.contains("<p>Design:"), "{h}");
}

/// The tables' delta and the evidence's estimate are different statistics:
/// each view names both, and no view shows the bare "worse-direction change".
#[test]
fn each_estimate_is_named_where_it_is_shown() {
    let v = paired_report();
    let t = term(&v);
    assert!(
        t.contains("  metric  ") && t.contains("  point delta  "),
        "{t}"
    );
    assert!(
        t.contains("  ✗ c1 ttft_p50_ms: paired estimate, worse direction +"),
        "{t}"
    );
    assert!(
        t.contains("cells.c1.metrics.e2e_p50_ms: paired estimate, worse direction +"),
        "{t}"
    );
    assert!(t.contains(super::estimate::PAIRED_VS_POINT), "{t}");
    let m = crate::markdown(&v);
    assert!(
        m.contains("| n | point delta |") && m.contains("`: paired estimate, worse direction +"),
        "{m}"
    );
    let h = crate::html(&v);
    assert!(
        h.contains("<th>point delta</th>") && h.contains("</code></td><td>paired estimate, worse"),
        "{h}"
    );
    let j = super::junit(&v);
    assert!(
        j.contains("<failure message=\"paired estimate, worse direction +"),
        "{j}"
    );
    for (name, out) in [("terminal", t), ("markdown", m), ("html", h), ("junit", j)] {
        assert!(!out.contains("worse-direction change"), "{name}: {out}");
    }
    // The report itself keeps its stored reasons.
    let reason = v["gates"]["performance_evidence"]["parts"][0]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.starts_with("worse-direction change +"), "{reason}");
}

/// The decode speed's bounds, from the report's worse-direction percent
/// (c/b = 1 − worse/100), as the candidate's speed in every view.
#[test]
fn a_rates_bounds_read_as_the_candidates_speed() {
    let v = paired_report();
    let e = &v["cells"]["c1"]["metrics"]["decode_tok_s_p50"]["evidence"];
    let ratio = |k: &str| super::estimate::fmt_ratio(1.0 - e[k].as_f64().unwrap() / 100.0);
    let range = format!(
        "{}–{} as fast",
        ratio("upper_bound_percent"),
        ratio("lower_bound_percent")
    );
    assert!(e["lower_bound_percent"].as_f64().unwrap() < -100.0, "{e}");
    let cell = format!("{range} vs ≥0.95×");
    let t = term(&v);
    let row = t
        .lines()
        .find(|l| l.contains("  decode_tok_s_p50  "))
        .unwrap();
    assert!(row.contains(&cell) && !row.contains("]%"), "{row}");
    assert!(
        t.contains("evidence bounds, worse-direction (rates: speed)"),
        "{t}"
    );
    let line = t
        .lines()
        .find(|l| l.contains("cells.c1.metrics.decode_tok_s_p50: "))
        .unwrap();
    assert!(
        line.contains(&format!(
            "paired estimate {} as fast (worse direction +",
            ratio("worse_change_percent")
        )) && line.contains(&format!(
            "bounds {range} (fail if all of it is under 0.95×, pass if all of it is at or above)"
        )),
        "{line}"
    );
    assert!(crate::markdown(&v).contains(&format!("| {cell} |")));
    assert!(crate::html(&v).contains(&format!("<td class=\"n\">{cell}</td>")));
    assert!(super::junit(&v).contains(&format!("bounds {range} (fail")));
}

/// A qualification on two blocks: its undecided metrics' bounds are t with
/// one degree of freedom, numbers like `3.7e18×` that decide nothing. Every
/// view says so in words instead; the report keeps the numbers.
#[test]
fn a_two_block_qualification_reads_as_thin() {
    let v = report_in_blocks(2);
    let words = "too few blocks to bound: 2 of the 4 a bound needs";
    let parts = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap();
    let thin: Vec<&Value> = parts.iter().filter(|p| p["informative"] == false).collect();
    assert!(!thin.is_empty(), "{parts:#?}");
    let (t, m, h, j) = (
        verbose(&v),
        crate::markdown(&v),
        crate::html(&v),
        super::junit(&v),
    );
    for part in thin {
        assert_eq!(part["not_informative"], words, "{part}");
        let subject = part["subject"].as_str().unwrap();
        let name = subject.rsplit('.').next().unwrap();
        let metric = &v["cells"]["c1"]["metrics"][name];
        let e: crate::stats::Evidence = serde_json::from_value(metric["evidence"].clone()).unwrap();
        // The JSON keeps the numbers.
        assert!(e.lower_bound_percent.is_finite(), "{metric}");
        let direction = serde_json::from_value(metric["direction"].clone()).ok();
        let cell = super::estimate::bounds_cell(&e, direction);
        let reason = part["reason"].as_str().unwrap();
        let line = super::estimate::evidence_reason(&e, direction, None, reason).unwrap();
        let shown = super::estimate::evidence_reason(&e, direction, Some(words), reason).unwrap();
        for (view, out) in [
            ("terminal", &t),
            ("markdown", &m),
            ("html", &h),
            ("junit", &j),
        ] {
            assert!(!out.contains(&cell), "{view} shows {cell}: {out}");
            assert!(!out.contains(&line), "{view} shows {line}: {out}");
            assert!(out.contains(&shown), "{view} lacks {shown}: {out}");
        }
        let row = t
            .lines()
            .find(|l| l.contains(&format!("  {name}  ")))
            .unwrap();
        assert!(row.contains(words), "{row}");
        assert!(m.contains(&format!("| {words} |")), "{m}");
    }
    for (view, out) in [("terminal", &t), ("markdown", &m), ("html", &h)] {
        assert!(!out.contains("0.0×"), "{view}: {out}");
        assert!(
            !out.contains("e18×") && !out.contains("e19×"),
            "{view}: {out}"
        );
    }
}

/// Three differing reference pairs under `cross_runtime = "rate"` (every
/// pair passed on its own) and one under `near_tie` (a hard one failed).
fn references(cross_runtime: &str, hard_passed: bool) -> Value {
    let pair = |class: &str, i: usize, passed: bool| {
        json!({"turnover": "ref", "repeat": 0, "request_index": i, "class": class,
               "agreement": {"tokens": 0, "top1_agree": 0}, "passed": passed})
    };
    json!({"reference_comparison": {
        "cross_runtime": cross_runtime, "near_tie_nats": 0.5, "pairs": 4,
        "identical": 1, "near_tie": 1, "hard": 1, "text_only": 1,
        "prompts": [pair("identical", 0, true), pair("near_tie", 1, true),
                    pair("hard", 2, hard_passed), pair("text_only", 3, hard_passed)]
    }})
}

#[test]
fn a_hard_divergence_is_never_ticked_as_fine() {
    let v = references("rate", true);
    let t = term(&v);
    assert!(t.contains("  ✓ near_tie ref repeat 0 request 1"), "{t}");
    for class in [
        "hard ref repeat 0 request 2",
        "text_only ref repeat 0 request 3",
    ] {
        assert!(t.contains(&format!("  ⚠ {class}")), "{t}");
        assert!(!t.contains(&format!("✓ {class}")), "{t}");
    }
    let m = crate::markdown(&v);
    assert!(m.contains("- pass: near\\_tie ref"), "{m}");
    assert!(
        m.contains("- ⚠️ **counted**: hard ref repeat 0 request 2"),
        "{m}"
    );
    assert!(!m.contains("- pass: hard"), "{m}");
    let h = crate::html(&v);
    assert!(
        h.contains("<b class=\"v-inconclusive\">⚠ counted</b> hard ref"),
        "{h}"
    );
    assert!(
        !h.contains("<b>pass</b> hard") && !h.contains("pass</b> hard"),
        "{h}"
    );
    // Failed by the policy: a cross, as before.
    let v = references("near_tie", false);
    assert!(term(&v).contains("  ✗ hard ref repeat 0 request 2"));
    assert!(crate::markdown(&v).contains("- **fail**: hard ref"));
    assert!(crate::html(&v).contains("<b class=\"fail\">✗ fail</b> hard ref"));
}
