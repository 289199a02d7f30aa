//! The HTML report in a real browser: a report compared from two real runs
//! of the reference engine, rendered, then loaded by headless Chromium
//! (Debian's, installed by `scripts/setup-chromium.sh`, which
//! `scripts/test.sh` runs). The page must load with no request leaving the
//! machine (no network URL anywhere in the DOM the browser built, and DNS
//! mapped to nothing so none could resolve), every plot's SVG must carry its
//! points, and a screenshot is saved under the test's output directory.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use infergate::measure::runner::{self, ARTIFACT_FILE};
use infergate::report;

const SUITE: &str = r#"
name = "browser"
[[cell]]
name = "c1"
prompt_tokens = 128
tolerance_percent = 25
max_tokens = 4
requests = 4
seed = 2
slo = { ttft_ms = 60000 }
"#;

/// The browser `scripts/setup-chromium.sh` found or installed.
fn chromium() -> PathBuf {
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
fn headless(page: &Path, profile: &Path, args: &[String]) -> std::process::Output {
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
fn svgs(dom: &str) -> Vec<&str> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_loads_offline_in_chromium_with_every_plot_drawn() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let (base, cand) = (dir.path().join("base"), dir.path().join("cand"));
    for out in [&base, &cand] {
        runner::run(&support::run_opts(
            &engine.base_url,
            suite.clone(),
            out.clone(),
        ))
        .await
        .expect("run");
    }
    let rep = report::compare_files(&base.join(ARTIFACT_FILE), &cand.join(ARTIFACT_FILE), None)
        .expect("compare");

    // Kept after the test: the page and its screenshot are the evidence.
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).unwrap();
    let page = out.join("report.html");
    std::fs::write(&page, report::html(&rep)).unwrap();
    let profile = tempfile::tempdir().unwrap();

    let dump = headless(&page, profile.path(), &["--dump-dom".to_string()]);
    assert!(
        dump.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let dom = String::from_utf8_lossy(&dump.stdout);
    assert!(
        dom.contains("<h3>Cell <code>c1</code></h3>"),
        "the page loaded: {dom:.400}"
    );

    // The rendered page in reading order: the verdict, the gates, the
    // evidence, then the cells; server detail folded (closed) per cell.
    let at = |what: &str| {
        dom.find(what)
            .unwrap_or_else(|| panic!("{what} not on the page: {dom:.400}"))
    };
    let verdict = format!(
        "<h1>Runtime comparison: {}</h1>",
        rep.qualification.replace('&', "&amp;")
    );
    let order = [
        at(&verdict),
        at("<h2>Gates</h2>"),
        at("<h3>Evidence gate: "),
        at("<h2>Performance cells</h2>"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert!(
        dom.contains("<details class=\"small\"><summary>server: ")
            && !dom.contains("<details class=\"small\" open"),
        "server detail folded"
    );

    // Nothing on the page asks for the network.
    for attr in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "url(http",
        "@import",
    ] {
        assert!(
            !dom.contains(attr),
            "the page references the network ({attr})"
        );
    }

    // Each plot has its points: strip plots and time series draw circles
    // (or, for a failed request, a marked ×).
    let plots = svgs(&dom);
    assert!(
        plots.len() >= 5,
        "three metric strip plots and two time series: {}",
        plots.len()
    );
    for (i, svg) in plots.iter().enumerate() {
        let points = svg.matches("<circle").count() + svg.matches(">×<").count();
        assert!(points > 0, "plot {i} has no points: {svg:.300}");
    }
    let series: Vec<&&str> = plots
        .iter()
        .filter(|s| s.contains("by request, in send order"))
        .collect();
    assert_eq!(series.len(), 2, "TTFT and e2e over the run");
    for s in series {
        assert_eq!(
            s.matches("<circle").count(),
            8,
            "4 requests a side, each a point"
        );
    }

    // The server's gauges over the cell, both sides on each plot.
    let gauges: Vec<&&str> = plots.iter().filter(|s| s.contains(", by scrape")).collect();
    assert!(
        gauges
            .iter()
            .any(|s| s.contains("llamacpp:requests_processing")),
        "the server's gauges are plotted: {} gauge plots",
        gauges.len()
    );
    for g in gauges {
        assert_eq!(
            g.matches("<polyline").count(),
            2,
            "a line per side: {g:.300}"
        );
    }

    let shot = out.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let res = headless(
        &page,
        profile.path(),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2400".to_string(),
            "--hide-scrollbars".to_string(),
        ],
    );
    assert!(
        res.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    let png = std::fs::read(&shot).expect("a screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}
