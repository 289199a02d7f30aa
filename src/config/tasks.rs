//! Task files: checkable questions with an answer key, the input of a
//! turnover workload with `prompt = "task"` (accuracy on both runtimes,
//! held to a margin by the quality gate).
//!
//! JSON Lines, one item per line:
//!
//! ```json
//! {"question": "What is the capital of France?", "answer": "Paris", "kind": "capital"}
//! {"question": "What is the opposite of hot?", "answer": ["cold", "cool"]}
//! ```
//!
//! `answer` is one accepted answer or a list (the first is what a worked
//! example shows); `kind` (optional) groups items, and an item's worked
//! examples are the next items of its kind. `match` (optional) says how a
//! reply is checked, always on its first non-blank line:
//!
//! - `"exact"` (default): equal to an answer after trimming, dropping final
//!   punctuation, collapsing whitespace and lowercasing;
//! - `"number"`: the line's last number (commas between digits dropped)
//!   equals an answer's number (GSM8K-style: "so the answer is 1,200.");
//! - `"regex"`: the line (trimmed) matches `pattern` (Rust `regex` syntax,
//!   unanchored; write `^…$` for a whole line, `(?i)` to ignore case).
//!
//! ```json
//! {"question": "What is 17 + 25?", "answer": "42", "match": "number"}
//! {"question": "Name a primary colour.", "answer": "red", "match": "regex", "pattern": "(?i)^(red|blue|yellow)$"}
//! ```
//!
//! Errors name the file, the line and the field.

use serde_json::Value;

use super::dataset::{DatasetError, bad};

/// One checkable question.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskItem {
    pub question: String,
    /// Accepted answers (at least one), as written.
    pub answers: Vec<String>,
    pub kind: Option<String>,
    /// How a reply is checked against `answers`.
    pub rule: MatchRule,
}

/// How a reply's first line is checked (module docs).
#[derive(Debug, Clone, Default)]
pub enum MatchRule {
    #[default]
    Exact,
    Number,
    Regex(regex::Regex),
}

impl PartialEq for MatchRule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (MatchRule::Regex(a), MatchRule::Regex(b)) => a.as_str() == b.as_str(),
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// Parse a task file's text.
pub fn tasks_text(text: &str, file: &str) -> Result<Vec<TaskItem>, DatasetError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("line {}", i + 1);
        let v: Value = serde_json::from_str(line)
            .map_err(|e| bad(file, at.clone(), format!("not JSON: {e}")))?;
        out.push(item(&v).map_err(|why| bad(file, at, why))?);
    }
    if out.is_empty() {
        return Err(DatasetError::Empty {
            file: file.to_string(),
            what: "task item",
        });
    }
    Ok(out)
}

fn item(v: &Value) -> Result<TaskItem, String> {
    let o = v
        .as_object()
        .ok_or("expected an object {question, answer}")?;
    for k in o.keys() {
        if !FIELDS.contains(&k.as_str()) {
            return Err(format!(
                "unknown field `{k}` (expected one of {})",
                FIELDS.join(", ")
            ));
        }
    }
    let question = o
        .get("question")
        .ok_or("missing field `question`")?
        .as_str()
        .ok_or("field `question`: expected a string")?;
    if question.trim().is_empty() {
        return Err("field `question`: empty".into());
    }
    let answers: Vec<String> = match o.get("answer").ok_or("missing field `answer`")? {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("field `answer`: expected a string or a list of strings")?,
        _ => return Err("field `answer`: expected a string or a list of strings".into()),
    };
    if answers.is_empty() || answers.iter().any(|a| normalize(a).is_empty()) {
        return Err("field `answer`: an accepted answer is empty".into());
    }
    let kind = match o.get("kind") {
        None => None,
        Some(k) => Some(
            k.as_str()
                .ok_or("field `kind`: expected a string")?
                .to_string(),
        ),
    };
    let rule = rule(o, &answers)?;
    Ok(TaskItem {
        question: question.to_string(),
        answers,
        kind,
        rule,
    })
}

const FIELDS: [&str; 5] = ["question", "answer", "kind", "match", "pattern"];

