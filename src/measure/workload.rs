//! Workload prompts: deterministic filler text sized to a prompt-token target
//! with the model's real tokenizer (server `/tokenize`), or calibrated from the
//! server's `usage.prompt_tokens` when no tokenizer is reachable.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::suite::{CachePolicy, CellEndpoint, CellSpec, OutputPolicy};
use crate::config::timeouts::{BYTES_PER_TOKEN_ESTIMATE, Timeouts};
use crate::measure::tokenizer::TokenizerFile;
// The filler lives in a leaf module (turnover tasks use it too).
pub use crate::measure::filler::{WORDS, filler, filler_words, push_filler};

/// Instruction after the filler; asks for a long answer so decode is measured.
pub const INSTRUCTION: &str = "Continue the list above with more words, one after another.";

/// The prefix that makes a request unique (cache-busting) or shared.
///
/// Unique prefixes lead with 8 hex digits hashed from the run, cell and
/// request, so two requests differ from their first content token: a shared
/// leading text (`[run X cell C request `) would be reused from the server's
/// prompt cache.
pub fn prefix(cache: CachePolicy, run_nonce: &str, cell: &str, index: usize) -> String {
    match cache {
        CachePolicy::Unique => unique_prefix(run_nonce, cell, &index.to_string()),
        CachePolicy::Shared => format!("[cell {cell}]"),
    }
}

/// The prefix of the sizing probes: the same shape (and so nearly the same
/// token count) as a request's, but shared by no measured or warmup request,
/// so probing never primes the cache for one (a probe of request 0's exact
/// prompt made it a cache hit: TTFT 26 ms against ~1000 ms).
pub fn probe_prefix(cache: CachePolicy, run_nonce: &str, cell: &str) -> String {
    match cache {
        CachePolicy::Unique => unique_prefix(run_nonce, cell, "probe"),
        CachePolicy::Shared => format!("[cell {cell}]"),
    }
}

/// How every unique prefix opens: a bracket and 8 hex digits.
const UNIQUE_LEAD_SHAPE: &str = "[00000000";

pub fn unique_prefix(run_nonce: &str, cell: &str, which: &str) -> String {
    // FNV-1a over the three parts, separated so ("a", "bc") ≠ ("ab", "c").
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [run_nonce, cell, which] {
        for b in part.bytes().chain([0xff]) {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    // The readable rest names the request for people (and the fault proxy's tests).
    format!(
        "[{:08x} cell {cell} request {which} run {run_nonce}]",
        (h ^ (h >> 32)) as u32
    )
}

pub fn user_content(prefix: &str, body: &str) -> String {
    format!("{prefix}\n{body}\n\n{INSTRUCTION}")
}

/// Counts tokens of whole prompts as the server will see them (chat template included).
pub struct PromptSizer {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    /// Server has `/tokenize` (the model's own tokenizer).
    tokenize: bool,
    /// The model's `tokenizer.json`, when given: used before `/tokenize`.
    file: Option<Arc<TokenizerFile>>,
    /// Counts `/tokenize` already gave, shared by every run against the same
    /// server process (a qualification's blocks), so the filler vocabulary
    /// is not counted again before each block.
    counted: TokenMemo,
    /// The run's timeouts: one answer waits the shorter of first byte and
    /// total, each with its text's allowance, never a fixed time.
    timeouts: Timeouts,
    /// Requests this sizer sent: prompt-sizing requests of one output
    /// token, and `/tokenize` calls (named beside the measured requests).
    usage_sent: std::sync::atomic::AtomicUsize,
    tokenize_sent: std::sync::atomic::AtomicUsize,
}

/// Token counts by text, as one server counted them.
pub type TokenMemo = Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>;

/// What sizing found for one cell.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SizedBody {
    /// Filler words that bring the prompt to the target.
    pub words: usize,
    pub body: String,
    /// Prompt tokens the server reported for the calibration prompt.
    pub measured_prompt_tokens: u64,
    /// `tokenizer.json <path> (sha256 …)`, "server /tokenize" or
    /// "usage.prompt_tokens calibration".
    pub method: String,
    /// Prompt tokens of the chat template around an empty user message: all
    /// that unique prompts share, so all a server may rightly serve from cache.
    /// None when the server refused an empty message.
    pub template_prompt_tokens: Option<u64>,
    /// Prompt tokens of the prefix and instruction around an empty body:
    /// with `words`, the filler's tokens per word (workload cells size
    /// each request from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_prompt_tokens: Option<u64>,
    /// Workload cells: what one probe of their own shape measured against
    /// what was planned (`measure::source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_probe: Option<Probe>,
}

/// What the probes of a workload cell measured (kept in `sizing.json`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Request 0 as planned, and as the server counted it: the difference
    /// (message framing, tokenization at joins) is taken off every request.
    pub planned: u64,
    pub measured: u64,
    /// Conversations: prompt tokens each later turn adds (turn 1 − turn 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_step: Option<u64>,
}

