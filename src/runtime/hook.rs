//! Running one hook of a plan (readmission's, or `[hooks]`'): a command,
//! given environment variables and, when asked, a JSON document on its
//! standard input; or a POST of that document, whose redirect is not
//! followed. Bounded by the hook's timeout. A command runs in a process
//! group of its own, killed whole once the command has exited or is past
//! its timeout: nothing it started outlives it unless it detached it
//! (`setsid`). What happened is one line that names the hook: `Ok` when
//! it succeeded, `Err` when not.

use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::config::plan::Hook;

/// What a hook is given.
pub struct Call<'a> {
    /// Environment variables of a command.
    pub env: &'a [(&'a str, &'a str)],
    /// The JSON document: a URL's body, and a command's standard input
    /// when `stdin` (else its standard input is empty).
    pub json: &'a [u8],
    pub stdin: bool,
}

/// Characters of a failed command's standard error kept in its line.
const STDERR_TAIL: usize = 300;

/// Bytes of a command's standard error held while it runs: the last ones.
const STDERR_KEEP: usize = 4096;

/// How long, once a command has ended, what it wrote to its standard error
/// is read on for (a child that detached itself may keep the pipe open).
const STDERR_DRAIN: std::time::Duration = std::time::Duration::from_millis(200);

/// How a hook is shown: its command line, or `POST` and its URL (redacted).
pub fn shown(hook: &Hook) -> String {
    match hook {
        Hook::Command { argv, .. } => argv.join(" "),
        Hook::Http { url, .. } => format!("POST {}", crate::util::redact_url(url)),
    }
}

/// Run `hook` with `call`; the line says what happened.
pub async fn run(hook: &Hook, call: &Call<'_>) -> Result<String, String> {
    match hook {
        Hook::Command { argv, timeout } => command(argv, *timeout, call).await,
        Hook::Http {
            url,
            timeout,
            bearer_env,
        } => post(url, *timeout, bearer_env.as_deref(), call.json).await,
    }
}

async fn command(
    argv: &[String],
    timeout: std::time::Duration,
    call: &Call<'_>,
) -> Result<String, String> {
    let shown = argv.join(" ");
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| "empty hook command".to_string())?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .envs(call.env.iter().copied())
        .stdin(if call.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: what it starts is ended with it.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("`{shown}` could not run: {e}"))?;
    let group = child.id();
    let stdin = child.stdin.take();
    let stderr = child.stderr.take();
    let mut tail = Tail::default();
    let status = {
        let feed = async {
            if let Some(mut stdin) = stdin {
                // A hook that does not read its input closes the pipe: its choice.
                let _ = stdin.write_all(call.json).await;
            }
        };
        let read = async {
            if let Some(stderr) = stderr {
                tail.read_from(stderr).await;
            }
        };
        // The hook's end is its process's exit, not the end of its pipes:
        // a child it left behind may hold them open.
        let exit = tokio::time::timeout(timeout, child.wait());
        tokio::pin!(feed, read, exit);
        let (mut fed, mut read_all) = (false, false);
        let status = loop {
            tokio::select! {
                s = &mut exit => break s,
                () = &mut feed, if !fed => fed = true,
                () = &mut read, if !read_all => read_all = true,
            }
        };
        // Exited or past its timeout: whatever else is in its group goes too.
        kill_group(group);
        if !read_all {
            // What it wrote before it ended is in the pipe already; a
            // writer that detached itself cannot hold the line up for long.
            let _ = tokio::time::timeout(STDERR_DRAIN, &mut read).await;
        }
        status
    };
    let status = match status {
        Err(_) => {
            let _ = child.wait().await;
            return Err(format!(
                "`{shown}` did not finish within {timeout:?}; killed"
            ));
        }
        Ok(Err(e)) => return Err(format!("`{shown}` could not run: {e}")),
        Ok(Ok(status)) => status,
    };
    let stderr = tail.text();
    let tail = last_chars(stderr.trim(), STDERR_TAIL);
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    };
    match status.code() {
        Some(0) => Ok(format!("`{shown}` exited 0")),
        Some(c) => Err(format!("`{shown}` exited {c}{tail}")),
        None => Err(format!("`{shown}` was killed by a signal{tail}")),
    }
}

