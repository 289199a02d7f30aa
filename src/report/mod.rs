//! Comparison reports (`runtime-profile-comparison/v1`): build one from two
//! run artifacts ([`compare`]), check any v1 report's internal arithmetic
//! ([`verify`]), and render one for a terminal, a GitHub job summary or a
//! browser ([`render`]).
//!
//! The seed report (`shared/seeds/runtime-profile-comparison.example.json`)
//! is a valid v1 report: every function reading reports accepts it, and
//! every report written here keeps its fields and their meanings.

pub mod calibrate;
mod compare;
mod io;
mod model;
pub mod policy;
pub mod render;
mod turnover;
mod verify;

pub use compare::{
    CompareError, QUAL_FAIL_BOTH, QUAL_FAIL_PERFORMANCE, QUAL_FAIL_TURNOVER,
    QUAL_FAIL_TURNOVER_INCONCLUSIVE, QUAL_INCONCLUSIVE, QUAL_NOT_BLANKET, QUAL_PASS,
    QUAL_PASS_NON_INFERIOR, compare, evidence_qualification, qualification,
};
pub use io::{
    compare_files, compare_paths, parse_report_value, read_artifact, read_report_value,
    write_report_atomic,
};
pub use model::*;
pub use policy::{GateRule, Policy, PolicyError, TurnoverGateMode};
pub use render::{ReportSource, html, markdown, terminal};
pub use turnover::{RunCounts, compare_turnover, non_inferior_gate, strict_gate};
pub use verify::runs::{RunDirs, verify_runs};
pub use verify::{Disagreement, Verification, verify, verify_report};

/// Exit code of a compared qualification: every gate passed.
pub const EXIT_PASS: u8 = 0;
/// A gate failed.
pub const EXIT_FAIL: u8 = 1;
/// The evidence could not decide the performance gate (turnover did not fail).
pub const EXIT_INCONCLUSIVE: u8 = 3;

/// [`EXIT_PASS`], [`EXIT_FAIL`] or [`EXIT_INCONCLUSIVE`] for a report.
pub fn exit_code(r: &Report) -> u8 {
    let qualified = r.gates.as_ref().map_or(
        r.performance_gate_passed && r.strict_turnover_gate_passed,
        |g| g.qualified,
    );
    if qualified {
        EXIT_PASS
    } else if r.qualification == QUAL_INCONCLUSIVE {
        EXIT_INCONCLUSIVE
    } else {
        EXIT_FAIL
    }
}

/// Read and parse a report file.
pub fn read_report(path: &std::path::Path) -> anyhow::Result<Report> {
    let v = read_report_value(path)?;
    serde_json::from_value(v).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
