//! Serde types of a `runtime-profile-comparison/v1` report.
//!
//! The seed's fields keep their names and meanings; everything else is an
//! addition and optional on read, so the seed itself deserializes. Two seed
//! fields have names that carry data, and get hand-written (de)serialization:
//! the per-metric flag `no_more_than_<T>_percent_regression` embeds the
//! threshold, and turnover runs are spread over `<side>_turnover`,
//! `<side>_turnover_repeat`, `<side>_turnover_repeat_2`, ….
//!
//! Here the report itself and what it shares with every section; a cell's
//! comparison in `cells`, the turnover runs and their comparison in
//! `turnover`, the gates in `gates`, how the numbers were made in
//! `statistics`, and the quality gate's data in `quality`.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::artifact::Provenance;
use crate::stats::{Direction, GateOutcome};

mod cells;
mod gates;
mod quality;
mod statistics;
mod turnover;

pub use cells::*;
pub use gates::*;
pub use quality::*;
pub use statistics::*;
pub use turnover::*;

pub const REPORT_SCHEMA: &str = "runtime-profile-comparison/v1";

/// Written to `promotion` and `human_decision` until someone decides.
pub const PENDING: &str = "pending";

/// A JSON object whose key order is kept (serde_json here sorts its maps, and
/// the order of cells and metrics is the order a reader expects).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> Default for OrderedMap<V> {
    fn default() -> Self {
        OrderedMap(Vec::new())
    }
}

impl<V> OrderedMap<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
            type Value = OrderedMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, V)> = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, V>()? {
                    if out.iter().any(|(seen, _)| *seen == k) {
                        return Err(de::Error::custom(format!("duplicate key `{k}`")));
                    }
                    out.push((k, v));
                }
                Ok(OrderedMap(out))
            }
        }
        d.deserialize_map(V_(PhantomData))
    }
}

/// The whole report. Field order follows the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub baseline_image: String,
    pub candidate_image: String,
    pub cells: OrderedMap<CellComparison>,
    /// Every gating metric of every cell within its threshold, and every cell
    /// performance-eligible on both sides.
    pub performance_gate_passed: bool,
    /// Every candidate turnover run: zero failed requests (and, where counted,
    /// zero contaminated answers). False when the candidate has no turnover run.
    pub strict_turnover_gate_passed: bool,
    pub qualification: String,
    pub promotion: String,
    #[serde(flatten)]
    pub turnover: TurnoverRuns,
    pub human_decision: String,

    // ---- additions ----
    /// The performance gate decided from confidence bounds (pass, fail,
    /// inconclusive); see `statistics.evidence_rule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_outcome: Option<GateOutcome>,
    /// Which turnover gate the policy counts toward qualification, and its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnover_gate: Option<TurnoverGateResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnover_comparison: Option<TurnoverComparison>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<Statistics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<Gates>,
    /// The gating metrics and thresholds used, so a reader (and `verify`) knows
    /// which metrics every cell should have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenancePair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Things a reader should know that are not gate failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The candidate's reference texts against the baseline's, per prompt:
    /// identical, near-tie or hard divergence, from per-token logprobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_comparison: Option<crate::reference::ReferenceComparison>,
    /// Output quality across runtimes, decided by evidence: the share of
    /// hard divergences and each task's accuracy drop (`gates.quality`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<QualityComparison>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Baseline,
    Candidate,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyMetric {
    pub name: String,
    pub sample: String,
    pub quantile: f64,
    pub direction: Direction,
    pub threshold_percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    /// Where the policy came from: a file path, or "defaults".
    pub source: String,
    pub metrics: Vec<PolicyMetric>,
    pub turnover_gate: TurnoverGateMode,
    pub alpha: f64,
    /// SLO attainment gates, per cell (absent in reports from before them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<PolicySlo>,
}

/// One SLO gate of the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySlo {
    /// The cell it applies to; absent: every cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    pub targets: crate::artifact::Slo,
    /// How far (percentage points) the candidate's attainment may fall below the baseline's.
    pub margin_points: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenancePair {
    pub baseline: Provenance,
    pub candidate: Provenance,
    /// Every file `compare` read, with its sha256 (`compare_files` records them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputDigest>,
}

/// One file a report was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputDigest {
    pub side: Side,
    /// `run_artifact` or `journal`.
    pub role: String,
    /// As given to `compare`.
    pub path: String,
    pub sha256: String,
}

pub const INPUT_RUN_ARTIFACT: &str = "run_artifact";
pub const INPUT_JOURNAL: &str = "journal";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecisionAction {
    #[serde(rename = "promote")]
    Promote,
    #[serde(rename = "retain-baseline")]
    RetainBaseline,
    #[serde(rename = "pending")]
    Pending,
}

