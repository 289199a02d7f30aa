//! `infergate history`: the builds a ledger qualified, read back as a
//! lineage: which image was paired with which, each qualification's verdict
//! and decision, and per cell and metric the series of paired ratios (from
//! each qualification's `compare` entry, [`crate::qualify::lineage`]) with
//! the cumulative change along the chain of promotions since an anchor.
//!
//! From the ledger alone: a report file may have moved or gone.

mod html;

pub use html::render_html;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use crate::report::history;
use crate::report::stats::{Direction, GateOutcome};
use crate::runtime::ledger::{Entry, Ledger};
use crate::runtime::state::decision_in;

pub const HISTORY_SCHEMA: &str = "infergate-history/1";
/// Two-sided confidence of each step's interval and of the cumulative one.
pub const CONFIDENCE: f64 = 0.95;

#[derive(Debug, Clone)]
pub struct Filter {
    /// Builds of this repository (`HOST/REPO`): either side's image under it.
    pub repo: Option<String>,
    pub cell: Option<String>,
    pub metric: Option<String>,
    /// The build the cumulative change is measured from (a digest, or an
    /// image name holding it); default as far back as the chain goes.
    pub anchor: Option<String>,
    /// The drift gate's margin, percent ([`DRIFT_MARGIN_PERCENT`] by default).
    pub margin_percent: f64,
    /// The drift gate's and the change points' error (one-sided for the
    /// gate, the whole horizon's for the change points).
    pub alpha: f64,
}

/// The drift gate's default margin: the step gates' default.
pub const DRIFT_MARGIN_PERCENT: f64 = 5.0;
pub const DRIFT_ALPHA: f64 = 0.05;

impl Default for Filter {
    fn default() -> Self {
        Filter {
            repo: None,
            cell: None,
            metric: None,
            anchor: None,
            margin_percent: DRIFT_MARGIN_PERCENT,
            alpha: DRIFT_ALPHA,
        }
    }
}

/// One qualification as the history shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Build {
    pub qualification: String,
    /// When its comparison was recorded (RFC 3339, UTC).
    pub at: String,
    pub baseline_image: String,
    pub candidate_image: String,
    /// The tag `watch` resolved the candidate from.
    pub tag: Option<String>,
    pub verdict: Option<String>,
    /// `pending`, `promote` or `retain-baseline`.
    pub decision: String,
}

/// One qualification's paired estimate for one cell and metric.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub qualification: String,
    pub baseline: f64,
    pub candidate: f64,
    pub log_ratio: f64,
    pub standard_error: f64,
    pub df: f64,
    /// candidate / baseline, with its two-sided interval at [`CONFIDENCE`].
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    /// The step's own gate.
    pub outcome: Value,
}

/// The change from the anchor to the newest build of a series, along the
/// chain of qualifications each pairing a build with the one before it.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    pub anchor: String,
    /// Qualifications in the chain, oldest first.
    pub chain: Vec<String>,
    /// The chain's sum with its interval (`report::history::cumulative`).
    pub cumulative: history::Cumulative,
    /// The drift gate on it against `margin_percent`, with its reason.
    pub drift: GateOutcome,
    pub drift_reason: String,
    pub margin_percent: f64,
    /// A direct measurement of the newest build against the anchor would
    /// bound the drift more tightly than the chain does.
    pub remeasure_against_anchor: bool,
    /// Builds in the chain where the level shifted, or where a drift began.
    pub change_points: Vec<Change>,
}

/// A change point named by the qualification that introduced it.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub qualification: String,
    /// The qualification at which it was found.
    pub found_at: String,
    #[serde(flatten)]
    pub point: history::ChangePoint,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub cell: String,
    pub metric: String,
    pub direction: Value,
    pub points: Vec<Point>,
    /// From the anchor to the newest point, when a chain reaches it.
    pub chain: Option<Chain>,
}

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub schema: &'static str,
    pub builds: Vec<Build>,
    pub series: Vec<Series>,
    /// Qualifications without a comparison (interrupted, refused, failed),
    /// named so nothing is hidden.
    pub without_comparison: Vec<String>,
}

