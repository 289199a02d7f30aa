//! `infergate decide REPORT --promote | --retain-baseline --note "…"`: the
//! human decision (who, when, why) on a finished qualification's report,
//! taken only on the report the ledger last recorded and only when it
//! verifies against its runs; promoting a failed qualification needs
//! `--force`. [`crate::runtime::promotion`] records it in the report and the
//! ledger and carries it out.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::driver::container::Docker;
use crate::driver::handle::Handle;
use crate::report::{self, DecisionAction, Report};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Ledger, Status};
use crate::runtime::lifecycle;
use crate::runtime::promotion;
use crate::runtime::state::QualificationFile;

#[derive(Debug, Clone)]
pub struct Options {
    pub report: PathBuf,
    /// Promote or RetainBaseline.
    pub action: DecisionAction,
    pub note: String,
    /// Default: $USER.
    pub who: Option<String>,
    /// Default: the ledger the qualification was recorded in.
    pub ledger: Option<crate::runtime::ledger::Location>,
    /// Promote a qualification whose gates failed (the promotion says what
    /// it overrides).
    pub force: bool,
    /// Checks the report against the qualification's own runs (the report
    /// as JSON, its directory): `infergate::verify_runs::check_qualification`.
    /// Handed in, since that check makes the runs' report again with
    /// `qualify`'s pooling, a stage this one must not import.
    pub verify: VerifyRuns,
    pub quiet: bool,
}

/// The disagreements between a report and the runs in its directory.
pub type VerifyRuns = fn(&serde_json::Value, &Path) -> Result<crate::report::Verification>;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub qualification: String,
    /// The decision was carried out (false: e.g. the candidate failed readmission).
    pub carried_out: bool,
    /// The report's `promotion` text: what was done.
    pub promotion: String,
    pub serving: Option<(String, Handle)>,
}

pub async fn run(opts: &Options) -> Result<Outcome> {
    if opts.action == DecisionAction::Pending {
        bail!("decide: choose --promote or --retain-baseline");
    }
    if opts.note.trim().is_empty() {
        bail!("decide: --note must say why");
    }
    // The note is prose, escaped where shown; who decided is a name.
    if let Some(problem) = opts.who.as_deref().and_then(report::text::name_problem) {
        bail!("decide: --who: {problem}");
    }
    let out_dir = match opts.report.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let qf = QualificationFile::read(&out_dir).with_context(|| {
        format!(
            "{} was not written by `infergate qualify` (no {} beside it)",
            opts.report.display(),
            crate::runtime::state::QUALIFICATION_FILE
        )
    })?;
    let plan = qf.load_plan(&out_dir)?;
    let ledger_path = opts.ledger.clone().unwrap_or_else(|| qf.ledger.clone());
    let ledger = Ledger::connect_existing(&ledger_path)?;
    let _lock = ledger.lock(&qf.id, &out_dir)?;
    let (entries, chain) = ledger.checked_entries(&qf.id)?;
    if entries.is_empty() {
        return Err(lifecycle::unknown_qualification(&qf.id, &ledger));
    }
    // A decision acts on the rows: never on rows changed outside infergate.
    if let Some(first) = chain.broken.first() {
        bail!(
            "the ledger {} was changed outside infergate: {} row(s) of qualification {} do not verify, the first: {first}. `infergate ledger verify` names each. Nothing was recorded",
            ledger.location(),
            chain.broken.len(),
            qf.id
        );
    }
    if !entries.iter().any(|e| e.step == "done") {
        bail!(
            "qualification {} has not finished (interrupted or still running): resume it with `infergate qualify {} --id {}` or roll it back with --rollback",
            qf.id,
            qf.plan.display(),
            qf.id
        );
    }
    if !entries
        .iter()
        .any(|e| e.step == "report" && e.status == Status::Ok)
    {
        bail!(
            "qualification {} wrote no report: there is nothing to decide",
            qf.id
        );
    }
    let report = checked_report(opts, &out_dir, &qf.id, &ledger, &entries)?;
    refuse_unforced_override(&qf.id, &report, opts.action, opts.force)?;
    let who = match &opts.who {
        Some(w) if !w.trim().is_empty() => w.trim().to_string(),
        _ => std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "unknown user".into()),
    };
    let ctx = Ctx {
        plan: &plan,
        qualification: &qf.id,
        ledger: &ledger,
        out_dir: &out_dir,
        docker: Docker::new(&plan.docker.socket),
        quiet: opts.quiet,
    };
    let applied = promotion::decide_and_apply(
        &ctx,
        report,
        &opts.report,
        opts.action,
        &who,
        opts.note.trim(),
    )
    .await?;
    Ok(Outcome {
        qualification: qf.id.clone(),
        carried_out: applied.carried_out,
        promotion: applied.promotion,
        serving: lifecycle::serving(&ledger.entries(&qf.id)?),
    })
}

