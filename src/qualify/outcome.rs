//! What a qualification is asked (options) and how it ended (verdict,
//! outcome), and the two ways a step can end it early.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::driver::handle::Handle;
use crate::report::{self, DecisionAction};
use crate::runtime::ledger::Location;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Qualification id; an existing one is resumed. Default: `<plan name>-<UTC time>`.
    pub id: Option<String>,
    /// Parent of the qualification directory; default `out/qualify`.
    pub out_root: Option<PathBuf>,
    /// The ledger; default the plan's, else [`Location::default_location`].
    pub ledger: Option<Location>,
    /// Abandon the (interrupted) qualification and restore the baseline.
    pub rollback: bool,
    /// Adaptive mode even when the plan's `[adaptive]` is not enabled
    /// (interleaved plans only). A resumed qualification keeps the mode it began with.
    pub adaptive: bool,
    pub quiet: bool,
    /// The candidate's image, pinned (`REPOSITORY@sha256:…`), in place of the
    /// plan's: `watch` qualifies the digest a tag resolved to. The plan copy
    /// in the qualification's directory holds the replaced text.
    pub candidate_image: Option<CandidateImage>,
}

/// Where a replaced candidate image came from: the tag and its resolution;
/// and, when a promotion moved the baseline on, the build it left serving.
#[derive(Debug, Clone)]
pub struct CandidateImage {
    pub pinned: String,
    /// What the registry said (`driver::registry::Resolved` as JSON), recorded
    /// in the qualification's `plan` entry.
    pub resolved: serde_json::Value,
    /// The baseline's image in place of the plan's (pinned), and the
    /// qualification whose promotion made it the one serving.
    pub baseline: Option<(String, String)>,
}

/// How a qualification ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Compared and every gate passed.
    Qualified,
    /// Compared; a gate failed.
    NotQualified,
    /// Stopped before a comparison; `failure` says where and why.
    Failed,
    /// Refused at preflight: nothing was changed.
    Refused,
    /// Abandoned with `--rollback`.
    RolledBack,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub id: String,
    pub out_dir: PathBuf,
    pub ledger: Location,
    pub verdict: Verdict,
    pub report: Option<PathBuf>,
    pub failure: Option<String>,
    pub decision: DecisionAction,
    /// What serves now, per the ledger.
    pub serving: Option<(String, Handle)>,
    /// What the measuring cost (interleaved: requests per side, minutes), per the ledger.
    pub spent: Option<String>,
}

impl Outcome {
    /// The report as written, read once: what the exports, the rendering and
    /// the exit code all show. None when the qualification compared nothing.
    pub fn read_report(&self) -> Result<Option<Value>> {
        self.report
            .as_ref()
            .map(|r| report::read_report_value(r).map_err(anyhow::Error::from))
            .transpose()
    }

    /// The process's exit code ([`exit_code_of`]); `report` is
    /// [`Self::read_report`]'s, and one that does not read is an error.
    pub fn exit_code(&self, report: Option<&Value>) -> Result<u8> {
        let typed = match (&self.verdict, report) {
            (Verdict::NotQualified, Some(v)) => Some(
                <report::Report as serde::Deserialize>::deserialize(v)
                    .with_context(|| format!("reading the report of {}", self.id))?,
            ),
            _ => None,
        };
        Ok(exit_code_of(
            &self.verdict,
            self.failure.is_some(),
            typed.as_ref(),
        ))
    }
}

/// The exit code of a qualification that ended with `verdict`: 0 qualified
/// (or rolled back as asked, `failed` false), 1 not qualified, 3 compared
/// but the evidence could not decide (more requests would; `report` says
/// so), 4 every gate that ran passed but the plan skipped the turnover
/// gates, 2 failed or refused.
pub fn exit_code_of(verdict: &Verdict, failed: bool, report: Option<&report::Report>) -> u8 {
    let report_code = report.map(report::exit_code);
    match verdict {
        Verdict::Qualified => 0,
        Verdict::RolledBack if !failed => 0,
        Verdict::NotQualified
            if report_code == Some(report::EXIT_INCONCLUSIVE)
                || report_code == Some(report::EXIT_GATES_NOT_RUN) =>
        {
            report_code.unwrap_or(1)
        }
        Verdict::NotQualified => 1,
        _ => 2,
    }
}

