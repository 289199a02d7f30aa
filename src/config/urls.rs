//! The URLs a user names for a runtime (a target, a plan's `url`,
//! `base_url`, `health_url`, a metrics endpoint), checked where they are
//! read: http(s), endpoints joined to the URL's path (so no query string or
//! fragment, which a path appended after them would land in), and, where
//! the URL is kept in the ledger or a plan copy, no password.

/// Whether a password in the URL's userinfo may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Password {
    /// Refused: the URL is kept as written (a plan, its copy, the ledger).
    Refused,
    /// Allowed: the URL is used, and only ever shown redacted (`run --target`).
    Redacted,
}

/// Check `url`; the error shows it redacted.
pub fn check_http_url(url: &str, password: Password) -> Result<(), String> {
    let shown = crate::util::redact_url(url);
    // The parser drops these silently, so the URL kept (in a plan, its
    // first comment line, the ledger) would not be the URL used.
    if url.trim() != url || url.chars().any(char::is_control) {
        return Err(format!(
            "{shown:?} holds a control character (a newline?) or surrounding whitespace"
        ));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{shown:?} is not an http(s) URL"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        let mut bare = parsed.clone();
        bare.set_query(None);
        bare.set_fragment(None);
        let bare = crate::util::redact_url(bare.as_str());
        return Err(format!(
            "{bare:?} with a query string or fragment (not shown): infergate appends its endpoints (/v1/models, /v1/chat/completions, /metrics) to the URL's path, and a credential there would be sent and shown; give a key with api_key_env / --api-key-env"
        ));
    }
    if password == Password::Refused && parsed.password().is_some() {
        return Err(format!(
            "{shown:?} (its userinfo not shown) holds a password, which would be kept in the ledger and the qualification's plan copy: give the credential with api_key_env (an environment variable's name)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_fragments_and_kept_passwords_are_refused_without_showing_them() {
        for ok in [
            "http://127.0.0.1:8000",
            "https://h/prefix/",
            "http://user@127.0.0.1:1",
        ] {
            check_http_url(ok, Password::Refused).unwrap();
        }
        check_http_url("http://u:secret@127.0.0.1:1", Password::Redacted).unwrap();
        for (bad, why) in [
            ("http://127.0.0.1:1/?token=secret", "query string"),
            ("http://127.0.0.1:1/#secret", "fragment"),
            ("http://u:secret@127.0.0.1:1", "holds a password"),
            ("ftp://127.0.0.1/secret", "not an http(s) URL"),
            ("127.0.0.1:8000", "not a URL"),
            ("http://127.0.0.1:1\n", "control character"),
            ("http://127.0.0.1:1/a\tb", "control character"),
            (" http://127.0.0.1:1", "surrounding whitespace"),
        ] {
            let e = check_http_url(bad, Password::Refused).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            if bad.starts_with("http") {
                assert!(!e.contains("secret"), "{bad}: {e}");
            }
        }
        let e = check_http_url("http://u:secret@h/?token=secret", Password::Redacted).unwrap_err();
        assert!(e.contains("query string") && !e.contains("secret"), "{e}");
    }
}
