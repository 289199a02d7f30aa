//! What a renderer shows beside the report's own fields, computed before
//! the view is built: the turnover comparison from the runs' counts when a
//! report carries none, beside `verify`'s disagreements, which the caller
//! computes and hands in (`crate::rendered`). The renderers only display.

use serde_json::Value;

use super::super::checker::Disagreement;
use super::super::model::{Side, TurnoverComparison};
use super::super::policy::{DEFAULT_ALPHA, DEFAULT_TURNOVER_CONFIDENCE};
use super::super::turnover_rates::{RunCounts, compare_turnover};
use super::view::json::{as_string, as_u64, typed};
use super::view::{Checks, TurnoverEntry, turnover_entries};

impl Checks {
    /// `root`'s checks, with `disagreements` (what `verify` found in it).
    pub fn of(root: &Value, disagreements: Vec<Disagreement>) -> Checks {
        let (turnover, turnover_computed) = turnover_comparison(root, &turnover_entries(root));
        Checks {
            disagreements,
            turnover,
            turnover_computed,
        }
    }
}

/// The report's turnover comparison; computed from the runs at the default
/// levels (and said to be) when a report has none.
fn turnover_comparison(root: &Value, keyed: &[TurnoverEntry<'_>]) -> (TurnoverComparison, bool) {
    if let Some(t) = typed(root.get("turnover_comparison")) {
        return (t, false);
    }
    let counts = |side: Side| -> Vec<RunCounts> {
        keyed
            .iter()
            .filter(|((sd, _), _, _)| *sd == side)
            .filter_map(|(_, key, r)| {
                Some(RunCounts {
                    key: key.to_string(),
                    name: as_string(r.get("name")).unwrap_or_else(|| "turnover".into()),
                    requests: as_u64(r.get("requests"))?,
                    failed: as_u64(r.get("failed"))?,
                    contaminated: as_u64(r.get("contaminated")),
                })
            })
            .collect()
    };
    let cmp = compare_turnover(
        &counts(Side::Baseline),
        &counts(Side::Candidate),
        DEFAULT_ALPHA,
        DEFAULT_TURNOVER_CONFIDENCE,
        None,
    );
    (cmp, true)
}
