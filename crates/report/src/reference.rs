//! Reference texts across runtimes: each runtime's reference-contract texts
//! come from itself, so a candidate that is consistently wrong would pass
//! its own contract. Its references are also held against the baseline's
//! (same workload, repeat and request): greedy output that changed is a
//! finding, counted as a controlled-output failure of that request.

use serde::{Deserialize, Serialize};

use crate::agreement::{
    CrossRuntime, DivergenceClass, QualityPolicy, TokenComparison, TokenLogprob, compare_tokens,
};
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

/// The cross-runtime reference comparison a report keeps: per prompt, the
/// class of the pair and the per-token data it was decided from, so
/// `verify` can decide it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceComparison {
    pub cross_runtime: CrossRuntime,
    pub near_tie_nats: f64,
    /// Prompts with a reference on both sides.
    pub pairs: usize,
    pub identical: usize,
    pub near_tie: usize,
    pub hard: usize,
    /// Differing pairs without logprobs on a side: judged as exact text.
    pub text_only: usize,
    pub prompts: Vec<ReferencePair>,
}

/// One prompt's reference pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferencePair {
    pub turnover: String,
    pub repeat: usize,
    pub request_index: usize,
    #[serde(flatten)]
    pub comparison: TokenComparison,
    /// Whether the policy counts the pair as passed.
    pub passed: bool,
    /// Each side's tokens up to and including the first divergence (all of
    /// them for identical texts): what the class and the agreement are
    /// computed from. Empty where that side sent no logprobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_tokens: Vec<TokenLogprob>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_tokens: Vec<TokenLogprob>,
}

/// Whether `policy` passes a pair of class `class`.
pub fn passes(class: DivergenceClass, policy: CrossRuntime) -> bool {
    match class {
        DivergenceClass::Identical => true,
        DivergenceClass::NearTie => policy != CrossRuntime::Exact,
        // Under `rate` no single pair fails: the quality gate weighs the share.
        DivergenceClass::Hard | DivergenceClass::TextOnly => policy == CrossRuntime::Rate,
    }
}

/// The tokens a report keeps of one side: through the divergence.
pub fn kept_tokens(tokens: &[TokenLogprob], c: &TokenComparison) -> Vec<TokenLogprob> {
    let end = c
        .divergence
        .as_ref()
        .map_or(tokens.len(), |d| d.position + 1);
    tokens[..end.min(tokens.len())].to_vec()
}

/// The candidate's runs with every request whose reference text differs
/// from the baseline's and that `policy` does not pass counted as failed
/// (unless it already failed), a note per run that changed, and the
/// comparison of every pair (None when no run has references on both
/// sides). Runs without a baseline counterpart holding references are
/// left as they are.
pub fn against_baseline(
    baseline: &[TurnoverRun],
    candidate: &[TurnoverRun],
    policy: &QualityPolicy,
) -> (Vec<TurnoverRun>, Vec<String>, Option<ReferenceComparison>) {
    let mut notes = Vec::new();
    let mut pairs = Vec::new();
    let runs = candidate
        .iter()
        .map(|c| {
            let b = baseline
                .iter()
                .find(|b| b.name == c.name && b.repeat == c.repeat);
            match b {
                Some(b) if !b.references.is_empty() && !c.references.is_empty() => {
                    let (run, note) = judge_run(b, c, policy, &mut pairs);
                    notes.extend(note);
                    run
                }
                _ => c.clone(),
            }
        })
        .collect();
    let comparison = (!pairs.is_empty()).then(|| summarize(pairs, policy));
    (runs, notes, comparison)
}

/// The counts of `prompts` under `policy`.
pub fn summarize(prompts: Vec<ReferencePair>, policy: &QualityPolicy) -> ReferenceComparison {
    let count = |k: DivergenceClass| prompts.iter().filter(|p| p.comparison.class == k).count();
    ReferenceComparison {
        cross_runtime: policy.cross_runtime,
        near_tie_nats: policy.near_tie_nats,
        pairs: prompts.len(),
        identical: count(DivergenceClass::Identical),
        near_tie: count(DivergenceClass::NearTie),
        hard: count(DivergenceClass::Hard),
        text_only: count(DivergenceClass::TextOnly),
        prompts,
    }
}

