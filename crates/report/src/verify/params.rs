//! Declared parameters: the `policy` block against the metric names it
//! gates, the defaults when it says `source: "defaults"`, the `statistics`
//! block against the policy (family-wise levels, design, bootstrap
//! settings), and the turnover mode and alpha wherever they are repeated.
//! Also rebuilds what a report was made with (the [`Policy`], the
//! [`Method`] and the [`Look`]), for recomputation.

use serde_json::{Map, Value};

use crate::artifact::Schedule;
use crate::design::{self, Look, Method};
use crate::stats::evidence::DriftFloor;
use crate::stats::{BootstrapConfig, Direction, Resampling};

use super::super::checker::{Checker, join, show};
use super::super::model::PolicyMetric;
use super::super::policy::{
    DEFAULT_METRICS, GatePolicy, GateRule, MAX_BOOTSTRAP_ITERATIONS, MetricSpec, Policy,
    TurnoverGateMode, TurnoverPolicy, infer_direction, split_quantile,
};

/// Blocks `compare` writes: a report with one of them is a compare-made
/// report, and must have them all (the seed has none). Every other field
/// `compare` writes, `performance_outcome` among them, the recomputation
/// names when it is missing.
const COMPARE_BLOCKS: [&str; 6] = [
    "policy",
    "statistics",
    "gates",
    "provenance",
    "turnover_gate",
    "turnover_comparison",
];

/// What the rest of verification needs to know about the declared parameters.
#[derive(Debug, Clone, Default)]
pub(super) struct Params {
    /// The policy block's metrics, when it has readable ones.
    pub policy_metrics: Option<Vec<PolicyMetric>>,
    /// Metric names every cell must have: the policy's, else the seed's three.
    pub required: Vec<String>,
    /// The turnover gate mode the report declares (policy block, else turnover_gate).
    pub mode: Option<TurnoverGateMode>,
    pub decides_by_evidence: bool,
    /// The report has `compare`'s additions (see [`COMPARE_BLOCKS`]).
    pub made_by_compare: bool,
    /// `statistics.samples_kept`: every cell carries its gating samples.
    pub samples_kept: bool,
    /// `performance_gate_passed` is true as found.
    pub claims_performance_pass: bool,
    /// The look `statistics.family_wise` records, when it records one.
    pub look: Option<Look>,
    /// The method `statistics` records, when it records one.
    pub method: Option<Method>,
}

impl Params {
    /// The policy's entry for metric `name`.
    pub fn metric(&self, name: &str) -> Option<&PolicyMetric> {
        self.policy_metrics
            .as_ref()
            .and_then(|m| m.iter().find(|m| m.name == name))
    }
}

pub(super) fn check(ck: &mut Checker, root: &Map<String, Value>) -> Params {
    let made_by_compare = check_completeness(ck, root);
    let policy = root.get("policy");
    let policy_metrics = policy.and_then(|p| policy_metrics(ck, p));
    let required = match &policy_metrics {
        Some(m) => m.iter().map(|m| m.name.clone()).collect(),
        None if policy.is_none() => DEFAULT_METRICS.iter().map(|s| s.to_string()).collect(),
        None => Vec::new(),
    };
    let mode = policy_mode(ck, root);
    let stats = root.get("statistics");
    let decides = stats.and_then(|s| s.get("gate_decides"));
    let decides_by_evidence = match decides {
        None => false,
        Some(v) => match v.as_str() {
            Some("evidence") => true,
            Some("point") => false,
            _ => {
                ck.wrong(
                    "statistics.gate_decides",
                    Some(v),
                    "\"evidence\" or \"point\"",
                );
                false
            }
        },
    };
    let samples_kept = stats
        .and_then(|s| s.get("samples_kept"))
        .and_then(Value::as_bool)
        == Some(true);
    let mut params = Params {
        policy_metrics,
        required,
        mode,
        decides_by_evidence,
        made_by_compare,
        samples_kept,
        claims_performance_pass: root.get("performance_gate_passed") == Some(&Value::Bool(true)),
        look: None,
        method: None,
    };
    if let Some(s) = stats {
        (params.look, params.method) = check_statistics(ck, root, s, &params);
    }
    check_turnover_params(ck, root, &params);
    if policy.and_then(|p| p.get("source")).and_then(Value::as_str) == Some("defaults") {
        check_defaults(ck, root, &params);
    }
    params
}

