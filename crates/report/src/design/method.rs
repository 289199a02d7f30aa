//! The method a report's numbers are computed with: how the bootstrap
//! pairs an interleaved design's requests, how a paired design combines its
//! blocks, what an adaptive run plans its information from, and the scale
//! of the bounds. Not a user's choice: `compare` computes with
//! [`Method::default`], records it in `statistics.design` and
//! `statistics.family_wise`, and `verify` reads it back as a whole.

use serde_json::Value;

use crate::artifact::Schedule;
use crate::checker::{Checker, show};
use crate::model::Design;
use crate::stats::evidence::{BlockMean, BoundScale, DesignSpread, Resampling};

/// Why a one-pass design needs the drift floor.
pub const SINGLE_PASS_DRIFT: &str = "one pass per side, run at different times: nothing in the data measures the drift between them";

/// How a comparison computes its evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    /// Interleaved: resample request k of a block on both sides together
    /// (`Resampling::PairedRequests`) where every request has its value;
    /// false: blocks only.
    pub pair_requests: bool,
    /// Paired designs: how the blocks' log ratios combine.
    pub block_mean: BlockMean,
    /// What an adaptive run's design plans its information from.
    pub design_spread: DesignSpread,
    /// The scale of the evidence bounds (log: a ratio's bounds never cross
    /// −100 %).
    pub bound_scale: BoundScale,
}

impl Default for Method {
    /// The method `compare` computes with.
    fn default() -> Self {
        Method {
            pair_requests: true,
            block_mean: BlockMean::Trimmed,
            design_spread: DesignSpread::Bounds,
            bound_scale: BoundScale::Log,
        }
    }
}

impl Method {
    /// The `statistics.design` block of a comparison of `schedule`
    /// resampled by `resampling`: interleaved designs pair requests within
    /// blocks where the method says so (and fall back to blocks alone per
    /// metric where a request has no value on a side).
    pub fn design(&self, schedule: Schedule, resampling: Resampling) -> Design {
        let paired = resampling == Resampling::Paired;
        let pairs_requests = paired && self.pair_requests;
        let block_mean = paired.then_some(self.block_mean);
        let mut method = if pairs_requests {
            Resampling::PairedRequests.describe().to_string()
                + "; blocks apart where a request has no value on a side"
        } else {
            resampling.describe().to_string()
        };
        if let Some(m) = block_mean.filter(|m| *m != BlockMean::Mean) {
            method = format!("{method}; the statistic is {}", m.describe());
        }
        Design {
            schedule: schedule.as_str().to_string(),
            resampling,
            resampling_method: method,
            drift_floor_reason: (schedule == Schedule::Single)
                .then(|| SINGLE_PASS_DRIFT.to_string()),
            pairs_requests: pairs_requests.then_some(true),
            block_mean,
            design_spread: Some(self.design_spread),
        }
    }

    /// The method a report's `statistics` block records (`design` and
    /// `family_wise.bound_scale`); None, with each disagreement in `ck`,
    /// when it does not record one. A paired design records its block
    /// mean; other designs do not use one.
    pub fn read(ck: &mut Checker, statistics: &Value) -> Option<Method> {
        let d = statistics.get("design");
        let paired = d.and_then(|d| d.get("resampling")) == Some(&Value::from("paired"));
        let pair_requests = match d.and_then(|d| d.get("pairs_requests")) {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(v) => {
                ck.push(
                    "statistics.design.pairs_requests",
                    show(Some(v)),
                    "true, or absent: blocks only",
                );
                return None;
            }
        };
        let block_mean = if paired {
            field(
                ck,
                "statistics.design.block_mean",
                d,
                "block_mean",
                "\"trimmed\" or \"mean\"",
            )
        } else {
            Some(Method::default().block_mean)
        };
        let design_spread = field(
            ck,
            "statistics.design.design_spread",
            d,
            "design_spread",
            "\"bounds\" or \"standard_error\"",
        );
        let bound_scale = field(
            ck,
            "statistics.family_wise.bound_scale",
            statistics.get("family_wise"),
            "bound_scale",
            "\"log\" or \"percent\"",
        );
        Some(Method {
            pair_requests,
            block_mean: block_mean?,
            design_spread: design_spread?,
            bound_scale: bound_scale?,
        })
    }
}

/// `block[key]` as a `T`; None, and a disagreement at `path`, when it is not one.
fn field<T: serde::de::DeserializeOwned>(
    ck: &mut Checker,
    path: &str,
    block: Option<&Value>,
    key: &str,
    expected: &str,
) -> Option<T> {
    let v = block.and_then(|b| b.get(key));
    let parsed = v.and_then(|v| serde_json::from_value(v.clone()).ok());
    if parsed.is_none() {
        ck.wrong(path, v, expected);
    }
    parsed
}
