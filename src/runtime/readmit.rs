//! Readmission: a runtime goes back behind the router only after it proves
//! healthy. In order, stopping at the first failure: the health endpoint
//! answers 200; `/v1/models` serves exactly the expected model; a canary
//! smoke request's answer begins with its own unique marker; then the
//! optional hook (a command or an HTTP call) tells the router. A runtime that
//! fails a check is not admitted and the hook never runs for it.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::plan::{Hook, Readmission};
use crate::measure::client::{self, Client, ClientConfig, Endpoint, Timeouts};
use crate::measure::turnover::{canary, prompt};

/// The runtime being readmitted.
#[derive(Debug, Clone)]
pub struct Target {
    pub qualification: String,
    /// "baseline" or "candidate".
    pub runtime: String,
    /// Base URL without `/v1`.
    pub base_url: String,
    pub health_url: String,
    /// Name of the environment variable with the API key (never the key).
    pub api_key_env: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// health, identity, canary or hook.
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub admitted: bool,
    pub checks: Vec<Check>,
}

impl Outcome {
    /// The first failed check, as "name: detail".
    pub fn failure(&self) -> Option<String> {
        self.checks
            .iter()
            .find(|c| !c.passed)
            .map(|c| format!("{}: {}", c.name, c.detail))
    }
}

/// Run every check in order; `on_check` sees each result as it is known
/// (the caller writes them to the ledger).
pub async fn readmit(
    target: &Target,
    expected_model: &str,
    spec: &Readmission,
    mut on_check: impl FnMut(&Check),
) -> Result<Outcome> {
    let api_key = crate::util::api_key(target.api_key_env.as_deref())?;
    let mut checks = Vec::new();
    let mut record = |mut c: Check| -> bool {
        // Details are printed and recorded in the ledger: a target's
        // credentials never are.
        c.detail = crate::util::redact(&c.detail);
        on_check(&c);
        let passed = c.passed;
        checks.push(c);
        passed
    };

    let ok = record(health(&target.health_url, spec.timeout).await);
    let ok = ok && record(identity(&target.base_url, api_key.as_deref(), expected_model).await);
    let ok = ok
        && (!spec.canary
            || record(canary(&target.base_url, api_key.clone(), expected_model).await));
    let ok = ok
        && match &spec.hook {
            None => true,
            Some(h) => record(run_hook(h, target, expected_model).await),
        };
    Ok(Outcome {
        admitted: ok,
        checks,
    })
}

/// The checks' HTTP client (no proxy: the runtime is on loopback), or why
/// there is none.
fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("building HTTP client: {e}"))
}

async fn health(url: &str, timeout: Duration) -> Check {
    let name = "health".to_string();
    let http = match http_client() {
        Ok(h) => h,
        Err(detail) => {
            return Check {
                name,
                passed: false,
                detail,
            };
        }
    };
    let t0 = Instant::now();
    let mut last = String::from("no attempt finished");
    loop {
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return Check {
                name,
                passed: false,
                detail: format!("GET {url} did not answer 200 within {timeout:?} (last: {last})"),
            };
        }
        match http
            .get(url)
            .timeout(left.min(Duration::from_secs(5)))
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::OK => {
                return Check {
                    name,
                    passed: true,
                    detail: format!("GET {url}: 200 after {:.1} s", t0.elapsed().as_secs_f64()),
                };
            }
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.without_url().to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn identity(base_url: &str, api_key: Option<&str>, expected: &str) -> Check {
    let name = "identity".to_string();
    let http = match http_client() {
        Ok(h) => h,
        Err(detail) => {
            return Check {
                name,
                passed: false,
                detail,
            };
        }
    };
    match crate::measure::discover::discover(
        &http,
        base_url,
        api_key,
        crate::measure::discover::REQUEST_TIMEOUT,
    )
    .await
    {
        Ok(info) if info.model_id == expected => Check {
            name,
            passed: true,
            detail: format!("/v1/models serves {expected:?}"),
        },
        Ok(info) => Check {
            name,
            passed: false,
            detail: format!(
                "/v1/models serves {:?}, expected {expected:?}",
                info.model_id
            ),
        },
        Err(e) => Check {
            name,
            passed: false,
            detail: format!("{e:#}"),
        },
    }
}

/// A fresh canary marker in the turnover shape (`K48213`): that shape, unlike
/// long hex strings, is what even the 135M reference model echoes reliably
/// (a hex marker `IG2E1EE1081C` once came back as `IG2E1EE1E1081C`).
pub fn new_marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let key = canary::marker_key(&format!("readmit-{nanos}"), u64::from(std::process::id()));
    canary::marker(key, 0)
}

