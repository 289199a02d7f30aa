//! The page's SVG plots, drawn inline: each metric's per-request values
//! (medians marked), latencies over the run in send order, the server's
//! gauges by scrape, and the turnover failure rates with their intervals.

use std::fmt::Write;

use crate::artifact::RequestRow;
use crate::model::Side;
use crate::render::view::{CellView, MetricView, TurnoverRow};
use crate::render::{direction_word, fmt_delta, fmt_rate, fmt_value};
use crate::stats;

use super::escape;

pub(super) const BASELINE_COLOR: &str = "#4c78a8";
pub(super) const CANDIDATE_COLOR: &str = "#e45756";

/// Axis ticks: `count` evenly spaced values over [lo, hi].
fn ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    (0..count)
        .map(|i| lo + (hi - lo) * i as f64 / (count - 1) as f64)
        .collect()
}

/// Strip plot of baseline vs candidate per-request values, medians marked.
fn strip_plot(m: &MetricView, b: &[f64], c: &[f64]) -> String {
    let (w, h) = (520.0, 132.0);
    let (left, right, top) = (112.0, 16.0, 26.0);
    let axis_y = h - 26.0;
    let all = b.iter().chain(c).copied();
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(f64::NEG_INFINITY, f64::max);
    // A flat sample still needs a visible axis span.
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        lo.abs().max(1.0) * 0.05
    };
    // Latencies and speeds are never negative: the axis does not start below 0.
    let floor = if lo >= 0.0 { 0.0 } else { f64::NEG_INFINITY };
    let (lo, hi) = ((lo - pad).max(floor), hi + pad);
    let x = |v: f64| left + (v - lo) / (hi - lo) * (w - left - right);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><title>{} per request: baseline vs candidate</title>",
        escape(&m.name)
    );
    // The interval the table decides with, and only that one.
    let d = m.decision_cells();
    let _ = write!(
        s,
        "<text x=\"8\" y=\"16\" font-size=\"12\" font-weight=\"600\">{}</text><text x=\"{}\" y=\"16\" font-size=\"11\" text-anchor=\"end\" fill=\"#57606a\">{} · point Δ {} · {} {}</text>",
        escape(&m.name),
        w - right,
        escape(direction_word(m.direction)),
        escape(&fmt_delta(m.delta_percent)),
        if m.evidence.is_some() { "bounds" } else { "CI" },
        escape(&d.interval),
    );
    for (row, (label, vals, color)) in [
        ("baseline", b, BASELINE_COLOR),
        ("candidate", c, CANDIDATE_COLOR),
    ]
    .into_iter()
    .enumerate()
    {
        let y = top + 18.0 + row as f64 * 34.0;
        let _ = write!(
            s,
            "<text x=\"8\" y=\"{:.1}\" font-size=\"11\">{label} (n={})</text>",
            y + 4.0,
            vals.len()
        );
        for (i, v) in vals.iter().enumerate() {
            // Deterministic jitter so coincident points stay visible.
            let j = ((i * 7919 % 13) as f64 / 12.0 - 0.5) * 14.0;
            let _ = write!(
                s,
                "<circle cx=\"{:.2}\" cy=\"{:.2}\" r=\"3.2\" fill=\"{color}\" fill-opacity=\"0.55\"/>",
                x(*v),
                y + j
            );
        }
        if let Some(med) = stats::median(vals) {
            let _ = write!(
                s,
                "<line x1=\"{0:.2}\" x2=\"{0:.2}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#1b1f24\" stroke-width=\"2\"><title>median {3}</title></line>",
                x(med),
                y - 12.0,
                y + 12.0,
                escape(&fmt_value(Some(med)))
            );
        }
    }
    let _ = write!(
        s,
        "<line x1=\"{left}\" x2=\"{}\" y1=\"{axis_y}\" y2=\"{axis_y}\" stroke=\"#8c959f\"/>",
        w - right
    );
    for t in ticks(lo, hi, 5) {
        let _ = write!(
            s,
            "<line x1=\"{0:.2}\" x2=\"{0:.2}\" y1=\"{axis_y}\" y2=\"{1}\" stroke=\"#8c959f\"/><text x=\"{0:.2}\" y=\"{2}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#57606a\">{3}</text>",
            x(t),
            axis_y + 4.0,
            axis_y + 16.0,
            escape(&fmt_value(Some(t)))
        );
    }
    s.push_str("</svg>");
    s
}