/// The lineage of every qualification in `ledger` that `filter` keeps.
pub fn read(ledger: &Ledger, filter: &Filter) -> Result<History> {
    let mut builds = Vec::new();
    let mut lineages = Vec::new();
    let mut without_comparison = Vec::new();
    for q in ledger.qualifications()? {
        let entries = ledger.entries(&q)?;
        let Some((at, lineage)) = lineage_of(&entries) else {
            without_comparison.push(q);
            continue;
        };
        let image = |k: &str| lineage[k].as_str().unwrap_or("").to_string();
        let build = Build {
            qualification: q.clone(),
            at,
            baseline_image: image("baseline_image"),
            candidate_image: image("candidate_image"),
            tag: entries
                .iter()
                .find(|e| e.step == "plan")
                .and_then(|e| e.detail.pointer("/candidate_image_resolved/tag"))
                .and_then(Value::as_str)
                .map(str::to_string),
            verdict: entries
                .iter()
                .rev()
                .find(|e| e.step == "done")
                .and_then(|e| e.detail_str("verdict"))
                .map(str::to_string),
            decision: decision_word(&entries),
        };
        if let Some(repo) = &filter.repo {
            let under = |i: &str| i.starts_with(&format!("{repo}@")) || i == repo;
            if !under(&build.baseline_image) && !under(&build.candidate_image) {
                continue;
            }
        }
        lineages.push((q, lineage));
        builds.push(build);
    }
    let series = series(&builds, &lineages, filter);
    Ok(History {
        schema: HISTORY_SCHEMA,
        builds,
        series,
        without_comparison,
    })
}

/// The `lineage` of the newest `compare` entry, with its time.
fn lineage_of(entries: &[Entry]) -> Option<(String, Value)> {
    let e = entries
        .iter()
        .rev()
        .find(|e| e.step == "compare" && e.detail.get("lineage").is_some())?;
    Some((e.at.clone(), e.detail["lineage"].clone()))
}

fn decision_word(entries: &[Entry]) -> String {
    serde_json::to_value(decision_in(entries))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "pending".into())
}

fn series(builds: &[Build], lineages: &[(String, Value)], filter: &Filter) -> Vec<Series> {
    let mut by_key: BTreeMap<(String, String), Series> = BTreeMap::new();
    for (q, lineage) in lineages {
        for step in lineage["steps"].as_array().into_iter().flatten() {
            let (Some(cell), Some(metric)) = (step["cell"].as_str(), step["metric"].as_str())
            else {
                continue;
            };
            if filter.cell.as_deref().is_some_and(|c| c != cell)
                || filter.metric.as_deref().is_some_and(|m| m != metric)
            {
                continue;
            }
            let Some(point) = point(q, step) else {
                continue;
            };
            by_key
                .entry((cell.to_string(), metric.to_string()))
                .or_insert_with(|| Series {
                    cell: cell.to_string(),
                    metric: metric.to_string(),
                    direction: step["direction"].clone(),
                    points: Vec::new(),
                    chain: None,
                })
                .points
                .push(point);
        }
    }
    let mut out: Vec<Series> = by_key.into_values().collect();
    for s in &mut out {
        s.chain = chain(builds, s, filter);
    }
    out
}

fn point(q: &str, step: &Value) -> Option<Point> {
    let f = |k: &str| step[k].as_f64();
    let (log_ratio, se, df) = (f("log_ratio")?, f("standard_error")?, f("df")?);
    // One step's interval is a chain of one.
    let (low, high) = history::cumulative(&[as_step(log_ratio, se, df)], CONFIDENCE)
        .map_or((log_ratio.exp(), log_ratio.exp()), |c| (c.low, c.high));
    Some(Point {
        qualification: q.to_string(),
        baseline: f("baseline")?,
        candidate: f("candidate")?,
        log_ratio,
        standard_error: se,
        df,
        ratio: log_ratio.exp(),
        low,
        high,
        outcome: step["outcome"].clone(),
    })
}

