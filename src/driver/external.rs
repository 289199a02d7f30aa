//! The external driver: a runtime infergate does not control. It is never
//! started, stopped or restarted; infergate only checks that it answers.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Wait until `url + health_path` answers 200, at most `timeout`.
pub async fn wait_healthy(url: &str, health_path: &str, timeout: Duration) -> Result<()> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building HTTP client")?;
    let health = format!("{}{health_path}", url.trim_end_matches('/'));
    let t0 = Instant::now();
    let mut last = String::from("no attempt finished");
    loop {
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            bail!(
                "external runtime {}: GET {} did not answer 200 within {timeout:?} (last: {last}); \
                 infergate does not control it, so it cannot restart it",
                crate::util::redact_url(url),
                crate::util::redact_url(&health)
            );
        }
        match http
            .get(&health)
            .timeout(left.min(Duration::from_secs(5)))
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::OK => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.without_url().to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