fn tokens_of(run: &TurnoverRun, i: usize) -> Option<&[TokenLogprob]> {
    run.reference_tokens
        .get(i)?
        .as_deref()
        .filter(|t| !t.is_empty())
}

fn judge_run(
    b: &TurnoverRun,
    c: &TurnoverRun,
    policy: &QualityPolicy,
    pairs: &mut Vec<ReferencePair>,
) -> (TurnoverRun, Option<String>) {
    let mut run = c.clone();
    let mut first: Option<(usize, Divergence)> = None;
    let (mut differing, mut near, mut hard, mut text_only) = (0, 0, 0, 0);
    for (i, (bt, ct)) in b.references.iter().zip(&c.references).enumerate() {
        let (Some(bt), Some(ct)) = (bt, ct) else {
            continue;
        };
        let d = divergence(bt, ct);
        let (btok, ctok) = (tokens_of(b, i), tokens_of(c, i));
        let cmp = compare_tokens(d.is_none(), btok, ctok, policy.near_tie_nats);
        let class = cmp.class;
        let passed = passes(class, policy.cross_runtime);
        pairs.push(ReferencePair {
            turnover: c.name.clone(),
            repeat: c.repeat,
            request_index: i,
            baseline_tokens: btok.map(|t| kept_tokens(t, &cmp)).unwrap_or_default(),
            candidate_tokens: ctok.map(|t| kept_tokens(t, &cmp)).unwrap_or_default(),
            comparison: cmp,
            passed,
        });
        let Some(d) = d else {
            continue;
        };
        differing += 1;
        match class {
            DivergenceClass::NearTie => near += 1,
            DivergenceClass::Hard => hard += 1,
            _ => text_only += 1,
        }
        if first.is_none() {
            first = Some((i, d.clone()));
        }
        if passed || run.failures.iter().any(|f| f.request_index == i) {
            continue;
        }
        run.failed += 1;
        run.exact_output_passed = run.exact_output_passed.saturating_sub(1);
        run.failures.push(failure(i, ct, d, class));
    }
    run.failures.sort_by_key(|f| f.request_index);
    let note = first.map(|(i, d)| {
        let mut note = format!(
            "turnover `{}` repeat {}: {differing} of the candidate's reference texts differ from the baseline's (greedy output changed), first at request {i}, character {}: baseline {:?}, candidate {:?}",
            c.name, c.repeat, d.char_index, d.expected_snippet, d.actual_snippet
        );
        note.push_str(&format!(
            "; by per-token logprobs: {near} near-tie, {hard} hard divergence, {text_only} without logprobs (judged as exact text); cross_runtime = \"{}\" (near-tie within {} nats) {}",
            policy.cross_runtime.as_str(),
            policy.near_tie_nats,
            match policy.cross_runtime {
                CrossRuntime::Exact => "fails every difference",
                CrossRuntime::NearTie => "passes the near-ties",
                CrossRuntime::Rate => "leaves the share of hard divergences to the quality gate",
            }
        ));
        note
    });
    (run, note)
}