/// One latency per request against its place in send order, both sides on
/// one chart: drift over the run shows as a slope, a warm-up or cache hit
/// as an outlier at the start. Failed requests are marked on the top edge.
/// Send order, not send time: an interleaved side's blocks each start
/// their own clock, but block k of one side ran next to block k of the other.
fn time_series_plot(
    label: &str,
    rows: (&[RequestRow], &[RequestRow]),
    value: fn(&RequestRow) -> Option<f64>,
) -> Option<String> {
    let (w, h) = (520.0, 150.0);
    let (left, right, top, bottom) = (56.0, 12.0, 24.0, 24.0);
    let vals: Vec<f64> = rows.0.iter().chain(rows.1).filter_map(value).collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 1.0, hi + 1.0)
    };
    let n = rows.0.len().max(rows.1.len()).max(2);
    let x = |i: usize| left + i as f64 / (n - 1) as f64 * (w - left - right);
    let y = |v: f64| top + (hi - v) / (hi - lo) * (h - top - bottom);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><title>{0} per request in send order</title><text x=\"8\" y=\"14\" font-size=\"12\" font-weight=\"600\">{0} by request, in send order</text>",
        escape(label)
    );
    for (side, color) in [(rows.0, BASELINE_COLOR), (rows.1, CANDIDATE_COLOR)] {
        for (i, r) in side.iter().enumerate() {
            match value(r) {
                Some(v) if r.ok => {
                    let _ = write!(
                        s,
                        "<circle cx=\"{:.2}\" cy=\"{:.2}\" r=\"2.6\" fill=\"{color}\" fill-opacity=\"0.7\"/>",
                        x(i),
                        y(v)
                    );
                }
                _ => {
                    let _ = write!(
                        s,
                        "<text x=\"{:.2}\" y=\"{:.2}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{color}\">×<title>request {i} failed</title></text>",
                        x(i),
                        top - 2.0
                    );
                }
            }
        }
    }
    s.push_str(&value_axis(
        ticks(lo, hi, 4),
        left,
        top,
        h - bottom,
        w - right,
        y,
    ));
    let _ = write!(
        s,
        "<text x=\"{0}\" y=\"{1}\" font-size=\"10\" text-anchor=\"end\" fill=\"#57606a\">request 0 … {2}</text></svg>",
        w - right,
        h - 8.0,
        n - 1
    );
    Some(s)
}

/// A plot's value labels at `ticks` and its two axis lines (left, bottom).
fn value_axis(
    ticks: Vec<f64>,
    left: f64,
    top: f64,
    bottom_y: f64,
    right_x: f64,
    y: impl Fn(f64) -> f64,
) -> String {
    let mut s = String::new();
    for t in ticks {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.2}\" font-size=\"10\" text-anchor=\"end\" fill=\"#57606a\">{}</text>",
            left - 4.0,
            y(t) + 3.0,
            escape(&fmt_value(Some(t)))
        );
    }
    let _ = write!(
        s,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{bottom_y}\" stroke=\"#8c959f\"/><line x1=\"{left}\" x2=\"{right_x}\" y1=\"{bottom_y}\" y2=\"{bottom_y}\" stroke=\"#8c959f\"/>"
    );
    s
}

/// The cell's per-request TTFT and e2e over the run, when the report keeps its rows.
pub(super) fn time_series(out: &mut String, c: &CellView) {
    let Some(rows) = &c.rows else {
        return;
    };
    let pair = (rows.baseline.as_slice(), rows.candidate.as_slice());
    let plots: Vec<String> = [
        time_series_plot("ttft_ms", pair, |r| r.ttft_ms),
        time_series_plot("e2e_ms", pair, |r| r.e2e_ms),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !plots.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"legend small\">over the run<span style=\"background:{BASELINE_COLOR}\"></span>baseline<span style=\"background:{CANDIDATE_COLOR}\"></span>candidate; ×: a failed request</p><div class=\"plots\">{}</div>",
            plots.join("\n")
        );
    }
}