/// The `match` and `pattern` fields, checked against the answers.
fn rule(o: &serde_json::Map<String, Value>, answers: &[String]) -> Result<MatchRule, String> {
    let name = match o.get("match") {
        None => "exact",
        Some(m) => m.as_str().ok_or("field `match`: expected a string")?,
    };
    let pattern = o.get("pattern");
    if pattern.is_some() && name != "regex" {
        return Err("field `pattern`: read only with \"match\": \"regex\"".into());
    }
    match name {
        "exact" => Ok(MatchRule::Exact),
        "number" => {
            if let Some(a) = answers.iter().find(|a| number(a).is_none()) {
                return Err(format!("field `answer`: {a:?} is not a number"));
            }
            Ok(MatchRule::Number)
        }
        "regex" => {
            let p = pattern
                .ok_or("\"match\": \"regex\" needs field `pattern`")?
                .as_str()
                .ok_or("field `pattern`: expected a string")?;
            let re = regex::Regex::new(p).map_err(|e| format!("field `pattern`: {e}"))?;
            Ok(MatchRule::Regex(re))
        }
        other => Err(format!(
            "field `match`: {other:?} is not one of \"exact\", \"number\", \"regex\""
        )),
    }
}

/// The first non-blank line of a reply, trimmed.
fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The last number in `s` (commas between digits dropped), e.g. "so 1,200." → 1200.
pub fn number(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut last = None;
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
        let mut text = String::new();
        while i < b.len() {
            let c = b[i];
            let digit_after = b.get(i + 1).is_some_and(u8::is_ascii_digit);
            if c.is_ascii_digit() {
                text.push(c as char);
            } else if c == b',' && digit_after {
                // a thousands separator: dropped
            } else if c == b'.' && digit_after && !text.contains('.') {
                text.push('.');
            } else {
                break;
            }
            i += 1;
        }
        let sign = if start < i && b[start] == b'-' {
            -1.0
        } else {
            1.0
        };
        last = text.parse::<f64>().ok().map(|v| sign * v);
    }
    last
}

