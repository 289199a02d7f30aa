//! Plain-text tables for a terminal; ANSI colour only on request.

use std::fmt::Write;

use super::view::{CellView, PairMark, View};
use super::*;

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// A table cell: text, optional colour, and whether it is right-aligned.
struct C {
    text: String,
    color: Option<&'static str>,
    right: bool,
}

fn l(text: impl Into<String>) -> C {
    C {
        text: text.into(),
        color: None,
        right: false,
    }
}
fn r(text: impl Into<String>) -> C {
    C {
        text: text.into(),
        color: None,
        right: true,
    }
}
impl C {
    fn color(mut self, c: Option<&'static str>) -> C {
        self.color = c;
        self
    }
}

fn paint(s: &str, c: Option<&'static str>, color: bool) -> String {
    match c {
        Some(c) if color => format!("{c}{s}{RESET}"),
        _ => s.to_string(),
    }
}

fn pass_color(p: Option<bool>) -> Option<&'static str> {
    match p {
        Some(true) => Some(GREEN),
        Some(false) => Some(RED),
        None => Some(DIM),
    }
}

fn verdict_color(v: Option<&str>) -> Option<&'static str> {
    match v {
        Some("improved") | Some("equivalent") => Some(GREEN),
        Some("regressed") => Some(RED),
        Some("inconclusive") => Some(YELLOW),
        _ => Some(DIM),
    }
}

fn mark(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "✓",
        Some(false) => "✗",
        None => "?",
    }
}

