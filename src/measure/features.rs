//! What a runtime ships beyond plain text, checked answer by answer.
//!
//! A workload that asks for structured output (`response_format`: a JSON
//! object, or a JSON Schema from a file) or for tool calls (`tools` from a
//! file, with `tool_choice`; both read and compiled by `config::features`)
//! has each reference answer marked by what came
//! back, one character per request in request order:
//!
//! | mark | structured output | tool call (every call of the answer) |
//! |---|---|---|
//! | `1` | parses as JSON and (with a schema) validates against it | a function offered (the one named, if `tool_choice` names one), arguments valid against its parameters, `finish_reason = "tool_calls"` |
//! | `s` | JSON, but not valid against the schema | arguments JSON, not valid against the parameters |
//! | `j` | not JSON, and the server said it was done | arguments not JSON |
//! | `c` | not JSON, cut at `max_tokens` (`finish_reason = "length"`) | arguments cut at `max_tokens` |
//! | `n` | | no tool call |
//! | `f` | | a function not offered, or not the one named |
//! | `r` | | valid calls, another finish reason |
//! | `-` | no answer: the request failed, or its text hit the capture cap | the same |
//!
//! A workload that expects reasoning (`reasoning = true`) has each answer
//! marked by [`reasoning_mark`]: `1` reasoning apart from a non-empty
//! answer, `t` reasoning left in the content, `e` no answer after the
//! reasoning, `m` no reasoning.
//!
//! `compare` pairs the marks request by request across runtimes (only `1`
//! counts as delivered) and gates the drop in the valid share like a task's
//! accuracy (`report::quality`). Pure: a capture in, a mark out.

use serde_json::Value;

use crate::measure::record::StreamCapture;

pub use crate::config::features::{
    ResponseFormatSpec, SchemaSpec, StructuredOutput, ToolCalling, ToolsSpec,
};

/// The key of structured output's marks in a turnover run's `features`.
pub const STRUCTURED_OUTPUT: &str = "structured_output";
/// The key of tool calls' marks.
pub const TOOL_CALL: &str = "tool_call";
/// The key of reasoning's marks.
pub const REASONING: &str = "reasoning";
pub use crate::report::quality::TOOL_FUNCTION;

/// A reasoning workload's answer marked: `1` reasoning apart from a
/// non-empty answer; `t` reasoning inside the content (a `<think>` block the
/// server did not separate); `e` reasoning and no answer after it (it used
/// up `max_tokens`, or the server stopped there); `m` no reasoning at all;
/// `-` no answer.
pub fn reasoning_mark(cap: &StreamCapture) -> char {
    if cap.failure.is_some() || cap.truncated {
        mark::NO_ANSWER
    } else if cap.reasoning.trim().is_empty() {
        mark::NO_REASONING
    } else if cap.reasoning_from_content {
        mark::REASONING_IN_CONTENT
    } else if cap.content.trim().is_empty() {
        mark::EMPTY_ANSWER
    } else {
        mark::VALID
    }
}

pub use crate::report::quality::{mark, mark_counts};

/// A structured-output answer's mark (the module's table).
pub fn structured_mark(asked: &StructuredOutput, cap: &StreamCapture) -> char {
    if cap.failure.is_some() || cap.truncated {
        return mark::NO_ANSWER;
    }
    let Ok(value) = serde_json::from_str::<Value>(cap.content.trim()) else {
        return if cut_at_max_tokens(cap) {
            mark::CUT_OFF
        } else {
            mark::INVALID_JSON
        };
    };
    if asked.accepts(&value) {
        mark::VALID
    } else {
        mark::SCHEMA_INVALID
    }
}

/// Which function the answer called first, as a letter by its place in the
/// tools file (`A` the first offered; both runtimes were offered the same
/// file, so the letters compare across them): `n` no call, `f` a function
/// not offered, `-` no answer.
pub fn tool_function_mark(offered: &ToolCalling, cap: &StreamCapture) -> char {
    if cap.failure.is_some() || cap.truncated {
        return mark::NO_ANSWER;
    }
    let Some(call) = cap.tool_calls.first() else {
        return mark::NO_CALL;
    };
    match offered.offered(&call.name) {
        Some(i) if i < 26 => char::from(b'A' + i as u8),
        _ => mark::UNKNOWN_FUNCTION,
    }
}

