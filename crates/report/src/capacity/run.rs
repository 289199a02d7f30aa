//! One side's capacity search as a run records it: every level with its
//! segments and their judged evidence, how far the client's sends fell
//! behind at each, how the search stopped, and the estimate. Made from the
//! segments' counts alone, so a reader of the journal makes it again.

use serde::{Deserialize, Serialize};

use super::estimate::{CapacityEstimate, IntervalMethod, estimate};
use super::level::{LevelEvidence, Segment};
use super::search::{Ended, SearchRule, Tried};
use super::spec::{CapacitySpec, LoadAxis};

/// Error shared by every level decision of one side's search.
pub const ALPHA_SEARCH: f64 = 0.05;
/// Confidence of a side's capacity interval.
pub const CONFIDENCE: f64 = 0.95;
/// Least p99 lag behind schedule, ms, that names a level's client as behind.
pub const CLIENT_LAG_FLOOR_MS: f64 = 10.0;
/// Share of the mean gap between sends a level's p99 lag may reach before
/// its client is named as behind.
pub const CLIENT_LAG_SHARE_OF_GAP: f64 = 0.1;

/// How a search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// A level that held and one that did not, within the precision.
    Resolved,
    /// Even `low` did not hold.
    BelowRange,
    /// Even `high` held.
    AboveRange,
    /// The cell's `requests` could not pay for the next segment.
    BudgetSpent,
    /// Neither: the records end before the search did (a run stopped early).
    Unfinished,
}

impl From<Ended> for Stopped {
    fn from(e: Ended) -> Stopped {
        match e {
            Ended::Resolved => Stopped::Resolved,
            Ended::BelowRange => Stopped::BelowRange,
            Ended::AboveRange => Stopped::AboveRange,
        }
    }
}

impl Stopped {
    /// The search's own end; None when the budget stopped it first.
    pub fn ended(self) -> Option<Ended> {
        match self {
            Stopped::Resolved => Some(Ended::Resolved),
            Stopped::BelowRange => Some(Ended::BelowRange),
            Stopped::AboveRange => Some(Ended::AboveRange),
            Stopped::BudgetSpent | Stopped::Unfinished => None,
        }
    }
}

/// One segment as measured: its counts, and how far the client's sends of
/// its measured requests fell behind their schedule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SegmentRun {
    #[serde(flatten)]
    pub counts: Segment,
    /// p99 over the measured requests of the time each waited in the client
    /// past its scheduled send, ms (0 in closed loop by construction).
    pub client_lag_p99_ms: f64,
}

/// One level tried, its segments in the order run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelRun {
    pub load: f64,
    pub segments: Vec<SegmentRun>,
    /// The level's pooled attainment, bounds and decision.
    pub evidence: LevelEvidence,
    /// A segment's p99 client lag was past the larger of
    /// [`CLIENT_LAG_FLOOR_MS`] and [`CLIENT_LAG_SHARE_OF_GAP`] of the mean gap
    /// between sends: the client did not send at the planned rate, and the
    /// requests it met late count against this level though the delay was
    /// the client's.
    pub client_behind: bool,
}

/// One side's capacity search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityRun {
    pub spec: CapacitySpec,
    /// The targets each measured request was held to (`TTFT ≤ 2000 ms`).
    pub slo: String,
    pub min_attainment: f64,
    pub alpha_search: f64,
    pub levels: Vec<LevelRun>,
    pub stopped: Stopped,
    /// The highest finished level that held and the lowest that did not
    /// (`SearchRule::bracket`): the search's resolution, not an interval.
    pub bracket: [Option<f64>; 2],
    /// The capacity and its interval; None when the budget stopped the
    /// search before it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<CapacityEstimate>,
    /// Measured and warm-up requests over every level.
    pub requests: u64,
    pub warmup_requests: u64,
}

/// The rule a cell's search follows.
pub fn rule_of(spec: &CapacitySpec, min_attainment: f64) -> SearchRule {
    SearchRule {
        spec: spec.clone(),
        min_attainment,
        alpha_search: ALPHA_SEARCH,
    }
}

