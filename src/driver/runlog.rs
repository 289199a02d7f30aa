//! What the two local process drivers share: the appended log a runtime
//! writes to, the command that writes it, and waiting on both — for a ready
//! line, for a health URL — while noticing when the process has exited.
//! `ManagedProcess` (process.rs) dies with infergate,
//! `DetachedProcess` (detached.rs) outlives it; nothing else differs here.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::spec::ProcessSpec;

/// How often a wait looks at the log, the URL and the process again.
pub(super) const POLL: Duration = Duration::from_millis(50);
/// Lines of log quoted in error messages.
pub(super) const TAIL_LINES: usize = 30;

/// One run's part of an appended log file.
#[derive(Debug)]
pub(super) struct RunLog {
    path: PathBuf,
    /// Where this run's output starts.
    start: u64,
    /// Bytes already searched by `wait_for_line`.
    scanned: u64,
    command_line: String,
}

impl RunLog {
    /// Open `spec`'s log for appending, write a start banner (`how` says
    /// which driver), and return the log with a [`Command`] whose stdout and
    /// stderr go to it. The caller adds its own pre-exec and spawns.
    pub(super) fn start(spec: &ProcessSpec, how: &str) -> Result<(RunLog, Command)> {
        let path = &spec.log_path;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating log directory {}", dir.display()))?;
        }
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening log {}", path.display()))?;
        let command_line = spec.command_line();
        writeln!(
            log,
            "=== infergate: starting{how} at {}: {command_line}",
            crate::util::now_rfc3339()
        )
        .with_context(|| format!("writing log {}", path.display()))?;
        let start = log
            .metadata()
            .with_context(|| format!("reading log {}", path.display()))?
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
        let run_log = RunLog {
            path: path.clone(),
            start,
            scanned: start,
            command_line,
        };
        Ok((run_log, cmd))
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn command_line(&self) -> &str {
        &self.command_line
    }

    fn text_from(&self, offset: u64) -> io::Result<String> {
        let mut f = File::open(&self.path)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The last `lines` lines of this run's output, for error messages.
    pub(super) fn tail(&self, lines: usize) -> String {
        // A long-running server's log can be large; the tail is near the end.
        const WINDOW: u64 = 64 * 1024;
        let len = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        let from = self.start.max(len.saturating_sub(WINDOW));
        match self.text_from(from) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("(log {} unreadable: {e})", self.path.display()),
        }
    }

    /// "`cmd` exited (how); last lines of log: …".
    pub(super) fn exit_report(&self, how: &str) -> String {
        format!(
            "`{}` exited ({how}); last lines of {}:\n{}",
            self.command_line,
            self.path.display(),
            self.tail(TAIL_LINES)
        )
    }

    /// Read complete new lines of the log; return the first containing `needle`.
    fn scan_for(&mut self, needle: &str) -> Result<Option<String>> {
        let mut f = File::open(&self.path)
            .with_context(|| format!("opening log {}", self.path.display()))?;
        f.seek(SeekFrom::Start(self.scanned))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)
            .with_context(|| format!("reading log {}", self.path.display()))?;
        // Only whole lines: a partial one is read again once it is complete.
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Ok(None);
        };
        self.scanned += end as u64 + 1;
        Ok(String::from_utf8_lossy(&bytes[..end])
            .lines()
            .find(|l| l.contains(needle))
            .map(str::to_string))
    }

    /// "… not within …; `cmd` is still running; last lines of log: …".
    fn still_running(&self, what: &str) -> String {
        format!(
            "{what}; `{}` is still running; last lines of {}:\n{}",
            self.command_line,
            self.path.display(),
            self.tail(TAIL_LINES)
        )
    }
}

/// A spawned process as the waits see it.
pub(super) trait Watched {
    fn run_log(&mut self) -> &mut RunLog;
    /// How the process ended, once it has (its exit status, described).
    fn exited(&mut self) -> Option<String>;
}

/// Wait until a line of the run's output contains `needle`; return that line.
/// Fails early, quoting the log, if the process exits first.
pub(super) async fn wait_for_line(
    w: &mut impl Watched,
    needle: &str,
    timeout: Duration,
) -> Result<String> {
    let deadline = Instant::now() + timeout;
    loop {
        // Look at the log after taking the exit status, so a line printed
        // just before exiting is still found.
        let exited = w.exited();
        if let Some(line) = w.run_log().scan_for(needle)? {
            return Ok(line);
        }
        if let Some(how) = exited {
            bail!(
                "{} before printing {needle:?}",
                w.run_log().exit_report(&how)
            );
        }
        if Instant::now() >= deadline {
            bail!(
                "{}",
                w.run_log()
                    .still_running(&format!("{needle:?} not printed within {timeout:?}"))
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Poll `url` with GET until it answers 200, the process exits, or `timeout` passes.
pub(super) async fn wait_for_http_ok(
    w: &mut impl Watched,
    http: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no attempt finished");
    loop {
        if let Some(how) = w.exited() {
            bail!(
                "{} while waiting for GET {url} to answer 200",
                w.run_log().exit_report(&how)
            );
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "{}",
                w.run_log().still_running(&format!(
                    "GET {url} did not answer 200 within {timeout:?} (last: {last})"
                ))
            );
        }
        let attempt = http
            .get(url)
            .timeout(left.min(Duration::from_secs(2)))
            .send()
            .await;
        match attempt {
            Ok(resp) if resp.status() == reqwest::StatusCode::OK => return Ok(()),
            Ok(resp) => last = format!("HTTP {}", resp.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(super) fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals exactly that process group.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

pub(super) fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    unsafe { libc::kill(-pgid, 0) == 0 }
}
