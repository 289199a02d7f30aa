//! The two controlled-output contracts, judged on the complete captured text.
//!
//! - `words`: the answer is its own canary, then exactly N repetitions of one
//!   code word, and nothing else, ended by the model (`stop`).
//! - `reference`: the answer is byte-identical to the same prompt's answer
//!   when it ran alone (concurrency 1, temperature 0).

use super::canary;

pub use crate::config::turnover::Contract;

pub use crate::report::reference::SNIPPET_CHARS;

/// The answer after its canary: what the `words` field counts. Without its
/// own canary at the start, the whole answer counts.
pub fn after_canary<'a>(content: &'a str, marker: &str) -> &'a str {
    let t = content.trim_start();
    match t.strip_prefix(marker) {
        Some(rest) if canary::begins_with(t, marker) => rest,
        _ => content,
    }
}

/// What the `words` contract found in one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordsVerdict {
    /// Whitespace-separated words after the canary (the seed's `words`).
    pub words: usize,
    /// Of those, exact repetitions of the code word.
    pub code_words: usize,
    /// Of those, anything else (including the code word with punctuation or another case).
    pub extra_words: usize,
    /// Why the answer fails the contract; None when it passes.
    pub problem: Option<String>,
}

/// Judge `after` (the answer after its canary) against "exactly `n` × `code_word`".
///
/// Problems, first match wins: a truncated capture cannot be judged; no final
/// `finish_reason`; 0 words is an *empty answer*; `length` with more than `n`
/// words is a *runaway*; any other `length` is cut off; a finish other than
/// `stop` is reported as is; `stop` with a wrong count or extra words is a
/// *wrong answer*.
pub fn judge_words(
    after: &str,
    code_word: &str,
    n: usize,
    finish_reasons: &[String],
    truncated: bool,
) -> WordsVerdict {
    let mut code_words = 0;
    let mut first_extra: Option<&str> = None;
    let mut words = 0;
    for w in after.split_whitespace() {
        words += 1;
        if w == code_word {
            code_words += 1;
        } else if first_extra.is_none() {
            first_extra = Some(w);
        }
    }
    let extra_words = words - code_words;
    let finish = finish_reasons.last().map(String::as_str);
    let problem = if truncated {
        Some(format!(
            "capture truncated at the client's cap after {words} words: the answer cannot be judged"
        ))
    } else if let Some(finish) = finish {
        if words == 0 {
            Some(format!(
                "empty answer: 0 words after the canary (finish {finish})"
            ))
        } else if finish == "length" && words > n {
            Some(format!(
                "runaway: {words} words after the canary, expected {n}; stopped only by max_tokens"
            ))
        } else if finish == "length" {
            Some(format!(
                "cut off by max_tokens after {words} words, expected {n} and a stop"
            ))
        } else if finish != "stop" {
            Some(format!("finish_reason {finish:?}, expected \"stop\""))
        } else if code_words != n || extra_words > 0 {
            let mut p = format!("wrong answer: {code_words} × {code_word:?}, expected {n}");
            if let Some(x) = first_extra {
                p.push_str(&format!(
                    "; {extra_words} other word(s), first {:?}",
                    crate::measure::record::bounded(x, 24)
                ));
            }
            Some(p)
        } else {
            None
        }
    } else {
        Some(format!(
            "no finish_reason in the stream ({words} words after the canary)"
        ))
    };
    WordsVerdict {
        words,
        code_words,
        extra_words,
        problem,
    }
}