/// The report at `path`, refused unless its bytes are the last report the
/// ledger recorded for `id` and `verify` (with the qualification's own run
/// directories) finds nothing that disagrees: a decision acts on what was
/// measured, never on an edited copy.
fn checked_report(
    opts: &Options,
    out_dir: &Path,
    id: &str,
    ledger: &Ledger,
    entries: &[crate::runtime::ledger::Entry],
) -> Result<Report> {
    let path = opts.report.as_path();
    let bytes = report::read_regular(path)
        .with_context(|| format!("cannot read the report {}", path.display()))?;
    let found = report::digest::sha256_hex(&bytes);
    match crate::runtime::ledger::latest_report(entries) {
        None => bail!(
            "the ledger {} records no digest of qualification {id}'s report, so {} cannot be checked against it: qualify again to decide. Nothing was recorded",
            ledger.location(),
            path.display()
        ),
        Some((recorded, at)) if recorded != found => bail!(
            "{} is not the report infergate last wrote for qualification {id}: its sha256 is {found}, the ledger {} records {recorded}{}; it was edited or replaced since. Nothing was recorded",
            path.display(),
            ledger.location(),
            at.map(|p| format!(" (written to {p})")).unwrap_or_default()
        ),
        Some(_) => {}
    }
    let value = report::parse_report_value(&bytes, &path.display().to_string())?;
    let checked = (opts.verify)(&value, out_dir)?;
    if !checked.is_clean() {
        let list: Vec<String> = checked
            .disagreements
            .iter()
            .map(ToString::to_string)
            .collect();
        bail!(
            "{} does not verify ({} disagreement(s)): {}. Nothing was recorded",
            path.display(),
            list.len(),
            list.join("; ")
        );
    }
    serde_json::from_value(value)
        .with_context(|| format!("{}: not a report infergate can update", path.display()))
}

/// Promoting a qualification that failed its gates needs `--force`.
fn refuse_unforced_override(
    id: &str,
    report: &Report,
    action: DecisionAction,
    force: bool,
) -> Result<()> {
    if action == DecisionAction::Promote && !report::gate::qualified(report) && !force {
        bail!(
            "qualification {id} did not qualify ({}): promoting it overrides its gates; pass --force to promote anyway. Nothing was recorded",
            report::gate::summary(report)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Report {
        let text = include_str!("../../tests/data/runtime-profile-comparison.example.json");
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_failed_qualification_is_promoted_only_by_force() {
        let r = seed();
        assert!(
            !report::gate::qualified(&r),
            "the seed failed strict turnover"
        );
        let e = refuse_unforced_override("q", &r, DecisionAction::Promote, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("did not qualify") && e.contains("--force"),
            "{e}"
        );
        assert!(e.contains("failed strict turnover"), "{e}");
        refuse_unforced_override("q", &r, DecisionAction::Promote, true).unwrap();
        refuse_unforced_override("q", &r, DecisionAction::RetainBaseline, false).unwrap();
    }
}