/// A recorded step as `report::history` reads one: a df that is unknown
/// (recorded as 0) is taken as normal.
fn as_step(log_ratio: f64, standard_error: f64, df: f64) -> history::Step {
    history::Step {
        log_ratio,
        standard_error,
        df: if df >= 1.0 { df } else { f64::INFINITY },
    }
}

/// The chain ending at the series' newest point: each step's baseline the
/// candidate of the step before it, back to the anchor (or as far as the
/// ledger goes); its sum, drift gate and change points.
fn chain(builds: &[Build], series: &Series, filter: &Filter) -> Option<Chain> {
    let points = &series.points;
    let anchor = filter.anchor.as_deref();
    let build = |q: &str| builds.iter().find(|b| b.qualification == q);
    let at_anchor = |image: &str| anchor.is_some_and(|a| image.contains(a));
    let mut chain: Vec<&Point> = vec![points.last()?];
    loop {
        let head = build(&chain.last()?.qualification)?;
        if at_anchor(&head.baseline_image) {
            break;
        }
        // The newest earlier step whose candidate is this step's baseline.
        let before = points.iter().rev().find(|p| {
            !chain.iter().any(|c| c.qualification == p.qualification)
                && build(&p.qualification)
                    .is_some_and(|b| b.candidate_image == head.baseline_image && b.at <= head.at)
        });
        match before {
            Some(p) => chain.push(p),
            None => break,
        }
    }
    let first = build(&chain.last()?.qualification)?;
    if anchor.is_some() && !at_anchor(&first.baseline_image) {
        return None;
    }
    chain.reverse();
    let steps: Vec<history::Step> = chain
        .iter()
        .map(|p| as_step(p.log_ratio, p.standard_error, p.df))
        .collect();
    let cumulative = history::cumulative(&steps, CONFIDENCE)?;
    let worse = serde_json::from_value::<Direction>(series.direction.clone())
        .map(history::Worse::from)
        .unwrap_or(history::Worse::Higher);
    let (drift, drift_reason) =
        history::drift_gate(&cumulative, filter.margin_percent, worse, filter.alpha);
    let typical = median(steps.iter().map(|s| s.standard_error));
    let names: Vec<String> = chain.iter().map(|p| p.qualification.clone()).collect();
    let change_points = history::change_points(&steps, filter.alpha)
        .unwrap_or_default()
        .into_iter()
        .map(|point| Change {
            qualification: names[point.index].clone(),
            found_at: names[point.through].clone(),
            point,
        })
        .collect();
    Some(Chain {
        anchor: first.baseline_image.clone(),
        chain: names,
        remeasure_against_anchor: history::direct_remeasure_is_tighter(&cumulative, typical),
        cumulative,
        drift,
        drift_reason,
        margin_percent: filter.margin_percent,
        change_points,
    })
}

fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = xs.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The history for a terminal.
pub fn render_text(h: &History) -> String {
    let mut s = String::new();
    if h.builds.is_empty() {
        s.push_str("no qualification in this ledger has a comparison");
        if !h.without_comparison.is_empty() {
            let _ = write!(s, " ({} without one)", h.without_comparison.len());
        }
        s.push('\n');
        return s;
    }
    let _ = writeln!(s, "builds ({}):", h.builds.len());
    for b in &h.builds {
        let _ = writeln!(
            s,
            "  {}  {}  {} → {}{}  {}, {}",
            b.at,
            b.qualification,
            short(&b.baseline_image),
            short(&b.candidate_image),
            b.tag
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default(),
            b.verdict.as_deref().unwrap_or("unfinished"),
            b.decision,
        );
    }
    for series in &h.series {
        let _ = writeln!(s, "\n{} · {}:", series.cell, series.metric);
        for p in &series.points {
            let _ = writeln!(
                s,
                "  {}  {}  {} → {}  {}",
                p.qualification,
                ratio_text(p.ratio, p.low, p.high),
                num(p.baseline),
                num(p.candidate),
                p.outcome.as_str().unwrap_or("?"),
            );
        }
        if let Some(c) = &series.chain {
            let k = c.chain.len();
            let _ = writeln!(
                s,
                "  since {}: {} over {k} step{}; drift {} at ±{}%: {}",
                short(&c.anchor),
                ratio_text(c.cumulative.ratio, c.cumulative.low, c.cumulative.high),
                if k == 1 { "" } else { "s" },
                c.drift.as_str(),
                c.margin_percent,
                c.drift_reason,
            );
            if c.remeasure_against_anchor {
                let _ = writeln!(
                    s,
                    "  a direct measurement against {} would bound this more tightly than another step",
                    short(&c.anchor)
                );
            }
            for cp in &c.change_points {
                let _ = writeln!(
                    s,
                    "  change point ({:?}) at {}: {:.3}× (p = {:.2e} ≤ {:.2e}), found at {}",
                    cp.point.kind,
                    cp.qualification,
                    cp.point.ratio,
                    cp.point.p_value,
                    cp.point.level,
                    cp.found_at
                );
            }
        }
    }
    if !h.without_comparison.is_empty() {
        let _ = writeln!(
            s,
            "\nwithout a comparison (interrupted, refused or failed): {}",
            h.without_comparison.join(", ")
        );
    }
    s
}

