//! A cell as the views show it: its metrics' rows (one decision each), its
//! per-turn slices and sessions, and its SLO attainment, read from the
//! report's `cells`.

use serde_json::Value;

use crate::artifact::{ServerTimingCheck, SloAttainment};
use crate::model::{RowsPair, SloComparison, parse_regression_flag};
use crate::policy::{DEFAULT_METRICS, infer_direction, split_quantile};
use crate::server_metrics::ServerMetrics;
use crate::stats::{Direction, Interval};

use super::json::{as_bool, as_finite, as_finite_floats, as_string, as_strings, as_u64, typed};
use super::natural_cmp;

pub struct CellView {
    pub name: String,
    pub baseline_requests: Option<u64>,
    pub candidate_requests: Option<u64>,
    pub baseline_eligible: Option<bool>,
    pub candidate_eligible: Option<bool>,
    pub median_prompt_tokens: Option<f64>,
    pub baseline_reasons: Vec<String>,
    pub candidate_reasons: Vec<String>,
    pub metrics: Vec<MetricView>,
    /// SLO attainment of both sides, when the cell has SLOs.
    pub slo: Option<SloComparison>,
    /// Every recorded request of each side, in request order, when kept.
    pub rows: Option<RowsPair>,
    pub baseline_server: Option<ServerTimingCheck>,
    pub candidate_server: Option<ServerTimingCheck>,
    /// Each side's metrics endpoints over the cell.
    pub baseline_metrics: Vec<ServerMetrics>,
    pub candidate_metrics: Vec<ServerMetrics>,
    /// Each side's requests by turn or prompt length (workload cells).
    pub baseline_slices: Vec<crate::artifact::Slice>,
    pub candidate_slices: Vec<crate::artifact::Slice>,
    /// Each side's conversation sessions.
    pub baseline_sessions: Option<crate::artifact::Sessions>,
    pub candidate_sessions: Option<crate::artifact::Sessions>,
    /// Each side's speculative decoding, as its server counted it.
    pub baseline_speculative: Option<crate::artifact::Speculative>,
    pub candidate_speculative: Option<crate::artifact::Speculative>,
    /// A capacity cell's comparison.
    pub capacity: Option<crate::model::CapacityComparison>,
}

impl CellView {
    /// One line per turn (or prompt-length bucket) with both sides' medians
    /// beside each other; empty for a cell of one kind of request.
    pub fn slice_lines(&self) -> Vec<String> {
        let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
        let change = |b: Option<f64>, c: Option<f64>| match (b, c) {
            (Some(b), Some(c)) if b > 0.0 => format!(" ({:+.1}%)", (c / b - 1.0) * 100.0),
            _ => String::new(),
        };
        let share = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{:.0}%", v * 100.0));
        let sessions = self.baseline_sessions.as_ref().map(|b| {
            let c = self.candidate_sessions.as_ref();
            let cf = |f: fn(&crate::artifact::Sessions) -> Option<f64>| c.and_then(f);
            format!(
                "sessions of {} turns: {}/{} complete baseline, {}/{} candidate; duration p50 {} → {} ms{}; TTFTs summed per session p50 {} → {} ms{}",
                b.turns,
                b.complete,
                b.sessions,
                c.map_or(0, |c| c.complete),
                c.map_or(0, |c| c.sessions),
                ms(b.duration_p50_ms),
                ms(cf(|c| c.duration_p50_ms)),
                change(b.duration_p50_ms, cf(|c| c.duration_p50_ms)),
                ms(b.ttft_sum_p50_ms),
                ms(cf(|c| c.ttft_sum_p50_ms)),
                change(b.ttft_sum_p50_ms, cf(|c| c.ttft_sum_p50_ms)),
            )
        });
        let slices = self.baseline_slices.iter().map(|b| {
                let c = self
                    .candidate_slices
                    .iter()
                    .find(|c| c.by == b.by && c.label == b.label);
                let cf = |f: fn(&crate::artifact::Slice) -> Option<f64>| c.and_then(f);
                format!(
                    "{} {}: {}/{} requests, prompt p50 {} tokens; TTFT p50 {} → {} ms{}; e2e p50 {} → {} ms{}; cached {} → {}",
                    if b.by == "turn" { "turn" } else { "prompt" },
                    b.label,
                    b.requests,
                    c.map_or(0, |c| c.requests),
                    ms(b.prompt_tokens_p50),
                    ms(b.ttft_p50_ms),
                    ms(cf(|c| c.ttft_p50_ms)),
                    change(b.ttft_p50_ms, cf(|c| c.ttft_p50_ms)),
                    ms(b.e2e_p50_ms),
                    ms(cf(|c| c.e2e_p50_ms)),
                    change(b.e2e_p50_ms, cf(|c| c.e2e_p50_ms)),
                    share(b.cached_share),
                    share(cf(|c| c.cached_share)),
                )
            });
        sessions.into_iter().chain(slices).collect()
    }

