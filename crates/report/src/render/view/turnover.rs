//! The turnover runs as the views show them: each run's counts and
//! failures, and the table's rows (each run, each side pooled, the exact
//! test against the baseline).

use serde_json::Value;

use crate::model::{FailureRate, Side, parse_turnover_key};
use crate::stats::{self, Interval};

use super::View;
use super::json::{as_bool, as_finite, as_string, as_strings, as_u64};

pub struct RunView {
    pub key: String,
    pub side: Side,
    pub requests: Option<u64>,
    pub exact_output_passed: Option<u64>,
    pub failed: Option<u64>,
    pub responses_received: Option<u64>,
    pub contaminated: Option<u64>,
    pub failures: Vec<FailureView>,
    /// A structured-output or tool workload: its first request's TTFT, and
    /// the later ones' median.
    pub first_ttft_ms: Option<f64>,
    pub later_ttft_p50_ms: Option<f64>,
}

pub struct FailureView {
    pub request_index: Option<u64>,
    pub failure_class: Option<String>,
    pub words: Option<u64>,
    pub finish_reasons: Vec<String>,
    pub canary_passed: Option<bool>,
}

/// The report's turnover run keys (`baseline_turnover_run_1`, ...) in side
/// and index order.
pub(in crate::render) fn turnover_entries(root: &Value) -> Vec<TurnoverEntry<'_>> {
    let mut keyed: Vec<TurnoverEntry<'_>> = root
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| parse_turnover_key(k).map(|p| (p, k.as_str(), v)))
                .collect()
        })
        .unwrap_or_default();
    keyed.sort_by_key(|(p, _, _)| *p);
    keyed
}

