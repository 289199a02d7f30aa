//! JUnit XML for CI: the qualification is one test case, and every part of
//! every deciding gate is one more, so a CI system shows which cell, metric,
//! turnover run or quality part failed, with the gate's reason (its bounds)
//! as the message.
//!
//! Only the gates that decide are exported: the performance evidence gate
//! where the report says evidence decides (the seed's fixed-threshold flags
//! otherwise), and the turnover gate of the policy's mode. A part that is
//! inconclusive is `<skipped>` (neither passed nor failed); the
//! qualification's own case fails unless it qualified, so an inconclusive
//! qualification is red too (its message says inconclusive). A metric's
//! message reads as in the other views: its estimate named, a rate's
//! bounds as the candidate's speed over the baseline's.

use serde_json::Value;

/// One test case: (name, outcome, message).
struct Case {
    name: String,
    outcome: Outcome,
    message: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Pass,
    Fail,
    Inconclusive,
}

pub fn render(v: &Value) -> String {
    let mut suites = vec![("qualification".to_string(), vec![qualification(v)])];
    let cells = super::view::cell_views(v);
    for name in deciding_gates(v) {
        let mut cases = gate_cases(&v["gates"][&name]);
        for c in &mut cases {
            c.message = match name.as_str() {
                "performance_evidence" => super::view::shown_reason(&cells, &c.name, &c.message),
                "performance" => super::estimate::point_reason(&c.message),
                _ => continue,
            };
        }
        suites.push((format!("gates.{name}"), cases));
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let (tests, failures, skipped) = totals(suites.iter().flat_map(|(_, c)| c));
    out.push_str(&format!(
        "<testsuites name=\"infergate qualification\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">\n"
    ));
    for (name, cases) in &suites {
        push_suite(&mut out, name, cases);
    }
    out.push_str("</testsuites>\n");
    out
}

/// The qualification as one case: passes only when it qualified.
fn qualification(v: &Value) -> Case {
    let text = v["qualification"].as_str().unwrap_or("(no qualification)");
    // As `gate::qualified`: the gates' verdict, else both seed gates.
    let qualified = v["gates"]["qualified"].as_bool().unwrap_or_else(|| {
        v["performance_gate_passed"] == true && v["strict_turnover_gate_passed"] == true
    });
    let outcome = match (qualified, text.starts_with("inconclusive")) {
        (true, _) => Outcome::Pass,
        (false, true) => Outcome::Inconclusive,
        (false, false) => Outcome::Fail,
    };
    Case {
        name: "qualification".into(),
        // An inconclusive qualification is not shippable: a failure here.
        outcome: if outcome == Outcome::Inconclusive {
            Outcome::Fail
        } else {
            outcome
        },
        message: text.to_string(),
    }
}

/// The gates that decide the qualification, in the report's order.
fn deciding_gates(v: &Value) -> Vec<String> {
    let Some(gates) = v["gates"].as_object() else {
        return Vec::new();
    };
    let evidence_decides = super::view::evidence_decides(v);
    let non_inferior = super::view::non_inferior_turnover(v);
    gates
        .iter()
        .filter(|(_, g)| g.is_object())
        .map(|(k, _)| k)
        .filter(|k| match k.as_str() {
            "performance" => !evidence_decides,
            "performance_evidence" => evidence_decides,
            "strict_turnover" => !non_inferior,
            "non_inferior_turnover" => non_inferior,
            _ => true,
        })
        .cloned()
        .collect()
}

/// A gate's parts as cases; a gate without parts is one case of its own.
fn gate_cases(gate: &Value) -> Vec<Case> {
    let case = |name: &str, x: &Value| Case {
        name: name.to_string(),
        outcome: outcome_of(x),
        message: match x["not_run"].as_str() {
            Some(why) => format!("not run ({why})"),
            None => x["reason"]
                .as_str()
                .or_else(|| x["rule"].as_str())
                .unwrap_or("")
                .to_string(),
        },
    };
    match gate["parts"].as_array() {
        Some(parts) if !parts.is_empty() => parts
            .iter()
            .map(|p| case(p["subject"].as_str().unwrap_or("(part)"), p))
            .collect(),
        _ => vec![case("gate", gate)],
    }
}

/// A gate that did not run is skipped, as an undecided part is: nothing
/// failed.
fn outcome_of(x: &Value) -> Outcome {
    match (x["outcome"].as_str(), x["passed"].as_bool()) {
        (Some("pass"), _) | (None, Some(true)) => Outcome::Pass,
        (Some("inconclusive"), _) => Outcome::Inconclusive,
        _ if x["not_run"].is_string() => Outcome::Inconclusive,
        _ => Outcome::Fail,
    }
}

fn totals<'a>(cases: impl Iterator<Item = &'a Case>) -> (usize, usize, usize) {
    cases.fold((0, 0, 0), |(t, f, s), c| {
        (
            t + 1,
            f + usize::from(c.outcome == Outcome::Fail),
            s + usize::from(c.outcome == Outcome::Inconclusive),
        )
    })
}

