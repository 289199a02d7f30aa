//! Small helpers every stage uses: timestamps, hashes, URL redaction, the
//! API key from the environment. A leaf: it imports nothing of this crate
//! (sha256 is the report crate's, re-exported).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// Read the API key named by `env`, failing clearly (without echoing any value).
pub fn api_key(env: Option<&str>) -> Result<Option<String>> {
    match env {
        None => Ok(None),
        Some(name) => match std::env::var(name) {
            Ok(v) if !v.is_empty() => Ok(Some(v)),
            _ => bail!("environment variable {name} (named by --api-key-env) is not set or empty"),
        },
    }
}

/// Drop any userinfo (user:password@) and any `password=` value from a URL
/// before it is written anywhere: [`redact`], for a URL.
pub fn redact_url(url: &str) -> String {
    redact(url)
}

/// What [`redact`] puts where a secret was.
pub const REDACTED: &str = "<redacted>";

/// The one redaction rule for every message that can carry a URL or a
/// connection string: in `text`, the userinfo of each `scheme://user:pass@host`
/// is dropped, and the value of each `…password=VALUE` key (URL query
/// parameters, libpq `key=value` strings, `PGPASSWORD=…`; quoted values
/// included) and of each token, key or signature parameter ([`secret_key`])
/// becomes `<redacted>`.
pub fn redact(text: &str) -> String {
    redact_passwords(&redact_userinfo(text))
}

/// [`redact`] every string in a JSON value, in place: what a ledger row
/// written by an older infergate may hold is never shown.
pub fn redact_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            let r = redact(s);
            if r != *s {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_json),
        serde_json::Value::Object(o) => o.values_mut().for_each(redact_json),
        _ => {}
    }
}

fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | ')' | '>') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => rest = &tail[at + 1..],
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// Keys whose values are credentials: passwords, and the tokens, keys and
/// signatures a URL's query can carry (`?token=`, `?api_key=`, `&sig=`).
fn secret_key(key: &str) -> bool {
    key.ends_with("password")
        || key.ends_with("token")
        || key.ends_with("secret")
        || matches!(
            key,
            "passwd" | "key" | "apikey" | "api_key" | "access_key" | "sig" | "signature" | "auth"
        )
}

fn redact_passwords(text: &str) -> String {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i) = (0, 0);
    while i < b.len() {
        if b[i] != b'=' {
            i += 1;
            continue;
        }
        // The key: the word before `=` (spaces allowed between, as libpq does).
        let mut k = i;
        while k > 0 && b[k - 1] == b' ' {
            k -= 1;
        }
        let key_end = k;
        while k > 0 && word(b[k - 1]) {
            k -= 1;
        }
        let key = text[k..key_end].to_ascii_lowercase();
        if !secret_key(&key) {
            i += 1;
            continue;
        }
        let mut v = i + 1;
        while v < b.len() && b[v] == b' ' {
            v += 1;
        }
        let mut end = v;
        if end < b.len() && (b[end] == b'\'' || b[end] == b'"') {
            let q = b[end];
            end += 1;
            while end < b.len() && b[end] != q {
                end += if b[end] == b'\\' { 2 } else { 1 };
            }
            end = (end + 1).min(b.len());
        } else {
            while end < b.len()
                && !matches!(b[end], b'&' | b'#' | b';' | b',' | b')')
                && !b[end].is_ascii_whitespace()
            {
                end += 1;
            }
            // A message's own `: ` after the value stays.
            if end > v && b[end - 1] == b':' {
                end -= 1;
            }
        }
        out.push_str(&text[copied..v]);
        out.push_str(REDACTED);
        copied = end;
        i = end.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub use infergate_report::digest::sha256_hex;

/// Bytes of one input file a suite names (a dataset, a schema, a tools or
/// task file, a tokenizer), and of the suite, plan or policy file itself:
/// each is held whole in memory. Counted as the file is read, not taken
/// from the size it reports.
pub const MAX_INPUT_FILE_BYTES: u64 = 64 << 20;

/// Read an input file (suite, plan, gate policy, embeddings inputs) as
/// text: a regular file of at most [`MAX_INPUT_FILE_BYTES`].
pub fn read_input(path: &std::path::Path) -> std::io::Result<String> {
    #[cfg(feature = "read-counts")]
    read_counts::count(path);
    let limit = MAX_INPUT_FILE_BYTES;
    String::from_utf8(crate::report::files::read_regular_at_most(path, limit)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// `command` as a path (contains a slash) or looked up on PATH.
pub fn which(command: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if command.contains('/') {
        let p = PathBuf::from(command);
        return executable(&p).then_some(p);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|d| d.join(command))
        .find(|p| executable(p))
}

/// How many times this process read each input file (suites, gate
/// policies, journals), for the tests that hold a qualification to reading
/// its suite and policy once and pooling its blocks in memory
/// (`tests/qualify.rs`). Behind the `read-counts` feature: never in a
/// release build.
#[cfg(feature = "read-counts")]
pub mod read_counts {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, PoisonError};

    static READS: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

    /// Count one read of `path`.
    pub fn count(path: &Path) {
        READS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(path.to_path_buf())
            .and_modify(|n| *n += 1)
            .or_insert(1);
    }

    /// How many times `path` (as given) has been read in this process.
    pub fn reads(path: &Path) -> usize {
        READS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials_in_urls() {
        assert_eq!(
            redact_url("http://u:secret@127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1"
        );
        assert_eq!(redact_url("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }

    #[test]
    fn one_rule_for_userinfo_and_passwords_in_any_message() {
        for (text, want) in [
            (
                "ledger URL postgres://alice:pw@127.0.0.1:1/db?sslmode=disable&password=secret&x=1: refused",
                "ledger URL postgres://127.0.0.1:1/db?sslmode=disable&password=<redacted>&x=1: refused",
            ),
            (
                "GET http://user:secret@127.0.0.1:1/v1/models: refused; again http://u@h/x",
                "GET http://127.0.0.1:1/v1/models: refused; again http://h/x",
            ),
            (
                "host=127.0.0.1 port=1 password=secret dbname=x",
                "host=127.0.0.1 port=1 password=<redacted> dbname=x",
            ),
            (
                "host=h password = 'se cret\\' x' user=u",
                "host=h password = <redacted> user=u",
            ),
            ("PGPASSWORD=secret psql", "PGPASSWORD=<redacted> psql"),
            (
                "GET http://h:1/?token=secret&api_key=secret&sig=secret&n=2: refused",
                "GET http://h:1/?token=<redacted>&api_key=<redacted>&sig=<redacted>&n=2: refused",
            ),
            ("a=b c==d password=", "a=b c==d password=<redacted>"),
            (
                "ledger URL h/db?password=secret: holds a password",
                "ledger URL h/db?password=<redacted>: holds a password",
            ),
        ] {
            assert_eq!(redact(text), want, "{text}");
            assert!(!redact(text).contains("secret"));
        }
    }

    #[test]
    fn missing_key_env_is_a_clear_error() {
        let err = api_key(Some("INFERGATE_TEST_SURELY_UNSET_VAR"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("INFERGATE_TEST_SURELY_UNSET_VAR"), "{err}");
    }
}
