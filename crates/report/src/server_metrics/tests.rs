use super::catalogue::{CHECKS, KNOWN};
use super::*;

fn s(name: &str, kind: Kind, labels: &[(&str, &str)], value: f64) -> MetricSample {
    MetricSample {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        kind,
        value,
    }
}

fn scrape(t: f64, samples: Vec<MetricSample>) -> Scrape {
    Scrape {
        offset_ms: t,
        samples,
    }
}

fn llama(t: f64, prompt: f64, cached: f64, predicted: f64, busy: f64) -> Scrape {
    scrape(
        t,
        vec![
            s("llamacpp:prompt_tokens_total", Kind::Counter, &[], prompt),
            s(
                "llamacpp:prompt_tokens_cached_total",
                Kind::Counter,
                &[],
                cached,
            ),
            s(
                "llamacpp:tokens_predicted_total",
                Kind::Counter,
                &[],
                predicted,
            ),
            s("llamacpp:requests_processing", Kind::Gauge, &[], busy),
        ],
    )
}

fn totals(requests: usize, prompt: u64, cached: u64, completion: u64) -> ClientTotals {
    ClientTotals {
        requests,
        prompt_tokens: prompt,
        cached_tokens: cached,
        completion_tokens: completion,
        ..ClientTotals::default()
    }
}

#[test]
fn counters_sum_their_increase_over_windows_and_the_check_reads_them() {
    let w1 = Window {
        scrapes: vec![
            llama(0.0, 100.0, 0.0, 10.0, 0.0),
            llama(500.0, 150.0, 5.0, 20.0, 1.0),
            llama(1000.0, 300.0, 10.0, 42.0, 0.0),
        ],
    };
    // A restart between windows: the counters start again from zero.
    let w2 = Window {
        scrapes: vec![
            llama(5000.0, 7.0, 0.0, 1.0, 0.0),
            llama(6000.0, 57.0, 0.0, 11.0, 0.0),
        ],
    };
    let m = summarize(
        "target",
        "http://127.0.0.1:1/metrics",
        &[(w1, totals(2, 210, 10, 32)), (w2, totals(1, 50, 0, 10))],
        1,
    );
    assert_eq!(m.engine.as_deref(), Some("llama.cpp"));
    assert_eq!((m.windows, m.incomplete_windows, m.scrapes), (2, 1, 5));
    assert_eq!(m.window_s, 2.0);
    assert_eq!(m.counters["llamacpp:prompt_tokens_total"], 250.0);
    assert_eq!(m.counters["llamacpp:tokens_predicted_total"], 42.0);
    let g = m.gauges["llamacpp:requests_processing"];
    assert_eq!((g.n, g.max, g.mean), (5, 1.0, 0.2));
    assert_eq!(m.series["llamacpp:requests_processing"].len(), 5);
    let check = m.check.expect("a llama.cpp check");
    assert!(check.agrees, "{check:?}");
    assert_eq!(check.lines.len(), 3);
    assert_eq!(check.lines[0].server, 250.0);
    assert_eq!(check.lines[0].client, 250.0);
    assert_eq!(m.known.len(), 4);
}

#[test]
fn a_counter_the_client_cannot_account_for_disagrees() {
    let w = Window {
        scrapes: vec![
            llama(0.0, 0.0, 0.0, 0.0, 0.0),
            llama(1.0, 120.0, 0.0, 8.0, 0.0),
        ],
    };
    let m = summarize("target", "u", &[(w, totals(1, 100, 0, 8))], 0);
    let check = m.check.unwrap();
    assert!(!check.agrees);
    assert!(!check.lines[0].agrees && check.lines[2].agrees);
}

#[test]
fn unknown_cached_counts_skip_the_lines_that_need_them() {
    let w = Window {
        scrapes: vec![
            llama(0.0, 0.0, 0.0, 0.0, 0.0),
            llama(1.0, 100.0, 0.0, 8.0, 0.0),
        ],
    };
    let mut t = totals(1, 100, 0, 8);
    t.missing_cached = 1;
    let check = summarize("target", "u", &[(w, t)], 0).check.unwrap();
    assert_eq!(check.lines.len(), 1);
    assert_eq!(check.notes.len(), 2);
}

