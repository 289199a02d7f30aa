//! The quality gate: output quality across runtimes decided by evidence,
//! beside the performance and turnover gates.
//!
//! Two kinds of part, each with the evidence rule of the other gates
//! (fail if the one-sided lower bound is above the margin, pass if the
//! one-sided upper bound is at most it, inconclusive otherwise) and the
//! family-wise levels `compare` gives every gating pair:
//!
//! - **hard divergences:** of the reference pairs (the same prompt, alone,
//!   temperature 0, on both runtimes), the share whose greedy texts part at
//!   a hard divergence, or differ without logprobs to weigh them. Bounds are
//!   Clopper–Pearson. A runtime against itself shows none; an honest
//!   numerics change shows near-ties; a broken one shows hard divergences.
//!   It gates when the policy says `cross_runtime = "rate"`, and is reported
//!   beside the gates otherwise.
//! - **task accuracy:** per task workload (checkable questions with an
//!   answer key), the drop in the share answered right, baseline −
//!   candidate, in points. Both runtimes answer the same items, so only
//!   the discordant items (lost, gained) carry variance; bounds invert
//!   Tango's score test for paired proportions (`stats::paired`). An item a side did not answer (its request
//!   failed) counts as wrong on that side, and is named.
//! - **features:** per workload that asked for one (structured output),
//!   the drop in the share of answers that delivered it, paired by request
//!   and bounded as task accuracy is; each side's answers that did not are
//!   counted by how they failed (not JSON, not valid, cut off, none).
//! - **embeddings:** per embeddings workload, the cosine of each input's
//!   two vectors held to the policy's floors (`embedding`); a threshold on
//!   deterministic vectors, so it takes no share of the family's error.

use crate::artifact::TurnoverRun;
use crate::embedding::{self, EmbeddingAgreement, EmbeddingPair};
use crate::model::{EvidenceGate, EvidencePart};
pub use crate::model::{FeatureRate, HardDivergence, QualityComparison, TaskAccuracy};
use crate::policy::QualityPolicy;
use crate::reference::ReferenceComparison;
use crate::stats::{
    GateOutcome, PairedCounts, clopper_pearson, drop_bounds_score, smallest_deciding_n,
};

pub const QUALITY_RULE: &str = "per part: fail if the one-sided lower confidence bound exceeds the margin, pass if the one-sided upper bound is at most the margin, inconclusive otherwise; parts at the family-wise levels of the performance gate's pairs (each part is one more pair). Hard-divergence share: Clopper-Pearson bounds of (hard + text-only) / reference pairs. Task accuracy drop (baseline - candidate, points), paired by item: one-sided bounds inverting Tango's score test for paired proportions (1998); an unanswered item is wrong. Embeddings: the lowest and the mean cosine of each input's two vectors against the policy's floors (no sampling error: the vectors of fixed inputs are deterministic). Reference pairs are compared up to their first divergence only: neither side is scored on the other's text (teacher forcing), which llama.cpp's server cannot do (it returns logprobs of generated tokens only) and vLLM's prompt_logprobs could";

/// Most items (or reference pairs) `requests_to_resolve` will name.
pub const MAX_RESOLVE: u64 = 100_000;

/// One task workload's answers on one side: per item, right, wrong or unanswered.
pub fn answers_of(run: &TurnoverRun) -> Option<String> {
    (!run.task_answers.is_empty()).then(|| run.task_answers.clone())
}

/// Each workload both sides ran, by its first repeat on each side, in the
/// baseline's order.
fn first_repeats<'r>(
    baseline: &'r [TurnoverRun],
    candidate: &'r [TurnoverRun],
) -> Vec<(&'r TurnoverRun, &'r TurnoverRun)> {
    let first = |runs: &'r [TurnoverRun], name: &str| {
        runs.iter()
            .filter(|r| r.name == name)
            .min_by_key(|r| r.repeat)
    };
    let mut out: Vec<(&TurnoverRun, &TurnoverRun)> = Vec::new();
    for r in baseline {
        if out.iter().any(|(b, _)| b.name == r.name) {
            continue;
        }
        if let (Some(b), Some(c)) = (first(baseline, &r.name), first(candidate, &r.name)) {
            out.push((b, c));
        }
    }
    out
}