/// All of [`COMPARE_BLOCKS`] or none: removing one would skip its checks.
fn check_completeness(ck: &mut Checker, root: &Map<String, Value>) -> bool {
    let present: Vec<&str> = COMPARE_BLOCKS
        .iter()
        .copied()
        .filter(|k| root.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if present.is_empty() {
        return false;
    }
    for k in COMPARE_BLOCKS.iter().filter(|k| !present.contains(k)) {
        ck.push(
            *k,
            "missing".into(),
            format!(
                "present: `compare` writes it with {} (a report with some of its blocks must have all)",
                present.join(", ")
            ),
        );
    }
    true
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// The policy's turnover gate, which `turnover_gate.mode` must repeat.
fn policy_mode(ck: &mut Checker, root: &Map<String, Value>) -> Option<TurnoverGateMode> {
    let from_policy = root.get("policy").map(|p| {
        let v = p.get("turnover_gate");
        let m = v.and_then(parse::<TurnoverGateMode>);
        if m.is_none() {
            ck.wrong("policy.turnover_gate", v, "\"strict\" or \"non_inferior\"");
        }
        m
    });
    let gate = root.get("turnover_gate").map(|g| {
        let v = g.get("mode");
        let m = v.and_then(parse::<TurnoverGateMode>);
        if m.is_none() {
            ck.wrong("turnover_gate.mode", v, "\"strict\" or \"non_inferior\"");
        }
        m
    });
    if let (Some(Some(p)), Some(Some(g))) = (from_policy, gate)
        && p != g
    {
        ck.push(
            "turnover_gate.mode",
            format!("\"{}\"", g.as_str()),
            format!("\"{}\", as policy.turnover_gate says", p.as_str()),
        );
    }
    from_policy.flatten().or(gate.flatten())
}

/// The policy block's metrics, each checked against its own name.
fn policy_metrics(ck: &mut Checker, policy: &Value) -> Option<Vec<PolicyMetric>> {
    let list = ck.array("policy.metrics", policy.get("metrics"))?;
    if list.is_empty() {
        ck.push(
            "policy.metrics",
            "[]".into(),
            "at least one gating metric: a policy that gates nothing passes anything",
        );
    }
    let mut out: Vec<PolicyMetric> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let path = format!("policy.metrics[{i}]");
        let Some(pm) = policy_metric(ck, &path, m) else {
            continue;
        };
        if out.iter().any(|o| o.name == pm.name) {
            ck.push(
                join(&path, "name"),
                format!("\"{}\"", pm.name),
                "a name not already listed",
            );
        }
        out.push(pm);
    }
    Some(out)
}

fn policy_metric(ck: &mut Checker, path: &str, m: &Value) -> Option<PolicyMetric> {
    let p = |k: &str| join(path, k);
    let name = ck.string(&p("name"), m.get("name"));
    let sample = ck.string(&p("sample"), m.get("sample"));
    let quantile = ck.num(&p("quantile"), m.get("quantile"));
    let direction = m.get("direction").and_then(parse::<Direction>);
    if direction.is_none() {
        ck.wrong(
            &p("direction"),
            m.get("direction"),
            "\"lower_is_better\" or \"higher_is_better\"",
        );
    }
    let threshold = ck.num(&p("threshold_percent"), m.get("threshold_percent"));
    if let Some(t) = threshold.filter(|t| *t < 0.0) {
        ck.push(p("threshold_percent"), t.to_string(), "a percentage ≥ 0");
    }
    if let Some(q) = quantile.filter(|q| !(0.0..=1.0).contains(q)) {
        ck.push(p("quantile"), q.to_string(), "a quantile in [0, 1]");
    }
    let pm = PolicyMetric {
        name: name?.to_string(),
        sample: sample?.to_string(),
        quantile: quantile?,
        direction: direction?,
        threshold_percent: threshold?,
    };
    check_named(
        ck,
        path,
        &pm.name,
        Some(&pm.sample),
        Some(pm.quantile),
        Some(pm.direction),
    );
    Some(pm)
}

/// A metric's sample, quantile and direction against what its name says
/// (`ttft_p50_ms`: sample `ttft_ms`, quantile 0.5, lower is better). Each
/// given value must agree; `None` is not checked.
pub(super) fn check_named(
    ck: &mut Checker,
    path: &str,
    name: &str,
    sample: Option<&str>,
    quantile: Option<f64>,
    direction: Option<Direction>,
) {
    let inferred = split_quantile(name);
    if let (Some((s, _)), Some(found)) = (&inferred, sample)
        && found != s
    {
        ck.push(
            join(path, "sample"),
            format!("\"{found}\""),
            format!("\"{s}\", as the name `{name}` says"),
        );
    }
    if let (Some((_, q)), Some(found)) = (&inferred, quantile)
        && found != *q
    {
        ck.push(
            join(path, "quantile"),
            found.to_string(),
            format!("{q}, as the name `{name}` says"),
        );
    }
    let base = sample
        .map(str::to_string)
        .or_else(|| inferred.as_ref().map(|(s, _)| s.clone()))
        .unwrap_or_else(|| name.to_string());
    if let (Some(d), Some(found)) = (infer_direction(&base), direction)
        && found != d
    {
        ck.push(
            join(path, "direction"),
            show(serde_json::to_value(found).ok().as_ref()),
            format!(
                "{}, as the name `{name}` says",
                show(serde_json::to_value(d).ok().as_ref())
            ),
        );
    }
}

/// `statistics`: bootstrap settings in range, the family-wise levels from
/// the policy's metrics and the cells, the design's parts agreeing. The
/// look and the method it records.
fn check_statistics(
    ck: &mut Checker,
    root: &Map<String, Value>,
    s: &Value,
    params: &Params,
) -> (Option<Look>, Option<Method>) {
    let b = s.get("bootstrap");
    if let Some(n) = ck.count(
        "statistics.bootstrap.iterations",
        b.and_then(|b| b.get("iterations")),
    ) && !(1..=MAX_BOOTSTRAP_ITERATIONS as u64).contains(&n)
    {
        ck.push(
            "statistics.bootstrap.iterations",
            n.to_string(),
            format!("1 to {MAX_BOOTSTRAP_ITERATIONS}"),
        );
    }
    unit_interval(
        ck,
        "statistics.bootstrap.confidence",
        b.and_then(|b| b.get("confidence")),
    );
    ck.count("statistics.bootstrap.seed", b.and_then(|b| b.get("seed")));
    if let Some(m) = s.get("turnover_margin") {
        unit_interval(ck, "statistics.turnover_margin", Some(m));
    }
    if params.made_by_compare {
        for k in ["family_wise", "design", "drift_floor"] {
            if s.get(k).is_none() {
                ck.push(
                    format!("statistics.{k}"),
                    "missing".into(),
                    "present: `compare` writes it with the statistics block",
                );
            }
        }
    }
    if let Some(d) = s.get("drift_floor")
        && parse::<DriftFloor>(d).is_none()
    {
        ck.wrong(
            "statistics.drift_floor",
            Some(d),
            "{\"pass_sd_percent\": a number, \"source\": a string}",
        );
    }
    let look = s
        .get("family_wise")
        .and_then(|fw| check_family_wise(ck, root, fw, params));
    let method = s.get("design").and_then(|d| {
        check_design(ck, d);
        Method::read(ck, s)
    });
    (look, method)
}

/// A number strictly between 0 and 1.
fn unit_interval(ck: &mut Checker, path: &str, v: Option<&Value>) -> Option<f64> {
    let x = ck.num(path, v)?;
    if !(x > 0.0 && x < 1.0) {
        ck.push(path, x.to_string(), "in (0, 1)");
        return None;
    }
    Some(x)
}

/// The family-wise levels against the look's, from alpha and the gating
/// pairs; the look, when the block records one.
fn check_family_wise(
    ck: &mut Checker,
    root: &Map<String, Value>,
    fw: &Value,
    params: &Params,
) -> Option<Look> {
    let alpha = ck.num(&fw_key("alpha"), fw.get("alpha"));
    if let Some(a) = alpha.filter(|a| !(*a > 0.0 && *a < 0.5)) {
        ck.push(fw_key("alpha"), a.to_string(), "in (0, 0.5)");
    }
    let pairs = ck.count(&fw_key("gating_pairs"), fw.get("gating_pairs"));
    let looks = ck.count(&fw_key("looks"), fw.get("looks"));
    check_gating_pairs(ck, root, pairs, params);
    if looks == Some(0) {
        ck.push(fw_key("looks"), "0".into(), "at least 1");
    }
    let look = design::read_look(ck, fw, looks.filter(|l| *l > 0)?)?;
    if let (Some(a), Some(m)) = (alpha, pairs) {
        check_levels(ck, fw, a, m as usize, &look);
    }
    Some(look)
}

fn fw_key(k: &str) -> String {
    format!("statistics.family_wise.{k}")
}

/// `gating_pairs` is every (cell, policy metric), each cell with gating
/// SLOs, each capacity cell (in place of its metrics), and each gating
/// quality part.
fn check_gating_pairs(
    ck: &mut Checker,
    root: &Map<String, Value>,
    pairs: Option<u64>,
    params: &Params,
) {
    let cells = root.get("cells").and_then(Value::as_object);
    // Each cell with gating SLOs is one more pair (its attainment).
    let slo_cells = cells.map_or(0, |c| {
        c.values()
            .filter(|c| c.pointer("/slo/gating") == Some(&Value::Bool(true)))
            .count()
    });
    // Each gating quality part is one more pair too, but an embeddings
    // part: a threshold on deterministic vectors spends no error.
    let quality_parts = root
        .get("gates")
        .and_then(|g| g.pointer("/quality/parts"))
        .and_then(Value::as_array)
        .map_or(0, |parts| {
            parts
                .iter()
                .filter(|p| {
                    !p.get("subject")
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.starts_with(crate::embedding::PART_PREFIX))
                })
                .count()
        });
    // A capacity cell is one pair (its ratio) in place of its metrics.
    let capacity_cells = cells.map_or(0, |c| {
        c.values().filter(|c| c.get("capacity").is_some()).count()
    });
    let metrics = params.policy_metrics.as_ref().map(Vec::len);
    let other_cells = cells.map(|c| c.len() - capacity_cells);
    if let (Some(found), Some(c), Some(m)) = (pairs, other_cells, metrics)
        && found != (c * m + slo_cells + capacity_cells + quality_parts) as u64
    {
        let slo = if slo_cells > 0 {
            format!(" + {slo_cells} SLO cells")
        } else {
            String::new()
        };
        let quality = if quality_parts > 0 {
            format!(" + {quality_parts} quality parts")
        } else {
            String::new()
        };
        let capacity = if capacity_cells > 0 {
            format!(" + {capacity_cells} capacity cells")
        } else {
            String::new()
        };
        ck.push(
            fw_key("gating_pairs"),
            found.to_string(),
            format!(
                "{} ({c} cells × {m} policy metrics{slo}{capacity}{quality})",
                c * m + slo_cells + capacity_cells + quality_parts
            ),
        );
    }
}

