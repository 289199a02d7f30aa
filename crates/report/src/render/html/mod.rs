//! One self-contained HTML page: inline CSS, inline SVG plots, no scripts,
//! no external assets. Every string from the report is escaped.
//!
//! Here the page, its sections and tables; the SVG plots (per-request
//! values, values over the run, the server's gauges, the turnover failure
//! rates) in `plot`, a capacity cell's attainment curves in `capacity`.

use std::fmt::Write;

use super::view::{CellView, PairMark, TurnoverRow, View};
use super::*;

mod capacity;
mod plot;

use plot::{gauges, sample_plots, time_series, turnover_plot};

const CSS: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
h3{font-size:1rem;margin:1.2rem 0 .3rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}.unknown{color:#6e7781}
.v-improved,.v-equivalent{color:#1a7f37}.v-regressed{color:#cf222e}.v-inconclusive{color:#9a6700}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:1rem;font-weight:600;margin-right:.4rem}
.badge.pass{background:#dafbe1}.badge.fail{background:#ffebe9}.badge.unknown{background:#eaeef2}.badge.inconclusive{background:#fff8c5}
.notice{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .8rem;border-radius:.3rem}
.plots{display:flex;flex-wrap:wrap;gap:.5rem}svg{background:#fbfcfd;border:1px solid #eaeef2}
.legend span{display:inline-block;width:.8rem;height:.8rem;border-radius:50%;margin:0 .3rem 0 .8rem;vertical-align:middle}
.small{color:#57606a;font-size:.9em}
";

/// Output quality and where each differing reference pair diverged (both
/// tokens with their logprobs and the gaps), folded under its summary.
fn quality_section(out: &mut String, v: &View) {
    if v.quality.is_none() && v.references.is_none() {
        return;
    }
    let _ = writeln!(out, "<h2>Output quality</h2>");
    if let Some(q) = &v.quality {
        out.push_str("<ul>\n");
        for (outcome, line) in View::quality_lines(q) {
            let _ = writeln!(
                out,
                "<li><b>{}</b> {}</li>",
                escape(&outcome),
                escape(&line)
            );
        }
        out.push_str("</ul>\n");
    }
    if let Some(rc) = &v.references {
        let _ = writeln!(
            out,
            "<details><summary>reference pairs: {}</summary><ul>",
            escape(&View::reference_summary(rc))
        );
        for (pair, line) in View::divergence_lines(rc) {
            let (class, mark) = match pair {
                PairMark::Pass => ("pass", ""),
                PairMark::Fail => ("fail", "✗ "),
                // Passed by the policy, yet a hard divergence: never "pass".
                PairMark::Counted => ("v-inconclusive", "⚠ "),
            };
            let _ = writeln!(
                out,
                "<li><b class=\"{class}\">{mark}{}</b> {}</li>",
                pair.word(),
                escape(&line)
            );
        }
        out.push_str("</ul></details>\n");
    }
}

/// Escape text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn class_of(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "pass",
        Some(false) => "fail",
        None => "unknown",
    }
}

fn mark(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "✓",
        Some(false) => "✗",
        None => "?",
    }
}

/// A gate's badge: "pass", "fail", "inconclusive" or "unknown".
fn outcome_badge(label: &str, outcome: &str) -> String {
    let (class, mark) = match outcome {
        "pass" => ("pass", "✓"),
        "fail" => ("fail", "✗"),
        "inconclusive" => ("inconclusive", "?"),
        o if o.starts_with(super::view::NOT_RUN) => ("unknown", "–"),
        _ => ("unknown", "?"),
    };
    format!(
        "<span class=\"badge {class}\">{mark} {}: {}</span>",
        escape(label),
        escape(outcome)
    )
}

/// One cell: counts and eligibility, the metric table, SLO/slice/server
/// lines, time series, gauges and the per-request plots.
fn cell_section(out: &mut String, c: &CellView, ci_head: &str) {
    cell_header(out, c);
    metric_table(out, c, ci_head);
    for line in c.slo_lines().into_iter().chain(c.slice_lines()) {
        let _ = writeln!(out, "<p class=\"small slo\">{}</p>", escape(&line));
    }
    // Server detail folded; what fails a check is in the summary line.
    let server = c.server_lines();
    if !server.is_empty() {
        let _ = writeln!(
            out,
            "<details class=\"small\"><summary>{}</summary>",
            escape(&c.server_summary_lines("inside").join("; "))
        );
        for line in server {
            let _ = writeln!(out, "<p class=\"small slo\">{}</p>", escape(&line));
        }
        out.push_str("</details>\n");
    }
    capacity::capacity(out, c);
    time_series(out, c);
    gauges(out, c);
    sample_plots(out, c);
}

/// The cell's name, request counts, and why a side is not eligible.
fn cell_header(out: &mut String, c: &CellView) {
    let _ = writeln!(out, "<h3>Cell <code>{}</code></h3>", escape(&c.name));
    let _ = writeln!(
        out,
        "<p class=\"small\">requests: {} baseline / {} candidate · median prompt tokens: {} · eligible: baseline <span class=\"{}\">{}</span> candidate <span class=\"{}\">{}</span></p>",
        fmt_count(c.baseline_requests),
        fmt_count(c.candidate_requests),
        escape(
            &c.median_prompt_tokens
                .map_or(DASH.into(), |m| format!("{m}"))
        ),
        class_of(c.baseline_eligible),
        mark(c.baseline_eligible),
        class_of(c.candidate_eligible),
        mark(c.candidate_eligible),
    );
    for (side, reasons) in [
        ("baseline", &c.baseline_reasons),
        ("candidate", &c.candidate_reasons),
    ] {
        if !reasons.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"notice\">{side} not eligible: {}</p>",
                escape(&reasons.join("; "))
            );
        }
    }
}

