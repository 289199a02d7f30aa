//! Each answer judged on its complete captured text, first failing check
//! first, and the run record summed from the judgements.

use super::canary::{self, CanaryCheck, MarkerSet};
use super::contract;
use crate::artifact::{Divergence, TurnoverFailure, TurnoverRun};
use crate::config::turnover::TurnoverSpec;
use crate::measure::record::{Outcome, StreamCapture, bounded};

/// Characters of error text kept in a failure record.
pub const ERROR_CHARS: usize = 300;
/// Characters of captured output kept in a failure record.
pub const OUTPUT_CHARS: usize = 200;

/// What a request's answer is judged against.
#[derive(Debug, Clone, Copy)]
pub enum Expected<'a> {
    /// Exactly `n` × `code_word` after the canary.
    Words { code_word: &'a str, n: usize },
    /// Byte-identical to this capture of the same prompt run alone.
    Reference(&'a StreamCapture),
}

/// The verdict on one request of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    /// A complete, valid stream arrived (see [`summarize`]).
    pub received: bool,
    pub canary: CanaryCheck,
    /// Present iff `outcome` is not Ok.
    pub failure: Option<TurnoverFailure>,
}

/// Judge request `index` of a run from its capture. First failing check wins;
/// the canary is checked on whatever text arrived, so a leak is counted even
/// in a broken stream.
pub fn judge(
    markers: &MarkerSet,
    index: usize,
    capture: &StreamCapture,
    expected: Expected<'_>,
) -> Judgement {
    judge_with(markers, index, capture, expected, true)
}

/// [`judge`], where `own_marker` says whether the prompt asked the answer
/// to begin with its marker (task prompts do not: only foreign markers,
/// a leak, fail their canary).
pub fn judge_with(
    markers: &MarkerSet,
    index: usize,
    capture: &StreamCapture,
    expected: Expected<'_>,
    own_marker: bool,
) -> Judgement {
    let marker = markers.get(index).unwrap_or_default();
    let mut canary = canary::check(markers, index, &capture.content, &capture.reasoning);
    if !own_marker {
        canary.begins_with_own = true;
    }
    let after = contract::after_canary(&capture.content, marker);
    let mut words = after.split_whitespace().count();

    // Reference divergence is reported whatever the class, as a clue.
    let mut divergence: Option<Divergence> = None;
    let problem = match expected {
        Expected::Words { code_word, n } => {
            let v = contract::judge_words(
                after,
                code_word,
                n,
                &capture.finish_reasons,
                capture.truncated,
            );
            words = v.words;
            v.problem
        }
        Expected::Reference(reference) => {
            let held = against_reference(reference, capture, marker, &mut canary);
            divergence = held.divergence;
            held.problem
        }
    };
    let (outcome, error) = outcome_of(capture, &canary, markers, marker, problem);
    // A client-side failure is not a judged answer: a divergence would only restate it.
    if capture.failure.is_some() {
        divergence = None;
    }

    let failure = (outcome != Outcome::Ok).then(|| TurnoverFailure {
        request_index: index,
        failure_class: outcome.as_str().to_string(),
        words,
        finish_reasons: capture.finish_reasons.clone(),
        canary_passed: canary.passed(),
        foreign_markers: canary.foreign.clone(),
        error: error.map(|e| bounded(&e, ERROR_CHARS)),
        output: (!capture.content.is_empty()).then(|| bounded(&capture.content, OUTPUT_CHARS)),
        divergence,
    });
    Judgement {
        outcome,
        received: capture.failure.is_none(),
        canary,
        failure,
    }
}

/// An answer held to its reference: what is wrong with it, if anything,
/// and where its text left the reference's.
struct AgainstReference {
    problem: Option<String>,
    divergence: Option<Divergence>,
}

