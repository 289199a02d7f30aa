//! The end of a qualification: the plan's decision policy applied (or the
//! decision left pending and the baseline put back), a rollback when a step
//! failed, and the `done` entry.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{Value, json};

use super::outcome::{Outcome, Verdict, exit_code_of, outcome_name};
use super::progress::spent_in;
use crate::config::plan::{After, BASELINE, Driver, OnOutcome};
use crate::report::{self, DecisionAction, Report};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Entry, Location, Status};
use crate::runtime::lifecycle;
use crate::runtime::notify::{self, Event};
use crate::runtime::promotion;
use crate::runtime::state::decision_in;

/// Apply the plan's decision policy for this outcome, or leave the decision
/// pending and put the baseline back (or nothing, with `after = "stop"`).
pub(super) async fn decide_or_restore(
    ctx: &Ctx<'_>,
    plan_path: &Path,
    ledger_path: &Location,
    mut report: Report,
    report_path: PathBuf,
) -> Result<Outcome> {
    let plan = ctx.plan;
    let qualified = report::gate::qualified(&report);
    let verdict = if qualified {
        Verdict::Qualified
    } else {
        Verdict::NotQualified
    };
    let policy = if qualified {
        plan.decision.on_pass
    } else {
        plan.decision.on_fail
    };
    let action = match policy {
        OnOutcome::Pending => None,
        OnOutcome::Promote => Some(DecisionAction::Promote),
        OnOutcome::RetainBaseline => Some(DecisionAction::RetainBaseline),
    };
    if let Some(action) = action {
        let who = format!("plan policy ({})", plan_path.display());
        let note = format!(
            "decision.{} = {}",
            if qualified { "on_pass" } else { "on_fail" },
            action.as_str()
        );
        let applied =
            promotion::decide_and_apply(ctx, report, &report_path, action, &who, &note).await?;
        let failure = (!applied.carried_out).then(|| applied.promotion.clone());
        return finish(ctx, ledger_path, verdict, Some(report_path), failure, false).await;
    }
    let promotion = match plan.after {
        After::RestoreBaseline => {
            match lifecycle::restore(ctx, BASELINE, "qualification finished; decision pending")
                .await
            {
                Ok(h) => format!(
                    "pending; baseline restored and readmitted ({})",
                    h.describe()
                ),
                Err(e) => format!("pending; baseline restore FAILED: {e:#}"),
            }
        }
        After::Stop => "pending; nothing left running (after = \"stop\")".to_string(),
    };
    report.set_promotion(promotion);
    report::write_report_atomic(&report_path, &report)?;
    ctx.ledger
        .record_report(ctx.qualification, &report_path, "qualify")?;
    finish(ctx, ledger_path, verdict, Some(report_path), None, false).await
}

/// Record the end of the qualification; with `restore`, first put the
/// baseline back in service (rollback).
pub(super) async fn finish(
    ctx: &Ctx<'_>,
    ledger_path: &Location,
    verdict: Verdict,
    report: Option<PathBuf>,
    failure: Option<String>,
    restore: bool,
) -> Result<Outcome> {
    let mut failure = failure;
    if let Some(f) = &failure {
        ctx.say(&format!("qualification {}: {f}", ctx.qualification));
    }
    if restore && ctx.plan.after == After::RestoreBaseline {
        ctx.log(
            "rollback",
            None,
            Status::Started,
            json!({"reason": failure}),
        )?;
        // A baseline already serving (an interrupted run that got that far) stays.
        let current = lifecycle::serving(&ctx.ledger.entries(ctx.qualification)?);
        let already = match &current {
            Some((label, h)) if label == BASELINE => h.down(&ctx.docker).await.is_none(),
            _ => false,
        };
        if let (true, Some((_, h))) = (already, &current) {
            ctx.log(
                "rollback",
                None,
                Status::Ok,
                json!({"serving": h.to_value(), "note": "baseline was already serving"}),
            )?;
        } else if let Err(e) = lifecycle::roll_back_to_baseline(ctx, "rollback").await? {
            let f = failure.get_or_insert_with(String::new);
            f.push_str(&if matches!(ctx.plan.baseline.driver, Driver::External { .. }) {
                format!(
                    "; the baseline endpoint does not answer (infergate neither starts nor stops an external runtime, so there was nothing to roll back: whoever runs it must bring it back): {e:#}"
                )
            } else {
                format!("; rollback FAILED, the baseline is NOT serving: {e:#}")
            });
        }
    }
    let verdict_text = serde_json::to_value(&verdict).unwrap_or_default();
    tell_the_verdict(ctx, &verdict, report.as_deref(), failure.as_deref()).await?;
    let entries = ctx.ledger.entries(ctx.qualification)?;
    let serving = lifecycle::serving(&entries);
    let decision = decision_in(&entries);
    ctx.log(
        "done",
        None,
        if matches!(verdict, Verdict::Failed | Verdict::Refused) {
            Status::Failed
        } else {
            Status::Ok
        },
        json!({
            "verdict": verdict_text,
            "report": report,
            "failure": failure,
            "serving": serving.as_ref().map(|(l, h)| json!({"runtime": l, "handle": h.to_value()})),
        }),
    )?;
    Ok(Outcome {
        id: ctx.qualification.to_string(),
        out_dir: ctx.out_dir.to_path_buf(),
        ledger: ledger_path.clone(),
        verdict,
        report,
        failure,
        decision,
        serving,
        spent: spent_in(&entries),
    })
}