fn push_suite(out: &mut String, name: &str, cases: &[Case]) {
    let (tests, failures, skipped) = totals(cases.iter());
    out.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
        escape(name)
    ));
    for c in cases {
        let head = format!(
            "    <testcase classname=\"{}\" name=\"{}\"",
            escape(name),
            escape(&c.name)
        );
        match c.outcome {
            Outcome::Pass => out.push_str(&format!("{head}/>\n")),
            Outcome::Fail => out.push_str(&format!(
                "{head}>\n      <failure message=\"{}\" type=\"fail\"/>\n    </testcase>\n",
                escape(&c.message)
            )),
            Outcome::Inconclusive => out.push_str(&format!(
                "{head}>\n      <skipped message=\"{}{}\"/>\n    </testcase>\n",
                // A gate that did not run says so; an undecided part, that.
                if c.message.starts_with(super::view::NOT_RUN) {
                    ""
                } else {
                    "inconclusive: "
                },
                escape(&c.message)
            )),
        }
    }
    out.push_str("  </testsuite>\n");
}

/// Attribute-safe text: XML's five escapes, and characters XML 1.0 cannot
/// carry (controls other than tab, newline, return; U+FFFE, U+FFFF) or that
/// would reorder the text shown (bidirectional overrides) as visible escapes.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push_str(&format!("&#{};", c as u32)),
            c if crate::text::is_unsafe(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Value {
        json!({
            "qualification": "fail: quality gate",
            "statistics": {"gate_decides": "evidence"},
            "turnover_gate": {"mode": "strict"},
            "gates": {
                "qualified": false,
                "performance": {"passed": false, "parts": [{"subject": "cells.c.metrics.ttft_p50_ms", "passed": false, "reason": "+13 % > 5 %"}]},
                "performance_evidence": {"outcome": "inconclusive", "parts": [
                    {"subject": "cells.c.metrics.ttft_p50_ms", "outcome": "inconclusive", "reason": "bounds [-3 %, +20 %] vs 5 %"},
                    {"subject": "cells.c.metrics.e2e_p50_ms", "outcome": "pass", "reason": "bounds [-3 %, +2 %] vs 5 %"}
                ]},
                "strict_turnover": {"passed": true, "parts": [{"subject": "candidate_turnover", "passed": true, "reason": "0 of 24 failed"}]},
                "non_inferior_turnover": {"passed": false, "parts": [{"subject": "candidate_turnover", "passed": false, "reason": "x"}]},
                "quality": {"outcome": "fail", "parts": [{"subject": "quality: hard divergences", "outcome": "fail", "reason": "48 of 164 <\"&'>"}]}
            }
        })
    }

    #[test]
    fn only_deciding_gates_become_suites_and_outcomes_map() {
        let x = render(&report());
        assert!(x.contains("<testsuite name=\"gates.performance_evidence\" tests=\"2\" failures=\"0\" skipped=\"1\">"), "{x}");
        assert!(
            !x.contains("\"gates.performance\""),
            "the seed's flags do not decide here: {x}"
        );
        assert!(!x.contains("gates.non_inferior_turnover"), "{x}");
        assert!(x.contains(
            "<testsuite name=\"gates.strict_turnover\" tests=\"1\" failures=\"0\" skipped=\"0\">"
        ));
        assert!(
            x.contains("<failure message=\"48 of 164 &lt;&quot;&amp;&apos;&gt;\" type=\"fail\"/>"),
            "{x}"
        );
        assert!(x.contains("<skipped message=\"inconclusive: bounds [-3 %, +20 %] vs 5 %\"/>"));
        assert!(x.contains("<testsuites name=\"infergate qualification\" tests=\"5\" failures=\"2\" skipped=\"1\">"), "{x}");
        // The qualification's own case carries its text.
        assert!(x.contains("<failure message=\"fail: quality gate\""));
    }

    /// Where the seed's point gate decides, its message names its estimate
    /// as the tables do.
    #[test]
    fn the_point_gates_message_names_the_point_delta() {
        let mut v = report();
        v["statistics"] = json!({"gate_decides": "point"});
        v["gates"]["performance"]["parts"][0]["reason"] =
            json!("delta +13.00% (lower is better); worse-direction change +13.00% > threshold 5%");
        let x = render(&v);
        assert!(
            x.contains("<failure message=\"point delta +13.00% (lower is better); worse-direction change +13.00% &gt; threshold 5%\""),
            "{x}"
        );
    }

    #[test]
    fn characters_xml_cannot_carry_or_that_reorder_text_are_escaped() {
        assert_eq!(
            escape("a\u{FFFE}b\u{202E}c\u{85}"),
            "a\\u{fffe}b\\u{202e}c\\u{0085}"
        );
    }

    #[test]
    fn a_seed_report_exports_its_point_gate_and_escapes_controls() {
        let mut v = report();
        v["statistics"] = json!({});
        v["qualification"] = json!("pass\u{1b}[31m");
        v["gates"]["qualified"] = json!(true);
        let x = render(&v);
        assert!(x.contains("gates.performance\""), "{x}");
        assert!(!x.contains('\u{1b}'));
        assert!(
            x.contains("<testcase classname=\"qualification\" name=\"qualification\"/>"),
            "{x}"
        );
    }
}
