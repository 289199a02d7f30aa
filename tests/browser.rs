//! The HTML report in a real browser: a report compared from two real runs
//! of the reference engine, rendered, then loaded by headless Chromium
//! (Debian's, installed by `scripts/setup-chromium.sh`, which
//! `scripts/test.sh` runs). The page must load with no request leaving the
//! machine (no network URL anywhere in the DOM the browser built, and DNS
//! mapped to nothing so none could resolve), every plot's SVG must carry its
//! points, and a screenshot is saved under the test's output directory.

mod support;

use std::path::Path;

use support::browser::{headless, svgs};

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

    support::browser::screenshot(
        &page,
        profile.path(),
        &out.join("report.png"),
        "1280,2400",
        20_000,
    );
}

/// `history --html` in Chromium: eight builds of one repository, each
/// paired with the one before it (the ledger's rows as `qualify` writes
/// them), TTFT 20 % worse from the fifth on: the page draws a point per
/// build, the cumulative line along the chain from the anchor, the change
/// point at the fifth build, the anchor, and loads with nothing fetched.
#[test]
fn the_history_page_draws_the_series_the_anchor_and_a_change_point_offline() {
    use infergate::runtime::ledger::{Ledger, Status};
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("L.sqlite");
    let l = Ledger::open(&ledger).unwrap();
    let image = |b: usize| {
        format!(
            "127.0.0.1:5000/engine@sha256:{}",
            format!("{b:x}").repeat(64)
        )
    };
    for b in 1..=8usize {
        let q = format!("build-{b}");
        let log_ratio = if b == 5 {
            0.18
        } else {
            0.004 * (b % 3) as f64 - 0.004
        };
        l.append(&q, "plan", None, Status::Ok, json!({})).unwrap();
        let lineage = json!({"schema": infergate::qualify::lineage::LINEAGE_SCHEMA,
            "baseline_image": image(b - 1), "candidate_image": image(b),
            "steps": [{"cell": "c", "metric": "ttft_p50_ms", "direction": "lower_is_better",
                "baseline": 100.0, "candidate": 100.0 * f64::exp(log_ratio),
                "log_ratio": log_ratio, "standard_error": 0.01, "df": 30, "outcome": "pass"}]});
        l.append(&q, "compare", None, Status::Ok, json!({"lineage": lineage}))
            .unwrap();
        l.append(
            &q,
            "done",
            None,
            Status::Ok,
            json!({"verdict": "qualified"}),
        )
        .unwrap();
        l.append(
            &q,
            "decision",
            None,
            Status::Ok,
            json!({"action": "promote"}),
        )
        .unwrap();
    }
    drop(l);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).unwrap();
    let page = out.join("history.html");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["history", "--html", "-o"])
        .arg(&page)
        .args(["--anchor", &"1".repeat(64), "--ledger"])
        .arg(&ledger)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let profile = tempfile::tempdir().unwrap();
    let dump = headless(&page, profile.path(), &["--dump-dom".to_string()]);
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let dom = String::from_utf8_lossy(&dump.stdout);
    assert!(
        !dom.contains("http://") && !dom.contains("https://"),
        "nothing to fetch"
    );
    let plots = svgs(&dom);
    assert_eq!(plots.len(), 1, "one cell and metric");
    let svg = plots[0];
    assert_eq!(
        svg.matches("class=\"build\"").count(),
        8,
        "a point per build"
    );
    assert_eq!(svg.matches("class=\"anchor\"").count(), 1);
    // Anchored at build 1's image: the chain is builds 2..8, its line a
    // point per step.
    let cumulative = svg
        .split("class=\"cumulative\" points=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the cumulative line");
    assert_eq!(cumulative.split(' ').count(), 7, "{cumulative}");
    let changes: Vec<&str> = svg.matches("class=\"change-point\"").collect();
    assert!(!changes.is_empty(), "{svg:.600}");
    assert!(
        svg.contains("at build-5"),
        "the change point names build 5: {svg:.600}"
    );
    assert!(dom.contains("drift fail"), "{dom:.600}");
    support::browser::screenshot(
        &page,
        profile.path(),
        &out.join("history.png"),
        "1200,900",
        10_000,
    );
}
