//! Preflight: the suite reads and both runtimes are present. It changes
//! nothing (except a pull by digest).

use anyhow::{Context, Result};
use serde_json::json;

use super::workdir::recorded_window_rule;
use crate::config::plan::{BASELINE, BudgetSource, Plan, PlanSchedule, check_round_budget};
use crate::config::suite::LoadedSuite;
use crate::measure::interleave;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;
use crate::runtime::lifecycle;

/// Both runtimes present, and the suite as read (the one reading of it
/// every later step uses); an adaptive run's budget holds a round of
/// every cell.
pub(super) async fn preflight(ctx: &Ctx<'_>, adaptive: bool) -> Result<LoadedSuite> {
    let plan = ctx.plan;
    // Both up at once on shared GPUs: the second start would find them
    // taken; what `--check` calls wrong is refused before anything starts.
    if let Some(why) = plan.shared_gpus_interleaved() {
        ctx.log("preflight", None, Status::Failed, json!({"error": why}))?;
        anyhow::bail!("preflight: {why}; nothing was changed");
    }
    // The suite must load, or nothing can be measured.
    let suite = LoadedSuite::read(&plan.suite)
        .with_context(|| format!("suite {}", plan.suite.display()))?;
    if let Some(Err(why)) = plan
        .window
        .as_ref()
        .map(|w| w.check_cells(suite.suite.cells.iter().map(|c| c.name.as_str())))
    {
        ctx.log("preflight", None, Status::Failed, json!({"error": why}))?;
        anyhow::bail!(
            "preflight: plan {}: {why}; nothing was changed",
            plan.path.display()
        );
    }
    if let Some(why) = capacity_schedule(plan, &suite, adaptive) {
        ctx.log("preflight", None, Status::Failed, json!({"error": why}))?;
        anyhow::bail!(
            "preflight: plan {}: {why}; nothing was changed",
            plan.path.display()
        );
    }
    if adaptive {
        let specs = &suite.suite.cells;
        let window = plan.window.as_ref();
        let cells = interleave::layout_by(specs, window, recorded_window_rule(ctx.out_dir));
        let round = interleave::round_cells(specs, &cells, window);
        if let Err(why) = check_round_budget(&round, plan.adaptive.max_requests, BudgetSource::Plan)
        {
            ctx.log("preflight", None, Status::Failed, json!({"error": why}))?;
            anyhow::bail!("preflight: plan {}: {why}", plan.path.display());
        }
    }
    let mut details = serde_json::Map::new();
    for rt in [&plan.baseline, &plan.candidate] {
        match lifecycle::presence(ctx, rt).await {
            Ok(v) => {
                details.insert(rt.label.clone(), v);
            }
            Err(e) => {
                let why = if rt.label == BASELINE {
                    "the baseline could not be restored, so nothing was changed"
                } else {
                    "the candidate cannot be started; nothing was changed"
                };
                ctx.log(
                    "preflight",
                    Some(&rt.label),
                    Status::Failed,
                    json!({"error": format!("{e:#}"), "why": why}),
                )?;
                return Err(e.context(format!("preflight: {} runtime: {why}", rt.label)));
            }
        }
    }
    ctx.log(
        "preflight",
        None,
        Status::Ok,
        serde_json::Value::Object(details),
    )?;
    ctx.say("preflight: both runtimes present");
    Ok(suite)
}

/// Why the plan's schedule cannot compare the suite's capacity cells, if
/// it cannot: the two searches share one level schedule, segment by
/// segment, only in the fixed interleaved schedule.
pub(super) fn capacity_schedule(
    plan: &Plan,
    suite: &LoadedSuite,
    adaptive: bool,
) -> Option<String> {
    let cell = suite.suite.cells.iter().find(|c| c.capacity.is_some())?;
    match (plan.schedule, adaptive) {
        (PlanSchedule::Interleaved, false) => None,
        (PlanSchedule::Interleaved, true) => Some(format!(
            "cell '{}' is a capacity cell: its search spends its own `requests` and is not cut into adaptive rounds; leave [adaptive] out",
            cell.name
        )),
        (PlanSchedule::Alternating, _) => Some(format!(
            "cell '{}' is a capacity cell: both runtimes' searches share one level schedule, a segment of each in turn, which needs schedule = \"interleaved\"",
            cell.name
        )),
    }
}