/// `alpha_pass` and `alpha_fail` are the look's levels of `a` over `m` pairs.
fn check_levels(ck: &mut Checker, fw: &Value, a: f64, m: usize, look: &Look) {
    let (ap, af) = look.levels(a, m);
    for (key, expected) in [("alpha_pass", ap), ("alpha_fail", af)] {
        if let Some(found) = ck.num(&fw_key(key), fw.get(key))
            && found != expected
        {
            ck.push(
                fw_key(key),
                found.to_string(),
                format!("{expected}, {}", look.describe_levels(a, m)),
            );
        }
    }
}

/// The design's schedule decides its resampling (interleaved → paired,
/// alternating passes → clustered, single → independent, with the drift floor).
fn check_design(ck: &mut Checker, d: &Value) {
    let schedule = d.get("schedule").and_then(parse::<Schedule>);
    if schedule.is_none() {
        ck.wrong(
            "statistics.design.schedule",
            d.get("schedule"),
            "\"single\", \"alternating_passes\" or \"interleaved\"",
        );
    }
    let resampling = d.get("resampling").and_then(parse::<Resampling>);
    let (Some(s), Some(r)) = (schedule, resampling) else {
        return;
    };
    let expected = match s {
        Schedule::Single => Resampling::Independent,
        Schedule::AlternatingPasses => Resampling::Clustered,
        Schedule::Interleaved => Resampling::Paired,
    };
    if r != expected {
        ck.push(
            "statistics.design.resampling",
            show(d.get("resampling")),
            format!(
                "{}, the resampling of schedule {}",
                show(serde_json::to_value(expected).ok().as_ref()),
                s.as_str()
            ),
        );
    }
}