/// Code word and count of the canary request: the turnover `words` protocol
/// at its calibrated setting (see `turnover::prompt`).
const CANARY_WORD: &str = "cedar";
const CANARY_WORDS: usize = 4;
const CANARY_SHOTS: usize = 3;

/// Messages asking the model to write `marker` and then the code word: the
/// turnover `words` prompt, whose worked examples each begin with their own
/// marker, so a runtime that answers anything else is not serving correctly.
pub fn canary_messages(marker: &str) -> Value {
    prompt::words_messages(marker, CANARY_WORD, CANARY_WORDS, CANARY_SHOTS)
}

async fn canary(base_url: &str, api_key: Option<String>, model: &str) -> Check {
    let name = "canary".to_string();
    let marker = new_marker();
    let cfg = ClientConfig {
        base_url: base_url.to_string(),
        api_key,
        timeouts: Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(180),
            per_1k_prompt_tokens: Duration::ZERO,
        },
        capture_cap_bytes: 64 * 1024,
    };
    let client = match Client::new(cfg) {
        Ok(c) => c,
        Err(e) => {
            return Check {
                name,
                passed: false,
                detail: format!("{e:#}"),
            };
        }
    };
    let mut extra = serde_json::Map::new();
    extra.insert("model".into(), json!(model));
    let body = client::chat_body(canary_messages(&marker), 16, 0.0, Some(1), extra);
    let cap = client.stream(Endpoint::Chat, &body).await;
    if let Some(f) = &cap.failure {
        return Check {
            name,
            passed: false,
            detail: format!("{}: {}", f.class.as_str(), f.message),
        };
    }
    let answer = cap.content.trim_start();
    if canary::begins_with(answer, &marker) {
        Check {
            name,
            passed: true,
            detail: format!("answer begins with its marker {marker}"),
        }
    } else {
        let shown: String = answer.chars().take(80).collect();
        Check {
            name,
            passed: false,
            detail: format!("answer does not begin with its marker {marker}: {shown:?}"),
        }
    }
}

async fn run_hook(hook: &Hook, t: &Target, model: &str) -> Check {
    let env = [
        ("INFERGATE_ACTION", "admit"),
        ("INFERGATE_QUALIFICATION", t.qualification.as_str()),
        ("INFERGATE_RUNTIME", t.runtime.as_str()),
        ("INFERGATE_BASE_URL", t.base_url.as_str()),
        ("INFERGATE_MODEL", model),
    ];
    let json = json!({
        "action": "admit",
        "qualification": t.qualification,
        "runtime": t.runtime,
        "base_url": t.base_url,
        "model": model,
    })
    .to_string();
    let call = super::hook::Call {
        env: &env,
        json: json.as_bytes(),
        stdin: false,
    };
    let (passed, detail) = match super::hook::run(hook, &call).await {
        Ok(line) => (true, line),
        Err(line) => (false, line),
    };
    Check {
        name: "hook".to_string(),
        passed,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_distinct_and_shaped() {
        let a = new_marker();
        std::thread::sleep(Duration::from_millis(1));
        let b = new_marker();
        assert_ne!(a, b);
        assert_eq!(canary::marker_shaped(&a).collect::<Vec<_>>(), [a.as_str()]);
        // Worked examples start with Q or X; a canary marker never does.
        assert!(!a.starts_with(['Q', 'X']), "{a}");
    }

    #[tokio::test]
    async fn command_hook_sees_the_runtime_and_its_failure_is_reported() {
        let t = Target {
            qualification: "q1".into(),
            runtime: "baseline".into(),
            base_url: "http://127.0.0.1:9".into(),
            health_url: "http://127.0.0.1:9/health".into(),
            api_key_env: None,
        };
        let ok = Hook::Command {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "test \"$INFERGATE_RUNTIME:$INFERGATE_MODEL\" = baseline:m".into(),
            ],
            timeout: Duration::from_secs(10),
        };
        assert!(run_hook(&ok, &t, "m").await.passed);
        let bad = Hook::Command {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo router said no >&2; exit 3".into(),
            ],
            timeout: Duration::from_secs(10),
        };
        let c = run_hook(&bad, &t, "m").await;
        assert!(!c.passed);
        assert!(
            c.detail.contains("exited 3") && c.detail.contains("router said no"),
            "{}",
            c.detail
        );
    }
}
