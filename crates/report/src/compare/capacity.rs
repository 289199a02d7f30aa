//! A capacity cell of both runs: each side's search as its run recorded
//! it, the candidate's capacity over the baseline's with an interval at this
//! pair's share of the gate's error, and the tri-state gate on it
//! (`capacity::gate`).

use crate::artifact::CellResult;
use crate::capacity::run::shown;
use crate::capacity::{
    self, CapacityEstimate, CapacityRatio, CapacityRun, LoadAxis, LogCapacity, SearchRule, Tried,
};
use crate::model::{CapacityComparison, EvidencePart, GatePart, Side};
use crate::stats::GateOutcome;

/// The levels a run records, as the search tried them.
fn tried(run: &CapacityRun) -> Vec<Tried> {
    run.levels
        .iter()
        .map(|l| Tried {
            load: l.load,
            segments: l.segments.iter().map(|s| s.counts).collect(),
        })
        .collect()
}

/// A side's estimate with its interval at `confidence`, and its log
/// capacity for the ratio; None when its search did not end.
fn side_estimate(
    run: &CapacityRun,
    confidence: f64,
) -> Option<(CapacityEstimate, Option<LogCapacity>)> {
    let ended = run.stopped.ended()?;
    let rule = SearchRule {
        spec: run.spec.clone(),
        min_attainment: run.min_attainment,
        alpha_search: run.alpha_search,
    };
    Some(capacity::estimate(&rule, &tried(run), ended, confidence))
}

/// The cell's comparison, its evidence part and its point-gate part. `alpha`
/// is this pair's one-sided error at each end: each side's interval is
/// taken at `1 − α` (so two bounded sides give the ratio `1 − 2α`), the
/// ratio's at `1 − 2α`.
pub(super) fn compare_capacity(
    bc: &CellResult,
    cc: &CellResult,
    alpha: f64,
    margin_percent: f64,
) -> (Option<CapacityComparison>, EvidencePart, GatePart) {
    let subject = format!("cells.{}.capacity", bc.name);
    let part = |outcome: GateOutcome, reason: String| {
        (
            EvidencePart::new(subject.clone(), outcome, reason.clone()),
            GatePart {
                subject: subject.clone(),
                passed: outcome == GateOutcome::Pass,
                reason,
            },
        )
    };
    let (b, c) = match (&bc.capacity, &cc.capacity) {
        (Some(b), Some(c)) => (b, c),
        _ => {
            let missing = if bc.capacity.is_none() {
                Side::Baseline
            } else {
                Side::Candidate
            };
            let (e, g) = part(
                GateOutcome::Inconclusive,
                format!("the {missing} run holds no capacity search for this cell"),
            );
            return (None, e, g);
        }
    };
    let floor = 1.0 - margin_percent / 100.0;
    let confidence = 1.0 - 2.0 * alpha;
    let (ratio, outcome, reason, to_resolve) = match (
        side_estimate(b, 1.0 - alpha),
        side_estimate(c, 1.0 - alpha),
    ) {
        (Some(eb), Some(ec)) => {
            let r = capacity::ratio((&eb.0, eb.1), (&ec.0, ec.1), confidence);
            let outcome = capacity::gate(&r, margin_percent);
            let curves = eb.1.is_some() && ec.1.is_some();
            let (reason, n) = reason(&r, outcome, floor, (&eb.0, &ec.0), (b, c), curves);
            (r, outcome, reason, n)
        }
        (eb, _) => {
            let (side, run) = if eb.is_none() {
                (Side::Baseline, b)
            } else {
                (Side::Candidate, c)
            };
            let r = CapacityRatio {
                ratio: c.bracket[0].zip(b.bracket[0]).map(|(c, b)| c / b),
                interval: None,
                confidence,
            };
            let why = format!(
                "the {side}'s search did not end ({}): no capacity interval; requests enough for both searches to end (the cell's `requests`) would decide it",
                serde_json::to_value(run.stopped)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            );
            (r, GateOutcome::Inconclusive, why, None)
        }
    };
    let (mut e, g) = part(outcome, reason);
    e.requests_per_side = Some(b.requests.min(c.requests) as usize);
    e.requests_to_resolve = to_resolve;
    let cmp = CapacityComparison {
        baseline: b.clone(),
        candidate: c.clone(),
        ratio,
        margin_percent,
        floor,
        outcome,
        reason: e.reason.clone(),
        baseline_goodput_rps: b.goodput_rps(),
        candidate_goodput_rps: c.goodput_rps(),
    };
    (Some(cmp), e, g)
}

/// Why the ratio decided what it did, and for an undecided interval what
/// would decide it: from two fitted curves, the measured requests per side
/// that would narrow it past the floor (a curve's interval narrows as one
/// over the square root of the requests); from brackets of decided levels,
/// levels closer together (more requests do not narrow a bracket).
fn reason(
    r: &CapacityRatio,
    outcome: GateOutcome,
    floor: f64,
    (eb, ec): (&CapacityEstimate, &CapacityEstimate),
    (b, c): (&CapacityRun, &CapacityRun),
    curves: bool,
) -> (String, Option<usize>) {
    let Some([lo, hi]) = r.interval else {
        let none: Vec<&str> = [(eb, "baseline"), (ec, "candidate")]
            .iter()
            .filter(|(e, _)| e.interval.is_none())
            .map(|(_, s)| *s)
            .collect();
        return (
            format!(
                "no interval for the ratio: the {} has no capacity interval (no curve fitted and no level decided on each side of its capacity); more segments per level near the edge (`max_segments`, `segment_requests`) would give one",
                none.join(" and the ")
            ),
            None,
        );
    };
    let interval = format!("{}×–{}×", shown(lo), shown(hi));
    let floor_s = format!("{}×", shown(floor));
    match outcome {
        GateOutcome::Pass => (
            format!("the whole interval {interval} is at or above the floor {floor_s}"),
            None,
        ),
        GateOutcome::Fail => (
            format!("the whole interval {interval} is below the floor {floor_s}"),
            None,
        ),
        GateOutcome::Inconclusive if !curves => {
            // Whole levels one apart cannot be split: only a fitted curve
            // reads between them, and it needs levels neither all met nor
            // all missed, which more segments a level give.
            let would = match b.spec.by {
                LoadAxis::Rate => "a finer `precision_percent` would",
                LoadAxis::Concurrency => {
                    "whole concurrency levels cannot be split, so more segments a level near the edge (`max_segments`, `segment_requests`), for a curve to be fitted, would"
                }
            };
            (
                format!(
                    "the interval {interval} holds the floor {floor_s}; it rests on a side's levels decided to hold and not to, which more requests do not narrow: {would}"
                ),
                None,
            )
        }
        GateOutcome::Inconclusive => {
            let (l, h) = (lo.ln(), hi.ln());
            let half = (h - l) / 2.0;
            let off = ((l + h) / 2.0 - floor.ln()).abs();
            let now = b.requests.min(c.requests) as f64;
            let n = (off > 1e-9 && half.is_finite())
                .then(|| (now * (half / off).powi(2)).ceil())
                .filter(|n| n.is_finite() && *n < 1e12)
                .map(|n| n as usize);
            let more = match n {
                Some(n) => format!(
                    "; about {n} measured requests per side near the edge would narrow it past the floor"
                ),
                None => "; it is centred on the floor: no number of requests is sure to decide it"
                    .into(),
            };
            (
                format!("the interval {interval} holds the floor {floor_s}{more}"),
                n,
            )
        }
    }
}
