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
//! `answer` is one accepted answer or a list; `kind` (optional) groups
//! items, and an item's worked examples are the next items of its kind.
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
        if !["question", "answer", "kind"].contains(&k.as_str()) {
            return Err(format!(
                "unknown field `{k}` (expected question, answer, kind)"
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
    Ok(TaskItem {
        question: question.to_string(),
        answers,
        kind,
    })
}

/// What answers are compared by: the first non-blank line, trimmed, final
/// punctuation dropped, whitespace collapsed, lowercase. "Paris." and
/// " paris" are Paris; "Paris is the capital" is not.
pub fn normalize(s: &str) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = line.trim_end_matches(['.', '!', ',', ';', ':']).trim();
    line.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

impl TaskItem {
    /// Whether `answer` (a model's whole reply) is one of the accepted answers.
    pub fn is_right(&self, answer: &str) -> bool {
        let got = normalize(answer);
        self.answers.iter().any(|a| normalize(a) == got)
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
        };
        let items = vec![mk("a"), mk("b"), mk("a"), mk("a"), mk("b")];
        assert_eq!(TaskItem::examples(&items, 3, 2), vec![0, 2]);
        assert_eq!(TaskItem::examples(&items, 1, 3), vec![4]);
    }
}
