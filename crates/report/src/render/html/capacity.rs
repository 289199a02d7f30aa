//! A capacity cell's attainment curves: each side's levels (pooled
//! attainment, its bounds as a whisker) against load on a log axis, the
//! minimum attainment as a dashed line, each side's capacity as a line at
//! the fitted crossing and its interval as a band.

use std::fmt::Write;

use crate::capacity::level::LevelDecision;
use crate::capacity::run::shown;
use crate::capacity::{CapacityRun, LoadAxis};
use crate::model::CapacityComparison;
use crate::render::view::CellView;

use super::escape;
use super::plot::{BASELINE_COLOR, CANDIDATE_COLOR};

/// The cell's capacity lines and its curves; nothing for other cells.
pub(super) fn capacity(out: &mut String, c: &CellView) {
    let Some(cap) = &c.capacity else {
        return;
    };
    for line in c.capacity_lines() {
        let _ = writeln!(out, "<p class=\"small slo\">{}</p>", escape(&line));
    }
    if let Some(svg) = curves(cap) {
        let _ = writeln!(
            out,
            "<p class=\"legend small\">attainment against load<span style=\"background:{BASELINE_COLOR}\"></span>baseline<span style=\"background:{CANDIDATE_COLOR}\"></span>candidate; dashed: the minimum attainment; a band: a side's capacity interval, its line the fitted crossing; a hollow point: a level that did not hold or stayed unsure</p><div class=\"plots capacity\">{svg}</div>"
        );
    }
}

/// Every load the plot must show: the levels tried and the intervals.
fn loads(run: &CapacityRun) -> impl Iterator<Item = f64> + '_ {
    let est = run.estimate.as_ref();
    run.levels
        .iter()
        .map(|l| l.load)
        .chain(est.and_then(|e| e.interval).into_iter().flatten())
        .chain(est.and_then(|e| e.fitted))
        .filter(|v| v.is_finite() && *v > 0.0)
}

fn curves(cap: &CapacityComparison) -> Option<String> {
    let (w, h) = (640.0, 240.0);
    let (left, right, top, bottom) = (48.0, 16.0, 26.0, 34.0);
    let all: Vec<f64> = loads(&cap.baseline).chain(loads(&cap.candidate)).collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    // A little room either side, on the log scale.
    let (lo, hi) = (lo / 1.15, hi * 1.15);
    let span = (hi / lo).ln();
    let x = |v: f64| left + (v / lo).ln() / span * (w - left - right);
    let y = |a: f64| top + (1.0 - a.clamp(0.0, 1.0)) * (h - top - bottom);
    let unit = cap.baseline.spec.by.unit();
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><title>SLO attainment against load ({unit}), both sides</title><text x=\"8\" y=\"14\" font-size=\"12\" font-weight=\"600\">attainment at {} against load, {unit} (log scale)</text>",
        escape(&cap.baseline.slo)
    );
    for (run, color) in [
        (&cap.baseline, BASELINE_COLOR),
        (&cap.candidate, CANDIDATE_COLOR),
    ] {
        side(&mut s, run, color, &x, &y, (top, h - bottom));
    }
    let slo = y(cap.baseline.min_attainment);
    let _ = write!(
        s,
        "<line class=\"slo-line\" x1=\"{left}\" x2=\"{:.1}\" y1=\"{slo:.2}\" y2=\"{slo:.2}\" stroke=\"#24292f\" stroke-dasharray=\"5 4\"/><text x=\"{:.1}\" y=\"{:.2}\" font-size=\"10\" text-anchor=\"end\" fill=\"#24292f\">{}</text>",
        w - right,
        w - right,
        slo - 3.0,
        escape(&format!("min {}", cap.baseline.min_attainment))
    );
    for a in [0.0, 0.5, 1.0] {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.2}\" font-size=\"10\" text-anchor=\"end\" fill=\"#57606a\">{a}</text>",
            left - 4.0,
            y(a) + 3.0
        );
    }
    // By concurrency the levels tried are the ticks (whole numbers); by
    // rate five points evenly spaced on the log axis.
    let ticks: Vec<f64> = match cap.baseline.spec.by {
        LoadAxis::Concurrency => {
            let mut t: Vec<f64> = cap
                .baseline
                .levels
                .iter()
                .chain(&cap.candidate.levels)
                .map(|l| l.load)
                .collect();
            t.sort_by(f64::total_cmp);
            t.dedup();
            t
        }
        LoadAxis::Rate => (0..5)
            .map(|i| lo * (hi / lo).powf(f64::from(i) / 4.0))
            .collect(),
    };
    for v in ticks {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
            x(v),
            h - bottom + 14.0,
            shown(v)
        );
    }
    let _ = write!(
        s,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{0}\" stroke=\"#8c959f\"/><line x1=\"{left}\" x2=\"{1}\" y1=\"{0}\" y2=\"{0}\" stroke=\"#8c959f\"/></svg>",
        h - bottom,
        w - right
    );
    Some(s)
}

/// One side: its interval band and fitted line, then its levels in load
/// order joined by a line, each with its bounds.
fn side(
    s: &mut String,
    run: &CapacityRun,
    color: &str,
    x: &impl Fn(f64) -> f64,
    y: &impl Fn(f64) -> f64,
    (top, bottom): (f64, f64),
) {
    if let Some(e) = &run.estimate {
        if let Some([a, b]) = e.interval.filter(|[a, b]| a.is_finite() && b.is_finite()) {
            let _ = write!(
                s,
                "<rect class=\"capacity-band\" x=\"{:.2}\" y=\"{top}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{color}\" fill-opacity=\"0.12\"/>",
                x(a),
                (x(b) - x(a)).max(1.0),
                bottom - top
            );
        }
        if let Some(f) = e.fitted.filter(|f| f.is_finite() && *f > 0.0) {
            let _ = write!(
                s,
                "<line class=\"capacity-fit\" x1=\"{0:.2}\" x2=\"{0:.2}\" y1=\"{top}\" y2=\"{bottom}\" stroke=\"{color}\" stroke-dasharray=\"2 3\"/>",
                x(f)
            );
        }
    }
    let mut levels: Vec<_> = run.levels.iter().collect();
    levels.sort_by(|a, b| a.load.total_cmp(&b.load));
    let pts: Vec<String> = levels
        .iter()
        .map(|l| format!("{:.2},{:.2}", x(l.load), y(l.evidence.attainment)))
        .collect();
    let _ = write!(
        s,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-opacity=\"0.7\"/>",
        pts.join(" ")
    );
    for l in levels {
        let (cx, ev) = (x(l.load), &l.evidence);
        let fill = if ev.decision == LevelDecision::Holds {
            color
        } else {
            "#ffffff"
        };
        let _ = write!(
            s,
            "<line x1=\"{cx:.2}\" x2=\"{cx:.2}\" y1=\"{:.2}\" y2=\"{:.2}\" stroke=\"{color}\"/><circle class=\"capacity-level\" cx=\"{cx:.2}\" cy=\"{:.2}\" r=\"3\" fill=\"{fill}\" stroke=\"{color}\"><title>{}</title></circle>",
            y(ev.lower),
            y(ev.upper),
            y(ev.attainment),
            escape(&format!(
                "{} {}: attainment {:.3} ({:.3}–{:.3})",
                shown(l.load),
                run.spec.by.unit(),
                ev.attainment,
                ev.lower,
                ev.upper
            ))
        );
    }
}
