//! A cell's server metrics from its scrape log and its journal: the scrapes
//! grouped into windows (before → during → after one run or block of the
//! cell), each with the client's totals over the requests sent in it, then
//! summarized by `infergate_report::server_metrics`. Pure.

use std::collections::BTreeMap;

use crate::artifact::CellResult;
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::scrape::{Phase, ScrapeEntry};
use crate::server_metrics::{self, ClientTotals, ServerMetrics, Window};

/// One endpoint's windows of one cell.
#[derive(Debug, Clone, Default)]
pub struct EndpointWindows {
    pub url: String,
    pub windows: Vec<(Window, ClientTotals)>,
    /// Windows without a successful before and after scrape, or reaching
    /// past the requests the cell covers.
    pub incomplete: usize,
    /// Why the first failed scrape failed.
    pub first_error: Option<String>,
}

/// Endpoint name → its windows for `cell`, counting only windows whose
/// requests are all below `limit` (a pooled cell's requests so far).
pub fn cell_windows(
    entries: &[ScrapeEntry],
    cell: &str,
    records: &[RequestRecord],
    limit: usize,
) -> BTreeMap<String, EndpointWindows> {
    let mut groups: BTreeMap<(String, String), Vec<&ScrapeEntry>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for e in entries.iter().filter(|e| e.cell == cell) {
        let k = (e.endpoint.clone(), e.window.clone());
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push(e);
    }
    let mut out: BTreeMap<String, EndpointWindows> = BTreeMap::new();
    for k in order {
        let group = &groups[&k];
        let ep = out.entry(k.0.clone()).or_default();
        ep.url = group[0].url.clone();
        if ep.first_error.is_none() {
            ep.first_error = group.iter().find_map(|e| e.error.clone());
        }
        match window_of(group, limit) {
            Some((w, ranges)) => {
                let totals = client_totals(records, cell, &ranges);
                ep.windows.push((w, totals));
            }
            None => ep.incomplete += 1,
        }
    }
    out
}

/// Add `from`'s windows to `into` (a qualification's passes, each its own log).
pub fn merge(
    into: &mut BTreeMap<String, EndpointWindows>,
    from: BTreeMap<String, EndpointWindows>,
) {
    for (name, w) in from {
        let e = into.entry(name).or_default();
        if e.url.is_empty() {
            e.url = w.url;
        }
        e.windows.extend(w.windows);
        e.incomplete += w.incomplete;
        e.first_error = e.first_error.take().or(w.first_error);
    }
}

/// A server that does not count drafts per response (vLLM) may count them
/// in its metrics: the target's counters then say what drafting did, and
/// the cell's expectations are judged again on what it now knows.
fn speculative_from_counters(cell: &mut CellResult) {
    if cell.speculative.is_some() {
        return;
    }
    let Some(read) = cell
        .server_metrics
        .iter()
        .filter(|m| m.endpoint == crate::measure::scrape::TARGET_ENDPOINT)
        .find_map(crate::report::artifact::Speculative::from_counters)
    else {
        return;
    };
    match read {
        Ok(spec) => cell.speculative = Some(spec),
        // Counts a server could not have made: named, and not shown as drafting.
        Err(e) => cell.ineligible_reasons.push(e.to_string()),
    }
    judge_expectations(cell);
}

/// The cell's `expect` judged on its prompt cache and speculative counts
/// as they stand, in place of any earlier judgement.
fn judge_expectations(cell: &mut CellResult) {
    use crate::report::artifact::is_unmet_expectation;
    cell.ineligible_reasons.retain(|r| !is_unmet_expectation(r));
    let unmet = cell
        .expect
        .unmet(cell.prompt_cache.as_ref(), cell.speculative.as_ref());
    cell.ineligible_reasons.extend(unmet);
    cell.performance_eligible = cell.ineligible_reasons.is_empty();
}

/// One summary per endpoint; an endpoint that never gave a window is
/// reported unavailable, with the reason its first failed scrape gave.
pub fn server_metrics(windows: BTreeMap<String, EndpointWindows>) -> Vec<ServerMetrics> {
    windows
        .into_iter()
        .map(|(name, w)| match (&w.first_error, w.windows.is_empty()) {
            (Some(why), true) => ServerMetrics::unavailable(&name, &w.url, why),
            _ => server_metrics::summarize(&name, &w.url, &w.windows, w.incomplete),
        })
        .collect()
}