/// The plan's `on_verdict` hooks, given the verdict, the gates' summary
/// and the report.
async fn tell_the_verdict(
    ctx: &Ctx<'_>,
    verdict: &Verdict,
    report: Option<&Path>,
    failure: Option<&str>,
) -> Result<()> {
    if ctx.plan.hooks.on_verdict.is_empty() {
        return Ok(());
    }
    // Read once: the gates, the outcome and the sha256 the hooks get are
    // of the same bytes.
    let read = report.and_then(|p| Some((p, std::fs::read(p).ok()?)));
    let typed = read.as_ref().and_then(|(p, bytes)| {
        let v = crate::report::parse_report_value(bytes, &p.display().to_string()).ok()?;
        serde_json::from_value::<Report>(v).ok()
    });
    let fields = verdict_fields(verdict, failure, typed.as_ref());
    let summary = notify::summary(
        ctx,
        Event::Verdict,
        read.as_ref().map(|(p, bytes)| (*p, bytes.as_slice())),
        fields,
    );
    notify::notify(ctx, Event::Verdict, &summary).await
}

/// A verdict summary's own fields: `verdict` and `qualified`, the
/// three-way `outcome` (`inconclusive` told apart from `not_qualified`)
/// with the `exit_code` the command ends with, the gates' summary and the
/// failure.
fn verdict_fields(verdict: &Verdict, failure: Option<&str>, report: Option<&Report>) -> Value {
    let exit_code = exit_code_of(verdict, failure.is_some(), report);
    json!({
        "verdict": verdict,
        "qualified": *verdict == Verdict::Qualified,
        "outcome": outcome_name(verdict, exit_code),
        "exit_code": exit_code,
        "gates": report.map(crate::report::gate::summary),
        "failure": failure,
    })
}

pub(super) fn finished_outcome(
    ctx: &Ctx<'_>,
    ledger_path: &Location,
    entries: &[Entry],
    done: &Entry,
) -> Result<Outcome> {
    let verdict: Verdict = done
        .detail
        .get("verdict")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or(Verdict::Failed);
    Ok(Outcome {
        id: ctx.qualification.to_string(),
        out_dir: ctx.out_dir.to_path_buf(),
        ledger: ledger_path.clone(),
        verdict,
        report: done.detail_str("report").map(PathBuf::from),
        failure: done.detail_str("failure").map(str::to_string),
        decision: decision_in(entries),
        serving: lifecycle::serving(entries),
        spent: spent_in(entries),
    })
}

/// `--then-stop`: retire what the qualification left serving, and say so in
/// its report `value` (as [`Outcome::read_report`] read it: rewritten in
/// place and on disk, and recorded in the ledger as its latest).
pub async fn then_stop(o: &mut Outcome, value: Option<&mut Value>, quiet: bool) -> Result<()> {
    crate::runtime::stop::stop(&o.id, Some(o.ledger.clone()), quiet).await?;
    o.serving = None;
    if let (Some(r), Some(value)) = (&o.report, value) {
        let mut rep = <Report as serde::Deserialize>::deserialize(&*value)?;
        let note = format!(
            "{}; then retired (--then-stop), nothing serving",
            rep.promotion
        );
        rep.set_promotion(note);
        report::write_report_atomic(r, &rep)?;
        *value = rep.to_value();
        crate::runtime::ledger::Ledger::connect_existing(&o.ledger)?.record_report(
            &o.id,
            r,
            "then-stop",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example report, its gates made to end as `qualification` says.
    fn report(qualification: &str) -> Report {
        let mut r: Report = serde_json::from_str(include_str!(
            "../../tests/data/runtime-profile-comparison.example.json"
        ))
        .unwrap();
        let passed = qualification == report::QUAL_PASS;
        r.gates = None;
        r.performance_gate_passed = passed;
        r.strict_turnover_gate_passed = true;
        r.qualification = qualification.to_string();
        r
    }

    /// The verdict hooks' summary tells the three ends of a comparison
    /// apart by a field, with the exit code the command ends with; the
    /// two-way `verdict` and `qualified` stay as they were.
    #[test]
    fn the_verdict_summary_tells_inconclusive_from_not_qualified() {
        let cases = [
            (Verdict::Qualified, report::QUAL_PASS, "qualified", 0),
            (
                Verdict::NotQualified,
                report::QUAL_FAIL_PERFORMANCE,
                "not_qualified",
                1,
            ),
            (
                Verdict::NotQualified,
                report::QUAL_INCONCLUSIVE,
                "inconclusive",
                3,
            ),
        ];
        for (verdict, qualification, outcome, code) in cases {
            let r = report(qualification);
            let f = verdict_fields(&verdict, None, Some(&r));
            assert_eq!(f["outcome"], outcome, "{f}");
            assert_eq!(f["exit_code"], code, "{f}");
            assert_eq!(f["verdict"], serde_json::to_value(&verdict).unwrap());
            assert_eq!(f["qualified"], verdict == Verdict::Qualified, "{f}");
            assert!(f["gates"].is_string(), "{f}");
        }
        let f = verdict_fields(&Verdict::Failed, Some("the candidate did not start"), None);
        assert_eq!(
            (
                &f["outcome"],
                &f["exit_code"],
                &f["verdict"],
                &f["qualified"]
            ),
            (&json!("failed"), &json!(2), &json!("failed"), &json!(false))
        );
        assert!(f["gates"].is_null(), "{f}");
    }
}