/// Consecutive segments at one load as the levels the search tried.
pub fn tried_of(segments: &[(f64, SegmentRun)]) -> Vec<(Tried, Vec<SegmentRun>)> {
    let mut out: Vec<(Tried, Vec<SegmentRun>)> = Vec::new();
    for &(load, s) in segments {
        match out.last_mut() {
            Some((t, runs)) if t.load == load => {
                t.segments.push(s.counts);
                runs.push(s);
            }
            _ => out.push((
                Tried {
                    load,
                    segments: vec![s.counts],
                },
                vec![s],
            )),
        }
    }
    out
}

/// The run's record of a search over `segments` (load, segment, in the
/// order run) that stopped as `stopped`, its requests held to `slo` (as
/// described) at `min_attainment`.
pub fn assemble(
    spec: &CapacitySpec,
    slo: String,
    min_attainment: f64,
    segments: &[(f64, SegmentRun)],
    stopped: Stopped,
) -> CapacityRun {
    let rule = rule_of(spec, min_attainment);
    let levels = tried_of(segments);
    let tried: Vec<Tried> = levels.iter().map(|(t, _)| t.clone()).collect();
    let (held, not_held) = rule.bracket(&tried);
    let estimate = stopped
        .ended()
        .map(|e| estimate(&rule, &tried, e, CONFIDENCE).0);
    let all = || segments.iter().map(|(_, s)| s.counts);
    CapacityRun {
        spec: spec.clone(),
        slo: slo.clone(),
        min_attainment: rule.min_attainment,
        alpha_search: rule.alpha_search,
        levels: levels
            .into_iter()
            .enumerate()
            .map(|(i, (t, runs))| LevelRun {
                load: t.load,
                evidence: rule.judge(&tried, i),
                client_behind: runs
                    .iter()
                    .any(|s| s.client_lag_p99_ms > lag_limit_ms(spec.by, t.load)),
                segments: runs,
            })
            .collect(),
        stopped,
        bracket: [held, not_held],
        estimate,
        requests: all().map(|s| s.of).sum(),
        warmup_requests: all().map(|s| s.warmup).sum(),
    }
}

