//! What an OpenAI-compatible server says about itself: the model it serves,
//! the context a request may use, its build, and whether it can tokenize.
//!
//! `/v1/models` is required. llama.cpp adds `meta.n_ctx` (per slot) and
//! `meta.n_ctx_train` there and has `/props`; vLLM and SGLang put
//! `max_model_len` in the model entry. vLLM names its build at `/version`;
//! SGLang has no `/version` (404) and names it in `/get_server_info`.
//! Everything beyond `/v1/models` is optional and its absence is not an
//! error.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::measure::answer;

/// Longest wait for each discovery request: these are small, local
/// answers. A shorter first-byte timeout (`--first-byte-timeout`) bounds it
/// further ([`discovery_wait`]).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long discovery waits for each answer under the run's timeouts: the
/// first-byte and total timeouts, at most [`REQUEST_TIMEOUT`].
pub fn discovery_wait(t: &crate::measure::client::Timeouts) -> Duration {
    t.first_byte.min(t.total).min(REQUEST_TIMEOUT)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// `data[0].id` of `/v1/models`: the name requests must use.
    pub model_id: String,
    /// Tokens one request may use (prompt + output): llama.cpp's per-slot
    /// `n_ctx`, or vLLM/SGLang `max_model_len`.
    pub context_window: Option<u64>,
    /// Context the model was trained with (llama.cpp `n_ctx_train`).
    pub context_train: Option<u64>,
    /// llama.cpp `/props` `build_info`, or `/version` `version`.
    pub build: Option<String>,
    /// `/tokenize` answered a probe with a token count.
    pub has_tokenize: bool,
    /// The server answered llama.cpp's `/props`: it speaks llama.cpp's
    /// dialect of request fields (`ignore_eos`, no `min_tokens`).
    pub llama_cpp: bool,
    /// Requests discovery sent (models, props, build, a `/tokenize` probe):
    /// named beside a qualification's measured requests.
    pub requests: usize,
}

/// Ask `base_url` (without `/v1`) about itself, waiting at most `wait` for
/// each answer.
pub async fn discover(
    http: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    wait: Duration,
) -> Result<ServerInfo> {
    let base = base_url.trim_end_matches('/');
    let models_url = format!("{base}/v1/models");
    // What messages show: the URL with its credentials removed.
    let shown = crate::util::redact(&models_url);
    let models = match get_json(http, &models_url, api_key, wait).await? {
        Some(v) => v,
        None if base.ends_with("/v1") => bail!(
            "GET {shown}: not found (HTTP 404); the target ends in /v1, and infergate adds /v1 itself: give the server's base URL without /v1 ({})",
            crate::util::redact(base.trim_end_matches("/v1"))
        ),
        None => {
            bail!("GET {shown}: not found (HTTP 404); is this an OpenAI-compatible server?")
        }
    };
    // Optional extras: a server without them (or failing on them) is still usable.
    let props = get_json(http, &format!("{base}/props"), api_key, wait)
        .await
        .ok()
        .flatten();
    let mut info =
        server_info_from(&models, props.as_ref()).with_context(|| format!("GET {shown}"))?;
    // `/v1/models`, `/props`, then each build path asked, then `/tokenize`.
    info.requests = 3;
    // The build: vLLM's `/version`, else SGLang's `/get_server_info` (its
    // whole configuration, with `version` among it).
    for path in BUILD_PATHS {
        if info.build.is_some() {
            break;
        }
        info.requests += 1;
        if let Ok(Some(v)) = get_json(http, &format!("{base}{path}"), api_key, wait).await {
            info.build = build_of(&v);
        }
    }
    info.has_tokenize = matches!(
        tokio::time::timeout(wait, tokenize_with_key(http, base, api_key, "hello")).await,
        Ok(Ok(Some(_)))
    );
    Ok(info)
}

