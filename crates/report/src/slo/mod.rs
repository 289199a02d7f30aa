//! SLO attainment and goodput of a cell, from its request rows; the highest
//! rate of an open-loop sweep whose attainment holds. Pure. Both sides'
//! attainment of a cell, as `compare` gates it, is `comparison`'s.
//!
//! A request meets the SLOs when it succeeded and every target given holds:
//! TTFT and e2e from the *scheduled* send (queue time included, as a user
//! waits it; 0 in closed loop), TPOT as measured. A request with one output
//! token has no TPOT and is not held to a TPOT target. Failed requests never
//! meet them: they stay in the denominator.

use std::collections::BTreeMap;

use crate::artifact::{
    CellResult, DEFAULT_MIN_ATTAINMENT, RateSweep, RequestRow, Slo, SloAttainment,
};
use crate::stats::attainment_interval;

pub(crate) mod comparison;

/// Confidence of the per-side attainment interval.
pub const ATTAINMENT_CONFIDENCE: f64 = 0.95;

impl Slo {
    /// No latency target: nothing to meet.
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2e_ms.is_none()
    }

    pub fn min_attainment(&self) -> f64 {
        self.min_attainment.unwrap_or(DEFAULT_MIN_ATTAINMENT)
    }

    /// `ttft_ms <= 1500, tpot_ms <= 80`.
    pub fn describe(&self) -> String {
        [
            ("ttft_ms", self.ttft_ms),
            ("tpot_ms", self.tpot_ms),
            ("e2e_ms", self.e2e_ms),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} <= {v}")))
        .collect::<Vec<_>>()
        .join(", ")
    }

    /// Every target finite and positive, the attainment in (0, 1]; the first problem otherwise.
    pub fn problem(&self) -> Option<String> {
        if self.is_empty() {
            return Some("no target: give ttft_ms, tpot_ms or e2e_ms".into());
        }
        for (k, v) in [
            ("ttft_ms", self.ttft_ms),
            ("tpot_ms", self.tpot_ms),
            ("e2e_ms", self.e2e_ms),
        ] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Some(format!("{k} {v} is not a positive number of milliseconds"));
            }
        }
        match self.min_attainment {
            Some(a) if !(a > 0.0 && a <= 1.0) => {
                Some(format!("min_attainment {a} is not in (0, 1]"))
            }
            _ => None,
        }
    }

    /// Whether one request met every target.
    pub fn met(&self, r: &RequestRow) -> bool {
        let within = |v: Option<f64>, target: Option<f64>, plus: f64| match target {
            None => true,
            Some(t) => v.is_some_and(|v| v + plus <= t),
        };
        r.ok && within(r.ttft_ms, self.ttft_ms, r.queue_ms)
            && within(r.e2e_ms, self.e2e_ms, r.queue_ms)
            // No TPOT (one output token): no decode to be slow.
            && (r.tpot_ms.is_none() || within(r.tpot_ms, self.tpot_ms, 0.0))
    }
}

/// Seconds the rows span: per cluster, first send to last end, summed.
pub fn window_s(rows: &[RequestRow]) -> f64 {
    let mut spans: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let end = r.send_offset_ms + r.e2e_ms.unwrap_or(0.0);
        let s = spans.entry(r.cluster).or_insert((r.send_offset_ms, end));
        s.0 = s.0.min(r.send_offset_ms);
        s.1 = s.1.max(end);
    }
    spans.values().map(|(a, b)| (b - a).max(0.0)).sum::<f64>() / 1000.0
}

/// Attainment and goodput of `rows` under `targets`.
pub fn attainment(targets: &Slo, rows: &[RequestRow]) -> SloAttainment {
    let good: Vec<&RequestRow> = rows.iter().filter(|r| targets.met(r)).collect();
    let (met, of) = (good.len(), rows.len());
    let (lo, hi) = attainment_interval(met as u64, of as u64, ATTAINMENT_CONFIDENCE);
    let window = window_s(rows);
    let per_s = |x: f64| (window > 0.0).then_some(x / window);
    SloAttainment {
        targets: *targets,
        met,
        of,
        attainment: if of == 0 { 0.0 } else { met as f64 / of as f64 },
        interval: [lo, hi],
        confidence: ATTAINMENT_CONFIDENCE,
        window_s: window,
        goodput_rps: per_s(met as f64),
        goodput_tok_s: per_s(
            good.iter()
                .map(|r| r.completion_tokens.unwrap_or(0) as f64)
                .sum(),
        ),
    }
}

/// Offered rate of an open-loop arrival (`constant:4`, `poisson:2.5`).
pub fn offered_rate(arrival: &str) -> Option<f64> {
    let (kind, rate) = arrival.split_once(':')?;
    matches!(kind, "constant" | "poisson")
        .then(|| rate.parse().ok())
        .flatten()
}