fn metric_table(out: &mut String, c: &CellView, ci_head: &str) {
    // A capacity cell has no metrics: its lines and curves stand instead.
    if c.metrics.is_empty() && c.capacity.is_some() {
        return;
    }
    let (interval_head, decision_head) = c.decision_headings(ci_head);
    let _ = writeln!(
        out,
        "<table><tr><th>metric</th><th>baseline</th><th>candidate</th><th>n</th><th>point delta</th><th>{}</th><th>{decision_head}</th><th>seed flag (point vs T)</th></tr>",
        escape(&interval_head)
    );
    for m in &c.metrics {
        let n = match (m.baseline_n, m.candidate_n) {
            (Some(b), Some(c)) => format!("{b}/{c}"),
            _ => DASH.into(),
        };
        let d = m.decision_cells();
        let verdict = d.decision.as_str();
        let resolve = match (verdict, d.resolve) {
            ("inconclusive", Some(n)) => {
                format!(" <span class=\"small\">(~{n} requests/side to resolve)</span>")
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"v-{}\">{}{resolve}</td><td class=\"small\">{}</td></tr>",
            escape(&m.name),
            escape(&fmt_value(m.baseline)),
            escape(&fmt_value(m.candidate)),
            n,
            escape(&fmt_delta(m.delta_percent)),
            escape(&d.interval),
            escape(verdict),
            escape(verdict),
            escape(&d.seed_flag),
        );
    }
    out.push_str("</table>\n");
}

pub(super) fn render(v: &View) -> String {
    let mut out = String::new();
    page_head(&mut out, v);
    gates(&mut out, v);
    failed_checks(&mut out, v);
    evidence(&mut out, v);
    decision(&mut out, v);
    verification(&mut out, v);
    for w in &v.warnings {
        let _ = writeln!(out, "<p class=\"notice\">warning: {}</p>", escape(w));
    }
    cells(&mut out, v);
    quality_section(&mut out, v);
    turnover(&mut out, v);
    method(&mut out, v);
    provenance(&mut out, v);
    out.push_str("</body>\n</html>\n");
    out
}

/// The document head (title, inline CSS), the heading and the images table.
fn page_head(out: &mut String, v: &View) {
    let title = format!("Runtime comparison: {}", v.headline());
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>",
        escape(&title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    let _ = writeln!(
        out,
        "<table><tr><th>baseline</th><td><code>{}</code></td></tr><tr><th>candidate</th><td><code>{}</code></td></tr><tr><th>schema</th><td><code>{}</code></td></tr></table>",
        escape(v.baseline_image.as_deref().unwrap_or(DASH)),
        escape(v.candidate_image.as_deref().unwrap_or(DASH)),
        escape(v.schema.as_deref().unwrap_or(DASH)),
    );
}

/// A badge per deciding gate; the gates beside the verdict in a muted line.
fn gates(out: &mut String, v: &View) {
    let _ = writeln!(out, "<h2>Gates</h2>\n<p>");
    let rows = v.gate_rows();
    for g in rows.iter().filter(|g| g.deciding) {
        out.push_str(&outcome_badge(g.name, &g.outcome));
    }
    out.push_str("</p>\n");
    for g in rows.iter().filter(|g| !g.deciding) {
        let _ = writeln!(
            out,
            "<p class=\"small\">{}: {} ({})</p>",
            escape(g.name),
            escape(&g.outcome),
            escape(&g.note)
        );
    }
}

fn failed_checks(out: &mut String, v: &View) {
    let failed = v.deciding_failed_parts();
    if failed.is_empty() {
        return;
    }
    out.push_str("<table><tr><th>gate</th><th>failed check</th><th>why</th></tr>\n");
    for (gate, subject, reason) in failed {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            escape(&gate),
            escape(&subject),
            escape(&reason)
        );
    }
    out.push_str("</table>\n");
}

fn evidence(out: &mut String, v: &View) {
    let Some(e) = v.evidence() else {
        return;
    };
    let _ = writeln!(
        out,
        "<h3>Evidence gate: {}</h3>\n<table><tr><th>outcome</th><th>subject</th><th>reason</th></tr>",
        escape(&e.outcome)
    );
    for (subject, outcome, reason) in &e.parts {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            escape(outcome),
            escape(subject),
            escape(reason)
        );
    }
    out.push_str("</table>\n");
    if let Some(n) = e.requests_to_resolve {
        let _ = writeln!(out, "<p>About {n} requests per side would decide it.</p>");
    }
    if !e.cost.is_empty() {
        let lines: Vec<String> = e.cost.iter().map(|c| escape(c.trim())).collect();
        let _ = writeln!(out, "<p class=\"small\">{}</p>", lines.join("<br>"));
    }
    if let Some(why) = e.estimates {
        let _ = writeln!(out, "<p class=\"small\">{}</p>", escape(why));
    }
    // The design's one line shown, the whole of it folded beneath.
    if let (Some(d), Some(summary)) = (&e.design, &e.design_summary) {
        let _ = writeln!(
            out,
            "<details><summary>Design: {}</summary><p>{}</p></details>",
            escape(summary),
            escape(d)
        );
    }
}

