//! Cells and their metrics: requests and eligibility, the median prompt
//! tokens, the metric set against the policy, and each metric's declared
//! parameters and derived values (delta, flag, values from samples, CI and
//! verdict) within tolerance. Bit-for-bit recomputation is in `recompute`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::stats::{self, Direction, Interval, Verdict};

use super::super::checker::{Checker, join, show};
use super::super::model::{PolicyMetric, parse_regression_flag};
use super::super::policy::{infer_direction, split_quantile};
use super::params::{Params, check_named};

/// Per-request samples of one sample name: (baseline, candidate), each None when unreadable.
type SampleSides = (Option<Vec<f64>>, Option<Vec<f64>>);

/// Metric fields computed from per-request samples: a metric carrying one
/// had samples, and must still carry them.
const FROM_SAMPLES: [&str; 6] = [
    "baseline_n",
    "candidate_n",
    "ci_delta_percent",
    "verdict",
    "requests_to_resolve",
    "evidence",
];

fn parse_direction(s: &str) -> Option<Direction> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

fn parse_verdict(s: &str) -> Option<Verdict> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

/// Check every cell; returns whether the performance gate passes as found.
pub(super) fn check_cells(ck: &mut Checker, root: &Map<String, Value>, params: &Params) -> bool {
    let Some(cells) = ck.object("cells", root.get("cells")) else {
        return false;
    };
    let mut passes = !cells.is_empty();
    for (name, cell) in cells {
        passes &= check_cell(ck, &format!("cells.{name}"), cell, params);
    }
    passes
}

/// What one cell tells its metrics.
struct CellContext {
    requests: BTreeMap<&'static str, Option<u64>>,
    samples: BTreeMap<String, SampleSides>,
    /// The cell carries a `samples` object.
    has_samples: bool,
}

/// Check one cell; returns whether it passes the performance gate as found.
fn check_cell(ck: &mut Checker, path: &str, cell: &Value, params: &Params) -> bool {
    let Some(cell) = ck.object(path, Some(cell)) else {
        return false;
    };
    let (eligible, requests) = check_sides(ck, path, cell);
    check_median(ck, path, cell);
    let (samples, has_samples) = read_samples(ck, path, cell);
    check_counts_against_kept(ck, path, cell);
    if params.samples_kept && !has_samples {
        ck.push(
            join(path, "samples"),
            "missing".into(),
            "the per-request samples: statistics.samples_kept says the report keeps them",
        );
    }
    let ctx = CellContext {
        requests,
        samples,
        has_samples,
    };
    let mp = join(path, "metrics");
    let Some(metrics) = ck.object(&mp, cell.get("metrics")) else {
        return false;
    };
    // A capacity cell gates on its capacity ratio alone (recomputed bit for
    // bit in `recompute`): it has no metrics to require.
    if let Some(c) = cell.get("capacity") {
        for name in metrics.keys() {
            ck.push(
                format!("{mp}.{name}"),
                "present".into(),
                "absent: a capacity cell gates on its capacity ratio, not on metrics",
            );
        }
        return c.get("outcome").and_then(Value::as_str) == Some("pass");
    }
    let mut passes = eligible;
    for g in params.required.iter().filter(|g| !metrics.contains_key(*g)) {
        passes = false;
        if params.claims_performance_pass {
            ck.push(
                format!("{mp}.{g}"),
                "missing".into(),
                "present: performance_gate_passed is true, and a gate cannot pass without a metric it gates",
            );
        }
    }
    for (name, m) in metrics {
        let path = format!("{mp}.{name}");
        if params.policy_metrics.is_some() && params.metric(name).is_none() {
            ck.push(
                &path,
                "present".into(),
                "absent: the policy block does not gate this metric",
            );
        }
        passes &= check_metric(ck, &path, name, m, &ctx, params.metric(name));
    }
    passes
}

/// Requests, eligibility and ineligible reasons of both sides; returns
/// whether both sides are eligible, and each side's requests.
/// The per-request values a row and a sample both carry: a succeeded
/// request's row holds the value its sample does, in request order.
const ROW_SAMPLES: [&str; 3] = ["ttft_ms", "e2e_ms", "tpot_ms"];

