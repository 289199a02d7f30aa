//! Where a cell's requests come from: a `workload` table on a `[[cell]]`.
//!
//! Without one, a cell is today's synthetic filler: every prompt the same
//! length, unique from its first token (or shared whole). With one:
//!
//! - `spread`: prompt and output lengths drawn per request from a stated
//!   distribution (`uniform`, `normal`, `lognormal`), seeded.
//! - `shared_prefix`: `groups` system prompts of `prefix_tokens` each, shared
//!   by every request of the group; each request's user part is unique.
//! - `conversation`: sessions of `turns` turns sent in order, each turn
//!   carrying the whole history; the history's answers are recorded text
//!   (the same on both sides) or the runtime's own.
//! - `sharegpt`, `openai`: a dataset file of the user's (ShareGPT-format
//!   conversations, or OpenAI chat request lines).
//! - `trace`: a Mooncake-style timestamped trace replayed open loop at its
//!   timestamps; its `hash_ids` become shared blocks of synthetic text, so
//!   the trace's prefix sharing is reproduced.
//!
//! This file checks the table; [`super::dataset`] reads the files.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Most a distribution may draw: well past any context window served today.
pub const MAX_DRAWN_TOKENS: u64 = 1 << 20;
/// Most turns in one conversation.
pub const MAX_TURNS: u32 = 256;
/// Most shared-prefix groups.
pub const MAX_GROUPS: u32 = 100_000;
/// Longest think time between turns, ms (ten minutes).
pub const MAX_THINK_MS: u64 = 600_000;
/// Slowest and fastest trace replay: a thousand times slower or faster than
/// recorded. The trace's span at its speed is bounded too, when it is read
/// (`limits::MAX_SCHEDULE_S`).
pub const MIN_SPEED: f64 = 0.001;
pub const MAX_SPEED: f64 = 1000.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkloadSpec {
    Spread {
        prompt_tokens: Distribution,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<Distribution>,
    },
    SharedPrefix {
        groups: u32,
        prefix_tokens: u64,
    },
    Conversation {
        turns: u32,
        /// New user tokens per turn after the first (the first turn is the
        /// cell's `prompt_tokens`).
        turn_tokens: u64,
        /// Tokens of each recorded answer in the history (default: the
        /// cell's `max_tokens`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer_tokens: Option<u64>,
        #[serde(default)]
        think_ms: u64,
        #[serde(default)]
        history: History,
    },
    Sharegpt {
        path: PathBuf,
        /// Turns per session: 1 sends each conversation's first human turn
        /// alone; more sends that many turns in order, the recorded answers
        /// as history (conversations with fewer turns are skipped).
        #[serde(default = "one_turn")]
        turns: u32,
        #[serde(default)]
        think_ms: u64,
    },
    Openai {
        path: PathBuf,
    },
    Trace {
        path: PathBuf,
        /// Tokens per hash block (Mooncake traces: 512).
        #[serde(default = "block_tokens")]
        block_tokens: u64,
        /// Replay speed: 2 sends at twice the trace's rate.
        #[serde(default = "unit_speed")]
        speed: f64,
    },
}

fn one_turn() -> u32 {
    1
}
fn block_tokens() -> u64 {
    512
}
fn unit_speed() -> f64 {
    1.0
}

/// Which answers a conversation's history carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum History {
    /// Recorded text, the same on both sides: turn k's prompt is identical
    /// on both runtimes, so the two stay comparable request by request.
    #[default]
    Recorded,
    /// The runtime's own previous answers: what a user would see, but each
    /// side's later prompts differ (and so may their lengths).
    Own,
}

