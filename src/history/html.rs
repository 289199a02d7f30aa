//! `history --html`: one offline page (inline CSS and SVG, no scripts, no
//! external assets) with the builds and, per cell and metric, each
//! qualification's paired ratio with its interval, coloured by the human's
//! decision; the cumulative change along the chain since the anchor; the
//! drift gate's margin; the change points and the anchor drawn.

use std::fmt::Write as _;

use crate::report::history as math;
use crate::report::render::escape;

use super::{CONFIDENCE, History, Series, as_step, short};

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#1b1f24}\
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d0d7de}\
table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:.2rem .5rem;text-align:left}th{background:#f6f8fa}\
code{font:12px ui-monospace,monospace}.small{font-size:12px;color:#57606a}svg{background:#fbfcfd;border:1px solid #eaeef2}\
.legend span{display:inline-block;width:.8rem;height:.8rem;margin:0 .25rem 0 .8rem;vertical-align:middle}";

const PROMOTE: &str = "#1a7f37";
const RETAIN: &str = "#cf222e";
const PENDING: &str = "#8c959f";
const CUMULATIVE: &str = "#8250df";

/// The page.
pub fn render_html(h: &History) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Runtime history</title><style>{CSS}</style></head><body><h1>Runtime history</h1>"
    );
    builds(&mut s, h);
    let _ = write!(
        s,
        "<p class=\"legend small\">each qualification's candidate over its baseline, interval at {} %<span style=\"background:{PROMOTE}\"></span>promoted<span style=\"background:{RETAIN}\"></span>baseline retained<span style=\"background:{PENDING}\"></span>pending<span style=\"background:{CUMULATIVE}\"></span>cumulative since the anchor; dotted: the drift margin; dashed: a change point</p>",
        CONFIDENCE * 100.0
    );
    for series in &h.series {
        section(&mut s, h, series);
    }
    if !h.without_comparison.is_empty() {
        let _ = write!(
            s,
            "<p class=\"small\">without a comparison (interrupted, refused or failed): {}</p>",
            escape(&h.without_comparison.join(", "))
        );
    }
    s.push_str("</body></html>\n");
    s
}

fn builds(s: &mut String, h: &History) {
    let _ = write!(
        s,
        "<h2>Builds ({})</h2><table><tr><th>recorded</th><th>qualification</th><th>baseline → candidate</th><th>tag</th><th>verdict</th><th>decision</th></tr>",
        h.builds.len()
    );
    for b in &h.builds {
        let _ = write!(
            s,
            "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code> → <code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&b.at),
            escape(&b.qualification),
            escape(&short(&b.baseline_image)),
            escape(&short(&b.candidate_image)),
            escape(b.tag.as_deref().unwrap_or("")),
            escape(b.verdict.as_deref().unwrap_or("unfinished")),
            escape(&b.decision)
        );
    }
    s.push_str("</table>");
}

/// One cell and metric: its words, then its plot.
fn section(s: &mut String, h: &History, series: &Series) {
    let _ = write!(
        s,
        "<h2>{} · {}</h2>",
        escape(&series.cell),
        escape(&series.metric)
    );
    if let Some(c) = &series.chain {
        let _ = write!(
            s,
            "<p class=\"small\">since <code>{}</code>: {:.3}× ({:.3}×–{:.3}×) over {} step(s); drift {} at ±{} %: {}</p>",
            escape(&short(&c.anchor)),
            c.cumulative.ratio,
            c.cumulative.low,
            c.cumulative.high,
            c.chain.len(),
            escape(c.drift.as_str()),
            c.margin_percent,
            escape(&c.drift_reason)
        );
    }
    s.push_str(&plot(h, series));
}

/// The decision's colour for a qualification.
fn colour(h: &History, q: &str) -> &'static str {
    match h
        .builds
        .iter()
        .find(|b| b.qualification == q)
        .map(|b| b.decision.as_str())
    {
        Some("promote") => PROMOTE,
        Some("retain-baseline") => RETAIN,
        _ => PENDING,
    }
}

