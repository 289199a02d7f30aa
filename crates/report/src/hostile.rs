//! Hostile names through every report format, and the oracle that judges
//! the output: a name must show as text wherever it lands and open nothing
//! (no heading, block, tag, entity, emphasis, table cell, escape sequence,
//! XML element, CSV record or spreadsheet formula).
//!
//! The oracle is differential. [`reports`] builds one report with the given
//! names in every slot a user or a report file can fill (cells, metrics,
//! runtimes, images, models, suites, hosts, turnover workloads and their
//! failures, slices, server endpoints, warnings, the decision's who, when
//! and note) and its twin with plain names (`t0`, `t1`, …) in the same
//! slots; [`check`] renders both in every format and requires the same
//! structure: the same lines by kind and inline markup (Markdown), the same
//! lines (terminal), the same tags and attributes (HTML, JUnit XML), the
//! same records and fields (CSV), and in the hostile one no control
//! character, no escape sequence but the renderer's colours and no field a
//! spreadsheet would run.
//!
//! Used by this crate's tests and by the `names` fuzz target
//! (`infergate::fuzzing::names`); dev-only (feature `fixtures`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::artifact::{RunArtifact, Slice, metric};
use crate::fixtures;
use crate::policy::{MetricSpec, Policy};
use crate::server_metrics::ServerMetrics;
use crate::stats::Direction;
use crate::text::{is_unsafe, visible};
use crate::{TerminalOptions, compare, csv, html, junit, markdown, terminal};

/// Names that attack each format; the first closes a Markdown code fence
/// and opens a forged verdict heading and an `<img>` tag.
pub const NAMES: &[&str] = &[
    "x\n```\n\n## ✅ QUALIFIED: pass — promote now\n\n<img src=x onerror=alert(1)>\n```text",
    "\u{1b}[2J\u{1b}[31mPASS\u{1b}]8;;http://evil\u{7}link\u{1b}]8;;\u{7}\u{9b}0m",
    "=HYPERLINK(\"http://evil\",\"x\")",
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1)",
    "\tlead",
    "\rcr",
    "a|b\\|c\\\\|d",
    "**bold** _em_ ~~del~~ [link](http://e) ![img](http://e/i.png) $x^2$",
    "# heading",
    "<script>alert(1)</script>",
    "&lt;img src=x&gt; &amp; &#60;b&#62;",
    "\"quoted\" 'single' ]]> <![CDATA[x]]>",
    "right\u{202E}gnp.exe\u{2066}iso\u{2069}",
    "line\u{2028}sep\u{2029}para\u{85}nel",
    "nul\u{0}del\u{7f}\u{FFFE}\u{FFFF}",
    "```",
    "`code` ``two``",
    "</details><details><summary>x",
    "- item\n1. one\n> quote\n    indented\n---\n===",
    "cells.x.metrics.y",
];

/// The plain stand-in for each distinct name (by how it is shown): `t0`, `t1`, …
fn twins(names: &[String]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    names
        .iter()
        .map(|n| {
            let v = visible(n).into_owned();
            let i = seen.iter().position(|s| *s == v).unwrap_or_else(|| {
                seen.push(v);
                seen.len() - 1
            });
            format!("t{i}")
        })
        .collect()
}

