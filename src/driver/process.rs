//! A local command run as a managed process group.
//!
//! The command gets its own session (so its process group can be signalled as
//! a whole and a terminal's Ctrl-C does not reach it), stdout and stderr
//! appended to one log file, and `PR_SET_PDEATHSIG` = SIGTERM so it dies with
//! us even if we crash. [`ManagedProcess::stop`] sends SIGTERM to the group,
//! waits a bounded grace, then sends SIGKILL; dropping a `ManagedProcess`
//! stops it. Nothing here knows about any particular server.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::runlog::{self, RunLog, Watched, group_alive, signal_group};

/// Grace between SIGTERM and SIGKILL when none is given.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);

pub use super::spec::ProcessSpec;

/// A running (or exited, not yet stopped) process group.
#[derive(Debug)]
pub struct ManagedProcess {
    child: Child,
    /// Also the process group id: the child leads its own session.
    pid: i32,
    log: RunLog,
    exit: Option<ExitStatus>,
    /// The group was empty once its leader was reaped: its id may now belong
    /// to another process, so it is never signalled again.
    group_gone: bool,
    stopped: bool,
}

impl ManagedProcess {
    /// Start `spec` in a new session with stdout and stderr appended to its log.
    pub fn spawn(spec: &ProcessSpec) -> Result<Self> {
        let (log, mut cmd) = RunLog::start(spec, "")?;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGTERM as libc::c_ulong,
                    0,
                    0,
                    0,
                ) == -1
                {
                    return Err(io::Error::last_os_error());
                }
                // We may have died before prctl took effect: then no signal comes.
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child =
            spawn_from_keeper(cmd).with_context(|| format!("starting {}", log.command_line()))?;
        let pid = child.id() as i32;
        register_group(pid);
        Ok(ManagedProcess {
            child,
            pid,
            log,
            exit: None,
            group_gone: false,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    pub fn command_line(&self) -> &str {
        self.log.command_line()
    }

    pub fn log_path(&self) -> &Path {
        self.log.path()
    }

    /// The exit status, if the process has exited (it is reaped then).
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exit = Some(status);
            if !group_alive(self.pid) {
                self.group_gone = true;
                unregister_group(self.pid);
            }
        }
        self.exit
    }

    /// The last `lines` lines of this run's output, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.log.tail(lines)
    }

    /// Wait until a line of this run's output contains `needle`; return that line.
    ///
    /// Fails early, quoting the log, if the process exits first.
    pub async fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        runlog::wait_for_line(self, needle, timeout).await
    }

    /// Poll `url` with GET until it answers 200, the process exits, or `timeout` passes.
    pub async fn wait_for_http_ok(
        &mut self,
        http: &reqwest::Client,
        url: &str,
        timeout: Duration,
    ) -> Result<()> {
        runlog::wait_for_http_ok(self, http, url, timeout).await
    }

    /// SIGTERM the group, wait up to `grace` for the leader, then SIGKILL the
    /// group. Blocks for at most about `grace`. Returns the leader's exit status.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus> {
        if self.stopped {
            return self
                .exit
                .with_context(|| format!("`{}` has no exit status", self.command_line()));
        }
        if self.exit.is_none() {
            signal_group(self.pid, libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while self.try_exit_status().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.exit.is_none() {
                signal_group(self.pid, libc::SIGKILL);
                let status = self.child.wait().with_context(|| {
                    format!("waiting for `{}` after SIGKILL", self.command_line())
                })?;
                self.exit = Some(status);
            }
        }
        // Members that outlived the leader keep the group id in use (the kernel
        // does not reuse it while they live), so signalling it is still safe.
        if !self.group_gone && group_alive(self.pid) {
            signal_group(self.pid, libc::SIGKILL);
        }
        self.group_gone = true;
        unregister_group(self.pid);
        self.stopped = true;
        self.exit
            .with_context(|| format!("`{}` has no exit status", self.command_line()))
    }
}

impl Watched for ManagedProcess {
    fn run_log(&mut self) -> &mut RunLog {
        &mut self.log
    }

    fn exited(&mut self) -> Option<String> {
        self.try_exit_status().map(describe_status)
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop(DEFAULT_STOP_GRACE);
        }
    }
}

/// "exit code 3" or "killed by signal 9 (SIGKILL)".
pub fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    match status.signal() {
        Some(sig) => format!("killed by signal {sig} ({})", signal_name(sig)),
        None => format!("{status}"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "other",
    }
}

/// Spawn from one thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not
/// the process: a child spawned from a tokio blocking thread or a test's
/// thread would be killed as soon as that thread ends.
fn spawn_from_keeper(cmd: Command) -> io::Result<Child> {
    type Job = (Command, mpsc::SyncSender<io::Result<Child>>);
    static KEEPER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("infergate-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            });
        started.ok().map(|_| tx)
    });
    let Some(keeper) = keeper else {
        return Err(io::Error::other(
            "the process spawner thread could not be started",
        ));
    };
    let (reply_tx, reply_rx) = mpsc::sync_channel(1);
    keeper
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("the process spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the process spawner thread did not answer"))?
}