/// Give `cell` its server metrics, with a loud warning for each endpoint
/// whose token counters disagree with the journal over the same requests.
pub fn attach(cell: &mut CellResult, windows: BTreeMap<String, EndpointWindows>) {
    cell.server_metrics = server_metrics(windows);
    speculative_from_counters(cell);
    for m in &cell.server_metrics {
        let Some(check) = m
            .check
            .as_ref()
            .filter(|c| !c.lines.is_empty() && !c.agrees)
        else {
            continue;
        };
        let off: Vec<String> = check
            .lines
            .iter()
            .filter(|l| !l.agrees)
            .map(|l| {
                format!(
                    "{} +{} against {} {}",
                    l.server_metric, l.server, l.what, l.client
                )
            })
            .collect();
        cell.warnings.push(format!(
            "SERVER COUNTERS DISAGREE ({}): {}; other traffic reached the server during the cell, or the client miscounts",
            m.endpoint,
            off.join("; ")
        ));
    }
}

/// The window's scrapes (successful before, during, after) and its
/// requests; None when it has no successful before or after, or reaches
/// `limit`.
fn window_of(group: &[&ScrapeEntry], limit: usize) -> Option<(Window, Vec<[usize; 2]>)> {
    let before = group
        .iter()
        .find(|e| e.phase == Phase::Before && e.samples.is_some())?;
    let after = group
        .iter()
        .rev()
        .find(|e| e.phase == Phase::After && e.samples.is_some())?;
    if before.requests.iter().any(|r| r[1] > limit) {
        return None;
    }
    let mut scrapes = vec![before.scrape()?];
    scrapes.extend(
        group
            .iter()
            .filter(|e| e.phase == Phase::During)
            .filter_map(|e| e.scrape()),
    );
    scrapes.push(after.scrape()?);
    Some((Window { scrapes }, before.requests.clone()))
}

