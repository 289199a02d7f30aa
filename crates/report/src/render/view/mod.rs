//! What the renderers show, read leniently from any v1 report: seed fields
//! are expected, additions used when present, and nothing missing is fatal
//! (a renderer shows "—" instead).
//!
//! Here the view and how it is read; a cell's rows in `cell` and its server
//! detail in `server`, the evidence gate in words in `evidence`, the gate
//! table, failed parts and verdict in `gates`, the turnover runs in
//! `turnover`, output quality and the reference pairs in `quality`, and
//! the lenient JSON readers all of them use in `json`.

use std::cmp::Ordering;

use serde_json::Value;

use crate::checker::Disagreement;
use crate::model::{Decision, Gates, ProvenancePair, Statistics, TurnoverComparison};
use crate::quality::QualityComparison;
use crate::reference::ReferenceComparison;

mod cell;
mod evidence;
mod gates;
pub(super) mod json;
mod quality;
mod server;
mod turnover;

pub(super) use cell::cell_views;
pub use cell::{CellView, MetricView};
pub(super) use evidence::shown_reason;
pub use gates::{GateRow, NOT_RUN};
pub(super) use gates::{evidence_decides, non_inferior_turnover};
pub use quality::PairMark;
pub use turnover::{RunView, TurnoverRow};
pub(super) use turnover::{TurnoverEntry, turnover_entries};

use json::{as_bool, as_string, as_strings, typed};
use turnover::run_view;

/// Computed from a report for its view before it is built: `verify`'s
/// disagreements (by the caller) and the turnover comparison (`checks.rs`).
pub struct Checks {
    pub disagreements: Vec<Disagreement>,
    pub turnover: TurnoverComparison,
    /// True when the report had no `turnover_comparison` and one was
    /// computed from the runs' counts.
    pub turnover_computed: bool,
}

pub struct View {
    pub schema: Option<String>,
    pub baseline_image: Option<String>,
    pub candidate_image: Option<String>,
    pub cells: Vec<CellView>,
    pub performance_gate_passed: Option<bool>,
    pub strict_turnover_gate_passed: Option<bool>,
    pub qualification: Option<String>,
    pub promotion: Option<String>,
    pub human_decision: Option<String>,
    pub runs: Vec<RunView>,
    pub turnover: TurnoverComparison,
    /// True when the report had no `turnover_comparison` and the renderer
    /// computed one from the runs' counts.
    pub turnover_computed: bool,
    pub gates: Option<Gates>,
    pub statistics: Option<Statistics>,
    /// [`evidence_decides`] of the report as read.
    pub decides_by_evidence: bool,
    /// [`non_inferior_turnover`] of the report as read.
    pub non_inferior: bool,
    pub decision: Option<Decision>,
    pub provenance: Option<ProvenancePair>,
    pub warnings: Vec<String>,
    pub disagreements: Vec<Disagreement>,
    /// The cross-runtime reference pairs, when the report classified them.
    pub references: Option<ReferenceComparison>,
    /// Output quality (hard-divergence share, task accuracy), when judged.
    pub quality: Option<QualityComparison>,
    /// Why the turnover gates did not run ("skipped by the plan"), when the
    /// report says they did not (`turnover_gate.not_run`).
    pub turnover_not_run: Option<String>,
}

impl View {
    /// The heading every renderer leads with: the qualification, unless the
    /// report fails verification — then that failure, since none of the
    /// report's own claims (its qualification included) can be trusted.
    pub fn headline(&self) -> String {
        let q = self.qualification.as_deref().unwrap_or("no qualification");
        if self.disagreements.is_empty() {
            q.to_string()
        } else {
            format!(
                "VERIFICATION FAILED ({} disagreement(s)): this report contradicts itself; its qualification ({q}) is not to be trusted",
                self.disagreements.len()
            )
        }
    }

    /// The report's fields as read, and what the caller computed from them.
    pub fn from_value(root: &Value, checks: Checks) -> View {
        let cells = cell_views(root);
        let runs = turnover_entries(root).iter().map(run_view).collect();
        let Checks {
            disagreements,
            turnover,
            turnover_computed,
        } = checks;
        View {
            schema: as_string(root.get("schema")),
            baseline_image: as_string(root.get("baseline_image")),
            candidate_image: as_string(root.get("candidate_image")),
            cells,
            performance_gate_passed: as_bool(root.get("performance_gate_passed")),
            strict_turnover_gate_passed: as_bool(root.get("strict_turnover_gate_passed")),
            qualification: as_string(root.get("qualification")),
            promotion: as_string(root.get("promotion")),
            human_decision: as_string(root.get("human_decision")),
            runs,
            turnover,
            turnover_computed,
            gates: typed(root.get("gates")),
            decides_by_evidence: evidence_decides(root),
            non_inferior: non_inferior_turnover(root),
            statistics: typed(root.get("statistics")),
            decision: typed(root.get("decision")),
            provenance: typed(root.get("provenance")),
            warnings: as_strings(root.get("warnings")),
            disagreements,
            references: typed(root.get("reference_comparison")),
            quality: typed(root.get("quality")),
            turnover_not_run: root.pointer("/turnover_gate/not_run").map(|v| {
                serde_json::from_value::<crate::artifact::TurnoverSkip>(v.clone())
                    .map_or_else(|_| format!("{v}"), |s| s.describe().to_string())
            }),
        }
    }
}

/// Order names so that `capacity-4k` comes before `capacity-120k`: digit runs
/// compare as numbers (JSON objects read here lose the file's key order).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.chars().peekable(), b.chars().peekable());
    loop {
        match (x.peek().copied(), y.peek().copied()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let take = |it: &mut std::iter::Peekable<std::str::Chars>| {
                    let mut d = String::new();
                    while let Some(c) = it.peek().copied().filter(char::is_ascii_digit) {
                        d.push(c);
                        it.next();
                    }
                    d
                };
                let (m, n) = (take(&mut x), take(&mut y));
                let (mt, nt) = (m.trim_start_matches('0'), n.trim_start_matches('0'));
                let o = mt.len().cmp(&nt.len()).then_with(|| mt.cmp(nt));
                if o != Ordering::Equal {
                    return o;
                }
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(&q);
                }
                x.next();
                y.next();
            }
        }
    }
}