/// Process groups started here and not yet stopped, for the exit hook.
static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn register_group(pgid: i32) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registers a plain extern "C" function that cannot unwind.
        unsafe {
            libc::atexit(terminate_all_at_exit);
        }
    });
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.push(pgid);
    }
}

fn unregister_group(pgid: i32) {
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.retain(|&g| g != pgid);
    }
}

/// SIGTERM every group started here and not yet stopped. Does not wait.
///
/// Runs at normal process exit (`exit`, end of `main`, a test harness
/// finishing), where values in statics are never dropped. A crash skips it;
/// `PR_SET_PDEATHSIG` covers that case for the direct child.
pub fn terminate_all() {
    // try_lock: never block process exit on a lock held by a dying thread.
    if let Ok(groups) = LIVE_GROUPS.try_lock() {
        for &pgid in groups.iter() {
            signal_group(pgid, libc::SIGTERM);
        }
    }
}

extern "C" fn terminate_all_at_exit() {
    terminate_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, log: &Path) -> ManagedProcess {
        let spec = ProcessSpec::new("/bin/sh", log).arg("-c").arg(script);
        ManagedProcess::spawn(&spec).expect("spawn /bin/sh")
    }

    fn alive(pid: i32) -> bool {
        // A zombie still answers kill(0); /proc tells the state.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z'),
            Err(_) => false,
        }
    }

    #[tokio::test]
    async fn finds_ready_line_and_stops_with_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("p.log");
        let mut p = sh(
            "echo starting; echo 'ready at http://x'; exec sleep 30",
            &log,
        );
        let line = p
            .wait_for_line("ready at", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(line, "ready at http://x");
        let t = Instant::now();
        let status = p.stop(Duration::from_secs(5)).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(t.elapsed() < Duration::from_secs(3));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("=== infergate: starting"), "{text}");
    }

    #[tokio::test]
    async fn escalates_to_sigkill_after_grace() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sh(
            "trap '' TERM; echo up; while :; do sleep 0.05; done",
            &dir.path().join("p.log"),
        );
        p.wait_for_line("up", Duration::from_secs(10))
            .await
            .unwrap();
        let t = Instant::now();
        let status = p.stop(Duration::from_millis(300)).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(t.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn early_exit_fails_fast_with_log_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sh(
            "echo 'model file missing' >&2; exit 3",
            &dir.path().join("p.log"),
        );
        let t = Instant::now();
        let err = p
            .wait_for_line("ready", Duration::from_secs(30))
            .await
            .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t.elapsed()
        );
        assert!(msg.contains("exit code 3"), "{msg}");
        assert!(msg.contains("model file missing"), "{msg}");
    }

    #[tokio::test]
    async fn stop_takes_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        // The grandchild ignores SIGTERM and would outlive its parent.
        let mut p = sh(
            "(trap '' TERM; exec sleep 30) & echo \"grandchild $!\"; wait",
            &dir.path().join("p.log"),
        );
        let line = p
            .wait_for_line("grandchild", Duration::from_secs(10))
            .await
            .unwrap();
        let grandchild: i32 = line
            .trim_start_matches("grandchild ")
            .trim()
            .parse()
            .unwrap();
        assert!(alive(grandchild));
        p.stop(Duration::from_secs(5)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !alive(grandchild),
            "grandchild {grandchild} survived stop()"
        );
    }

    #[tokio::test]
    async fn drop_stops_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sh("echo up; exec sleep 30", &dir.path().join("p.log"));
        p.wait_for_line("up", Duration::from_secs(10))
            .await
            .unwrap();
        let pid = p.pid() as i32;
        drop(p);
        assert!(!alive(pid));
    }

    #[tokio::test]
    async fn health_wait_is_bounded_and_names_the_url() {
        let dir = tempfile::tempdir().unwrap();
        // A port nobody listens on: bind, note it, release it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/health");
        let mut p = sh("exec sleep 30", &dir.path().join("p.log"));
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let t = Instant::now();
        let err = p
            .wait_for_http_ok(&http, &url, Duration::from_millis(500))
            .await
            .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(4));
        assert!(format!("{err:#}").contains(&url), "{err:#}");
    }

    #[test]
    fn command_line_quotes_what_needs_it() {
        let spec = ProcessSpec::new("/bin/echo", "x.log").args(["plain", "two words", "it's"]);
        assert_eq!(
            spec.command_line(),
            r"/bin/echo plain 'two words' 'it'\''s'"
        );
    }
}