impl Probe {
    pub fn adjust(&self) -> i64 {
        self.measured as i64 - self.planned as i64
    }
}

impl SizedBody {
    /// Prompt tokens per filler word, from the sizing probe.
    pub fn tokens_per_word(&self) -> f64 {
        let over = self.overhead_prompt_tokens.unwrap_or(0);
        let body = self.measured_prompt_tokens.saturating_sub(over).max(1) as f64;
        body / self.words.max(1) as f64
    }

    /// Prompt tokens a user message of `prefix`, instruction and no body
    /// takes, template included (the sizing probe's).
    pub fn overhead(&self) -> u64 {
        self.overhead_prompt_tokens.unwrap_or(0)
    }
}

impl PromptSizer {
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<String>,
        model: &str,
        tokenize: bool,
        timeouts: Timeouts,
    ) -> Self {
        PromptSizer {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            model: model.to_string(),
            tokenize,
            file: None,
            counted: TokenMemo::default(),
            timeouts,
            usage_sent: Default::default(),
            tokenize_sent: Default::default(),
        }
    }

    /// Requests sent so far: (prompt-sizing requests of one output token,
    /// `/tokenize` calls).
    pub fn probes_sent(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.usage_sent.load(Relaxed),
            self.tokenize_sent.load(Relaxed),
        )
    }

    /// `req`, carrying `text_bytes` of prompt, sent; its answer awaited the
    /// shorter of the run's first-byte and total timeouts with the text's
    /// allowance (a probe of a 120k-token cell prefills 120k tokens); `what`
    /// names it in errors.
    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        what: &str,
        text_bytes: usize,
    ) -> Result<reqwest::Response> {
        let wait = self
            .timeouts
            .for_prompt((text_bytes / BYTES_PER_TOKEN_ESTIMATE) as u64)
            .unstreamed();
        match req.timeout(wait).send().await {
            Ok(r) => Ok(r),
            Err(e) if e.is_timeout() => bail!(
                "{what}: no answer within {:.1} s (the shorter of the run's first-byte and total timeouts, with the prompt's allowance)",
                wait.as_secs_f64()
            ),
            Err(e) => Err(anyhow::Error::new(e).context(what.to_string())),
        }
    }

    /// Share the counts of earlier runs against this server.
    pub fn with_memo(mut self, counted: TokenMemo) -> Self {
        self.counted = counted;
        self
    }

    /// Size bodies with the model's own `tokenizer.json` instead of the server.
    pub fn with_file(mut self, file: Arc<TokenizerFile>) -> Self {
        self.file = Some(file);
        self
    }

    /// How body tokens are counted, for the artifact.
    pub fn method(&self) -> String {
        match (&self.file, self.tokenize) {
            (Some(f), _) => f.describe(),
            (None, true) => "server /tokenize".into(),
            (None, false) => "usage.prompt_tokens calibration".into(),
        }
    }

    /// Prompt tokens of a full chat request, from the server's own usage (max_tokens 1).
    pub async fn prompt_tokens(&self, content: &str) -> Result<u64> {
        self.messages_prompt_tokens(json!([{"role": "user", "content": content}]))
            .await
    }

    /// Prompt tokens of a request of a cell on `endpoint` carrying
    /// `content`, from the server's own usage (max_tokens 1).
    pub async fn endpoint_prompt_tokens(
        &self,
        endpoint: CellEndpoint,
        content: &str,
    ) -> Result<u64> {
        match endpoint {
            CellEndpoint::Chat => self.prompt_tokens(content).await,
            CellEndpoint::Completions => {
                self.usage_prompt_tokens("/v1/completions", ("prompt", json!(content)))
                    .await
            }
        }
    }

    /// Prompt tokens of a chat request of these messages, from the server's usage.
    pub async fn messages_prompt_tokens(&self, messages: Value) -> Result<u64> {
        self.usage_prompt_tokens("/v1/chat/completions", ("messages", messages))
            .await
    }

    /// Prompt tokens of an unstreamed request to `path` carrying `input`,
    /// from the server's usage.
    async fn usage_prompt_tokens(&self, path: &str, (key, value): (&str, Value)) -> Result<u64> {
        let url = format!("{}{path}", self.base_url);
        let shown = crate::util::redact(&url);
        let body = json!({
            "model": self.model,
            key: value,
            "max_tokens": 1,
            "temperature": 0.0,
            "stream": false,
        });
        // Serialized once: its size sets the wait, and it is what is sent.
        let payload = serde_json::to_vec(&body).context("encoding the sizing request")?;
        let text_bytes = payload.len();
        let mut req = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(payload);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        self.usage_sent
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let resp = self
            .send(req, &format!("POST {shown} (prompt sizing)"), text_bytes)
            .await?;
        let status = resp.status();
        let v = json_capped(resp, &shown).await?;
        if !status.is_success() {
            bail!(
                "POST {shown} (prompt sizing): HTTP {status}: {}",
                crate::measure::record::bounded(&v.to_string(), 300)
            );
        }
        v.pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .with_context(|| format!("POST {shown}: response has no usage.prompt_tokens"))
    }

    /// Can raw text be counted (a tokenizer file, or the server's `/tokenize`)?
    pub fn counts_text(&self) -> bool {
        self.file.is_some() || self.tokenize
    }

    /// Token count of raw text: the tokenizer file, else `/tokenize`.
    pub async fn text_tokens(&self, text: &str) -> Result<u64> {
        if let Some(f) = &self.file {
            return f.count(text);
        }
        let counted = || {
            self.counted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(&n) = counted().get(text) {
            return Ok(n);
        }
        let n = self.server_tokens(text).await?;
        counted().insert(text.to_string(), n);
        Ok(n)
    }

    /// Token count of raw text by the server's `/tokenize`.
    async fn server_tokens(&self, text: &str) -> Result<u64> {
        let url = format!("{}/tokenize", self.base_url);
        let shown = crate::util::redact(&url);
        let mut req = self
            .http
            .post(&url)
            .json(&json!({"content": text, "prompt": text, "model": self.model}));
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        self.tokenize_sent
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let resp = self.send(req, &format!("POST {shown}"), text.len()).await?;
        let v = json_capped(resp, &shown).await?;
        if let Some(t) = v.get("tokens").and_then(Value::as_array) {
            return Ok(t.len() as u64);
        }
        v.get("count")
            .and_then(Value::as_u64)
            .with_context(|| format!("POST {shown}: neither tokens nor count in response"))
    }

    /// Find the filler length that makes a `cell` prompt hit its target.
    ///
    /// The template overhead (chat template + prefix + instruction) is measured
    /// once from usage; the body is then sized with `/tokenize`, or by further
    /// usage probes when there is none. A final usage probe checks the result.
    pub async fn size(&self, cell: &CellSpec, run_nonce: &str) -> Result<SizedBody> {
        let pre = probe_prefix(cell.cache, run_nonce, &cell.name);
        // What prompts of the cell may share: the chat template around an
        // empty message, or a text prompt's hashed lead (two unique prompts
        // share its first digits by chance, 1 in 16 for one digit).
        let shared = match cell.endpoint {
            CellEndpoint::Chat => "",
            CellEndpoint::Completions => UNIQUE_LEAD_SHAPE,
        };
        let template_prompt_tokens = self
            .endpoint_prompt_tokens(cell.endpoint, shared)
            .await
            .ok();
        let overhead = self
            .endpoint_prompt_tokens(cell.endpoint, &user_content(&pre, ""))
            .await?;
        if overhead >= cell.prompt_tokens {
            bail!(
                "cell '{}': prompt_tokens {} is below the fixed prompt overhead of {} tokens",
                cell.name,
                cell.prompt_tokens,
                overhead
            );
        }
        let need = cell.prompt_tokens - overhead;
        let seed = cell_seed(cell);
        let endpoint = cell.endpoint;
        let pre_ref = &pre;
        let count = move |words: usize| async move {
            let body = filler(words, seed);
            if self.tokenize || self.file.is_some() {
                self.text_tokens(&body).await
            } else {
                Ok(self
                    .endpoint_prompt_tokens(endpoint, &user_content(pre_ref, &body))
                    .await?
                    .saturating_sub(overhead))
            }
        };
        // Secant-style refinement on the words→tokens ratio; a few rounds suffice
        // because the ratio is nearly constant for this filler.
        let probe_words = 256usize;
        let mut ratio = count(probe_words).await? as f64 / probe_words as f64;
        if ratio <= 0.0 {
            bail!(
                "cell '{}': tokenizer returned 0 tokens for filler text",
                cell.name
            );
        }
        let mut words = ((need as f64) / ratio).round().max(1.0) as usize;
        let slack = (cell.prompt_tokens as f64 * 0.002).max(2.0);
        for _ in 0..6 {
            let got = count(words).await?;
            if (got as f64 - need as f64).abs() <= slack {
                break;
            }
            ratio = got as f64 / words as f64;
            words = ((need as f64) / ratio).round().max(1.0) as usize;
        }
        let body = filler(words, cell_seed(cell));
        let measured = self
            .endpoint_prompt_tokens(cell.endpoint, &user_content(&pre, &body))
            .await?;
        Ok(SizedBody {
            words,
            body,
            measured_prompt_tokens: measured,
            method: self.method(),
            template_prompt_tokens,
            overhead_prompt_tokens: Some(overhead),
            workload_probe: None,
        })
    }
}

