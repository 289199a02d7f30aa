//! Small helpers every stage uses: timestamps, hashes, URL redaction, the
//! API key from the environment. A leaf: it imports nothing of this crate
//! (sha256 is the report crate's, re-exported).

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

/// Drop any userinfo (user:password@) from a URL before it is written anywhere.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
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
    fn missing_key_env_is_a_clear_error() {
        let err = api_key(Some("INFERGATE_TEST_SURELY_UNSET_VAR"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("INFERGATE_TEST_SURELY_UNSET_VAR"), "{err}");
    }
}
