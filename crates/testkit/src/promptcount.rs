//! Prompt tokens of a chat request as a ChatML server counts them: the
//! fast source's counting mode ([`crate::fastsource::FastSourceConfig::counter`]).
//!
//! The reference engine (llama.cpp serving SmolLM2-135M-Instruct) formats a
//! chat as its Jinja template does: a default system message when the first
//! message is not a system one, then `<|im_start|>{role}\n{content}<|im_end|>\n`
//! per message and `<|im_start|>assistant\n`; it tokenizes that text with
//! special tokens recognised and no BOS added (`/apply-template` and
//! `/tokenize` of the engine agree with its `usage.prompt_tokens`). This
//! module does the same with the model's `tokenizer.json`, so the source
//! reports the count the engine would, without prefilling anything.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

/// The system message SmolLM2-135M-Instruct's chat template adds when a
/// conversation has none.
pub const SMOLLM2_DEFAULT_SYSTEM: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// One message of a chat request, as the counting source read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// A ChatML template and the tokenizer that counts what it makes.
#[derive(Clone)]
pub struct PromptCounter {
    tokenizer: Arc<tokenizers::Tokenizer>,
    default_system: Option<String>,
}

impl fmt::Debug for PromptCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptCounter")
            .field("default_system", &self.default_system)
            .finish_non_exhaustive()
    }
}

impl PromptCounter {
    /// ChatML with `tokenizer_json` (a Hugging Face `tokenizer.json`'s
    /// bytes), adding `default_system` first when a chat has no system message.
    pub fn chatml(tokenizer_json: &[u8], default_system: Option<&str>) -> Result<PromptCounter> {
        let tokenizer = tokenizers::Tokenizer::from_bytes(tokenizer_json)
            .map_err(|e| anyhow!("not a Hugging Face tokenizer.json: {e}"))?;
        Ok(PromptCounter {
            tokenizer: Arc::new(tokenizer),
            default_system: default_system.map(str::to_string),
        })
    }

    /// The reference model's template (SmolLM2-135M-Instruct), counted with
    /// its `tokenizer.json` (`scripts/setup-tokenizer.sh`).
    pub fn smollm2(tokenizer_json: &Path) -> Result<PromptCounter> {
        let bytes = std::fs::read(tokenizer_json)
            .with_context(|| format!("reading {}", tokenizer_json.display()))?;
        PromptCounter::chatml(&bytes, Some(SMOLLM2_DEFAULT_SYSTEM))
            .with_context(|| tokenizer_json.display().to_string())
    }

    /// The prompt text the template makes of `messages`, ready for the
    /// assistant's answer.
    pub fn prompt(&self, messages: &[ChatMessage]) -> String {
        let len: usize = messages.iter().map(|m| m.content.len() + 32).sum();
        let mut s = String::with_capacity(len + 128);
        let mut turn = |role: &str, content: &str| {
            s.push_str("<|im_start|>");
            s.push_str(role);
            s.push('\n');
            s.push_str(content);
            s.push_str("<|im_end|>\n");
        };
        if let Some(system) = &self.default_system
            && messages.first().is_none_or(|m| m.role != "system")
        {
            turn("system", system);
        }
        for m in messages {
            turn(&m.role, &m.content);
        }
        s.push_str("<|im_start|>assistant\n");
        s
    }

    /// Tokens of `text`, special tokens in it recognised, none added.
    pub fn count_text(&self, text: &str) -> Result<u64> {
        let enc = self
            .tokenizer
            .encode_fast(text, false)
            .map_err(|e| anyhow!("cannot encode text: {e}"))?;
        Ok(enc.len() as u64)
    }

    /// Prompt tokens of a chat request of `messages`.
    pub fn count_chat(&self, messages: &[ChatMessage]) -> Result<u64> {
        self.count_text(&self.prompt(messages))
    }
}

/// An independent recount of a chat's prompt tokens by the reference engine
/// at `base_url` (llama.cpp): its own chat template formats `messages`
/// (`/apply-template`), its own tokenizer counts the text (`/tokenize`,
/// special tokens parsed and added as its chat completions add them). It
/// prefills nothing, so prompts far beyond the engine's context are
/// counted too. Nothing of infergate's nor of [`PromptCounter`] is used.
pub async fn engine_recount(
    http: &reqwest::Client,
    base_url: &str,
    messages: &[ChatMessage],
) -> Result<u64> {
    let base = base_url.trim_end_matches('/');
    let templated: serde_json::Value = http
        .post(format!("{base}/apply-template"))
        .json(&serde_json::json!({ "messages": messages }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let prompt = templated["prompt"]
        .as_str()
        .context("/apply-template: no prompt in the answer")?;
    let tokens: serde_json::Value = http
        .post(format!("{base}/tokenize"))
        .json(&serde_json::json!({
            "content": prompt, "add_special": true, "parse_special": true,
        }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let n = tokens["tokens"]
        .as_array()
        .context("/tokenize: no tokens in the answer")?
        .len();
    Ok(n as u64)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A word-level tokenizer.json with ChatML's two special tokens: every
    /// word, punctuation run and special token is one token.
    pub(crate) const CHATML_WORDS: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [
        {"id": 1, "content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 2, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
      ],
      "normalizer": null,
      "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "<|im_start|>": 1, "<|im_end|>": 2}, "unk_token": "[UNK]"}
    }"#;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    #[test]
    fn a_default_system_message_is_added_only_when_none_is_given() {
        let c = PromptCounter::chatml(CHATML_WORDS.as_bytes(), Some("be kind")).unwrap();
        let user = [msg("user", "hello world")];
        assert_eq!(
            c.prompt(&user),
            "<|im_start|>system\nbe kind<|im_end|>\n<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n"
        );
        // A turn is its two special tokens, its role and its words; the
        // assistant's opening is two tokens.
        assert_eq!(c.count_chat(&user).unwrap(), 5 + 5 + 2);
        let with_system = [msg("system", "terse"), msg("user", "hello world")];
        assert!(!c.prompt(&with_system).contains("be kind"));
        assert_eq!(c.count_chat(&with_system).unwrap(), 4 + 5 + 2);
        let plain = PromptCounter::chatml(CHATML_WORDS.as_bytes(), None).unwrap();
        assert_eq!(plain.count_chat(&user).unwrap(), 5 + 2);
    }
}
