//! What one response chunk (or a whole non-streamed answer) says of itself:
//! its usage, cached prompt tokens and finish reason, read with the
//! client's own chunk types, for a reader that forwards a response rather
//! than times it (`capture`).

use super::chunk::Chunk;

/// The counts a chunk reports; `None` where it says nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reported {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`, else llama.cpp's `timings.cache_n`.
    pub cached_tokens: Option<u64>,
    pub finish_reason: Option<String>,
    /// Choices carrying answer text in this chunk (a delta's content or
    /// reasoning, a completion's text): one token each, as servers stream.
    pub text_chunks: u64,
    /// That text, in order.
    pub text: String,
}

impl Reported {
    /// Fold a later chunk in: servers repeat usage, and the last one is final.
    pub fn merge(&mut self, later: Reported) {
        self.prompt_tokens = later.prompt_tokens.or(self.prompt_tokens);
        self.completion_tokens = later.completion_tokens.or(self.completion_tokens);
        self.cached_tokens = later.cached_tokens.or(self.cached_tokens);
        self.finish_reason = later.finish_reason.or(self.finish_reason.take());
        self.text_chunks += later.text_chunks;
        self.text.push_str(&later.text);
    }
}

/// Read one chunk's JSON (or a whole answer's); `None` when it is not a JSON object.
pub fn reported(json: &[u8]) -> Option<Reported> {
    let c: Chunk<'_> = serde_json::from_slice(json).ok()?;
    let mut r = Reported::default();
    if let Some(u) = c.usage {
        r.prompt_tokens = u.prompt_tokens;
        r.completion_tokens = u.completion_tokens;
        r.cached_tokens = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
    }
    // usage's count, when the server sent one, is the portable field.
    r.cached_tokens = r.cached_tokens.or(c.timings.and_then(|t| t.cache_n));
    for ch in c.choices.iter() {
        if let Some(f) = &ch.finish_reason {
            r.finish_reason = Some(f.0.to_string());
        }
        let mut bearing = false;
        if let Some(d) = &ch.delta {
            for s in [&d.content, &d.reasoning_content, &d.reasoning]
                .into_iter()
                .flatten()
            {
                r.text.push_str(&s.0);
                bearing |= !s.0.is_empty();
            }
        }
        if let Some(t) = &ch.text {
            r.text.push_str(&t.0);
            bearing |= !t.0.is_empty();
        }
        r.text_chunks += u64::from(bearing);
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_cache_and_finish_are_read_as_the_client_reads_them() {
        let r = reported(br#"{"choices":[{"delta":{"content":"ab"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#).unwrap();
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens),
            (Some(7), Some(2), Some(4))
        );
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!((r.text_chunks, r.text.as_str()), (1, "ab"));
        let r = reported(br#"{"choices":[],"timings":{"cache_n":24}}"#).unwrap();
        assert_eq!(r.cached_tokens, Some(24));
        // A whole answer: `message` is not a delta, its usage still counts.
        let r = reported(br#"{"choices":[{"message":{"content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#).unwrap();
        assert_eq!((r.prompt_tokens, r.text_chunks), (Some(3), 0));
        assert!(reported(b"[DONE]").is_none());
    }
}