/// `v` to three significant figures (two decimals at most), trailing zeros dropped.
pub fn shown(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The p99 lag past which a level's client counts as behind, ms.
pub fn lag_limit_ms(by: LoadAxis, load: f64) -> f64 {
    match by {
        LoadAxis::Rate => CLIENT_LAG_FLOOR_MS.max(CLIENT_LAG_SHARE_OF_GAP * 1000.0 / load),
        LoadAxis::Concurrency => CLIENT_LAG_FLOOR_MS,
    }
}

impl CapacityRun {
    /// Requests a second that met the SLO at the search's capacity, by
    /// rate: the highest level that held (every level below it holding)
    /// times its attainment. None by concurrency (a level is not a rate) or
    /// when no level held.
    pub fn goodput_rps(&self) -> Option<f64> {
        let held = self.bracket[0].filter(|_| self.spec.by == LoadAxis::Rate)?;
        let level = self.levels.iter().find(|l| l.load == held)?;
        Some(held * level.evidence.attainment)
    }

    /// One line for a terminal: `holds 2.41 req/s (2.1–2.8, 95 %, probit
    /// fit) at TTFT ≤ 2000 ms, 90 %; bracket 2.3–2.5 req/s; 412 requests
    /// (+58 warm-up)`.
    pub fn line(&self) -> String {
        let unit = self.spec.by.unit();
        let at = format!("at {}, {:.0} %", self.slo, self.min_attainment * 100.0);
        let head = match (self.stopped, &self.estimate) {
            (Stopped::BelowRange, _) => {
                format!(
                    "holds less than {} {unit} (the lowest level did not hold)",
                    shown(self.spec.low)
                )
            }
            (Stopped::AboveRange, _) => {
                format!(
                    "holds at least {} {unit} (the highest level held)",
                    shown(self.spec.high)
                )
            }
            (Stopped::BudgetSpent, _) => "search stopped: the cell's requests are spent".into(),
            (Stopped::Unfinished, _) => "search unfinished: its records end before it did".into(),
            (Stopped::Resolved, Some(e)) => match (e.fitted, e.interval, e.method) {
                (Some(f), Some([lo, hi]), m) => format!(
                    "holds {} {unit} ({}–{}, {:.0} %, {})",
                    shown(f),
                    shown(lo),
                    shown(hi),
                    e.confidence * 100.0,
                    match m {
                        Some(IntervalMethod::DecidedBracket) => "decided bracket",
                        _ => "probit fit",
                    }
                ),
                (None, Some([lo, hi]), _) => format!(
                    "holds {}–{} {unit} ({:.0} %, decided bracket; no curve fitted)",
                    shown(lo),
                    shown(hi),
                    e.confidence * 100.0
                ),
                (f, None, _) => match f.or(e.held) {
                    Some(v) => format!("holds {} {unit} (no interval)", shown(v)),
                    None => "no capacity found".into(),
                },
            },
            (Stopped::Resolved, None) => "no capacity found".into(),
        };
        let bracket = match self.bracket {
            [Some(lo), Some(hi)] => format!("bracket {}–{} {unit}", shown(lo), shown(hi)),
            [Some(lo), None] => format!("held up to {} {unit}", shown(lo)),
            [None, Some(hi)] => format!("none held, lowest tried {} {unit}", shown(hi)),
            [None, None] => "no level finished".into(),
        };
        let behind: Vec<String> = self
            .levels
            .iter()
            .filter(|l| l.client_behind)
            .map(|l| shown(l.load))
            .collect();
        let behind = if behind.is_empty() {
            String::new()
        } else {
            format!(
                "; the client fell behind its schedule at {} {unit}",
                behind.join(", ")
            )
        };
        format!(
            "{head} {at}; {bracket}; {} requests (+{} warm-up){behind}",
            self.requests, self.warmup_requests
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(met: u64, of: u64, lag: f64) -> SegmentRun {
        SegmentRun {
            counts: Segment { met, of, warmup: 4 },
            client_lag_p99_ms: lag,
        }
    }

    #[test]
    fn consecutive_segments_at_one_load_are_one_level_and_the_line_names_the_lagging_one() {
        let spec: CapacitySpec =
            toml::from_str("by = \"rate\"\nlow = 1\nhigh = 16\nprecision_percent = 10\n").unwrap();
        let segs = vec![
            (1.0, seg(16, 16, 0.5)),
            (1.0, seg(16, 16, 0.5)),
            (16.0, seg(0, 16, 500.0)),
            (16.0, seg(0, 16, 1.0)),
        ];
        let run = assemble(
            &spec,
            "TTFT ≤ 2000 ms".into(),
            0.9,
            &segs,
            Stopped::BudgetSpent,
        );
        assert_eq!(run.levels.len(), 2);
        assert_eq!(run.levels[1].segments.len(), 2);
        assert!(!run.levels[0].client_behind && run.levels[1].client_behind);
        assert_eq!((run.requests, run.warmup_requests), (64, 16));
        assert_eq!(run.estimate, None);
        let line = run.line();
        assert!(line.contains("requests are spent"), "{line}");
        assert!(line.contains("64 requests (+16 warm-up)"), "{line}");
        assert!(line.contains("behind its schedule at 16 req/s"), "{line}");
        assert!(line.contains("at TTFT ≤ 2000 ms, 90 %"), "{line}");
        // No level finished holding: no goodput. Had 1 req/s held with
        // every request met, 1 req/s; none by concurrency.
        assert_eq!(run.goodput_rps(), None);
        let mut held = run.clone();
        held.bracket[0] = Some(1.0);
        assert_eq!(held.goodput_rps(), Some(1.0));
        let mut by_c = held.clone();
        by_c.spec.by = LoadAxis::Concurrency;
        assert_eq!(by_c.goodput_rps(), None);
    }
}
