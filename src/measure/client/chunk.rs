//! Decoding one streamed chunk's JSON into borrowed structs (serde's path;
//! `fastjson` handles the usual shape faster).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde_json::Value;

/// A string field that borrows from the chunk unless the server escaped something in it.
/// (A bare `Option<Cow<str>>` field always allocates: serde only borrows a `Cow` that is
/// not nested in an `Option`, hence this newtype.)
#[derive(Debug, Deserialize)]
pub(super) struct Str<'a>(#[serde(borrow)] pub(super) Cow<'a, str>);

#[derive(Debug, Default, Deserialize)]
pub(super) struct Chunk<'a> {
    #[serde(borrow, default)]
    pub(super) model: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) system_fingerprint: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) choices: Choices<'a>,
    #[serde(default)]
    pub(super) usage: Option<Usage>,
    /// llama.cpp's per-request server timings, in the final chunk only.
    #[serde(default)]
    pub(super) timings: Option<Timings>,
    /// Only present on failure, so a `Value` costs nothing in the hot path.
    #[serde(default)]
    pub(super) error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(borrow, default)]
    pub(super) delta: Option<Delta<'a>>,
    /// `/v1/completions`.
    #[serde(borrow, default)]
    pub(super) text: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) finish_reason: Option<Str<'a>>,
    /// Per-token logprobs, only when asked (reference requests): a `Value`
    /// read leniently by `logprobs::parse`, so an odd shape never fails the stream.
    #[serde(default)]
    pub(super) logprobs: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(borrow, default)]
    pub(super) content: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) reasoning_content: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) reasoning: Option<Str<'a>>,
    /// Streamed tool calls: pieces of each call (by `index`) to append.
    #[serde(default)]
    pub(super) tool_calls: Option<Vec<ToolCallDelta>>,
}

/// One piece of a streamed tool call (OpenAI's shape): the first piece of a
/// call names it, later ones carry more of its arguments' text.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ToolCallDelta {
    #[serde(default)]
    pub(super) index: Option<usize>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct FunctionDelta {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    pub(super) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(super) completion_tokens: Option<u64>,
    /// vLLM, OpenAI, llama.cpp: `{cached_tokens}`, prompt tokens served from cache.
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptTokensDetails>,
    /// vLLM, OpenAI: `{reasoning_tokens}`, the completion's reasoning share.
    #[serde(default)]
    pub(super) completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct CompletionTokensDetails {
    #[serde(default)]
    pub(super) reasoning_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct PromptTokensDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

/// llama.cpp's `timings` object; the fields infergate records, the rest ignored.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Timings {
    #[serde(default)]
    pub(super) cache_n: Option<u64>,
    #[serde(default)]
    pub(super) prompt_n: Option<u64>,
    #[serde(default)]
    pub(super) prompt_ms: Option<f64>,
    #[serde(default)]
    pub(super) predicted_n: Option<u64>,
    #[serde(default)]
    pub(super) predicted_ms: Option<f64>,
    /// Speculative decoding: tokens drafted, and how many of them the
    /// model accepted (present when the server drafts).
    #[serde(default)]
    pub(super) draft_n: Option<u64>,
    #[serde(default)]
    pub(super) draft_n_accepted: Option<u64>,
}

/// `choices`, with the usual single choice stored inline so that a chunk costs
/// no heap allocation; `null` reads as empty.
#[derive(Debug, Default)]
pub(super) struct Choices<'a> {
    pub(super) first: Option<Choice<'a>>,
    pub(super) rest: Vec<Choice<'a>>,
}

impl<'a> Choices<'a> {
    pub(super) fn iter(&self) -> impl Iterator<Item = &Choice<'a>> {
        self.first.iter().chain(self.rest.iter())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<Choices<'a>>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices or null")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Choices::default())
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Choices::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Choices::default();
                while let Some(c) = seq.next_element::<Choice<'a>>()? {
                    if out.first.is_none() {
                        out.first = Some(c);
                    } else {
                        out.rest.push(c);
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}
