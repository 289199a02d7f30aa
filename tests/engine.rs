//! The reference engine, for real: llama.cpp's server (xllamacpp) with the
//! SmolLM2-135M model, started from `engine/profiles.toml`.
//!
//! Needs `scripts/setup-engine.sh` to have run; fails (never skips) otherwise.

mod support;

use std::time::Duration;

use infergate::measure::discover;
use serde_json::{Value, json};

/// What one streamed chat completion delivered.
#[derive(Debug, Default)]
struct Streamed {
    /// Chunks carrying non-empty `delta.content`.
    content_chunks: usize,
    text: String,
    finish_reasons: Vec<String>,
    /// `usage` objects seen (must be exactly one, in a chunk with no choices).
    usages: Vec<Value>,
    /// llama.cpp's own count of generated tokens (`timings.predicted_n`).
    predicted_n: Option<u64>,
    saw_done: bool,
}

impl Streamed {
    fn usage(&self, field: &str) -> u64 {
        assert_eq!(self.usages.len(), 1, "expected one usage chunk: {self:?}");
        self.usages[0][field]
            .as_u64()
            .unwrap_or_else(|| panic!("usage.{field} missing: {self:?}"))
    }
}

fn chat_body(model: &str, content: &str, max_tokens: u32, stream: bool) -> Value {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": stream,
    });
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

