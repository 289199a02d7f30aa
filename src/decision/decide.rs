//! `infergate decide REPORT --promote | --retain-baseline --note "…"`: record
//! the human decision (who, when, why) in the report's `decision`,
//! `human_decision` and `promotion` and in the ledger, then carry it out.
//!
//! Retain-baseline: the exact baseline (image digest / command sha256 /
//! engine profile, verified again) is restored if it is not serving, and
//! readmitted. Promote: the serving baseline is retired, the candidate started
//! and readmitted; if the candidate fails to start or to be readmitted it is
//! not admitted (its logs are kept) and the baseline is restored and
//! readmitted instead. Stop-then-start: both may want the same port.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::config::plan::{BASELINE, CANDIDATE};
use crate::driver::container::Docker;
use crate::driver::handle::Handle;
use crate::report::{self, Decision, DecisionAction, Report};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Ledger, Status};
use crate::runtime::lifecycle;
use crate::runtime::notify::{self, Event};
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

/// What carrying out a decision did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub carried_out: bool,
    pub promotion: String,
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
    let entries = ledger.entries(&qf.id)?;
    if entries.is_empty() {
        return Err(lifecycle::unknown_qualification(&qf.id, &ledger));
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
    let applied = decide_and_apply(
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

/// Record `action` in `report` (as written at `report_path`) and the
/// ledger, carry it out, and record what was done. Shared with `qualify`
/// for decisions a plan's policy makes.
pub async fn decide_and_apply(
    ctx: &Ctx<'_>,
    mut report: Report,
    report_path: &Path,
    action: DecisionAction,
    who: &str,
    note: &str,
) -> Result<Applied> {
    let context = decision_context(&report, action);
    let when = crate::util::now_rfc3339();
    ctx.log(
        "decision",
        None,
        Status::Ok,
        json!({"action": action, "who": who, "when": when, "note": note, "report": report_path}),
    )?;
    report.record_decision(Decision {
        action,
        who: Some(who.to_string()),
        when: Some(when),
        note: Some(note.to_string()),
    });
    // The decision is on record before anything changes, so an interruption keeps it.
    report.set_promotion(format!(
        "{who} selected {}; being carried out",
        phrase(action)
    ));
    report::write_report_atomic(report_path, &report)?;
    ctx.ledger
        .record_report(ctx.qualification, report_path, "decide")?;
    ctx.say(&format!("decision: {} by {who}: {note}", action.as_str()));

    let (carried_out, what) = carry_out(ctx, action).await?;
    let promotion = format!(
        "{who} selected {} after {}{context}; {what}",
        phrase(action),
        report::gate::summary(&report)
    );
    report.set_promotion(promotion.clone());
    report::write_report_atomic(report_path, &report)?;
    ctx.ledger
        .record_report(ctx.qualification, report_path, "decide")?;
    ctx.log(
        "promotion",
        None,
        if carried_out {
            Status::Ok
        } else {
            Status::Failed
        },
        json!({"action": action, "promotion": promotion}),
    )?;
    if !ctx.plan.hooks.on_decision.is_empty() {
        let fields = json!({
            "action": action,
            "who": who,
            "note": note,
            "carried_out": carried_out,
            "promotion": promotion,
        });
        let bytes = std::fs::read(report_path).ok();
        let report = bytes.as_deref().map(|b| (report_path, b));
        let summary = notify::summary(ctx, Event::Decision, report, fields);
        notify::notify(ctx, Event::Decision, &summary).await?;
    }
    Ok(Applied {
        carried_out,
        promotion,
    })
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

/// What a decision overrides or replaces, for its promotion text: the
/// gates when a failed qualification is promoted, the earlier decision
/// when there is one.
fn decision_context(report: &Report, action: DecisionAction) -> String {
    let mut out = String::new();
    if action == DecisionAction::Promote && !report::gate::qualified(report) {
        out.push_str(", OVERRIDING the failed qualification");
    }
    if let Some(d) = &report.decision
        && d.action != DecisionAction::Pending
    {
        out.push_str(&format!(
            ", replacing the decision {} by {} at {}",
            d.action.as_str(),
            d.who.as_deref().unwrap_or("unknown"),
            d.when.as_deref().unwrap_or("an unknown time")
        ));
    }
    out
}

fn phrase(action: DecisionAction) -> &'static str {
    match action {
        DecisionAction::Promote => "promotion",
        DecisionAction::RetainBaseline => "retain-baseline/no-promotion",
        DecisionAction::Pending => "no decision",
    }
}

/// Put the decided runtime in service. Returns (carried out, what was done).
async fn carry_out(ctx: &Ctx<'_>, action: DecisionAction) -> Result<(bool, String)> {
    let serving = lifecycle::serving(&ctx.ledger.entries(ctx.qualification)?);
    match action {
        DecisionAction::Pending => Ok((true, "nothing to do".into())),
        DecisionAction::RetainBaseline => {
            if let Some((label, h)) = &serving {
                if label == BASELINE && h.down(&ctx.docker).await.is_none() {
                    // Already serving: verified (process identity, container image ID) by
                    // `down`, readmitted again so the router hears of it.
                    let o = lifecycle::readmit(ctx, BASELINE, h).await?;
                    if o.admitted {
                        return Ok((
                            true,
                            format!("exact baseline verified and readmitted ({})", h.describe()),
                        ));
                    }
                    lifecycle::retire(ctx, BASELINE, h, "failed readmission").await?;
                } else {
                    lifecycle::retire(ctx, label, h, "retain-baseline").await?;
                }
            }
            Ok(
                match lifecycle::restore(ctx, BASELINE, "retain-baseline").await {
                    Ok(h) => (
                        true,
                        format!("exact baseline restored and readmitted ({})", h.describe()),
                    ),
                    Err(e) => (
                        false,
                        format!("baseline restore FAILED, nothing is serving: {e:#}"),
                    ),
                },
            )
        }
        DecisionAction::Promote => {
            if let Some((label, h)) = &serving {
                if label == CANDIDATE && h.down(&ctx.docker).await.is_none() {
                    let o = lifecycle::readmit(ctx, CANDIDATE, h).await?;
                    if o.admitted {
                        return Ok((
                            true,
                            format!("candidate verified and readmitted ({})", h.describe()),
                        ));
                    }
                }
                lifecycle::retire(ctx, label, h, "promoting the candidate").await?;
            }
            let why = match promote_candidate(ctx).await? {
                Ok(h) => {
                    return Ok((
                        true,
                        format!("candidate started and readmitted ({})", h.describe()),
                    ));
                }
                Err(why) => why,
            };
            ctx.log(
                "rollback",
                None,
                Status::Started,
                json!({"reason": format!("promotion failed: {why}")}),
            )?;
            Ok(
                match lifecycle::restore(ctx, BASELINE, "promotion failed").await {
                    Ok(h) => {
                        ctx.log(
                            "rollback",
                            None,
                            Status::Ok,
                            json!({"serving": h.to_value()}),
                        )?;
                        (
                            false,
                            format!(
                                "promotion FAILED ({why}); candidate not admitted, its logs kept; exact baseline restored and readmitted ({})",
                                h.describe()
                            ),
                        )
                    }
                    Err(e) => {
                        ctx.log(
                            "rollback",
                            None,
                            Status::Failed,
                            json!({"error": format!("{e:#}")}),
                        )?;
                        (
                            false,
                            format!(
                                "promotion FAILED ({why}); baseline restore ALSO FAILED, nothing is serving: {e:#}"
                            ),
                        )
                    }
                },
            )
        }
    }
}

/// Start and readmit the candidate. Inner Err: why it was not admitted (it is stopped).
async fn promote_candidate(ctx: &Ctx<'_>) -> Result<Result<Handle, String>> {
    let rt = &ctx.plan.candidate;
    if let Err(e) = lifecycle::presence(ctx, rt).await {
        ctx.log(
            "promote",
            Some(CANDIDATE),
            Status::Failed,
            json!({"error": format!("{e:#}")}),
        )?;
        return Ok(Err(format!("candidate not present: {e:#}")));
    }
    let started = match lifecycle::start(ctx, rt, "promote").await {
        Ok(s) => s,
        Err(e) => return Ok(Err(format!("candidate failed to start: {e:#}"))),
    };
    let o = lifecycle::readmit(ctx, CANDIDATE, &started.handle).await?;
    if o.admitted {
        return Ok(Ok(started.handle));
    }
    let _ = lifecycle::stop(ctx, CANDIDATE, &started.handle, "failed readmission").await;
    let log = started
        .handle
        .log()
        .map(|l| format!(", log {}", l.display()))
        .unwrap_or_default();
    Ok(Err(format!(
        "candidate failed readmission: {}{log}",
        o.failure().unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Report {
        let text = include_str!("../../tests/data/runtime-profile-comparison.example.json");
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_failed_qualification_is_promoted_only_by_force_and_says_what_it_overrides() {
        let mut r = seed();
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
        assert_eq!(
            decision_context(&r, DecisionAction::Promote),
            ", OVERRIDING the failed qualification"
        );
        assert_eq!(decision_context(&r, DecisionAction::RetainBaseline), "");

        r.record_decision(Decision {
            action: DecisionAction::RetainBaseline,
            who: Some("alice".into()),
            when: Some("2026-12-06T07:00:00Z".into()),
            note: Some("slow".into()),
        });
        assert_eq!(
            decision_context(&r, DecisionAction::Promote),
            ", OVERRIDING the failed qualification, replacing the decision retain-baseline by alice at 2026-12-06T07:00:00Z"
        );
    }
}
