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

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::process::{ProcessSpec, describe_status};

const POLL: Duration = Duration::from_millis(50);
const TAIL_LINES: usize = 30;

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
    command_line: String,
    log_path: PathBuf,
    log_start: u64,
    scanned: u64,
    /// Set by the reaper thread when the child exits while we still run.
    exit: Arc<Mutex<Option<ExitStatus>>>,
}

impl DetachedProcess {
    pub fn spawn(spec: &ProcessSpec) -> Result<DetachedProcess> {
        let log_path = &spec.log_path;
        if let Some(dir) = log_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .with_context(|| format!("opening log {}", log_path.display()))?;
        let command_line = spec.command_line();
        writeln!(
            log,
            "=== infergate: starting (detached) at {}: {command_line}",
            crate::runner::now_rfc3339()
        )
        .with_context(|| format!("writing log {}", log_path.display()))?;
        let log_start = log
            .metadata()
            .with_context(|| format!("reading log {}", log_path.display()))?
            .len();

        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                log.try_clone().context("duplicating log handle")?,
            ))
            .stderr(Stdio::from(log));
        if let Some(dir) = &spec.current_dir {
            cmd.current_dir(dir);
        }
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
            .with_context(|| format!("starting {command_line}"))?;
        let pid = child.id() as i32;
        let Some(identity) = ProcessIdentity::of(pid) else {
            let how = child
                .wait()
                .map(describe_status)
                .unwrap_or_else(|e| e.to_string());
            bail!(
                "`{command_line}` exited at once ({how}); last lines of {}:\n{}",
                log_path.display(),
                log_tail_from(log_path, log_start, TAIL_LINES)
            );
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
            command_line,
            log_path: log_path.clone(),
            log_start,
            scanned: log_start,
            exit,
        })
    }

    pub fn identity(&self) -> ProcessIdentity {
        self.identity
    }

    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
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
        log_tail_from(&self.log_path, self.log_start, lines)
    }

    /// Wait for a log line containing `needle`; fails early if the process exits.
    pub async fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let exited = self.exited();
            if let Some(line) = self.scan_log_for(needle)? {
                return Ok(line);
            }
            if let Some(how) = exited {
                bail!("{} before printing {needle:?}", self.exit_report(&how));
            }
            if Instant::now() >= deadline {
                bail!(
                    "{needle:?} not printed within {timeout:?} by `{}`; last lines of {}:\n{}",
                    self.command_line,
                    self.log_path.display(),
                    self.log_tail(TAIL_LINES)
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn scan_log_for(&mut self, needle: &str) -> Result<Option<String>> {
        let mut f = File::open(&self.log_path)
            .with_context(|| format!("opening log {}", self.log_path.display()))?;
        f.seek(SeekFrom::Start(self.scanned))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)
            .with_context(|| format!("reading log {}", self.log_path.display()))?;
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Ok(None);
        };
        self.scanned += end as u64 + 1;
        Ok(String::from_utf8_lossy(&bytes[..end])
            .lines()
            .find(|l| l.contains(needle))
            .map(str::to_string))
    }

    /// Poll `url` until it answers 200; fails early if the process exits.
    pub async fn wait_for_http_ok(&self, url: &str, timeout: Duration) -> Result<()> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building HTTP client")?;
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no attempt finished");
        loop {
            if let Some(how) = self.exited() {
                bail!(
                    "{} while waiting for GET {url} to answer 200",
                    self.exit_report(&how)
                );
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "GET {url} did not answer 200 within {timeout:?} (last: {last}); `{}` is still running; last lines of {}:\n{}",
                    self.command_line,
                    self.log_path.display(),
                    self.log_tail(TAIL_LINES)
                );
            }
            match http
                .get(url)
                .timeout(left.min(Duration::from_secs(2)))
                .send()
                .await
            {
                Ok(r) if r.status() == reqwest::StatusCode::OK => return Ok(()),
                Ok(r) => last = format!("HTTP {}", r.status()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn exit_report(&self, how: &str) -> String {
        format!(
            "`{}` exited ({how}); last lines of {}:\n{}",
            self.command_line,
            self.log_path.display(),
            self.log_tail(TAIL_LINES)
        )
    }
}

/// The last `lines` lines of a log from byte `start` on.
pub fn log_tail_from(path: &Path, start: u64, lines: usize) -> String {
    let read = || -> std::io::Result<String> {
        let mut f = File::open(path)?;
        f.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(log {} unreadable: {e})", path.display()),
    }
}

fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals exactly that process group.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    unsafe { libc::kill(-pgid, 0) == 0 }
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