async fn stream_chat(
    http: &reqwest::Client,
    base: &str,
    model: &str,
    content: &str,
    max_tokens: u32,
) -> Streamed {
    let url = format!("{base}/v1/chat/completions");
    let resp = http
        .post(&url)
        .json(&chat_body(model, content, max_tokens, true))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    assert_eq!(resp.status(), 200, "POST {url}");
    let body = resp
        .text()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: reading stream: {e}"));
    let mut out = Streamed::default();
    for line in body.lines().map(|l| l.trim_end_matches('\r')) {
        // Blank separators and `:` keep-alive comments carry nothing.
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim_start();
        if data == "[DONE]" {
            out.saw_done = true;
            continue;
        }
        assert!(!out.saw_done, "data after [DONE]: {data}");
        let chunk: Value =
            serde_json::from_str(data).unwrap_or_else(|e| panic!("bad chunk {data:?}: {e}"));
        assert!(chunk.get("error").is_none(), "error in stream: {data}");
        let choices = chunk["choices"].as_array().cloned().unwrap_or_default();
        for choice in &choices {
            if let Some(text) = choice["delta"]["content"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                out.content_chunks += 1;
                out.text.push_str(text);
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                out.finish_reasons.push(reason.to_string());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            assert!(
                choices.is_empty(),
                "usage rides in its own chunk with empty choices: {data}"
            );
            out.usages.push(usage.clone());
            out.predicted_n = chunk
                .pointer("/timings/predicted_n")
                .and_then(Value::as_u64);
        }
    }
    assert!(out.saw_done, "stream ended without [DONE]: {body}");
    out
}

async fn complete(
    http: &reqwest::Client,
    base: &str,
    model: &str,
    content: &str,
    max_tokens: u32,
) -> Value {
    let url = format!("{base}/v1/chat/completions");
    let resp = http
        .post(&url)
        .json(&chat_body(model, content, max_tokens, false))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    assert_eq!(resp.status(), 200, "POST {url}");
    resp.json()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

/// Prompt tokens of a chat request by the server's tokenizer: apply the chat
/// template (llama.cpp `/apply-template`), then `/tokenize` the result.
async fn templated_prompt_tokens(http: &reqwest::Client, base: &str, content: &str) -> usize {
    let url = format!("{base}/apply-template");
    let templated: Value = http
        .post(&url)
        .json(&json!({"messages": [{"role": "user", "content": content}]}))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .unwrap_or_else(|e| panic!("POST {url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let prompt = templated["prompt"]
        .as_str()
        .expect("apply-template returns prompt");
    discover::tokenize(http, base, prompt)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
        .expect("llama.cpp has /tokenize")
}

#[tokio::test]
async fn streamed_usage_counts_tokens_and_finish_reasons_are_right() {
    let engine = support::engine("baseline");
    let model = engine
        .profile
        .alias
        .as_deref()
        .expect("profiles set an alias");
    let base = &engine.base_url;
    let http = support::http();

    // Cut off by max_tokens: every generated token was streamed as content.
    let story = "Write a long story about a dragon who learns to bake bread.";
    let cut = stream_chat(&http, base, model, story, 16).await;
    assert_eq!(cut.finish_reasons, ["length"], "{cut:?}");
    assert_eq!(cut.usage("completion_tokens"), 16, "{cut:?}");
    assert!(
        cut.text.is_ascii(),
        "one token per chunk holds for ASCII text: {:?}",
        cut.text
    );
    assert_eq!(cut.content_chunks, 16, "{cut:?}");
    assert_eq!(cut.predicted_n, Some(16), "{cut:?}");
    let prompt_tokens = cut.usage("prompt_tokens");
    assert_eq!(cut.usage("total_tokens"), prompt_tokens + 16);

    // prompt_tokens agrees with the server's tokenizer and with a non-streamed request.
    assert_eq!(
        prompt_tokens as usize,
        templated_prompt_tokens(&http, base, story).await
    );
    let plain = complete(&http, base, model, story, 16).await;
    assert_eq!(
        plain["usage"]["prompt_tokens"].as_u64(),
        Some(prompt_tokens),
        "{plain}"
    );
    assert_eq!(
        plain["usage"]["completion_tokens"].as_u64(),
        Some(16),
        "{plain}"
    );
    assert_eq!(plain["choices"][0]["finish_reason"], "length", "{plain}");
    assert_eq!(
        plain["choices"][0]["message"]["content"].as_str(),
        Some(cut.text.as_str())
    );

    // Ends on its own: the end-of-turn token counts in completion_tokens but
    // is not sent as content, so usage is one more than the content chunks.
    let question = "What is the capital of France? Answer in one word.";
    let done = stream_chat(&http, base, model, question, 64).await;
    assert_eq!(done.finish_reasons, ["stop"], "{done:?}");
    let completion = done.usage("completion_tokens");
    assert!(completion < 64, "{done:?}");
    assert_eq!(completion, done.content_chunks as u64 + 1, "{done:?}");
    assert_eq!(done.predicted_n, Some(completion), "{done:?}");
    assert!(done.text.contains("Paris"), "{done:?}");
    assert_eq!(
        done.usage("prompt_tokens") as usize,
        templated_prompt_tokens(&http, base, question).await
    );
}

#[tokio::test]
async fn baseline_and_candidate_serve_at_the_same_time() {
    let baseline = support::engine("baseline");
    let candidate = support::engine("candidate");
    assert_ne!(baseline.base_url, candidate.base_url);
    assert_ne!(baseline.pid, candidate.pid);

    let http = support::http();
    let ask = |engine: &'static infergate::driver::engine::RunningEngine| {
        let http = http.clone();
        async move {
            let model = engine.profile.alias.as_deref().expect("alias");
            let v = complete(&http, &engine.base_url, model, "Name three colours.", 24).await;
            let text = v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (v["model"].as_str().map(str::to_string), text)
        }
    };
    let ((b_model, b_text), (c_model, c_text)) = tokio::join!(ask(baseline), ask(candidate));
    assert!(
        !b_text.trim().is_empty() && !c_text.trim().is_empty(),
        "{b_text:?} / {c_text:?}"
    );
    assert_eq!(b_model.as_deref(), baseline.profile.alias.as_deref());
    assert_eq!(c_model.as_deref(), candidate.profile.alias.as_deref());

    for e in [baseline, candidate] {
        let rss = support::rss_kib(e.pid).expect("engine process has /proc status");
        eprintln!(
            "{} RSS {:.0} MiB (ctx {} x{} slots)",
            e.profile.name,
            rss as f64 / 1024.0,
            e.profile.ctx_size,
            e.profile.parallel
        );
    }
}

#[tokio::test]
async fn discovered_context_is_the_per_slot_context_of_the_profile() {
    let http = support::http();
    for name in ["baseline", "candidate"] {
        let engine = support::engine(name);
        let info = discover::discover(&http, &engine.base_url, None, discover::REQUEST_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let p = &engine.profile;
        assert_eq!(
            info.context_window,
            Some(u64::from(p.ctx_size / p.parallel)),
            "{name}: {info:?}"
        );
        assert_eq!(info.context_train, Some(8192), "{name}: {info:?}");
        assert_eq!(
            Some(info.model_id.as_str()),
            p.alias.as_deref(),
            "{name}: {info:?}"
        );
        assert!(info.has_tokenize, "{name}: {info:?}");
        assert!(info.build.is_some(), "{name}: {info:?}");
    }
}

/// The process listening on loopback `port`, from /proc: the socket's inode
/// in `/proc/net/tcp`, then the process holding a descriptor to it.
fn listener_pid(port: u16) -> Option<u32> {
    let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = tcp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // local address 127.0.0.1:port, state 0A (LISTEN)
        (f.get(1) == Some(&format!("0100007F:{port:04X}").as_str()) && f.get(3) == Some(&"0A"))
            .then(|| f[9].to_string())
    })?;
    let socket = format!("socket:[{inode}]");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|p| {
        let pid: u32 = p.file_name().to_str()?.parse().ok()?;
        let fds = std::fs::read_dir(p.path().join("fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == socket.as_str()))
            .then_some(pid)
    })
}

fn port_of(base_url: &str) -> u16 {
    base_url.rsplit(':').next().unwrap().parse().unwrap()
}

/// Two engines of one profile started at once append to one log file. Each
/// starter takes its own process's ready line, so each URL is served by the
/// process it names; a dropped one stops, and the other serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_started_at_once_into_one_log_serve_their_own_urls_and_stop_when_dropped() {
    // Their own instances, not the shared one.
    let profile = support::profile("baseline");
    let dir = support::log_dir().join("drop-test");
    let (a, b) = tokio::join!(
        infergate::driver::engine::start(&profile, &dir),
        infergate::driver::engine::start(&profile, &dir)
    );
    let (a, b) = (
        a.unwrap_or_else(|e| panic!("{e:#}")),
        b.unwrap_or_else(|e| panic!("{e:#}")),
    );
    assert_eq!(a.log_path, b.log_path, "one log file");
    assert_ne!(a.base_url, b.base_url);
    for e in [&a, &b] {
        assert_eq!(
            listener_pid(port_of(&e.base_url)),
            Some(e.pid),
            "{}",
            e.base_url
        );
    }

    let (pid, health) = (a.pid, format!("{}/health", a.base_url));
    let http = support::http();
    let status = |url: String| {
        let http = http.clone();
        async move {
            http.get(&url)
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .ok()
        }
    };
    assert_eq!(status(health.clone()).await, Some(200));

    let t = std::time::Instant::now();
    drop(a);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "stop took {:?}",
        t.elapsed()
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still exists"
    );
    assert_eq!(status(health.clone()).await, None, "{health} still answers");
    assert_eq!(status(format!("{}/health", b.base_url)).await, Some(200));
}