/// Columns padded to their widest cell (by characters), two spaces apart.
fn table(out: &mut String, indent: &str, head: &[C], rows: &[Vec<C>], color: bool) {
    let n = head.len();
    let mut w = vec![0usize; n];
    for row in std::iter::once(head).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in row.iter().enumerate().take(n) {
            w[i] = w[i].max(c.text.chars().count());
        }
    }
    let line = |cells: &[C], bold: bool| {
        let mut s = String::from(indent);
        for (i, c) in cells.iter().enumerate().take(n) {
            let pad = " ".repeat(w[i] - c.text.chars().count());
            let text = paint(&c.text, if bold { Some(BOLD) } else { c.color }, color);
            if i > 0 {
                s.push_str("  ");
            }
            if c.right {
                s.push_str(&pad);
                s.push_str(&text);
            } else {
                s.push_str(&text);
                if i + 1 < n {
                    s.push_str(&pad);
                }
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(head, true));
    for row in rows {
        let _ = writeln!(out, "{}", line(row, false));
    }
}

fn cell_section(out: &mut String, c: &CellView, ci_head: &str, color: bool, verbose: bool) {
    let _ = writeln!(
        out,
        "{}  requests {} baseline / {} candidate · median prompt {} tokens · eligible: baseline {} candidate {}",
        paint(&format!("cell {}", c.name), Some(BOLD), color),
        fmt_count(c.baseline_requests),
        fmt_count(c.candidate_requests),
        c.median_prompt_tokens
            .map_or(DASH.into(), |m| format!("{m}")),
        paint(
            mark(c.baseline_eligible),
            pass_color(c.baseline_eligible),
            color
        ),
        paint(
            mark(c.candidate_eligible),
            pass_color(c.candidate_eligible),
            color
        ),
    );
    let (interval_head, decision_head) = c.decision_headings(ci_head);
    let head = [
        l("metric"),
        r("baseline"),
        r("candidate"),
        r("n"),
        r("point delta"),
        l(&interval_head),
        l(decision_head),
        l("seed flag (point vs T)"),
    ];
    let decisions: Vec<_> = c.metrics.iter().map(|m| m.decision_cells()).collect();
    let rows: Vec<Vec<C>> = c
        .metrics
        .iter()
        .zip(&decisions)
        .map(|(m, d)| {
            let n = match (m.baseline_n, m.candidate_n) {
                (Some(b), Some(c)) => format!("{b}/{c}"),
                _ => DASH.into(),
            };
            vec![
                l(&m.name),
                r(fmt_value(m.baseline)),
                r(fmt_value(m.candidate)),
                r(n),
                r(fmt_delta(m.delta_percent)),
                l(&d.interval),
                l(&d.decision).color(verdict_color(Some(&d.decision))),
                l(&d.seed_flag),
            ]
        })
        .collect();
    // A capacity cell has no metrics: its lines below say it all.
    if c.capacity.is_none() {
        table(out, "  ", &head, &rows, color);
    }
    for (m, d) in c.metrics.iter().zip(&decisions) {
        if let ("inconclusive", Some(n)) = (d.decision.as_str(), d.resolve) {
            let _ = writeln!(
                out,
                "  {}: inconclusive; about {n} requests per side would decide it",
                m.name
            );
        }
    }
    let server = if verbose {
        c.server_lines()
    } else {
        c.server_summary_lines("with --verbose")
    };
    for line in c
        .capacity_lines()
        .into_iter()
        .chain(c.slo_lines())
        .chain(c.slice_lines())
        .chain(server)
    {
        let _ = writeln!(out, "  {line}");
    }
    for (side, reasons) in [
        ("baseline", &c.baseline_reasons),
        ("candidate", &c.candidate_reasons),
    ] {
        if !reasons.is_empty() {
            let _ = writeln!(out, "  {side} not eligible: {}", reasons.join("; "));
        }
    }
    let _ = writeln!(out);
}

pub(super) fn render(v: &View, opts: TerminalOptions) -> String {
    let (color, verbose) = (opts.color, opts.verbose);
    let mut out = String::new();
    header(&mut out, v, color);
    cells(&mut out, v, color, verbose);
    turnover(&mut out, v, color);
    references(&mut out, v, color);
    quality(&mut out, v, color);
    gates(&mut out, v, color);
    evidence(&mut out, v, color, verbose);
    decision(&mut out, v, color);
    verification(&mut out, v, color);
    for w in &v.warnings {
        let _ = writeln!(out, "{} {w}", paint("warning:", Some(YELLOW), color));
    }
    out
}

/// Schema, the headline when the numbers disagree, the images and the verdict.
fn header(out: &mut String, v: &View, color: bool) {
    let _ = writeln!(
        out,
        "{} ({})",
        paint("infergate comparison", Some(BOLD), color),
        v.schema.as_deref().unwrap_or("no schema")
    );
    if !v.disagreements.is_empty() {
        let _ = writeln!(out, "{}", paint(&v.headline(), Some(RED), color));
    }
    let _ = writeln!(
        out,
        "  baseline   {}",
        v.baseline_image.as_deref().unwrap_or(DASH)
    );
    let _ = writeln!(
        out,
        "  candidate  {}",
        v.candidate_image.as_deref().unwrap_or(DASH)
    );
    let _ = writeln!(out);
    for line in v.verdict_lines() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

fn cells(out: &mut String, v: &View, color: bool, verbose: bool) {
    let ci_head = ci_heading(v);
    if v.cells.is_empty() {
        let _ = writeln!(out, "no cells\n");
    }
    for c in &v.cells {
        cell_section(out, c, &ci_head, color, verbose);
    }
}

/// The turnover table and each run's failures.
fn turnover(out: &mut String, v: &View, color: bool) {
    let rows = v.turnover_rows();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}  failure rate = failed / requests; p: Fisher exact test against the baseline{}",
        paint("turnover", Some(BOLD), color),
        if v.turnover_computed {
            " (computed here from the report's counts)"
        } else {
            ""
        }
    );
    let head = [
        l("run"),
        r("requests"),
        r("passed"),
        r("failed"),
        r("received"),
        r("contaminated"),
        r("failure rate"),
        l(format!("{:.0}% CI", v.turnover.confidence * 100.0)),
        r("p worse"),
        r("p better"),
    ];
    let trows: Vec<Vec<C>> = rows
        .iter()
        .map(|t| {
            vec![
                l(&t.label),
                r(fmt_count(t.requests)),
                r(fmt_count(t.passed)),
                r(fmt_count(t.failed)).color(pass_color(t.failed.map(|f| f == 0))),
                r(fmt_count(t.received)),
                r(fmt_count(t.contaminated)).color(t.contaminated.filter(|c| *c > 0).map(|_| RED)),
                r(fmt_rate(t.rate)),
                l(fmt_rate_ci(t.rate_ci.as_ref())),
                r(fmt_p(t.p_candidate_worse)),
                r(fmt_p(t.p_candidate_better)),
            ]
        })
        .collect();
    table(out, "  ", &head, &trows, color);
    let _ = writeln!(
        out,
        "  p worse / p better: one-sided p that the candidate's failure rate is higher / lower than the baseline's"
    );
    for run in &v.runs {
        for line in View::run_lines(run) {
            let _ = writeln!(out, "  {}: {line}", run.key);
        }
    }
    let _ = writeln!(out);
}

fn references(out: &mut String, v: &View, color: bool) {
    let Some(rc) = &v.references else {
        return;
    };
    let _ = writeln!(
        out,
        "{} {}",
        paint("reference pairs", Some(BOLD), color),
        View::reference_summary(rc)
    );
    for (pair, line) in View::divergence_lines(rc) {
        let (m, c) = match pair {
            PairMark::Pass => (mark(Some(true)), GREEN),
            PairMark::Fail => (mark(Some(false)), RED),
            // Passed by the policy, yet a hard divergence: never a ✓.
            PairMark::Counted => ("⚠", YELLOW),
        };
        let _ = writeln!(out, "  {} {line}", paint(m, Some(c), color));
    }
    let _ = writeln!(out);
}