/// Open-loop cells with SLOs grouped by everything but their rate; for each
/// group of two or more rates, the highest rate that holds.
pub fn rate_sweeps(cells: &[CellResult]) -> Vec<RateSweep> {
    let mut groups: BTreeMap<String, Vec<(f64, &CellResult, &SloAttainment)>> = BTreeMap::new();
    for c in cells {
        let (Some(rate), Some(slo)) = (offered_rate(&c.shape.arrival), &c.slo) else {
            continue;
        };
        let s = &c.shape;
        let kind = s.arrival.split(':').next().unwrap_or("");
        let key = format!(
            "{} {} {} {} {} {} {:?}",
            s.prompt_tokens, s.max_tokens, s.concurrency, s.cache, kind, s.temperature, slo.targets
        );
        groups.entry(key).or_default().push((rate, c, slo));
    }
    let mut out: Vec<RateSweep> = groups
        .into_values()
        .filter(|g| g.len() > 1)
        .map(|mut g| {
            g.sort_by(|a, b| a.0.total_cmp(&b.0));
            let min = g[0].2.targets.min_attainment();
            let highest = |holds: &dyn Fn(&SloAttainment) -> bool| {
                g.iter()
                    .take_while(|(_, _, a)| holds(a))
                    .last()
                    .map(|(r, _, _)| *r)
            };
            RateSweep {
                cells: g.iter().map(|(_, c, _)| c.name.clone()).collect(),
                rates: g.iter().map(|(r, _, _)| *r).collect(),
                attainment: g.iter().map(|(_, _, a)| a.attainment).collect(),
                min_attainment: min,
                highest_rate_holding: highest(&|a: &SloAttainment| a.attainment >= min),
                highest_rate_confidently_holding: highest(&|a: &SloAttainment| {
                    a.interval[0] >= min
                }),
            }
        })
        .collect();
    out.sort_by(|a, b| a.cells.cmp(&b.cells));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ok: bool, ttft: f64, tpot: Option<f64>, e2e: f64) -> RequestRow {
        RequestRow {
            ok,
            send_offset_ms: 0.0,
            queue_ms: 0.0,
            ttft_ms: Some(ttft),
            tpot_ms: tpot,
            e2e_ms: Some(e2e),
            completion_tokens: Some(10),
            cluster: 0,
        }
    }

    #[test]
    fn a_request_meets_every_target_given_and_failures_never_do() {
        let slo = Slo {
            ttft_ms: Some(100.0),
            tpot_ms: Some(20.0),
            ..Slo::default()
        };
        assert!(
            slo.met(&row(true, 100.0, Some(20.0), 5000.0)),
            "e2e has no target"
        );
        assert!(!slo.met(&row(true, 101.0, Some(10.0), 0.0)));
        assert!(!slo.met(&row(true, 50.0, Some(21.0), 0.0)));
        assert!(
            slo.met(&row(true, 50.0, None, 0.0)),
            "one token: no TPOT to hold"
        );
        assert!(
            !slo.met(&row(false, 1.0, Some(1.0), 1.0)),
            "a failure never meets"
        );
        // Open loop: queue time counts against TTFT.
        let late = RequestRow {
            queue_ms: 60.0,
            ..row(true, 50.0, Some(10.0), 0.0)
        };
        assert!(!slo.met(&late));
    }

    #[test]
    fn attainment_counts_failures_and_goodput_uses_each_clusters_span() {
        let slo = Slo {
            ttft_ms: Some(100.0),
            ..Slo::default()
        };
        let mut rows = vec![
            row(true, 50.0, None, 1000.0),
            row(true, 150.0, None, 1000.0),
            row(false, 50.0, None, 1000.0),
            row(true, 60.0, None, 1000.0),
        ];
        // Two clusters of 2 s each (a gap between them that is not this side's).
        for (i, r) in rows.iter_mut().enumerate() {
            r.cluster = (i / 2) as u32;
            r.send_offset_ms = [0.0, 1000.0, 10_000.0, 11_000.0][i];
        }
        let a = attainment(&slo, &rows);
        assert_eq!((a.met, a.of), (2, 4));
        assert_eq!(a.attainment, 0.5);
        assert_eq!(a.window_s, 4.0);
        assert_eq!(a.goodput_rps, Some(0.5));
        assert_eq!(a.goodput_tok_s, Some(5.0));
        assert!(a.interval[0] < 0.5 && a.interval[1] > 0.5);
    }

    #[test]
    fn a_sweep_holds_up_to_the_first_rate_that_does_not() {
        let cell = |name: &str, rate: f64, met: usize| {
            let slo = Slo {
                e2e_ms: Some(1.0),
                min_attainment: Some(0.9),
                ..Slo::default()
            };
            let mut a = attainment(&slo, &[]);
            (a.met, a.of, a.attainment) = (met, 100, met as f64 / 100.0);
            let (lo, hi) = attainment_interval(met as u64, 100, 0.95);
            a.interval = [lo, hi];
            let shape = crate::artifact::CellShape {
                max_tokens: 32,
                warmup: 0,
                arrival: format!("poisson:{rate}"),
                seed: None,
                ..crate::fixtures::shape(256, 64, 100)
            };
            CellResult {
                slo: Some(a),
                ..crate::fixtures::cell(name, shape, BTreeMap::new(), None)
            }
        };
        let cells = vec![
            cell("r4", 4.0, 85),
            cell("r1", 1.0, 100),
            cell("r2", 2.0, 93),
            cell("r8", 8.0, 95),
        ];
        let s = rate_sweeps(&cells);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].rates, vec![1.0, 2.0, 4.0, 8.0]);
        // 8 req/s met 95 %, but 4 did not hold: capacity stops at 2.
        assert_eq!(s[0].highest_rate_holding, Some(2.0));
        // 93 of 100 has a Wilson lower bound of 0.863 < 0.9; 100 of 100: 0.963.
        assert_eq!(s[0].highest_rate_confidently_holding, Some(1.0));
        assert_eq!(offered_rate("closed"), None);
        assert_eq!(offered_rate("constant:2.5"), Some(2.5));
    }
}