/// Up to 8 names from fuzz input: the bytes split at 0xFF (never in UTF-8),
/// each read as UTF-8 with replacement.
pub fn names_from(data: &[u8]) -> Vec<String> {
    data.split(|b| *b == 0xFF)
        .take(8)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// (the report with `names` in every slot, its twin with plain names), as
/// JSON; Err if `compare` refuses the pair (it should not).
pub fn reports(names: &[String]) -> Result<(Value, Value), String> {
    let names = usable(names);
    let twin = twins(&names);
    Ok((report(&names)?, report(&twin)?))
}

/// At least three names; a name that shows as blank gets a letter (a blank
/// one is left out of some lines, which its twin is not); a cell name that
/// shows like the other, or a metric name that is a default one, gets a
/// suffix (two cells or metrics cannot share a key).
fn usable(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = names
        .iter()
        .map(|n| {
            if visible(n).trim().is_empty() {
                format!("n{n}")
            } else {
                n.clone()
            }
        })
        .collect();
    while out.len() < 3 {
        out.push(format!("n{}", out.len()));
    }
    if visible(&out[1]) == visible(&out[0]) {
        out[1].push_str(" 2");
    }
    // The third also names a metric beside the default ones.
    if Policy::default().metrics.iter().any(|m| m.name == out[2]) {
        out[2].push_str(" 2");
    }
    out
}

/// The slots, filled from `n` (at least three names; n[0] and n[1] are the
/// two cells).
fn report(n: &[String]) -> Result<Value, String> {
    let name = |i: usize| n[i % n.len()].clone();
    let policy = policy(&name(2));
    let side = |label: &str, slower: f64, k: usize| -> RunArtifact {
        let mut cells = Vec::new();
        for (c, (cell_name, shift)) in [(name(0), slower), (name(1), 1.0)].into_iter().enumerate() {
            let samples =
                fixtures::spread_samples(24, (100.0 * shift, 400.0 * shift, 50.0 / shift), c + k);
            let mut cell = fixtures::cell(
                &cell_name,
                fixtures::shape(512, 1, 24),
                samples,
                Some(512.0),
            );
            cell.warnings = vec![name(c + 3)];
            cell.slices = vec![Slice {
                by: name(4),
                label: name(5),
                requests: 24,
                succeeded: 24,
                ttft_p50_ms: Some(100.0),
                e2e_p50_ms: Some(400.0),
                prompt_tokens_p50: Some(512.0),
                cached_share: None,
            }];
            cell.server_metrics = vec![ServerMetrics::unavailable(&name(6), &name(7), &name(3))];
            cells.push(cell);
        }
        let mut p = fixtures::provenance(label, "ab12");
        p.runtime = Some(format!("{label} {}", name(k + 2)));
        p.image = Some(name(k + 3));
        p.model = name(4);
        p.suite = name(5);
        p.host = name(6);
        p.target = name(7);
        p.server_build = Some(name(1));
        let mut turnover = vec![fixtures::turnover(0, 24, k), fixtures::turnover(1, 24, 0)];
        for t in &mut turnover {
            t.name = name(2);
            for f in &mut t.failures {
                f.finish_reasons = vec![name(4)];
                f.error = Some(name(5));
            }
        }
        fixtures::artifact(p, cells, turnover)
    };
    let report = compare(
        &side("baseline", 1.0, 0),
        &side("candidate", 1.3, 1),
        &policy,
    )
    .map_err(|e| format!("compare refused the pair: {e}"))?;
    let mut v = report.to_value();
    v["decision"] = json!({"action": "pending", "who": name(0), "when": name(1), "note": name(2)});
    v["promotion"] = json!(name(3));
    v["human_decision"] = json!(format!("pending; {}", name(2)));
    if let Some(w) = v["warnings"].as_array_mut() {
        w.push(json!(name(5)));
    } else {
        v["warnings"] = json!([name(5)]);
    }
    Ok(v)
}

/// The default metrics and one more whose name is a given one.
fn policy(extra: &str) -> Policy {
    let mut p = Policy {
        source: "hostile names".into(),
        ..Policy::default()
    };
    p.bootstrap.iterations = 200;
    p.metrics.push(MetricSpec {
        name: extra.to_string(),
        sample: metric::TTFT_MS.to_string(),
        quantile: 0.9,
        direction: Direction::LowerIsBetter,
        threshold_percent: 5.0,
    });
    p
}

/// Render `hostile` and `twin` in every format and compare: Err names the
/// format and what a name opened.
pub fn check(hostile: &Value, twin: &Value) -> Result<(), String> {
    for color in [false, true] {
        let opts = TerminalOptions {
            color,
            verbose: true,
        };
        check_terminal(&terminal(hostile, opts), &terminal(twin, opts), color)
            .map_err(|e| format!("terminal (colour {color}): {e}"))?;
    }
    check_markdown(&markdown(hostile), &markdown(twin)).map_err(|e| format!("Markdown: {e}"))?;
    check_markup(&html(hostile), &html(twin)).map_err(|e| format!("HTML: {e}"))?;
    check_markup(&junit(hostile), &junit(twin)).map_err(|e| format!("JUnit: {e}"))?;
    let (hm, hr) = csv(hostile);
    let (tm, tr) = csv(twin);
    check_csv(&hm, &tm).map_err(|e| format!("metrics.csv: {e}"))?;
    check_csv(&hr, &tr).map_err(|e| format!("requests.csv: {e}"))?;
    Ok(())
}

/// No character that is not shown as itself: only line breaks, and with
/// colour the renderer's SGR sequences (`ESC [ digits m`).
fn no_controls(out: &str, sgr: bool) -> Result<(), String> {
    for (i, c) in out.char_indices() {
        if c == '\n' || !is_unsafe(c) {
            continue;
        }
        if c == '\u{1b}' && sgr {
            let rest = &out[i + 1..];
            let body: String = rest
                .strip_prefix('[')
                .map(|r| {
                    r.chars()
                        .take_while(|c| c.is_ascii_digit() || *c == ';')
                        .collect()
                })
                .unwrap_or_default();
            if rest.starts_with('[') && rest[1 + body.len()..].starts_with('m') {
                continue;
            }
        }
        return Err(format!(
            "U+{:04X} in the output near {:?}",
            c as u32,
            near(out, i)
        ));
    }
    Ok(())
}

fn near(s: &str, at: usize) -> &str {
    let mut lo = at.saturating_sub(40);
    while !s.is_char_boundary(lo) {
        lo -= 1;
    }
    let mut hi = (at + 40).min(s.len());
    while !s.is_char_boundary(hi) {
        hi += 1;
    }
    &s[lo..hi]
}

/// Terminal: no control character (colours aside) and as many lines as the twin.
pub fn check_terminal(out: &str, twin: &str, color: bool) -> Result<(), String> {
    no_controls(out, color)?;
    let (a, b) = (out.lines().count(), twin.lines().count());
    if a != b {
        return Err(format!("{a} lines where the plain names make {b}"));
    }
    Ok(())
}

/// A Markdown line's kind and its inline markup, as GitHub would read them.
type MdLine = (String, Vec<String>);

/// Each line's block kind (CommonMark's, with the fences tracked) and its
/// inline markup tokens outside code spans: unescaped `* _ ~ [ ] ! | $` and
/// backticks that open no span, tags (`<x`), entities other than the four
/// escapes write. A `|` inside a code span still splits a GitHub table row.
fn md_lines(md: &str) -> Vec<MdLine> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in md.lines() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let t = line.trim_start_matches(' ');
        let run = |c: char| t.chars().take_while(|x| *x == c).count();
        if let Some((fc, len)) = fence {
            if indent < 4 && run(fc) >= len && t.trim_start_matches(fc).trim().is_empty() {
                fence = None;
                out.push(("fence-close".into(), vec![]));
            } else {
                out.push(("fenced".into(), vec![]));
            }
            continue;
        }
        let kind = if t.is_empty() {
            "blank".to_string()
        } else if indent >= 4 {
            "indented".into()
        } else if run('`') >= 3 || run('~') >= 3 {
            let c = t.chars().next().unwrap_or('`');
            fence = Some((c, run(c)));
            "fence-open".into()
        } else if (1..=6).contains(&run('#'))
            && t[run('#')..].chars().next().is_none_or(|c| c == ' ')
        {
            format!("h{}", run('#'))
        } else if t.chars().all(|c| c == '=' || c == ' ') || t.chars().all(|c| c == '-' || c == ' ')
        {
            "setext-or-rule".into()
        } else if t.starts_with('|') {
            "row".into()
        } else if t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") {
            "item".into()
        } else if t.starts_with('>') {
            "quote".into()
        } else if t.starts_with('<') {
            "html".into()
        } else if t.split_once(['.', ')']).is_some_and(|(d, rest)| {
            !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()) && rest.starts_with(' ')
        }) {
            "ordered".into()
        } else {
            "text".into()
        };
        let tokens = match kind.as_str() {
            "fence-open" => vec![],
            // Raw HTML: only tags and entities mean anything.
            "html" => md_tokens(t, false)
                .into_iter()
                .filter(|t| t.starts_with(['<', '&']))
                .collect(),
            _ => md_tokens(t, true),
        };
        out.push((kind, tokens));
    }
    out
}

