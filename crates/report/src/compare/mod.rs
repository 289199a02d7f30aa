//! `compare`: two run artifacts and a policy in, a report out.
//!
//! Rules (also written into the report's `statistics` and `gates` blocks):
//! - The runs must be comparable: same model, same suite (name; sha256 when
//!   both have it), the same cell names with equal shapes, and turnover runs
//!   of one name with the same contract, concurrency and request count.
//!   Otherwise `compare` refuses and lists every difference.
//! - Cells are never pooled; each gating metric is the policy's quantile of
//!   that cell's per-request samples on each side.
//! - `performance_gate_passed`: at least one cell, every cell eligible on both
//!   sides, and every gating metric of every cell present on both sides with
//!   its regression flag true (point delta within threshold).
//! - `strict_turnover_gate_passed`: see [`crate::gate::STRICT_RULE`]. When
//!   the candidate's run skipped its turnover as asked
//!   (`RunArtifact::turnover_not_run`), both turnover gates did not run:
//!   `turnover_gate.not_run` says who skipped them, the flag is false, and
//!   the qualification says what was not checked
//!   ([`crate::gate::with_turnover_not_run`]).
//! - `qualification`: see [`qualification`].
//! - `median_prompt_tokens`: the baseline run's median prompt tokens (the
//!   workload as measured on the runtime in service), the candidate's when the
//!   baseline has none; both sides are kept as added fields.
//!
//! Here the entry points and what decides the report as a whole (the
//! design's levels, the qualification, the warnings); whether two runs
//! compare at all in `comparable`, one cell in `cell`, one metric's
//! evidence in `metric`, the turnover gates in `turnover`, and the report
//! put together in `assemble`. A cell's SLO attainment is `crate::slo`'s.

use thiserror::Error;

use crate::artifact::{RUN_SCHEMA, RunArtifact, Schedule};
use crate::design::{self, Look, Method};
use crate::gate::{self, evidence_qualification, qualification};
use crate::model::{Report, Side};
use crate::policy::{GateRule, Policy};
use crate::quality;
use crate::reference::{self, ReferenceComparison};
use crate::slo::comparison::slo_of;
use crate::stats::{DriftFloor, GateOutcome, Resampling};

mod assemble;
mod capacity;
mod cell;
mod comparable;
mod metric;
mod turnover;

pub use comparable::same_run;
pub(crate) use metric::{bootstrap_units, clustered};

use assemble::{Judged, assemble};
use cell::{ComparedCells, compare_cells};
use comparable::check_comparable;
use turnover::TurnoverGates;

#[derive(Debug, Error)]
pub enum CompareError {
    #[error("{side} run artifact has schema {found:?}, expected {RUN_SCHEMA:?}")]
    Schema { side: Side, found: String },
    #[error("baseline and candidate runs are not comparable:\n  - {}", .differences.join("\n  - "))]
    Incomparable { differences: Vec<String> },
    #[error("{side} run artifact contradicts itself:\n  - {}", .problems.join("\n  - "))]
    Inconsistent { side: Side, problems: Vec<String> },
    #[error("{side} cell `{cell}`: sample `{sample}` has a non-finite value at position {index}")]
    NonFiniteSample {
        side: Side,
        cell: String,
        sample: String,
        index: usize,
    },
}

/// The report of `candidate` against `baseline` under `policy`, as a
/// fixed-size run's one look.
pub fn compare(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
) -> Result<Report, CompareError> {
    compare_with_look(baseline, candidate, policy, None)
}

/// [`compare`] at `look` of a sequential run (None: a fixed-size run's one
/// look, spending by the policy's `gate.spending`).
pub fn compare_with_look(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    look: Option<&Look>,
) -> Result<Report, CompareError> {
    compare_by(baseline, candidate, policy, &Method::default(), look)
}

/// [`compare_with_look`] computed by `method`: the one a report records,
/// when `verify` makes it again.
pub fn compare_by(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    method: &Method,
    look: Option<&Look>,
) -> Result<Report, CompareError> {
    compare_given(
        baseline,
        candidate,
        policy,
        (method, look),
        Given::default(),
    )
}

/// What `verify` gives `compare` instead of what the runs would hold: a
/// report keeps neither reference texts nor embedding vectors, only what
/// was judged from them.
#[derive(Default)]
pub(crate) struct Given<'a> {
    pub references: Option<&'a ReferenceComparison>,
    pub embeddings: Option<Vec<crate::embedding::EmbeddingPair>>,
}

