//! Generated task items, made from a seed as `config::turnover::generate`
//! declares them, so both runtimes are asked the same questions.

use crate::config::tasks::{MatchRule, TaskItem};
pub use crate::config::turnover::generate::{GenerateSpec, GeneratedKind, kind_name};
use crate::measure::filler::filler;
use crate::stats::SplitMix64;

/// Letters and digits a reader cannot confuse (no 0/o, 1/l/i).
const COPY_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
const COUNTED: [&str; 4] = ["cat", "dog", "sun", "key"];
const OTHERS: [&str; 6] = ["tree", "road", "cloud", "lamp", "boat", "hill"];

/// `n` items of `spec` from `seed`: the same on every runtime and every run.
pub fn items(spec: &GenerateSpec, n: usize, seed: u64) -> Vec<TaskItem> {
    let mut rng = SplitMix64::new(seed ^ 0x7A5C_0000 ^ spec.kind as u64);
    (0..n).map(|i| item(spec, i, &mut rng)).collect()
}

fn item(spec: &GenerateSpec, i: usize, rng: &mut SplitMix64) -> TaskItem {
    let (question, answer, rule) = match spec.kind {
        GeneratedKind::Copy => copy_item(spec.length(), rng),
        GeneratedKind::Needle => needle_item(spec.context_words(), i, rng),
        GeneratedKind::Count => count_item(spec.list_words(), rng),
        GeneratedKind::Arithmetic => arithmetic_item(spec.digits(), rng),
    };
    TaskItem {
        question,
        answers: vec![answer],
        kind: Some(kind_name(spec.kind).to_string()),
        rule,
    }
}

/// A question, its answer and how an answer is checked.
type Item = (String, String, MatchRule);

fn copy_item(length: usize, rng: &mut SplitMix64) -> Item {
    let s: String = (0..length)
        .map(|_| COPY_ALPHABET[pick(rng, COPY_ALPHABET.len())] as char)
        .collect();
    (format!("Copy this code exactly: {s}"), s, MatchRule::Exact)
}

/// The fact planted at a depth that steps through 0, 10, …, 100 % of the
/// `words` filler words over the items.
fn needle_item(words: usize, i: usize, rng: &mut SplitMix64) -> Item {
    let code = 1000 + pick(rng, 9000);
    let at = words * (i % 11) / 10;
    let text = filler(words, rng.next_u64());
    // The byte after the first `at` words.
    let split = match at {
        0 => 0,
        _ => text
            .match_indices(' ')
            .nth(at - 1)
            .map_or(text.len(), |(k, _)| k),
    };
    let (before, after) = text.split_at(split);
    let fact = format!("The secret number is {code}.");
    let context = [before.trim(), &fact, after.trim()]
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    (
        format!("{context}\n\nWhat is the secret number?"),
        code.to_string(),
        MatchRule::Number,
    )
}

fn count_item(len: usize, rng: &mut SplitMix64) -> Item {
    let word = COUNTED[pick(rng, COUNTED.len())];
    let times = 1 + pick(rng, len.min(5));
    let mut list: Vec<&str> = (0..len)
        .map(|k| {
            if k < times {
                word
            } else {
                OTHERS[pick(rng, OTHERS.len())]
            }
        })
        .collect();
    shuffle(&mut list, rng);
    (
        format!(
            "How many times does the word {word} appear in this list: {}?",
            list.join(", ")
        ),
        times.to_string(),
        MatchRule::Number,
    )
}

fn arithmetic_item(d: u32, rng: &mut SplitMix64) -> Item {
    let lo = if d == 1 { 1 } else { 10u64.pow(d - 1) };
    let span = 10u64.pow(d) - lo;
    let a = lo + rng.next_u64() % span;
    let b = lo + rng.next_u64() % span;
    (
        format!("What is {a} + {b}?"),
        (a + b).to_string(),
        MatchRule::Number,
    )
}

fn pick(rng: &mut SplitMix64, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// Fisher–Yates.
fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        v.swap(i, pick(rng, i + 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_the_same_for_a_seed_and_differ_across_seeds() {
        for k in [
            GeneratedKind::Copy,
            GeneratedKind::Needle,
            GeneratedKind::Count,
            GeneratedKind::Arithmetic,
        ] {
            let s = GenerateSpec::of_kind(k);
            assert_eq!(items(&s, 20, 1), items(&s, 20, 1));
            assert_ne!(items(&s, 20, 1), items(&s, 20, 2));
            let items = items(&s, 20, 1);
            assert!(
                items
                    .iter()
                    .all(|it| it.kind.as_deref() == Some(kind_name(k)))
            );
        }
    }

    #[test]
    fn every_item_is_right_by_its_own_answer_and_its_key_is_true() {
        let copy = items(&GenerateSpec::of_kind(GeneratedKind::Copy), 30, 3);
        for it in &copy {
            let code = it.question.rsplit(' ').next().unwrap();
            assert_eq!(code.len(), 8);
            assert_eq!(it.answers, [code]);
            assert!(it.is_right(code) && !it.is_right(&code[1..]));
            assert!(
                crate::measure::turnover::canary::marker_shaped(code)
                    .next()
                    .is_none()
            );
        }
        for it in items(&GenerateSpec::of_kind(GeneratedKind::Count), 30, 3) {
            let (head, list) = it.question.split_once(": ").unwrap();
            let word = head.split(' ').nth(6).unwrap();
            let list = list.trim_end_matches('?');
            let n = list.split(", ").filter(|w| *w == word).count();
            assert_eq!(list.split(", ").count(), 8);
            assert_eq!(it.answers, [n.to_string()]);
            assert!(it.is_right(&format!("It appears {n} times.")));
        }
        for it in items(&GenerateSpec::of_kind(GeneratedKind::Arithmetic), 30, 3) {
            let q = it
                .question
                .trim_start_matches("What is ")
                .trim_end_matches('?');
            let (a, b) = q.split_once(" + ").unwrap();
            let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
            assert!((1..=9).contains(&a) && (1..=9).contains(&b));
            assert_eq!(it.answers, [(a + b).to_string()]);
        }
    }

    #[test]
    fn needles_step_through_the_depths_with_the_asked_context() {
        let mut s = GenerateSpec::of_kind(GeneratedKind::Needle);
        s.context_words = Some(50);
        let items = items(&s, 11, 1);
        for (i, it) in items.iter().enumerate() {
            let (context, ask) = it.question.split_once("\n\n").unwrap();
            assert_eq!(ask, "What is the secret number?");
            let words: Vec<&str> = context.split(' ').collect();
            // 50 filler words and the five of the fact.
            assert_eq!(words.len(), 55, "{context}");
            let at = words.iter().position(|w| *w == "The").unwrap();
            assert_eq!(at, 50 * i / 10, "item {i}");
            assert!(it.is_right(&format!("The secret number is {}.", it.answers[0])));
        }
    }
}
