//! A plan's `[hooks]`: tell the rest of the pipeline of a verdict and of a
//! decision. Each hook is given one summary as JSON (a command on its
//! standard input, a URL as a POST body), bounded by its timeout. What each
//! hook did is a `hook` row in the ledger and a line on the terminal; a
//! hook that fails or hangs changes nothing else.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use super::hook;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::Status;

/// What happened, for the summary's `event` and the ledger row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Verdict,
    Decision,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Verdict => "verdict",
            Event::Decision => "decision",
        }
    }
}

/// The summary every hook of one event gets: `fields` (the verdict, the
/// gates, the decision…) with the event, the qualification, the plan's name,
/// the qualification's ledger chain head and the report's path and the
/// sha256 of its bytes as read. Redacted like
/// every other output.
pub fn summary(
    ctx: &Ctx<'_>,
    event: Event,
    report: Option<(&Path, &[u8])>,
    fields: Value,
) -> Value {
    let mut v = json!({
        "schema": "infergate-hook/v1",
        "event": event.as_str(),
        "qualification": ctx.qualification,
        "plan": ctx.plan.name,
    });
    // The qualification's chain head: kept by the receiver, it lets a
    // second system notice a later rewrite of the ledger
    // (`infergate ledger verify --head QUALIFICATION:SEQ:SHA256`).
    if let Some(h) = ctx
        .ledger
        .checked_entries(ctx.qualification)
        .ok()
        .and_then(|(_, c)| c.head)
    {
        v["ledger_head"] = json!({
            "seq": h.seq,
            "sha256": h.hash,
            "verify": format!("{}:{}:{}", ctx.qualification, h.seq, h.hash),
        });
    }
    if let Some((path, bytes)) = report {
        v["report"] = json!({
            "path": path,
            "sha256": crate::report::digest::sha256_hex(bytes),
        });
    }
    if let (Some(o), Value::Object(extra)) = (v.as_object_mut(), fields) {
        o.extend(extra);
    }
    redacted(v)
}

/// Every string of `v` with passwords and userinfo taken out.
fn redacted(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(crate::util::redact(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(redacted).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, redacted(v))).collect()),
        other => other,
    }
}

/// Run the plan's hooks for `event`, one after another, each given
/// `summary`. Errors only when the ledger cannot be written.
pub async fn notify(ctx: &Ctx<'_>, event: Event, summary: &Value) -> Result<()> {
    let hooks = match event {
        Event::Verdict => &ctx.plan.hooks.on_verdict,
        Event::Decision => &ctx.plan.hooks.on_decision,
    };
    let json = summary.to_string();
    let call = hook::Call {
        env: &[],
        json: json.as_bytes(),
        stdin: true,
    };
    for h in hooks {
        let t0 = std::time::Instant::now();
        let result = hook::run(h, &call).await;
        let took_s = t0.elapsed().as_secs_f64();
        let (status, key, line) = match &result {
            Ok(line) => (Status::Ok, "result", line),
            Err(line) => (Status::Failed, "error", line),
        };
        let detail =
            json!({"event": event.as_str(), "hook": hook::shown(h), key: line, "took_s": took_s});
        ctx.log("hook", None, status, detail)?;
        match result {
            Ok(line) => ctx.say(&format!("hook on {}: {line}", event.as_str())),
            Err(line) => ctx.say(&format!(
                "hook on {} FAILED (nothing else changes): {line}",
                event.as_str()
            )),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::Plan;
    use crate::driver::container::Docker;
    use crate::runtime::ledger::Ledger;

    #[test]
    fn the_summary_carries_the_qualifications_chain_head() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("l.sqlite")).unwrap();
        ledger
            .append("q", "plan", None, Status::Ok, json!({}))
            .unwrap();
        let seq = ledger
            .append(
                "q",
                "done",
                None,
                Status::Ok,
                json!({"verdict": "qualified"}),
            )
            .unwrap();
        ledger
            .append("r", "plan", None, Status::Ok, json!({}))
            .unwrap();
        let plans = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
        let plan = Plan::load(&plans.join("reference.toml")).unwrap();
        let ctx = Ctx {
            plan: &plan,
            qualification: "q",
            ledger: &ledger,
            out_dir: dir.path(),
            docker: Docker::new(&plan.docker.socket),
            quiet: true,
        };
        let v = summary(&ctx, Event::Verdict, None, json!({}));
        let hash = ledger.rows(Some("q")).unwrap()[1].hash.clone().unwrap();
        assert_eq!(v["ledger_head"]["seq"], seq, "{v}");
        assert_eq!(v["ledger_head"]["sha256"], hash.as_str(), "{v}");
        assert_eq!(v["ledger_head"]["verify"], format!("q:{seq}:{hash}"), "{v}");
    }
}
