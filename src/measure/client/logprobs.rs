//! Per-token logprobs from a streamed chunk's `choices[].logprobs`, in the
//! shapes servers send: the chat dialect (OpenAI, llama.cpp, vLLM:
//! `{content: [{token, logprob, bytes, id?, top_logprobs: [{token, logprob,
//! bytes}]}]}`) and the legacy completions one (vLLM `/v1/completions`:
//! `{tokens, token_logprobs, top_logprobs: [{token: logprob}]}`).

use serde_json::Value;

use crate::report::agreement::{TokenLogprob, TopLogprob};

/// The tokens of one chunk's `logprobs`; None when it is in no shape read
/// here (the caller then drops the whole list rather than keep a gap).
pub(super) fn parse(v: &Value) -> Option<Vec<TokenLogprob>> {
    if let Some(content) = v.get("content") {
        // `content: null` in a chunk that carries no token (role, finish).
        if content.is_null() {
            return Some(Vec::new());
        }
        return content.as_array()?.iter().map(chat_token).collect();
    }
    legacy(v)
}

fn chat_token(e: &Value) -> Option<TokenLogprob> {
    let (token, bytes, logprob) = head(e)?;
    let mut top: Vec<TopLogprob> = match e.get("top_logprobs") {
        None | Some(Value::Null) => Vec::new(),
        Some(t) => t
            .as_array()?
            .iter()
            .map(|a| {
                let (token, bytes, logprob) = head(a)?;
                Some(TopLogprob {
                    token,
                    bytes,
                    logprob,
                })
            })
            .collect::<Option<_>>()?,
    };
    sort_top(&mut top);
    Some(TokenLogprob {
        token,
        bytes,
        id: e.get("id").and_then(Value::as_i64),
        logprob,
        top,
    })
}

/// `token`, `bytes` (kept only when they are not `token`'s UTF-8) and a
/// finite `logprob`.
fn head(e: &Value) -> Option<(String, Option<Vec<u8>>, f64)> {
    let token = e.get("token")?.as_str()?.to_owned();
    let logprob = e.get("logprob")?.as_f64().filter(|l| l.is_finite())?;
    let bytes = match e.get("bytes") {
        None | Some(Value::Null) => None,
        Some(b) => {
            let b: Vec<u8> = b
                .as_array()?
                .iter()
                .map(|x| x.as_u64().and_then(|x| u8::try_from(x).ok()))
                .collect::<Option<_>>()?;
            (b != token.as_bytes()).then_some(b)
        }
    };
    Some((token, bytes, logprob))
}

fn legacy(v: &Value) -> Option<Vec<TokenLogprob>> {
    let tokens = v.get("tokens")?.as_array()?;
    let lps = v.get("token_logprobs")?.as_array()?;
    let tops = v.get("top_logprobs").and_then(Value::as_array);
    if lps.len() != tokens.len() {
        return None;
    }
    tokens
        .iter()
        .zip(lps)
        .enumerate()
        .map(|(i, (t, lp))| {
            let mut top: Vec<TopLogprob> = match tops.and_then(|t| t.get(i)) {
                None | Some(Value::Null) => Vec::new(),
                Some(m) => m
                    .as_object()?
                    .iter()
                    .map(|(k, l)| {
                        Some(TopLogprob {
                            token: k.clone(),
                            bytes: None,
                            logprob: l.as_f64().filter(|l| l.is_finite())?,
                        })
                    })
                    .collect::<Option<_>>()?,
            };
            sort_top(&mut top);
            Some(TokenLogprob {
                token: t.as_str()?.to_owned(),
                bytes: None,
                id: None,
                logprob: lp.as_f64().filter(|l| l.is_finite())?,
                top,
            })
        })
        .collect()
}

/// Most likely first (servers send them so; a map does not keep order).
fn sort_top(top: &mut [TopLogprob]) {
    top.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn llama_cpp_chat_shape() {
        // As llama.cpp streams a chat chunk's logprobs: each token with its
        // `id`, `bytes` and `top_logprobs`.
        let v = json!({"content": [{"id": 504, "token": "The", "bytes": [84, 104, 101],
            "logprob": -1.55, "top_logprobs": [
                {"id": 330, "token": "A", "bytes": [65], "logprob": -1.86},
                {"id": 504, "token": "The", "bytes": [84, 104, 101], "logprob": -1.55}]}]});
        let t = parse(&v).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].token.as_str(), t[0].id, t[0].logprob),
            ("The", Some(504), -1.55)
        );
        assert_eq!(t[0].bytes, None, "bytes equal to the text are not kept");
        let top: Vec<&str> = t[0].top.iter().map(|x| x.token.as_str()).collect();
        assert_eq!(top, ["The", "A"], "most likely first");
    }

    #[test]
    fn vllm_chat_and_completions_shapes_and_partial_bytes() {
        // vLLM chat: no ids; a token that is half a character keeps its bytes.
        let v = json!({"content": [{"token": "bytes:\\xe2", "bytes": [226], "logprob": -0.5,
            "top_logprobs": [{"token": "bytes:\\xe2", "bytes": [226], "logprob": -0.5}]}]});
        let t = parse(&v).unwrap();
        assert_eq!((t[0].id, t[0].bytes.as_deref()), (None, Some(&[226u8][..])));
        assert_eq!(t[0].key(), &[226u8]);
        let v = json!({"tokens": [" a", " b"], "token_logprobs": [-0.1, -0.2],
            "top_logprobs": [{" a": -0.1, " c": -2.0}, null]});
        let t = parse(&v).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].top.len(), 2);
        assert!(t[1].top.is_empty());
    }

    #[test]
    fn absent_or_unreadable() {
        assert_eq!(parse(&json!({"content": null})), Some(vec![]));
        assert_eq!(parse(&json!({"content": [{"token": "x"}]})), None);
        assert_eq!(
            parse(&json!({"content": [{"token": "x", "logprob": "a"}]})),
            None
        );
        assert_eq!(parse(&json!({"refusal": null})), None);
    }
}