/// The turnover alpha (policy) wherever it is repeated, and in range.
fn check_turnover_params(ck: &mut Checker, root: &Map<String, Value>, _params: &Params) {
    let policy_alpha = root
        .get("policy")
        .map(|p| unit_interval(ck, "policy.alpha", p.get("alpha")));
    let Some(tc) = root.get("turnover_comparison") else {
        return;
    };
    let alpha = unit_interval(ck, "turnover_comparison.alpha", tc.get("alpha"));
    unit_interval(ck, "turnover_comparison.confidence", tc.get("confidence"));
    if let (Some(Some(p)), Some(a)) = (policy_alpha, alpha)
        && a != p
    {
        ck.push(
            "turnover_comparison.alpha",
            a.to_string(),
            format!("{p}, as policy.alpha says"),
        );
    }
    let margin = tc.get("margin").filter(|m| !m.is_null());
    if let Some(m) = margin {
        unit_interval(ck, "turnover_comparison.margin", Some(m));
    }
    let stated = root
        .get("statistics")
        .and_then(|s| s.get("turnover_margin"));
    if stated.is_some() && margin != stated {
        ck.push(
            "turnover_comparison.margin",
            show(margin),
            format!("{}, as statistics.turnover_margin says", show(stated)),
        );
    }
}