/// The first difference of two texts: shared with `compare`, which holds a
/// candidate's reference texts against the baseline's.
pub use crate::report::reference::divergence;

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(s: &str) -> Vec<String> {
        vec![s.to_string()]
    }

    #[test]
    fn exact_answer_passes() {
        let v = judge_words(" cedar cedar cedar", "cedar", 3, &fr("stop"), false);
        assert_eq!(v.problem, None);
        assert_eq!((v.words, v.code_words, v.extra_words), (3, 3, 0));
    }

    #[test]
    fn after_canary_strips_only_the_own_marker() {
        assert_eq!(after_canary("  K48213 cedar", "K48213"), " cedar");
        assert_eq!(after_canary("B11111 cedar", "K48213"), "B11111 cedar");
        assert_eq!(after_canary("K482130 cedar", "K48213"), "K482130 cedar");
    }

    #[test]
    fn runaway_wrong_and_empty_answers_are_named() {
        let long = "cedar ".repeat(40);
        let v = judge_words(&long, "cedar", 5, &fr("length"), false);
        assert!(
            v.problem
                .as_deref()
                .unwrap()
                .starts_with("runaway: 40 words")
        );
        assert_eq!(v.words, 40);

        let v = judge_words("cedar cedar cedar cedar", "cedar", 5, &fr("stop"), false);
        let p = v.problem.unwrap();
        assert!(
            p.starts_with("wrong answer: 4 × \"cedar\", expected 5"),
            "{p}"
        );

        let v = judge_words("  \n", "cedar", 5, &fr("stop"), false);
        assert!(v.problem.unwrap().starts_with("empty answer"));
        assert_eq!(v.words, 0);

        let v = judge_words("cedar cedar", "cedar", 5, &fr("length"), false);
        assert!(v.problem.unwrap().starts_with("cut off"));
    }

    #[test]
    fn extra_words_fail_even_with_the_right_count() {
        let v = judge_words("cedar cedar cedar.", "cedar", 2, &fr("stop"), false);
        assert_eq!((v.code_words, v.extra_words), (2, 1));
        let p = v.problem.unwrap();
        assert!(p.contains("1 other word(s), first \"cedar.\""), "{p}");
        // Case matters: the contract is exact.
        let v = judge_words("Cedar cedar", "cedar", 2, &fr("stop"), false);
        assert!(v.problem.is_some());
    }

    #[test]
    fn truncated_or_unfinished_captures_cannot_pass() {
        let v = judge_words("cedar cedar", "cedar", 2, &fr("stop"), true);
        assert!(v.problem.unwrap().starts_with("capture truncated"));
        let v = judge_words("cedar cedar", "cedar", 2, &[], false);
        assert!(v.problem.unwrap().starts_with("no finish_reason"));
        let v = judge_words("cedar cedar", "cedar", 2, &fr("content_filter"), false);
        assert!(v.problem.unwrap().contains("content_filter"));
        // The last finish reason decides.
        let v = judge_words(
            "cedar",
            "cedar",
            1,
            &[fr("length"), fr("stop")].concat(),
            false,
        );
        assert_eq!(v.problem, None);
    }

    #[test]
    fn divergence_points_at_the_first_different_character() {
        assert_eq!(divergence("same", "same"), None);
        let d = divergence("K1 The sea is vast.", "K1 The sea is deep.").unwrap();
        assert_eq!(d.char_index, 14);
        assert_eq!(d.expected_snippet, "vast.");
        assert_eq!(d.actual_snippet, "deep.");
    }

    #[test]
    fn divergence_counts_characters_not_bytes() {
        let d = divergence("ééé a", "ééé b").unwrap();
        assert_eq!(d.char_index, 4);
        assert_eq!(
            (d.expected_snippet.as_str(), d.actual_snippet.as_str()),
            ("a", "b")
        );
        // Different multi-byte characters at the same place.
        let d = divergence("aé", "aè").unwrap();
        assert_eq!((d.char_index, d.actual_snippet.as_str()), (1, "è"));
    }

    #[test]
    fn a_prefix_diverges_where_it_ends_and_snippets_are_bounded() {
        let long = "x".repeat(100);
        let d = divergence(&format!("abc{long}"), "abc").unwrap();
        assert_eq!(d.char_index, 3);
        assert_eq!(d.expected_snippet.chars().count(), SNIPPET_CHARS);
        assert_eq!(d.actual_snippet, "");
        let d = divergence("", "a").unwrap();
        assert_eq!((d.char_index, d.actual_snippet.as_str()), (0, "a"));
    }
}