/// Qualification, promotion, the human decision and who made it.
fn decision(out: &mut String, v: &View) {
    let _ = writeln!(
        out,
        "<table><tr><th>qualification</th><td>{}</td></tr><tr><th>promotion</th><td>{}</td></tr><tr><th>human decision</th><td>{}</td></tr>",
        escape(v.qualification.as_deref().unwrap_or(DASH)),
        escape(v.promotion.as_deref().unwrap_or(DASH)),
        escape(v.human_decision.as_deref().unwrap_or(DASH)),
    );
    // An undecided report has no who or when: nothing to print beside "pending".
    if let Some(d) = v
        .decision
        .as_ref()
        .filter(|d| d.who.is_some() || d.when.is_some())
    {
        let _ = writeln!(
            out,
            "<tr><th>decision</th><td>{} by {} at {}{}</td></tr>",
            escape(d.action.as_str()),
            escape(d.who.as_deref().unwrap_or("?")),
            escape(d.when.as_deref().unwrap_or("?")),
            d.note
                .as_deref()
                .map_or(String::new(), |n| format!(": {}", escape(n)))
        );
    }
    out.push_str("</table>\n");
}

/// Whether the report's numbers agree with each other, and where not.
fn verification(out: &mut String, v: &View) {
    if v.disagreements.is_empty() {
        out.push_str(
            "<p class=\"pass\">✓ Verification: the report's numbers agree with each other.</p>\n",
        );
        return;
    }
    let _ = writeln!(
        out,
        "<p class=\"fail\">✗ Verification: {} disagreement(s)</p><ul>",
        v.disagreements.len()
    );
    for d in &v.disagreements {
        let _ = writeln!(
            out,
            "<li><code>{}</code>: found {}, expected {}</li>",
            escape(&d.path),
            escape(&d.found),
            escape(&d.expected)
        );
    }
    out.push_str("</ul>\n");
}

