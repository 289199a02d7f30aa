//! `infergate status [ID]`: where each qualification stands, derived from the
//! ledger alone: its last step, verdict, decision, what serves (and whether it
//! still runs), and anything an interrupted invocation left running.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::config::plan::DockerSettings;
use crate::driver::container::Docker;
use crate::driver::handle::Handle;
use crate::runtime::ledger::{Chain, Entry, Ledger, Location, chain};
use crate::runtime::lifecycle;
use crate::runtime::state::{self, QualificationFile};

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// One qualification (with its full timeline), or all.
    pub id: Option<String>,
    pub ledger: Option<Location>,
    pub json: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Serving {
    pub runtime: String,
    pub handle: Handle,
    /// None while it runs; else why it does not.
    pub down: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QualificationStatus {
    pub id: String,
    pub plan: Option<String>,
    pub out_dir: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    /// `step status` of the last entry.
    pub last_step: String,
    /// From the `done` entry; None while running or interrupted.
    pub verdict: Option<String>,
    pub failure: Option<String>,
    pub report: Option<String>,
    pub decision: String,
    pub serving: Option<Serving>,
    /// Started, never stopped nor put in service: an interrupted invocation's,
    /// or the running one's (`running_by`).
    pub leftovers: Vec<Handle>,
    /// The infergate process (or database session) holding the
    /// qualification's lock now: it is under way.
    pub running_by: Option<String>,
    /// The qualification's hash chain, checked over the rows read here:
    /// its head, and each row edited, deleted or slipped in outside
    /// infergate.
    pub chain: Chain,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<Entry>>,
}

pub async fn collect(ledger: &Ledger, id: Option<&str>) -> Result<Vec<QualificationStatus>> {
    let ids = match id {
        Some(id) => {
            if !ledger.exists(id)? {
                return Err(lifecycle::unknown_qualification(id, ledger));
            }
            vec![id.to_string()]
        }
        None => ledger.qualifications()?,
    };
    let mut out = Vec::new();
    for q in ids {
        let (entries, chain) = ledger.checked_entries(&q)?;
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            continue;
        };
        let plan_entry = entries.iter().find(|e| e.step == "plan");
        let out_dir = plan_entry
            .and_then(|e| e.detail_str("out_dir"))
            .map(str::to_string);
        let docker = Docker::new(docker_socket(out_dir.as_deref()));
        let running_by = match &out_dir {
            Some(d) => ledger.lock_holder(&q, std::path::Path::new(d))?,
            None => None,
        };
        let done = entries.iter().rev().find(|e| e.step == "done");
        let serving = match lifecycle::serving(&entries) {
            Some((runtime, handle)) => {
                let down = handle.down(&docker).await;
                Some(Serving {
                    runtime,
                    handle,
                    down,
                })
            }
            None => None,
        };
        out.push(QualificationStatus {
            id: q.clone(),
            plan: plan_entry
                .and_then(|e| e.detail_str("plan"))
                .map(str::to_string),
            out_dir,
            started_at: first.at.clone(),
            updated_at: last.at.clone(),
            last_step: format!(
                "{}{} {}",
                last.step,
                last.runtime
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                last.status.as_str()
            ),
            verdict: done
                .and_then(|d| d.detail_str("verdict"))
                .map(str::to_string),
            failure: done
                .and_then(|d| d.detail_str("failure"))
                .map(str::to_string),
            report: entries
                .iter()
                .rev()
                .find(|e| e.step == "report")
                .and_then(|e| e.detail_str("path"))
                .map(str::to_string),
            decision: state::decision_in(&entries).as_str().to_string(),
            serving,
            leftovers: lifecycle::leftovers(&entries)
                .into_iter()
                .map(|(_, h)| h)
                .collect(),
            running_by,
            chain,
            entries: id.is_some().then(|| shown(entries)),
        });
    }
    Ok(out)
}

/// Rows as shown: a credential a row holds (a URL's password or token) is
/// redacted.
fn shown(mut entries: Vec<Entry>) -> Vec<Entry> {
    for e in &mut entries {
        crate::util::redact_json(&mut e.detail);
    }
    entries
}

/// The Docker socket the qualification's plan names (containers are checked there).
fn docker_socket(out_dir: Option<&str>) -> PathBuf {
    out_dir
        .map(PathBuf::from)
        .and_then(|d| {
            QualificationFile::read(&d)
                .ok()
                .and_then(|qf| qf.load_plan(&d).ok())
        })
        .map(|p| p.docker.socket)
        .unwrap_or_else(|| DockerSettings::default().socket)
}