/// One gauge of both sides over their scrapes, in scrape order (each
/// window's offsets count from its own run's start, so order is what the
/// two sides share), as a line per side with a point per scrape.
fn gauge_plot(label: &str, sides: (&[[f64; 2]], &[[f64; 2]])) -> Option<String> {
    let (w, h) = (520.0, 130.0);
    let (left, right, top, bottom) = (56.0, 12.0, 24.0, 24.0);
    let vals: Vec<f64> = sides.0.iter().chain(sides.1).map(|p| p[1]).collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min).min(0.0);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !hi.is_finite() {
        return None;
    }
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let n = sides.0.len().max(sides.1.len()).max(2);
    let x = |i: usize| left + i as f64 / (n - 1) as f64 * (w - left - right);
    let y = |v: f64| top + (hi - v) / (hi - lo) * (h - top - bottom);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><title>{0} per scrape</title><text x=\"8\" y=\"14\" font-size=\"12\" font-weight=\"600\">{0}, by scrape</text>",
        escape(label)
    );
    for (side, color) in [(sides.0, BASELINE_COLOR), (sides.1, CANDIDATE_COLOR)] {
        let pts: Vec<String> = side
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{:.2},{:.2}", x(i), y(p[1])))
            .collect();
        let _ = write!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-opacity=\"0.8\"/>",
            pts.join(" ")
        );
        for (i, p) in side.iter().enumerate() {
            let _ = write!(
                s,
                "<circle cx=\"{:.2}\" cy=\"{:.2}\" r=\"2.2\" fill=\"{color}\"/>",
                x(i),
                y(p[1])
            );
        }
    }
    s.push_str(&value_axis(
        ticks(lo, hi, 3),
        left,
        top,
        h - bottom,
        w - right,
        y,
    ));
    s.push_str("</svg>");
    Some(s)
}

/// The server's gauges (requests processing, queued, KV usage) over the
/// cell's windows, both sides on one plot per gauge.
pub(super) fn gauges(out: &mut String, c: &CellView) {
    let series = |all: &[crate::server_metrics::ServerMetrics]| {
        all.iter()
            .flat_map(|m| {
                m.series
                    .iter()
                    .map(move |(k, v)| (format!("{} {k}", m.endpoint), v.clone()))
            })
            .collect::<std::collections::BTreeMap<String, Vec<[f64; 2]>>>()
    };
    let (b, cand) = (series(&c.baseline_metrics), series(&c.candidate_metrics));
    let mut keys: Vec<&String> = b.keys().chain(cand.keys()).collect();
    keys.sort();
    keys.dedup();
    let empty = Vec::new();
    let plots: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let label = k.strip_prefix("target ").unwrap_or(k);
            gauge_plot(
                label,
                (b.get(k).unwrap_or(&empty), cand.get(k).unwrap_or(&empty)),
            )
        })
        .collect();
    if !plots.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"legend small\">the server's gauges over the cell<span style=\"background:{BASELINE_COLOR}\"></span>baseline<span style=\"background:{CANDIDATE_COLOR}\"></span>candidate</p><div class=\"plots gauges\">{}</div>",
            plots.join("\n")
        );
    }
}