/// `compare`, with the cross-runtime reference comparison and the
/// embeddings' cosines given instead of made from the runs' texts and
/// vectors: `verify` recomputes a report, which keeps neither.
pub(crate) fn compare_given(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    (method, look): (&Method, Option<&Look>),
    given: Given,
) -> Result<Report, CompareError> {
    check_comparable(baseline, candidate)?;
    let (schedule, resampling) = design_of(baseline, candidate);
    // The candidate's reference texts held against the baseline's: changed
    // greedy output the quality policy does not pass fails those requests,
    // and a warning says where.
    let (c_turnover, reference_notes, reference_comparison) =
        reference::against_baseline(&baseline.turnover, &candidate.turnover, &policy.quality);
    let quality_refs = given.references.or(reference_comparison.as_ref());
    let embeddings = given
        .embeddings
        .unwrap_or_else(|| crate::embedding::pairs(&baseline.embeddings, &candidate.embeddings));
    let tasks = quality::task_pairs(&baseline.turnover, &candidate.turnover);
    let features = quality::feature_pairs(&baseline.turnover, &candidate.turnover);
    let quality_pairs =
        quality::gating_parts(tasks.len() + features.len(), quality_refs, &policy.quality);
    let fixed = Look::fixed(policy.gate.spending);
    let family = Family {
        pairs: (gating_pairs(baseline, policy, quality_pairs), quality_pairs),
        look: look.unwrap_or(&fixed),
    };
    let design = design_choice(schedule, resampling, &family, policy, method);
    let cells = compare_cells(baseline, candidate, &design, policy)?;
    let turnover = TurnoverGates::of(
        &baseline.turnover,
        &c_turnover,
        candidate.turnover_not_run,
        policy,
    );
    let quality = quality::judge(
        quality_refs,
        &tasks,
        &features,
        &embeddings,
        &policy.quality,
        design.alpha_pass,
        design.alpha_fail,
    );
    let quality_gate = quality.as_ref().and_then(|(_, g)| g.clone());
    let (qualification, qualified) = decide(
        policy,
        &cells,
        &turnover,
        quality_gate.as_ref().map(|g| g.outcome),
    );
    let warnings = warnings(
        cells.warnings,
        reference_notes,
        baseline,
        candidate,
        schedule,
        policy,
    );
    let judged = Judged {
        cells: cells.cells,
        performance: cells.performance,
        evidence: cells.evidence,
        turnover,
        qualification,
        qualified,
        quality_gate,
        warnings,
        reference_comparison,
        quality: quality.map(|(q, _)| q),
    };
    Ok(assemble(
        baseline, candidate, policy, &design, &family, judged,
    ))
}

/// How one comparison resamples, and what it assumes about drift.
#[derive(Debug, Clone)]
struct DesignChoice {
    pub schedule: Schedule,
    pub resampling: Resampling,
    pub method: Method,
    /// Levels of the pass and fail bounds.
    pub alpha_pass: f64,
    pub alpha_fail: f64,
    /// The one-look levels (pass, fail) the fixed-n oracle is held to.
    pub oracle_levels: (f64, f64),
    pub drift: DriftFloor,
}

/// The design both artifacts declare: interleaved on both sides → paired
/// blocks; alternating passes → clustered; else one pass per side.
fn design_of(b: &RunArtifact, c: &RunArtifact) -> (Schedule, Resampling) {
    let sb = b.schedule.unwrap_or(Schedule::Single);
    let sc = c.schedule.unwrap_or(Schedule::Single);
    match (sb, sc) {
        (Schedule::Interleaved, Schedule::Interleaved) => {
            (Schedule::Interleaved, Resampling::Paired)
        }
        (Schedule::Single, _) | (_, Schedule::Single) => {
            (Schedule::Single, Resampling::Independent)
        }
        _ => (Schedule::AlternatingPasses, Resampling::Clustered),
    }
}

/// The gating pairs the gate's alpha is spread over (all of them, and the
/// quality parts among them), and which look of the sequential design
/// this comparison is.
struct Family<'a> {
    pairs: (usize, usize),
    look: &'a Look,
}