/// `policy.source: "defaults"` promises the built-in policy: every value
/// the report repeats must be the default's.
fn check_defaults(ck: &mut Checker, root: &Map<String, Value>, params: &Params) {
    let d = Policy::default();
    let why = "the default, as policy.source is \"defaults\"";
    if let Some(found) = &params.policy_metrics {
        let expected = d.summary().metrics;
        if *found != expected {
            ck.push(
                "policy.metrics",
                show(serde_json::to_value(found).ok().as_ref()),
                format!(
                    "{}, {why}",
                    show(serde_json::to_value(&expected).ok().as_ref())
                ),
            );
        }
    }
    let s = root.get("statistics");
    let checks: [(&str, Option<&Value>, Value); 7] = [
        (
            "policy.turnover_gate",
            root.get("policy").and_then(|p| p.get("turnover_gate")),
            d.turnover.gate.as_str().into(),
        ),
        (
            "policy.alpha",
            root.get("policy").and_then(|p| p.get("alpha")),
            d.turnover.alpha.into(),
        ),
        (
            "statistics.bootstrap",
            s.and_then(|s| s.get("bootstrap")),
            serde_json::to_value(d.bootstrap).unwrap_or(Value::Null),
        ),
        (
            "statistics.gate_decides",
            s.and_then(|s| s.get("gate_decides")),
            d.gate.decide.as_str().into(),
        ),
        (
            "statistics.family_wise.alpha",
            s.and_then(|s| s.pointer("/family_wise/alpha")),
            d.gate.alpha.into(),
        ),
        (
            "statistics.turnover_margin",
            s.and_then(|s| s.get("turnover_margin")),
            d.turnover.margin.into(),
        ),
        (
            "statistics.drift_floor.pass_sd_percent",
            s.and_then(|s| s.pointer("/drift_floor/pass_sd_percent")),
            d.gate.drift_sd_percent.into(),
        ),
    ];
    for (path, found, expected) in checks {
        if let Some(f) = found
            && *f != expected
        {
            ck.push(
                path,
                show(Some(f)),
                format!("{}, {why}", show(Some(&expected))),
            );
        }
    }
}

