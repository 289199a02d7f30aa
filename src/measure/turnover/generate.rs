//! Generated task items: checkable questions of kinds that stress what a
//! runtime can break (copying exactly, finding one fact in a long context,
//! counting, adding), made from a seed so both runtimes are asked the same.
//!
//! ```toml
//! [[turnover]]
//! name = "needle-c2"
//! contract = "reference"
//! prompt = "task"
//! generate = { kind = "needle", context_words = 200 }
//! requests = 40
//! seed = 1
//! ```
//!
//! Kinds and their sizes:
//! - `copy`: "Copy this code exactly: …", `length` characters (default 8)
//!   of lowercase letters and digits without look-alikes;
//! - `needle`: `context_words` filler words (default 200, the cells' filler:
//!   about one token each) with "The secret number is NNNN." planted at a
//!   depth that steps through 0, 10, …, 100 % over the items;
//! - `count`: how many times one word appears in a list of `words` (default 8);
//! - `arithmetic`: the sum of two numbers of `digits` digits (default 1).
//!
//! Numeric answers are checked by the `number` rule, copies exactly. The
//! worked examples are other items of the workload, so a prompt holds about
//! `shots + 1` items' worth of tokens (for `needle`: set `shots` with the
//! context in mind).

use serde::{Deserialize, Serialize};

use crate::config::tasks::{MatchRule, TaskItem};
use crate::measure::filler::filler;
use crate::stats::SplitMix64;

/// What `generate = { … }` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateSpec {
    pub kind: GeneratedKind,
    /// `copy`: characters to copy.
    #[serde(default)]
    pub length: Option<usize>,
    /// `needle`: filler words around the planted fact.
    #[serde(default)]
    pub context_words: Option<usize>,
    /// `count`: words in the list.
    #[serde(default)]
    pub words: Option<usize>,
    /// `arithmetic`: digits of each operand.
    #[serde(default)]
    pub digits: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeneratedKind {
    Copy,
    Needle,
    Count,
    Arithmetic,
}

/// Stated maxima: a generated item stays a prompt a server can take.
const MAX_LENGTH: usize = 200;
const MAX_CONTEXT_WORDS: usize = 100_000;
/// Filler words a workload's prompts may hold in all (each prompt carries
/// `shots + 1` contexts): prompts are built before the first request.
use crate::config::limits::MAX_TURNOVER_PROMPT_WORDS as MAX_GENERATED_WORDS;
const MAX_LIST_WORDS: usize = 200;
const MAX_DIGITS: u32 = 9;

/// Letters and digits a reader cannot confuse (no 0/o, 1/l/i).
const COPY_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
const COUNTED: [&str; 4] = ["cat", "dog", "sun", "key"];
const OTHERS: [&str; 6] = ["tree", "road", "cloud", "lamp", "boat", "hill"];

