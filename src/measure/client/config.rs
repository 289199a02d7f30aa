//! What a client is configured with: the endpoint, the four timeouts, the
//! base URL and key (never printed).

use std::fmt;
use std::time::Duration;

/// Largest SSE event accepted; a real chunk is a few hundred bytes.
pub const MAX_EVENT_BYTES: usize = 1 << 20;
/// How much of an error body or a bad chunk goes into a failure message.
pub(super) const SNIPPET_BYTES: usize = 512;
/// After `[DONE]`, how long to wait for the end of the body so the connection can be reused.
pub(super) const DRAIN_GRACE: Duration = Duration::from_millis(100);
/// Durations beyond this are treated as "no limit" (and keep `Instant` arithmetic from overflowing).
pub(super) const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Which OpenAI-compatible endpoint to stream from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/v1/chat/completions`: text in `choices[].delta.content` (and reasoning fields).
    Chat,
    /// `/v1/completions`: text in `choices[].text`.
    Completions,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        }
    }
}

/// Set by the plan (`[timeouts]`), defaulted here.
pub use crate::config::timeouts::Timeouts;

#[derive(Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Server root such as `http://127.0.0.1:8080` (a trailing `/v1` is accepted too).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; never printed.
    pub api_key: Option<String>,
    pub timeouts: Timeouts,
    /// Cap on captured content and, separately, on captured reasoning, in bytes.
    pub capture_cap_bytes: usize,
}

impl ClientConfig {
    /// Defaults: see [`Timeouts::default`]; 1 MiB capture cap.
    pub fn new(base_url: impl Into<String>) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            api_key: None,
            timeouts: Timeouts::default(),
            capture_cap_bytes: 1 << 20,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeouts", &self.timeouts)
            .field("capture_cap_bytes", &self.capture_cap_bytes)
            .finish()
    }
}
