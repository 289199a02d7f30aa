//! infergate: qualify an LLM serving runtime against the one in service.
//!
//! Data flows one way, and the modules follow it:
//!
//! 1. [`config`]: the plan, suite and policy files, read and checked.
//! 2. [`driver`]: start, stop and health-check a runtime (external URL,
//!    local process, container) and the bundled reference engine.
//! 3. [`measure`]: discover the target, build each cell's workload, drive
//!    the load, stream through the client, journal every request, aggregate
//!    a run artifact; turnover (churn and canary checks) is measured here too.
//! 4. [`report`] (the `infergate-report` crate): artifacts in; compare, gate,
//!    verify and render the `runtime-profile-comparison/v1` report.
//! 5. [`runtime`]: a runtime started, watched, stopped, restored and
//!    readmitted through its driver, and the ledger every step is recorded in.
//! 6. [`qualify`]: the whole qualification as named steps over the above.
//! 7. [`decision`]: the human's decision on a report (`decide`), and where
//!    each qualification stands (`status`).
//! 8. [`verify_runs`]: `verify --runs`, a report made again from the
//!    journals and run artifacts it came from.
//!
//! Beside them, [`capture`]: `infergate capture`, a reverse proxy that
//! records traffic as a trace the `trace` workload replays; nothing above
//! imports it.
//!
//! [`util`] holds the few helpers every stage shares; [`stats`] and
//! [`artifact`] are re-exported from the report crate, where they live.

pub mod capture;
pub mod config;
pub mod decision;
pub mod driver;
pub mod history;
pub mod measure;
pub mod qualify;
pub mod runtime;
pub mod util;
pub mod verify_runs;
pub mod watch;

#[cfg(feature = "fuzzing")]
pub mod fuzzing;

pub use infergate_report::{self as report, artifact, atomic, server_metrics, slo, stats};