/// A ratio with its interval; an interval wider than the report's
/// informative limit either way is said in words (the JSON keeps it).
fn ratio_text(ratio: f64, low: f64, high: f64) -> String {
    let limit = crate::report::stats::evidence::MAX_INFORMATIVE_RATIO;
    if low < 1.0 / limit || high > limit {
        format!("{ratio:.3}× (bounds wider than {limit}× either way: not informative yet)")
    } else {
        format!("{ratio:.3}× ({low:.3}×–{high:.3}×)")
    }
}

/// An image name with its digest cut to 12 hex digits.
fn short(image: &str) -> String {
    match image.split_once("@sha256:") {
        Some((repo, hex)) => format!("{repo}@{}", &hex[..12.min(hex.len())]),
        None => image.to_string(),
    }
}

fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ledger::Status;
    use serde_json::json;

    fn image(build: char) -> String {
        format!("127.0.0.1:5000/e@sha256:{}", build.to_string().repeat(64))
    }

    /// A qualification as the ledger holds it: its plan, its comparison's
    /// lineage (`steps`: cell, metric, log ratio, standard error), its end
    /// and, when given, its decision.
    fn qualify(
        l: &Ledger,
        q: &str,
        from: char,
        to: char,
        steps: &[(&str, f64, f64)],
        decision: Option<&str>,
    ) {
        l.append(q, "plan", None, Status::Ok, json!({})).unwrap();
        let steps: Vec<Value> = steps
            .iter()
            .map(|(metric, log_ratio, se)| {
                json!({"cell": "c", "metric": metric, "direction": "lower_is_better",
                       "baseline": 100.0, "candidate": 100.0 * log_ratio.exp(),
                       "log_ratio": log_ratio, "standard_error": se, "df": 30, "outcome": "pass"})
            })
            .collect();
        let lineage = json!({"schema": crate::qualify::lineage::LINEAGE_SCHEMA,
            "baseline_image": image(from), "candidate_image": image(to), "steps": steps});
        l.append(q, "compare", None, Status::Ok, json!({"lineage": lineage}))
            .unwrap();
        l.append(q, "done", None, Status::Ok, json!({"verdict": "qualified"}))
            .unwrap();
        if let Some(action) = decision {
            l.append(q, "decision", None, Status::Ok, json!({"action": action}))
                .unwrap();
        }
    }

    #[test]
    fn the_chain_follows_promotions_and_nothing_is_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
        qualify(&l, "q1", 'a', 'b', &[("ttft", 0.02, 0.01)], Some("promote"));
        // Rejected: its build never served, so the next step pairs with b.
        qualify(
            &l,
            "q2",
            'b',
            'c',
            &[("ttft", 0.30, 0.01)],
            Some("retain-baseline"),
        );
        qualify(&l, "q3", 'b', 'd', &[("ttft", 0.03, 0.02)], None);
        l.append("q4", "plan", None, Status::Ok, json!({})).unwrap();
        let h = read(&l, &Filter::default()).unwrap();
        assert_eq!(h.without_comparison, ["q4"]);
        assert_eq!(h.builds.len(), 3);
        assert_eq!(h.builds[0].decision, "promote");
        assert_eq!(h.builds[1].decision, "retain-baseline");
        let s = &h.series[0];
        let c = s.chain.as_ref().unwrap();
        assert_eq!(c.chain, ["q1", "q3"]);
        assert_eq!(c.anchor, image('a'));
        let sum = &c.cumulative;
        assert!((sum.log_ratio - 0.05).abs() < 1e-12);
        assert!((sum.standard_error - (0.01f64.powi(2) + 0.02f64.powi(2)).sqrt()).abs() < 1e-12);
        assert!(sum.low < sum.ratio && sum.ratio < sum.high);
        let text = render_text(&h);
        assert!(
            text.contains("over 2 steps") && text.contains("q4"),
            "{text}"
        );

        // Anchored at b, the chain is the last step alone; at an image the
        // chain never reaches, there is no cumulative change to show.
        let at = |a: char| Filter {
            anchor: Some(a.to_string().repeat(64)),
            ..Filter::default()
        };
        let c = read(&l, &at('b')).unwrap().series[0].chain.clone().unwrap();
        assert_eq!(c.chain, ["q3"]);
        assert!(read(&l, &at('z')).unwrap().series[0].chain.is_none());
        // Filters: another repository has nothing.
        let other = Filter {
            repo: Some("127.0.0.1:5000/other".into()),
            ..Filter::default()
        };
        assert!(read(&l, &other).unwrap().builds.is_empty());
    }

    #[test]
    fn one_build_is_a_chain_of_one_and_an_empty_ledger_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
        assert!(
            render_text(&read(&l, &Filter::default()).unwrap()).starts_with("no qualification")
        );
        qualify(&l, "only", 'a', 'b', &[("ttft", -0.01, 0.005)], None);
        let h = read(&l, &Filter::default()).unwrap();
        let c = h.series[0].chain.as_ref().unwrap();
        assert_eq!(c.chain, ["only"]);
        assert!((c.cumulative.df - 30.0).abs() < 1e-9, "{}", c.cumulative.df);
        assert!(
            render_text(&h).contains("over 1 step;"),
            "{}",
            render_text(&h)
        );
    }

    #[test]
    fn a_shift_at_one_build_is_named_and_the_chain_beyond_the_margin_fails() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
        qualify(&l, "b1", 'a', 'b', &[("ttft", 0.01, 0.01)], Some("promote"));
        // TTFT 20 % worse at one build: its own gate would fail it, but say
        // it was promoted anyway (a forced promotion).
        qualify(&l, "b2", 'b', 'c', &[("ttft", 0.18, 0.01)], Some("promote"));
        qualify(&l, "b3", 'c', 'd', &[("ttft", 0.0, 0.01)], None);
        let h = read(&l, &Filter::default()).unwrap();
        let c = h.series[0].chain.as_ref().unwrap();
        assert_eq!(c.chain, ["b1", "b2", "b3"]);
        assert_eq!(c.drift, GateOutcome::Fail, "{}", c.drift_reason);
        let steps: Vec<_> = c
            .change_points
            .iter()
            .filter(|p| p.point.kind == history::ChangeKind::Step)
            .collect();
        assert_eq!(steps.len(), 1, "{:?}", c.change_points);
        assert_eq!(steps[0].qualification, "b2");
        let text = render_text(&h);
        assert!(text.contains("change point (Step) at b2"), "{text}");
    }

    #[test]
    fn bounds_beyond_the_informative_limit_are_said_in_words() {
        assert!(ratio_text(0.64, 0.002, 257.0).contains("not informative yet"));
        assert!(ratio_text(1.0, 0.05, 1.2).contains("not informative yet"));
        assert_eq!(ratio_text(1.0, 0.9, 1.1), "1.000× (0.900×–1.100×)");
    }
}
