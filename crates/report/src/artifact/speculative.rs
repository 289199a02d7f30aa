//! The server's own count of speculative decoding over a cell: summed
//! from per-response timings or read from counters. The sums are checked
//! (a count past `u64::MAX` is refused, never wrapped) and a count of more
//! tokens accepted than drafted is refused wherever it is read.

use serde::{Deserialize, Serialize};

/// The server's own account of speculative decoding over a cell's
/// successful requests: llama.cpp's per-response `timings.draft_n`,
/// `draft_n_accepted` and `predicted_n`, or vLLM's `spec_decode_*`
/// counters over the cell's windows (`from_counters`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Speculative {
    /// Requests whose server reported its drafted tokens (0 when read from
    /// counters, which do not count requests).
    pub reported: usize,
    /// Tokens drafted, and of them accepted, summed over those requests.
    pub drafted: u64,
    pub accepted: u64,
    /// Output tokens of those requests.
    pub predicted: u64,
    /// Verification steps that carried drafts (vLLM's `num_drafts`), when
    /// the server counts them: the mean accepted length follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafts: Option<u64>,
    /// The counters it was read from, when not per-response timings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_counters: Option<String>,
}

impl Speculative {
    /// Accepted over drafted tokens.
    pub fn acceptance(&self) -> Option<f64> {
        (self.drafted > 0).then(|| self.accepted as f64 / self.drafted as f64)
    }

    /// Output tokens that came from accepted drafts.
    pub fn accepted_share(&self) -> Option<f64> {
        (self.predicted > 0).then(|| self.accepted as f64 / self.predicted as f64)
    }

    /// Speculative decoding as an endpoint's counters saw it over the
    /// cell's windows (vLLM's `spec_decode_*`); none when it has none.
    pub fn from_counters(
        m: &crate::server_metrics::ServerMetrics,
    ) -> Option<Result<Speculative, SpeculativeError>> {
        let drafted = m.counter_sum(crate::server_metrics::VLLM_DRAFT_TOKENS)?;
        Some(Self::read_counters(m, drafted))
    }

    fn read_counters(
        m: &crate::server_metrics::ServerMetrics,
        drafted: f64,
    ) -> Result<Speculative, SpeculativeError> {
        use crate::server_metrics::{
            VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS, VLLM_GENERATED,
        };
        // A float past u64::MAX would saturate in `as u64`: refused instead.
        let whole = |v: f64, field: &'static str| {
            let v = v.max(0.0).round();
            if v < u64::MAX as f64 {
                Ok(v as u64)
            } else {
                Err(SpeculativeError::CounterOverflow {
                    field,
                    endpoint: m.endpoint.clone(),
                })
            }
        };
        let s = Speculative {
            reported: 0,
            drafted: whole(drafted, VLLM_DRAFT_TOKENS)?,
            accepted: whole(m.counter_sum(VLLM_ACCEPTED).unwrap_or(0.0), VLLM_ACCEPTED)?,
            predicted: whole(m.counter_sum(VLLM_GENERATED).unwrap_or(0.0), VLLM_GENERATED)?,
            drafts: m
                .counter_sum(VLLM_DRAFTS)
                .map(|d| whole(d, VLLM_DRAFTS))
                .transpose()?,
            from_counters: Some(format!(
                "{VLLM_DRAFT_TOKENS}, {VLLM_ACCEPTED}, {VLLM_DRAFTS} and {VLLM_GENERATED} over the cell's windows at {}",
                m.endpoint
            )),
        };
        s.check(&format!("the counters of endpoint {}", m.endpoint))?;
        Ok(s)
    }

    /// Tokens each verification step yields on average: its accepted
    /// drafts and the target model's own token (vLLM's definition, `1 +
    /// accepted / drafts`); none where steps are not counted.
    pub fn mean_accepted_length(&self) -> Option<f64> {
        self.drafts
            .filter(|&d| d > 0)
            .map(|d| 1.0 + self.accepted as f64 / d as f64)
    }

    /// Per-response counts summed, in checked arithmetic; none when no
    /// response reported drafting.
    pub fn sum_responses(
        responses: impl IntoIterator<Item = ResponseCounts>,
    ) -> Result<Option<Speculative>, SpeculativeError> {
        let mut sum: Option<Speculative> = None;
        for r in responses {
            if r.accepted > r.drafted {
                return Err(SpeculativeError::AcceptedOverDrafted {
                    at: format!("request {} (draft_n_accepted over draft_n)", r.request),
                    drafted: r.drafted,
                    accepted: r.accepted,
                });
            }
            let s = sum.get_or_insert_with(Speculative::default);
            let add = |total: u64, n: u64, field: &'static str| {
                total.checked_add(n).ok_or(SpeculativeError::Overflow {
                    field,
                    request: r.request,
                })
            };
            s.reported += 1;
            s.drafted = add(s.drafted, r.drafted, "drafted tokens (draft_n)")?;
            s.accepted = add(s.accepted, r.accepted, "accepted tokens (draft_n_accepted)")?;
            s.predicted = add(s.predicted, r.predicted, "output tokens (predicted_n)")?;
        }
        Ok(sum)
    }

    /// No more tokens accepted than drafted, nor more verification steps
    /// with drafts than drafted tokens; `at` says whose counts these are.
    pub fn check(&self, at: &str) -> Result<(), SpeculativeError> {
        if self.accepted > self.drafted {
            return Err(SpeculativeError::AcceptedOverDrafted {
                at: at.to_string(),
                drafted: self.drafted,
                accepted: self.accepted,
            });
        }
        match self.drafts {
            Some(d) if d > self.drafted => Err(SpeculativeError::StepsOverDrafted {
                at: at.to_string(),
                drafts: d,
                drafted: self.drafted,
            }),
            _ => Ok(()),
        }
    }
}

