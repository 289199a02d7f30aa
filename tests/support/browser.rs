//! Headless Chromium for the HTML pages' tests: the browser
//! `scripts/setup-chromium.sh` installs, run with no network.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser `scripts/setup-chromium.sh` found or installed.
pub fn chromium() -> PathBuf {
    let found = std::env::var_os("INFERGATE_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        });
    found.unwrap_or_else(|| {
        panic!("no chromium: run scripts/setup-chromium.sh (scripts/test.sh does) or set INFERGATE_CHROMIUM")
    })
}

/// Headless Chromium on `page` with a fresh profile and no network: `args`
/// say what to produce (`--dump-dom`, `--screenshot=…`).
pub fn headless(page: &Path, profile: &Path, args: &[String]) -> std::process::Output {
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-extensions",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            // Nothing may resolve, and nothing may go through a proxy
            // (port 9 on loopback accepts nothing): a request that tried to
            // leave would fail.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=http://127.0.0.1:9",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts")
}

/// Every `<svg …>…</svg>` in `dom`, in order.
pub fn svgs(dom: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("<svg") {
        let Some(j) = rest[i..].find("</svg>") else {
            break;
        };
        out.push(&rest[i..i + j + 6]);
        rest = &rest[i + j + 6..];
    }
    out
}

/// A screenshot of `page` at `size` ("W,H") into `shot`, checked to be a
/// PNG of more than `min_bytes` (a blank page is smaller).
pub fn screenshot(page: &Path, profile: &Path, shot: &Path, size: &str, min_bytes: usize) {
    let _ = std::fs::remove_file(shot);
    let res = headless(
        page,
        profile,
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size={size}"),
            "--hide-scrollbars".to_string(),
        ],
    );
    assert!(
        res.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    let png = std::fs::read(shot).expect("a screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > min_bytes,
        "{} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}
