//! What every rendered report must keep: it verifies, renders in every
//! format, its HTML carries only the renderer's own tags and its Markdown
//! tables keep their header's number of cells. Shared by the targets that
//! make or read reports.

use serde_json::Value;

use crate::report;

/// Verify and render one report value, checking the renderers' promises.
pub(super) fn check_report_value(value: &Value) {
    for d in report::verify(value) {
        assert!(!d.expected.is_empty(), "disagreement without expectation");
        let _ = d.to_string();
    }
    for (color, verbose) in [(true, true), (false, false)] {
        let _ = report::terminal(value, report::TerminalOptions { color, verbose });
    }
    check_markdown(&report::markdown(value));
    check_html(&report::html(value));
}

/// The tags the HTML renderer writes itself; any other tag came from a string
/// in the report that was not escaped.
const HTML_TAGS: &[&str] = &[
    "!doctype", "a", "b", "body", "circle", "code", "details", "div", "h1", "h2", "h3", "head",
    "html", "li", "line", "meta", "p", "polyline", "rect", "span", "style", "summary", "svg",
    "table", "td", "text", "th", "title", "tr", "ul",
];

fn check_html(html: &str) {
    let bytes = html.as_bytes();
    for (i, _) in html.match_indices('<') {
        let rest = &bytes[i + 1..];
        let rest = rest.strip_prefix(b"/").unwrap_or(rest);
        let name: String = rest
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'!')
            .map(|b| b.to_ascii_lowercase() as char)
            .collect();
        assert!(
            HTML_TAGS.contains(&name.as_str()),
            "HTML has a tag <{name}> the renderer does not write (unescaped report text?) near {:?}",
            &html[i..html.len().min(i + 60)]
        );
    }
}

/// Cells of one Markdown table row: `|` not escaped by a backslash.
fn md_cells(line: &str) -> usize {
    let mut n = 0;
    let mut escaped = false;
    for c in line.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '|' if !escaped => n += 1,
            _ => escaped = false,
        }
    }
    n
}

fn check_markdown(md: &str) {
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        // A table: a row, then the delimiter row, then rows until a line that is no row.
        let is_table = lines[i].starts_with('|')
            && lines
                .get(i + 1)
                .is_some_and(|l| l.starts_with("| ---") || l.starts_with("| :--"));
        if !is_table {
            i += 1;
            continue;
        }
        let cells = md_cells(lines[i]);
        let mut j = i + 1;
        while j < lines.len() && !lines[j].trim().is_empty() {
            assert!(
                lines[j].starts_with('|') && md_cells(lines[j]) == cells,
                "Markdown table row {j} does not have the header's {cells} cells: {:?}\nheader: {:?}",
                lines[j],
                lines[i]
            );
            j += 1;
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_and_markdown_checks_catch_what_they_should() {
        assert!(std::panic::catch_unwind(|| check_html("<p>ok</p><script>")).is_err());
        check_html("<p>a &lt;script&gt;</p>");
        check_markdown("| a | b |\n| --- | --- |\n| 1 | 2 \\| 3 |\n\ntext | x\n");
        let broken = "| a | b |\n| --- | --- |\n| `x\ny` | 2 |\n";
        assert!(std::panic::catch_unwind(|| check_markdown(broken)).is_err());
    }
}
