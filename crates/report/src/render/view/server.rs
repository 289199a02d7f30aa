//! A cell's server detail in words: each side's client-minus-server time,
//! its speculative decoding, and what each metrics endpoint said (its
//! counters against the journal, its known metrics), folded to one line
//! unless a check fails.

use crate::server_metrics::{QUEUE_GAUGES, ServerMetrics};

use super::CellView;

impl CellView {
    /// Each side's client-minus-server overhead, then what each metrics
    /// endpoint said, in words; empty when the server said nothing.
    pub fn server_lines(&self) -> Vec<String> {
        self.server_entries().into_iter().map(|l| l.text).collect()
    }

    fn server_entries(&self) -> Vec<ServerLine> {
        let mut out = self.timing_lines();
        out.extend(self.speculative_line());
        for (side, all) in [
            ("baseline", &self.baseline_metrics),
            ("candidate", &self.candidate_metrics),
        ] {
            for m in all {
                out.extend(metrics_lines(side, m));
            }
        }
        out
    }

    /// Both sides' speculative decoding side by side; an alarm when the
    /// baseline drafted and the candidate did not.
    fn speculative_line(&self) -> Option<ServerLine> {
        let (b, c) = (
            self.baseline_speculative.as_ref(),
            self.candidate_speculative.as_ref(),
        );
        if b.is_none() && c.is_none() {
            return None;
        }
        let show = |s: Option<&crate::artifact::Speculative>| match s {
            Some(s) if s.drafted > 0 => format!(
                "{} of {} drafted tokens accepted ({:.1} %), {:.1} % of {} output tokens{}",
                s.accepted,
                s.drafted,
                s.acceptance().unwrap_or(0.0) * 100.0,
                s.accepted_share().unwrap_or(0.0) * 100.0,
                s.predicted,
                s.mean_accepted_length().map_or(String::new(), |l| format!(
                    ", {l:.2} tokens per verification step"
                ))
            ),
            Some(s) => format!("nothing drafted over {} requests", s.reported),
            None => "nothing reported".to_string(),
        };
        let drafted = |s: Option<&crate::artifact::Speculative>| s.is_some_and(|s| s.drafted > 0);
        Some(ServerLine {
            text: format!(
                "speculative decoding: baseline {}; candidate {}",
                show(b),
                show(c)
            ),
            alarm: drafted(b) && !drafted(c),
        })
    }

    fn timing_lines(&self) -> Vec<ServerLine> {
        let summary = |s: &Option<crate::stats::Summary>| {
            s.as_ref().map_or("—".to_string(), |s| {
                format!("p50 {:.1} ms [{:.1}, {:.1}]", s.p50, s.min, s.max)
            })
        };
        [
            ("baseline", &self.baseline_server, &self.baseline_metrics),
            ("candidate", &self.candidate_server, &self.candidate_metrics),
        ]
        .into_iter()
        .filter_map(|(side, t, metrics)| {
            let t = t.as_ref()?;
            let error = if t.client_below_server > 0 {
                format!(
                    "; MEASUREMENT ERROR: {} requests with client TTFT below the server's prompt time",
                    t.client_below_server
                )
            } else {
                String::new()
            };
            // The server's prompt time starts when a slot takes the request:
            // with requests waiting for a slot, the rest is mostly queueing.
            let what = match queued(metrics) {
                Some((key, most)) if most > 0.0 => format!(
                    "queueing + client overhead (requests waited for a slot: {key} reached {most}; the server does not time each request's wait, so the two are not split): client TTFT − server prompt time"
                ),
                Some((key, _)) => format!(
                    "client overhead ({key} stayed 0: nothing queued): client TTFT − server prompt time"
                ),
                None => "client overhead, or queueing (no queue gauge read to tell): client TTFT − server prompt time".to_string(),
            };
            Some(ServerLine {
                text: format!(
                    "server timings, {side} ({} requests): {what} {}; client e2e − server time {}{error}",
                    t.requests,
                    summary(&t.ttft_overhead_ms),
                    summary(&t.e2e_overhead_ms)
                ),
                alarm: t.client_below_server > 0,
            })
        })
        .collect()
    }