/// `code_spans`: whether backticks make code spans (not in raw HTML).
fn md_tokens(line: &str, code_spans: bool) -> Vec<String> {
    let b: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '\\' && b.get(i + 1).is_some_and(|n| n.is_ascii_punctuation()) {
            i += 2;
            continue;
        }
        if c == '`' && code_spans {
            let n = b[i..].iter().take_while(|x| **x == '`').count();
            // The span closes at the next run of exactly n backticks.
            let mut j = i + n;
            let mut close = None;
            while j < b.len() {
                let m = b[j..].iter().take_while(|x| **x == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m.max(1);
            }
            match close {
                Some(j) => {
                    for k in i + n..j {
                        if b[k] == '|' && b[k - 1] != '\\' {
                            tokens.push("|".into());
                        }
                    }
                    i = j + n;
                }
                None => {
                    tokens.push("`".repeat(n));
                    i += n;
                }
            }
            continue;
        }
        match c {
            '<' if b
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')) =>
            {
                let name: String = b[i + 1..]
                    .iter()
                    .take_while(|x| x.is_ascii_alphanumeric() || matches!(x, '/' | '!' | '?'))
                    .collect();
                tokens.push(format!("<{}", name.to_ascii_lowercase()));
            }
            '&' => {
                let name: String = b[i + 1..]
                    .iter()
                    .take_while(|x| x.is_ascii_alphanumeric() || **x == '#')
                    .collect();
                let is_entity = !name.is_empty() && b.get(i + 1 + name.len()) == Some(&';');
                if is_entity && !matches!(name.as_str(), "amp" | "lt" | "gt" | "quot") {
                    tokens.push(format!("&{name};"));
                }
            }
            '*' | '_' | '~' | '[' | ']' | '!' | '|' | '$' => tokens.push(c.to_string()),
            _ => {}
        }
        i += 1;
    }
    tokens
}