impl DecisionAction {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionAction::Promote => "promote",
            DecisionAction::RetainBaseline => "retain-baseline",
            DecisionAction::Pending => PENDING,
        }
    }
}

/// The human decision, typed. `human_decision` and `promotion` carry it as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub action: DecisionAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub who: Option<String>,
    /// RFC 3339 time of the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Decision {
    pub fn pending() -> Decision {
        Decision {
            action: DecisionAction::Pending,
            who: None,
            when: None,
            note: None,
        }
    }
}

impl Report {
    pub fn to_value(&self) -> serde_json::Value {
        // A Report holds only finite numbers and string keys, so this cannot fail;
        // Null keeps the signature simple should that ever change.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Record a human decision: the typed `decision` and the seed's text
    /// field `human_decision` (`retain-baseline; <note>`). `promotion` says
    /// what was done about it and is set by whoever carries it out
    /// ([`Report::set_promotion`]).
    pub fn record_decision(&mut self, decision: Decision) {
        self.human_decision = match &decision.note {
            Some(n) if !n.is_empty() => format!("{}; {n}", decision.action.as_str()),
            _ => decision.action.as_str().to_string(),
        };
        self.decision = Some(decision);
    }

    pub fn set_promotion(&mut self, what_was_done: impl Into<String>) {
        self.promotion = what_was_done.into();
    }
}

/// How turnover runs gate qualification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnoverGateMode {
    /// Every candidate turnover run: zero failures and zero contamination.
    Strict,
    /// The candidate's failure rate is not significantly worse than the
    /// baseline's (one-sided Fisher p ≥ alpha), and zero contamination always.
    NonInferior,
}

impl TurnoverGateMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnoverGateMode::Strict => "strict",
            TurnoverGateMode::NonInferior => "non_inferior",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_carry_the_threshold() {
        assert_eq!(
            regression_flag_name(5.0),
            "no_more_than_5_percent_regression"
        );
        assert_eq!(
            regression_flag_name(2.5),
            "no_more_than_2.5_percent_regression"
        );
        for t in [0.0, 3.0, 2.5, 10.0, 0.25] {
            assert_eq!(parse_regression_flag(&regression_flag_name(t)), Some(t));
        }
        assert_eq!(
            parse_regression_flag("no_more_than_x_percent_regression"),
            None
        );
        assert_eq!(
            parse_regression_flag("no_more_than_-1_percent_regression"),
            None
        );
        assert_eq!(parse_regression_flag("delta_percent"), None);
    }

    #[test]
    fn turnover_keys_round_trip() {
        for side in [Side::Baseline, Side::Candidate] {
            for k in 0..5 {
                assert_eq!(parse_turnover_key(&turnover_key(side, k)), Some((side, k)));
            }
        }
        assert_eq!(
            turnover_key(Side::Candidate, 2),
            "candidate_turnover_repeat_2"
        );
        for bad in [
            "candidate_turnover_repeat_1",
            "candidate_turnover_repeat_02",
            "candidate_turnovers",
            "turnover",
        ] {
            assert_eq!(parse_turnover_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn metric_needs_exactly_one_consistent_flag() {
        let ok = serde_json::json!({"baseline": 1.0, "candidate": 1.0, "delta_percent": 0.0,
            "no_more_than_3_percent_regression": true});
        let m: MetricComparison = serde_json::from_value(ok.clone()).expect("valid");
        assert_eq!(m.threshold_percent, 3.0);
        let mut two = ok.clone();
        two["no_more_than_5_percent_regression"] = true.into();
        assert!(serde_json::from_value::<MetricComparison>(two).is_err());
        let mut clash = ok;
        clash["threshold_percent"] = 5.0.into();
        assert!(serde_json::from_value::<MetricComparison>(clash).is_err());
    }

    #[test]
    fn decision_text() {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schema": REPORT_SCHEMA, "baseline_image": "a", "candidate_image": "b", "cells": {},
            "performance_gate_passed": false, "strict_turnover_gate_passed": false,
            "qualification": "q", "promotion": "pending", "human_decision": "pending"
        }))
        .expect("minimal report");
        r.record_decision(Decision {
            action: DecisionAction::RetainBaseline,
            who: Some("ops".into()),
            when: None,
            note: Some("no-promotion".into()),
        });
        assert_eq!(r.human_decision, "retain-baseline; no-promotion");
        assert_eq!(r.to_value()["decision"]["action"], "retain-baseline");
    }
}