/// What answers are compared by: the first non-blank line, trimmed, final
/// punctuation dropped, whitespace collapsed, lowercase. "Paris." and
/// " paris" are Paris; "Paris is the capital" is not.
pub fn normalize(s: &str) -> String {
    let line = first_line(s)
        .trim_end_matches(['.', '!', ',', ';', ':'])
        .trim();
    line.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

impl TaskItem {
    /// Whether `answer` (a model's whole reply) is one of the accepted answers.
    pub fn is_right(&self, answer: &str) -> bool {
        match &self.rule {
            MatchRule::Exact => {
                let got = normalize(answer);
                self.answers.iter().any(|a| normalize(a) == got)
            }
            MatchRule::Number => number(first_line(answer)).is_some_and(|got| {
                self.answers
                    .iter()
                    .filter_map(|a| number(a))
                    .any(|want| (got - want).abs() <= 1e-9 * want.abs().max(1.0))
            }),
            MatchRule::Regex(re) => re.is_match(first_line(answer)),
        }
    }

    /// What makes two items the same question checked the same way.
    pub fn identity(&self) -> Value {
        let rule = match &self.rule {
            MatchRule::Exact => Value::from("exact"),
            MatchRule::Number => Value::from("number"),
            MatchRule::Regex(re) => serde_json::json!(["regex", re.as_str()]),
        };
        serde_json::json!([self.question, self.answers, self.kind, rule])
    }

    /// The indices of item `i`'s worked examples: the next `shots` items of
    /// its kind (any kind when it has none), wrapping around, never itself.
    pub fn examples(items: &[TaskItem], i: usize, shots: usize) -> Vec<usize> {
        let n = items.len();
        (1..n)
            .map(|k| (i + k) % n)
            .filter(|&j| items[j].kind == items[i].kind)
            .take(shots)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_parse_with_one_or_several_answers() {
        let t = tasks_text(
            "{\"question\": \"Capital of France?\", \"answer\": \"Paris\", \"kind\": \"c\"}\n\n{\"question\": \"Opposite of hot?\", \"answer\": [\"cold\", \"cool\"]}\n",
            "t.jsonl",
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].answers, ["cold", "cool"]);
        assert_eq!(t[0].kind.as_deref(), Some("c"));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = tasks_text(
            "{\"question\": \"q\", \"answer\": \"a\"}\n{\"question\": \"q\"}\n",
            "t.jsonl",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "t.jsonl: line 2: missing field `answer`");
        let e = tasks_text("{\"question\": \"q\", \"answer\": 3}\n", "t.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1: field `answer`"), "{e}");
        let e = tasks_text(
            "{\"question\": \"q\", \"answer\": \"a\", \"hint\": 1}\n",
            "t.jsonl",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field `hint`"), "{e}");
        assert!(tasks_text("\n", "t.jsonl").is_err());
        assert!(tasks_text("{\"question\": \"q\", \"answer\": \" . \"}", "t.jsonl").is_err());
    }

    #[test]
    fn answers_are_compared_on_their_first_line_loosely() {
        let it = TaskItem {
            question: "q".into(),
            answers: vec!["Paris".into()],
            kind: None,
            rule: MatchRule::Exact,
        };
        assert!(it.is_right("Paris"));
        assert!(it.is_right("  paris.\nMore text"));
        assert!(!it.is_right("Paris is the capital."));
        assert!(!it.is_right(""));
        assert!(!it.is_right("Lyon"));
    }

    #[test]
    fn examples_are_the_next_items_of_the_same_kind() {
        let mk = |k: &str| TaskItem {
            question: "q".into(),
            answers: vec!["a".into()],
            kind: Some(k.into()),
            rule: MatchRule::Exact,
        };
        let items = vec![mk("a"), mk("b"), mk("a"), mk("a"), mk("b")];
        assert_eq!(TaskItem::examples(&items, 3, 2), vec![0, 2]);
        assert_eq!(TaskItem::examples(&items, 1, 3), vec![4]);
    }

    fn one(line: &str) -> TaskItem {
        tasks_text(line, "t.jsonl").unwrap().remove(0)
    }

    #[test]
    fn numbers_are_the_lines_last_number() {
        assert_eq!(number("so the answer is 1,200."), Some(1200.0));
        assert_eq!(number("3 apples and 4 pears: 7"), Some(7.0));
        assert_eq!(number("-2.5 degrees"), Some(-2.5));
        assert_eq!(number("A-4"), Some(-4.0));
        assert_eq!(number("1,2,3"), Some(123.0));
        assert_eq!(number("version 1.2.3"), Some(3.0));
        assert_eq!(number("no digits"), None);
        let it = one(r#"{"question": "q", "answer": "42", "match": "number"}"#);
        assert!(it.is_right("6 times 7 is 42."));
        assert!(it.is_right("42.0\nand then 13"));
        assert!(!it.is_right("42 or 43"));
        assert!(!it.is_right("forty-two"));
    }

    #[test]
    fn regex_items_match_the_first_line() {
        let it = one(
            r#"{"question": "q", "answer": "red", "match": "regex", "pattern": "(?i)^(red|blue)$"}"#,
        );
        assert!(it.is_right(" Blue \nmore"));
        assert!(!it.is_right("blue sky"));
        assert!(!it.is_right("\n"));
        // The answer is what a worked example shows; the pattern decides.
        assert_eq!(it.answers, ["red"]);
    }

    #[test]
    fn match_rules_are_checked_where_they_are_written() {
        let err = |l: &str| tasks_text(l, "t.jsonl").unwrap_err().to_string();
        assert_eq!(
            err(r#"{"question": "q", "answer": "a", "match": "fuzzy"}"#),
            "t.jsonl: line 1: field `match`: \"fuzzy\" is not one of \"exact\", \"number\", \"regex\""
        );
        assert!(
            err(r#"{"question": "q", "answer": "a", "match": "number"}"#)
                .contains("field `answer`: \"a\" is not a number")
        );
        assert!(
            err(r#"{"question": "q", "answer": "a", "match": "regex"}"#)
                .contains("needs field `pattern`")
        );
        assert!(
            err(r#"{"question": "q", "answer": "a", "match": "regex", "pattern": "("}"#)
                .starts_with("t.jsonl: line 1: field `pattern`: ")
        );
        assert!(
            err(r#"{"question": "q", "answer": "a", "pattern": "a"}"#)
                .contains("field `pattern`: read only")
        );
    }
}