/// A cell's request counts against what it keeps per request: its rows (one
/// per request, failures included, in request order) and its samples (one
/// per succeeded request that has the value). A count or a row edited alone
/// no longer matches the rest.
fn check_counts_against_kept(ck: &mut Checker, path: &str, cell: &Map<String, Value>) {
    for side in ["baseline", "candidate"] {
        let rkey = format!("{side}_requests");
        let fkey = format!("{side}_failed");
        let requests = cell.get(&rkey).and_then(Value::as_u64);
        let failed = cell.get(&fkey).and_then(Value::as_u64);
        let sample = |k: &str| {
            cell.get("samples")
                .and_then(|s| s.get(k))
                .and_then(|p| p.get(side))
                .and_then(Value::as_array)
        };
        let rows = cell
            .get("request_rows")
            .and_then(|r| r.get(side))
            .and_then(Value::as_array);
        let Some(rows) = rows else {
            if let (Some(r), Some(s)) = (requests, sample("ttft_ms")) {
                let at_least = s.len() as u64 + failed.unwrap_or(0);
                if r < at_least {
                    ck.push(
                        join(path, &rkey),
                        r.to_string(),
                        format!(
                            "at least {at_least}: samples.ttft_ms.{side} holds {} succeeded requests",
                            s.len()
                        ),
                    );
                }
            }
            ck.limit(format!(
                "{path}.{rkey}: the cell keeps no request_rows, so the count is checked only against its samples; `infergate verify --runs` counts the journal"
            ));
            continue;
        };
        if let Some(r) = requests
            && r != rows.len() as u64
        {
            ck.push(
                join(path, &rkey),
                r.to_string(),
                format!("{}: the request_rows.{side} it keeps", rows.len()),
            );
        }
        let ok: Vec<&Value> = rows
            .iter()
            .filter(|row| row.get("ok").and_then(Value::as_bool) == Some(true))
            .collect();
        let not_ok = (rows.len() - ok.len()) as u64;
        if let Some(f) = failed
            && f != not_ok
        {
            ck.push(
                join(path, &fkey),
                f.to_string(),
                format!("{not_ok}: the request_rows.{side} not ok"),
            );
        }
        for k in ROW_SAMPLES {
            let Some(kept) = sample(k) else { continue };
            let kept: Vec<Option<f64>> = kept.iter().map(Value::as_f64).collect();
            let from_rows: Vec<Option<f64>> = ok
                .iter()
                .filter_map(|row| row.get(k).map(Value::as_f64))
                .collect();
            if kept != from_rows {
                ck.push(
                    join(path, &format!("request_rows.{side}")),
                    format!("{} succeeded rows with {k}", from_rows.len()),
                    format!(
                        "the {} values of samples.{k}.{side}, in the same order",
                        kept.len()
                    ),
                );
            }
        }
    }
}

fn check_sides(
    ck: &mut Checker,
    path: &str,
    cell: &Map<String, Value>,
) -> (bool, BTreeMap<&'static str, Option<u64>>) {
    let p = |k: &str| join(path, k);
    let mut eligible_both = true;
    let mut requests = BTreeMap::new();
    for side in ["baseline", "candidate"] {
        let r = ck.count(
            &p(&format!("{side}_requests")),
            cell.get(&format!("{side}_requests")),
        );
        requests.insert(side, r);
        let key = format!("{side}_performance_eligible");
        let eligible = ck.boolean(&p(&key), cell.get(&key));
        eligible_both &= eligible == Some(true);
        let fkey = format!("{side}_failed");
        let failed = ck.opt_count(&p(&fkey), cell.get(&fkey));
        if let (Some(f), Some(r)) = (failed, r)
            && f > r
        {
            ck.push(
                p(&fkey),
                f.to_string(),
                format!("at most {side}_requests ({r})"),
            );
        }
        if eligible == Some(true) && failed.is_some_and(|f| f > 0) {
            ck.push(
                p(&key),
                "true".into(),
                format!("false, as {fkey} is not 0: a cell with failed requests is not performance evidence"),
            );
        }
        let rkey = format!("{side}_ineligible_reasons");
        if let Some(v) = cell.get(&rkey)
            && let Some(reasons) = ck.array(&p(&rkey), Some(v))
        {
            for (i, r) in reasons.iter().enumerate() {
                ck.string(&format!("{}[{i}]", p(&rkey)), Some(r));
            }
            if eligible == Some(true) && !reasons.is_empty() {
                ck.push(
                    p(&key),
                    "true".into(),
                    format!("false, as {rkey} is not empty"),
                );
            }
        }
    }
    (eligible_both, requests)
}

