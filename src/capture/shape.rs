//! What a recorded request's body says of its shape (endpoint, sampling,
//! tools, format), and its prompt as the material its blocks are cut from.
//! Nothing here is written: the trace keeps the shape's numbers only.

use serde::Serialize;
use serde_json::Value;

/// The endpoints whose requests are recorded; every other path passes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    Chat,
    Completions,
    Embeddings,
}

impl Endpoint {
    pub fn of(post: bool, path: &str) -> Option<Endpoint> {
        match (post, path) {
            (true, "/v1/chat/completions") => Some(Endpoint::Chat),
            (true, "/v1/completions") => Some(Endpoint::Completions),
            (true, "/v1/embeddings") => Some(Endpoint::Embeddings),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
            Endpoint::Embeddings => "embeddings",
        }
    }
}

/// The request's shape, as the trace line keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Shape {
    /// The body was a JSON object (else everything below is absent).
    pub parsed: bool,
    pub model: Option<String>,
    pub stream: bool,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// Tools offered: how many, and their JSON's size in bytes.
    pub tools: Option<usize>,
    pub tools_bytes: Option<usize>,
    /// A `response_format` asked for: its JSON's size in bytes.
    pub response_format_bytes: Option<usize>,
    /// Inputs in one request (an embeddings `input` or a completion's
    /// `prompt` given as a list): how an embeddings replay batches them.
    pub inputs: Option<usize>,
    pub body_bytes: usize,
}

/// What a prompt's blocks are cut from: its text, or token ids sent as such.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
}

/// Read a recorded request's body.
pub fn read(endpoint: Endpoint, body: &[u8]) -> (Shape, Prompt) {
    let mut shape = Shape {
        body_bytes: body.len(),
        ..Shape::default()
    };
    let Ok(Value::Object(v)) = serde_json::from_slice::<Value>(body) else {
        return (shape, Prompt::Text(String::new()));
    };
    shape.parsed = true;
    shape.model = v.get("model").and_then(Value::as_str).map(str::to_string);
    shape.stream = v.get("stream").and_then(Value::as_bool).unwrap_or(false);
    shape.max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_u64));
    shape.temperature = v.get("temperature").and_then(Value::as_f64);
    if let Some(t) = v.get("tools").filter(|t| !t.is_null()) {
        shape.tools = Some(t.as_array().map_or(1, Vec::len));
        shape.tools_bytes = Some(json_len(t));
    }
    if let Some(f) = v.get("response_format").filter(|f| !f.is_null()) {
        shape.response_format_bytes = Some(json_len(f));
    }
    shape.inputs = match endpoint {
        Endpoint::Chat => None,
        Endpoint::Completions => count(v.get("prompt")),
        Endpoint::Embeddings => count(v.get("input")),
    };
    let prompt = match endpoint {
        Endpoint::Chat => Prompt::Text(chat_text(v.get("messages"))),
        Endpoint::Completions => input(v.get("prompt")),
        Endpoint::Embeddings => input(v.get("input")),
    };
    (shape, prompt)
}

fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// Each message's role and content, in order; non-text parts and tool
/// calls as their JSON (their bytes are part of the prompt too).
fn chat_text(messages: Option<&Value>) -> String {
    let mut s = String::new();
    for m in messages.and_then(Value::as_array).into_iter().flatten() {
        s.push_str(m.get("role").and_then(Value::as_str).unwrap_or(""));
        s.push('\n');
        match m.get("content") {
            Some(Value::String(t)) => s.push_str(t),
            Some(Value::Array(parts)) => {
                for p in parts {
                    match p.get("text").and_then(Value::as_str) {
                        Some(t) => s.push_str(t),
                        None => s.push_str(&p.to_string()),
                    }
                }
            }
            _ => {}
        }
        if let Some(calls) = m.get("tool_calls") {
            s.push_str(&calls.to_string());
        }
        s.push('\n');
    }
    s
}

/// How many inputs a `prompt` or `input` holds: a string or one list of
/// token ids is one; a list of strings or of id lists, one each.
fn count(v: Option<&Value>) -> Option<usize> {
    match v? {
        Value::Array(a) if a.is_empty() || a.iter().all(Value::is_number) => Some(1),
        Value::Array(a) => Some(a.len()),
        Value::Null => None,
        _ => Some(1),
    }
}

/// A completion's `prompt` or an embedding's `input`: a string, strings,
/// or token ids (one list, or several).
fn input(v: Option<&Value>) -> Prompt {
    let Some(v) = v else {
        return Prompt::Text(String::new());
    };
    let ids = |a: &[Value]| -> Option<Vec<u32>> {
        a.iter()
            .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
            .collect()
    };
    match v {
        Value::String(s) => Prompt::Text(s.clone()),
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_number) => {
            ids(a).map_or_else(|| Prompt::Text(v.to_string()), Prompt::Tokens)
        }
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_array) => {
            let mut all = Vec::new();
            for x in a {
                match x.as_array().and_then(|x| ids(x)) {
                    Some(t) => all.extend(t),
                    None => return Prompt::Text(v.to_string()),
                }
            }
            Prompt::Tokens(all)
        }
        Value::Array(a) => Prompt::Text(
            a.iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        other => Prompt::Text(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_body_gives_its_shape_and_prompt() {
        let body = br#"{"model":"m","stream":true,"max_tokens":9,"temperature":0.5,"tools":[{"type":"function"}],"response_format":{"type":"json_object"},"messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"U"}]}]}"#;
        let (s, p) = read(Endpoint::Chat, body);
        assert!(s.parsed && s.stream);
        assert_eq!(s.model.as_deref(), Some("m"));
        assert_eq!((s.max_tokens, s.temperature), (Some(9), Some(0.5)));
        assert_eq!((s.tools, s.tools_bytes), (Some(1), Some(21)));
        assert_eq!(s.response_format_bytes, Some(22));
        assert_eq!(p, Prompt::Text("system\nS\nuser\nU\n".into()));
        assert_eq!(s.inputs, None);
        let (s, p) = read(Endpoint::Embeddings, br#"{"input":[[1,2],[3]]}"#);
        assert!(s.parsed && !s.stream);
        assert_eq!(p, Prompt::Tokens(vec![1, 2, 3]));
        assert_eq!(s.inputs, Some(2));
        for (body, n) in [
            (&br#"{"input":"one"}"#[..], Some(1)),
            (br#"{"input":["a","b","c"]}"#, Some(3)),
            (br#"{"input":[5,6,7]}"#, Some(1)),
            (br#"{"model":"m"}"#, None),
        ] {
            assert_eq!(read(Endpoint::Embeddings, body).0.inputs, n, "{body:?}");
        }
        let (s, _) = read(Endpoint::Chat, b"{not json");
        assert!(!s.parsed);
        assert_eq!(s.body_bytes, 9);
    }
}
