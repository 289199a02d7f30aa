//! Running one hook of a plan (readmission's, or `[hooks]`'): a command,
//! given environment variables and, when asked, a JSON document on its
//! standard input; or a POST of that document. Bounded by the hook's
//! timeout (a command past it is killed). What happened is one line that
//! names the hook: `Ok` when it succeeded, `Err` when not.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;

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
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("`{shown}` could not run: {e}"))?;
    let stdin = child.stdin.take();
    let done = async {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: its choice.
            let _ = stdin.write_all(call.json).await;
        }
        child.wait_with_output().await
    };
    let out = match tokio::time::timeout(timeout, done).await {
        Err(_) => {
            return Err(format!(
                "`{shown}` did not finish within {timeout:?}; killed"
            ));
        }
        Ok(Err(e)) => return Err(format!("`{shown}` could not run: {e}")),
        Ok(Ok(out)) => out,
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail = last_chars(stderr.trim(), STDERR_TAIL);
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    };
    match out.status.code() {
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
        .build()
        .map_err(|e| format!("{shown}: building HTTP client: {e}"))?;
    let mut req = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(json.to_vec());
    if let Some(key) = crate::util::api_key(bearer_env).map_err(|e| format!("{shown}: {e:#}"))? {
        req = req.bearer_auth(key);
    }
    let status = req
        .send()
        .await
        .map_err(|e| format!("{shown}: {}", e.without_url()))?
        .status();
    let line = format!("{shown}: HTTP {status}");
    if status.is_success() {
        Ok(line)
    } else {
        Err(line)
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
}
