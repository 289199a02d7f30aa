//! How a streamed answer is written: each SSE event as one HTTP chunk, and
//! every chunk object of one answer with the same id, model and choice
//! shape (a chat delta, or a text completion's text).

use super::FastSourceConfig;
use super::request::Answer;

/// `data: {payload}\n\n` as one HTTP chunk.
pub(super) fn frame(payload: &str) -> Vec<u8> {
    let len = payload.len() + 8;
    let mut v = format!("{len:x}\r\ndata: ").into_bytes();
    v.extend_from_slice(payload.as_bytes());
    v.extend_from_slice(b"\n\n\r\n");
    v
}

pub(super) fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The chunk objects of one answer: their shared start, and the choice
/// each one carries.
pub(super) struct Framing {
    chat: bool,
    /// The chunk object up to its `choices`.
    pub(super) prefix: String,
}

impl Framing {
    pub(super) fn of(cfg: &FastSourceConfig, a: &Answer) -> Framing {
        let (id, object) = if a.chat {
            (format!("chatcmpl-fs-{}", a.seq), "chat.completion.chunk")
        } else {
            (format!("cmpl-fs-{}", a.seq), "text_completion")
        };
        let prefix = format!(
            "{{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":0,\"model\":{},\"system_fingerprint\":\"fastsource\",\"choices\":",
            json_string(&cfg.model)
        );
        Framing {
            chat: a.chat,
            prefix,
        }
    }

    /// A frame whose one choice carries `payload` (a chat delta, or a text
    /// completion's text) and the finish reason `fin` (JSON).
    pub(super) fn frame(&self, payload: &str, fin: &str) -> Vec<u8> {
        let choice = if self.chat {
            format!("[{{\"index\":0,\"delta\":{payload},\"finish_reason\":{fin}}}]}}")
        } else {
            format!(
                "[{{\"index\":0,\"text\":{payload},\"logprobs\":null,\"finish_reason\":{fin}}}]}}"
            )
        };
        frame(&format!("{}{choice}", self.prefix))
    }

    /// A frame carrying `text` (JSON) as the delta's `field` (chat) or as
    /// the text, without a finish reason.
    pub(super) fn delta(&self, field: &str, text: &str) -> Vec<u8> {
        let payload = if self.chat {
            format!("{{\"{field}\":{text}}}")
        } else {
            text.to_string()
        };
        self.frame(&payload, "null")
    }
}