/// The task workloads both sides ran (first repeat of each name, in the
/// baseline's order): (name, baseline answers, candidate answers).
pub fn task_pairs(
    baseline: &[TurnoverRun],
    candidate: &[TurnoverRun],
) -> Vec<(String, String, String)> {
    first_repeats(baseline, candidate)
        .into_iter()
        .filter_map(|(b, c)| Some((b.name.clone(), answers_of(b)?, answers_of(c)?)))
        .collect()
}

/// One feature's marks on both sides, for the same workload.
#[derive(Debug, Clone, PartialEq)]
pub struct FeaturePair {
    pub workload: String,
    pub feature: String,
    pub baseline: String,
    pub candidate: String,
}

/// The key of each answer's first called function, a letter by its place
/// among the functions offered (`A` first; `n` no call, `f` not offered).
pub const TOOL_FUNCTION: &str = "tool_function";

/// The features both sides marked for the same workload (its first
/// repeat), in the baseline's order.
pub fn feature_pairs(baseline: &[TurnoverRun], candidate: &[TurnoverRun]) -> Vec<FeaturePair> {
    let mut out = Vec::new();
    for (b, c) in first_repeats(baseline, candidate) {
        for (feature, marks) in &b.features {
            if let Some(theirs) = c.features.get(feature) {
                let (baseline, candidate) = if feature == TOOL_FUNCTION {
                    same_function(marks, theirs)
                } else {
                    (marks.clone(), theirs.clone())
                };
                out.push(FeaturePair {
                    workload: b.name.clone(),
                    feature: feature.clone(),
                    baseline,
                    candidate,
                });
            }
        }
    }
    out
}

/// The called functions as a feature: the baseline delivers (`1`) where
/// it called one, the candidate where it called the same one; a candidate
/// that called another is `f`. Its own output again gives itself (a
/// report keeps these marks, and `verify` pairs them again).
fn same_function(baseline: &str, candidate: &str) -> (String, String) {
    let called = |m: char| m.is_ascii_uppercase() || m == mark::VALID;
    baseline
        .chars()
        .zip(candidate.chars())
        .map(|(b, c)| {
            let theirs = if called(b) && c == b {
                mark::VALID
            } else if called(c) {
                mark::UNKNOWN_FUNCTION
            } else {
                c
            };
            (if called(b) { mark::VALID } else { b }, theirs)
        })
        .unzip()
}

/// How many quality parts gate under `policy`: one per task both sides
/// ran and per feature both marked, and the hard-divergence share when it
/// gates and there are pairs.
pub fn gating_parts(
    tasks: usize,
    refs: Option<&ReferenceComparison>,
    policy: &QualityPolicy,
) -> usize {
    tasks + usize::from(policy.rate_gated() && refs.is_some_and(|r| r.pairs > 0))
}