/// What a compare-made report was made with: the user's policy (its
/// `policy` and `statistics` blocks), the method and the look.
#[derive(Debug, Clone)]
pub struct MadeWith {
    pub policy: Policy,
    pub method: Method,
    pub look: Look,
}

impl MadeWith {
    /// `compare` of `baseline` and `candidate` as the report was made.
    pub fn compare(
        &self,
        baseline: &crate::artifact::RunArtifact,
        candidate: &crate::artifact::RunArtifact,
    ) -> Result<crate::Report, crate::CompareError> {
        crate::compare_by(
            baseline,
            candidate,
            &self.policy,
            &self.method,
            Some(&self.look),
        )
    }
}

/// What a compare-made report was made with, from its `policy` and
/// `statistics` blocks and what [`check`] read of them; the reason when
/// they do not say enough.
pub(super) fn made_with(root: &Map<String, Value>, params: &Params) -> Result<MadeWith, String> {
    let look = params
        .look
        .clone()
        .ok_or("no readable look (statistics.family_wise)")?;
    let method = params
        .method
        .ok_or("no readable method (statistics.design, statistics.family_wise.bound_scale)")?;
    Ok(MadeWith {
        policy: policy_from_report(root, params, look.spending())?,
        method,
        look,
    })
}

/// The user's policy a compare-made report was made with (spending by
/// `spending`, its look's).
fn policy_from_report(
    root: &Map<String, Value>,
    params: &Params,
    spending: crate::stats::Spending,
) -> Result<Policy, String> {
    let policy = root.get("policy").ok_or("no policy block")?;
    let s = root.get("statistics").ok_or("no statistics block")?;
    let metrics = params
        .policy_metrics
        .as_ref()
        .ok_or("unreadable policy.metrics")?
        .iter()
        .map(|m| MetricSpec {
            name: m.name.clone(),
            sample: m.sample.clone(),
            quantile: m.quantile,
            direction: m.direction,
            threshold_percent: m.threshold_percent,
        })
        .collect();
    let num = |v: Option<&Value>, what: &str| v.and_then(Value::as_f64).ok_or(format!("no {what}"));
    let tc = root.get("turnover_comparison");
    let bootstrap: BootstrapConfig = s
        .get("bootstrap")
        .and_then(parse)
        .ok_or("unreadable statistics.bootstrap")?;
    if !(1..=MAX_BOOTSTRAP_ITERATIONS).contains(&bootstrap.iterations) {
        return Err("statistics.bootstrap.iterations is out of range".into());
    }
    let decide: GateRule = s
        .get("gate_decides")
        .and_then(parse)
        .ok_or("unreadable statistics.gate_decides")?;
    let drift: DriftFloor = s
        .get("drift_floor")
        .and_then(parse)
        .ok_or("unreadable statistics.drift_floor")?;
    Ok(Policy {
        source: policy
            .get("source")
            .and_then(Value::as_str)
            .ok_or("no policy.source")?
            .to_string(),
        metrics,
        turnover: TurnoverPolicy {
            gate: params.mode.ok_or("no turnover gate mode")?,
            alpha: num(policy.get("alpha"), "policy.alpha")?,
            confidence: num(
                tc.and_then(|t| t.get("confidence")),
                "turnover_comparison.confidence",
            )?,
            margin: num(s.get("turnover_margin"), "statistics.turnover_margin")?,
        },
        bootstrap,
        gate: GatePolicy {
            decide,
            alpha: num(
                s.pointer("/family_wise/alpha"),
                "statistics.family_wise.alpha",
            )?,
            drift_sd_percent: drift.pass_sd_percent,
            drift_source: drift.source,
            spending,
        },
        slo: match policy.get("slo") {
            None => Vec::new(),
            Some(v) => parse(v).ok_or("unreadable policy.slo")?,
        },
        quality: quality_policy(root),
        capacity: capacity_policy(root),
    })
}