fn cells(out: &mut String, v: &View) {
    let _ = writeln!(out, "<h2>Performance cells</h2>");
    if v.cells.is_empty() {
        out.push_str("<p class=\"notice\">No cells.</p>\n");
    }
    let ci_head = ci_heading(v);
    for c in &v.cells {
        cell_section(out, c, &ci_head);
    }
}

/// The turnover table, how it is computed, a plot of the failure rates
/// (or a sentence when nothing failed) and each run's failures.
fn turnover(out: &mut String, v: &View) {
    let rows = v.turnover_rows();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>Turnover</h2>");
    turnover_table(out, v, &rows);
    let _ = writeln!(
        out,
        "<p class=\"small\">Failure rate = failed / requests with Clopper–Pearson intervals; p worse / p better: one-sided Fisher exact p that the candidate's failure rate is higher / lower than the baseline's (its runs of the same workload pooled){}.</p>",
        if v.turnover_computed {
            "; computed here from the report's counts"
        } else {
            ""
        }
    );
    // All-zero bars say nothing a sentence does not: the intervals are the news.
    if rows.iter().all(|r| r.failed == Some(0)) {
        let _ = writeln!(
            out,
            "<p class=\"small\">No turnover request failed on either side; the table's intervals bound the failure rates these counts allow.</p>"
        );
    } else {
        out.push_str(&turnover_plot(&rows));
        out.push('\n');
    }
    let lines: Vec<String> = v
        .runs
        .iter()
        .flat_map(|r| {
            View::failure_summary(r)
                .into_iter()
                .map(move |l| format!("<li><code>{}</code>: {}</li>", escape(&r.key), escape(&l)))
        })
        .collect();
    if !lines.is_empty() {
        let _ = writeln!(out, "<h3>Failures</h3><ul>{}</ul>", lines.join(""));
    }
}

fn turnover_table(out: &mut String, v: &View, rows: &[TurnoverRow]) {
    let _ = writeln!(
        out,
        "<table><tr><th>run</th><th>requests</th><th>passed</th><th>failed</th><th>received</th><th>contaminated</th><th>failure rate</th><th>{:.0}% CI</th><th>p worse</th><th>p better</th><th>p two-sided</th></tr>",
        v.turnover.confidence * 100.0
    );
    for t in rows {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n {}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&t.label),
            fmt_count(t.requests),
            fmt_count(t.passed),
            class_of(t.failed.map(|f| f == 0)),
            fmt_count(t.failed),
            fmt_count(t.received),
            fmt_count(t.contaminated),
            escape(&fmt_rate(t.rate)),
            escape(&fmt_rate_ci(t.rate_ci.as_ref())),
            escape(&fmt_p(t.p_candidate_worse)),
            escape(&fmt_p(t.p_candidate_better)),
            escape(&fmt_p(t.p_two_sided)),
        );
    }
    out.push_str("</table>\n");
}