/// The quality comparison and its gate (None when there is nothing to
/// judge: no reference pairs, no tasks and no features). `alpha_pass` /
/// `alpha_fail` are the one-sided levels every gating pair gets.
pub fn judge(
    refs: Option<&ReferenceComparison>,
    tasks: &[(String, String, String)],
    features: &[FeaturePair],
    embeddings: &[EmbeddingPair],
    policy: &QualityPolicy,
    alpha_pass: f64,
    alpha_fail: f64,
) -> Option<(QualityComparison, Option<EvidenceGate>)> {
    let hard = refs
        .filter(|r| r.pairs > 0)
        .map(|r| hard_divergence(r, policy, alpha_pass, alpha_fail));
    let tasks: Vec<TaskAccuracy> = tasks
        .iter()
        .map(|(name, b, c)| {
            task_accuracy(
                name,
                b,
                c,
                policy.accuracy_margin_points,
                alpha_pass,
                alpha_fail,
            )
        })
        .collect();
    let features: Vec<FeatureRate> = features
        .iter()
        .map(|p| feature_rate(p, policy.feature_margin_points, alpha_pass, alpha_fail))
        .collect();
    let embeddings: Vec<EmbeddingAgreement> = embeddings
        .iter()
        .map(|p| {
            let (min, mean) = policy.embedding_floors_for(&p.name);
            embedding::judge(p, min, mean)
        })
        .collect();
    if hard.is_none() && tasks.is_empty() && features.is_empty() && embeddings.is_empty() {
        return None;
    }
    let mut parts: Vec<EvidencePart> = Vec::new();
    if let Some(h) = hard.as_ref().filter(|h| h.gating) {
        parts.push(EvidencePart {
            requests_to_resolve: h.pairs_to_resolve.map(|n| n as usize),
            ..EvidencePart::new("quality: hard divergences", h.outcome, h.reason())
        });
    }
    for t in &tasks {
        parts.push(EvidencePart {
            requests_to_resolve: t.items_to_resolve.map(|n| n as usize),
            ..EvidencePart::new(format!("quality: task {}", t.name), t.outcome, t.reason())
        });
    }
    for f in &features {
        parts.push(EvidencePart {
            requests_to_resolve: f.rate.items_to_resolve.map(|n| n as usize),
            ..EvidencePart::new(
                format!("quality: {} {}", f.feature, f.rate.name),
                f.rate.outcome,
                f.reason(),
            )
        });
    }
    for e in &embeddings {
        parts.push(EvidencePart::new(
            format!("{}{}", embedding::PART_PREFIX, e.name),
            e.outcome,
            e.reason(),
        ));
    }
    let gate = (!parts.is_empty()).then(|| crate::gate::gate_of_parts(QUALITY_RULE, parts));
    Some((
        QualityComparison {
            hard_divergence: hard,
            tasks,
            features,
            embeddings,
        },
        gate,
    ))
}

impl HardDivergence {
    pub fn reason(&self) -> String {
        format!(
            "{} hard of {} reference pairs ({:.1} %); one-sided bounds [{:.1} %, {:.1} %] against a margin of {} %",
            self.hard,
            self.pairs,
            self.percent,
            self.lower_bound_percent,
            self.upper_bound_percent,
            self.margin_percent
        )
    }
}

impl TaskAccuracy {
    pub fn reason(&self) -> String {
        let pct = |k: u64| 100.0 * k as f64 / self.items.max(1) as f64;
        format!(
            "accuracy {}/{} ({:.1} %) → {}/{} ({:.1} %), drop {:+.1} points; one-sided bounds [{:+.1}, {:+.1}] against a margin of {} points",
            self.baseline_correct,
            self.items,
            pct(self.baseline_correct),
            self.candidate_correct,
            self.items,
            pct(self.candidate_correct),
            self.drop_points,
            self.lower_bound_points,
            self.upper_bound_points,
            self.margin_points
        )
    }
}

impl FeatureRate {
    pub fn reason(&self) -> String {
        let t = &self.rate;
        let pct = |k: u64| 100.0 * k as f64 / t.items.max(1) as f64;
        let missed = |marks: &std::collections::BTreeMap<String, u64>| {
            let parts: Vec<String> = marks
                .iter()
                .filter(|(k, _)| k.as_str() != "valid")
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(", ")
            }
        };
        let none = if t.baseline_correct == 0 && t.candidate_correct == 0 {
            "; neither side delivered it on any request: the feature did not engage"
        } else {
            ""
        };
        format!(
            "delivered {}/{} ({:.1} %) → {}/{} ({:.1} %), drop {:+.1} points; one-sided bounds [{:+.1}, {:+.1}] against a margin of {} points; not delivered: baseline {}, candidate {}{none}",
            t.baseline_correct,
            t.items,
            pct(t.baseline_correct),
            t.candidate_correct,
            t.items,
            pct(t.candidate_correct),
            t.drop_points,
            t.lower_bound_points,
            t.upper_bound_points,
            t.margin_points,
            missed(&self.baseline_marks),
            missed(&self.candidate_marks),
        )
    }
}