/// The reference contract: the answer is byte-identical to its reference
/// and calls the same tools. An answer identical to a reference that lacked
/// the marker too passes its own-marker check (see below).
fn against_reference(
    reference: &StreamCapture,
    capture: &StreamCapture,
    marker: &str,
    canary: &mut CanaryCheck,
) -> AgainstReference {
    let mut divergence = None;
    let mut problem = None;
    if let Some(f) = &reference.failure {
        problem = Some(format!(
            "no reference text: the prompt's reference request failed ({}: {})",
            f.class.as_str(),
            f.message
        ));
    } else if reference.truncated || capture.truncated {
        problem =
            Some("capture truncated at the client's cap: the answer cannot be compared".into());
    } else if let Some(d) = contract::divergence(&reference.content, &capture.content) {
        problem = Some(format!(
            "output differs from its reference (alone, temperature 0) from character {}",
            d.char_index
        ));
        divergence = Some(d);
    } else if !canary.begins_with_own && !reference.content.trim_start().starts_with(marker) {
        // The model did not write the marker alone either (a small
        // model's near-tie at the first token), and this answer is
        // byte for byte its own alone answer: that identity is
        // stronger than the marker. Foreign markers still fail it.
        canary.begins_with_own = true;
    }
    if problem.is_none()
        && let Some(k) = differing_call(&reference.tool_calls, &capture.tool_calls)
    {
        problem = Some(format!(
            "tool call {k} differs from its reference's (alone, temperature 0)"
        ));
    }
    AgainstReference {
        problem,
        divergence,
    }
}

/// The first failing check names the outcome: the client's failure, then
/// the canary, then the contract's `problem`.
fn outcome_of(
    capture: &StreamCapture,
    canary: &CanaryCheck,
    markers: &MarkerSet,
    marker: &str,
    problem: Option<String>,
) -> (Outcome, Option<String>) {
    if let Some(f) = &capture.failure {
        return (f.class, Some(f.message.clone()));
    }
    if !canary.passed() {
        let mut why = Vec::new();
        if !canary.begins_with_own {
            why.push(format!("answer does not begin with its marker {marker}"));
        }
        if !canary.foreign.is_empty() {
            let named: Vec<String> = canary
                .foreign
                .iter()
                .map(|m| match markers.origin(m) {
                    Some(o) => format!("{m} ({o})"),
                    None => m.clone(),
                })
                .collect();
            why.push(format!(
                "answer carries other requests' markers: {}",
                named.join(", ")
            ));
        }
        return (Outcome::RequestCanaryFailed, Some(why.join("; ")));
    }
    match problem {
        Some(p) => (Outcome::ControlledOutputFailed, Some(p)),
        None => (Outcome::Ok, None),
    }
}

/// The run record from every request's judgement (any order); what the
/// reference pass gives (texts, tokens, task answers, feature marks) is
/// added by `TurnoverWorkload::keep_references`.
///
/// `responses_received` counts requests whose response arrived complete and
/// valid: HTTP 2xx, no transport error, a stream the client validated (it
/// ended properly and carried no error object). Those are the answers that
/// could be judged, so `responses_received - exact_output_passed` failed a
/// canary or the contract. `performance_eligible` is always false: turnover
/// runs are never performance evidence.
pub fn summarize(
    spec: &TurnoverSpec,
    repeat: usize,
    judged: impl IntoIterator<Item = Judgement>,
) -> TurnoverRun {
    let mut run = TurnoverRun {
        name: spec.name.clone(),
        repeat,
        contract: spec.contract.as_str().to_string(),
        concurrency: spec.concurrency,
        requests: 0,
        exact_output_passed: 0,
        failed: 0,
        responses_received: 0,
        performance_eligible: false,
        contaminated: 0,
        failures: Vec::new(),
        references: Vec::new(),
        reference_tokens: Vec::new(),
        task_answers: String::new(),
        task_set_sha256: None,
        features: Default::default(),
        first_ttft_ms: None,
        later_ttft_p50_ms: None,
    };
    for j in judged {
        run.requests += 1;
        run.responses_received += usize::from(j.received);
        run.contaminated += usize::from(!j.canary.foreign.is_empty());
        match j.failure {
            None => run.exact_output_passed += 1,
            Some(f) => {
                run.failed += 1;
                run.failures.push(f);
            }
        }
    }
    run.failures.sort_by_key(|f| f.request_index);
    run
}

/// The first tool call (by position) whose function or arguments differ,
/// a call missing on either side included; ids are the server's own and
/// are not compared.
fn differing_call(
    reference: &[crate::measure::record::ToolCall],
    answer: &[crate::measure::record::ToolCall],
) -> Option<usize> {
    (0..reference.len().max(answer.len())).find(|&k| {
        let (r, a) = (reference.get(k), answer.get(k));
        r.map(|c| (&c.name, &c.arguments)) != a.map(|c| (&c.name, &c.arguments))
    })
}
