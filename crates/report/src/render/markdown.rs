//! GitHub-flavoured Markdown for a job summary.

use std::fmt::Write;

use super::view::{CellView, PairMark, View};
use super::*;

/// Report text as Markdown: it shows as itself wherever it lands (a table
/// cell, a list item, a heading) and opens nothing. `<`, `>` and `&` become
/// entities, so no tag or entity in it is parsed (GitHub renders inline
/// HTML in job summaries); what GitHub reads as inline markup (emphasis,
/// strikethrough, links, images, code, math, table cells) is
/// backslash-escaped; a line break becomes a space, so no text starts a
/// block (the renderers' input holds none: `text::visible_value`).
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if !push_entity(&mut out, ch) {
            if matches!(
                ch,
                '|' | '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '!' | '#' | '$'
            ) {
                out.push('\\');
            }
            out.push(ch);
        }
    }
    out
}

/// The escapes Markdown and raw HTML share: `&`, `<` and `>` as entities, a
/// line break as a space. False when `ch` is none of them.
fn push_entity(out: &mut String, ch: char) -> bool {
    match ch {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '\n' | '\r' => out.push(' '),
        _ => return false,
    }
    true
}

/// Report text inside a raw HTML line (`<details><summary>…`), where
/// Markdown's backslash escapes do not apply: entities only.
fn md_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if !push_entity(&mut out, ch) {
            out.push(ch);
        }
    }
    out
}

fn code(s: &str) -> String {
    // Inside a code span a backslash is literal, yet GitHub's table splitter
    // still reads `\\|` as an escaped backslash then a bare pipe: such text
    // goes out as escaped plain text instead.
    if s.contains('\\') {
        return md(s);
    }
    // Inline code cannot escape backticks; replace them. Pipes and line breaks
    // break tables (a line break in a metric name split its row: found by fuzzing).
    format!(
        "`{}`",
        s.replace('`', "'")
            .replace(['\n', '\r'], " ")
            .replace('|', "\\|")
    )
}

fn mark(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "✅",
        Some(false) => "❌",
        None => "❔",
    }
}

/// A gate's mark as the rest of the Markdown marks: emoji where it decides.
fn gate_mark(g: &view::GateRow) -> &'static str {
    match (g.deciding, g.outcome.as_str()) {
        (false, _) => "·",
        (true, "pass") => mark(Some(true)),
        (true, "fail") => mark(Some(false)),
        (true, _) if g.not_run() => "➖",
        _ => mark(None),
    }
}