#[test]
fn histograms_give_window_buckets_and_quantiles_and_a_window_without_end_is_left_out() {
    let h = |t: f64, c: [f64; 3], sum: f64| {
        let l = |le| vec![("engine", "0"), ("le", le)];
        scrape(
            t,
            vec![
                s(
                    "vllm:time_to_first_token_seconds_bucket",
                    Kind::Histogram,
                    &l("0.5"),
                    c[0],
                ),
                s(
                    "vllm:time_to_first_token_seconds_bucket",
                    Kind::Histogram,
                    &l("1.0"),
                    c[1],
                ),
                s(
                    "vllm:time_to_first_token_seconds_bucket",
                    Kind::Histogram,
                    &l("+Inf"),
                    c[2],
                ),
                s(
                    "vllm:time_to_first_token_seconds_sum",
                    Kind::Histogram,
                    &[("engine", "0")],
                    sum,
                ),
                s(
                    "vllm:time_to_first_token_seconds_count",
                    Kind::Histogram,
                    &[("engine", "0")],
                    c[2],
                ),
            ],
        )
    };
    let done = Window {
        scrapes: vec![h(0.0, [1.0, 1.0, 1.0], 0.3), h(9.0, [1.0, 11.0, 11.0], 8.3)],
    };
    let open = Window {
        scrapes: vec![h(20.0, [1.0, 11.0, 11.0], 8.3)],
    };
    let m = summarize(
        "target",
        "u",
        &[
            (done, ClientTotals::default()),
            (open, ClientTotals::default()),
        ],
        0,
    );
    assert_eq!((m.windows, m.incomplete_windows), (1, 1));
    let d = &m.histograms["vllm:time_to_first_token_seconds{engine=\"0\"}"];
    assert_eq!((d.count, d.sum), (10.0, 8.0));
    assert_eq!(d.buckets, vec![[0.5, 0.0], [1.0, 10.0], [f64::MAX, 10.0]]);
    // All ten between 0.5 and 1.0: the median interpolates to 0.75.
    assert_eq!(d.p50, Some(0.75));
    assert_eq!(m.engine.as_deref(), Some("vllm"));
    assert_eq!(m.known.len(), 1);
    assert_eq!(m.known[0].value, 0.8);
}

#[test]
fn quantiles_follow_histogram_quantile() {
    let b = [[1.0, 5.0], [2.0, 10.0], [f64::MAX, 12.0]];
    assert_eq!(quantile(&b, 0.25), Some(0.6));
    assert_eq!(quantile(&b, 0.5), Some(1.2));
    // Beyond the last finite bound: that bound, as Prometheus does.
    assert_eq!(quantile(&b, 0.99), Some(2.0));
    assert_eq!(quantile(&[[1.0, 0.0]], 0.5), None);
}