/// `median_prompt_tokens`: the baseline's, else the candidate's, when the
/// per-side values are given.
fn check_median(ck: &mut Checker, path: &str, cell: &Map<String, Value>) {
    let p = |k: &str| join(path, k);
    let found = ck.opt_num(&p("median_prompt_tokens"), cell.get("median_prompt_tokens"));
    if cell.get("median_prompt_tokens").is_none() {
        ck.wrong(&p("median_prompt_tokens"), None, "a finite number");
    }
    let bm = ck.opt_num(
        &p("baseline_median_prompt_tokens"),
        cell.get("baseline_median_prompt_tokens"),
    );
    let cm = ck.opt_num(
        &p("candidate_median_prompt_tokens"),
        cell.get("candidate_median_prompt_tokens"),
    );
    if let Some(expected) = bm.or(cm) {
        match found {
            Some(f) => ck.expect_num(&p("median_prompt_tokens"), f, expected),
            None => ck.push(
                p("median_prompt_tokens"),
                show(cell.get("median_prompt_tokens")),
                expected.to_string(),
            ),
        }
    }
}

/// The cell's samples, keyed by sample name, and whether it has a samples object.
fn read_samples(
    ck: &mut Checker,
    path: &str,
    cell: &Map<String, Value>,
) -> (BTreeMap<String, SampleSides>, bool) {
    let mut samples = BTreeMap::new();
    let sp = join(path, "samples");
    let Some(v) = cell.get("samples").filter(|v| !v.is_null()) else {
        return (samples, false);
    };
    let Some(s) = ck.object(&sp, Some(v)) else {
        return (samples, false);
    };
    for (k, pair) in s {
        let kp = format!("{sp}.{k}");
        let b = ck.f64_array(&join(&kp, "baseline"), pair.get("baseline"));
        let c = ck.f64_array(&join(&kp, "candidate"), pair.get("candidate"));
        samples.insert(k.clone(), (b, c));
    }
    (samples, true)
}

/// The metric's flag, its threshold and its value, from its one flag key.
fn regression_flag<'a>(
    ck: &mut Checker,
    path: &str,
    m: &'a Map<String, Value>,
) -> (Option<&'a str>, Option<f64>, Option<bool>) {
    let flags: Vec<(&String, f64)> = m
        .keys()
        .filter_map(|k| parse_regression_flag(k).map(|t| (k, t)))
        .collect();
    let (key, threshold) = match flags.as_slice() {
        [(k, t)] => (Some(k.as_str()), Some(*t)),
        [] => {
            ck.push(
                join(path, "no_more_than_<T>_percent_regression"),
                "missing".into(),
                "a boolean regression flag",
            );
            (None, None)
        }
        more => {
            let names: Vec<&str> = more.iter().map(|(k, _)| k.as_str()).collect();
            ck.push(
                path,
                format!("{} regression flags ({})", more.len(), names.join(", ")),
                "exactly one",
            );
            (None, None)
        }
    };
    let found = key.and_then(|k| ck.boolean(&join(path, k), m.get(k)));
    (key, threshold, found)
}

/// The flag's threshold against `threshold_percent` and the policy's.
fn check_threshold(
    ck: &mut Checker,
    path: &str,
    m: &Map<String, Value>,
    flag: (Option<&str>, Option<f64>),
    policy: Option<&PolicyMetric>,
) {
    let (Some(key), Some(t)) = flag else { return };
    if let Some(v) = m.get("threshold_percent")
        && let Some(found) = ck.num(&join(path, "threshold_percent"), Some(v))
        && found != t
    {
        ck.push(
            join(path, "threshold_percent"),
            found.to_string(),
            format!("{t}, as the flag's name says"),
        );
    }
    if let Some(pm) = policy
        && pm.threshold_percent != t
    {
        ck.push(
            join(path, key),
            format!("a flag for {t}%"),
            format!(
                "no_more_than_{}_percent_regression: policy.metrics gives this metric a threshold of {}%",
                pm.threshold_percent, pm.threshold_percent
            ),
        );
    }
}

/// The metric's direction: its `direction` field (which must agree with the
/// policy and the name), else the policy's, else the name's.
fn metric_direction(
    ck: &mut Checker,
    path: &str,
    name: &str,
    m: &Map<String, Value>,
    policy: Option<&PolicyMetric>,
) -> Option<Direction> {
    let inferred = split_quantile(name);
    let base = inferred.as_ref().map_or(name, |(s, _)| s.as_str());
    let found = m.get("direction").map(|v| {
        let d = v.as_str().and_then(parse_direction);
        if d.is_none() {
            ck.wrong(
                &join(path, "direction"),
                Some(v),
                "\"lower_is_better\" or \"higher_is_better\"",
            );
        }
        d
    });
    if let (Some(Some(f)), Some(pm)) = (found, policy)
        && f != pm.direction
    {
        ck.push(
            join(path, "direction"),
            show(m.get("direction")),
            format!(
                "{}, as policy.metrics says",
                show(serde_json::to_value(pm.direction).ok().as_ref())
            ),
        );
    }
    check_named(ck, path, name, None, None, found.flatten());
    let d = match found {
        Some(d) => d,
        None => policy
            .map(|p| p.direction)
            .or_else(|| infer_direction(base)),
    };
    if found.is_none() && d.is_none() {
        ck.push(
            join(path, "direction"),
            "missing".into(),
            "a direction: the name says neither `_ms` (lower is better) nor `tok_s` (higher is better)",
        );
    }
    d
}