/// The capacity margin as the report's capacity cells show it (the default
/// where it has none: nothing it would judge).
fn capacity_policy(root: &Map<String, Value>) -> crate::policy::CapacityPolicy {
    let mut c = crate::policy::CapacityPolicy::default();
    if let Some(m) = root
        .get("cells")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|cells| cells.values())
        .find_map(|cell| cell.pointer("/capacity/margin_percent")?.as_f64())
    {
        c.margin_percent = m;
    }
    c
}

/// The quality policy as far as the report shows it: the cross-runtime
/// rule and tolerance from `reference_comparison`, the margins and each
/// embeddings workload's floors from `quality` (defaults where the report
/// has nothing they would judge).
fn quality_policy(root: &Map<String, Value>) -> crate::policy::QualityPolicy {
    let mut q = crate::policy::QualityPolicy::default();
    let rc = root.get("reference_comparison");
    if let Some(c) = rc.and_then(|r| r.get("cross_runtime")).and_then(parse) {
        q.cross_runtime = c;
    }
    if let Some(n) = rc
        .and_then(|r| r.get("near_tie_nats"))
        .and_then(Value::as_f64)
    {
        q.near_tie_nats = n;
    }
    let qv = root.get("quality");
    if let Some(m) = qv
        .and_then(|v| v.pointer("/hard_divergence/margin_percent"))
        .and_then(Value::as_f64)
    {
        q.hard_margin_percent = m;
    }
    if let Some(m) = qv
        .and_then(|v| v.pointer("/tasks/0/margin_points"))
        .and_then(Value::as_f64)
    {
        q.accuracy_margin_points = m;
    }
    if let Some(m) = qv
        .and_then(|v| v.pointer("/features/0/margin_points"))
        .and_then(Value::as_f64)
    {
        q.feature_margin_points = m;
    }
    q.embedding_floors = embedding_floors(qv);
    q
}

/// Each embeddings pair's floors as the report shows them: a policy may
/// give each workload its own, so each is judged again by its own.
fn embedding_floors(quality: Option<&Value>) -> Vec<crate::policy::EmbeddingFloors> {
    let pairs = quality
        .and_then(|q| q.get("embeddings"))
        .and_then(Value::as_array);
    pairs
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some(crate::policy::EmbeddingFloors {
                workload: e.get("name")?.as_str()?.to_string(),
                cosine_min: e.get("cosine_min_floor")?.as_f64()?,
                cosine_mean_min: e.get("cosine_mean_floor")?.as_f64()?,
            })
        })
        .collect()
}
