//! The turnover runs as the seed keeps them, spread over `<side>_turnover`,
//! `<side>_turnover_repeat`, `<side>_turnover_repeat_2`, … (written by
//! hand), and their failure rates compared by workload.

use std::collections::BTreeMap;

use serde::de;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::artifact::TurnoverFailure;
use crate::stats::{ExactTest, Interval};

use super::{Side, TurnoverGateMode};

/// One turnover run in the seed's shape, plus optional additions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverRunReport {
    pub requests: usize,
    pub exact_output_passed: usize,
    pub failed: usize,
    pub responses_received: usize,
    pub performance_eligible: bool,
    pub failures: Vec<TurnoverFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Answers that carried another request's canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contaminated: Option<usize>,
    /// A schema's first request's TTFT and the later ones' median (the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_ttft_p50_ms: Option<f64>,
}

/// The key of a side's `ordinal`-th turnover run: `candidate_turnover`,
/// `candidate_turnover_repeat`, `candidate_turnover_repeat_2`, ….
pub fn turnover_key(side: Side, ordinal: usize) -> String {
    match ordinal {
        0 => format!("{side}_turnover"),
        1 => format!("{side}_turnover_repeat"),
        k => format!("{side}_turnover_repeat_{k}"),
    }
}

/// Inverse of [`turnover_key`].
pub fn parse_turnover_key(key: &str) -> Option<(Side, usize)> {
    let (side, rest) = if let Some(r) = key.strip_prefix("baseline_turnover") {
        (Side::Baseline, r)
    } else {
        (Side::Candidate, key.strip_prefix("candidate_turnover")?)
    };
    let ordinal = match rest {
        "" => 0,
        "_repeat" => 1,
        r => {
            let k: usize = r.strip_prefix("_repeat_")?.parse().ok()?;
            // `_repeat_1` and `_repeat_01` would alias other spellings.
            if k < 2 || r != format!("_repeat_{k}") {
                return None;
            }
            k
        }
    };
    Some((side, ordinal))
}

/// All turnover runs of both sides, in ordinal order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnoverRuns {
    pub baseline: Vec<TurnoverRunReport>,
    pub candidate: Vec<TurnoverRunReport>,
}

impl TurnoverRuns {
    pub fn side(&self, side: Side) -> &[TurnoverRunReport] {
        match side {
            Side::Baseline => &self.baseline,
            Side::Candidate => &self.candidate,
        }
    }
}

impl Serialize for TurnoverRuns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for side in [Side::Baseline, Side::Candidate] {
            for (i, run) in self.side(side).iter().enumerate() {
                m.serialize_entry(&turnover_key(side, i), run)?;
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for TurnoverRuns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Receives every key the Report does not name; keeps the turnover ones
        // and ignores the rest (fields added by later versions).
        let all = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
        let mut found: BTreeMap<(Side, usize), TurnoverRunReport> = BTreeMap::new();
        for (k, v) in all {
            if let Some(pos) = parse_turnover_key(&k) {
                let run = TurnoverRunReport::deserialize(v)
                    .map_err(|e| de::Error::custom(format!("`{k}`: {e}")))?;
                found.insert(pos, run);
            }
        }
        let mut out = TurnoverRuns::default();
        for ((side, ordinal), run) in found {
            let list = match side {
                Side::Baseline => &mut out.baseline,
                Side::Candidate => &mut out.candidate,
            };
            if ordinal != list.len() {
                return Err(de::Error::custom(format!(
                    "`{}` is missing before `{}`",
                    turnover_key(side, list.len()),
                    turnover_key(side, ordinal)
                )));
            }
            list.push(run);
        }
        Ok(out)
    }
}

/// Failure counts of one or more turnover runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureRate {
    /// Report keys of the runs counted (more than one when pooled).
    pub runs: Vec<String>,
    pub requests: u64,
    pub failed: u64,
    /// failed / requests; None when there were no requests.
    pub failure_rate: Option<f64>,
    /// Clopper–Pearson interval of the failure rate.
    pub failure_rate_ci: Option<Interval>,
    /// Answers carrying another request's canary; None when not counted.
    pub contaminated: Option<u64>,
}

/// A candidate run (or the pooled candidate runs) against the pooled baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateTurnover {
    #[serde(flatten)]
    pub counts: FailureRate,
    /// Fisher's exact test of candidate vs baseline failure proportions.
    pub vs_baseline: Option<ExactTest>,
    /// Not significantly worse than the baseline (p_candidate_worse ≥ alpha)
    /// and zero contamination. None when there is no baseline to compare with.
    pub non_inferior: Option<bool>,
    /// One-sided upper bound (at 1 − alpha) of the failure-rate difference
    /// candidate − baseline (Newcombe), when the policy sets a margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference_upper_bound: Option<f64>,
}

/// Turnover runs that share a name (one workload), compared side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverGroup {
    pub name: String,
    /// The baseline's runs of this name, pooled.
    pub baseline: Option<FailureRate>,
    pub candidate_runs: Vec<CandidateTurnover>,
    /// The candidate's runs of this name, pooled.
    pub candidate_pooled: Option<CandidateTurnover>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverComparison {
    pub alpha: f64,
    pub confidence: f64,
    /// Non-inferiority margin on the failure-rate difference; absent in
    /// reports made before margins (their rule was Fisher p ≥ alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    pub groups: Vec<TurnoverGroup>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnoverGateResult {
    pub mode: TurnoverGateMode,
    /// False when the gate did not run (`not_run`): nothing passed.
    pub passed: bool,
    /// Present when the turnover gates did not run: the candidate's run
    /// skipped its turnover workloads, as the plan (or `run
    /// --skip-turnover`) asked. The qualification then says what was not
    /// checked and does not qualify (see `gate::with_turnover_not_run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<crate::artifact::TurnoverSkip>,
}
