//! Limits on one request (`[timeouts]` of a plan; defaults for `run`): the
//! client enforces them, the plan sets them.

use std::time::Duration;

/// Limits on one request; all measured on the monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect (reqwest's connect timeout).
    pub connect: Duration,
    /// From `t_send` to the first byte of the response body (covers queueing and
    /// prefill), before the prompt's allowance.
    pub first_byte: Duration,
    /// Longest gap between two reads after the first body byte.
    pub idle: Duration,
    /// From `t_send` to the end of the stream, before the prompt's allowance.
    pub total: Duration,
    /// Added to `first_byte` and `total` per 1,000 prompt tokens: prefill
    /// grows with the prompt, so one base fits a 1k and a 120k prompt only
    /// by waiting on every short request as long as on the longest one.
    pub per_1k_prompt_tokens: Duration,
}

/// Bytes of request body taken as one prompt token when the caller does not
/// know the prompt's tokens (about 4 in English text): the allowance bounds
/// a wait, it measures nothing.
pub const BYTES_PER_TOKEN_ESTIMATE: usize = 4;

impl Timeouts {
    /// How long a request answered whole, not streamed (prompt sizing, token
    /// counts), may wait: its first byte comes with its answer, so both the
    /// first-byte and the total timeout bound it.
    pub fn unstreamed(&self) -> Duration {
        self.first_byte.min(self.total)
    }

    /// The limits of one request of `prompt_tokens`: the first-byte and
    /// total timeouts each grow by the prompt's allowance (saturating).
    pub fn for_prompt(&self, prompt_tokens: u64) -> Timeouts {
        let nanos =
            (self.per_1k_prompt_tokens.as_nanos()).saturating_mul(u128::from(prompt_tokens)) / 1000;
        let allowance = u64::try_from(nanos / 1_000_000_000).map_or(Duration::MAX, |secs| {
            Duration::new(secs, (nanos % 1_000_000_000) as u32)
        });
        Timeouts {
            first_byte: self.first_byte.saturating_add(allowance),
            total: self.total.saturating_add(allowance),
            ..self.clone()
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(600),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(3600),
            per_1k_prompt_tokens: Duration::from_secs(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(1),
            first_byte: Duration::from_secs(30),
            idle: Duration::from_secs(5),
            total: Duration::from_secs(60),
            per_1k_prompt_tokens: Duration::from_millis(2500),
        }
    }

    #[test]
    fn a_long_prompt_waits_longer_and_a_short_one_keeps_the_base() {
        let t = base();
        let short = t.for_prompt(100);
        assert_eq!(short.first_byte, Duration::from_millis(30_250));
        assert_eq!(short.total, Duration::from_millis(60_250));
        let long = t.for_prompt(120_000);
        assert_eq!(long.first_byte, Duration::from_secs(30 + 300));
        assert_eq!(long.total, Duration::from_secs(60 + 300));
        assert_eq!((long.connect, long.idle), (t.connect, t.idle));
        assert_eq!(t.for_prompt(0), t);
        let off = Timeouts {
            per_1k_prompt_tokens: Duration::ZERO,
            ..t.clone()
        };
        assert_eq!(off.for_prompt(1_000_000).first_byte, t.first_byte);
    }

    #[test]
    fn an_absurd_prompt_saturates_instead_of_overflowing() {
        // 2.5 s per 1k of 2^64 - 1 tokens: about 4.6e16 s, still a Duration.
        let t = base().for_prompt(u64::MAX);
        assert_eq!(t.first_byte.as_secs(), 30 + 46_116_860_184_273_879);
        let t = Timeouts {
            per_1k_prompt_tokens: Duration::MAX,
            ..base()
        }
        .for_prompt(1500);
        assert_eq!(t.first_byte, Duration::MAX);
    }
}
