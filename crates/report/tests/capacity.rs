//! Capacity cells compared: both sides' searches on one level schedule, the
//! ratio with its interval, the tri-state gate in the verdict, and `verify`
//! making it all again (and naming an edited ratio).

mod common;

use common::clean;
use infergate_report::artifact::{CellResult, RunArtifact};
use infergate_report::capacity::run::{assemble, tried_of};
use infergate_report::capacity::{
    CapacitySpec, Segment, SegmentRun, Stopped, run::rule_of, shared,
};
use infergate_report::fixtures;
use infergate_report::{GateRule, Policy, compare, verify};

fn spec() -> CapacitySpec {
    toml::from_str("by = \"rate\"\nlow = 1\nhigh = 16\nprecision_percent = 10\n").unwrap()
}

/// Attainment at `load` of a side whose curve crosses 0.9 at `edge`,
/// logistic in log load, falling over about a tenth of the load.
fn attainment(load: f64, edge: f64) -> f64 {
    1.0 / (1.0 + ((load / edge).ln() / 0.06 - 9f64.ln()).exp())
}

/// Two searches on one schedule against deterministic curves: each
/// segment of 32 meets `round(32 × attainment)`, alternating one more and
/// one fewer so a level's segments vary.
fn searched(edges: [f64; 2]) -> [Vec<(f64, SegmentRun)>; 2] {
    let rule = rule_of(&spec(), 0.9);
    let mut sides: [Vec<(f64, SegmentRun)>; 2] = [Vec::new(), Vec::new()];
    let tried =
        |s: &[(f64, SegmentRun)]| tried_of(s).into_iter().map(|(t, _)| t).collect::<Vec<_>>();
    for k in 0..400 {
        let Some(load) = shared::next(&rule, &tried(&sides[0]), &tried(&sides[1])) else {
            return sides;
        };
        for (s, edge) in sides.iter_mut().zip(edges) {
            let m =
                (32.0 * attainment(load, edge)).round() as i64 + if k % 2 == 0 { 1 } else { -1 };
            s.push((
                load,
                SegmentRun {
                    counts: Segment {
                        met: m.clamp(0, 32) as u64,
                        of: 32,
                        warmup: 8,
                    },
                    client_lag_p99_ms: 0.0,
                },
            ));
        }
    }
    panic!("the shared schedule did not end");
}

fn side(label: &str, segments: &[(f64, SegmentRun)]) -> RunArtifact {
    let run = assemble(
        &spec(),
        "TTFT ≤ 1000 ms".into(),
        0.9,
        segments,
        Stopped::Resolved,
    );
    let mut cell: CellResult = fixtures::cell(
        "cap",
        fixtures::shape(100, 1, run.requests as usize),
        Default::default(),
        Some(100.0),
    );
    cell.performance_eligible = false;
    cell.ineligible_reasons =
        vec!["a capacity search: its requests span the search's load levels (see capacity)".into()];
    cell.capacity = Some(run);
    fixtures::artifact(
        fixtures::provenance(label, label),
        vec![cell],
        vec![fixtures::turnover(0, 60, 0)],
    )
}

fn policy() -> Policy {
    let mut p = Policy {
        source: "tests: capacity".into(),
        ..Policy::default()
    };
    p.bootstrap.iterations = 200;
    p.gate.decide = GateRule::Evidence;
    p
}

#[test]
fn twice_the_capacity_passes_the_same_does_not_fail_and_verify_remakes_both() {
    let [b, c] = searched([3.0, 6.0]);
    let (b, c) = (side("baseline", &b), side("candidate", &c));
    let r = compare(&b, &c, &policy()).unwrap();
    let v = clean(&r);
    let cap = &v["cells"]["cap"]["capacity"];
    let ratio = cap["ratio"]["ratio"].as_f64().unwrap();
    assert!((1.7..2.3).contains(&ratio), "{cap:#}");
    assert_eq!(cap["outcome"], "pass", "{cap:#}");
    assert_eq!(cap["margin_percent"], 5.0);
    let held = b.cells[0].capacity.as_ref().unwrap().bracket[0].unwrap();
    let goodput = cap["baseline_goodput_rps"].as_f64().unwrap();
    assert!(goodput > 0.0 && goodput <= held, "{goodput} at {held}");
    assert_eq!(
        cap["baseline"]["levels"],
        b.cells[0]
            .capacity
            .as_ref()
            .map(|c| serde_json::to_value(&c.levels).unwrap())
            .unwrap()
    );
    let part = v["gates"]["performance_evidence"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["subject"] == "cells.cap.capacity")
        .expect("a part for the capacity cell")
        .clone();
    assert_eq!(part["outcome"], "pass", "{part:#}");
    // The cell is the only pair: its ratio is two-sided at 1 − 2α.
    let alpha = 0.05;
    assert!(
        (cap["ratio"]["confidence"].as_f64().unwrap() - (1.0 - 2.0 * alpha)).abs() < 0.05,
        "{cap:#}"
    );

    // The views print the pair's line and each side's.
    let line =
        infergate_report::capacity::words::pair_of(r.cells.0[0].1.capacity.as_ref().unwrap());
    assert!(line.starts_with("candidate holds 2"), "{line}");
    assert!(line.ends_with(": pass (floor 0.95×)"), "{line}");
    let t = infergate_report::terminal(&r, infergate_report::TerminalOptions::verbose(false));
    let m = infergate_report::markdown(&r);
    for shown in [&t, &m] {
        assert!(shown.contains(&line), "{shown}");
        let run = b.cells[0].capacity.as_ref().unwrap();
        let side = format!("baseline: {}; goodput ", run.line());
        assert!(shown.contains(&side), "{shown}");
        assert!(
            !shown.contains("seed flag (point vs T)"),
            "no metric table: {shown}"
        );
    }

    // An A/A pair does not fail.
    let [b2, c2] = searched([3.0, 3.0]);
    let aa = compare(&side("baseline", &b2), &side("candidate", &c2), &policy()).unwrap();
    let v2 = clean(&aa);
    assert_ne!(v2["cells"]["cap"]["capacity"]["outcome"], "fail", "{v2:#}");

    // A margin from the policy reaches the floor and the gate.
    let mut strict = policy();
    strict.capacity.margin_percent = 0.0;
    let v3 = clean(&compare(&side("baseline", &b2), &side("candidate", &c2), &strict).unwrap());
    assert_eq!(v3["cells"]["cap"]["capacity"]["floor"], 1.0);

    // An edited ratio, an edited level and an edited outcome are named.
    for (ptr, to) in [
        ("/cells/cap/capacity/ratio/ratio", serde_json::json!(9.0)),
        (
            "/cells/cap/capacity/candidate/levels/0/segments/0/met",
            serde_json::json!(0),
        ),
        ("/cells/cap/capacity/outcome", serde_json::json!("fail")),
    ] {
        let mut t = v.clone();
        *t.pointer_mut(ptr).unwrap() = to;
        let d = verify(&t);
        assert!(!d.is_empty(), "{ptr}: an edit verify does not see");
    }
}