/// How a qualification ended in one word: the verdict, with a "not
/// qualified" whose evidence could not decide (exit code 3) told apart as
/// `inconclusive`, and one whose gates that ran all passed while the plan
/// skipped turnover (exit code 4) as `gates_not_run`.
pub fn outcome_name(verdict: &Verdict, exit_code: u8) -> &'static str {
    match verdict {
        Verdict::NotQualified if exit_code == report::EXIT_INCONCLUSIVE => "inconclusive",
        Verdict::NotQualified if exit_code == report::EXIT_GATES_NOT_RUN => "gates_not_run",
        Verdict::NotQualified => "not_qualified",
        Verdict::Qualified => "qualified",
        Verdict::Failed => "failed",
        Verdict::Refused => "refused",
        Verdict::RolledBack => "rolled_back",
    }
}

/// A pass that could not finish.
#[derive(Debug)]
pub(super) struct PassFailure {
    pub step: &'static str,
    pub runtime: &'static str,
    pub error: anyhow::Error,
}

/// A runtime that stopped while a suite ran against it. Typed, so a run's
/// failure can tell it from a failure of the requests themselves.
#[derive(Debug, thiserror::Error)]
#[error("the {label} runtime stopped during the suite: {why}")]
pub(super) struct RuntimeStopped {
    pub label: String,
    pub why: String,
}

impl RuntimeStopped {
    pub fn new(label: &str, why: String) -> RuntimeStopped {
        RuntimeStopped {
            label: label.to_string(),
            why,
        }
    }

    /// Whether `e` is (or wraps) a stopped runtime.
    pub fn is(e: &anyhow::Error) -> bool {
        e.downcast_ref::<RuntimeStopped>().is_some()
    }
}

/// How a step ends the qualification early.
#[derive(Debug)]
pub(super) enum StepEnd {
    /// It failed, and the ledger says so: finish as failed, and roll back.
    Failed(String),
    /// Its failure could not be recorded (the ledger, or a stop that failed).
    Unrecorded(anyhow::Error),
}

impl From<anyhow::Error> for StepEnd {
    fn from(e: anyhow::Error) -> StepEnd {
        StepEnd::Unrecorded(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(verdict: Verdict) -> Outcome {
        Outcome {
            id: "q".into(),
            out_dir: PathBuf::from("/q"),
            ledger: Location::Sqlite(PathBuf::from("/l.sqlite")),
            verdict,
            report: None,
            failure: None,
            decision: DecisionAction::Pending,
            serving: None,
            spent: None,
        }
    }

    /// The exit code comes from the verdict and, when not qualified, from the
    /// report read once; a report that does not read is an error, never a
    /// quiet "not qualified".
    #[test]
    fn the_exit_code_reads_the_report_it_is_given_and_refuses_one_that_does_not_read() {
        assert_eq!(outcome(Verdict::Qualified).exit_code(None).unwrap(), 0);
        assert_eq!(outcome(Verdict::RolledBack).exit_code(None).unwrap(), 0);
        assert_eq!(outcome(Verdict::Refused).exit_code(None).unwrap(), 2);
        assert_eq!(outcome(Verdict::Failed).exit_code(None).unwrap(), 2);
        let not = outcome(Verdict::NotQualified);
        let seed: Value = serde_json::from_str(include_str!(
            "../../tests/data/runtime-profile-comparison.example.json"
        ))
        .unwrap();
        let typed: report::Report = serde_json::from_value(seed.clone()).unwrap();
        let expected = match report::exit_code(&typed) {
            report::EXIT_INCONCLUSIVE => report::EXIT_INCONCLUSIVE,
            _ => 1,
        };
        assert_eq!(not.exit_code(Some(&seed)).unwrap(), expected);
        let e = not
            .exit_code(Some(&serde_json::json!({"schema": 3})))
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("reading the report of q"),
            "{e:#}"
        );
    }

    /// A qualification whose plan skipped turnover and whose other gates
    /// passed is neither a pass nor a failure: exit 4, named as such.
    #[test]
    fn a_skipped_turnover_exits_4_and_is_named() {
        use report::artifact::TurnoverSkip;
        let (mut b, mut c) = report::fixtures::seed_like();
        for a in [&mut b, &mut c] {
            a.turnover.clear();
            a.turnover_not_run = Some(TurnoverSkip::SkippedByPlan);
        }
        let mut policy = report::Policy::default();
        policy.gate.decide = report::GateRule::Point;
        policy.bootstrap.iterations = 500;
        let r = report::compare(&b, &c, &policy).unwrap();
        let v = r.to_value();
        let code = outcome(Verdict::NotQualified).exit_code(Some(&v)).unwrap();
        assert_eq!(code, report::EXIT_GATES_NOT_RUN, "{}", r.qualification);
        assert_eq!(outcome_name(&Verdict::NotQualified, code), "gates_not_run");
    }
}
