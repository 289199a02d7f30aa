//! Generated task items as a suite asks for them: checkable questions of
//! kinds that stress what a runtime can break (copying exactly, finding one
//! fact in a long context, counting, adding), made from a seed so both
//! runtimes are asked the same (`measure::turnover::generate` makes them).
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

use crate::config::limits::MAX_TURNOVER_PROMPT_WORDS as MAX_GENERATED_WORDS;

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
const MAX_LIST_WORDS: usize = 200;
const MAX_DIGITS: u32 = 9;

impl GenerateSpec {
    /// `kind` with every size at its default.
    pub fn of_kind(kind: GeneratedKind) -> GenerateSpec {
        GenerateSpec {
            kind,
            length: None,
            context_words: None,
            words: None,
            digits: None,
        }
    }

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

    /// `copy`: characters to copy.
    pub fn length(&self) -> usize {
        self.length.unwrap_or(8)
    }
    /// `needle`: filler words around the fact.
    pub fn context_words(&self) -> usize {
        self.context_words.unwrap_or(200)
    }
    /// `count`: words in the list.
    pub fn list_words(&self) -> usize {
        self.words.unwrap_or(8)
    }
    /// `arithmetic`: digits of each operand.
    pub fn digits(&self) -> u32 {
        self.digits.unwrap_or(1)
    }
}

/// The kind's name as a suite writes it.
pub fn kind_name(k: GeneratedKind) -> &'static str {
    match k {
        GeneratedKind::Copy => "copy",
        GeneratedKind::Needle => "needle",
        GeneratedKind::Count => "count",
        GeneratedKind::Arithmetic => "arithmetic",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded_and_named() {
        let mut s = GenerateSpec::of_kind(GeneratedKind::Copy);
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
        let mut a = GenerateSpec::of_kind(GeneratedKind::Arithmetic);
        a.digits = Some(19);
        assert!(
            a.validate(10, 3)
                .unwrap_err()
                .contains("generate.digits = 19")
        );
        // Long contexts: the prompts built before the first request are bounded.
        let mut n = GenerateSpec::of_kind(GeneratedKind::Needle);
        n.context_words = Some(100_000);
        assert!(n.validate(25, 3).is_ok());
        let e = n.validate(26, 3).unwrap_err();
        assert!(
            e.contains("10400000 filler words, above the maximum of 10000000"),
            "{e}"
        );
    }
}