pub fn cell_seed(cell: &CellSpec) -> u64 {
    // Same cell name + seed → same filler on baseline and candidate.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cell.name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h ^ cell.seed.unwrap_or(0)
}

/// How a server is asked for exactly `max_tokens` output tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthDialect {
    /// llama.cpp: `ignore_eos` (it has no `min_tokens`).
    LlamaCpp,
    /// vLLM and SGLang: `ignore_eos` and `min_tokens`.
    Vllm,
}

impl LengthDialect {
    /// llama.cpp answers `/props`; the others are taken to speak vLLM's dialect.
    pub fn of_server(is_llama_cpp: bool) -> LengthDialect {
        if is_llama_cpp {
            LengthDialect::LlamaCpp
        } else {
            LengthDialect::Vllm
        }
    }

    fn fields(self, max_tokens: u64) -> Vec<(&'static str, Value)> {
        match self {
            LengthDialect::LlamaCpp => vec![("ignore_eos", json!(true))],
            LengthDialect::Vllm => vec![
                ("ignore_eos", json!(true)),
                ("min_tokens", json!(max_tokens)),
            ],
        }
    }

    /// For the artifact's `method`.
    pub fn describe(self) -> &'static str {
        match self {
            LengthDialect::LlamaCpp => {
                "cells with output = \"fixed\" send ignore_eos: true (llama.cpp dialect); output_length.held says whether every request got exactly max_tokens"
            }
            LengthDialect::Vllm => {
                "cells with output = \"fixed\" send ignore_eos: true and min_tokens = max_tokens (vLLM/SGLang dialect); output_length.held says whether every request got exactly max_tokens"
            }
        }
    }
}

