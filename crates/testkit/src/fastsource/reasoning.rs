//! The reasoning an answer streams before its text, when a request asks for
//! it (`reasoning_chunks`): as `reasoning_content` deltas, or as content
//! inside `<think>…</think>`, as from a server that does not separate it.

use super::FastSourceConfig;
use super::frames::{Framing, json_string};
use super::request::{Answer, Overrides};

/// The reasoning frames of one answer.
pub(super) struct Reasoning {
    /// How many of the first chunks carry reasoning instead of the answer.
    chunks: usize,
    /// The first, middle and last reasoning frames.
    frames: [Vec<u8>; 3],
}

impl Reasoning {
    pub(super) fn of(cfg: &FastSourceConfig, a: &Answer, o: &Overrides, f: &Framing) -> Reasoning {
        let chunks = o.reasoning_chunks.unwrap_or(0).min(a.tokens);
        let tok = &cfg.token;
        // Built only for an answer that reasons: the others never send them.
        let frames = if chunks == 0 {
            Default::default()
        } else if o.think_in_content.unwrap_or(cfg.think_in_content) || !a.chat {
            let last = if chunks == 1 {
                format!("<think>{tok}</think>")
            } else {
                format!("{tok}</think>")
            };
            [
                f.delta("content", &json_string(&format!("<think>{tok}"))),
                f.delta("content", &json_string(tok)),
                f.delta("content", &json_string(&last)),
            ]
        } else {
            let r = f.delta("reasoning_content", &json_string(tok));
            [r.clone(), r.clone(), r]
        };
        Reasoning { chunks, frames }
    }

    /// Chunk `i`'s frame, when it carries reasoning.
    pub(super) fn frame(&self, i: usize) -> Option<&[u8]> {
        if i >= self.chunks {
            return None;
        }
        let which = if i + 1 == self.chunks {
            2
        } else {
            usize::from(i > 0)
        };
        Some(&self.frames[which])
    }
}