/// The statistical method the report says it used.
fn method(out: &mut String, v: &View) {
    let Some(st) = &v.statistics else {
        return;
    };
    let _ = writeln!(out, "<h2>Method</h2><table>");
    for (k, val) in [
        ("percentile method", st.percentile_method.clone()),
        ("delta_percent", st.delta_percent.clone()),
        (
            "bootstrap",
            format!(
                "{} iterations, confidence {}, seed {}; {}",
                st.bootstrap.iterations,
                st.bootstrap.confidence,
                st.bootstrap.seed,
                st.bootstrap_statistic
            ),
        ),
        ("verdict rule", st.verdict_rule.clone()),
        ("regression flag", st.regression_flag_rule.clone()),
        ("turnover test", st.turnover_test.clone()),
        ("turnover interval", st.turnover_interval.clone()),
    ] {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(k),
            escape(&val)
        );
    }
    out.push_str("</table>\n");
}

/// Where each side's numbers came from, side by side.
fn provenance(out: &mut String, v: &View) {
    let Some(p) = &v.provenance else {
        return;
    };
    let _ = writeln!(
        out,
        "<h2>Provenance</h2><table><tr><th></th><th>baseline</th><th>candidate</th></tr>"
    );
    let (b, c) = (&p.baseline, &p.candidate);
    let opt = |x: &Option<String>| x.clone().unwrap_or_else(|| DASH.into());
    for (k, bv, cv) in [
        ("target", b.target.clone(), c.target.clone()),
        ("model", b.model.clone(), c.model.clone()),
        ("runtime", opt(&b.runtime), opt(&c.runtime)),
        ("image", opt(&b.image), opt(&c.image)),
        ("server build", opt(&b.server_build), opt(&c.server_build)),
        ("suite", b.suite.clone(), c.suite.clone()),
        ("suite sha256", opt(&b.suite_sha256), opt(&c.suite_sha256)),
        (
            "tool version",
            b.tool_version.clone(),
            c.tool_version.clone(),
        ),
        ("host", b.host.clone(), c.host.clone()),
        ("started", b.started_at.clone(), c.started_at.clone()),
        ("ended", b.ended_at.clone(), c.ended_at.clone()),
    ] {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td><code>{}</code></td><td><code>{}</code></td></tr>",
            escape(k),
            escape(&bv),
            escape(&cv)
        );
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::escape;
    use serde_json::Value;

    fn seed() -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/runtime-profile-comparison.example.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn an_undecided_report_shows_no_who_or_when() {
        let mut r = seed();
        r["decision"] = serde_json::json!({"action": "pending"});
        let html = super::super::html(&r, Vec::new());
        assert!(
            !html.contains("by ? at ?"),
            "undecided: nothing beside pending"
        );
        r["decision"] =
            serde_json::json!({"action": "promote", "who": "ops", "when": "2026-01-01"});
        assert!(super::super::html(&r, Vec::new()).contains("by ops at 2026-01-01"));
    }

    #[test]
    fn turnover_without_failures_is_a_sentence_not_empty_bars() {
        let mut r = seed();
        assert!(
            super::super::html(&r, Vec::new()).contains("<title>turnover failure rates</title>")
        );
        for k in [
            "baseline_turnover",
            "candidate_turnover",
            "candidate_turnover_repeat",
        ] {
            r[k]["failed"] = 0.into();
            r[k]["exact_output_passed"] = r[k]["requests"].clone();
            r[k]["failures"] = serde_json::json!([]);
        }
        let html = super::super::html(&r, Vec::new());
        assert!(!html.contains("<title>turnover failure rates</title>"));
        assert!(html.contains("No turnover request failed on either side"));
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