    /// A capacity cell in words: the pair (`capacity::words::pair`), then
    /// each side's search (`CapacityRun::line`); empty for other cells.
    pub fn capacity_lines(&self) -> Vec<String> {
        let Some(c) = &self.capacity else {
            return Vec::new();
        };
        let goodput = |g: Option<f64>| {
            g.map_or(String::new(), |g| {
                format!("; goodput {} req/s there", crate::capacity::run::shown(g))
            })
        };
        vec![
            crate::capacity::words::pair_of(c),
            format!(
                "baseline: {}{}",
                c.baseline.line(),
                goodput(c.baseline_goodput_rps)
            ),
            format!(
                "candidate: {}{}",
                c.candidate.line(),
                goodput(c.candidate_goodput_rps)
            ),
        ]
    }

    /// The cell's SLO attainment in words, one line per fact; empty without SLOs.
    pub fn slo_lines(&self) -> Vec<String> {
        let Some(slo) = &self.slo else {
            return Vec::new();
        };
        let side = |name: &str, a: &SloAttainment| {
            let rate = |v: Option<f64>, unit: &str| {
                v.map_or(String::new(), |v| format!(", {v:.2} {unit}"))
            };
            format!(
                "{name}: {}/{} met = {:.1}% [{:.1}%, {:.1}%]; goodput{}{} over {:.1} s",
                a.met,
                a.of,
                a.attainment * 100.0,
                a.interval[0] * 100.0,
                a.interval[1] * 100.0,
                rate(a.goodput_rps, "req/s"),
                rate(a.goodput_tok_s, "tok/s"),
                a.window_s
            )
        };
        let verdict = match &slo.evidence {
            Some(e) => {
                let more = e.requests_to_resolve.map_or(String::new(), |n| {
                    format!("; ~{n} requests/side would decide it")
                });
                format!(
                    "drop {:+.2} points, bounds [{:+.2}, {:+.2}] against a {}-point margin: {}{more}",
                    e.drop_points,
                    e.lower_bound_points,
                    e.upper_bound_points,
                    e.margin_points,
                    e.outcome.as_str()
                )
            }
            None => "no attainment evidence (a side has no requests)".to_string(),
        };
        vec![
            format!(
                "SLO ({}, from the {}{}): {verdict}",
                slo.targets.describe(),
                slo.source,
                if slo.gating {
                    ""
                } else {
                    "; reported, not gated: the policy's [[slo]] gates"
                }
            ),
            side("baseline", &slo.baseline),
            side("candidate", &slo.candidate),
        ]
    }

    /// The row headings: (interval, decision) for this cell's metrics; a
    /// rate's evidence bounds are the candidate's speed over the baseline's.
    pub fn decision_headings(&self, ci_head: &str) -> (String, &'static str) {
        let with_evidence = || self.metrics.iter().filter(|m| m.evidence.is_some());
        if with_evidence().next().is_some() {
            let rates = with_evidence().any(|m| m.direction == Some(Direction::HigherIsBetter));
            let head = if rates {
                "evidence bounds, worse-direction (rates: speed)"
            } else {
                "evidence bounds, worse-direction"
            };
            (head.to_string(), "decision")
        } else {
            (ci_head.to_string(), "verdict")
        }
    }
}