fn quality(out: &mut String, v: &View, color: bool) {
    let Some(q) = &v.quality else {
        return;
    };
    let _ = writeln!(out, "{}", paint("output quality", Some(BOLD), color));
    for (outcome, line) in View::quality_lines(q) {
        let _ = writeln!(out, "  {outcome:<12} {line}");
    }
    let _ = writeln!(out);
}

/// The gate table (gates that decide nothing marked so) and each failed
/// part of a deciding gate.
fn gates(out: &mut String, v: &View, color: bool) {
    let _ = writeln!(out, "{}", paint("gates", Some(BOLD), color));
    let grows: Vec<Vec<C>> = v
        .gate_rows()
        .into_iter()
        .map(|g| {
            let c = if g.deciding {
                outcome_color(&g.outcome)
            } else {
                Some(DIM)
            };
            vec![
                l(g.name),
                l(format!("{} {}", g.mark(), g.outcome)).color(c),
                l(g.note),
            ]
        })
        .collect();
    table(out, "  ", &[l("gate"), l("result"), l("")], &grows, color);
    for (gate, subject, reason) in v.deciding_failed_parts() {
        let _ = writeln!(
            out,
            "  {} {gate}: {subject}: {reason}",
            paint("✗", Some(RED), color)
        );
    }
    let _ = writeln!(out);
}

fn outcome_color(outcome: &str) -> Option<&'static str> {
    match outcome {
        "pass" => Some(GREEN),
        "fail" => Some(RED),
        _ => Some(YELLOW),
    }
}

/// The evidence gate's parts, what would decide it, and its design: in
/// one line unless `verbose`.
fn evidence(out: &mut String, v: &View, color: bool, verbose: bool) {
    let Some(e) = v.evidence() else {
        return;
    };
    let c = outcome_color(&e.outcome);
    let _ = writeln!(out, "evidence gate   {}", paint(&e.outcome, c, color));
    for (subject, outcome, reason) in &e.parts {
        let _ = writeln!(out, "  {outcome:<12} {subject}: {reason}");
    }
    if let Some(n) = e.requests_to_resolve {
        let _ = writeln!(out, "  about {n} requests per side would decide it");
    }
    if let Some(why) = e.estimates {
        let _ = writeln!(out, "  {why}");
    }
    match (&e.design, &e.design_summary) {
        (Some(d), _) if verbose => {
            let _ = writeln!(out, "  design: {d}");
        }
        (_, Some(s)) => {
            let _ = writeln!(out, "  design: {s} — the whole of it with --verbose");
        }
        _ => {}
    }
    let _ = writeln!(out);
}

/// Qualification (coloured), promotion, the human decision and who made it.
fn decision(out: &mut String, v: &View, color: bool) {
    let qual_color = match v.qualification.as_deref() {
        Some("pass") => Some(GREEN),
        Some(q) if q.starts_with("pass") => Some(YELLOW),
        _ => Some(RED),
    };
    let _ = writeln!(
        out,
        "qualification   {}",
        paint(
            v.qualification.as_deref().unwrap_or(DASH),
            qual_color,
            color
        )
    );
    let _ = writeln!(
        out,
        "promotion       {}",
        v.promotion.as_deref().unwrap_or(DASH)
    );
    let _ = writeln!(
        out,
        "human decision  {}",
        v.human_decision.as_deref().unwrap_or(DASH)
    );
    if let Some(d) = &v.decision {
        let who = d.who.as_deref().unwrap_or("?");
        let when = d.when.as_deref().unwrap_or("?");
        if d.who.is_some() || d.when.is_some() {
            let _ = writeln!(out, "decided by      {who} at {when}");
        }
    }
}

/// Whether the report's numbers agree with each other, and where not.
fn verification(out: &mut String, v: &View, color: bool) {
    if v.disagreements.is_empty() {
        let _ = writeln!(
            out,
            "verification    {}",
            paint(
                "✓ the report's numbers agree with each other",
                Some(GREEN),
                color
            )
        );
        return;
    }
    let _ = writeln!(
        out,
        "verification    {}",
        paint(
            &format!("✗ {} disagreement(s)", v.disagreements.len()),
            Some(RED),
            color
        )
    );
    for d in &v.disagreements {
        let _ = writeln!(out, "  {d}");
    }
}
