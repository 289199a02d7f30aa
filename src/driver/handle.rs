//! What the ledger records about a started runtime, and what can be done
//! with that record alone: tell whether the runtime still runs, stop it,
//! describe it. An external URL, a process (by pid and start time, so a
//! reused pid is not mistaken for it) or a container (by id and image ID).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::container::{Docker, RunningContainer};
use super::detached::ProcessIdentity;

/// What the ledger records about a started runtime: enough for a later
/// invocation to check it or stop it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Handle {
    External {
        base_url: String,
    },
    Process {
        base_url: String,
        pid: i32,
        start_ticks: u64,
        log: PathBuf,
        command_line: String,
    },
    Container {
        base_url: String,
        id: String,
        name: String,
        image_id: String,
        log: PathBuf,
    },
}

impl Handle {
    pub fn base_url(&self) -> &str {
        match self {
            Handle::External { base_url }
            | Handle::Process { base_url, .. }
            | Handle::Container { base_url, .. } => base_url,
        }
    }

    pub fn log(&self) -> Option<&Path> {
        match self {
            Handle::External { .. } => None,
            Handle::Process { log, .. } | Handle::Container { log, .. } => Some(log),
        }
    }

    /// One line for people: what and where.
    pub fn describe(&self) -> String {
        match self {
            Handle::External { base_url } => {
                format!("external {}", crate::util::redact_url(base_url))
            }
            Handle::Process { base_url, pid, .. } => format!("process {pid} at {base_url}"),
            Handle::Container {
                base_url,
                id,
                image_id,
                ..
            } => {
                format!(
                    "container {} ({image_id}) at {base_url}",
                    &id[..id.len().min(12)]
                )
            }
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub fn from_value(v: &Value) -> Option<Handle> {
        serde_json::from_value(v.clone()).ok()
    }

    /// Why it is not running, or None while it runs (external: always None).
    pub async fn down(&self, docker: &Docker) -> Option<String> {
        match self {
            Handle::External { .. } => None,
            Handle::Process {
                pid, start_ticks, ..
            } => {
                let id = ProcessIdentity {
                    pid: *pid,
                    start_ticks: *start_ticks,
                };
                (!id.is_alive()).then(|| format!("process {pid} is no longer running"))
            }
            Handle::Container {
                id,
                name,
                image_id,
                base_url,
                log,
            } => {
                let c = running_container(id, name, image_id, base_url, log);
                c.check(docker).await.err().map(|e| format!("{e:#}"))
            }
        }
    }

    /// Stop it (external runtimes are never stopped). Returns what was done.
    pub async fn stop(&self, docker: &Docker, grace: Duration) -> Result<String> {
        match self {
            Handle::External { .. } => {
                Ok("external: not controlled by infergate, left running".into())
            }
            Handle::Process {
                pid, start_ticks, ..
            } => {
                let id = ProcessIdentity {
                    pid: *pid,
                    start_ticks: *start_ticks,
                };
                // Blocking waits: keep them off the async workers.
                let stopped = tokio::task::spawn_blocking(move || id.stop(grace))
                    .await
                    .context("stopping a process")?;
                Ok(if stopped {
                    format!("stopped process group {pid}")
                } else {
                    format!("process {pid} had already exited")
                })
            }
            Handle::Container {
                id,
                name,
                image_id,
                base_url,
                log,
            } => {
                let c = running_container(id, name, image_id, base_url, log);
                match docker.inspect(id).await? {
                    None => Ok(format!("container {name} no longer exists")),
                    Some(_) => {
                        c.stop(docker, grace).await?;
                        Ok(format!(
                            "stopped and removed container {name}; logs in {}",
                            log.display()
                        ))
                    }
                }
            }
        }
    }
}

/// The container a [`Handle::Container`] records, as the container driver
/// takes it.
fn running_container(
    id: &str,
    name: &str,
    image_id: &str,
    base_url: &str,
    log: &Path,
) -> RunningContainer {
    RunningContainer {
        id: id.to_string(),
        name: name.to_string(),
        image_id: image_id.to_string(),
        base_url: base_url.to_string(),
        log_path: log.to_path_buf(),
    }
}

/// A process handle for unit tests: `pid` on a fixed loopback URL.
#[cfg(test)]
pub(crate) fn test_process(pid: i32) -> Handle {
    Handle::Process {
        base_url: "http://127.0.0.1:1".into(),
        pid,
        start_ticks: 7,
        log: "l".into(),
        command_line: "c".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pid: i32) -> Handle {
        test_process(pid)
    }

    #[test]
    fn handles_round_trip_through_json() {
        let c = Handle::Container {
            base_url: "http://127.0.0.1:8080".into(),
            id: "abc".into(),
            name: "n".into(),
            image_id: "sha256:x".into(),
            log: "l".into(),
        };
        assert_eq!(Handle::from_value(&c.to_value()), Some(c));
        assert_eq!(h(1).to_value()["kind"], "process");
    }
}