/// The metric's sample and quantile: its own fields (checked against the
/// policy and the name), else the policy's, else the name's.
fn sample_and_quantile(
    ck: &mut Checker,
    path: &str,
    name: &str,
    m: &Map<String, Value>,
    policy: Option<&PolicyMetric>,
) -> (Option<String>, Option<f64>) {
    let sample = m
        .get("sample")
        .map(|v| ck.string(&join(path, "sample"), Some(v)));
    let quantile = m
        .get("quantile")
        .map(|v| ck.num(&join(path, "quantile"), Some(v)));
    if let Some(pm) = policy {
        if let Some(Some(s)) = sample
            && s != pm.sample
        {
            ck.push(
                join(path, "sample"),
                format!("\"{s}\""),
                format!("\"{}\", as policy.metrics says", pm.sample),
            );
        }
        if let Some(Some(q)) = quantile
            && q != pm.quantile
        {
            ck.push(
                join(path, "quantile"),
                q.to_string(),
                format!("{}, as policy.metrics says", pm.quantile),
            );
        }
    }
    check_named(ck, path, name, sample.flatten(), quantile.flatten(), None);
    let inferred = split_quantile(name);
    let sample = sample
        .flatten()
        .map(String::from)
        .or_else(|| policy.map(|p| p.sample.clone()))
        .or_else(|| inferred.as_ref().map(|(s, _)| s.clone()));
    let quantile = quantile
        .flatten()
        .or(policy.map(|p| p.quantile))
        .or(inferred.map(|(_, q)| q));
    (sample, quantile)
}

