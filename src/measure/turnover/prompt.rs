//! Prompt protocol: a few-shot chat whose worked examples each begin with
//! that turn's marker, then the request's own turn.
//!
//! Calibrated on SmolLM2-135M-Instruct (Q4_1): zero-shot it ignores "write
//! CODE N times"; with worked examples it copies the *example's* count rather
//! than counting (examples showing 3, 5 and 4 gave 5 every time). So every
//! example shows the requested count and code word, and the model continues
//! the pattern: 60/60 exact at N = 4 and 5, 59/60 at N = 6, 26/60 at N = 7.
//! All requests of a workload share the examples (the marker is the only
//! difference), so a prefix-caching server reuses them, as in production.

use serde_json::{Value, json};

/// Markers of the worked examples. `Q` and `X` never start a run marker (see
/// `canary`), so an answer that copies an example is never another request's.
pub const EXAMPLE_MARKERS: [&str; MAX_SHOTS] = ["Q52817", "X30964", "Q74105", "X61380"];
pub use crate::config::turnover::MAX_SHOTS;

/// Free-text examples for the `sentence` prompt: (topic, answer after the marker).
const SENTENCE_EXAMPLES: [(&str, &str); MAX_SHOTS] = [
    ("the sun", "The sun rises in the east and warms the land."),
    ("a cat", "A cat sleeps quietly on the warm windowsill."),
    ("a bridge", "A bridge joins the two banks of the river."),
    ("bread", "Fresh bread fills the kitchen with a warm smell."),
];

/// Topics of the `sentence` prompt, request `i` gets `TOPICS[i % len]`.
pub const TOPICS: [&str; 12] = [
    "the sea",
    "a mountain",
    "the moon",
    "a forest",
    "rain",
    "a city at night",
    "an old library",
    "the desert",
    "a river",
    "winter",
    "a garden",
    "a train journey",
];

fn words_question(marker: &str, word: &str, n: usize) -> String {
    format!("Marker {marker}. Write the marker, then the word {word} exactly {n} times.")
}

/// The exact answer the `words` contract expects.
pub fn words_answer(marker: &str, word: &str, n: usize) -> String {
    let mut s = marker.to_string();
    for _ in 0..n {
        s.push(' ');
        s.push_str(word);
    }
    s
}

fn sentence_question(marker: &str, topic: &str) -> String {
    format!("Marker {marker}. Write the marker, then one sentence about {topic}.")
}

fn push_turn(out: &mut Vec<Value>, user: String, assistant: Option<String>) {
    out.push(json!({"role": "user", "content": user}));
    if let Some(a) = assistant {
        out.push(json!({"role": "assistant", "content": a}));
    }
}

/// Chat messages asking for `marker`, then `n` × `word`, after `shots` worked examples.
pub fn words_messages(marker: &str, word: &str, n: usize, shots: usize) -> Value {
    let mut out = Vec::new();
    for m in EXAMPLE_MARKERS.iter().take(shots) {
        push_turn(
            &mut out,
            words_question(m, word, n),
            Some(words_answer(m, word, n)),
        );
    }
    push_turn(&mut out, words_question(marker, word, n), None);
    Value::Array(out)
}

/// Chat messages asking for `marker`, then one free sentence about `topic`.
/// The answer is open-ended; only the `reference` contract can judge it.
pub fn sentence_messages(marker: &str, topic: &str, shots: usize) -> Value {
    let mut out = Vec::new();
    for (m, (t, a)) in EXAMPLE_MARKERS.iter().zip(SENTENCE_EXAMPLES).take(shots) {
        push_turn(&mut out, sentence_question(m, t), Some(format!("{m} {a}")));
    }
    push_turn(&mut out, sentence_question(marker, topic), None);
    Value::Array(out)
}

/// Chat messages asking task item `i`, after `shots` worked examples (the
/// next items of its kind with their first accepted answer). No marker:
/// with one, the reference model answered 0 of 12 opposites right, 9 of 12
/// without (measured with the probe in docs/quality.md).
pub fn task_messages(items: &[crate::config::tasks::TaskItem], i: usize, shots: usize) -> Value {
    let mut out = Vec::new();
    let Some(item) = items.get(i) else {
        return Value::Array(out);
    };
    for j in crate::config::tasks::TaskItem::examples(items, i, shots) {
        let ex = &items[j];
        push_turn(&mut out, ex.question.clone(), Some(ex.answers[0].clone()));
    }
    push_turn(&mut out, item.question.clone(), None);
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_examples_show_the_requested_count_and_own_markers() {
        let m = words_messages("K48213", "cedar", 3, 2);
        let turns = m.as_array().unwrap();
        assert_eq!(turns.len(), 5);
        assert_eq!(turns[1]["content"], "Q52817 cedar cedar cedar");
        assert_eq!(turns[3]["content"], "X30964 cedar cedar cedar");
        assert_eq!(
            turns[4]["content"],
            "Marker K48213. Write the marker, then the word cedar exactly 3 times."
        );
        assert_eq!(turns[4]["role"], "user");
    }

    #[test]
    fn zero_shots_is_just_the_question() {
        let m = words_messages("K48213", "cedar", 3, 0);
        assert_eq!(m.as_array().unwrap().len(), 1);
        let m = sentence_messages("K48213", "rain", 0);
        assert_eq!(m.as_array().unwrap().len(), 1);
    }

    #[test]
    fn sentence_examples_begin_with_their_marker() {
        let m = sentence_messages("K48213", "rain", 4);
        let turns = m.as_array().unwrap();
        assert_eq!(turns.len(), 9);
        for (k, ex) in EXAMPLE_MARKERS.iter().enumerate() {
            let a = turns[2 * k + 1]["content"].as_str().unwrap();
            assert!(a.starts_with(ex), "{a}");
        }
        assert!(turns[8]["content"].as_str().unwrap().contains("about rain"));
    }

    #[test]
    fn example_markers_are_never_run_markers() {
        for m in EXAMPLE_MARKERS {
            assert!(m.starts_with(['Q', 'X']));
            assert_eq!(super::super::canary::marker_shaped(m).count(), 1);
        }
    }
}