    /// [`Self::server_lines`] for a reader in a hurry: one line when every
    /// check holds, and in full whatever does not (a counter that disagrees
    /// with the journal, a measurement error, an endpoint not read); `where_`
    /// says where the rest is ("with --verbose", "below").
    pub fn server_summary_lines(&self, where_: &str) -> Vec<String> {
        let all = self.server_entries();
        let mut out: Vec<String> = all
            .iter()
            .filter(|l| l.alarm)
            .map(|l| l.text.clone())
            .collect();
        // What drafting did is shown whether or not it alarms.
        if let Some(l) = self.speculative_line().filter(|l| !l.alarm) {
            out.insert(0, l.text);
        }
        let agreeing: Vec<&str> = [
            ("baseline", &self.baseline_metrics),
            ("candidate", &self.candidate_metrics),
        ]
        .into_iter()
        .filter(|(_, ms)| {
            !ms.is_empty()
                && ms.iter().all(|m| {
                    m.check
                        .as_ref()
                        .is_some_and(|c| c.agrees && !c.lines.is_empty())
                })
        })
        .map(|(side, _)| side)
        .collect();
        let hidden = all.len() - out.len();
        if hidden > 0 {
            let agree = if agreeing.is_empty() {
                String::new()
            } else {
                format!(
                    "counters agree with the journal ({}); ",
                    agreeing.join(", ")
                )
            };
            out.push(format!(
                "server: {agree}{hidden} line(s) of server timings and metrics {where_}"
            ));
        }
        out
    }
}

/// A side's queue gauge over the cell with its largest value (the first
/// above 0, else the first read); `None` when no endpoint has one.
fn queued(metrics: &[ServerMetrics]) -> Option<(String, f64)> {
    let gauges: Vec<(String, f64)> = metrics
        .iter()
        .flat_map(|m| &m.known)
        // By family: vLLM's and SGLang's series carry labels (model, engine).
        .filter(|k| QUEUE_GAUGES.contains(&k.key.split('{').next().unwrap_or(&k.key)))
        .map(|k| (k.key.clone(), k.max.unwrap_or(k.value)))
        .collect();
    gauges
        .iter()
        .find(|(_, most)| *most > 0.0)
        .or(gauges.first())
        .cloned()
}

/// One line of a cell's server detail; `alarm` when it reports a check
/// that failed (never folded away).
struct ServerLine {
    text: String,
    alarm: bool,
}

impl ServerLine {
    fn fact(text: String) -> ServerLine {
        ServerLine { text, alarm: false }
    }
}

