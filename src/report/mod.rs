//! Comparison reports (`runtime-profile-comparison/v1`): build one from two
//! run artifacts ([`compare`]), check any v1 report's internal arithmetic
//! ([`verify`]), and render one for a terminal, a GitHub job summary or a
//! browser ([`render`]).
//!
//! The seed report (`shared/seeds/runtime-profile-comparison.example.json`)
//! is a valid v1 report: every function reading reports accepts it, and
//! every report written here keeps its fields and their meanings.

mod compare;
mod io;
mod model;
pub mod policy;
pub mod render;
mod turnover;
mod verify;

pub use compare::{
    CompareError, QUAL_FAIL_BOTH, QUAL_FAIL_PERFORMANCE, QUAL_FAIL_TURNOVER, QUAL_NOT_BLANKET,
    QUAL_PASS, QUAL_PASS_NON_INFERIOR, compare, qualification,
};
pub use io::{
    compare_files, parse_report_value, read_artifact, read_report_value, write_report_atomic,
};
pub use model::*;
pub use policy::{Policy, PolicyError, TurnoverGateMode};
pub use render::{ReportSource, html, markdown, terminal};
pub use turnover::{RunCounts, compare_turnover, non_inferior_gate, strict_gate};
pub use verify::{Disagreement, verify};