/// A length drawn per request, clipped to `[min, max]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    Uniform {
        min: u64,
        max: u64,
    },
    Normal {
        mean: f64,
        sd: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
    Lognormal {
        median: f64,
        sigma: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
}

impl Distribution {
    /// The bounds every draw lands in: the stated ones, else 1 and a tail
    /// far enough out that clipping moves almost nothing (6 sd, e^(6σ)).
    pub fn bounds(&self) -> (u64, u64) {
        match *self {
            Distribution::Uniform { min, max } => (min, max),
            Distribution::Normal { mean, sd, min, max } => (
                min.unwrap_or(1),
                max.unwrap_or_else(|| (mean + 6.0 * sd).ceil().max(1.0) as u64),
            ),
            Distribution::Lognormal {
                median,
                sigma,
                min,
                max,
            } => (
                min.unwrap_or(1),
                max.unwrap_or_else(|| (median * (6.0 * sigma).exp()).ceil().max(1.0) as u64),
            ),
        }
    }

    /// A draw from two independent uniforms in [0, 1): pure, so a request's
    /// length depends only on the cell's seed and its index.
    pub fn draw(&self, u1: f64, u2: f64) -> u64 {
        let (lo, hi) = self.bounds();
        // Box–Muller; 1 − u1 keeps ln away from 0.
        let z = || (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let x = match *self {
            Distribution::Uniform { min, max } => min as f64 + u1 * ((max - min + 1) as f64),
            Distribution::Normal { mean, sd, .. } => mean + sd * z(),
            Distribution::Lognormal { median, sigma, .. } => median * (sigma * z()).exp(),
        };
        (x.floor().max(0.0) as u64).clamp(lo.max(1), hi.max(1))
    }

    fn problem(&self) -> Option<String> {
        let finite_pos = |v: f64| v.is_finite() && v > 0.0;
        let bad = match *self {
            Distribution::Uniform { .. } => None,
            Distribution::Normal { mean, sd, .. } => {
                (!finite_pos(mean) || !sd.is_finite() || sd < 0.0)
                    .then_some("normal needs a positive finite mean and a finite sd >= 0")
            }
            Distribution::Lognormal { median, sigma, .. } => {
                (!finite_pos(median) || !sigma.is_finite() || sigma < 0.0)
                    .then_some("lognormal needs a positive finite median and a finite sigma >= 0")
            }
        };
        if let Some(b) = bad {
            return Some(b.into());
        }
        let (lo, hi) = self.bounds();
        if lo == 0 {
            return Some("min must be > 0".into());
        }
        if lo > hi {
            return Some(format!("min {lo} is above max {hi}"));
        }
        if hi > MAX_DRAWN_TOKENS {
            return Some(format!(
                "max {hi} is above the limit of {MAX_DRAWN_TOKENS} tokens"
            ));
        }
        None
    }

    pub fn describe(&self) -> String {
        let (lo, hi) = self.bounds();
        match *self {
            Distribution::Uniform { .. } => format!("uniform[{lo}, {hi}]"),
            Distribution::Normal { mean, sd, .. } => {
                format!("normal(mean {mean}, sd {sd}) in [{lo}, {hi}]")
            }
            Distribution::Lognormal { median, sigma, .. } => {
                format!("lognormal(median {median}, sigma {sigma}) in [{lo}, {hi}]")
            }
        }
    }
}

impl WorkloadSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Spread { .. } => "spread",
            WorkloadSpec::SharedPrefix { .. } => "shared_prefix",
            WorkloadSpec::Conversation { .. } => "conversation",
            WorkloadSpec::Sharegpt { .. } => "sharegpt",
            WorkloadSpec::Openai { .. } => "openai",
            WorkloadSpec::Trace { .. } => "trace",
        }
    }

    /// Turns per session, for the kinds sent as sessions.
    pub fn turns(&self) -> Option<u32> {
        match self {
            WorkloadSpec::Conversation { turns, .. } => Some(*turns),
            WorkloadSpec::Sharegpt { turns, .. } if *turns > 1 => Some(*turns),
            _ => None,
        }
    }

    pub fn think_ms(&self) -> u64 {
        match self {
            WorkloadSpec::Conversation { think_ms, .. }
            | WorkloadSpec::Sharegpt { think_ms, .. } => *think_ms,
            _ => 0,
        }
    }

    /// The dataset file it reads, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            WorkloadSpec::Sharegpt { path, .. }
            | WorkloadSpec::Openai { path }
            | WorkloadSpec::Trace { path, .. } => Some(path),
            _ => None,
        }
    }

    pub fn path_mut(&mut self) -> Option<&mut PathBuf> {
        match self {
            WorkloadSpec::Sharegpt { path, .. }
            | WorkloadSpec::Openai { path }
            | WorkloadSpec::Trace { path, .. } => Some(path),
            _ => None,
        }
    }

    /// One line for the artifact's cell shape: what both sides must share.
    pub fn describe(&self) -> String {
        match self {
            WorkloadSpec::Spread {
                prompt_tokens,
                max_tokens,
            } => format!(
                "spread: prompt tokens {}{}",
                prompt_tokens.describe(),
                max_tokens
                    .map(|d| format!(", max tokens {}", d.describe()))
                    .unwrap_or_default()
            ),
            WorkloadSpec::SharedPrefix {
                groups,
                prefix_tokens,
            } => format!("shared_prefix: {groups} groups, {prefix_tokens}-token prefix"),
            WorkloadSpec::Conversation {
                turns,
                turn_tokens,
                answer_tokens,
                think_ms,
                history,
            } => format!(
                "conversation: {turns} turns, {turn_tokens} tokens per later turn, answers {} ({}), think {think_ms} ms",
                answer_tokens.map_or("max_tokens".into(), |a| format!("{a} tokens")),
                match history {
                    History::Recorded => "recorded",
                    History::Own => "own",
                }
            ),
            WorkloadSpec::Sharegpt { path, turns, .. } => format!(
                "sharegpt: {} ({turns} turn{})",
                file_name(path),
                if *turns == 1 { "" } else { "s" }
            ),
            WorkloadSpec::Openai { path } => format!("openai: {}", file_name(path)),
            WorkloadSpec::Trace {
                path,
                block_tokens,
                speed,
            } => format!(
                "trace: {} ({block_tokens}-token blocks, speed {speed})",
                file_name(path)
            ),
        }
    }

    /// Checks the types cannot express, given the cell's own fields.
    pub fn problem(&self, prompt_tokens: u64, requests: usize) -> Option<String> {
        match self {
            WorkloadSpec::Spread {
                prompt_tokens,
                max_tokens,
            } => prompt_tokens
                .problem()
                .map(|p| format!("workload.prompt_tokens: {p}"))
                .or_else(|| {
                    max_tokens
                        .and_then(|d| d.problem())
                        .map(|p| format!("workload.max_tokens: {p}"))
                }),
            WorkloadSpec::SharedPrefix {
                groups,
                prefix_tokens,
            } => {
                if *groups == 0 || *groups > MAX_GROUPS {
                    Some(format!("workload.groups must be in 1..={MAX_GROUPS}"))
                } else if *prefix_tokens == 0 || *prefix_tokens >= prompt_tokens {
                    Some(format!(
                        "workload.prefix_tokens must be > 0 and below the cell's prompt_tokens ({prompt_tokens}): the rest is each request's unique part"
                    ))
                } else {
                    None
                }
            }
            WorkloadSpec::Conversation {
                turns,
                turn_tokens,
                answer_tokens,
                think_ms,
                ..
            } => {
                if *turns == 0 || *turns > MAX_TURNS {
                    Some(format!("workload.turns must be in 1..={MAX_TURNS}"))
                } else if !requests.is_multiple_of(*turns as usize) {
                    Some(format!(
                        "requests ({requests}) must be a whole number of sessions of workload.turns ({turns})"
                    ))
                } else if *turn_tokens == 0 || *turn_tokens > MAX_DRAWN_TOKENS {
                    Some(format!(
                        "workload.turn_tokens must be in 1..={MAX_DRAWN_TOKENS}"
                    ))
                } else if answer_tokens.is_some_and(|a| a == 0 || a > MAX_DRAWN_TOKENS) {
                    Some(format!(
                        "workload.answer_tokens must be in 1..={MAX_DRAWN_TOKENS}"
                    ))
                } else if *think_ms > MAX_THINK_MS {
                    Some(format!("workload.think_ms must be at most {MAX_THINK_MS}"))
                } else {
                    None
                }
            }
            WorkloadSpec::Sharegpt {
                turns, think_ms, ..
            } => {
                if *turns == 0 || *turns > MAX_TURNS {
                    Some(format!("workload.turns must be in 1..={MAX_TURNS}"))
                } else if !requests.is_multiple_of(*turns as usize) {
                    Some(format!(
                        "requests ({requests}) must be a whole number of sessions of workload.turns ({turns})"
                    ))
                } else if *think_ms > MAX_THINK_MS {
                    Some(format!("workload.think_ms must be at most {MAX_THINK_MS}"))
                } else {
                    None
                }
            }
            WorkloadSpec::Openai { .. } => None,
            WorkloadSpec::Trace {
                block_tokens,
                speed,
                ..
            } => {
                if *block_tokens == 0 || *block_tokens > 65_536 {
                    Some("workload.block_tokens must be in 1..=65536".into())
                } else if !(MIN_SPEED..=MAX_SPEED).contains(speed) {
                    Some(format!(
                        "workload.speed must be a number in [{MIN_SPEED}, {MAX_SPEED}] (found {speed:?})"
                    ))
                } else {
                    None
                }
            }
        }
    }
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_bounds_and_follow_the_stated_centre() {
        let d = Distribution::Lognormal {
            median: 400.0,
            sigma: 0.5,
            min: Some(64),
            max: Some(4000),
        };
        let mut draws: Vec<u64> = (0..2000)
            .map(|i| {
                let u1 = (i as f64 + 0.5) / 2000.0;
                let u2 = ((i * 7919) % 2000) as f64 / 2000.0;
                d.draw(u1, u2)
            })
            .collect();
        assert!(draws.iter().all(|&v| (64..=4000).contains(&v)));
        draws.sort_unstable();
        let median = draws[1000] as f64;
        assert!((median / 400.0 - 1.0).abs() < 0.1, "median {median}");
        let u = Distribution::Uniform { min: 10, max: 20 };
        assert_eq!(u.draw(0.0, 0.3), 10);
        assert_eq!(u.draw(0.9999, 0.3), 20);
    }

    #[test]
    fn nonsense_distributions_are_named() {
        let bad = Distribution::Normal {
            mean: f64::NAN,
            sd: 1.0,
            min: None,
            max: None,
        };
        assert!(bad.problem().unwrap().contains("mean"));
        let inverted = Distribution::Uniform { min: 9, max: 3 };
        assert!(inverted.problem().unwrap().contains("above max"));
        let huge = Distribution::Uniform {
            min: 1,
            max: u64::MAX,
        };
        assert!(huge.problem().unwrap().contains("limit"));
    }
}