impl GenerateSpec {
    /// The sizes, within their stated maxima, for `requests` prompts of
    /// `shots + 1` items each; the field named when not.
    pub fn validate(&self, requests: usize, shots: usize) -> Result<(), String> {
        let given = |name: &str, v: Option<usize>, kinds: GeneratedKind| match v {
            Some(_) if self.kind != kinds => Err(format!(
                "generate.{name} is read only with kind = \"{}\"",
                kind_name(kinds)
            )),
            _ => Ok(()),
        };
        given("length", self.length, GeneratedKind::Copy)?;
        given("context_words", self.context_words, GeneratedKind::Needle)?;
        given("words", self.words, GeneratedKind::Count)?;
        given(
            "digits",
            self.digits.map(|d| d as usize),
            GeneratedKind::Arithmetic,
        )?;
        let within = |name: &str, v: usize, lo: usize, hi: usize| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("generate.{name} = {v}: must be {lo}..={hi}"))
            }
        };
        within("length", self.length(), 1, MAX_LENGTH)?;
        within("context_words", self.context_words(), 1, MAX_CONTEXT_WORDS)?;
        within("words", self.list_words(), 2, MAX_LIST_WORDS)?;
        within("digits", self.digits() as usize, 1, MAX_DIGITS as usize)?;
        if self.kind == GeneratedKind::Needle {
            let words = self
                .context_words()
                .saturating_mul(requests)
                .saturating_mul(shots + 1);
            if words > MAX_GENERATED_WORDS {
                return Err(format!(
                    "generate.context_words = {} × requests = {requests} × (shots + 1) = {} is {words} filler words, above the maximum of {MAX_GENERATED_WORDS} a workload's prompts may hold",
                    self.context_words(),
                    shots + 1
                ));
            }
        }
        Ok(())
    }

    fn length(&self) -> usize {
        self.length.unwrap_or(8)
    }
    fn context_words(&self) -> usize {
        self.context_words.unwrap_or(200)
    }
    fn list_words(&self) -> usize {
        self.words.unwrap_or(8)
    }
    fn digits(&self) -> u32 {
        self.digits.unwrap_or(1)
    }

    /// `n` items from `seed`: the same on every runtime and every run.
    pub fn items(&self, n: usize, seed: u64) -> Vec<TaskItem> {
        let mut rng = SplitMix64::new(seed ^ 0x7A5C_0000 ^ self.kind as u64);
        (0..n).map(|i| self.item(i, &mut rng)).collect()
    }

    fn item(&self, i: usize, rng: &mut SplitMix64) -> TaskItem {
        let (question, answer, rule) = match self.kind {
            GeneratedKind::Copy => {
                let s: String = (0..self.length())
                    .map(|_| COPY_ALPHABET[pick(rng, COPY_ALPHABET.len())] as char)
                    .collect();
                (format!("Copy this code exactly: {s}"), s, MatchRule::Exact)
            }
            GeneratedKind::Needle => {
                let code = 1000 + pick(rng, 9000);
                let words = self.context_words();
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
            GeneratedKind::Count => {
                let word = COUNTED[pick(rng, COUNTED.len())];
                let len = self.list_words();
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
            GeneratedKind::Arithmetic => {
                let d = self.digits();
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
        };
        TaskItem {
            question,
            answers: vec![answer],
            kind: Some(kind_name(self.kind).to_string()),
            rule,
        }
    }
}

pub fn kind_name(k: GeneratedKind) -> &'static str {
    match k {
        GeneratedKind::Copy => "copy",
        GeneratedKind::Needle => "needle",
        GeneratedKind::Count => "count",
        GeneratedKind::Arithmetic => "arithmetic",
    }
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

    fn spec(kind: GeneratedKind) -> GenerateSpec {
        GenerateSpec {
            kind,
            length: None,
            context_words: None,
            words: None,
            digits: None,
        }
    }

    #[test]
    fn items_are_the_same_for_a_seed_and_differ_across_seeds() {
        for k in [
            GeneratedKind::Copy,
            GeneratedKind::Needle,
            GeneratedKind::Count,
            GeneratedKind::Arithmetic,
        ] {
            let s = spec(k);
            assert_eq!(s.items(20, 1), s.items(20, 1));
            assert_ne!(s.items(20, 1), s.items(20, 2));
            let items = s.items(20, 1);
            assert!(
                items
                    .iter()
                    .all(|it| it.kind.as_deref() == Some(kind_name(k)))
            );
        }
    }

    #[test]
    fn every_item_is_right_by_its_own_answer_and_its_key_is_true() {
        let copy = spec(GeneratedKind::Copy).items(30, 3);
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
        for it in spec(GeneratedKind::Count).items(30, 3) {
            let (head, list) = it.question.split_once(": ").unwrap();
            let word = head.split(' ').nth(6).unwrap();
            let list = list.trim_end_matches('?');
            let n = list.split(", ").filter(|w| *w == word).count();
            assert_eq!(list.split(", ").count(), 8);
            assert_eq!(it.answers, [n.to_string()]);
            assert!(it.is_right(&format!("It appears {n} times.")));
        }
        for it in spec(GeneratedKind::Arithmetic).items(30, 3) {
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
        let mut s = spec(GeneratedKind::Needle);
        s.context_words = Some(50);
        let items = s.items(11, 1);
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

    #[test]
    fn sizes_are_bounded_and_named() {
        let mut s = spec(GeneratedKind::Copy);
        s.length = Some(0);
        assert_eq!(
            s.validate(10, 3).unwrap_err(),
            "generate.length = 0: must be 1..=200"
        );
        s.length = Some(12);
        assert!(s.validate(10, 3).is_ok());
        s.context_words = Some(10);
        assert_eq!(
            s.validate(10, 3).unwrap_err(),
            "generate.context_words is read only with kind = \"needle\""
        );
        let mut a = spec(GeneratedKind::Arithmetic);
        a.digits = Some(19);
        assert!(
            a.validate(10, 3)
                .unwrap_err()
                .contains("generate.digits = 19")
        );
        // Long contexts: the prompts built before the first request are bounded.
        let mut n = spec(GeneratedKind::Needle);
        n.context_words = Some(100_000);
        assert!(n.validate(25, 3).is_ok());
        let e = n.validate(26, 3).unwrap_err();
        assert!(
            e.contains("10400000 filler words, above the maximum of 10000000"),
            "{e}"
        );
    }
}