pub struct MetricView {
    pub name: String,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    pub delta_percent: Option<f64>,
    pub threshold_percent: Option<f64>,
    pub within_threshold: Option<bool>,
    pub direction: Option<Direction>,
    pub ci: Option<Interval>,
    pub verdict: Option<String>,
    pub baseline_n: Option<u64>,
    pub candidate_n: Option<u64>,
    pub requests_to_resolve: Option<u64>,
    /// Sample name and (baseline, candidate) per-request values.
    pub samples: Option<(String, Vec<f64>, Vec<f64>)>,
    /// The evidence gate's bounds and outcome for this metric, where the
    /// evidence decides.
    pub evidence: Option<crate::stats::Evidence>,
    /// The metric's evidence as the report records it, deciding or not:
    /// what the evidence section's line for it reads from.
    pub recorded_evidence: Option<crate::stats::Evidence>,
    /// Why the metric's evidence bounds inform no one, in the words of its
    /// gate part (`informative: false`): shown instead of the bounds.
    pub not_informative: Option<String>,
}

/// What one metric's row says, one statement per column: the interval
/// and the decision come from the same procedure (the evidence gate's
/// where the report has it, else the CI and its verdict), and the seed's
/// fixed-threshold flag is shown as the fact it is (a point change against
/// T), never as a second verdict.
pub struct DecisionCells {
    pub interval: String,
    pub decision: String,
    pub resolve: Option<u64>,
    pub seed_flag: String,
}

impl MetricView {
    pub fn decision_cells(&self) -> DecisionCells {
        let t = format!("{}%", crate::render::fmt_threshold(self.threshold_percent));
        let seed_flag = match (self.delta_percent, self.direction, self.within_threshold) {
            (Some(d), Some(dir), Some(within)) => {
                let w = dir.worse_change_percent(d);
                format!("{w:+.2}% {} {t}", if within { "≤" } else { ">" })
            }
            (_, _, Some(within)) => format!("{} {t}", if within { "within" } else { "beyond" }),
            _ => crate::render::DASH.to_string(),
        };
        match &self.evidence {
            Some(e) => DecisionCells {
                interval: match &self.not_informative {
                    Some(words) => words.clone(),
                    None => crate::render::estimate::bounds_cell(e, self.direction),
                },
                decision: e.outcome.as_str().to_string(),
                resolve: e.requests_to_resolve.map(|n| n as u64),
                seed_flag,
            },
            None => DecisionCells {
                interval: crate::render::fmt_ci(self.ci.as_ref()),
                decision: self
                    .verdict
                    .clone()
                    .unwrap_or_else(|| crate::render::DASH.to_string()),
                resolve: self.requests_to_resolve,
                seed_flag,
            },
        }
    }
}

fn metric_view(name: &str, m: &Value, samples: Option<&Value>) -> MetricView {
    let flag = m.as_object().and_then(|o| {
        o.iter()
            .find_map(|(k, v)| parse_regression_flag(k).map(|t| (t, v)))
    });
    let inferred = split_quantile(name);
    let direction = typed(m.get("direction"))
        .or_else(|| infer_direction(inferred.as_ref().map_or(name, |(s, _)| s.as_str())));
    let sample_key = as_string(m.get("sample")).or_else(|| inferred.map(|(s, _)| s));
    let evidence: Option<crate::stats::Evidence> = typed(m.get("evidence"));
    let samples = sample_key.and_then(|k| {
        let pair = samples?.get(&k)?;
        Some((
            k,
            as_finite_floats(pair.get("baseline"))?,
            as_finite_floats(pair.get("candidate"))?,
        ))
    });
    MetricView {
        name: name.to_string(),
        baseline: as_finite(m.get("baseline")),
        candidate: as_finite(m.get("candidate")),
        delta_percent: as_finite(m.get("delta_percent")),
        threshold_percent: flag
            .map(|(t, _)| t)
            .or_else(|| as_finite(m.get("threshold_percent"))),
        within_threshold: flag.and_then(|(_, v)| v.as_bool()),
        direction,
        ci: typed(m.get("ci_delta_percent")),
        verdict: as_string(m.get("verdict")),
        baseline_n: as_u64(m.get("baseline_n")),
        candidate_n: as_u64(m.get("candidate_n")),
        requests_to_resolve: as_u64(m.get("requests_to_resolve")),
        samples,
        recorded_evidence: evidence.clone(),
        evidence,
        not_informative: None,
    }
}

fn metric_rank(name: &str, policy_order: &[String]) -> (usize, usize) {
    if let Some(i) = policy_order.iter().position(|n| n == name) {
        return (0, i);
    }
    match DEFAULT_METRICS.iter().position(|n| *n == name) {
        Some(i) => (1, i),
        None => (2, 0),
    }
}

