//! The most a suite may ask for, checked when it is read (the error names
//! the file, the line of the `[[cell]]` or `[[turnover]]` table, and the
//! field). Far beyond any qualification worth running, they are there so a
//! typo (`requests = 1000000000`) is refused at once rather than found by
//! the allocator or after days of sending. Documented in the README
//! (paragraph "Limits", beside the suites).

use anyhow::{Result, bail};

/// Measured requests of one cell.
pub const MAX_CELL_REQUESTS: usize = 1_000_000;
/// Warmup requests of one cell.
pub const MAX_WARMUP: usize = 100_000;
/// Requests in flight at once (a cell's or a turnover workload's `concurrency`).
pub const MAX_CONCURRENCY: usize = 4_096;
/// An open-loop arrival rate (`constant:R`, `poisson:R`), requests per second.
pub const MAX_RATE_PER_S: f64 = 100_000.0;
/// A cell's `prompt_tokens`.
pub const MAX_PROMPT_TOKENS: u64 = 2_000_000;
/// A cell's or a turnover workload's `max_tokens`.
pub const MAX_OUTPUT_TOKENS: u64 = 1_000_000;
/// A cell's `tolerance_percent`.
pub const MAX_TOLERANCE_PERCENT: f64 = 100.0;
/// Requests of one turnover workload, per repeat.
pub const MAX_TURNOVER_REQUESTS: usize = 10_000;
/// Longest an open-loop schedule may plan, seconds (24 h): a cell's
/// requests and warmup at its arrival rate, or a trace's span at its replay
/// speed. A rate like `constant:1e-300` is a positive number, yet its
/// second request would never be sent.
pub const MAX_SCHEDULE_S: f64 = 86_400.0;
/// A cell's or a turnover workload's `temperature`: the OpenAI API's range.
pub const MAX_TEMPERATURE: f64 = 2.0;
/// Words the prompts of one turnover workload may hold in all: its prompts
/// are built before its first request (a words prompt's examples repeat the
/// code word `words` times each; a generated needle carries its context).
pub const MAX_TURNOVER_PROMPT_WORDS: usize = 10_000_000;
/// Repeats of one turnover workload.
pub const MAX_TURNOVER_REPEATS: usize = 1_000;
/// `words` a turnover words prompt asks for.
pub const MAX_TURNOVER_WORDS: usize = 10_000;

/// Bytes of one input file a suite names: see [`crate::util::MAX_INPUT_FILE_BYTES`].
pub use crate::util::MAX_INPUT_FILE_BYTES;

/// `field` = `value`, refused above `max`.
pub fn at_most<T: PartialOrd + std::fmt::Display>(field: &str, value: T, max: T) -> Result<()> {
    if value > max {
        bail!("{field} = {value} is above the maximum of {max} a suite may ask for");
    }
    Ok(())
}

/// An open-loop schedule of `what` lasting `seconds`, refused above
/// [`MAX_SCHEDULE_S`] (NaN too: it is not a length of time).
pub fn schedule_within(what: &str, seconds: f64) -> Result<()> {
    if seconds.is_nan() || seconds > MAX_SCHEDULE_S {
        bail!(
            "{what} take {seconds:.3e} s to send, above the maximum of {MAX_SCHEDULE_S} s (24 h) a schedule may plan"
        );
    }
    Ok(())
}

/// A cell's fields against the maxima (`rate` from its arrival, if open loop).
pub fn check_cell(
    requests: usize,
    warmup: usize,
    concurrency: usize,
    rate: Option<f64>,
    prompt_tokens: u64,
    max_tokens: u64,
    tolerance_percent: f64,
) -> Result<()> {
    at_most("requests", requests, MAX_CELL_REQUESTS)?;
    at_most("warmup", warmup, MAX_WARMUP)?;
    at_most("concurrency", concurrency, MAX_CONCURRENCY)?;
    if let Some(rate) = rate {
        at_most("arrival rate (req/s)", rate, MAX_RATE_PER_S)?;
        // Warmup is sent at the same rate, before the measured requests.
        let sent = requests.saturating_add(warmup);
        schedule_within(
            &format!("at arrival rate {rate:?} req/s, its {sent} requests (warmup included)"),
            sent as f64 / rate,
        )?;
    }
    at_most("prompt_tokens", prompt_tokens, MAX_PROMPT_TOKENS)?;
    at_most("max_tokens", max_tokens, MAX_OUTPUT_TOKENS)?;
    at_most(
        "tolerance_percent",
        tolerance_percent,
        MAX_TOLERANCE_PERCENT,
    )?;
    Ok(())
}

/// A turnover workload's fields against the maxima.
pub fn check_turnover(
    requests: usize,
    repeats: usize,
    concurrency: usize,
    words: usize,
    prompt_words: Option<usize>,
    max_tokens: Option<u64>,
) -> Result<()> {
    at_most("requests", requests, MAX_TURNOVER_REQUESTS)?;
    at_most("repeats", repeats, MAX_TURNOVER_REPEATS)?;
    at_most("concurrency", concurrency, MAX_CONCURRENCY)?;
    at_most("words", words, MAX_TURNOVER_WORDS)?;
    if let Some(w) = prompt_words {
        at_most(
            "words × (shots + 1) × requests, the words its prompts hold,",
            w,
            MAX_TURNOVER_PROMPT_WORDS,
        )?;
    }
    if let Some(m) = max_tokens {
        at_most("max_tokens", m, MAX_OUTPUT_TOKENS)?;
    }
    Ok(())
}