/// Markdown: the same lines by kind and inline markup as the twin's (in any
/// order: names sort differently), no control character, and no tag but
/// the renderer's `<details>` and `<summary>`.
pub fn check_markdown(out: &str, twin: &str) -> Result<(), String> {
    no_controls(out, false)?;
    let lines = md_lines(out);
    for (i, (_, tokens)) in lines.iter().enumerate() {
        if let Some(t) = tokens.iter().find(|t| {
            t.starts_with('<')
                && !matches!(
                    t.as_str(),
                    "<details" | "<summary" | "</details" | "</summary"
                )
        }) {
            return Err(format!(
                "line {}: tag {t} the renderer does not write: {:?}",
                i + 1,
                out.lines().nth(i)
            ));
        }
    }
    same_multiset(
        lines,
        md_lines(twin),
        |(k, t)| format!("{k} {t:?}"),
        "Markdown line (kind, inline markup)",
    )
}

/// Equal as multisets; else the first item one has more of.
fn same_multiset<T: Clone>(
    a: Vec<T>,
    b: Vec<T>,
    show: impl Fn(&T) -> String,
    what: &str,
) -> Result<(), String> {
    let count = |v: Vec<T>| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for x in &v {
            *m.entry(show(x)).or_default() += 1;
        }
        m
    };
    let (ca, cb) = (count(a), count(b));
    for (k, n) in &ca {
        let m = cb.get(k).copied().unwrap_or(0);
        if *n != m {
            return Err(format!(
                "{what} {k}: {n} with these names, {m} with plain ones"
            ));
        }
    }
    for (k, m) in &cb {
        if !ca.contains_key(k) {
            return Err(format!(
                "{what} {k}: none with these names, {m} with plain ones"
            ));
        }
    }
    Ok(())
}

