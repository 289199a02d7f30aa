//! The canary marker's shape. A suite must leave room for a distinct marker
//! per request, and its code words must not take the shape;
//! `measure::turnover::canary` issues the markers and finds them in answers.
//!
//! Shape: one capital letter and five digits, `K48213`. Calibrated on
//! SmolLM2-135M (Q4_1), which echoed this shape 60/60; two-letter shapes lost
//! to tokenization (`CJ-2495` came back as `JC-2495`: `JC` is one token, `C` `J`
//! are two) and word shapes to near-synonyms (`falcon-7631` became `flea-7631`).
//!
//! Letters `Q` and `X` never occur in run markers: the prompt's worked examples
//! use them, so an answer that copies an example can never be mistaken for
//! another request's answer. `I` and `O` are left out because they read as digits.

/// Letters a run marker may start with.
pub const LETTERS: &[u8] = b"ABCDEFGHJKLMNPRSTUVWYZ";
/// Five-digit numbers 10000..=99999.
pub const NUMBERS: u64 = 90_000;
/// How many distinct run markers exist.
pub const MARKER_SPACE: u64 = LETTERS.len() as u64 * NUMBERS;
/// Length of a marker in bytes (always ASCII).
pub const MARKER_LEN: usize = 6;

/// Every marker-shaped substring of `text`, in order: a capital letter and
/// exactly five digits (a sixth digit means a longer number, not a marker).
/// The character before is not checked, so a marker glued to other text
/// (`cedarK48213`) is still found: a missed leak is worse than a loud one.
pub fn marker_shaped(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(MARKER_LEN - 1)).filter_map(move |i| {
        let shaped = b[i].is_ascii_uppercase()
            && b[i + 1..i + MARKER_LEN].iter().all(u8::is_ascii_digit)
            && b.get(i + MARKER_LEN).is_none_or(|c| !c.is_ascii_digit());
        // All bytes are ASCII, so both ends are char boundaries.
        shaped.then(|| &text[i..i + MARKER_LEN])
    })
}