fn failure(index: usize, text: &str, d: Divergence, class: DivergenceClass) -> TurnoverFailure {
    let why = match class {
        DivergenceClass::NearTie => " (a near-tie: cross_runtime = \"exact\" fails it)",
        DivergenceClass::Hard => " (a hard divergence by the per-token logprobs)",
        _ => " (no per-token logprobs to weigh it: exact text)",
    };
    TurnoverFailure {
        request_index: index,
        failure_class: "controlled_output_failed".into(),
        words: text.split_whitespace().count(),
        finish_reasons: Vec::new(),
        canary_passed: true,
        foreign_markers: Vec::new(),
        error: Some(format!(
            "the candidate's reference text (alone, temperature 0) differs from the baseline's from character {}{why}",
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
            reference_tokens: vec![],
            task_answers: String::new(),
            task_set_sha256: None,
            features: Default::default(),
            first_ttft_ms: None,
            later_ttft_p50_ms: None,
        }
    }

    fn exact() -> QualityPolicy {
        QualityPolicy::default()
    }

    fn t(token: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: token.into(),
            bytes: None,
            id: None,
            logprob,
            top: top
                .iter()
                .map(|(t, l)| crate::agreement::TopLogprob {
                    token: (*t).into(),
                    bytes: None,
                    logprob: *l,
                })
                .collect(),
        }
    }

    /// Baseline "A red" / "A dog" / "Hi"; candidate "A blue" (near-tie at
    /// token 1), "A cat" (hard: 3 nats), "Hi" (identical).
    fn pair() -> (TurnoverRun, TurnoverRun) {
        let mut b = run(&["A red", "A dog", "Hi"]);
        let mut c = run(&["A blue", "A cat", "Hi"]);
        let a = || t("A", -0.1, &[("A", -0.1), ("The", -2.5)]);
        let hi = || vec![t("Hi", -0.01, &[("Hi", -0.01)])];
        b.reference_tokens = vec![
            Some(vec![
                a(),
                t(" red", -1.0, &[(" red", -1.0), (" blue", -1.2)]),
            ]),
            Some(vec![
                a(),
                t(" dog", -0.1, &[(" dog", -0.1), (" cat", -3.1)]),
            ]),
            Some(hi()),
        ];
        c.reference_tokens = vec![
            Some(vec![
                a(),
                t(" blue", -1.05, &[(" blue", -1.05), (" red", -1.1)]),
            ]),
            Some(vec![
                a(),
                t(" cat", -0.2, &[(" cat", -0.2), (" dog", -2.0)]),
            ]),
            Some(hi()),
        ];
        (b, c)
    }

    #[test]
    fn near_tie_policy_passes_near_ties_and_fails_hard_divergences() {
        let (b, c) = pair();
        let near = QualityPolicy {
            cross_runtime: CrossRuntime::NearTie,
            ..QualityPolicy::default()
        };
        let (runs, notes, cmp) =
            against_baseline(std::slice::from_ref(&b), std::slice::from_ref(&c), &near);
        let cmp = cmp.unwrap();
        assert_eq!(
            (
                cmp.pairs,
                cmp.identical,
                cmp.near_tie,
                cmp.hard,
                cmp.text_only
            ),
            (3, 1, 1, 1, 0)
        );
        let classes: Vec<_> = cmp
            .prompts
            .iter()
            .map(|p| (p.comparison.class, p.passed))
            .collect();
        assert_eq!(
            classes,
            [
                (DivergenceClass::NearTie, true),
                (DivergenceClass::Hard, false),
                (DivergenceClass::Identical, true)
            ]
        );
        // Kept through the divergence (token 1) for verify.
        assert_eq!(cmp.prompts[0].baseline_tokens.len(), 2);
        let r = &runs[0];
        assert_eq!((r.failed, r.exact_output_passed), (1, 2));
        assert_eq!(r.failures[0].request_index, 1);
        assert!(
            r.failures[0]
                .error
                .as_ref()
                .unwrap()
                .contains("hard divergence")
        );
        assert!(
            notes[0].contains("1 near-tie, 1 hard divergence"),
            "{}",
            notes[0]
        );

        // The default policy (exact) fails both differing texts, as before.
        let (runs, _, cmp) = against_baseline(&[b], &[c], &exact());
        assert_eq!((runs[0].failed, runs[0].exact_output_passed), (2, 1));
        assert!(!cmp.unwrap().prompts[0].passed);
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
        let (runs, notes, cmp) = against_baseline(std::slice::from_ref(&b), &[c], &exact());
        let r = &runs[0];
        assert_eq!((r.failed, r.exact_output_passed), (1, 2));
        let f = &r.failures[0];
        assert_eq!(
            (f.request_index, f.failure_class.as_str()),
            (1, "controlled_output_failed")
        );
        assert_eq!(f.divergence.as_ref().unwrap().char_index, 5);
        // No logprobs on either side: the difference is judged as exact text.
        let cmp = cmp.unwrap();
        assert_eq!((cmp.pairs, cmp.identical, cmp.text_only), (3, 2, 1));
        assert!(f.error.as_ref().unwrap().contains("no per-token logprobs"));
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
        let (same, notes, _) =
            against_baseline(std::slice::from_ref(&b), std::slice::from_ref(&b), &exact());
        assert_eq!((same[0].failed, notes.len()), (0, 0));
        let mut old = b.clone();
        old.references.clear();
        let (kept, _, _) = against_baseline(&[b], &[old.clone()], &exact());
        assert_eq!(kept[0], old);
    }
}
