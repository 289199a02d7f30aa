//! Window arithmetic: a counter's or histogram's increase from a window's
//! first scrape to its last (a reset counts from zero), gauges over every
//! scrape, histogram quantiles as Prometheus estimates them, summed over a
//! cell's windows into one endpoint's [`ServerMetrics`].

use std::collections::BTreeMap;

use super::catalogue::{engine_of, known_metrics};
use super::counters::check_counters;
use super::{ClientTotals, GaugeStats, HistogramDelta, Kind, MetricSample, ServerMetrics, Window};

/// `name{a="x",b="y"}`: labels sorted, `le` left out (a bucket's own key).
pub fn series_key(name: &str, labels: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != "le")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    if parts.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", parts.join(","))
    }
}

/// What a sample is to the window math.
enum Role {
    Counter,
    Gauge,
    Bucket(f64),
    HistSum,
    HistCount,
}

fn role(s: &MetricSample) -> (Role, String) {
    let base = |suffix: &str| s.name.strip_suffix(suffix).unwrap_or(&s.name).to_string();
    match s.kind {
        Kind::Counter => (Role::Counter, s.name.clone()),
        Kind::Histogram if s.name.ends_with("_bucket") => {
            let le = match s.labels.get("le").map(String::as_str) {
                Some("+Inf") | None => f64::MAX,
                Some(x) => x.parse().unwrap_or(f64::MAX),
            };
            (Role::Bucket(le), base("_bucket"))
        }
        Kind::Histogram if s.name.ends_with("_sum") => (Role::HistSum, base("_sum")),
        Kind::Histogram if s.name.ends_with("_count") => (Role::HistCount, base("_count")),
        // A summary's sum and count only grow; its quantiles are gauges.
        Kind::Summary if s.name.ends_with("_sum") || s.name.ends_with("_count") => {
            (Role::Counter, s.name.clone())
        }
        Kind::Untyped if s.name.ends_with("_total") => (Role::Counter, s.name.clone()),
        _ => (Role::Gauge, s.name.clone()),
    }
}

/// A counter's increase from `a` to `b`; a drop is a reset (restart), after
/// which it counted from zero.
fn increase(a: Option<f64>, b: f64) -> f64 {
    match a {
        Some(a) if b >= a => b - a,
        _ => b,
    }
}

#[derive(Default)]
struct Hist {
    count: f64,
    sum: f64,
    buckets: BTreeMap<u64, (f64, f64)>,
}

/// One cell's server metrics from one endpoint's windows (each with the
/// client's totals over its requests). `incomplete` windows had no end.
pub fn summarize(
    endpoint: &str,
    url: &str,
    windows: &[(Window, ClientTotals)],
    incomplete: usize,
) -> ServerMetrics {
    let complete: Vec<&(Window, ClientTotals)> = windows
        .iter()
        .filter(|(w, _)| w.scrapes.len() >= 2)
        .collect();
    let mut out = ServerMetrics::unavailable(endpoint, url, "");
    out.unavailable = None;
    out.incomplete_windows = incomplete + (windows.len() - complete.len());
    out.windows = complete.len();
    let mut hists: BTreeMap<String, Hist> = BTreeMap::new();
    let mut gauge_values: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut client = ClientTotals::default();
    for (w, totals) in &complete {
        client.add(totals);
        add_window(&mut out, &mut hists, w);
        add_gauge_values(&mut gauge_values, w);
    }
    for (k, h) in hists {
        out.histograms.insert(k, histogram_delta(h));
    }
    for (k, vals) in &gauge_values {
        out.gauges.insert(k.clone(), gauge_stats(vals));
    }
    out.known = known_metrics(&out);
    for m in out.known.iter().filter(|m| m.kind == Kind::Gauge) {
        if let Some(v) = gauge_values.get(&m.key) {
            out.series
                .insert(m.key.clone(), v.iter().map(|&(t, x)| [t, x]).collect());
        }
    }
    out.check = out
        .engine
        .as_deref()
        .and_then(|e| check_counters(e, &out.counters, &client));
    out
}

