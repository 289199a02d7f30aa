//! The terminal, Markdown and HTML views as callers ask for them: the
//! report as shown (its control characters as visible escapes), what
//! `verify` finds in it computed here, and the renderer handed both. The
//! renderers only display what they are given; CSV and JUnit XML, which
//! list no disagreements, are the renderers' own ([`crate::render`]).

use crate::render::{self, ReportSource, TerminalOptions};
use crate::verify::verify;

/// Aligned tables per cell, the turnover table, the gate summary and what
/// `verify` found.
pub fn terminal<R: ReportSource + ?Sized>(report: &R, opts: TerminalOptions) -> String {
    let root = render::shown(report);
    render::terminal(&root, verify(&root), opts)
}

/// GitHub-flavoured Markdown, fit for `$GITHUB_STEP_SUMMARY`.
pub fn markdown<R: ReportSource + ?Sized>(report: &R) -> String {
    let root = render::shown(report);
    render::markdown(&root, verify(&root))
}

/// One self-contained HTML page: inline CSS and SVG, no scripts, no external assets.
pub fn html<R: ReportSource + ?Sized>(report: &R) -> String {
    let root = render::shown(report);
    render::html(&root, verify(&root))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn every_format_shows_control_characters_as_visible_escapes() {
        let v = json!({
            "schema": "runtime-profile-comparison/v1",
            "cells": {"a\u{1b}[31mb\nc": {"metrics": {"ttft_p50_ms": {"baseline": 1.0, "candidate": 1.0}}}},
            "qualification": "pass\u{202E}\u{7}"
        });
        let (metrics, _) = crate::csv(&v);
        for (format, out) in [
            (
                "terminal",
                crate::terminal(&v, crate::TerminalOptions::default()),
            ),
            ("markdown", crate::markdown(&v)),
            ("html", crate::html(&v)),
            ("junit", crate::junit(&v)),
            ("csv", metrics),
        ] {
            assert!(
                !out.contains(['\u{1b}', '\u{7}', '\u{202E}']),
                "{format}: {out}"
            );
            // Shown as escapes (which each format may escape further).
            // JUnit carries no cell names, CSV no qualification.
            let cell = out.contains("u{001b}") && out.contains("u{000a}");
            let qualification = out.contains("u{202e}") && out.contains("u{0007}");
            assert!(cell || format == "junit", "{format}: {out}");
            assert!(qualification || format == "csv", "{format}: {out}");
        }
    }
}
