//! One error type for every configuration file infergate reads (plans,
//! suites, policies): which file, line, column and field, and what is wrong.
//! It lives in this leaf crate because the policy is parsed here; the main
//! crate's plan and suite readers use the same type.

use std::fmt;
use std::ops::Range;

/// A configuration file that cannot be used: names the file, line, column and field.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Dotted field path (`turnover.alpha`, `metric[1].name`), when known.
    pub field: Option<String>,
    pub message: String,
}

impl ConfigError {
    /// An error about the whole file (unreadable, or no line to point at).
    pub fn file(file: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: file.into(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
        }
    }

    /// A TOML syntax or shape error, located from toml's span.
    pub fn toml(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
        let span = e.span();
        let (line, column) = span.clone().map(|s| line_col(text, s.start)).unzip();
        ConfigError {
            file: file.to_string(),
            line,
            column,
            field: span.and_then(|s| field_at(text, s)),
            message: toml_error_message(text, e),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column (in characters) of byte offset `at`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The message of a TOML error, never empty: toml leaves it empty for some
/// lexical errors (a control character in a comment), which would print as
/// `file:line:` and nothing else.
pub fn toml_error_message(text: &str, e: &toml::de::Error) -> String {
    let m = e.message().trim();
    if !m.is_empty() {
        return m.to_string();
    }
    match e.span().and_then(|s| text.get(s.start..)?.chars().next()) {
        Some(c) if c.is_control() => format!(
            "character U+{:04X} is not allowed here (control characters are not valid TOML, even in comments)",
            c as u32
        ),
        _ => "not valid TOML here".to_string(),
    }
}

/// Best-effort dotted name of the field at `span` for toml's own errors,
/// which give a span but no key path: the key on that line, under the
/// nearest `[table]` / `[[array]]` header above it.
pub fn field_at(text: &str, span: Range<usize>) -> Option<String> {
    let (line_no, _) = line_col(text, span.start);
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(line_no.checked_sub(1)?)?.trim();
    let key = if line.starts_with('[') {
        None
    } else {
        line.split_once('=').map(|(k, _)| k.trim().to_string())
    };
    let mut header: Option<String> = None;
    let mut array_index = 0usize;
    for l in lines[..line_no - 1].iter().rev() {
        let l = l.trim();
        if let Some(name) = l.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim();
            if header.is_none() {
                header = Some(name.to_string());
            }
            if Some(name) == header.as_deref() {
                array_index += 1;
            }
        } else if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next())
            && header.is_none()
        {
            header = Some(name.trim().to_string());
            break;
        }
    }
    // An `[[array]]` header seen k times above names element k−1.
    let header = header.map(|h| {
        if array_index > 0 {
            format!("{h}[{}]", array_index - 1)
        } else {
            h
        }
    });
    match (header, key) {
        (Some(h), Some(k)) => Some(format!("{h}.{k}")),
        (None, Some(k)) => Some(k),
        (Some(h), None) => Some(h),
        (None, None) => None,
    }
}
