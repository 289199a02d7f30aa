//! Renderers of any v1 report: a terminal table, GitHub-flavoured Markdown
//! (for a job summary), one self-contained HTML page, JUnit XML and CSV.
//! Each accepts the seed (no added fields) as well as a full report, as JSON
//! or as a [`Report`]. The terminal, Markdown and HTML views also list
//! `verify`'s disagreements, computed before them and handed in
//! (`crate::rendered` does both); the renderers only display.

use std::borrow::Cow;

use serde_json::Value;

use crate::stats::{Direction, Interval};

use super::checker::Disagreement;
use super::model::Report;

mod checks;
mod csv;
mod estimate;
mod html;
mod junit;
mod markdown;
#[cfg(test)]
mod reading_tests;
mod terminal;
mod view;

pub use html::escape;
pub use view::natural_cmp;

/// Anything a report can be rendered from.
pub trait ReportSource {
    fn report_json(&self) -> Cow<'_, Value>;
}

impl ReportSource for Value {
    fn report_json(&self) -> Cow<'_, Value> {
        Cow::Borrowed(self)
    }
}

impl ReportSource for Report {
    fn report_json(&self) -> Cow<'_, Value> {
        Cow::Owned(self.to_value())
    }
}

/// How the terminal report is drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct TerminalOptions {
    /// ANSI colour.
    pub color: bool,
    /// Every server timing and metrics line, and the evidence gate's design
    /// in full; by default one line per cell unless a check fails (then that
    /// check in full), and the design in one line.
    pub verbose: bool,
}

impl TerminalOptions {
    /// Every line, server detail included.
    pub fn verbose(color: bool) -> TerminalOptions {
        TerminalOptions {
            color,
            verbose: true,
        }
    }
}

/// Aligned tables per cell, the turnover table and the gate summary, of a
/// report as [`shown`] and what `verify` found in it.
pub(crate) fn terminal(
    root: &Value,
    disagreements: Vec<Disagreement>,
    opts: TerminalOptions,
) -> String {
    terminal::render(&view_of(root, disagreements), opts)
}

/// What the renderers display: the report as shown, with what is computed
/// from it ([`view::Checks`]) done before any of them runs.
fn view_of(root: &Value, disagreements: Vec<Disagreement>) -> view::View {
    view::View::from_value(root, view::Checks::of(root, disagreements))
}

/// The report every format draws from: each string and key with its control
/// characters and bidirectional overrides as visible `\u{…}` escapes
/// ([`crate::text::visible_value`]). A report file is untrusted text: a
/// name's line break would otherwise start a Markdown block or a CSV
/// record, its ESC drive a terminal. Each format then escapes what is
/// special to it.
pub(crate) fn shown<R: ReportSource + ?Sized>(report: &R) -> Value {
    crate::text::visible_value(&report.report_json())
}

/// GitHub-flavoured Markdown, fit for `$GITHUB_STEP_SUMMARY`, of a report
/// as [`shown`] and what `verify` found in it.
pub(crate) fn markdown(root: &Value, disagreements: Vec<Disagreement>) -> String {
    markdown::render(&view_of(root, disagreements))
}

/// JUnit XML: the qualification and each part of each deciding gate a test case.
pub fn junit<R: ReportSource + ?Sized>(report: &R) -> String {
    junit::render(&shown(report))
}

/// CSV: (`metrics.csv`, `requests.csv`), one row per cell metric and per recorded request.
pub fn csv<R: ReportSource + ?Sized>(report: &R) -> (String, String) {
    csv::render(&shown(report))
}

/// One self-contained HTML page (inline CSS and SVG, no scripts, no
/// external assets) of a report as [`shown`] and what `verify` found in it.
pub(crate) fn html(root: &Value, disagreements: Vec<Disagreement>) -> String {
    html::render(&view_of(root, disagreements))
}

const DASH: &str = "—";

/// A measured value with about four significant figures.
fn fmt_value(x: Option<f64>) -> String {
    match x {
        None => DASH.into(),
        Some(x) if x.abs() >= 100.0 => format!("{x:.1}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.2}"),
        Some(x) => format!("{x:.3}"),
    }
}

fn fmt_delta(d: Option<f64>) -> String {
    d.map_or(DASH.into(), |d| format!("{d:+.2}%"))
}

fn fmt_ci(ci: Option<&Interval>) -> String {
    ci.map_or(DASH.into(), |c| format!("[{:+.2}, {:+.2}]%", c.low, c.high))
}

fn fmt_rate(r: Option<f64>) -> String {
    r.map_or(DASH.into(), |r| format!("{:.1}%", r * 100.0))
}

fn fmt_rate_ci(ci: Option<&Interval>) -> String {
    ci.map_or(DASH.into(), |c| {
        format!("[{:.1}, {:.1}]%", c.low * 100.0, c.high * 100.0)
    })
}

fn fmt_p(p: Option<f64>) -> String {
    match p {
        None => DASH.into(),
        Some(p) if p < 0.001 => "<0.001".into(),
        Some(p) => format!("{p:.3}"),
    }
}

fn fmt_count(n: Option<u64>) -> String {
    n.map_or(DASH.into(), |n| n.to_string())
}

fn fmt_threshold(t: Option<f64>) -> String {
    t.map_or("?".into(), |t| t.to_string())
}

fn direction_word(d: Option<Direction>) -> &'static str {
    match d {
        Some(Direction::LowerIsBetter) => "lower is better",
        Some(Direction::HigherIsBetter) => "higher is better",
        None => "direction unknown",
    }
}

fn pass_word(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "pass",
        Some(false) => "fail",
        None => "unknown",
    }
}

const CONFIDENCE_FALLBACK: f64 = 0.95;

/// "95%" from the confidence of the first CI found, for column headings.
fn ci_heading(v: &view::View) -> String {
    let c = v
        .cells
        .iter()
        .flat_map(|c| &c.metrics)
        .find_map(|m| m.ci.map(|ci| ci.confidence))
        .or(v.statistics.as_ref().map(|s| s.bootstrap.confidence))
        .unwrap_or(CONFIDENCE_FALLBACK);
    format!("{}% CI", (c * 100.0).round())
}