pub(super) fn run_view(((side, _), key, r): &TurnoverEntry<'_>) -> RunView {
    RunView {
        key: key.to_string(),
        side: *side,
        requests: as_u64(r.get("requests")),
        exact_output_passed: as_u64(r.get("exact_output_passed")),
        failed: as_u64(r.get("failed")),
        responses_received: as_u64(r.get("responses_received")),
        contaminated: as_u64(r.get("contaminated")),
        first_ttft_ms: as_finite(r.get("first_ttft_ms")),
        later_ttft_p50_ms: as_finite(r.get("later_ttft_p50_ms")),
        failures: r
            .get("failures")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|x| FailureView {
                        request_index: as_u64(x.get("request_index")),
                        failure_class: as_string(x.get("failure_class")),
                        words: as_u64(x.get("words")),
                        finish_reasons: as_strings(x.get("finish_reasons")),
                        canary_passed: as_bool(x.get("canary_passed")),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A report's turnover runs: (side, index) from the key, the key, the run.
pub(in crate::render) type TurnoverEntry<'a> = ((Side, usize), &'a str, &'a Value);

/// One row of the turnover table: a run, or a side's runs pooled.
pub struct TurnoverRow {
    pub label: String,
    pub side: Side,
    pub pooled: bool,
    pub requests: Option<u64>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub received: Option<u64>,
    pub contaminated: Option<u64>,
    pub rate: Option<f64>,
    pub rate_ci: Option<Interval>,
    pub p_candidate_worse: Option<f64>,
    pub p_candidate_better: Option<f64>,
    pub p_two_sided: Option<f64>,
    pub non_inferior: Option<bool>,
}

impl View {
    fn run(&self, key: &str) -> Option<&RunView> {
        self.runs.iter().find(|r| r.key == key)
    }

    fn row_from_rate(
        &self,
        label: String,
        side: Side,
        pooled: bool,
        r: &FailureRate,
    ) -> TurnoverRow {
        let run = (!pooled)
            .then(|| r.runs.first().and_then(|k| self.run(k)))
            .flatten();
        TurnoverRow {
            label,
            side,
            pooled,
            requests: Some(r.requests),
            passed: run
                .and_then(|x| x.exact_output_passed)
                .or(r.requests.checked_sub(r.failed)),
            failed: Some(r.failed),
            received: run.and_then(|x| x.responses_received),
            contaminated: r.contaminated,
            rate: r.failure_rate,
            rate_ci: r.failure_rate_ci,
            p_candidate_worse: None,
            p_candidate_better: None,
            p_two_sided: None,
            non_inferior: None,
        }
    }

    /// Rows per workload: each baseline run, the baseline pooled (when more
    /// than one), each candidate run with its exact test against the pooled
    /// baseline, the candidate pooled (when more than one).
    pub fn turnover_rows(&self) -> Vec<TurnoverRow> {
        let conf = self.turnover.confidence;
        let mut rows = Vec::new();
        let many_groups = self.turnover.groups.len() > 1;
        for g in &self.turnover.groups {
            let suffix = if many_groups {
                format!(" ({})", g.name)
            } else {
                String::new()
            };
            if let Some(base) = &g.baseline {
                for key in &base.runs {
                    let Some(run) = self.run(key) else { continue };
                    let (Some(n), Some(f)) = (run.requests, run.failed) else {
                        continue;
                    };
                    let single = FailureRate {
                        runs: vec![key.clone()],
                        requests: n,
                        failed: f,
                        failure_rate: (n > 0).then(|| f as f64 / n as f64),
                        failure_rate_ci: (n > 0).then(|| stats::clopper_pearson(f, n, conf)),
                        contaminated: run.contaminated,
                    };
                    rows.push(self.row_from_rate(key.clone(), Side::Baseline, false, &single));
                }
                if base.runs.len() > 1 {
                    rows.push(self.row_from_rate(
                        format!("baseline pooled{suffix}"),
                        Side::Baseline,
                        true,
                        base,
                    ));
                }
            }
            let cands = g
                .candidate_runs
                .iter()
                .map(|c| (c.counts.runs.join("+"), false, c))
                .chain(
                    g.candidate_pooled
                        .iter()
                        .filter(|_| g.candidate_runs.len() > 1)
                        .map(|c| (format!("candidate pooled{suffix}"), true, c)),
                );
            for (label, pooled, c) in cands {
                let mut row = self.row_from_rate(label, Side::Candidate, pooled, &c.counts);
                row.p_candidate_worse = c.vs_baseline.map(|t| t.p_candidate_worse);
                row.p_candidate_better = c.vs_baseline.map(|t| t.p_candidate_better);
                row.p_two_sided = c.vs_baseline.map(|t| t.p_two_sided);
                row.non_inferior = c.non_inferior;
                rows.push(row);
            }
        }
        rows
    }

    /// What a run's failures and, for a schema's workload, its first
    /// request say: one line each.
    pub fn run_lines(run: &RunView) -> Vec<String> {
        let mut out = Self::failure_summary(run);
        if let Some(first) = run.first_ttft_ms {
            let later = run
                .later_ttft_p50_ms
                .map_or("—".to_string(), |l| format!("{l:.1} ms"));
            out.push(format!(
                "first request on its schema (where a grammar is compiled): TTFT {first:.1} ms; later requests p50 {later}"
            ));
        }
        out
    }

    /// A run's failures, one line per failure class:
    /// `controlled_output_failed ×2: #2 (33 words, stop), #35 (31 words, stop)`.
    pub fn failure_summary(run: &RunView) -> Vec<String> {
        let mut classes: Vec<(String, Vec<String>)> = Vec::new();
        for f in &run.failures {
            let class = f.failure_class.clone().unwrap_or_else(|| "unknown".into());
            let mut detail = Vec::new();
            if let Some(w) = f.words {
                detail.push(format!("{w} words"));
            }
            if !f.finish_reasons.is_empty() {
                detail.push(f.finish_reasons.join("+"));
            }
            if f.canary_passed == Some(false) {
                detail.push("canary failed".into());
            }
            let item = format!(
                "#{} ({})",
                f.request_index.map_or("?".into(), |i| i.to_string()),
                detail.join(", ")
            );
            match classes.iter_mut().find(|(c, _)| *c == class) {
                Some((_, v)) => v.push(item),
                None => classes.push((class, vec![item])),
            }
        }
        classes
            .into_iter()
            .map(|(c, items)| format!("{c} ×{}: {}", items.len(), items.join(", ")))
            .collect()
    }
}