/// Two real scrapes of SGLang 0.5.23 (engine/sglang-serve.sh), an
/// excerpt: the check's and the known metrics' names are SGLang's own.
const SGLANG_BEFORE: &str = r#"# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.9631990308844252
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:request_time_per_output_token_seconds histogram
sglang:request_time_per_output_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.278823784445454
sglang:request_time_per_output_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 6.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 8.0
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{engine_type="unified",mode="prefill_compute",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 9.0
sglang:realtime_tokens_total{engine_type="unified",mode="decode",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 7.0
"#;
const SGLANG_AFTER: &str = r#"# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 6.058974169027351
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 7.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.9688945540037821
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:request_time_per_output_token_seconds histogram
sglang:request_time_per_output_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 3.5383439557261935
sglang:request_time_per_output_token_seconds_count{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 7.0
sglang:request_time_per_output_token_seconds_sum{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 0.4150152271426383
sglang:request_time_per_output_token_seconds_count{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 1.0
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 233.0
sglang:prompt_tokens_total{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 38.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="SmolLM2-135M-Instruct-Q4_1"} 188.0
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="SmolLM2-135M-Instruct-Q4_1"} 8.0
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{engine_type="unified",mode="prefill_compute",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 106.0
sglang:realtime_tokens_total{engine_type="unified",mode="decode",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 188.0
sglang:realtime_tokens_total{engine_type="unified",mode="prefill_cache",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 168.0
"#;

/// The exposition's samples, by a line split (this crate has no
/// Prometheus parser; the main crate's is tested against real servers).
fn exposition(t: f64, text: &str) -> Scrape {
    let mut kinds = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let kind = match kind {
                "counter" => Kind::Counter,
                "gauge" => Kind::Gauge,
                "histogram" => Kind::Histogram,
                k => panic!("{k}"),
            };
            kinds.insert(name.to_string(), kind);
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap();
        let labels = labels
            .trim_end_matches('}')
            .split(',')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.trim_matches('"').to_string())
            })
            .collect();
        let family = ["_sum", "_count", "_bucket"]
            .iter()
            .find_map(|x| name.strip_suffix(x).filter(|b| kinds.contains_key(*b)))
            .unwrap_or(name);
        samples.push(MetricSample {
            name: name.to_string(),
            labels,
            kind: kinds[family],
            value: value.parse().unwrap(),
        });
    }
    scrape(t, samples)
}

#[test]
fn sglang_is_checked_and_read_by_its_own_metric_names() {
    let w = Window {
        scrapes: vec![
            exposition(0.0, SGLANG_BEFORE),
            exposition(1000.0, SGLANG_AFTER),
        ],
    };
    // 233 + 38 − 6 prompt tokens and 188 + 8 − 8 generated in the window;
    // the client's usage says 9 cached (usage only: not compared).
    let m = summarize("target", "u", &[(w, totals(8, 265, 9, 188))], 0);
    assert_eq!(m.engine.as_deref(), Some("sglang"));
    let check = m.check.expect("an SGLang check");
    assert!(check.agrees, "{check:?}");
    let lines: Vec<(&str, f64)> = check
        .lines
        .iter()
        .map(|l| (l.server_metric.as_str(), l.server))
        .collect();
    assert_eq!(
        lines,
        [
            ("sglang:prompt_tokens_total", 265.0),
            ("sglang:generation_tokens_total", 188.0)
        ]
    );
    assert_eq!(check.notes.len(), 1, "{:?}", check.notes);
    assert!(
        check.notes[0].starts_with("cached prompt tokens not compared")
            && check.notes[0].contains("cached_tokens names them per request"),
        "{:?}",
        check.notes
    );
    // Every known SGLang metric this excerpt serves is found, by family.
    let mut known: Vec<&str> = m
        .known
        .iter()
        .map(|k| k.key.split('{').next().unwrap())
        .collect();
    known.dedup();
    assert_eq!(
        known,
        [
            "sglang:time_to_first_token_seconds",
            "sglang:request_time_per_output_token_seconds",
            "sglang:num_queue_reqs",
            "sglang:prompt_tokens_total",
            "sglang:generation_tokens_total",
        ]
    );
    let tpot = m
        .known
        .iter()
        .find(|k| k.key.contains(r#"request_time_per_output_token_seconds{engine_type="unified",is_streaming="false""#))
        .unwrap();
    assert_eq!(tpot.count, Some(6.0));
    // Every KNOWN and CHECKS name of SGLang is a family SGLang 0.5.23
    // serves (/work/sglang-attempt/metric_types.txt, 81 families).
    let served = [
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:request_time_per_output_token_seconds",
        "sglang:e2e_request_latency_seconds",
        "sglang:queue_time_seconds",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        // Not in that list (no speculative decoding there): gauges
        // SGLang's scheduler metrics collector registers by these names.
        "sglang:spec_accept_rate",
        "sglang:spec_accept_length",
    ];
    for (_, name, _) in KNOWN.iter().filter(|(e, _, _)| *e == "sglang") {
        assert!(served.contains(name), "{name} is not an SGLang metric");
    }
    for (_, name, _) in CHECKS.iter().filter(|(e, _, _)| *e == "sglang") {
        assert!(served.contains(name), "{name} is not an SGLang metric");
    }
}

#[test]
fn vllm_counts_cached_prompt_tokens_only_when_usage_names_them() {
    let counters: BTreeMap<String, f64> = [
        (r#"vllm:prompt_tokens_total{engine="0"}"#, 1806.0),
        (r#"vllm:prompt_tokens_cached_total{engine="0"}"#, 1536.0),
        (r#"vllm:generation_tokens_total{engine="0"}"#, 48.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut client = ClientTotals {
        requests: 6,
        prompt_tokens: 1806,
        completion_tokens: 48,
        cached_tokens: 1536,
        ..ClientTotals::default()
    };
    let c = check_counters("vllm", &counters, &client).unwrap();
    assert!(c.agrees && c.lines.len() == 3, "{c:?}");
    client.cached_tokens = 1520;
    let c = check_counters("vllm", &counters, &client).unwrap();
    assert!(!c.agrees && !c.lines[1].agrees, "{c:?}");
    // Without --enable-prompt-tokens-details the cached count is unknown.
    client.missing_cached = 6;
    let c = check_counters("vllm", &counters, &client).unwrap();
    assert!(c.agrees && c.lines.len() == 2, "{c:?}");
    assert!(c.notes[0].contains("did not say"), "{:?}", c.notes);
}

#[test]
fn series_keys_sort_labels_and_leave_out_le() {
    let labels: BTreeMap<String, String> = [("z", "1"), ("a", "x\"y"), ("le", "0.5")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(series_key("m", &labels), r#"m{a="x\"y",z="1"}"#);
    assert_eq!(series_key("m", &BTreeMap::new()), "m");
}
