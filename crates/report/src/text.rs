//! Text from outside infergate (a suite, a plan, a policy, a report file, a
//! server's answer) that ends up printed: the characters a name may not
//! hold, and the visible form every renderer shows them in when a report
//! file carries them anyway.

use std::borrow::Cow;

use serde_json::Value;

/// Characters that change how the text around them is shown rather than
/// showing themselves: C0 and C1 controls and DEL (terminal escape
/// sequences, line breaks that start a Markdown block or a CSV record),
/// the Unicode line and paragraph separators, bidirectional embeddings,
/// overrides and isolates (text displayed in another order than it reads),
/// and U+FFFE/U+FFFF (which XML 1.0 cannot carry).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FFFE}' | '\u{FFFF}'
        )
}

/// `s` with every [`is_unsafe`] character written as a visible `\u{…}`
/// escape; borrowed when there is none.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `v` with every string and object key passed through [`visible`]: what
/// the renderers draw from, so no report text reaches any format with a
/// control character in it.
pub fn visible_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(visible(s).into_owned()),
        Value::Array(a) => Value::Array(a.iter().map(visible_value).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (visible(k).into_owned(), visible_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Why `name` cannot be the name of a cell, suite, turnover workload, plan
/// or metric, if it cannot: it holds an [`is_unsafe`] character. The
/// message does not repeat the name (it would print what it refuses).
pub fn name_problem(name: &str) -> Option<String> {
    let (i, c) = name.chars().enumerate().find(|(_, c)| is_unsafe(*c))?;
    let what = match c {
        '\n' | '\r' | '\u{2028}' | '\u{2029}' => "a line break",
        '\t' => "a tab",
        '\u{1b}' => "an escape (ESC)",
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => "a bidirectional override",
        '\u{FFFE}' | '\u{FFFF}' => "a noncharacter",
        _ => "a control character",
    };
    Some(format!(
        "{what} (U+{:04X}) at character {} is not allowed in a name: names are printed on terminals and in CI summaries, HTML, JUnit and CSV, where it could forge or hide text",
        c as u32,
        i + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_characters_become_visible_and_names_holding_them_are_refused() {
        assert_eq!(visible("ttft_p50_ms"), Cow::Borrowed("ttft_p50_ms"));
        assert_eq!(
            visible("a\nb\u{1b}[31m\u{202E}c\u{85}\u{7f}"),
            "a\\u{000a}b\\u{001b}[31m\\u{202e}c\\u{0085}\\u{007f}"
        );
        assert_eq!(name_problem("capacity-4k ✅ <b>"), None);
        let p = name_problem("x\n```").unwrap();
        assert!(p.starts_with("a line break (U+000A) at character 2"), "{p}");
        assert!(
            !p.contains("```"),
            "the message does not echo the name: {p}"
        );
        for (s, what) in [
            ("\u{1b}[2J", "an escape (ESC) (U+001B) at character 1"),
            ("a\u{2066}b", "a bidirectional override (U+2066)"),
            ("a\u{9b}", "a control character (U+009B)"),
            ("\t", "a tab (U+0009)"),
        ] {
            assert!(name_problem(s).unwrap().starts_with(what), "{s:?}");
        }
        let v = serde_json::json!({"c\n": ["\u{7}", 1.5], "k": null});
        assert_eq!(
            visible_value(&v),
            serde_json::json!({"c\\u{000a}": ["\\u{0007}", 1.5], "k": null})
        );
    }
}
