//! A decision carried out: recorded in the report (`decision`,
//! `human_decision`, `promotion`) and the ledger before anything changes,
//! then the decided runtime put in service, then what was done written to
//! both and told to the plan's `on_decision` hooks.
//!
//! Retain-baseline: the exact baseline (image digest / command sha256 /
//! engine profile, verified again) is restored if it is not serving, and
//! readmitted. Promote: the serving baseline is retired, the candidate started
//! and readmitted; if the candidate fails to start or to be readmitted it is
//! not admitted (its logs are kept) and the baseline is restored and
//! readmitted instead. Stop-then-start: both may want the same port.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::config::plan::{BASELINE, CANDIDATE};
use crate::driver::handle::Handle;
use crate::report::{self, Decision, DecisionAction, Report};
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;
use crate::runtime::lifecycle;
use crate::runtime::notify::{self, Event};

/// What carrying out a decision did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub carried_out: bool,
    pub promotion: String,
}

/// Record `action` in `report` (as written at `report_path`) and the
/// ledger, carry it out, and record what was done: `decide` calls it for a
/// person's decision, `qualify` for one a plan's policy makes.
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
                match lifecycle::roll_back_to_baseline(ctx, "promotion failed").await? {
                    Ok(h) => (
                        false,
                        format!(
                            "promotion FAILED ({why}); candidate not admitted, its logs kept; exact baseline restored and readmitted ({})",
                            h.describe()
                        ),
                    ),
                    Err(e) => (
                        false,
                        format!(
                            "promotion FAILED ({why}); baseline restore ALSO FAILED, nothing is serving: {e:#}"
                        ),
                    ),
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
    fn a_promotion_says_what_it_overrides_and_what_it_replaces() {
        let mut r = seed();
        assert!(
            !report::gate::qualified(&r),
            "the seed failed strict turnover"
        );
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