/// One window's scrapes, span and engine, and its counters' and histograms'
/// increases from its first scrape to its last.
fn add_window(out: &mut ServerMetrics, hists: &mut BTreeMap<String, Hist>, w: &Window) {
    let first = &w.scrapes[0];
    let last = &w.scrapes[w.scrapes.len() - 1];
    out.scrapes += w.scrapes.len();
    out.window_s += (last.offset_ms - first.offset_ms).max(0.0) / 1000.0;
    out.engine = out
        .engine
        .take()
        .or(engine_of(&last.samples).map(str::to_string));
    let before: BTreeMap<(String, u64), f64> = first
        .samples
        .iter()
        .map(|s| ((full_key(s), bucket_bits(s)), s.value))
        .collect();
    for s in &last.samples {
        let (role, base) = role(s);
        let prior = before.get(&(full_key(s), bucket_bits(s))).copied();
        let inc = increase(prior, s.value);
        match role {
            Role::Counter => {
                *out.counters
                    .entry(series_key(&base, &s.labels))
                    .or_default() += inc;
            }
            Role::Bucket(le) => {
                let h = hists.entry(series_key(&base, &s.labels)).or_default();
                h.buckets.entry(le.to_bits()).or_insert((le, 0.0)).1 += inc;
            }
            Role::HistSum => hists.entry(series_key(&base, &s.labels)).or_default().sum += inc,
            Role::HistCount => hists.entry(series_key(&base, &s.labels)).or_default().count += inc,
            Role::Gauge => {}
        }
    }
}

/// Every gauge value of every scrape of the window, with its time.
fn add_gauge_values(gauge_values: &mut BTreeMap<String, Vec<(f64, f64)>>, w: &Window) {
    for sc in &w.scrapes {
        for s in sc
            .samples
            .iter()
            .filter(|s| matches!(role(s).0, Role::Gauge))
        {
            gauge_values
                .entry(series_key(&s.name, &s.labels))
                .or_default()
                .push((sc.offset_ms, s.value));
        }
    }
}

fn histogram_delta(h: Hist) -> HistogramDelta {
    let buckets: Vec<[f64; 2]> = h.buckets.values().map(|&(le, c)| [le, c]).collect();
    let q = |p: f64| quantile(&buckets, p);
    HistogramDelta {
        count: h.count,
        sum: h.sum,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        buckets,
    }
}

fn gauge_stats(vals: &[(f64, f64)]) -> GaugeStats {
    let n = vals.len();
    let sum: f64 = vals.iter().map(|v| v.1).sum();
    GaugeStats {
        n,
        min: vals.iter().map(|v| v.1).fold(f64::INFINITY, f64::min),
        max: vals.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max),
        mean: sum / n as f64,
        last: vals[n - 1].1,
    }
}

fn full_key(s: &MetricSample) -> String {
    series_key(&s.name, &s.labels)
}

/// A bucket's bound as part of its identity (0 for other samples).
fn bucket_bits(s: &MetricSample) -> u64 {
    match role(s).0 {
        Role::Bucket(le) => le.to_bits(),
        _ => 0,
    }
}

/// The q-quantile of cumulative buckets, linear within the bucket it falls
/// in (Prometheus `histogram_quantile`); in the `+Inf` bucket, the highest
/// finite bound. None without observations.
pub fn quantile(buckets: &[[f64; 2]], q: f64) -> Option<f64> {
    let total = buckets.last()?[1];
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0_f64, 0.0_f64);
    for &[le, c] in buckets {
        if c >= rank {
            if le == f64::MAX {
                return Some(prev.0);
            }
            let lower = if prev.0 == 0.0 && le < 0.0 {
                le
            } else {
                prev.0
            };
            let in_bucket = c - prev.1;
            if in_bucket <= 0.0 {
                return Some(le);
            }
            return Some(lower + (le - lower) * (rank - prev.1) / in_bucket);
        }
        prev = (le, c);
    }
    Some(prev.0)
}