fn row(out: &mut String, cells: &[String]) {
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

fn head(out: &mut String, cells: &[(&str, bool)]) {
    row(
        out,
        &cells.iter().map(|(c, _)| c.to_string()).collect::<Vec<_>>(),
    );
    row(
        out,
        &cells
            .iter()
            .map(|(_, right)| if *right { "---:".into() } else { "---".into() })
            .collect::<Vec<_>>(),
    );
}

pub(super) fn render(v: &View) -> String {
    let mut out = String::new();
    header(&mut out, v);
    gates(&mut out, v);
    failed_checks(&mut out, v);
    let ci_head = ci_heading(v);
    for c in &v.cells {
        cell_section(&mut out, c, &ci_head);
    }
    turnover(&mut out, v);
    references(&mut out, v);
    quality(&mut out, v);
    evidence(&mut out, v);
    decision(&mut out, v);
    verification(&mut out, v);
    for w in &v.warnings {
        let _ = writeln!(out, "\n> **warning:** {}", md(w));
    }
    out
}

/// Headline, the two images and the schema, then the verdict as a text block.
fn header(out: &mut String, v: &View) {
    let _ = writeln!(out, "## Runtime comparison: {}\n", md(&v.headline()));
    let _ = writeln!(
        out,
        "- baseline: {}\n- candidate: {}\n- schema: {}\n",
        code(v.baseline_image.as_deref().unwrap_or(DASH)),
        code(v.candidate_image.as_deref().unwrap_or(DASH)),
        code(v.schema.as_deref().unwrap_or(DASH)),
    );
    let lines = v.verdict_lines();
    let fence = fence_for(&lines);
    let _ = writeln!(out, "{fence}text");
    for line in &lines {
        // No line break may end the block early (its text holds none:
        // `text::visible_value`; the renderer's lines are single lines).
        let _ = writeln!(out, "{}", line.replace(['\n', '\r'], " "));
    }
    let _ = writeln!(out, "{fence}\n");
}

/// A code fence longer than any run of backticks in `lines`: report text
/// inside the block cannot close it.
fn fence_for(lines: &[String]) -> String {
    let longest = lines
        .iter()
        .flat_map(|l| l.split(|c| c != '`'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// The gate table: every gate, those that decide nothing marked so.
fn gates(out: &mut String, v: &View) {
    let _ = writeln!(out, "| gate | result | |\n| --- | --- | --- |");
    for g in v.gate_rows() {
        row(
            out,
            &[
                g.name.to_string(),
                format!("{} {}", gate_mark(&g), md(&g.outcome)),
                md(&g.note),
            ],
        );
    }
    let _ = writeln!(out);
}

fn failed_checks(out: &mut String, v: &View) {
    let failed = v.deciding_failed_parts();
    if !failed.is_empty() {
        let _ = writeln!(out, "Failed checks:\n");
        for (gate, subject, reason) in failed {
            let _ = writeln!(out, "- {}: {}: {}", md(&gate), code(&subject), md(&reason));
        }
        let _ = writeln!(out);
    }
}

/// One cell: its request counts, the metric table, SLO/slice/server lines and
/// why a side is not eligible.
fn cell_section(out: &mut String, c: &CellView, ci_head: &str) {
    let _ = writeln!(out, "### Cell {}\n", code(&c.name));
    let _ = writeln!(
        out,
        "Requests: {} baseline / {} candidate · median prompt tokens: {} · eligible: baseline {} candidate {}\n",
        fmt_count(c.baseline_requests),
        fmt_count(c.candidate_requests),
        c.median_prompt_tokens
            .map_or(DASH.into(), |m| format!("{m}")),
        mark(c.baseline_eligible),
        mark(c.candidate_eligible),
    );
    if c.capacity.is_none() {
        metric_table(out, c, ci_head);
    }
    let slo: Vec<String> = c
        .capacity_lines()
        .into_iter()
        .chain(c.slo_lines())
        .chain(c.slice_lines())
        .collect();
    if !slo.is_empty() {
        out.push('\n');
        for line in slo {
            let _ = writeln!(out, "- {}", md(&line));
        }
    }
    // Server detail folded: a job summary is read for its verdict.
    let server = c.server_lines();
    if !server.is_empty() {
        let summary = c.server_summary_lines("inside").join("; ");
        let _ = writeln!(out, "\n<details><summary>{}</summary>\n", md_html(&summary));
        for line in server {
            let _ = writeln!(out, "- {}", md(&line));
        }
        let _ = writeln!(out, "\n</details>");
    }
    for (side, reasons) in [
        ("baseline", &c.baseline_reasons),
        ("candidate", &c.candidate_reasons),
    ] {
        if !reasons.is_empty() {
            let _ = writeln!(out, "\n{side} not eligible: {}", md(&reasons.join("; ")));
        }
    }
    let _ = writeln!(out);
}

fn metric_table(out: &mut String, c: &CellView, ci_head: &str) {
    let (interval_head, decision_head) = c.decision_headings(ci_head);
    head(
        out,
        &[
            ("metric", false),
            ("baseline", true),
            ("candidate", true),
            ("n", true),
            ("point delta", true),
            (&interval_head, false),
            (decision_head, false),
            ("seed flag (point vs T)", false),
        ],
    );
    for m in &c.metrics {
        let n = match (m.baseline_n, m.candidate_n) {
            (Some(b), Some(c)) => format!("{b}/{c}"),
            _ => DASH.into(),
        };
        let d = m.decision_cells();
        let mut verdict = d.decision.clone();
        if let ("inconclusive", Some(n)) = (d.decision.as_str(), d.resolve) {
            verdict.push_str(&format!(" (~{n} req/side to resolve)"));
        }
        row(
            out,
            &[
                code(&m.name),
                fmt_value(m.baseline),
                fmt_value(m.candidate),
                n,
                fmt_delta(m.delta_percent),
                md(&d.interval),
                md(&verdict),
                md(&d.seed_flag),
            ],
        );
    }
}

/// The turnover table, how its columns are computed, and each run's failures.
fn turnover(out: &mut String, v: &View) {
    let rows = v.turnover_rows();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### Turnover\n");
    head(
        out,
        &[
            ("run", false),
            ("requests", true),
            ("passed", true),
            ("failed", true),
            ("received", true),
            ("contaminated", true),
            ("failure rate", true),
            ("CI", false),
            ("p worse", true),
            ("p better", true),
        ],
    );
    for t in &rows {
        row(
            out,
            &[
                code(&t.label),
                fmt_count(t.requests),
                fmt_count(t.passed),
                fmt_count(t.failed),
                fmt_count(t.received),
                fmt_count(t.contaminated),
                fmt_rate(t.rate),
                fmt_rate_ci(t.rate_ci.as_ref()),
                fmt_p(t.p_candidate_worse),
                fmt_p(t.p_candidate_better),
            ],
        );
    }
    let _ = writeln!(
        out,
        "\nFailure rate = failed / requests, with {:.0}% Clopper–Pearson intervals. p worse / p better: one-sided Fisher exact p that the candidate's failure rate is higher / lower than the baseline's{}.\n",
        v.turnover.confidence * 100.0,
        if v.turnover_computed {
            " (computed from the report's counts)"
        } else {
            ""
        }
    );
    for run in &v.runs {
        for line in View::run_lines(run) {
            let _ = writeln!(out, "- {}: {}", code(&run.key), md(&line));
        }
    }
    let _ = writeln!(out);
}

fn references(out: &mut String, v: &View) {
    if let Some(rc) = &v.references {
        let _ = writeln!(out, "### Reference pairs\n");
        let _ = writeln!(out, "{}\n", md(&View::reference_summary(rc)));
        for (pair, line) in View::divergence_lines(rc) {
            let mark = match pair {
                PairMark::Pass => "pass".to_string(),
                // Passed by the policy, yet a hard divergence: never "pass".
                PairMark::Counted => format!("⚠️ **{}**", pair.word()),
                PairMark::Fail => format!("**{}**", pair.word()),
            };
            let _ = writeln!(out, "- {mark}: {}", md(&line));
        }
        let _ = writeln!(out);
    }
}

fn quality(out: &mut String, v: &View) {
    if let Some(q) = &v.quality {
        let _ = writeln!(out, "### Output quality\n");
        for (outcome, line) in View::quality_lines(q) {
            let _ = writeln!(out, "- {}: {}", md(&outcome), md(&line));
        }
        let _ = writeln!(out);
    }
}

/// The evidence gate's parts and what would decide it; the design's one
/// line shown, the whole of it folded beneath.
fn evidence(out: &mut String, v: &View) {
    if let Some(e) = v.evidence() {
        let _ = writeln!(out, "### Evidence gate: {}\n", md(&e.outcome));
        for (subject, outcome, reason) in &e.parts {
            let _ = writeln!(out, "- {} {}: {}", md(outcome), code(subject), md(reason));
        }
        if let Some(n) = e.requests_to_resolve {
            let _ = writeln!(out, "- about {n} requests per side would decide it");
        }
        if let Some(why) = e.estimates {
            let _ = writeln!(out, "- {}", md(why));
        }
        if let (Some(d), Some(summary)) = (&e.design, &e.design_summary) {
            let _ = writeln!(
                out,
                "\n<details><summary>design: {}</summary>\n\n{}\n\n</details>",
                md_html(summary),
                md(d)
            );
        }
        let _ = writeln!(out);
    }
}

/// Qualification, promotion and the human decision (with who and when).
fn decision(out: &mut String, v: &View) {
    let _ = writeln!(out, "### Decision\n");
    let _ = writeln!(
        out,
        "- qualification: {}",
        md(v.qualification.as_deref().unwrap_or(DASH))
    );
    let _ = writeln!(
        out,
        "- promotion: {}",
        md(v.promotion.as_deref().unwrap_or(DASH))
    );
    let _ = writeln!(
        out,
        "- human decision: {}",
        md(v.human_decision.as_deref().unwrap_or(DASH))
    );
    if let Some(d) = &v.decision
        && (d.who.is_some() || d.when.is_some())
    {
        let _ = writeln!(
            out,
            "- decided by {} at {}",
            md(d.who.as_deref().unwrap_or("?")),
            md(d.when.as_deref().unwrap_or("?"))
        );
    }
    let _ = writeln!(out);
}

/// Whether the report's numbers agree with each other, and where not.
fn verification(out: &mut String, v: &View) {
    if v.disagreements.is_empty() {
        let _ = writeln!(
            out,
            "Verification: ✅ the report's numbers agree with each other."
        );
    } else {
        let _ = writeln!(
            out,
            "Verification: ❌ {} disagreement(s):\n",
            v.disagreements.len()
        );
        for d in &v.disagreements {
            let _ = writeln!(
                out,
                "- {}: found {}, expected {}",
                code(&d.path),
                md(&d.found),
                md(&d.expected)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_keep_table_rows_whole() {
        // Found by fuzzing: a metric name with a line break split its table row.
        assert_eq!(code("e2e_\np50|x"), "`e2e_ p50\\|x`");
        assert_eq!(code("a`b"), "`a'b`");
        // A backslash before a pipe would pair with the pipe's escape.
        assert_eq!(code("a\\|b"), "a\\\\\\|b");
    }

    #[test]
    fn text_opens_no_tag_entity_or_inline_markup() {
        assert_eq!(
            md("<img src=x> &lt; *a* _b_ ~c~ [d](e) !f #g $h$ |i \\j `k`\nl"),
            "&lt;img src=x&gt; &amp;lt; \\*a\\* \\_b\\_ \\~c\\~ \\[d\\](e) \\!f \\#g \\$h\\$ \\|i \\\\j \\`k\\` l"
        );
        // A `<details>` line is raw HTML: backslashes would show, tags would not.
        assert_eq!(md_html("<b>*x*</b> & y"), "&lt;b&gt;*x*&lt;/b&gt; &amp; y");
    }

    #[test]
    fn the_verdict_fence_outlasts_any_backticks_in_it() {
        assert_eq!(fence_for(&["a".into()]), "```");
        assert_eq!(fence_for(&["x ``` y".into(), "````z".into()]), "`````");
    }
}
