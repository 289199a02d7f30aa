//! Limits on one request (`[timeouts]` of a plan; defaults for `run`): the
//! client enforces them, the plan sets them.

use std::time::Duration;

/// Limits on one request; all measured on the monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect (reqwest's connect timeout).
    pub connect: Duration,
    /// From `t_send` to the first byte of the response body (covers queueing and
    /// prefill, which may be long for big prompts).
    pub first_byte: Duration,
    /// Longest gap between two reads after the first body byte.
    pub idle: Duration,
    /// From `t_send` to the end of the stream.
    pub total: Duration,
}

impl Timeouts {
    /// How long a request answered whole, not streamed (prompt sizing, token
    /// counts), may wait: its first byte comes with its answer, so both the
    /// first-byte and the total timeout bound it.
    pub fn unstreamed(&self) -> Duration {
        self.first_byte.min(self.total)
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(600),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(3600),
        }
    }
}
