//! Reference texts across runtimes: each runtime's reference-contract texts
//! come from itself, so a candidate that is consistently wrong would pass
//! its own contract. Its references are also held against the baseline's
//! (same workload, repeat and request): greedy output that changed is a
//! finding, counted as a controlled-output failure of that request.

use crate::artifact::{Divergence, TurnoverFailure, TurnoverRun};

/// Characters of each side kept in a divergence snippet.
pub const SNIPPET_CHARS: usize = 40;

/// Where `actual` first differs from `expected`, or None when they are
/// byte-identical. `char_index` counts Unicode scalars; when one text is a
/// prefix of the other it is the shorter one's length. Snippets start at the
/// divergence and hold at most [`SNIPPET_CHARS`] characters of each side.
pub fn divergence(expected: &str, actual: &str) -> Option<Divergence> {
    if expected == actual {
        return None;
    }
    let (mut eb, mut ab, mut char_index) = (0, 0, 0);
    let (mut e, mut a) = (expected.chars(), actual.chars());
    loop {
        match (e.next(), a.next()) {
            (Some(x), Some(y)) if x == y => {
                eb += x.len_utf8();
                ab += y.len_utf8();
                char_index += 1;
            }
            // Equal texts returned above.
            (None, None) => return None,
            _ => break,
        }
    }
    let snip = |s: &str| s.chars().take(SNIPPET_CHARS).collect::<String>();
    Some(Divergence {
        char_index,
        expected_snippet: snip(&expected[eb..]),
        actual_snippet: snip(&actual[ab..]),
    })
}

/// The candidate's runs with every request whose reference text differs
/// from the baseline's counted as failed (unless it already failed), and a
/// note per run that changed. Runs without a baseline counterpart holding
/// references are left as they are.
pub fn against_baseline(
    baseline: &[TurnoverRun],
    candidate: &[TurnoverRun],
) -> (Vec<TurnoverRun>, Vec<String>) {
    let mut notes = Vec::new();
    let runs = candidate
        .iter()
        .map(|c| {
            let b = baseline
                .iter()
                .find(|b| b.name == c.name && b.repeat == c.repeat);
            match b {
                Some(b) if !b.references.is_empty() && !c.references.is_empty() => {
                    let (run, note) = judge_run(b, c);
                    notes.extend(note);
                    run
                }
                _ => c.clone(),
            }
        })
        .collect();
    (runs, notes)
}

fn judge_run(b: &TurnoverRun, c: &TurnoverRun) -> (TurnoverRun, Option<String>) {
    let mut run = c.clone();
    let mut first: Option<(usize, Divergence)> = None;
    let mut differing = 0;
    for (i, (bt, ct)) in b.references.iter().zip(&c.references).enumerate() {
        let (Some(bt), Some(ct)) = (bt, ct) else {
            continue;
        };
        let Some(d) = divergence(bt, ct) else {
            continue;
        };
        differing += 1;
        if first.is_none() {
            first = Some((i, d.clone()));
        }
        if run.failures.iter().any(|f| f.request_index == i) {
            continue;
        }
        run.failed += 1;
        run.exact_output_passed = run.exact_output_passed.saturating_sub(1);
        run.failures.push(failure(i, ct, d));
    }
    run.failures.sort_by_key(|f| f.request_index);
    let note = first.map(|(i, d)| {
        format!(
            "turnover `{}` repeat {}: {differing} of the candidate's reference texts differ from the baseline's (greedy output changed), first at request {i}, character {}: baseline {:?}, candidate {:?}",
            c.name, c.repeat, d.char_index, d.expected_snippet, d.actual_snippet
        )
    });
    (run, note)
}

fn failure(index: usize, text: &str, d: Divergence) -> TurnoverFailure {
    TurnoverFailure {
        request_index: index,
        failure_class: "controlled_output_failed".into(),
        words: text.split_whitespace().count(),
        finish_reasons: Vec::new(),
        canary_passed: true,
        foreign_markers: Vec::new(),
        error: Some(format!(
            "the candidate's reference text (alone, temperature 0) differs from the baseline's from character {}",
            d.char_index
        )),
        output: Some(text.chars().take(200).collect()),
        divergence: Some(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(references: &[&str]) -> TurnoverRun {
        TurnoverRun {
            name: "ref".into(),
            repeat: 0,
            contract: "reference".into(),
            concurrency: 2,
            requests: references.len(),
            exact_output_passed: references.len(),
            failed: 0,
            responses_received: references.len(),
            performance_eligible: false,
            contaminated: 0,
            failures: vec![],
            references: references.iter().map(|t| Some(t.to_string())).collect(),
        }
    }

    #[test]
    fn first_difference_by_character() {
        assert_eq!(divergence("same", "same"), None);
        let d = divergence("K1 The sea is vast.", "K1 The sea is deep.").unwrap();
        assert_eq!(d.char_index, 14);
        assert_eq!(
            (d.expected_snippet.as_str(), d.actual_snippet.as_str()),
            ("vast.", "deep.")
        );
        assert_eq!(divergence("ab", "abc").unwrap().char_index, 2);
    }

    #[test]
    fn a_consistently_different_candidate_fails_against_the_baseline() {
        let b = run(&["K1 the sea", "K2 a hill", "K3 snow"]);
        let c = run(&["K1 the sea", "K2 a mountain", "K3 snow"]);
        let (runs, notes) = against_baseline(std::slice::from_ref(&b), &[c]);
        let r = &runs[0];
        assert_eq!((r.failed, r.exact_output_passed), (1, 2));
        let f = &r.failures[0];
        assert_eq!(
            (f.request_index, f.failure_class.as_str()),
            (1, "controlled_output_failed")
        );
        assert_eq!(f.divergence.as_ref().unwrap().char_index, 5);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("1 of the candidate's reference texts differ from the baseline's"),
            "{}",
            notes[0]
        );
        assert!(
            notes[0].contains("first at request 1, character 5"),
            "{}",
            notes[0]
        );
        // Identical references, or none recorded (older artifacts): unchanged.
        let (same, notes) = against_baseline(std::slice::from_ref(&b), std::slice::from_ref(&b));
        assert_eq!((same[0].failed, notes.len()), (0, 0));
        let mut old = b.clone();
        old.references.clear();
        let (kept, _) = against_baseline(&[b], &[old.clone()]);
        assert_eq!(kept[0], old);
    }
}