/// One response's speculative counts (llama.cpp's `timings.draft_n`,
/// `draft_n_accepted`, `predicted_n`), by its request index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseCounts {
    pub request: usize,
    pub drafted: u64,
    pub accepted: u64,
    pub predicted: u64,
}

/// Why a server's speculative counts are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeculativeError {
    /// A sum over the cell's responses would pass `u64::MAX`.
    #[error(
        "speculative decoding: {field} summed over the cell's responses passes u64::MAX (18446744073709551615) at request {request}"
    )]
    Overflow { field: &'static str, request: usize },
    /// A counter's increase over the cell's windows is past `u64::MAX`.
    #[error(
        "speculative decoding: {field} at endpoint {endpoint} increased past u64::MAX (18446744073709551615) over the cell's windows"
    )]
    CounterOverflow {
        field: &'static str,
        endpoint: String,
    },
    #[error(
        "speculative decoding: {at} counts {accepted} tokens accepted of {drafted} drafted: a server accepts only tokens it drafted"
    )]
    AcceptedOverDrafted {
        at: String,
        drafted: u64,
        accepted: u64,
    },
    #[error(
        "speculative decoding: {at} counts {drafts} verification steps with drafts over {drafted} drafted tokens: each step drafts at least one"
    )]
    StepsOverDrafted {
        at: String,
        drafts: u64,
        drafted: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(request: usize, drafted: u64, accepted: u64) -> ResponseCounts {
        ResponseCounts {
            request,
            drafted,
            accepted,
            predicted: 10,
        }
    }

    #[test]
    fn responses_sum_to_the_cell() {
        let s = Speculative::sum_responses([r(0, 8, 3), r(1, 4, 4)])
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.reported, s.drafted, s.accepted, s.predicted),
            (2, 12, 7, 20)
        );
        assert_eq!(Speculative::sum_responses([]).unwrap(), None);
    }

    #[test]
    fn a_sum_past_u64_max_is_refused_naming_the_field() {
        let e = Speculative::sum_responses([r(0, u64::MAX, 1), r(5, 2, 0)]).unwrap_err();
        assert_eq!(
            e,
            SpeculativeError::Overflow {
                field: "drafted tokens (draft_n)",
                request: 5
            }
        );
        assert!(e.to_string().contains("drafted tokens (draft_n)"), "{e}");
        assert!(e.to_string().contains("u64::MAX"), "{e}");
    }

    #[test]
    fn counters_past_u64_max_are_refused_not_saturated() {
        use crate::server_metrics::{VLLM_ACCEPTED, VLLM_DRAFT_TOKENS};
        let mut m = crate::server_metrics::ServerMetrics::unavailable("target", "u", "-");
        m.counters.insert(VLLM_DRAFT_TOKENS.into(), 1.5e19);
        m.counters.insert(VLLM_ACCEPTED.into(), 1.0e19);
        assert!(Speculative::from_counters(&m).unwrap().is_ok());
        m.counters.insert(VLLM_DRAFT_TOKENS.into(), 2.0e19);
        let e = Speculative::from_counters(&m).unwrap().unwrap_err();
        assert_eq!(
            e,
            SpeculativeError::CounterOverflow {
                field: VLLM_DRAFT_TOKENS,
                endpoint: "target".into()
            }
        );
    }

    #[test]
    fn more_accepted_than_drafted_is_refused() {
        let e = Speculative::sum_responses([r(0, 8, 3), r(3, 4, 5)]).unwrap_err();
        assert!(e.to_string().contains("request 3"), "{e}");
        let s = Speculative {
            drafted: 4,
            accepted: 5,
            ..Speculative::default()
        };
        assert!(s.check("cell c").is_err());
        let steps = Speculative {
            drafted: 4,
            drafts: Some(5),
            ..Speculative::default()
        };
        assert!(steps.check("cell c").is_err());
    }
}