/// The tags of HTML or XML (name and attribute names), checking as it goes
/// that every attribute value is quoted and holds no `<`, and that every
/// `&` outside comments starts an entity.
fn tags(doc: &str) -> Result<Vec<String>, String> {
    let s = doc.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let entity = |at: usize| -> Result<(), String> {
        let rest = &doc[at + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '#')
            .collect();
        if name.is_empty() || !rest[name.len()..].starts_with(';') {
            return Err(format!("a bare & near {:?}", near(doc, at)));
        }
        Ok(())
    };
    while i < s.len() {
        match s[i] {
            b'&' => entity(i)?,
            b'<' if doc[i..].starts_with("<!--") => {
                i += doc[i..].find("-->").ok_or("an unclosed comment")? + 3;
                continue;
            }
            b'<' => {
                let start = i;
                i += 1;
                let name_len = doc[i..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '!' | '?')))
                    .unwrap_or(doc.len() - i);
                let mut tag = doc[i..i + name_len].to_ascii_lowercase();
                i += name_len;
                if tag.is_empty() || tag == "/" {
                    return Err(format!("a bare < near {:?}", near(doc, start)));
                }
                loop {
                    while i < s.len() && s[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    if doc[i..].starts_with("/>") || doc[i..].starts_with("?>") {
                        i += 2;
                        break;
                    }
                    if doc[i..].starts_with('>') {
                        i += 1;
                        break;
                    }
                    let an = doc[i..]
                        .find(|c: char| {
                            !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
                        })
                        .unwrap_or(doc.len() - i);
                    if an == 0 {
                        return Err(format!("a malformed tag near {:?}", near(doc, start)));
                    }
                    tag.push(' ');
                    tag.push_str(&doc[i..i + an]);
                    i += an;
                    if !doc[i..].starts_with("=\"") {
                        // `<!DOCTYPE html>`: a bare word.
                        continue;
                    }
                    i += 2;
                    let end = doc[i..].find('"').ok_or_else(|| {
                        format!("an unclosed attribute near {:?}", near(doc, start))
                    })?;
                    if let Some(lt) = doc[i..i + end].find('<') {
                        return Err(format!("< in an attribute near {:?}", near(doc, i + lt)));
                    }
                    for (k, _) in doc[i..i + end].match_indices('&') {
                        entity(i + k)?;
                    }
                    i += end + 1;
                }
                out.push(tag);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(out)
}

/// HTML and JUnit XML: no control character but line breaks, well-formed
/// tags, and the same tags and attributes as the twin's.
pub fn check_markup(out: &str, twin: &str) -> Result<(), String> {
    no_controls(out, false)?;
    same_multiset(tags(out)?, tags(twin)?, String::clone, "tag")
}

/// CSV: as many records of as many fields as the twin's, and no text field
/// a spreadsheet would read as a formula (a number may be negative).
pub fn check_csv(out: &str, twin: &str) -> Result<(), String> {
    no_controls(out, false)?;
    let records = |text: &str| -> Result<Vec<Vec<String>>, String> {
        ::csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| {
                r.map(|r| r.iter().map(str::to_string).collect())
                    .map_err(|e| e.to_string())
            })
            .collect()
    };
    let (a, b) = (records(out)?, records(twin)?);
    for f in a.iter().flatten() {
        let formula = f.starts_with(['=', '+', '@', '\t', '\r'])
            || (f.starts_with('-') && f.parse::<f64>().is_err());
        if formula {
            return Err(format!("a field a spreadsheet runs: {f:?}"));
        }
    }
    same_multiset(
        a.iter().map(Vec::len).collect(),
        b.iter().map(Vec::len).collect(),
        |n| format!("{n} fields"),
        "record of",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_names() -> Vec<String> {
        NAMES.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_cell_name_cannot_forge_a_verdict_in_the_job_summary() {
        // A cell name with a line break and a fence must not close the
        // verdict's code block and put its own heading and `<img>` in the summary.
        let names: Vec<String> = [NAMES[0], "b", "c"].map(String::from).to_vec();
        let (hostile, _) = reports(&names).unwrap();
        let out = markdown(&hostile);
        let fences: Vec<usize> = (out.lines().enumerate())
            .filter(|(_, l)| l.starts_with("```"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            fences.len(),
            2,
            "the verdict block opens and closes once: {out}"
        );
        // Outside the block every name is escaped; inside, text is literal.
        let outside = (out.lines().enumerate())
            .filter(|(i, _)| *i < fences[0] || *i > fences[1])
            .map(|(_, l)| l);
        for l in outside {
            assert!(!l.starts_with("## ✅") && !l.contains("<img"), "{l}");
        }
        assert!(
            out.contains("x\\u{000a}```\\u{000a}\\u{000a}## ✅ QUALIFIED"),
            "the name shows in the verdict block, its line breaks visible: {out}"
        );
    }

    #[test]
    fn hostile_names_open_nothing_in_any_format() {
        // Every name in every slot, a few at a time, each name in each slot.
        let names = all_names();
        for start in 0..names.len() {
            let mut n: Vec<String> = names[start..].to_vec();
            n.extend_from_slice(&names[..start]);
            n.truncate(8);
            let (h, t) = reports(&n).unwrap();
            // Every section is there to render: the report reads as a typed
            // one and verifies clean, as its twin does.
            assert!(serde_json::from_value::<crate::Report>(h.clone()).is_ok());
            for r in [&h, &t] {
                let d = crate::verify(r);
                assert!(d.is_empty(), "names {n:?}: {d:?}");
            }
            if let Err(e) = check(&h, &t) {
                panic!("names {n:?}: {e}");
            }
        }
    }
}