async fn post(
    url: &str,
    timeout: std::time::Duration,
    bearer_env: Option<&str>,
    json: &[u8],
) -> Result<String, String> {
    let shown = format!("POST {}", crate::util::redact_url(url));
    let http = crate::measure::http_client()
        .timeout(timeout)
        // A redirect would turn the POST into a GET elsewhere, without the
        // summary: the hook's answer is the first one.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("{shown}: building HTTP client: {e}"))?;
    let mut req = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(json.to_vec());
    if let Some(key) = crate::util::api_key(bearer_env).map_err(|e| format!("{shown}: {e:#}"))? {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.map_err(|e| {
        if e.is_timeout() {
            format!("{shown}: timed out: no answer within {timeout:?}")
        } else {
            format!("{shown}: {}", e.without_url())
        }
    })?;
    let status = resp.status();
    if status.is_redirection() {
        let to = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|l| crate::util::redact_url(&String::from_utf8_lossy(l.as_bytes())))
            .unwrap_or_else(|| "nowhere (no Location)".to_string());
        return Err(format!(
            "{shown}: HTTP {status} (redirect to {to} not followed)"
        ));
    }
    let line = format!("{shown}: HTTP {status}");
    if status.is_success() {
        Ok(line)
    } else {
        Err(line)
    }
}