/// The report's cells in natural name order, each's metrics in the policy's.
pub(in crate::render) fn cell_views(root: &Value) -> Vec<CellView> {
    let policy_order: Vec<String> = root
        .get("policy")
        .and_then(|p| p.get("metrics"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|m| as_string(m.get("name"))).collect())
        .unwrap_or_default();
    let by_evidence = root
        .pointer("/statistics/gate_decides")
        .and_then(Value::as_str)
        == Some("evidence");
    let mut cells: Vec<CellView> = root
        .get("cells")
        .and_then(Value::as_object)
        .map(|cells| {
            cells
                .iter()
                .map(|(name, c)| cell_view(name, c, &policy_order, by_evidence))
                .collect()
        })
        .unwrap_or_default();
    cells.sort_by(|x, y| natural_cmp(&x.name, &y.name));
    let parts = root
        .pointer("/gates/performance_evidence/parts")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for part in parts {
        let Some(words) = not_informative(part) else {
            continue;
        };
        let subject = part.get("subject").and_then(Value::as_str).unwrap_or("");
        for c in &mut cells {
            let Some(metric) = subject
                .strip_prefix("cells.")
                .and_then(|s| s.strip_prefix(c.name.as_str()))
                .and_then(|s| s.strip_prefix(".metrics."))
            else {
                continue;
            };
            if let Some(m) = c.metrics.iter_mut().find(|m| m.name == metric) {
                m.not_informative = Some(words.clone());
            }
        }
    }
    cells
}

/// An evidence part's words for bounds that inform no one, when its
/// `informative` is false; a part without the words still gets some.
fn not_informative(part: &Value) -> Option<String> {
    if part.get("informative").and_then(Value::as_bool) != Some(false) {
        return None;
    }
    Some(
        as_string(part.get("not_informative"))
            .unwrap_or_else(|| "bounds not informative".to_string()),
    )
}

pub(super) fn cell_view(
    name: &str,
    c: &Value,
    policy_order: &[String],
    by_evidence: bool,
) -> CellView {
    let samples = c.get("samples").filter(|v| v.is_object());
    let mut metrics: Vec<MetricView> = c
        .get("metrics")
        .and_then(Value::as_object)
        .map(|ms| ms.iter().map(|(n, m)| metric_view(n, m, samples)).collect())
        .unwrap_or_default();
    // Stable: ties keep the JSON (alphabetical) order.
    metrics.sort_by_key(|m| metric_rank(&m.name, policy_order));
    // The evidence decides only where the report says so:
    // otherwise its bounds would be a second verdict.
    if !by_evidence {
        for m in &mut metrics {
            m.evidence = None;
        }
    }
    CellView {
        name: name.to_string(),
        baseline_requests: as_u64(c.get("baseline_requests")),
        candidate_requests: as_u64(c.get("candidate_requests")),
        baseline_eligible: as_bool(c.get("baseline_performance_eligible")),
        candidate_eligible: as_bool(c.get("candidate_performance_eligible")),
        median_prompt_tokens: as_finite(c.get("median_prompt_tokens")),
        baseline_reasons: as_strings(c.get("baseline_ineligible_reasons")),
        candidate_reasons: as_strings(c.get("candidate_ineligible_reasons")),
        metrics,
        slo: typed(c.get("slo")),
        capacity: typed(c.get("capacity")),
        rows: typed(c.get("request_rows")),
        baseline_server: typed(c.get("baseline_server_timings")),
        candidate_server: typed(c.get("candidate_server_timings")),
        baseline_metrics: typed(c.get("baseline_server_metrics")).unwrap_or_default(),
        candidate_metrics: typed(c.get("candidate_server_metrics")).unwrap_or_default(),
        baseline_slices: typed(c.get("baseline_slices")).unwrap_or_default(),
        candidate_slices: typed(c.get("candidate_slices")).unwrap_or_default(),
        baseline_sessions: typed(c.get("baseline_sessions")),
        candidate_sessions: typed(c.get("candidate_sessions")),
        baseline_speculative: typed(c.get("baseline_speculative")),
        candidate_speculative: typed(c.get("candidate_speculative")),
    }
}
