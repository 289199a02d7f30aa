//! infergate-report: run artifacts in, a compared, gated, verified and
//! rendered `runtime-profile-comparison/v1` report out. No network, database
//! or tokenizer: everything here is a function of files and seeds.
//!
//! Data flows: [`artifact`] (what a run measured) → [`stats`] (the math, a
//! leaf) → [`design`] (which look a comparison is, its levels, the method)
//! → [`compare`] (per-metric deltas and evidence) → [`gate`] (every
//! pass/fail/inconclusive rule, in one place) → the report model →
//! [`verify`] (recompute it) → [`render`] (terminal, Markdown, HTML).
//! Beside it, [`history`] reads a stream of qualifications (build k
//! against build k − 1): the drift since an anchor and the change points.
//!
//! The seed report (`tests/data/runtime-profile-comparison.example.json`, a
//! real report from another tool, kept byte for byte)
//! is a valid v1 report: every function reading reports accepts it, and
//! every report written here keeps its fields and their meanings.

pub mod agreement;
pub mod artifact;
pub mod atomic;
pub mod calibrate;
pub mod capacity;
pub mod checker;
mod compare;
pub mod config_error;
mod consistency;
pub mod design;
pub mod digest;
pub mod embedding;
pub mod fidelity;
pub mod files;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod gate;
pub mod history;
#[cfg(any(test, feature = "fixtures"))]
pub mod hostile;
mod io;
mod model;
pub mod policy;
pub mod quality;
pub mod reference;
pub mod render;
mod rendered;
pub mod server_metrics;
pub mod slo;
pub mod stats;
pub mod text;
mod turnover_rates;
pub mod verify;

pub use checker::Disagreement;
pub use compare::{CompareError, compare, compare_by, compare_with_look};
pub use config_error::ConfigError;
pub use gate::{
    EXIT_FAIL, EXIT_GATES_NOT_RUN, EXIT_INCONCLUSIVE, EXIT_PASS, QUAL_FAIL_BOTH,
    QUAL_FAIL_PERFORMANCE, QUAL_FAIL_TURNOVER, QUAL_FAIL_TURNOVER_INCONCLUSIVE, QUAL_INCONCLUSIVE,
    QUAL_NOT_BLANKET, QUAL_PASS, QUAL_PASS_NON_INFERIOR, evidence_qualification, exit_code,
    non_inferior_gate, qualification, strict_gate,
};
pub use io::{
    IoError, compare_files, compare_paths, compare_paths_at, parse_report_value, read_artifact,
    read_regular, read_report_value, without_bom, write_report_atomic,
};
pub use model::*;
pub use policy::{GateRule, Policy, TurnoverGateMode};
pub use render::{ReportSource, TerminalOptions, csv, junit};
pub use rendered::{html, markdown, terminal};
pub use turnover_rates::{MAX_EXACT_REQUESTS, RunCounts, compare_turnover};
pub use verify::{Verification, verify, verify_report};

/// Read and parse a report file.
pub fn read_report(path: &std::path::Path) -> Result<Report, IoError> {
    let v = read_report_value(path)?;
    serde_json::from_value(v).map_err(|e| IoError::Invalid(format!("{}: {e}", path.display())))
}
