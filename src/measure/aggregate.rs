//! Per-cell aggregation: records in, a `CellResult` out. Pure.

use std::collections::BTreeMap;

use crate::artifact::{
    CellResult, OutputLength, PromptCache, RequestRow, ResponseCounts, ServerTimingCheck, Sessions,
    Slice, Speculative, SpeculativeError, metric,
};
use crate::config::suite::{CachePolicy, CellEndpoint, CellSpec, OutputPolicy, within_tolerance};
use crate::measure::record::{Outcome, RequestRecord};
use crate::slo;
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
    // A capacity search's warm-ups are journaled, never measured.
    let mut recs: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.cell == spec.name && !r.capacity.is_some_and(|m| m.warmup))
        .collect();
    recs.sort_by_key(|r| r.index);
    let ok: Vec<&RequestRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Ok)
        .collect();
    let failures_by_class = failures_by_class(&recs);
    let open_loop = spec.open_loop();
    let Columns {
        cols,
        clusters,
        itl,
    } = columns(&ok, open_loop, &cluster_of);
    let sample_clusters = sample_clusters(clusters);
    let samples: BTreeMap<String, Vec<f64>> = COLUMNS
        .iter()
        .zip(cols)
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let metrics = metrics(&samples, itl);
    let request_rows: Vec<RequestRow> =
        recs.iter().map(|r| request_row(r, cluster_of(r))).collect();
    let slo = spec.slo.as_ref().map(|t| slo::attainment(t, &request_rows));
    let (prompt_cache, cache_reason) = prompt_cache(spec, &ok);
    let (speculative, speculative_refused) = match speculative(&ok) {
        Ok(s) => (s, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let mut reasons = ineligible_reasons(spec, &recs, &ok, &samples, &failures_by_class);
    reasons.extend(cache_reason);
    reasons.extend(speculative_refused);
    reasons.extend(
        spec.expect
            .unmet(prompt_cache.as_ref(), speculative.as_ref()),
    );
    let server_timings = server_timing_check(&ok);
    let warnings = cell_warnings(&ok, open_loop, server_timings.as_ref());

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
            // Closed loop has no schedule: queue time is 0 by construction.
            .filter(|(k, _)| open_loop || k != metric::QUEUE_MS)
            .collect(),
        tokens_estimated: ok.iter().any(|r| r.capture.completion_tokens_estimated),
        sample_clusters,
        prompt_cache,
        speculative,
        expect: spec.expect,
        output_length: Some(output_length(spec, &ok)),
        warnings,
        request_rows,
        slo,
        server_timings,
        // From the scrape log, not the journal: `windows::attach`.
        server_metrics: Vec::new(),
        slices: slices(&recs),
        sessions: sessions(&recs),
        // A capacity search's levels: the runner's, from the same records.
        capacity: None,
        // A capture's replay: the runner's, from the cell's trace.
        fidelity: None,
    }
}

/// The server's drafted and accepted tokens over the successful requests
/// that reported them; None when none did (no speculative decoding, or an
/// engine that does not say). Refused (the cell then shows no drafting and
/// names why) when a response accepts more than it drafted or a sum passes
/// `u64::MAX`.
fn speculative(ok: &[&RequestRecord]) -> Result<Option<Speculative>, SpeculativeError> {
    Speculative::sum_responses(ok.iter().filter_map(|r| {
        let t = r.capture.server_timings.as_ref()?;
        Some(ResponseCounts {
            request: r.index,
            drafted: t.draft_n?,
            accepted: t.draft_n_accepted.unwrap_or(0),
            predicted: t.predicted_n.unwrap_or(0),
        })
    }))
}

/// Failed requests counted by outcome.
fn failures_by_class(recs: &[&RequestRecord]) -> BTreeMap<String, usize> {
    let mut failures_by_class = BTreeMap::new();
    for r in recs.iter().filter(|r| r.outcome != Outcome::Ok) {
        *failures_by_class
            .entry(r.outcome.as_str().to_string())
            .or_insert(0) += 1;
    }
    failures_by_class
}

/// The successful requests' values: one column per metric of [`COLUMNS`],
/// each value's cluster beside it, and every inter-token gap pooled.
struct Columns {
    cols: [Vec<f64>; COLUMNS.len()],
    clusters: [Vec<u32>; COLUMNS.len()],
    itl: Vec<f64>,
}