/// The text (or JSON) `infergate status` prints.
pub async fn run(opts: &Options) -> Result<String> {
    let path = match &opts.ledger {
        Some(p) => p.clone(),
        None => {
            // The default ledger not made yet: nothing has been qualified here.
            let p = Location::default_location()?;
            if !p.exists() {
                return Ok(if opts.json {
                    "[]".to_string()
                } else {
                    format!("no qualifications (no ledger at {p} yet)\n")
                });
            }
            p
        }
    };
    let ledger = Ledger::connect_read_only(&path)?;
    let all = collect(&ledger, opts.id.as_deref()).await?;
    if opts.json {
        return serde_json::to_string_pretty(&all).context("serializing status");
    }
    if all.is_empty() {
        return Ok(format!("no qualifications in {}\n", path));
    }
    let mut s = String::new();
    for q in &all {
        let _ = writeln!(s, "{}", q.id);
        if let Some(p) = &q.plan {
            let _ = writeln!(s, "  plan:      {p}");
        }
        let _ = writeln!(
            s,
            "  started:   {}   last: {} at {}",
            q.started_at, q.last_step, q.updated_at
        );
        let state = match (&q.verdict, &q.failure) {
            (Some(v), Some(f)) => format!("{v}: {f}"),
            (Some(v), None) => v.clone(),
            (None, _) if q.running_by.is_some() => "running".into(),
            (None, _) => "unfinished (interrupted: rerun `infergate qualify PLAN --id ID` to resume, add --rollback to abandon)".into(),
        };
        let _ = writeln!(s, "  state:     {state}");
        if let Some(r) = &q.report {
            let _ = writeln!(s, "  report:    {r}");
        }
        let _ = writeln!(s, "  decision:  {}", q.decision);
        match &q.serving {
            Some(sv) => {
                let health = match &sv.down {
                    None => "running".to_string(),
                    Some(why) => format!("DOWN: {why}"),
                };
                let _ = writeln!(
                    s,
                    "  serving:   {} — {} ({health})",
                    sv.runtime,
                    sv.handle.describe()
                );
            }
            None => {
                let _ = writeln!(s, "  serving:   nothing");
            }
        }
        let _ = writeln!(s, "  chain:     {}", chain_line(&q.chain));
        if let Some(by) = &q.running_by {
            let _ = writeln!(s, "  RUNNING now, by {by}");
        }
        for h in &q.leftovers {
            let by = match &q.running_by {
                Some(_) => "  started by the running invocation",
                None => "  LEFT RUNNING by an interrupted invocation",
            };
            let _ = writeln!(s, "{by}: {}", h.describe());
        }
        if let Some(entries) = &q.entries {
            let _ = writeln!(s, "  ledger:");
            for e in entries {
                let _ = writeln!(
                    s,
                    "    {:>5} {} {:<14} {:<9} {:<7} {}",
                    e.seq,
                    e.at,
                    e.step,
                    e.runtime.as_deref().unwrap_or("-"),
                    e.status.as_str(),
                    summarize(&e.detail)
                );
            }
        }
    }
    Ok(s)
}

/// The chain's state in one line: its head, or its first broken row.
fn chain_line(c: &Chain) -> String {
    let mut line = match (c.broken.first(), &c.head) {
        (Some(first), _) => format!(
            "BROKEN: {} row(s) do not verify, the first: {first} (the rows above cannot be trusted; `infergate ledger verify` names each)",
            c.broken.len()
        ),
        (None, Some(h)) => format!("intact, head seq {} sha256 {}", h.seq, h.hash),
        (None, None) => "none".to_string(),
    };
    if !c.unchained.is_empty() {
        line.push_str(&format!(
            "; seq {}: written before the chain, not covered",
            chain::ranges(&c.unchained)
        ));
    }
    line
}

/// One line of a ledger entry's detail.
fn summarize(v: &Value) -> String {
    let pick = [
        "error",
        "check",
        "detail",
        "reason",
        "warning",
        "verdict",
        "action",
        "note",
        "result",
        "pass",
        "cell",
        "block",
        "round",
        "stop",
        "spent",
        "path",
        "promotion",
    ];
    let Some(o) = v.as_object() else {
        return v.to_string();
    };
    let mut parts = Vec::new();
    for k in pick {
        if let Some(x) = o.get(k) {
            let text = match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let text: String = text.replace('\n', " ⏎ ").chars().take(160).collect();
            parts.push(format!("{k}={text}"));
        }
    }
    if let Some(h) = o.get("handle").and_then(Handle::from_value) {
        parts.push(h.describe());
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ledger::Status;
    use serde_json::json;

    #[tokio::test]
    async fn a_qualification_under_way_is_said_to_run_and_by_which_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        let out_dir = dir.path().join("q");
        ledger
            .append(
                "q",
                "plan",
                None,
                Status::Ok,
                json!({"plan": "p.toml", "out_dir": out_dir}),
            )
            .unwrap();
        let opts = Options {
            id: Some("q".into()),
            ledger: Some(Location::Sqlite(path)),
            json: false,
        };
        let held = ledger.lock("q", &out_dir).unwrap();
        let text = run(&opts).await.unwrap();
        let want = format!("RUNNING now, by process {} (", std::process::id());
        assert!(text.contains(&want), "{text}");
        assert!(text.contains("state:     running\n"), "{text}");
        drop(held);
        let text = run(&opts).await.unwrap();
        assert!(!text.contains("RUNNING now"), "{text}");
        assert!(
            text.contains("state:     unfinished (interrupted"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_credential_a_row_holds_is_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        ledger
            .append(
                "q",
                "start",
                Some("candidate"),
                Status::Ok,
                json!({"handle": {"base_url": "http://user:secret@127.0.0.1:1/?token=secret"}}),
            )
            .unwrap();
        for json in [true, false] {
            let text = run(&Options {
                id: Some("q".into()),
                ledger: Some(Location::Sqlite(path.clone())),
                json,
            })
            .await
            .unwrap();
            if json {
                assert!(text.contains("127.0.0.1:1"), "{text}");
            }
            assert!(!text.contains("secret"), "{text}");
        }
    }
}