/// Where a server without llama.cpp's `/props` names its build, in the
/// order asked: vLLM's `/version`, SGLang's `/get_server_info` (SGLang
/// answers 404 to `/version`).
const BUILD_PATHS: [&str; 2] = ["/version", "/get_server_info"];

/// The `version` string of a `/version` or `/get_server_info` answer.
fn build_of(v: &Value) -> Option<String> {
    v.get("version")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Token count of `text` by the server's own tokenizer, without special
/// tokens such as BOS; `None` when the server has no `/tokenize`.
///
/// Speaks both dialects in one body: llama.cpp reads `content` and answers
/// `{"tokens": [...]}`; vLLM and SGLang read `prompt` and answer `count`
/// (and `tokens`). Each ignores the other's fields.
pub async fn tokenize(http: &reqwest::Client, base_url: &str, text: &str) -> Result<Option<usize>> {
    tokenize_with_key(http, base_url, None, text).await
}

/// [`tokenize`] with a bearer key, for servers that guard every endpoint.
pub async fn tokenize_with_key(
    http: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    text: &str,
) -> Result<Option<usize>> {
    let url = format!("{}/tokenize", base_url.trim_end_matches('/'));
    let shown = crate::util::redact(&url);
    let body = json!({
        "content": text,
        "add_special": false,
        "prompt": text,
        "add_special_tokens": false,
    });
    let mut req = http.post(&url).timeout(REQUEST_TIMEOUT).json(&body);
    if let Some(key) = api_key {
        req = req.bearer_auth(key);
    }
    let resp = send_retrying(req)
        .await
        .with_context(|| format!("POST {shown}"))?;
    let status = resp.status();
    if is_absent(status) {
        return Ok(None);
    }
    let text_body =
        answer::read_text_capped(resp, answer::MAX_TOKENIZE_BYTES, "a /tokenize answer")
            .await
            .with_context(|| format!("POST {shown}"))?;
    if !status.is_success() {
        bail!("POST {shown}: HTTP {status}: {}", snippet(&text_body));
    }
    let v: Value = serde_json::from_str(&text_body).with_context(|| {
        format!(
            "POST {shown}: response is not JSON: {}",
            snippet(&text_body)
        )
    })?;
    token_count(&v).map(Some).with_context(|| {
        format!(
            "POST {shown}: neither `count` nor a `tokens` array in {}",
            snippet(&text_body)
        )
    })
}

/// `count` when given, else the length of `tokens`.
fn token_count(v: &Value) -> Option<usize> {
    if let Some(n) = v.get("count").and_then(Value::as_u64) {
        return usize::try_from(n).ok();
    }
    v.get("tokens").and_then(Value::as_array).map(Vec::len)
}

/// Build the description from `/v1/models` and, when present, llama.cpp `/props`.
pub fn server_info_from(models: &Value, props: Option<&Value>) -> Result<ServerInfo> {
    let Some(data) = models.get("data").and_then(Value::as_array) else {
        bail!("no `data` array in {}", snippet(&models.to_string()));
    };
    let Some(first) = data.first() else {
        bail!("`data` is empty: the server lists no model");
    };
    let Some(model_id) = first
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        bail!(
            "`data[0].id` is missing or empty in {}",
            snippet(&first.to_string())
        );
    };
    let meta = first.get("meta");
    let context_window = meta
        .and_then(|m| positive(m.get("n_ctx")))
        .or_else(|| positive(first.get("max_model_len")))
        .or_else(|| props.and_then(|p| positive(p.pointer("/default_generation_settings/n_ctx"))));
    let context_train = meta.and_then(|m| positive(m.get("n_ctx_train")));
    let build = props
        .and_then(|p| p.get("build_info"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    Ok(ServerInfo {
        model_id: model_id.to_string(),
        context_window,
        context_train,
        build,
        has_tokenize: false,
        llama_cpp: props.is_some_and(|p| p.get("default_generation_settings").is_some()),
        requests: 0,
    })
}

fn positive(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64).filter(|&n| n > 0)
}

/// GET `url` as JSON; `None` when the endpoint does not exist.
async fn get_json(
    http: &reqwest::Client,
    url: &str,
    api_key: Option<&str>,
    wait: Duration,
) -> Result<Option<Value>> {
    let mut req = http.get(url).timeout(wait);
    if let Some(key) = api_key {
        req = req.bearer_auth(key);
    }
    let url = crate::util::redact(url);
    let resp = match send_retrying(req).await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => bail!(
            "GET {url}: no answer within {:.1} s (discovery waits the first-byte timeout, --first-byte-timeout, at most {} s)",
            wait.as_secs_f64(),
            REQUEST_TIMEOUT.as_secs()
        ),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("GET {url}"))),
    };
    let status = resp.status();
    if is_absent(status) {
        return Ok(None);
    }
    let body = answer::read_text_capped(resp, answer::MAX_DISCOVERY_BYTES, "a discovery answer")
        .await
        .with_context(|| format!("GET {url}"))?;
    if !status.is_success() {
        bail!("GET {url}: HTTP {status}: {}", snippet(&body));
    }
    serde_json::from_str(&body)
        .map(Some)
        .with_context(|| format!("GET {url}: response is not JSON: {}", snippet(&body)))
}

