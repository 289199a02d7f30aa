//! Per-cell aggregation: records in, a `CellResult` out. Pure.

use std::collections::BTreeMap;

use crate::artifact::{CellResult, metric};
use crate::config::suite::CellSpec;
use crate::measure::record::{Outcome, RequestRecord};
use crate::stats;

/// Aggregate one cell's records (any order; sorted by index here), all in one cluster.
pub fn cell(spec: &CellSpec, records: &[RequestRecord]) -> CellResult {
    cell_clustered(spec, records, |_| 0)
}

/// [`cell`], with each request's cluster (its pass, process lifetime or
/// interleaved block) kept beside every sample value it gives, so `compare`
/// can resample clusters. A single cluster writes no `sample_clusters`.
pub fn cell_clustered(
    spec: &CellSpec,
    records: &[RequestRecord],
    cluster_of: impl Fn(&RequestRecord) -> u32,
) -> CellResult {
    let mut recs: Vec<&RequestRecord> = records.iter().filter(|r| r.cell == spec.name).collect();
    recs.sort_by_key(|r| r.index);

    let ok: Vec<&RequestRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Ok)
        .collect();
    let mut failures_by_class = BTreeMap::new();
    for r in recs.iter().filter(|r| r.outcome != Outcome::Ok) {
        *failures_by_class
            .entry(r.outcome.as_str().to_string())
            .or_insert(0) += 1;
    }

    // One column per metric, filled in request order; keyed only at the end
    // (a map entry per push would allocate a key per request and metric).
    let mut cols: [Vec<f64>; COLUMNS.len()] = std::array::from_fn(|_| Vec::with_capacity(ok.len()));
    let mut clusters: [Vec<u32>; COLUMNS.len()] =
        std::array::from_fn(|_| Vec::with_capacity(ok.len()));
    let mut itl = Vec::with_capacity(ok.iter().map(|r| r.capture.chunk_ms.len()).sum());
    for r in &ok {
        let d = r.capture.derived();
        let row = [
            d.ttft_ms,
            d.ttfo_ms,
            d.e2e_ms,
            d.decode_tok_s,
            d.tpot_ms,
            d.prefill_tok_s,
            Some(r.queue_ms),
            r.capture.prompt_tokens.map(|v| v as f64),
            r.capture.completion_tokens.map(|v| v as f64),
        ];
        let k = cluster_of(r);
        for ((col, cl), v) in cols.iter_mut().zip(clusters.iter_mut()).zip(row) {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                col.push(v);
                cl.push(k);
            }
        }
        itl.extend(r.capture.itl_ms());
    }
    let multi_cluster = clusters
        .iter()
        .flatten()
        .any(|&k| k != clusters_first(&clusters));
    let sample_clusters: BTreeMap<String, Vec<u32>> = if multi_cluster {
        COLUMNS
            .iter()
            .zip(clusters)
            .filter(|(k, v)| !v.is_empty() && GATING_SAMPLES.contains(k))
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    } else {
        BTreeMap::new()
    };
    let samples: BTreeMap<String, Vec<f64>> = COLUMNS
        .iter()
        .zip(cols)
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let mut metrics: BTreeMap<String, _> = samples
        .iter()
        .filter_map(|(k, v)| stats::summarize(v).map(|s| (k.clone(), s)))
        .collect();
    // ITL pools every gap of every request: it describes chunks, not requests.
    // Often millions of values: radix-sorted here, summarize's own sort then
    // finds them in order (same result: sorting under a total order is unique).
    radix_sort(&mut itl);
    if let Some(s) = stats::summarize(&itl) {
        metrics.insert(metric::ITL_MS.to_string(), s);
    }

    let mut reasons = Vec::new();
    if recs.len() < spec.requests {
        reasons.push(format!(
            "only {} of {} requests recorded",
            recs.len(),
            spec.requests
        ));
    }
    if !failures_by_class.is_empty() {
        let parts: Vec<String> = failures_by_class
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        reasons.push(format!("failed requests: {}", parts.join(", ")));
    }
    let missing_prompt = ok
        .iter()
        .filter(|r| r.capture.prompt_tokens.is_none())
        .count();
    if missing_prompt > 0 {
        reasons.push(format!(
            "{missing_prompt} requests without server-reported prompt tokens"
        ));
    }
    let off: Vec<u64> = ok
        .iter()
        .filter_map(|r| r.capture.prompt_tokens)
        .filter(|&p| !spec.prompt_within_tolerance(p))
        .collect();
    if !off.is_empty() {
        reasons.push(format!(
            "{} requests outside prompt tolerance ({} ± {}%), e.g. {} tokens",
            off.len(),
            spec.prompt_tokens,
            spec.tolerance_percent,
            off[0]
        ));
    }
    let missing_decode = ok.len() - samples.get(metric::DECODE_TOK_S).map_or(0, Vec::len);
    if missing_decode > 0 {
        reasons.push(format!(
            "{missing_decode} requests too short to measure decode speed (< 2 tokens)"
        ));
    }

    CellResult {
        name: spec.name.clone(),
        shape: spec.shape(),
        requests: recs.len(),
        succeeded: ok.len(),
        failed: recs.len() - ok.len(),
        failures_by_class,
        performance_eligible: reasons.is_empty(),
        ineligible_reasons: reasons,
        median_prompt_tokens: samples
            .get(metric::PROMPT_TOKENS)
            .and_then(|v| stats::median(v)),
        metrics,
        samples: samples
            .into_iter()
            .filter(|(k, _)| GATING_SAMPLES.contains(&k.as_str()))
            .collect(),
        tokens_estimated: ok.iter().any(|r| r.capture.completion_tokens_estimated),
        sample_clusters,
    }
}