/// What the journal says about the requests of `ranges`.
fn client_totals(records: &[RequestRecord], cell: &str, ranges: &[[usize; 2]]) -> ClientTotals {
    let mut t = ClientTotals::default();
    let inside = |i: usize| ranges.iter().any(|r| (r[0]..r[1]).contains(&i));
    for r in records.iter().filter(|r| r.cell == cell && inside(r.index)) {
        let c = &r.capture;
        t.requests += 1;
        t.failed += usize::from(r.outcome != Outcome::Ok);
        match (c.prompt_tokens, c.completion_tokens) {
            // A count the client made itself is not the server's.
            (Some(p), Some(n)) if !c.completion_tokens_estimated => {
                t.prompt_tokens += p;
                t.completion_tokens += n;
            }
            _ => t.missing_usage += 1,
        }
        match c
            .server_timings
            .and_then(|s| s.cache_n)
            .or(c.cached_prompt_tokens)
        {
            Some(n) => t.cached_tokens += n,
            None => t.missing_cached += 1,
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::{ServerTimings, StreamCapture};
    use crate::server_metrics::{Kind, MetricSample};

    fn rec(index: usize, prompt: u64, cache: u64, completion: u64) -> RequestRecord {
        RequestRecord {
            cell: "c".into(),
            index,
            send_offset_ms: 0.0,
            queue_ms: 0.0,
            target_prompt_tokens: None,
            template_prompt_tokens: None,
            turn: None,
            capture: StreamCapture {
                prompt_tokens: Some(prompt),
                completion_tokens: Some(completion),
                server_timings: Some(ServerTimings {
                    cache_n: Some(cache),
                    ..ServerTimings::default()
                }),
                ..StreamCapture::default()
            },
            outcome: Outcome::Ok,
            detail: None,
            capacity: None,
        }
    }

    fn entry(
        window: &str,
        phase: Phase,
        requests: Vec<[usize; 2]>,
        prompt: Option<f64>,
    ) -> ScrapeEntry {
        ScrapeEntry {
            cell: "c".into(),
            window: window.into(),
            endpoint: "target".into(),
            url: "http://127.0.0.1:1/metrics".into(),
            phase,
            requests,
            offset_ms: 0.0,
            samples: prompt.map(|v| {
                vec![MetricSample {
                    name: "llamacpp:prompt_tokens_total".into(),
                    labels: BTreeMap::new(),
                    kind: Kind::Counter,
                    value: v,
                }]
            }),
            error: prompt
                .is_none()
                .then(|| "GET answered 404 Not Found".to_string()),
        }
    }

    #[test]
    fn windows_pair_scrapes_with_their_requests_and_leave_out_the_unfinished() {
        let entries = vec![
            entry("a/0", Phase::Before, vec![[0, 2]], Some(0.0)),
            entry("a/0", Phase::After, vec![], Some(180.0)),
            entry("a/2", Phase::Before, vec![[2, 3]], Some(180.0)),
            // Killed before its after-scrape: its request is in no window.
            entry("b/2", Phase::Before, vec![[2, 3]], Some(180.0)),
            entry("b/2", Phase::After, vec![], Some(270.0)),
        ];
        let records = vec![rec(0, 100, 10, 4), rec(1, 100, 10, 4), rec(2, 100, 10, 4)];
        let w = cell_windows(&entries, "c", &records, usize::MAX);
        let ep = &w["target"];
        assert_eq!((ep.windows.len(), ep.incomplete), (2, 1));
        assert_eq!(ep.windows[0].1.requests, 2);
        assert_eq!(ep.windows[1].1.prompt_tokens, 100);
        let m = server_metrics(w);
        let check = m[0].check.as_ref().unwrap();
        // 270 evaluated on the server; 3 × (100 − 10) by the journal.
        assert_eq!(check.lines[0].server, 270.0);
        assert_eq!(check.lines[0].client, 270.0);
        assert!(check.lines[0].agrees);
        // A pooled cell of two requests counts only the first window.
        let two = cell_windows(&entries, "c", &records, 2);
        assert_eq!(
            (two["target"].windows.len(), two["target"].incomplete),
            (1, 2)
        );
    }

    #[test]
    fn an_endpoint_that_never_answered_is_unavailable_with_its_reason() {
        let entries = vec![entry("a/0", Phase::Before, vec![[0, 1]], None)];
        let m = server_metrics(cell_windows(&entries, "c", &[rec(0, 1, 0, 1)], usize::MAX));
        assert_eq!(
            m[0].unavailable.as_deref(),
            Some("GET answered 404 Not Found")
        );
        assert_eq!(m[0].windows, 0);
    }

    /// vLLM counts drafts in its metrics, not per response: the target's
    /// counters over the cell's window give the cell's speculative decoding
    /// (summed over series, as vLLM labels each engine), and the cell's
    /// expectation is judged on them.
    #[test]
    fn a_vllm_cell_reads_its_drafting_from_the_counters_and_is_judged_on_it() {
        let vllm = |phase, requests, [drafts, drafted, accepted, generated]: [f64; 4]| {
            let counter = |name: &str, engine: &str, value: f64| MetricSample {
                name: name.into(),
                labels: [("engine".to_string(), engine.to_string())].into(),
                kind: Kind::Counter,
                value,
            };
            ScrapeEntry {
                samples: Some(vec![
                    counter("vllm:spec_decode_num_drafts_total", "0", drafts),
                    counter(
                        "vllm:spec_decode_num_draft_tokens_total",
                        "0",
                        drafted / 2.0,
                    ),
                    counter(
                        "vllm:spec_decode_num_draft_tokens_total",
                        "1",
                        drafted / 2.0,
                    ),
                    counter("vllm:spec_decode_num_accepted_tokens_total", "0", accepted),
                    counter("vllm:generation_tokens_total", "0", generated),
                ]),
                error: None,
                ..entry("a/0", phase, requests, Some(0.0))
            }
        };
        let entries = vec![
            vllm(Phase::Before, vec![[0, 2]], [10.0, 30.0, 20.0, 100.0]),
            vllm(Phase::After, vec![], [50.0, 190.0, 116.0, 260.0]),
        ];
        let records = vec![rec(0, 100, 0, 80), rec(1, 100, 0, 80)];
        let m = server_metrics(cell_windows(&entries, "c", &records, usize::MAX));
        let spec = crate::report::artifact::Speculative::from_counters(&m[0])
            .expect("vLLM's counters")
            .expect("counts a server could make");
        assert_eq!(
            (spec.drafts, spec.drafted, spec.accepted, spec.predicted),
            (Some(40), 160, 96, 160)
        );
        // 1 + 96 accepted over 40 verification steps.
        assert_eq!(spec.mean_accepted_length(), Some(3.4));

        let expect = |min: f64| {
            let mut cell = crate::report::fixtures::cell(
                "c",
                crate::report::fixtures::shape(100, 1, 2),
                BTreeMap::new(),
                None,
            );
            cell.expect.spec_acceptance_min = Some(min);
            cell.ineligible_reasons = cell.expect.unmet(None, None);
            cell.performance_eligible = false;
            cell.server_metrics = m.clone();
            speculative_from_counters(&mut cell);
            cell
        };
        let met = expect(0.5);
        assert!(met.performance_eligible, "{:?}", met.ineligible_reasons);
        assert_eq!(met.speculative.as_ref().map(|s| s.accepted), Some(96));
        let short = expect(0.7);
        assert!(!short.performance_eligible);
        assert!(
            short.ineligible_reasons[0]
                .contains("accepted 0.600 of its drafted tokens (96 of 160)"),
            "{:?}",
            short.ineligible_reasons
        );
    }
}