/// Failure rate per turnover row with its interval as a whisker.
pub(super) fn turnover_plot(rows: &[TurnoverRow]) -> String {
    let row_h = 22.0;
    let (left, right, top) = (230.0, 60.0, 10.0);
    let w = 640.0;
    let h = top + rows.len() as f64 * row_h + 28.0;
    let max = rows
        .iter()
        .filter_map(|r| r.rate_ci.map(|c| c.high).or(r.rate))
        .fold(0.0f64, f64::max)
        .max(0.01)
        * 1.1;
    let max = max.min(1.0);
    let x = |v: f64| left + v.clamp(0.0, max) / max * (w - left - right);
    let mut s = format!(
        "<svg role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><title>turnover failure rates</title>"
    );
    for (i, r) in rows.iter().enumerate() {
        let y = top + i as f64 * row_h + row_h / 2.0;
        let color = match r.side {
            Side::Baseline => BASELINE_COLOR,
            Side::Candidate => CANDIDATE_COLOR,
        };
        let _ = write!(
            s,
            "<text x=\"8\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            y + 4.0,
            escape(&r.label)
        );
        if let Some(rate) = r.rate {
            let _ = write!(
                s,
                "<rect x=\"{left}\" y=\"{:.1}\" width=\"{:.2}\" height=\"12\" fill=\"{color}\" fill-opacity=\"{}\"/>",
                y - 6.0,
                x(rate) - left,
                if r.pooled { "0.35" } else { "0.75" }
            );
            let _ = write!(
                s,
                "<text x=\"{:.2}\" y=\"{:.1}\" font-size=\"10\" fill=\"#57606a\">{}</text>",
                x(r.rate_ci.map_or(rate, |c| c.high)) + 4.0,
                y + 4.0,
                escape(&fmt_rate(Some(rate)))
            );
        }
        if let Some(ci) = r.rate_ci {
            let _ = write!(
                s,
                "<line x1=\"{:.2}\" x2=\"{:.2}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#1b1f24\"/>",
                x(ci.low),
                x(ci.high)
            );
        }
    }
    let axis_y = h - 22.0;
    let _ = write!(
        s,
        "<line x1=\"{left}\" x2=\"{}\" y1=\"{axis_y}\" y2=\"{axis_y}\" stroke=\"#8c959f\"/>",
        w - right
    );
    for t in ticks(0.0, max, 5) {
        let _ = write!(
            s,
            "<text x=\"{:.2}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
            x(t),
            axis_y + 14.0,
            escape(&fmt_rate(Some(t)))
        );
    }
    s.push_str("</svg>");
    s
}

/// A strip plot per metric that has per-request samples on both sides; a
/// notice naming those without.
pub(super) fn sample_plots(out: &mut String, c: &CellView) {
    let plots: Vec<String> = c
        .metrics
        .iter()
        .filter_map(|m| {
            let (_, b, cand) = m.samples.as_ref()?;
            (!b.is_empty() && !cand.is_empty()).then(|| strip_plot(m, b, cand))
        })
        .collect();
    if plots.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"notice\">This report carries no per-request samples for this cell, so its distributions cannot be plotted; only the summary values above are available.</p>"
        );
        return;
    }
    let missing: Vec<&str> = c
        .metrics
        .iter()
        .filter(|m| {
            m.samples
                .as_ref()
                .is_none_or(|(_, b, c)| b.is_empty() || c.is_empty())
        })
        .map(|m| m.name.as_str())
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"small\">No per-request samples for: {}.</p>",
            escape(&missing.join(", "))
        );
    }
    let _ = writeln!(
        out,
        "<p class=\"legend small\">per-request values<span style=\"background:{BASELINE_COLOR}\"></span>baseline<span style=\"background:{CANDIDATE_COLOR}\"></span>candidate; black bar: median</p><div class=\"plots\">{}</div>",
        plots.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_axis_never_starts_below_zero() {
        let m = MetricView {
            name: "ttft_p50_ms".into(),
            baseline: Some(2.0),
            candidate: Some(2.0),
            delta_percent: Some(0.0),
            threshold_percent: Some(5.0),
            within_threshold: Some(true),
            direction: None,
            ci: None,
            verdict: None,
            baseline_n: Some(3),
            candidate_n: Some(3),
            requests_to_resolve: None,
            samples: None,
            evidence: None,
            recorded_evidence: None,
            not_informative: None,
        };
        // Values from 0 to 40: a 5 % pad below would put the first tick at -2.
        let svg = strip_plot(&m, &[0.0, 1.0, 40.0], &[2.0, 3.0, 4.0]);
        assert!(!svg.contains(">-"), "no negative tick label: {svg}");
    }
}
