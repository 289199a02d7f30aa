//! Request bodies: chat and completions, always streaming with usage.

use serde_json::{Map, Value};

/// A chat request body that streams and asks for usage
/// (`stream_options.include_usage`: the server's own token counts).
/// `messages` should be a JSON array of `{role, content}` objects; `extra`
/// carries everything else (`model`, `cache_prompt`, `stop`, …). The fields
/// set here win over `extra`, except that other `stream_options` keys survive.
pub fn chat_body(
    messages: Value,
    max_tokens: u64,
    temperature: f64,
    seed: Option<u64>,
    extra: Map<String, Value>,
) -> Value {
    let mut m = extra;
    m.insert("messages".into(), messages);
    streaming_fields(&mut m, max_tokens, temperature, seed);
    Value::Object(m)
}

/// The `/v1/completions` counterpart of [`chat_body`], with a plain prompt.
pub fn completions_body(
    prompt: &str,
    max_tokens: u64,
    temperature: f64,
    seed: Option<u64>,
    extra: Map<String, Value>,
) -> Value {
    let mut m = extra;
    m.insert("prompt".into(), Value::from(prompt));
    streaming_fields(&mut m, max_tokens, temperature, seed);
    Value::Object(m)
}

pub(super) fn streaming_fields(
    m: &mut Map<String, Value>,
    max_tokens: u64,
    temperature: f64,
    seed: Option<u64>,
) {
    m.insert("max_tokens".into(), Value::from(max_tokens));
    m.insert("temperature".into(), Value::from(temperature));
    if let Some(s) = seed {
        m.insert("seed".into(), Value::from(s));
    }
    m.insert("stream".into(), Value::Bool(true));
    let opts = m
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Map::new()));
    if !opts.is_object() {
        *opts = Value::Object(Map::new());
    }
    if let Value::Object(o) = opts {
        o.insert("include_usage".into(), Value::Bool(true));
    }
}
