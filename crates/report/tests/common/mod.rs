//! What the report crate's compare and view tests share: a policy fit
//! for synthetic runs, and a report's JSON without what differs run to run.
#![allow(dead_code)] // each test binary uses a different part

use infergate_report::{self as report, Policy, Report, verify};
use serde_json::Value;

/// These tests check the seed's point-delta table and wordings, so they
/// decide by the point rule; the evidence rule has tests of its own.
pub fn fast_policy() -> Policy {
    let mut p = Policy {
        source: "tests: defaults with 2000 iterations, point rule".into(),
        ..Policy::default()
    };
    p.bootstrap.iterations = 2000;
    p.gate.decide = report::GateRule::Point;
    p
}

pub fn clean(r: &Report) -> Value {
    let v = r.to_value();
    let d = verify(&v);
    assert!(d.is_empty(), "{d:#?}");
    v
}