/// `<side>_n`: a count, at most the cell's requests.
fn sample_counts(
    ck: &mut Checker,
    path: &str,
    m: &Map<String, Value>,
    ctx: &CellContext,
) -> [(&'static str, Option<u64>); 2] {
    let ns = ["baseline", "candidate"].map(|side| {
        let key = format!("{side}_n");
        (side, ck.opt_count(&join(path, &key), m.get(&key)))
    });
    for (side, n) in ns {
        if let (Some(n), Some(Some(r))) = (n, ctx.requests.get(side))
            && n > *r
        {
            ck.push(
                join(path, &format!("{side}_n")),
                n.to_string(),
                format!("at most {side}_requests ({r})"),
            );
        }
    }
    ns
}

/// Values and n against the samples, when the cell carries them; a metric
/// with sample-derived fields and no samples is itself a disagreement.
fn check_against_samples(
    ck: &mut Checker,
    path: &str,
    m: &Map<String, Value>,
    (sample, quantile): (Option<String>, Option<f64>),
    ns: [(&'static str, Option<u64>); 2],
    ctx: &CellContext,
) {
    let pair = sample.as_ref().and_then(|k| ctx.samples.get(k));
    let Some((bs, cs)) = pair else {
        let derived: Vec<&str> = FROM_SAMPLES
            .into_iter()
            .filter(|k| m.contains_key(*k))
            .collect();
        if !derived.is_empty() {
            let cell_path = path.split(".metrics.").next().unwrap_or(path);
            ck.push(
                format!("{cell_path}.samples.{}", sample.as_deref().unwrap_or("?")),
                if ctx.has_samples {
                    "no such sample"
                } else {
                    "missing"
                }
                .into(),
                format!("the samples {} were computed from", derived.join(", ")),
            );
        }
        return;
    };
    let Some(q) = quantile else { return };
    for ((side, vals), (_, n)) in [("baseline", bs), ("candidate", cs)].into_iter().zip(ns) {
        let Some(vals) = vals else { continue };
        let mut sorted = vals.clone();
        sorted.sort_by(f64::total_cmp);
        let found = m.get(side).and_then(Value::as_f64);
        if let (Some(found), Some(expected)) = (found, stats::percentile_sorted(&sorted, q)) {
            ck.expect_num(&join(path, side), found, expected);
        }
        if let Some(n) = n
            && n != vals.len() as u64
        {
            ck.push(
                join(path, &format!("{side}_n")),
                n.to_string(),
                format!("{}, the number of samples", vals.len()),
            );
        }
    }
}

/// `delta_percent` from the values, the flag from the delta; returns the
/// flag as implied.
fn check_delta_and_flag(
    ck: &mut Checker,
    path: &str,
    m: &Map<String, Value>,
    values: (Option<f64>, Option<f64>),
    direction: Option<Direction>,
    flag: (Option<&str>, Option<f64>, Option<bool>),
) -> Option<bool> {
    let delta_found = match m.get("delta_percent") {
        Some(Value::Null) => None,
        v => ck.num(&join(path, "delta_percent"), v),
    };
    let (Some(b), Some(c)) = values else {
        return None;
    };
    let expected = stats::delta_percent(b, c);
    match (delta_found, expected) {
        (Some(f), Some(e)) => ck.expect_num(&join(path, "delta_percent"), f, e),
        (None, None) => {}
        (f, e) => ck.push(
            join(path, "delta_percent"),
            f.map_or_else(|| show(m.get("delta_percent")), |x| x.to_string()),
            e.map_or_else(|| "null (baseline is 0)".to_string(), |x| x.to_string()),
        ),
    }
    let (key, threshold, found) = flag;
    let implied = match (direction, threshold) {
        (Some(dir), Some(t)) => {
            Some(expected.is_some_and(|d| stats::within_regression_threshold(dir, d, t)))
        }
        _ => None,
    };
    if let (Some(k), Some(f), Some(e)) = (key, found, implied) {
        ck.expect_bool(&join(path, k), f, e);
    }
    implied
}

/// The CI's shape, and the verdict from it.
fn check_ci_and_verdict(
    ck: &mut Checker,
    path: &str,
    m: &Map<String, Value>,
    direction: Option<Direction>,
    threshold: Option<f64>,
) {
    let ci = match m.get("ci_delta_percent") {
        None | Some(Value::Null) => None,
        Some(v) => read_interval(ck, &join(path, "ci_delta_percent"), v),
    };
    match m.get("verdict") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_str().and_then(parse_verdict) {
            None => ck.wrong(
                &join(path, "verdict"),
                Some(v),
                "\"improved\", \"regressed\", \"equivalent\" or \"inconclusive\"",
            ),
            Some(found) => {
                if let (Some(ci), Some(dir), Some(t)) = (ci, direction, threshold) {
                    let expected = stats::verdict(dir, &ci, t);
                    if found != expected {
                        ck.push(
                            join(path, "verdict"),
                            show(Some(v)),
                            show(serde_json::to_value(expected).ok().as_ref()),
                        );
                    }
                }
            }
        },
    }
    ck.opt_count(
        &join(path, "requests_to_resolve"),
        m.get("requests_to_resolve"),
    );
}

fn read_interval(ck: &mut Checker, cp: &str, v: &Value) -> Option<Interval> {
    let low = ck.num(&join(cp, "low"), v.get("low"));
    let high = ck.num(&join(cp, "high"), v.get("high"));
    let confidence = ck.num(&join(cp, "confidence"), v.get("confidence"));
    let (low, high, confidence) = (low?, high?, confidence?);
    if low > high {
        ck.push(
            join(cp, "low"),
            low.to_string(),
            format!("at most high ({high})"),
        );
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        ck.push(join(cp, "confidence"), confidence.to_string(), "in (0, 1)");
    }
    Some(Interval {
        low,
        high,
        confidence,
    })
}

/// Check one metric; returns its regression flag as found (or as implied when unreadable).
fn check_metric(
    ck: &mut Checker,
    path: &str,
    name: &str,
    m: &Value,
    ctx: &CellContext,
    policy: Option<&PolicyMetric>,
) -> bool {
    let Some(m) = ck.object(path, Some(m)) else {
        return false;
    };
    let b = ck.num(&join(path, "baseline"), m.get("baseline"));
    let c = ck.num(&join(path, "candidate"), m.get("candidate"));
    let flag = regression_flag(ck, path, m);
    check_threshold(ck, path, m, (flag.0, flag.1), policy);
    let direction = metric_direction(ck, path, name, m, policy);
    let ns = sample_counts(ck, path, m, ctx);
    let sq = sample_and_quantile(ck, path, name, m, policy);
    check_against_samples(ck, path, m, sq, ns, ctx);
    let implied = check_delta_and_flag(ck, path, m, (b, c), direction, flag);
    check_ci_and_verdict(ck, path, m, direction, flag.1);
    flag.2.or(implied).unwrap_or(false)
}