/// One endpoint of one side in words: where and how long it was read, its
/// counters against the journal, then its known metrics.
fn metrics_lines(side: &str, m: &ServerMetrics) -> Vec<ServerLine> {
    let head = format!("server metrics, {side} ({}", m.endpoint);
    if let Some(why) = &m.unavailable {
        return vec![ServerLine {
            text: format!("{head}): not read: {why}"),
            alarm: true,
        }];
    }
    let mut out = vec![ServerLine::fact(format!(
        "{head}, {}): {} window(s), {} scrapes over {:.1} s{}",
        m.engine.as_deref().unwrap_or("engine not recognized"),
        m.windows,
        m.scrapes,
        m.window_s,
        if m.incomplete_windows > 0 {
            format!(
                "; {} window(s) without an end left out, their requests with them",
                m.incomplete_windows
            )
        } else {
            String::new()
        }
    ))];
    if let Some(c) = &m.check {
        let lines: Vec<String> = c
            .lines
            .iter()
            .map(|l| {
                format!(
                    "{} {} {} {} {}",
                    l.server_metric,
                    l.server,
                    if l.agrees { "=" } else { "≠" },
                    l.what,
                    l.client
                )
            })
            .collect();
        let verdict = if c.lines.is_empty() {
            "not checked"
        } else if c.agrees {
            "agree with the journal"
        } else {
            "DISAGREE with the journal"
        };
        let mut s = format!(
            "server counters, {side}: {verdict} over {} requests: {}",
            c.requests,
            lines.join("; ")
        );
        if !c.notes.is_empty() {
            s.push_str(&format!(" ({})", c.notes.join("; ")));
        }
        out.push(ServerLine {
            text: s,
            alarm: !c.lines.is_empty() && !c.agrees,
        });
    }
    if !m.known.is_empty() {
        let known: Vec<String> = m.known.iter().map(|k| k.text()).collect();
        out.push(ServerLine::fact(format!(
            "server, {side}: {}",
            known.join("; ")
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::cell::cell_view;
    use super::*;

    /// A side's endpoint: its counters checked against the journal
    /// (`agrees`), and a queue gauge whose largest value was `queued`.
    fn endpoint(agrees: bool, queued: f64) -> Value {
        json!({
            "endpoint": "target", "url": "http://127.0.0.1:1/metrics", "engine": "llama.cpp",
            "windows": 1, "scrapes": 4, "window_s": 3.0,
            "known": [{"key": "llamacpp:requests_deferred", "meaning": "requests deferred",
                       "kind": "gauge", "value": queued / 2.0, "max": queued}],
            "check": {"requests": 3, "agrees": agrees, "lines": [{
                "what": "Σ usage.completion_tokens", "server_metric": "llamacpp:tokens_predicted_total",
                "server": 12.0, "client": if agrees { 12.0 } else { 11.0 }, "agrees": agrees}]}
        })
    }

    fn cell(b: Value, c: Value) -> CellView {
        let timings = json!({"requests": 3, "client_below_server": 0,
            "ttft_overhead_ms": {"n": 3, "mean": 20.0, "p50": 20.0, "p90": 30.0, "p99": 30.0, "min": 10.0, "max": 30.0}});
        let v = json!({"baseline_server_metrics": [b], "candidate_server_metrics": [c],
                       "baseline_server_timings": timings, "candidate_server_timings": timings});
        cell_view("c", &v, &[], true)
    }

    #[test]
    fn server_detail_folds_to_one_line_unless_a_check_fails() {
        let quiet = cell(endpoint(true, 0.0), endpoint(true, 0.0));
        let all = quiet.server_lines();
        assert!(all.len() >= 4, "{all:?}");
        assert_eq!(
            quiet.server_summary_lines("with --verbose"),
            [format!(
                "server: counters agree with the journal (baseline, candidate); {} line(s) of server timings and metrics with --verbose",
                all.len()
            )]
        );
        // A disagreeing counter is shown in full, never folded away.
        let loud = cell(endpoint(true, 0.0), endpoint(false, 0.0));
        let short = loud.server_summary_lines("with --verbose");
        assert!(
            short[0].starts_with("server counters, candidate: DISAGREE with the journal"),
            "{short:?}"
        );
        assert!(
            short[1].contains("agree with the journal (baseline)"),
            "{short:?}"
        );
    }

    #[test]
    fn client_minus_server_time_is_named_queueing_when_requests_waited() {
        let v = cell(endpoint(true, 2.0), endpoint(true, 0.0));
        let lines = v.server_lines();
        assert!(
            lines[0].contains("baseline")
                && lines[0].contains("queueing + client overhead")
                && lines[0].contains("llamacpp:requests_deferred reached 2"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("candidate")
                && lines[1].contains("client overhead (llamacpp:requests_deferred stayed 0"),
            "{}",
            lines[1]
        );
        // No gauge read: neither claim is made.
        let bare = cell(
            json!({"endpoint": "target", "url": "u", "windows": 1, "scrapes": 1, "window_s": 1.0}),
            json!({"endpoint": "target", "url": "u", "windows": 1, "scrapes": 1, "window_s": 1.0}),
        );
        assert!(bare.server_lines()[0].contains("no queue gauge read"));
        // SGLang's (and vLLM's) queue gauge carries labels: found by its family.
        let key = r#"sglang:num_queue_reqs{engine_type="unified",model_name="SmolLM2-135M-Instruct-Q4_1",moe_ep_rank="0",pp_rank="0",tp_rank="0"}"#;
        let mut sglang = endpoint(true, 1.0);
        sglang["engine"] = json!("sglang");
        sglang["known"][0]["key"] = json!(key);
        let line = &cell(sglang, endpoint(true, 0.0)).server_lines()[0];
        assert!(
            line.contains("queueing + client overhead")
                && line.contains(&format!("{key} reached 1")),
            "{line}"
        );
    }
}