/// Kill every process of the group `group` leads: what a hook started and
/// left behind. A group that is gone already is no error.
fn kill_group(group: Option<u32>) {
    if let Some(pgid) = group.and_then(|g| libc::pid_t::try_from(g).ok())
        && pgid > 0
    {
        // SAFETY: killpg only sends a signal, to the group our child leads.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}

/// The last [`STDERR_KEEP`] bytes of a stream: however much it carries,
/// no more is held.
#[derive(Debug, Default)]
struct Tail {
    bytes: Vec<u8>,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(STDERR_KEEP)..];
        let over = (self.bytes.len() + chunk.len()).saturating_sub(STDERR_KEEP);
        self.bytes.drain(..over);
        self.bytes.extend_from_slice(chunk);
    }

    /// Read `r` to its end (or an error), keeping the tail.
    async fn read_from(&mut self, mut r: impl AsyncRead + Unpin) {
        let mut chunk = vec![0; 8192];
        while let Ok(n @ 1..) = r.read(&mut chunk).await {
            self.push(&chunk[..n]);
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The last `n` characters of `s`.
fn last_chars(s: &str, n: usize) -> &str {
    match s.char_indices().rev().nth(n.saturating_sub(1)) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_characters_whole() {
        assert_eq!(last_chars("abcdé", 2), "dé");
        assert_eq!(last_chars("ab", 5), "ab");
        assert_eq!(last_chars("", 3), "");
    }

    #[test]
    fn the_stderr_tail_holds_the_last_bytes_and_no_more() {
        let mut t = Tail::default();
        for i in 0..10_000u32 {
            t.push(format!("line {i}\n").as_bytes());
            assert!(t.bytes.len() <= STDERR_KEEP);
        }
        t.push(&vec![b'x'; 3 * STDERR_KEEP]);
        t.push(b"the end");
        assert_eq!(t.bytes.len(), STDERR_KEEP);
        assert!(
            t.bytes.capacity() <= 2 * STDERR_KEEP,
            "{}",
            t.bytes.capacity()
        );
        assert!(t.text().ends_with("xxthe end"));
    }

    fn command_hook(script: &str, timeout_s: u64) -> Hook {
        Hook::Command {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            timeout: std::time::Duration::from_secs(timeout_s),
        }
    }

    const NO_INPUT: Call<'static> = Call {
        env: &[],
        json: b"{}",
        stdin: true,
    };

    /// Whether process `pid` has ended: gone, or a zombie not reaped yet.
    fn ended(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // The state follows the command name's closing parenthesis.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        }
    }

    /// Polls `ended` for up to 20 s.
    async fn ends(pid: &str) -> bool {
        for _ in 0..200 {
            if ended(pid) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        false
    }

    /// A command that starts a child in the background and exits 0 has
    /// succeeded when it exits, though the child holds its standard error;
    /// the child is killed with it. One still running at its timeout is
    /// killed with its children.
    #[tokio::test]
    async fn a_command_hook_ends_with_its_process_and_its_children_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "sleep 97 & echo $! > {}; echo started >&2; exit 0",
            pid_file.display()
        );
        let line = run(&command_hook(&script, 20), &NO_INPUT).await;
        assert!(
            matches!(&line, Ok(l) if l.ends_with("exited 0")),
            "{line:?}"
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let pid = pid.trim();
        assert!(
            ends(pid).await,
            "the background sleep {pid} outlived its hook"
        );

        let script = format!("sleep 98 & echo $! > {}; sleep 99", pid_file.display());
        let line = run(&command_hook(&script, 1), &NO_INPUT).await;
        assert!(
            matches!(&line, Err(l) if l.ends_with("did not finish within 1s; killed")),
            "{line:?}"
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let pid = pid.trim();
        assert!(
            ends(pid).await,
            "the background sleep {pid} outlived its hook's timeout"
        );
    }

    /// A command's standard error is still in its line when it fails.
    #[tokio::test]
    async fn a_failed_command_hook_shows_the_end_of_its_stderr() {
        let line = run(
            &command_hook("echo first >&2; echo refused by the pager >&2; exit 3", 20),
            &NO_INPUT,
        )
        .await;
        assert_eq!(
            line,
            Err("`/bin/sh -c echo first >&2; echo refused by the pager >&2; exit 3` exited 3: first\nrefused by the pager".to_string())
        );
    }

    fn url_hook(url: String, timeout_s: u64) -> Hook {
        Hook::Http {
            url,
            timeout: std::time::Duration::from_secs(timeout_s),
            bearer_env: None,
        }
    }

    /// Reads one request's head from `s`.
    async fn read_head(s: &mut tokio::net::TcpStream) {
        let mut head = Vec::new();
        let mut b = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut b).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&b[..n]),
            }
        }
    }

    /// A URL hook answered with a redirect is not carried elsewhere: the
    /// redirect is recorded as the hook's failure, and the place it points
    /// to never hears from it.
    #[tokio::test]
    async fn a_url_hook_does_not_follow_a_redirect_and_says_so() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let elsewhere_url = format!("http://{}/elsewhere", elsewhere.local_addr().unwrap());
        let heard = Arc::new(AtomicUsize::new(0));
        let count = heard.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = elsewhere.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                read_head(&mut s).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        });
        let hook = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/r", hook.local_addr().unwrap());
        let answer = format!(
            "HTTP/1.1 302 Found\r\nlocation: {elsewhere_url}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
        tokio::spawn(async move {
            while let Ok((mut s, _)) = hook.accept().await {
                read_head(&mut s).await;
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        let line = run(&url_hook(url.clone(), 20), &NO_INPUT).await;
        assert_eq!(
            line,
            Err(format!(
                "POST {url}: HTTP 302 Found (redirect to {elsewhere_url} not followed)"
            ))
        );
        assert_eq!(heard.load(Ordering::SeqCst), 0, "the redirect was followed");
    }

    /// A URL that accepts the connection and never answers: the hook's line
    /// says it timed out.
    #[tokio::test]
    async fn a_url_hook_past_its_timeout_says_it_timed_out() {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/silent", silent.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                held.push(s);
            }
        });
        let line = run(&url_hook(url.clone(), 1), &NO_INPUT).await;
        assert_eq!(
            line,
            Err(format!("POST {url}: timed out: no answer within 1s"))
        );
    }
}