/// Every (cell, policy metric), each cell the policy gives SLOs (its
/// attainment), each capacity cell (its ratio) in place of its metrics and
/// SLO, and each gating quality part.
fn gating_pairs(baseline: &RunArtifact, policy: &Policy, quality_pairs: usize) -> usize {
    let (capacity, other): (Vec<_>, Vec<_>) =
        baseline.cells.iter().partition(|c| c.capacity.is_some());
    let slo_cells = other
        .iter()
        .filter(|c| slo_of(policy, c).is_some_and(|s| s.gating))
        .count();
    other.len() * policy.metrics.len() + slo_cells + capacity.len() + quality_pairs
}

/// The design and the levels of this look's pass and fail bounds.
fn design_choice(
    schedule: Schedule,
    resampling: Resampling,
    family: &Family,
    policy: &Policy,
    method: &Method,
) -> DesignChoice {
    let pairs = family.pairs.0;
    let (alpha_pass, alpha_fail) = family.look.levels(policy.gate.alpha, pairs);
    DesignChoice {
        oracle_levels: design::fixed_levels(policy.gate.alpha, pairs),
        schedule,
        resampling,
        method: *method,
        alpha_pass,
        alpha_fail,
        drift: DriftFloor {
            pass_sd_percent: policy.gate.drift_sd_percent,
            source: policy.gate.drift_source.clone(),
        },
    }
}

/// The qualification and whether it qualifies: performance by the policy's
/// rule, turnover by its mode, then the quality gate over both; turnover
/// gates that did not run count as passed there, and the note that they
/// did not run caps the verdict.
fn decide(
    policy: &Policy,
    cells: &ComparedCells,
    turnover: &TurnoverGates,
    quality: Option<GateOutcome>,
) -> (String, bool) {
    let (strict, non_inferior) = match turnover.not_run {
        Some(_) => (true, true),
        None => (turnover.strict.passed, turnover.non_inferior.passed),
    };
    let mode = policy.turnover.gate;
    let (qual, qualified) = match policy.gate.decide {
        GateRule::Point => qualification(cells.performance.passed, strict, non_inferior, mode),
        GateRule::Evidence => {
            evidence_qualification(cells.evidence.outcome, strict, non_inferior, mode)
        }
    };
    let (qual, qualified) = gate::with_quality(qual, qualified, quality);
    gate::with_turnover_not_run(qual, qualified, turnover.not_run)
}

/// The cells' warnings, then the reference texts' notes; a run given twice
/// first, and a one-pass design's drift floor last.
fn warnings(
    mut warnings: Vec<String>,
    reference_notes: Vec<String>,
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    schedule: Schedule,
    policy: &Policy,
) -> Vec<String> {
    warnings.extend(reference_notes);
    if let Some(why) = same_run(baseline, candidate) {
        warnings.insert(
            0,
            format!(
                "baseline and candidate are the same run ({why}): every difference is zero by construction, so this report compares nothing"
            ),
        );
    }
    if schedule == Schedule::Single {
        warnings.push(format!(
            "one pass per side at different times: the drift between the runs is not in the data, so the evidence bounds include a drift floor of {}% per pass ({}); interleave the runtimes (`infergate qualify` with schedule = \"interleaved\") to decide small effects",
            policy.gate.drift_sd_percent, policy.gate.drift_source
        ));
    }
    warnings.extend(unmatched_policy_names(baseline, candidate, policy));
    warnings
}

/// Policy entries naming a cell or an embeddings workload the runs do not
/// both have: most likely a typo, which would leave the defaults judging
/// it. (Both runs have the same cells, or they were refused.)
fn unmatched_policy_names(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
) -> Vec<String> {
    let cells = policy
        .slo
        .iter()
        .filter_map(|s| s.cell.as_deref())
        .filter(|c| !baseline.cells.iter().any(|b| b.name == *c))
        .map(|c| {
            format!("policy: the SLO for cell `{c}` names no cell of these runs: it judged nothing")
        });
    let workloads = policy
        .quality
        .embedding_floors
        .iter()
        .filter(|f| {
            let ran = |a: &RunArtifact| a.embeddings.iter().any(|e| e.name == f.workload);
            !(ran(baseline) && ran(candidate))
        })
        .map(|f| {
            format!(
                "policy: the embedding floors for workload `{}` name no embeddings workload both runs have: they judged nothing",
                f.workload
            )
        });
    cells.chain(workloads).collect()
}