/// The request body for one request of a plain cell: a user message, or
/// for a completions cell the same text as the prompt. A cell's `extra` wins
/// over the length dialect's fields (never over the reserved ones: refused
/// when the suite is read).
pub fn request_body(
    cell: &CellSpec,
    model: &str,
    content: String,
    dialect: LengthDialect,
) -> Value {
    let input = match cell.endpoint {
        CellEndpoint::Chat => ("messages", json!([{"role": "user", "content": content}])),
        CellEndpoint::Completions => ("prompt", json!(content)),
    };
    body_of(cell, model, input, cell.max_tokens, dialect)
}

/// [`request_body`] for any messages and output cap (workload cells).
pub fn messages_body(
    cell: &CellSpec,
    model: &str,
    messages: Value,
    max_tokens: u64,
    dialect: LengthDialect,
) -> Value {
    body_of(cell, model, ("messages", messages), max_tokens, dialect)
}

/// A streamed body carrying `input` (`messages` or `prompt`).
fn body_of(
    cell: &CellSpec,
    model: &str,
    (key, value): (&str, Value),
    max_tokens: u64,
    dialect: LengthDialect,
) -> Value {
    let mut body = json!({
        "model": model,
        key: value,
        "max_tokens": max_tokens,
        "temperature": cell.temperature,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if let Some(seed) = cell.seed {
        body["seed"] = json!(seed);
    }
    if cell.output == OutputPolicy::Fixed {
        for (k, v) in dialect.fields(max_tokens) {
            body[k] = v;
        }
    }
    if let Value::Object(map) = &mut body {
        for (k, v) in &cell.extra {
            if let Ok(v) = serde_json::to_value(v) {
                map.insert(k.clone(), v);
            }
        }
    }
    body
}

/// A sizing or `/tokenize` answer as JSON, read under its limit.
async fn json_capped(resp: reqwest::Response, shown: &str) -> Result<Value> {
    use crate::measure::answer;
    let bytes = answer::read_capped(
        resp,
        answer::MAX_TOKENIZE_BYTES,
        "a sizing or /tokenize answer",
    )
    .await
    .with_context(|| format!("POST {shown}"))?;
    serde_json::from_slice(&bytes).with_context(|| format!("POST {shown}: response is not JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(output: &str) -> CellSpec {
        let text = format!(
            "name = \"t\"\n[[cell]]\nname = \"a\"\nprompt_tokens = 10\nmax_tokens = 7\nrequests = 1\noutput = \"{output}\"\n"
        );
        crate::config::suite::Suite::parse(&text, "t.toml")
            .unwrap()
            .cells
            .remove(0)
    }

    #[test]
    fn fixed_output_asks_in_the_servers_dialect_and_free_output_does_not() {
        let fixed = cell("fixed");
        let b = request_body(&fixed, "m", "x".into(), LengthDialect::LlamaCpp);
        assert_eq!(b["ignore_eos"], json!(true));
        assert!(b.get("min_tokens").is_none(), "{b}");
        let b = request_body(&fixed, "m", "x".into(), LengthDialect::Vllm);
        assert_eq!(
            (&b["ignore_eos"], &b["min_tokens"]),
            (&json!(true), &json!(7))
        );
        let b = request_body(&cell("free"), "m", "x".into(), LengthDialect::Vllm);
        assert!(
            b.get("ignore_eos").is_none() && b.get("min_tokens").is_none(),
            "{b}"
        );
        assert_eq!((&b["max_tokens"], &b["stream"]), (&json!(7), &json!(true)));
    }

    #[test]
    fn filler_is_deterministic_and_sized_in_words() {
        let a = filler(100, 3);
        assert_eq!(a, filler(100, 3));
        assert_ne!(a, filler(100, 4));
        assert_eq!(a.split(' ').count(), 100);
    }

    #[test]
    fn unique_prefixes_differ_shared_do_not() {
        assert_ne!(
            prefix(CachePolicy::Unique, "n", "c", 1),
            prefix(CachePolicy::Unique, "n", "c", 2)
        );
        assert_eq!(
            prefix(CachePolicy::Shared, "n", "c", 1),
            prefix(CachePolicy::Shared, "m", "c", 2)
        );
    }

    #[test]
    fn unique_prefixes_differ_at_once_and_the_probe_is_no_request() {
        let probe = probe_prefix(CachePolicy::Unique, "n", "c");
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..2000 {
            let p = prefix(CachePolicy::Unique, "n", "c", i);
            assert_ne!(p, probe);
            // The distinguishing hex comes right after the bracket.
            assert!(seen.insert(p[1..9].to_string()), "hex clash at {i}");
        }
        assert_ne!(
            prefix(CachePolicy::Unique, "n", "c", 1)[..3],
            prefix(CachePolicy::Unique, "m", "c", 1)[..3]
        );
    }
}