/// A feature's rate: its marks paired as a task's answers are (`1` is
/// delivered), each side's marks counted by name.
pub fn feature_rate(
    p: &FeaturePair,
    margin_points: f64,
    alpha_pass: f64,
    alpha_fail: f64,
) -> FeatureRate {
    let mut rate = task_accuracy(
        &p.workload,
        &p.baseline,
        &p.candidate,
        margin_points,
        alpha_pass,
        alpha_fail,
    );
    // Nothing delivered on either side: no drop, and no sign the feature
    // ran at all; more requests would not change that.
    if rate.baseline_correct == 0 && rate.candidate_correct == 0 {
        rate.outcome = GateOutcome::Inconclusive;
        rate.items_to_resolve = None;
    }
    FeatureRate {
        feature: p.feature.clone(),
        baseline_marks: mark_counts(&rate.baseline_answers),
        candidate_marks: mark_counts(&rate.candidate_answers),
        rate,
    }
}

/// A feature's marks, one per answer (`measure::features` writes them).
/// For a tool call, "JSON" and "schema" are its arguments' and its
/// function's parameters'.
pub mod mark {
    /// Delivered: valid JSON (against the schema, when one was asked); a
    /// tool call of a known function whose arguments validate.
    pub const VALID: char = '1';
    /// JSON, but not valid against the schema.
    pub const SCHEMA_INVALID: char = 's';
    /// Not JSON, and the server said it was done.
    pub const INVALID_JSON: char = 'j';
    /// Not JSON, cut at `max_tokens` (`finish_reason = "length"`).
    pub const CUT_OFF: char = 'c';
    /// A tool workload's answer without a tool call.
    pub const NO_CALL: char = 'n';
    /// A call of a function the request did not offer (or not the one it named).
    pub const UNKNOWN_FUNCTION: char = 'f';
    /// Valid calls, but the stream did not finish with `"tool_calls"`.
    pub const WRONG_FINISH: char = 'r';
    /// A reasoning workload's answer whose reasoning came inside the
    /// content (`<think>…</think>`), not apart from it.
    pub const REASONING_IN_CONTENT: char = 't';
    /// Reasoning, and no answer after it (it used up `max_tokens`, or the
    /// server stopped there).
    pub const EMPTY_ANSWER: char = 'e';
    /// A reasoning workload's answer with no reasoning at all.
    pub const NO_REASONING: char = 'm';
    /// No answer: the request failed, or its text hit the capture cap.
    pub const NO_ANSWER: char = '-';
    /// Every mark with the name a report counts it under.
    pub const NAMES: [(char, &str); 11] = [
        (VALID, "valid"),
        (SCHEMA_INVALID, "schema_invalid"),
        (INVALID_JSON, "invalid_json"),
        (CUT_OFF, "cut_off"),
        (NO_CALL, "no_call"),
        (UNKNOWN_FUNCTION, "unknown_function"),
        (WRONG_FINISH, "wrong_finish_reason"),
        (REASONING_IN_CONTENT, "reasoning_in_content"),
        (EMPTY_ANSWER, "answer_empty"),
        (NO_REASONING, "no_reasoning"),
        (NO_ANSWER, "no_answer"),
    ];
}

/// How many of `marks` carry each mark, by name (an unknown mark under
/// its own character).
pub fn mark_counts(marks: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for m in marks.chars() {
        let name = mark::NAMES
            .iter()
            .find(|(c, _)| *c == m)
            .map_or_else(|| m.to_string(), |(_, n)| (*n).to_string());
        *out.entry(name).or_insert(0) += 1;
    }
    out
}

fn outcome(lower: f64, upper: f64, margin: f64) -> GateOutcome {
    if lower > margin {
        GateOutcome::Fail
    } else if upper <= margin {
        GateOutcome::Pass
    } else {
        GateOutcome::Inconclusive
    }
}

