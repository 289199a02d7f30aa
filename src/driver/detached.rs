//! Local runtimes that outlive the infergate command that started them.
//!
//! A baseline restored after `qualify`, or a candidate promoted by `decide`,
//! must keep serving once infergate exits, and a later `decide`, `stop` or
//! resumed `qualify` must be able to stop it. [`super::process::ManagedProcess`]
//! deliberately dies with infergate (parent-death signal, exit hook), so this
//! spawns the same [`ProcessSpec`] differently: its own session, no
//! parent-death signal, and an identity (pid + kernel start time) that the
//! ledger records so a later invocation stops exactly that process group and
//! never a stranger that reused the pid.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::process::describe_status;
use super::runlog::{self, RunLog, Watched, group_alive, signal_group};
use super::spec::ProcessSpec;

/// Which process group a ledger entry means: the leader's pid and its start
/// time in clock ticks since boot (`/proc/<pid>/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: i32,
    pub start_ticks: u64,
}

impl ProcessIdentity {
    /// The identity of a live pid, or None when it is gone or a zombie.
    pub fn of(pid: i32) -> Option<ProcessIdentity> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let after = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        // fields[0] is field 3 (state); start time is field 22.
        if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
            return None;
        }
        let start_ticks = fields.get(19)?.parse().ok()?;
        Some(ProcessIdentity { pid, start_ticks })
    }

    /// Still the same live process (not exited, pid not reused).
    pub fn is_alive(&self) -> bool {
        ProcessIdentity::of(self.pid) == Some(*self)
    }

    /// SIGTERM the group, wait up to `grace` for the leader, then SIGKILL the
    /// group. Returns false when the process was already gone.
    pub fn stop(&self, grace: Duration) -> bool {
        if !self.is_alive() {
            // The leader is gone; members left in its group still hold the id.
            if group_alive(self.pid) && pid_unused(self.pid) {
                signal_group(self.pid, libc::SIGKILL);
            }
            return false;
        }
        signal_group(self.pid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while self.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.is_alive() || group_alive(self.pid) {
            signal_group(self.pid, libc::SIGKILL);
        }
        // Members that outlived the leader must be gone (and reaped) before the
        // port they hold is free again.
        let deadline = Instant::now() + Duration::from_secs(5);
        while (self.is_alive() || group_alive(self.pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }
}

/// The leader is gone; signalling its group id is only safe while no other
/// process has taken that number as its own pid.
fn pid_unused(pid: i32) -> bool {
    ProcessIdentity::of(pid).is_none()
}

/// A process started here in its own session, not tied to our lifetime.
#[derive(Debug)]
pub struct DetachedProcess {
    identity: ProcessIdentity,
    log: RunLog,
    /// Set by the reaper thread when the child exits while we still run.
    exit: Arc<Mutex<Option<ExitStatus>>>,
}

impl DetachedProcess {
    pub fn spawn(spec: &ProcessSpec) -> Result<DetachedProcess> {
        let (log, mut cmd) = RunLog::start(spec, " (detached)")?;
        // SAFETY: setsid is async-signal-safe; the closure allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", log.command_line()))?;
        let pid = child.id() as i32;
        let Some(identity) = ProcessIdentity::of(pid) else {
            let how = child
                .wait()
                .map(describe_status)
                .unwrap_or_else(|e| e.to_string());
            bail!("{}", log.exit_report(&format!("at once: {how}")));
        };
        let exit = Arc::new(Mutex::new(None));
        let exit2 = exit.clone();
        // Reap the child if it exits while we run, so it is never left a zombie
        // and its exit status can be reported.
        std::thread::Builder::new()
            .name(format!("reap-{pid}"))
            .spawn(move || {
                if let Ok(status) = child.wait()
                    && let Ok(mut e) = exit2.lock()
                {
                    *e = Some(status);
                }
            })
            .context("starting the reaper thread")?;
        Ok(DetachedProcess {
            identity,
            log,
            exit,
        })
    }

    pub fn identity(&self) -> ProcessIdentity {
        self.identity
    }

    pub fn command_line(&self) -> &str {
        self.log.command_line()
    }

    pub fn log_path(&self) -> &Path {
        self.log.path()
    }

    /// The exit status, once the child has exited (None while it runs).
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit.lock().ok().and_then(|e| *e)
    }

    /// Why it is no longer running, when it is not.
    pub fn exited(&self) -> Option<String> {
        if let Some(s) = self.exit_status() {
            return Some(describe_status(s));
        }
        if self.identity.is_alive() {
            return None;
        }
        // Gone (or a zombie): the reaper thread is about to record how.
        for _ in 0..25 {
            std::thread::sleep(Duration::from_millis(20));
            if let Some(s) = self.exit_status() {
                return Some(describe_status(s));
            }
        }
        Some("exit status unknown".to_string())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.log.tail(lines)
    }

    /// Wait for a log line containing `needle`; fails early if the process exits.
    pub async fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        runlog::wait_for_line(self, needle, timeout).await
    }

    /// Poll `url` until it answers 200; fails early if the process exits.
    pub async fn wait_for_http_ok(&mut self, url: &str, timeout: Duration) -> Result<()> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building HTTP client")?;
        runlog::wait_for_http_ok(self, &http, url, timeout).await
    }
}

impl Watched for DetachedProcess {
    fn run_log(&mut self) -> &mut RunLog {
        &mut self.log
    }

    fn exited(&mut self) -> Option<String> {
        DetachedProcess::exited(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outlives_nothing_but_stops_by_identity() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ProcessSpec::new("/bin/sh", dir.path().join("p.log"))
            .arg("-c")
            .arg("(exec sleep 30) & echo ready; wait");
        let mut p = DetachedProcess::spawn(&spec).unwrap();
        p.wait_for_line("ready", Duration::from_secs(10))
            .await
            .unwrap();
        let id = p.identity();
        assert!(id.is_alive());
        // A stale identity (same pid, other start time) is not this process.
        assert!(
            !ProcessIdentity {
                pid: id.pid,
                start_ticks: id.start_ticks + 1
            }
            .is_alive()
        );
        assert!(id.stop(Duration::from_secs(5)));
        assert!(!id.is_alive());
        assert!(!group_alive(id.pid), "the group's sleep survived");
        assert!(!id.stop(Duration::from_secs(1)));
    }

    #[tokio::test]
    async fn early_exit_is_reported_with_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ProcessSpec::new("/bin/sh", dir.path().join("p.log"))
            .arg("-c")
            .arg("echo boom >&2; exit 4");
        // It may be gone before spawn returns; either way the error says why.
        let e = match DetachedProcess::spawn(&spec) {
            Ok(mut p) => p
                .wait_for_line("ready", Duration::from_secs(10))
                .await
                .unwrap_err(),
            Err(e) => e,
        }
        .to_string();
        assert!(e.contains("exit code 4") && e.contains("boom"), "{e}");
    }
}