fn columns(
    ok: &[&RequestRecord],
    open_loop: bool,
    cluster_of: &impl Fn(&RequestRecord) -> u32,
) -> Columns {
    // One column per metric, filled in request order; keyed only at the end
    // (a map entry per push would allocate a key per request and metric).
    let mut cols: [Vec<f64>; COLUMNS.len()] = std::array::from_fn(|_| Vec::with_capacity(ok.len()));
    let mut clusters: [Vec<u32>; COLUMNS.len()] =
        std::array::from_fn(|_| Vec::with_capacity(ok.len()));
    let mut itl = Vec::with_capacity(ok.iter().map(|r| r.capture.chunk_ms.len()).sum());
    for r in ok {
        let d = r.capture.derived();
        // Open loop: latency as a user sees it, from when the request was due.
        let sched = |v: Option<f64>| v.filter(|_| open_loop).map(|v| v + r.queue_ms);
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
            sched(d.ttft_ms),
            sched(d.e2e_ms),
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
    Columns {
        cols,
        clusters,
        itl,
    }
}

/// The gating samples' clusters, when there is more than one cluster.
fn sample_clusters(clusters: [Vec<u32>; COLUMNS.len()]) -> BTreeMap<String, Vec<u32>> {
    let multi_cluster = clusters
        .iter()
        .flatten()
        .any(|&k| k != clusters_first(&clusters));
    if multi_cluster {
        COLUMNS
            .iter()
            .zip(clusters)
            .filter(|(k, v)| !v.is_empty() && GATING_SAMPLES.contains(k))
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    } else {
        BTreeMap::new()
    }
}

/// Each sample's summary, and ITL's.
fn metrics(
    samples: &BTreeMap<String, Vec<f64>>,
    mut itl: Vec<f64>,
) -> BTreeMap<String, stats::Summary> {
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
    metrics
}

/// Schedule warnings, and a measurement error when the client's TTFT is
/// below the server's own prompt time.
fn cell_warnings(
    ok: &[&RequestRecord],
    open_loop: bool,
    server_timings: Option<&ServerTimingCheck>,
) -> Vec<String> {
    let mut warnings = schedule_warnings(ok, open_loop);
    if let Some(t) = server_timings.filter(|t| t.client_below_server > 0) {
        warnings.push(format!(
            "MEASUREMENT ERROR: {} of {} requests have a client TTFT below the server's own prompt time; the client's clock or stream parsing is wrong for them",
            t.client_below_server, t.requests
        ));
    }
    warnings
}

/// The cell's sessions, when its requests have turns: request `i` is turn
/// `i % turns` of session `i / turns` (`measure::source`).
fn sessions(recs: &[&RequestRecord]) -> Option<Sessions> {
    let turns = recs.iter().filter_map(|r| r.turn).max()? + 1;
    let mut by: BTreeMap<usize, Vec<&RequestRecord>> = BTreeMap::new();
    for r in recs {
        by.entry(r.index / turns as usize).or_default().push(r);
    }
    let (mut duration, mut ttft_sum) = (Vec::new(), Vec::new());
    for rs in by.values() {
        if rs.len() != turns as usize || rs.iter().any(|r| r.outcome != Outcome::Ok) {
            continue;
        }
        let start = rs
            .iter()
            .map(|r| r.send_offset_ms)
            .fold(f64::INFINITY, f64::min);
        let end = rs
            .iter()
            .filter_map(|r| Some(r.send_offset_ms + r.capture.e2e_ms?))
            .fold(f64::NEG_INFINITY, f64::max);
        if end.is_finite() && start.is_finite() {
            duration.push(end - start);
        }
        let waits: Option<f64> = rs.iter().map(|r| r.capture.ttft_ms).sum();
        ttft_sum.extend(waits);
    }
    Some(Sessions {
        turns,
        sessions: by.len(),
        complete: duration.len(),
        duration_p50_ms: stats::median(&duration),
        duration_max_ms: duration.iter().copied().reduce(f64::max),
        ttft_sum_p50_ms: stats::median(&ttft_sum),
    })
}

/// The cell's requests by conversation turn when they have turns, else by
/// prompt length (powers of two) when lengths spread over more than one
/// such bucket; nothing for a cell of one length.
fn slices(recs: &[&RequestRecord]) -> Vec<Slice> {
    let mut by: BTreeMap<(u64, String), Vec<&RequestRecord>> = BTreeMap::new();
    let turns = recs.iter().any(|r| r.turn.is_some());
    for r in recs {
        let key = if turns {
            let t = u64::from(r.turn.unwrap_or(0));
            (t, (t + 1).to_string())
        } else {
            let Some(p) = r.capture.prompt_tokens.or(r.target_prompt_tokens) else {
                continue;
            };
            let lo = if p == 0 { 0 } else { 1u64 << p.ilog2() };
            (lo, format!("{lo}-{}", (lo * 2).max(1) - 1))
        };
        by.entry(key).or_default().push(r);
    }
    if !turns && by.len() < 2 {
        return Vec::new();
    }
    by.into_iter()
        .map(|((_, label), rs)| {
            let ok: Vec<&&RequestRecord> = rs.iter().filter(|r| r.outcome == Outcome::Ok).collect();
            let med = |f: &dyn Fn(&RequestRecord) -> Option<f64>| {
                let v: Vec<f64> = ok
                    .iter()
                    .filter_map(|r| f(r))
                    .filter(|v| v.is_finite())
                    .collect();
                stats::median(&v)
            };
            let reported: Vec<(u64, u64)> = ok
                .iter()
                .filter_map(|r| Some((r.capture.cached_prompt_tokens?, r.capture.prompt_tokens?)))
                .collect();
            let (c, p) = reported
                .iter()
                .fold((0u64, 0u64), |(c, p), (a, b)| (c + a, p + b));
            Slice {
                by: if turns { "turn" } else { "prompt_tokens" }.into(),
                label,
                requests: rs.len(),
                succeeded: ok.len(),
                ttft_p50_ms: med(&|r| r.capture.ttft_ms),
                e2e_p50_ms: med(&|r| r.capture.e2e_ms),
                prompt_tokens_p50: med(&|r| r.capture.prompt_tokens.map(|v| v as f64)),
                cached_share: (p > 0).then(|| c as f64 / p as f64),
            }
        })
        .collect()
}

/// Slack for rounding between two clocks (server ms are rounded floats).
const CLOCK_SLACK_MS: f64 = 1.0;

/// The client's TTFT and e2e against the server's own timings, over the
/// requests that carried them; None when none did.
fn server_timing_check(ok: &[&RequestRecord]) -> Option<ServerTimingCheck> {
    let mut ttft = Vec::new();
    let mut e2e = Vec::new();
    let mut requests = 0;
    let mut below = 0;
    for r in ok {
        let Some(t) = r.capture.server_timings else {
            continue;
        };
        requests += 1;
        if let (Some(client), Some(prompt)) = (r.capture.ttft_ms, t.prompt_ms) {
            ttft.push(client - prompt);
            below += usize::from(client + CLOCK_SLACK_MS < prompt);
        }
        if let (Some(client), Some(prompt), Some(predicted)) =
            (r.capture.e2e_ms, t.prompt_ms, t.predicted_ms)
        {
            e2e.push(client - prompt - predicted);
        }
    }
    (requests > 0).then(|| ServerTimingCheck {
        requests,
        ttft_overhead_ms: stats::summarize(&ttft),
        e2e_overhead_ms: stats::summarize(&e2e),
        client_below_server: below,
    })
}

/// What SLO attainment reads of one request (failures included).
pub(crate) fn request_row(r: &RequestRecord, cluster: u32) -> RequestRow {
    let d = r.capture.derived();
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    RequestRow {
        ok: r.outcome == Outcome::Ok,
        send_offset_ms: r.send_offset_ms,
        queue_ms: r.queue_ms,
        ttft_ms: finite(d.ttft_ms),
        tpot_ms: finite(d.tpot_ms),
        e2e_ms: finite(d.e2e_ms),
        completion_tokens: r.capture.completion_tokens,
        cluster,
    }
}

/// Why a cell cannot stand as performance evidence; empty when it can.
fn ineligible_reasons(
    spec: &CellSpec,
    recs: &[&RequestRecord],
    ok: &[&RequestRecord],
    samples: &BTreeMap<String, Vec<f64>>,
    failures_by_class: &BTreeMap<String, usize>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if recs.iter().any(|r| r.capacity.is_some()) {
        // Its numbers pooled over levels describe no one load.
        reasons.push(
            "a capacity search: its requests span the search's load levels (see capacity)".into(),
        );
    } else if recs.len() < spec.requests {
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
    // Each request against its own target (a workload's lengths vary).
    let off: Vec<(u64, u64)> = ok
        .iter()
        .filter_map(|r| Some((r.target_prompt_tokens?, r.capture.prompt_tokens?)))
        .filter(|&(t, p)| !within_tolerance(t, p, spec.tolerance_percent))
        .collect();
    if let Some(&(t, p)) = off.first() {
        let target = if t == spec.prompt_tokens {
            t.to_string()
        } else {
            format!("each request's target, e.g. {t}")
        };
        reasons.push(format!(
            "{} requests outside prompt tolerance ({target} ± {}%), e.g. {p} tokens",
            off.len(),
            spec.tolerance_percent,
        ));
    }
    let count = |k: &str| samples.get(k).map_or(0, Vec::len);
    // A percentile over fewer requests than the cell's n would misstate both.
    let no_ttft = ok.len() - count(metric::TTFT_MS);
    if no_ttft > 0 {
        reasons.push(format!(
            "{no_ttft} of {} successful requests have no TTFT (no visible content, e.g. reasoning only): TTFT would cover only a subset",
            ok.len()
        ));
    }
    reasons.extend(decode_reasons(ok, count(metric::DECODE_TOK_S)));
    reasons
}

/// Requests without a decode speed, by cause: no token count at all, or too short.
fn decode_reasons(ok: &[&RequestRecord], with_decode: usize) -> Vec<String> {
    let uncounted = ok
        .iter()
        .filter(|r| r.capture.completion_tokens.is_none())
        .count();
    let short = ok
        .iter()
        .filter(|r| r.capture.completion_tokens.is_some_and(|n| n < 2))
        .count();
    // Two or more tokens and still no span: the whole answer came in one read,
    // so the client was not reading while it decoded (a client stall or a
    // decode faster than the client's scheduling), and cannot time it.
    let one_read = (ok.len() - with_decode).saturating_sub(uncounted + short);
    let mut out = Vec::new();
    if uncounted > 0 {
        out.push(format!(
            "{uncounted} requests without a completion token count (no usage from the server, no tokenizer to count with): no decode speed"
        ));
    }
    if short > 0 {
        out.push(format!(
            "{short} requests too short to measure decode speed (< 2 tokens)"
        ));
    }
    if one_read > 0 {
        out.push(format!(
            "{one_read} requests whose whole answer arrived in one read (the client could not time their decode; longer answers or a less loaded client host resolve it)"
        ));
    }
    out
}

/// The server's cache counts over the cell; with a reason when a unique
/// cell's request took more from the cache than the part its prompts share
/// (a chat cell's template, a completions cell's lead shape): its TTFT is
/// then not a cold prefill.
fn prompt_cache(spec: &CellSpec, ok: &[&RequestRecord]) -> (Option<PromptCache>, Option<String>) {
    let reported: Vec<(usize, u64, Option<u64>)> = ok
        .iter()
        .filter_map(|r| {
            let c = &r.capture;
            c.cached_prompt_tokens
                .map(|n| (r.index, n, c.prompt_tokens))
        })
        .collect();
    if reported.is_empty() {
        return (None, None);
    }
    let template = ok.iter().find_map(|r| r.template_prompt_tokens);
    let beyond: Vec<&(usize, u64, Option<u64>)> = match (spec.cache, template) {
        (CachePolicy::Unique, Some(t)) => reported.iter().filter(|(_, n, _)| *n > t).collect(),
        _ => Vec::new(),
    };
    let summary = PromptCache {
        reported: reported.len(),
        max_cached_tokens: reported.iter().map(|r| r.1).max().unwrap_or(0),
        template_tokens: template,
        beyond_template: beyond.len(),
        cached_tokens: Some(reported.iter().map(|r| r.1).sum()),
        prompt_tokens: reported.iter().map(|r| r.2).sum::<Option<u64>>(),
    };
    let shared = match spec.endpoint {
        CellEndpoint::Chat => "the chat template",
        CellEndpoint::Completions => "the prompts' shared lead",
    };
    let reason = beyond.first().map(|(i, n, p)| {
        let of = p.map_or(String::new(), |p| format!(" of {p}"));
        format!(
            "{} requests of a unique-cache cell were served from the server's prompt cache beyond {shared} ({} tokens), e.g. request {i}: {n}{of} prompt tokens cached",
            beyond.len(),
            template.unwrap_or(0)
        )
    });
    (Some(summary), reason)
}

/// Did every successful request get exactly `max_tokens`?
fn output_length(spec: &CellSpec, ok: &[&RequestRecord]) -> OutputLength {
    let at_max = ok
        .iter()
        .filter(|r| r.capture.completion_tokens == Some(spec.max_tokens))
        .count();
    let fixed = spec.output == OutputPolicy::Fixed;
    OutputLength {
        fixed,
        at_max_tokens: at_max,
        of: ok.len(),
        held: fixed && at_max == ok.len(),
    }
}

/// Open loop: a client that sent late hides latency; say how late it was.
fn schedule_warnings(ok: &[&RequestRecord], open_loop: bool) -> Vec<String> {
    if !open_loop {
        return Vec::new();
    }
    let late: Vec<f64> = ok
        .iter()
        .map(|r| r.queue_ms)
        .filter(|&q| q > BEHIND_SCHEDULE_MS)
        .collect();
    if late.is_empty() {
        return Vec::new();
    }
    let worst = late.iter().copied().fold(0.0, f64::max);
    vec![format!(
        "the client fell behind its schedule: {} of {} requests were sent more than {BEHIND_SCHEDULE_MS} ms after their scheduled time (worst {worst:.0} ms); ttft_sched_ms and e2e_sched_ms count that wait",
        late.len(),
        ok.len()
    )]
}

/// Queue time above which an open-loop send counts as behind schedule: well
/// above timer and task-wake jitter, well below any latency worth gating.
const BEHIND_SCHEDULE_MS: f64 = 5.0;

fn clusters_first(clusters: &[Vec<u32>]) -> u32 {
    clusters.iter().flatten().next().copied().unwrap_or(0)
}

/// Per-request metrics, in the order of the row built for each request in [`cell`].
const COLUMNS: [&str; 11] = [
    metric::TTFT_MS,
    metric::TTFO_MS,
    metric::E2E_MS,
    metric::DECODE_TOK_S,
    metric::TPOT_MS,
    metric::PREFILL_TOK_S,
    metric::QUEUE_MS,
    metric::PROMPT_TOKENS,
    metric::COMPLETION_TOKENS,
    metric::TTFT_SCHED_MS,
    metric::E2E_SCHED_MS,
];

/// Per-request metrics kept in full in the artifact, for resampling and plots.
const GATING_SAMPLES: &[&str] = metric::SAMPLES;

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
    use crate::config::suite::Suite;
    use crate::measure::record::{ServerTimings, StreamCapture};

    fn spec(extra: &str) -> CellSpec {
        let text = format!(
            "name = \"t\"\n[[cell]]\nname = \"c\"\nprompt_tokens = 100\nmax_tokens = 8\nrequests = 4\n{extra}\n"
        );
        Suite::parse(&text, "t.toml").unwrap().cells.remove(0)
    }

    /// A successful request of cell `c`: 100 prompt tokens, 8 completion tokens.
    fn ok(index: usize) -> RequestRecord {
        RequestRecord {
            cell: "c".into(),
            index,
            send_offset_ms: 0.0,
            queue_ms: 0.0,
            target_prompt_tokens: Some(100),
            template_prompt_tokens: Some(30),
            turn: None,
            capture: StreamCapture {
                ttfo_ms: Some(100.0),
                ttft_ms: Some(100.0),
                e2e_ms: Some(200.0),
                chunk_ms: vec![100.0, 150.0, 200.0],
                prompt_tokens: Some(100),
                completion_tokens: Some(8),
                cached_prompt_tokens: Some(24),
                ..Default::default()
            },
            outcome: Outcome::Ok,
            detail: None,
            capacity: None,
        }
    }

    /// Two sessions of 2 turns: session 0 sent at 0 and 1000 ms (each
    /// answered in 200), session 1 at 0 and 500 ms with its last turn failed.
    #[test]
    fn sessions_are_timed_from_the_first_send_to_the_last_token() {
        let recs: Vec<RequestRecord> = [(0, 0.0), (1, 1000.0), (2, 0.0), (3, 500.0)]
            .into_iter()
            .map(|(i, at)| {
                let mut r = ok(i);
                r.turn = Some((i % 2) as u32);
                r.send_offset_ms = at;
                if i == 3 {
                    r.outcome = Outcome::RequestError;
                }
                r
            })
            .collect();
        let s = cell(&spec(""), &recs).sessions.expect("sessions");
        assert_eq!((s.turns, s.sessions, s.complete), (2, 2, 1));
        assert_eq!(s.duration_p50_ms, Some(1200.0));
        assert_eq!(s.ttft_sum_p50_ms, Some(200.0));
        // Requests without turns have no sessions.
        assert!(cell(&spec(""), &four(|_| {})).sessions.is_none());
    }

    fn four(edit: impl Fn(&mut RequestRecord)) -> Vec<RequestRecord> {
        (0..4)
            .map(|i| {
                let mut r = ok(i);
                if i == 2 {
                    edit(&mut r);
                }
                r
            })
            .collect()
    }

    #[test]
    fn a_clean_cell_is_eligible_and_records_cache_and_length() {
        let c = cell(&spec(""), &four(|_| {}));
        assert!(c.performance_eligible, "{:?}", c.ineligible_reasons);
        let pc = c.prompt_cache.unwrap();
        assert_eq!(
            (pc.reported, pc.max_cached_tokens, pc.beyond_template),
            (4, 24, 0)
        );
        assert_eq!(pc.template_tokens, Some(30));
        let ol = c.output_length.unwrap();
        assert!(ol.fixed && ol.held && ol.at_max_tokens == 4, "{ol:?}");
        assert!(c.warnings.is_empty() && !c.samples.contains_key(metric::QUEUE_MS));
    }

    #[test]
    fn a_unique_request_cached_beyond_the_template_makes_the_cell_ineligible() {
        let recs = four(|r| r.capture.cached_prompt_tokens = Some(99));
        let c = cell(&spec(""), &recs);
        assert!(!c.performance_eligible);
        let why = c.ineligible_reasons.join("; ");
        assert!(why.contains("1 requests of a unique-cache cell were served from the server's prompt cache beyond the chat template (30 tokens), e.g. request 2: 99 of 100"), "{why}");
        assert_eq!(c.prompt_cache.unwrap().beyond_template, 1);
        // A shared-cache cell is meant to hit the cache.
        let c = cell(&spec("cache = \"shared\""), &recs);
        assert!(c.performance_eligible, "{:?}", c.ineligible_reasons);
        // A completions cell's prompts share a lead, not a chat template.
        let c = cell(&spec("endpoint = \"completions\""), &recs);
        let why = c.ineligible_reasons.join("; ");
        assert!(
            why.contains("beyond the prompts' shared lead (30 tokens)"),
            "{why}"
        );
    }

    #[test]
    fn ttft_over_a_subset_makes_the_cell_ineligible() {
        let c = cell(
            &spec(""),
            &four(|r| {
                r.capture.ttft_ms = None;
                r.capture.reasoning = "only thinking".into();
            }),
        );
        assert!(!c.performance_eligible);
        assert_eq!(c.metrics[metric::TTFT_MS].n, 3);
        let why = c.ineligible_reasons.join("; ");
        assert!(
            why.contains("1 of 4 successful requests have no TTFT"),
            "{why}"
        );
    }

    #[test]
    fn no_token_count_is_named_as_such_not_as_too_short() {
        let c = cell(&spec(""), &four(|r| r.capture.completion_tokens = None));
        let why = c.ineligible_reasons.join("; ");
        assert!(
            why.contains("1 requests without a completion token count"),
            "{why}"
        );
        assert!(!why.contains("< 2 tokens"), "{why}");
        let c = cell(&spec(""), &four(|r| r.capture.completion_tokens = Some(1)));
        let why = c.ineligible_reasons.join("; ");
        assert!(
            why.contains("1 requests too short to measure decode speed (< 2 tokens)"),
            "{why}"
        );
    }

    /// A cached 4-token answer read in one piece is named for what happened,
    /// not called "too short".
    #[test]
    fn an_answer_read_in_one_piece_is_named_as_such_not_as_too_short() {
        let c = cell(&spec(""), &four(|r| r.capture.e2e_ms = r.capture.ttfo_ms));
        let why = c.ineligible_reasons.join("; ");
        assert!(!c.performance_eligible);
        assert!(
            why.contains("1 requests whose whole answer arrived in one read"),
            "{why}"
        );
        assert!(!why.contains("< 2 tokens"), "{why}");
    }

    #[test]
    fn a_short_answer_breaks_a_fixed_length_and_free_length_never_holds() {
        let recs = four(|r| r.capture.completion_tokens = Some(5));
        let ol = cell(&spec(""), &recs).output_length.unwrap();
        assert!(ol.fixed && !ol.held && ol.at_max_tokens == 3, "{ol:?}");
        let ol = cell(&spec("output = \"free\""), &four(|_| {}))
            .output_length
            .unwrap();
        assert!(!ol.fixed && !ol.held, "{ol:?}");
    }

    #[test]
    fn open_loop_keeps_queue_time_latency_from_schedule_and_warns_when_late() {
        let recs = four(|r| r.queue_ms = 40.0);
        let c = cell(&spec("arrival = \"constant:5\""), &recs);
        assert_eq!(c.samples[metric::QUEUE_MS], vec![0.0, 0.0, 40.0, 0.0]);
        assert_eq!(
            c.samples[metric::TTFT_SCHED_MS],
            vec![100.0, 100.0, 140.0, 100.0]
        );
        assert_eq!(c.samples[metric::E2E_SCHED_MS][2], 240.0);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("fell behind its schedule: 1 of 4"),
            "{:?}",
            c.warnings
        );
        // Closed loop has no schedule to measure from.
        let c = cell(&spec(""), &recs);
        assert!(!c.samples.contains_key(metric::TTFT_SCHED_MS) && c.warnings.is_empty());
    }

    /// Four requests whose server reported drafting: `edit` sets request 2's counts.
    fn drafting(edit: impl Fn(&mut ServerTimings)) -> CellResult {
        let recs = four(|_| {});
        let recs: Vec<RequestRecord> = recs
            .into_iter()
            .map(|mut r| {
                let mut t = ServerTimings {
                    draft_n: Some(10),
                    draft_n_accepted: Some(4),
                    predicted_n: Some(8),
                    ..ServerTimings::default()
                };
                if r.index == 2 {
                    edit(&mut t);
                }
                r.capture.server_timings = Some(t);
                r
            })
            .collect();
        cell(&spec(""), &recs)
    }

    #[test]
    fn speculative_counts_sum_checked_and_accept_at_most_what_was_drafted() {
        let c = drafting(|_| {});
        let s = c.speculative.expect("drafting");
        assert_eq!(
            (s.reported, s.drafted, s.accepted, s.predicted),
            (4, 40, 16, 32)
        );
        assert!(c.performance_eligible, "{:?}", c.ineligible_reasons);

        // A sum past u64::MAX is refused, naming the field, not wrapped.
        let c = drafting(|t| t.draft_n = Some(u64::MAX));
        assert!(c.speculative.is_none(), "{:?}", c.speculative);
        assert!(!c.performance_eligible);
        let reason = c.ineligible_reasons.join("; ");
        assert!(
            reason.contains("draft_n") && reason.contains("u64::MAX"),
            "{reason}"
        );

        // More accepted than drafted is refused, naming the request.
        let c = drafting(|t| t.draft_n_accepted = Some(11));
        assert!(c.speculative.is_none() && !c.performance_eligible);
        let reason = c.ineligible_reasons.join("; ");
        assert!(
            reason.contains("request 2") && reason.contains("accepted"),
            "{reason}"
        );
    }

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