fn clusters_first(clusters: &[Vec<u32>]) -> u32 {
    clusters.iter().flatten().next().copied().unwrap_or(0)
}

/// Per-request metrics, in the order of the row built for each request in [`cell`].
const COLUMNS: [&str; 9] = [
    metric::TTFT_MS,
    metric::TTFO_MS,
    metric::E2E_MS,
    metric::DECODE_TOK_S,
    metric::TPOT_MS,
    metric::PREFILL_TOK_S,
    metric::QUEUE_MS,
    metric::PROMPT_TOKENS,
    metric::COMPLETION_TOKENS,
];

/// Per-request metrics kept in full in the artifact, for resampling and plots.
const GATING_SAMPLES: &[&str] = &[
    metric::TTFT_MS,
    metric::TTFO_MS,
    metric::E2E_MS,
    metric::DECODE_TOK_S,
    metric::TPOT_MS,
    metric::PREFILL_TOK_S,
    metric::PROMPT_TOKENS,
    metric::COMPLETION_TOKENS,
];

/// Sort ascending in `f64::total_cmp` order, in O(n): an LSD radix sort on
/// keys that order like `total_cmp` (sign bit flipped for positives, all bits
/// for negatives), 16 bits per pass, skipping passes where all keys agree.
fn radix_sort(v: &mut [f64]) {
    if v.len() < 4096 {
        v.sort_unstable_by(f64::total_cmp);
        return;
    }
    let key = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 { !b } else { b | 1 << 63 }
    };
    let mut keys: Vec<u64> = v.iter().map(|&x| key(x)).collect();
    let mut tmp = vec![0u64; keys.len()];
    let mut counts = vec![0usize; 1 << 16];
    for shift in [0, 16, 32, 48] {
        counts.fill(0);
        for &k in &keys {
            counts[(k >> shift) as usize & 0xFFFF] += 1;
        }
        if counts.contains(&keys.len()) {
            continue;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        for &k in &keys {
            let d = (k >> shift) as usize & 0xFFFF;
            tmp[counts[d]] = k;
            counts[d] += 1;
        }
        std::mem::swap(&mut keys, &mut tmp);
    }
    for (x, k) in v.iter_mut().zip(keys) {
        let b = if k >> 63 == 1 { k & !(1 << 63) } else { !k };
        *x = f64::from_bits(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_orders_like_total_cmp() {
        let mut rng = crate::stats::SplitMix64::new(3);
        let mut v: Vec<f64> = (0..20_000)
            .map(|i| match i % 7 {
                0 => -(rng.next_u64() as f64) / 1e9,
                1 => 0.0,
                2 => -0.0,
                3 => f64::INFINITY,
                4 => f64::NEG_INFINITY,
                _ => (rng.next_u64() % 10_000) as f64 / 7.0,
            })
            .collect();
        let mut want = v.clone();
        want.sort_unstable_by(f64::total_cmp);
        radix_sort(&mut v);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&v), bits(&want));
    }
}