/// Send once more if the first attempt failed before any response arrived.
///
/// llama.cpp closes a connection after a streamed response while still
/// advertising keep-alive, so a pooled connection can be dead when reused
/// (hyper: `IncompleteMessage`). Every request here is free of side effects,
/// so repeating it is safe.
async fn send_retrying(req: reqwest::RequestBuilder) -> reqwest::Result<reqwest::Response> {
    let again = req.try_clone();
    match req.send().await {
        Err(e) if !e.is_timeout() && e.status().is_none() => match again {
            Some(again) => again.send().await,
            None => Err(e),
        },
        result => result,
    }
}

/// Statuses meaning "this server has no such endpoint".
fn is_absent(status: reqwest::StatusCode) -> bool {
    matches!(status.as_u16(), 404 | 405 | 501)
}

/// A bounded, single-line excerpt of a server's answer for error messages.
fn snippet(s: &str) -> String {
    const MAX: usize = 300;
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback listener whose `/v1/models` answer never ends within the
    /// limit: a body past [`answer::MAX_DISCOVERY_BYTES`], length not announced.
    #[tokio::test]
    async fn an_oversized_models_answer_is_refused_with_the_limit_named() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let _ = s.read(&mut [0u8; 4096]).await;
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
            let _ = s.write_all(head.as_bytes()).await;
            let piece = vec![b' '; 1 << 20];
            for _ in 0..=(answer::MAX_DISCOVERY_BYTES >> 20) {
                if s.write_all(&piece).await.is_err() {
                    return;
                }
            }
        });
        let http = reqwest::Client::new();
        let e = discover(
            &http,
            &format!("http://{addr}"),
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("/v1/models") && e.contains(&answer::MAX_DISCOVERY_BYTES.to_string()),
            "{e}"
        );
    }

    #[test]
    fn llama_cpp_models_and_props() {
        let models = json!({"object": "list", "data": [{
            "id": "smol", "object": "model", "owned_by": "llamacpp",
            "meta": {"n_ctx": 4096, "n_ctx_train": 8192, "n_vocab": 49152}
        }]});
        let props =
            json!({"build_info": "b6500-abc", "default_generation_settings": {"n_ctx": 4096}});
        let info = server_info_from(&models, Some(&props)).unwrap();
        assert_eq!(
            info,
            ServerInfo {
                model_id: "smol".into(),
                context_window: Some(4096),
                context_train: Some(8192),
                build: Some("b6500-abc".into()),
                has_tokenize: false,
                llama_cpp: true,
                requests: 0,
            }
        );
    }

    #[test]
    fn vllm_models_without_props() {
        let models = json!({"object": "list", "data": [{
            "id": "zai-org/GLM-4.6", "object": "model", "max_model_len": 131072, "root": "zai-org/GLM-4.6"
        }]});
        let info = server_info_from(&models, None).unwrap();
        assert_eq!(info.model_id, "zai-org/GLM-4.6");
        assert_eq!(info.context_window, Some(131072));
        assert_eq!(info.context_train, None);
        assert_eq!(info.build, None);
    }

    /// SGLang 0.5.23 on the CPU (engine/sglang-serve.sh): its `/v1/models`
    /// entry, and an excerpt of its `/get_server_info`. Its `/version` is a
    /// 404, so the build comes from the second path.
    #[test]
    fn sglang_models_and_server_info() {
        let models = json!({"object": "list", "data": [{
            "id": "SmolLM2-135M-Instruct-Q4_1", "object": "model", "created": 1796311920,
            "owned_by": "sglang", "root": "SmolLM2-135M-Instruct-Q4_1", "parent": null,
            "max_model_len": 4096
        }]});
        let info = server_info_from(&models, None).unwrap();
        assert_eq!(info.model_id, "SmolLM2-135M-Instruct-Q4_1");
        assert_eq!(info.context_window, Some(4096));
        assert_eq!(info.build, None);
        assert!(!info.llama_cpp);
        let server_info = json!({
            "model_path": "/root/.cache/infergate/models/SmolLM2-135M-Instruct-hf-b179c952-1d72e9a3",
            "context_length": 4096, "device": "cpu", "dtype": "float32",
            "attention_backend": "torch_native", "max_total_tokens": 32768,
            "served_model_name": "SmolLM2-135M-Instruct-Q4_1", "version": "0.5.23"
        });
        assert_eq!(BUILD_PATHS, ["/version", "/get_server_info"]);
        assert_eq!(build_of(&server_info).as_deref(), Some("0.5.23"));
        assert_eq!(
            build_of(&json!({"version": "0.32.0"})).as_deref(),
            Some("0.32.0")
        );
        assert_eq!(build_of(&json!({"version": ""})), None);
        assert_eq!(build_of(&json!({"detail": "Not Found"})), None);
    }

    #[test]
    fn props_fill_in_context_when_models_lack_it() {
        let models = json!({"data": [{"id": "m"}]});
        let props = json!({"default_generation_settings": {"n_ctx": 2048}});
        assert_eq!(
            server_info_from(&models, Some(&props))
                .unwrap()
                .context_window,
            Some(2048)
        );
        assert_eq!(
            server_info_from(&models, None).unwrap().context_window,
            None
        );
    }

    #[test]
    fn unusable_model_lists_are_errors_that_say_why() {
        let empty = server_info_from(&json!({"data": []}), None).unwrap_err();
        assert!(empty.to_string().contains("lists no model"), "{empty}");
        let shape = server_info_from(&json!({"models": []}), None).unwrap_err();
        assert!(shape.to_string().contains("no `data` array"), "{shape}");
        let no_id = server_info_from(&json!({"data": [{"object": "model"}]}), None).unwrap_err();
        assert!(no_id.to_string().contains("data[0].id"), "{no_id}");
    }

    #[test]
    fn token_counts_from_either_dialect() {
        assert_eq!(token_count(&json!({"tokens": [1, 2, 3]})), Some(3));
        assert_eq!(
            token_count(&json!({"count": 5, "tokens": [1, 2, 3, 4, 5], "max_model_len": 8})),
            Some(5)
        );
        assert_eq!(
            token_count(&json!({"tokens": [{"id": 1, "piece": "a"}]})),
            Some(1)
        );
        assert_eq!(token_count(&json!({"error": "x"})), None);
    }

    #[test]
    fn snippet_is_bounded_and_single_line() {
        let long = "é\n".repeat(400);
        let s = snippet(&long);
        assert!(!s.contains('\n'));
        assert!(s.chars().count() <= 301);
    }
}