/// Clopper–Pearson one-sided bounds (percent) of `hard / pairs`.
fn hard_bounds(hard: u64, pairs: u64, alpha_pass: f64, alpha_fail: f64) -> (f64, f64) {
    let lower = clopper_pearson(hard, pairs, 1.0 - 2.0 * alpha_fail).low * 100.0;
    let upper = clopper_pearson(hard, pairs, 1.0 - 2.0 * alpha_pass).high * 100.0;
    (lower, upper)
}

pub fn hard_divergence(
    r: &ReferenceComparison,
    policy: &QualityPolicy,
    alpha_pass: f64,
    alpha_fail: f64,
) -> HardDivergence {
    let (pairs, hard) = (r.pairs as u64, (r.hard + r.text_only) as u64);
    let margin = policy.hard_margin_percent;
    let (lower, upper) = hard_bounds(hard, pairs, alpha_pass, alpha_fail);
    let out = outcome(lower, upper, margin);
    let pairs_to_resolve = (out == GateOutcome::Inconclusive)
        .then(|| {
            let share = hard as f64 / pairs as f64;
            smallest_deciding_n(pairs.max(1), MAX_RESOLVE, |n| {
                let k = (share * n as f64).round() as u64;
                let (l, u) = hard_bounds(k, n, alpha_pass, alpha_fail);
                outcome(l, u, margin) != GateOutcome::Inconclusive
            })
        })
        .flatten();
    HardDivergence {
        pairs,
        hard,
        percent: 100.0 * hard as f64 / pairs.max(1) as f64,
        lower_bound_percent: lower,
        upper_bound_percent: upper,
        margin_percent: margin,
        gating: policy.rate_gated(),
        outcome: out,
        pairs_to_resolve,
    }
}

/// The paired table of two answer strings (`1`, `0`, `-`), item by item;
/// an unanswered item is wrong. The shorter string's length is the items.
pub fn table(baseline: &str, candidate: &str) -> PairedCounts {
    PairedCounts::from_pairs(
        baseline
            .bytes()
            .zip(candidate.bytes())
            .map(|(b, c)| (b == b'1', c == b'1')),
    )
}

fn drop_bounds(t: &PairedCounts, alpha_pass: f64, alpha_fail: f64) -> (f64, f64) {
    let (lower, upper) = drop_bounds_score(t, alpha_fail, alpha_pass);
    (lower * 100.0, upper * 100.0)
}

pub fn task_accuracy(
    name: &str,
    baseline: &str,
    candidate: &str,
    margin_points: f64,
    alpha_pass: f64,
    alpha_fail: f64,
) -> TaskAccuracy {
    let t = table(baseline, candidate);
    let items = t.n();
    let (lower, upper) = drop_bounds(&t, alpha_pass, alpha_fail);
    let out = outcome(lower, upper, margin_points);
    let items_to_resolve = (out == GateOutcome::Inconclusive)
        .then(|| {
            smallest_deciding_n(items.max(1), MAX_RESOLVE, |n| {
                let (l, u) = drop_bounds(&t.scaled(n), alpha_pass, alpha_fail);
                outcome(l, u, margin_points) != GateOutcome::Inconclusive
            })
        })
        .flatten();
    let unanswered = |s: &str| {
        s.bytes()
            .take(items as usize)
            .filter(|&b| b == b'-')
            .count() as u64
    };
    TaskAccuracy {
        name: name.to_string(),
        items,
        baseline_correct: t.baseline_correct(),
        candidate_correct: t.candidate_correct(),
        baseline_unanswered: unanswered(baseline),
        candidate_unanswered: unanswered(candidate),
        table: t,
        drop_points: t.drop() * 100.0,
        lower_bound_points: lower,
        upper_bound_points: upper,
        margin_points,
        outcome: out,
        items_to_resolve,
        baseline_answers: baseline[..(items as usize).min(baseline.len())].to_string(),
        candidate_answers: candidate[..(items as usize).min(candidate.len())].to_string(),
    }
}

#[cfg(test)]
mod tests;
