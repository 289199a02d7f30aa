//! A plan's `[hooks]`: tell the rest of the pipeline of a verdict and of a
//! decision. Each hook is given one summary as JSON (a command on its
//! standard input, a URL as a POST body), bounded by its timeout. What each
//! hook did is a `hook` row in the ledger and a line on the terminal; a
//! hook that fails or hangs changes nothing else.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::config::plan::Hook;
use crate::decision::ledger::Status;
use crate::decision::lifecycle::Ctx;

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
/// gates, the decision…) with the event, the qualification, the plan's name
/// and the report's path and sha256. Redacted like every other output.
pub fn summary(ctx: &Ctx<'_>, event: Event, report: Option<&Path>, fields: Value) -> Value {
    let mut v = json!({
        "schema": "infergate-hook/v1",
        "event": event.as_str(),
        "qualification": ctx.qualification,
        "plan": ctx.plan.name,
    });
    if let Some(path) = report {
        v["report"] = json!({
            "path": path,
            "sha256": std::fs::read(path).ok().map(|b| crate::report::digest::sha256_hex(&b)),
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
    for hook in hooks {
        let shown = describe(hook);
        let t0 = std::time::Instant::now();
        let result = run(hook, summary).await;
        let took_s = t0.elapsed().as_secs_f64();
        let (status, detail) = match &result {
            Ok(what) => (
                Status::Ok,
                json!({"event": event.as_str(), "hook": shown, "result": what, "took_s": took_s}),
            ),
            Err(e) => (
                Status::Failed,
                json!({"event": event.as_str(), "hook": shown, "error": format!("{e:#}"), "took_s": took_s}),
            ),
        };
        ctx.log("hook", None, status, detail)?;
        match result {
            Ok(what) => ctx.say(&format!("hook on {}: {shown}: {what}", event.as_str())),
            Err(e) => ctx.say(&format!(
                "hook on {} FAILED (nothing else changes): {shown}: {e:#}",
                event.as_str()
            )),
        }
    }
    Ok(())
}

/// How a hook is shown: its command line, or `POST` and its URL.
fn describe(hook: &Hook) -> String {
    match hook {
        Hook::Command { argv, .. } => argv.join(" "),
        Hook::Http { url, .. } => format!("POST {}", crate::util::redact_url(url)),
    }
}

async fn run(hook: &Hook, summary: &Value) -> Result<String> {
    let body = serde_json::to_vec(summary).context("encoding the summary")?;
    match hook {
        Hook::Command { argv, timeout } => {
            let (program, args) = argv.split_first().context("empty hook command")?;
            let mut child = tokio::process::Command::new(program)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("could not run {program}"))?;
            let mut stdin = child.stdin.take().context("no stdin")?;
            let done = async {
                // A hook that does not read its input must not block us: a
                // closed pipe is its choice.
                let _ = stdin.write_all(&body).await;
                drop(stdin);
                child.wait_with_output().await
            };
            let out = tokio::time::timeout(*timeout, done)
                .await
                .map_err(|_| anyhow::anyhow!("did not finish within {timeout:?}; killed"))?
                .context("waiting for it")?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail = crate::util::redact(last_chars(stderr.trim(), 300));
            match out.status.code() {
                Some(0) => Ok("exited 0".into()),
                Some(c) => anyhow::bail!("exited {c}{}", colon(&tail)),
                None => anyhow::bail!("was killed by a signal{}", colon(&tail)),
            }
        }
        Hook::Http {
            url,
            timeout,
            bearer_env,
        } => {
            let http = crate::measure::http_client()
                .timeout(*timeout)
                .build()
                .context("building HTTP client")?;
            let mut req = http
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
            if let Some(key) = crate::util::api_key(bearer_env.as_deref())? {
                req = req.bearer_auth(key);
            }
            let resp = req.send().await.map_err(|e| {
                anyhow::anyhow!("POST {}: {}", crate::util::redact_url(url), e.without_url())
            })?;
            let status = resp.status();
            if status.is_success() {
                Ok(format!("HTTP {status}"))
            } else {
                anyhow::bail!("HTTP {status}")
            }
        }
    }
}

fn last_chars(s: &str, n: usize) -> &str {
    match s.char_indices().rev().nth(n.saturating_sub(1)) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

fn colon(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}
