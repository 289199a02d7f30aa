//! The report put together from what was judged: the seed's fields, the
//! gates, and the `statistics` block saying how every number was made.

use crate::artifact::RunArtifact;
use crate::gate::{EVIDENCE_RULE, turnover_ok};
use crate::model::{
    BootstrapSettings, CellComparison, Decision, EvidenceGate, Gate, Gates, OrderedMap, PENDING,
    ProvenancePair, QualityComparison, REPORT_SCHEMA, Report, Statistics, TurnoverGateResult,
    TurnoverRuns,
};
use crate::policy::Policy;
use crate::reference::ReferenceComparison;
use crate::slo::comparison::ATTAINMENT_RULE;
use crate::stats::{self, DriftFloor};

use super::turnover::{TurnoverGates, turnover_report};
use super::{DesignChoice, Family};

pub const VERDICT_RULE: &str = "map the CI of delta_percent to the change in the worse direction [w_lo, w_hi] (latency: as is; throughput: negated) and take the first that holds, T the threshold: regressed if w_lo > T; improved if w_hi < 0; equivalent if -T <= w_lo and w_hi <= T; inconclusive otherwise";

/// Image reference of a run: the pinned image, else the runtime label, else the target.
fn image_ref(a: &RunArtifact) -> String {
    let p = &a.provenance;
    p.image
        .clone()
        .or_else(|| p.runtime.clone())
        .unwrap_or_else(|| p.target.clone())
}

/// What the comparison decided, for the report.
pub(super) struct Judged<'a> {
    pub(super) cells: Vec<(String, CellComparison)>,
    pub(super) performance: Gate,
    pub(super) evidence: EvidenceGate,
    pub(super) turnover: TurnoverGates<'a>,
    pub(super) qualification: String,
    pub(super) qualified: bool,
    pub(super) quality_gate: Option<EvidenceGate>,
    pub(super) warnings: Vec<String>,
    pub(super) reference_comparison: Option<ReferenceComparison>,
    pub(super) quality: Option<QualityComparison>,
}

/// The report of what was judged.
pub(super) fn assemble(
    baseline: &RunArtifact,
    candidate: &RunArtifact,
    policy: &Policy,
    design: &DesignChoice,
    family: &Family,
    judged: Judged,
) -> Report {
    let Judged {
        cells,
        performance,
        evidence,
        turnover,
        qualification,
        qualified,
        quality_gate,
        warnings,
        reference_comparison,
        quality,
    } = judged;
    let mode = policy.turnover.gate;
    let any_slo = cells.iter().any(|(_, c)| c.slo.is_some());
    Report {
        schema: REPORT_SCHEMA.to_string(),
        baseline_image: image_ref(baseline),
        candidate_image: image_ref(candidate),
        cells: OrderedMap(cells),
        performance_gate_passed: performance.passed,
        strict_turnover_gate_passed: turnover.strict.passed,
        qualification,
        promotion: PENDING.to_string(),
        turnover: TurnoverRuns {
            baseline: turnover
                .baseline
                .iter()
                .map(|r| turnover_report(r))
                .collect(),
            candidate: turnover
                .candidate
                .iter()
                .map(|r| turnover_report(r))
                .collect(),
        },
        human_decision: PENDING.to_string(),
        performance_outcome: Some(evidence.outcome),
        turnover_gate: Some(TurnoverGateResult {
            mode,
            passed: turnover_ok(turnover.strict.passed, turnover.non_inferior.passed, mode),
            not_run: turnover.not_run,
        }),
        turnover_comparison: Some(turnover.comparison),
        statistics: Some(statistics(policy, design, family, any_slo)),
        gates: Some(Gates {
            performance,
            performance_evidence: Some(evidence),
            strict_turnover: turnover.strict,
            non_inferior_turnover: turnover.non_inferior,
            quality: quality_gate,
            qualified,
        }),
        policy: Some(policy.summary()),
        provenance: Some(ProvenancePair {
            baseline: baseline.provenance.clone(),
            candidate: candidate.provenance.clone(),
            inputs: Vec::new(),
        }),
        decision: Some(Decision::pending()),
        warnings,
        reference_comparison,
        quality,
    }
}

/// The report's `statistics` block: how every number in it was made.
fn statistics(
    policy: &Policy,
    design: &DesignChoice,
    family: &Family,
    any_slo: bool,
) -> Statistics {
    let bs = &policy.bootstrap;
    Statistics {
        percentile_method: stats::PERCENTILE_METHOD.to_string(),
        delta_percent: "(candidate - baseline) / baseline * 100, signed".to_string(),
        bootstrap: BootstrapSettings {
            iterations: bs.iterations,
            confidence: bs.confidence,
            seed: bs.seed,
        },
        bootstrap_statistic: format!(
            "percentile bootstrap CI of delta_percent of each metric's quantile; {}",
            design.resampling.describe()
        ),
        verdict_rule: VERDICT_RULE.to_string(),
        regression_flag_rule: "no_more_than_<T>_percent_regression is true when the point delta_percent in the worse direction (latency: as is; throughput: negated) is at most T; false when delta_percent is undefined".to_string(),
        turnover_test: "Fisher's exact test on failed/requests of each candidate turnover run, and of the candidate's runs pooled, against the baseline's runs of the same name pooled; p_candidate_worse is one-sided (candidate failure rate higher)".to_string(),
        turnover_interval: format!(
            "Clopper-Pearson exact binomial interval of failed/requests at confidence {}",
            policy.turnover.confidence
        ),
        gate_decides: Some(policy.gate.decide.as_str().to_string()),
        evidence_rule: Some(EVIDENCE_RULE.to_string()),
        family_wise: Some(family.look.family_wise(
            policy.gate.alpha,
            family.pairs,
            &design.method,
            (design.alpha_pass, design.alpha_fail),
        )),
        design: Some(design.method.design(design.schedule, design.resampling)),
        turnover_margin: Some(policy.turnover.margin),
        drift_floor: Some(DriftFloor {
            pass_sd_percent: policy.gate.drift_sd_percent,
            source: policy.gate.drift_source.clone(),
        }),
        samples_kept: Some(true),
        attainment_rule: any_slo.then(|| ATTAINMENT_RULE.to_string()),
    }
}
