//! What a qualification is asked (options) and how it ended (verdict,
//! outcome), and the two ways a step can end it early.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::driver::handle::Handle;
use crate::report::DecisionAction;
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