/// A tool-call answer's mark (the module's table): the first call that
/// falls short decides it.
pub fn tool_call_mark(offered: &ToolCalling, cap: &StreamCapture) -> char {
    if cap.failure.is_some() || cap.truncated {
        return mark::NO_ANSWER;
    }
    if cap.tool_calls.is_empty() {
        return mark::NO_CALL;
    }
    for call in &cap.tool_calls {
        let Some(index) = offered
            .offered(&call.name)
            .filter(|_| offered.allows(&call.name))
        else {
            return mark::UNKNOWN_FUNCTION;
        };
        let Ok(args) = serde_json::from_str::<Value>(&call.arguments) else {
            return if cut_at_max_tokens(cap) {
                mark::CUT_OFF
            } else {
                mark::INVALID_JSON
            };
        };
        if !offered.arguments_valid(index, &args) {
            return mark::SCHEMA_INVALID;
        }
    }
    if cap.finish_reasons.last().is_some_and(|r| r == "tool_calls") {
        mark::VALID
    } else {
        mark::WRONG_FINISH
    }
}

fn cut_at_max_tokens(cap: &StreamCapture) -> bool {
    cap.finish_reasons.last().is_some_and(|r| r == "length")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::config::features::fixtures::{ANSWER_TOOL, answer_schema};

    fn answer(text: &str, finish: &str) -> StreamCapture {
        StreamCapture {
            content: text.into(),
            finish_reasons: vec![finish.into()],
            ..Default::default()
        }
    }

    #[test]
    fn each_reasoning_answer_is_marked_by_where_its_reasoning_went() {
        let with = |reasoning: &str, content: &str, from_content: bool| StreamCapture {
            reasoning: reasoning.into(),
            content: content.into(),
            reasoning_from_content: from_content,
            finish_reasons: vec!["length".into()],
            ..Default::default()
        };
        assert_eq!(reasoning_mark(&with("think", "42", false)), mark::VALID);
        assert_eq!(
            reasoning_mark(&with("think", "42", true)),
            mark::REASONING_IN_CONTENT
        );
        // max_tokens spent on reasoning: nothing after it.
        assert_eq!(
            reasoning_mark(&with("think", " ", false)),
            mark::EMPTY_ANSWER
        );
        assert_eq!(reasoning_mark(&with("", "42", false)), mark::NO_REASONING);
        let mut failed = with("think", "42", false);
        failed.truncated = true;
        assert_eq!(reasoning_mark(&failed), mark::NO_ANSWER);
        assert_eq!(
            mark_counts("1tem-"),
            [
                ("answer_empty", 1),
                ("no_answer", 1),
                ("no_reasoning", 1),
                ("reasoning_in_content", 1),
                ("valid", 1)
            ]
            .into_iter()
            .map(|(k, n)| (k.to_string(), n))
            .collect()
        );
    }

    #[test]
    fn each_answer_is_marked_by_what_came_back() {
        let s = answer_schema();
        assert_eq!(
            structured_mark(&s, &answer("{\"answer\": 42}", "stop")),
            mark::VALID
        );
        assert_eq!(
            structured_mark(&s, &answer(" {\"answer\":42}\n", "stop")),
            mark::VALID
        );
        assert_eq!(
            structured_mark(&s, &answer("{\"answer\": \"42\"}", "stop")),
            mark::SCHEMA_INVALID
        );
        assert_eq!(
            structured_mark(&s, &answer("{}", "stop")),
            mark::SCHEMA_INVALID
        );
        assert_eq!(
            structured_mark(&s, &answer("The answer is 42.", "stop")),
            mark::INVALID_JSON
        );
        assert_eq!(
            structured_mark(&s, &answer("{\"answer\": 4", "length")),
            mark::CUT_OFF
        );
        let failed = StreamCapture {
            failure: Some(crate::measure::record::Failure {
                class: crate::measure::record::Outcome::HttpError,
                message: "400".into(),
            }),
            ..answer("{\"answer\": 1}", "stop")
        };
        assert_eq!(structured_mark(&s, &failed), mark::NO_ANSWER);
        let capped = StreamCapture {
            truncated: true,
            ..answer("{\"answer\": 1}", "stop")
        };
        assert_eq!(structured_mark(&s, &capped), mark::NO_ANSWER);
        let object = StructuredOutput::load(
            &ResponseFormatSpec::Named("json_object".into()),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(
            structured_mark(&object, &answer("{\"x\": [1]}", "stop")),
            mark::VALID
        );
        assert_eq!(
            structured_mark(&object, &answer("[1, 2]", "stop")),
            mark::SCHEMA_INVALID
        );
        assert_eq!(
            mark_counts("11sjc-1").into_iter().collect::<Vec<_>>(),
            [
                ("cut_off".to_string(), 1),
                ("invalid_json".to_string(), 1),
                ("no_answer".to_string(), 1),
                ("schema_invalid".to_string(), 1),
                ("valid".to_string(), 3),
            ]
        );
    }

    fn tools(dir: &Path, choice: Option<&str>) -> anyhow::Result<ToolCalling> {
        std::fs::write(dir.join("tools.json"), ANSWER_TOOL).unwrap();
        ToolCalling::load(
            &ToolsSpec {
                file: "tools.json".into(),
                choice: choice.map(str::to_string),
                parallel: None,
            },
            dir,
        )
    }

    fn called(calls: &[(&str, &str)], finish: &str) -> StreamCapture {
        StreamCapture {
            tool_calls: calls
                .iter()
                .map(|(n, a)| crate::measure::record::ToolCall {
                    id: None,
                    name: (*n).into(),
                    arguments: (*a).into(),
                })
                .collect(),
            ..answer("", finish)
        }
    }

    #[test]
    fn each_tool_call_answer_is_marked_by_its_calls() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), Some("required")).unwrap();
        let ok = |calls: &[(&str, &str)]| tool_call_mark(&t, &called(calls, "tool_calls"));
        assert_eq!(ok(&[("submit_answer", "{\"answer\": 4}")]), mark::VALID);
        assert_eq!(
            ok(&[("submit_answer", "{\"answer\": 4}"), ("give_up", "{}")]),
            mark::VALID
        );
        assert_eq!(
            ok(&[("submit_answer", "{\"answer\": \"4\"}")]),
            mark::SCHEMA_INVALID
        );
        assert_eq!(
            ok(&[("submit_answer", "{\"answer\": ")]),
            mark::INVALID_JSON
        );
        assert_eq!(ok(&[("lookup", "{}")]), mark::UNKNOWN_FUNCTION);
        assert_eq!(ok(&[]), mark::NO_CALL);
        assert_eq!(
            tool_call_mark(&t, &called(&[("submit_answer", "{\"answer\": ")], "length")),
            mark::CUT_OFF
        );
        assert_eq!(
            tool_call_mark(&t, &called(&[("submit_answer", "{\"answer\": 4}")], "stop")),
            mark::WRONG_FINISH
        );
        let mut refused = called(&[], "stop");
        refused.failure = Some(crate::measure::record::Failure {
            class: crate::measure::record::Outcome::HttpError,
            message: "HTTP 500: tools param requires --jinja flag".into(),
        });
        assert_eq!(tool_call_mark(&t, &refused), mark::NO_ANSWER);
        // A named choice: any other function is the wrong one.
        let named = tools(dir.path(), Some("submit_answer")).unwrap();
        assert_eq!(
            tool_call_mark(&named, &called(&[("give_up", "{}")], "tool_calls")),
            mark::UNKNOWN_FUNCTION
        );
        let body = named.body_fields();
        assert_eq!(
            body[1].1,
            json!({"type": "function", "function": {"name": "submit_answer"}})
        );
        assert_eq!(body[0].1.as_array().unwrap().len(), 2);
    }
}