fn plot(h: &History, series: &Series) -> String {
    let (w, ht) = (760.0, 260.0);
    let (left, right, top, bottom) = (56.0, 16.0, 20.0, 40.0);
    let pts = &series.points;
    let chain = series.chain.as_ref();
    // The cumulative ratio after each step of the chain, at that step.
    let steps: Vec<(usize, f64)> = chain
        .map(|c| {
            let idx: Vec<usize> = c
                .chain
                .iter()
                .filter_map(|q| pts.iter().position(|p| &p.qualification == q))
                .collect();
            let st: Vec<math::Step> = idx
                .iter()
                .map(|&i| as_step(pts[i].log_ratio, pts[i].standard_error, pts[i].df))
                .collect();
            (1..=st.len())
                .filter_map(|k| Some((idx[k - 1], math::cumulative(&st[..k], CONFIDENCE)?.ratio)))
                .collect()
        })
        .unwrap_or_default();
    let margin = chain.map_or(0.05, |c| c.margin_percent / 100.0);
    let values = pts
        .iter()
        .flat_map(|p| [p.low, p.high])
        .chain(steps.iter().map(|s| s.1))
        .chain([1.0 - margin, 1.0 + margin])
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = values.fold((1.0f64, 1.0f64), |(a, b), v| (a.min(v), b.max(v)));
    // Bounds past 10× either way are not informative: clipped, not scaled to.
    let (lo, hi) = ((lo / 1.05).max(0.1), (hi * 1.05).min(10.0));
    let n = pts.len().max(2);
    let x = |i: usize| left + (i as f64 + 0.5) / n as f64 * (w - left - right);
    let y = |v: f64| top + (hi / v.clamp(lo, hi)).ln() / (hi / lo).ln() * (ht - top - bottom);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg role=\"img\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\"><title>{} {}: paired ratio per build</title>",
        escape(&series.cell),
        escape(&series.metric)
    );
    for (v, dash) in [(1.0, ""), (1.0 - margin, "2 3"), (1.0 + margin, "2 3")] {
        let (x2, yv, tx) = (w - right, y(v), left - 4.0);
        let _ = write!(
            s,
            "<line x1=\"{left}\" x2=\"{x2:.1}\" y1=\"{yv:.2}\" y2=\"{yv:.2}\" stroke=\"#57606a\" stroke-dasharray=\"{dash}\"/><text x=\"{tx:.1}\" y=\"{:.2}\" font-size=\"10\" text-anchor=\"end\" fill=\"#57606a\">{v:.2}×</text>",
            yv + 3.0
        );
    }
    if let Some(c) = chain {
        if let Some(i) = c
            .chain
            .first()
            .and_then(|q| pts.iter().position(|p| &p.qualification == q))
        {
            let ax = x(i) - (w - left - right) / n as f64 / 2.0;
            let _ = write!(
                s,
                "<line class=\"anchor\" x1=\"{ax:.1}\" x2=\"{ax:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"{CUMULATIVE}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"{CUMULATIVE}\">anchor {}</text>",
                ht - bottom,
                ax + 3.0,
                top + 10.0,
                escape(&short(&c.anchor))
            );
        }
        for cp in &c.change_points {
            if let Some(i) = pts.iter().position(|p| p.qualification == cp.qualification) {
                let _ = write!(
                    s,
                    "<line class=\"change-point\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{top}\" y2=\"{1:.1}\" stroke=\"{RETAIN}\" stroke-dasharray=\"5 4\"><title>{2}</title></line><text x=\"{0:.1}\" y=\"{3:.1}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{RETAIN}\">change {4:.3}×</text>",
                    x(i),
                    ht - bottom,
                    escape(&format!(
                        "change point ({:?}) at {}: {:.3}×, p = {:.2e} ≤ {:.2e}, found at {}",
                        cp.point.kind,
                        cp.qualification,
                        cp.point.ratio,
                        cp.point.p_value,
                        cp.point.level,
                        cp.found_at
                    )),
                    top + 22.0,
                    cp.point.ratio
                );
            }
        }
    }
    for (i, p) in pts.iter().enumerate() {
        let c = colour(h, &p.qualification);
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.2}\" y2=\"{2:.2}\" stroke=\"{c}\"/><circle class=\"build\" cx=\"{0:.1}\" cy=\"{3:.2}\" r=\"3.5\" fill=\"{c}\"><title>{4}</title></circle><text x=\"{0:.1}\" y=\"{5:.1}\" font-size=\"9\" text-anchor=\"middle\" fill=\"#57606a\">{6}</text>",
            x(i),
            y(p.low),
            y(p.high),
            y(p.ratio),
            escape(&format!(
                "{}: {:.3}× ({:.3}×–{:.3}×), {}",
                p.qualification,
                p.ratio,
                p.low,
                p.high,
                p.outcome.as_str().unwrap_or("?")
            )),
            ht - bottom + 14.0,
            i + 1
        );
    }
    if !steps.is_empty() {
        let line: Vec<String> = steps
            .iter()
            .map(|&(i, v)| format!("{:.1},{:.2}", x(i), y(v)))
            .collect();
        let _ = write!(
            s,
            "<polyline class=\"cumulative\" points=\"{}\" fill=\"none\" stroke=\"{CUMULATIVE}\" stroke-width=\"2\"/>",
            line.join(" ")
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#57606a\">build, in the order qualified</text></svg>",
        (left + w - right) / 2.0,
        ht - 6.0
    );
    s
}
