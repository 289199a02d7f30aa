//! The plan target: text parsed as a qualification plan, a workload suite
//! (with its turnover tables) and a comparison policy.

use std::path::Path;

use crate::config::plan::{BASELINE, CANDIDATE, Driver, OnOutcome, Plan, PolicySource};
use crate::config::suite::Suite;
use crate::report::{self, Policy};

const PLAN_FILE: &str = "plans/fuzz.toml";
const PLAN_DIR: &str = "/fuzz/plans";
pub(super) const SUITE_FILE: &str = "suites/fuzz.toml";
const POLICY_FILE: &str = "policies/fuzz.toml";

/// Plan text (arbitrary bytes, read as UTF-8 with replacement) parsed as a
/// plan, a suite and a policy: none panics; every error names its file and
/// a line or field (a line whenever the text is not TOML at all); whatever
/// is accepted satisfies the checks its parser promises.
pub fn plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let is_toml = text.parse::<toml::Table>().is_ok();
    check_plan(&text, is_toml);
    check_suite(&text, is_toml);
    check_policy(&text, is_toml);
}

/// Would parsing read a policy file outside [`PLAN_DIR`] (which does not
/// exist)? `policy = "/dev/zero"` is the operator's business, not a finding.
fn reads_outside(text: &str) -> bool {
    let Ok(t) = text.parse::<toml::Table>() else {
        return false;
    };
    t.get("policy")
        .and_then(toml::Value::as_str)
        .is_some_and(|p| Path::new(p).is_absolute() || p.contains(".."))
}

fn check_plan(text: &str, is_toml: bool) {
    if reads_outside(text) {
        return;
    }
    let lines = text.lines().count() + 1;
    let plan = match Plan::parse(text, Path::new(PLAN_FILE), Path::new(PLAN_DIR)) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.file, PLAN_FILE, "{e}");
            assert!(!e.message.trim().is_empty(), "plan error without message");
            assert!(
                e.line.is_some() || e.field.as_ref().is_some_and(|f| !f.is_empty()),
                "plan error names neither a line nor a field: {e}"
            );
            assert!(is_toml || e.line.is_some(), "TOML error without line: {e}");
            if let Some(l) = e.line {
                assert!((1..=lines).contains(&l), "line {l} of {lines}: {e}");
            }
            assert!(e.to_string().starts_with(PLAN_FILE));
            return;
        }
    };
    assert!(is_toml, "a plan was read from text that is not TOML");
    assert_eq!(plan.text, text);
    assert_eq!(plan.sha256, crate::util::sha256_hex(text.as_bytes()));
    assert!(
        (1..=100).contains(&plan.repeats),
        "repeats {}",
        plan.repeats
    );
    if plan.schedule == crate::config::plan::PlanSchedule::Interleaved {
        assert_eq!(
            plan.repeats, 1,
            "repeats belong to the alternating schedule"
        );
    } else {
        assert!(plan.window.is_none() && !plan.adaptive.enabled);
    }
    assert!(plan.window.as_ref().is_none_or(|w| match w {
        crate::config::plan::Window::All(n) => *n >= 1,
        crate::config::plan::Window::ByCell(m) => !m.is_empty() && m.values().all(|n| *n >= 1),
    }));
    assert!(plan.adaptive.max_requests >= 1 && plan.adaptive.max_minutes > 0.0);
    let order = plan.pass_order();
    assert_eq!(order.len(), 2 * plan.repeats);
    for label in [BASELINE, CANDIDATE] {
        assert_eq!(
            order.iter().filter(|(l, _)| *l == label).count(),
            plan.repeats
        );
        let r = plan.runtime(label).expect("both runtimes");
        assert_eq!(r.label, label);
        let _ = plan.expected_model(label);
        match &r.driver {
            Driver::External { url, health_path } => {
                assert!(url.starts_with("http://") || url.starts_with("https://"));
                assert!(health_path.starts_with('/'));
            }
            Driver::Process(_) => {}
            Driver::Container(c) => {
                assert_ne!(c.port, 0);
                assert!(c.health_path.starts_with('/'));
                let again = crate::config::plan::ImageRef::parse(&c.image.to_string());
                assert_eq!(again.as_ref(), Ok(&c.image), "image ref round trip");
            }
        }
    }
    assert!(
        plan.suite.is_absolute(),
        "suite path not anchored: {:?}",
        plan.suite
    );
    assert_ne!(plan.decision.on_fail, OnOutcome::Promote);
    if let PolicySource::Inline(p) = &plan.policy {
        Policy::from_toml_str(p, "inline").expect("an inline policy the plan accepted");
    }
}

fn check_suite(text: &str, is_toml: bool) {
    let suite = match Suite::parse(text, SUITE_FILE) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(
                msg.starts_with(SUITE_FILE),
                "suite error without file: {msg}"
            );
            assert!(is_toml || msg.contains("line "), "no line: {msg}");
            return;
        }
    };
    for c in &suite.cells {
        c.arrival().expect("validated arrival");
        let _ = c.shape();
        for tokens in [0, c.prompt_tokens, u64::MAX] {
            let _ = c.prompt_within_tolerance(tokens);
        }
        // A bigger context window never refuses a cell a smaller one took.
        let mut fits = false;
        for window in [0, c.max_tokens, c.prompt_tokens, u64::MAX / 2, u64::MAX] {
            let ok = c.check_fits(window).is_ok();
            assert!(ok || !fits, "cell fits a smaller window but not {window}");
            fits = ok;
        }
    }
    for s in &suite.turnover {
        let _ = (s.max_tokens(), s.shots(), s.prompt_style(), s.cell_label(1));
    }
}

fn check_policy(text: &str, is_toml: bool) {
    let policy = match Policy::from_toml_str(text, POLICY_FILE) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.file, POLICY_FILE);
            assert!(!e.message.trim().is_empty(), "policy error without message");
            assert!(is_toml || e.line.is_some(), "TOML error without line: {e}");
            return;
        }
    };
    for m in &policy.metrics {
        assert!((0.0..=report::policy::MAX_THRESHOLD_PERCENT).contains(&m.threshold_percent));
        assert!((0.0..=1.0).contains(&m.quantile));
        // Reports name the flag after the threshold; readers must get it back.
        let flag = report::regression_flag_name(m.threshold_percent);
        assert_eq!(
            report::parse_regression_flag(&flag),
            Some(m.threshold_percent),
            "flag {flag} does not give its threshold back"
        );
    }
    let t = &policy.turnover;
    assert!(t.alpha > 0.0 && t.alpha < 1.0 && t.confidence > 0.0 && t.confidence < 1.0);
    let b = &policy.bootstrap;
    assert!(b.iterations > 0 && b.confidence > 0.0 && b.confidence < 1.0);
    let _ = policy.summary();
}
