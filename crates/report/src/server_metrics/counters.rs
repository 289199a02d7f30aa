//! The engine's token counters against the client's journal over the same
//! windows: exact agreement, since both sides count integers.

use std::collections::BTreeMap;

use super::catalogue::{CHECKS, ENGINE_NOTES};
use super::{CheckLine, ClientTotals, CounterCheck};

/// The engine's token counters against the client's totals. Token counts
/// are integers on both sides, so agreement is exact.
pub fn check_counters(
    engine: &str,
    counters: &BTreeMap<String, f64>,
    client: &ClientTotals,
) -> Option<CounterCheck> {
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for &(_, metric, quantity) in CHECKS.iter().filter(|(e, _, _)| *e == engine) {
        // Summed over label sets (vLLM labels by engine and model).
        let series: Vec<f64> = counters
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(metric))
            .map(|(_, v)| *v)
            .collect();
        if series.is_empty() {
            notes.push(format!("{metric} not served"));
            continue;
        }
        let Some((client_value, what)) = quantity.of(client) else {
            notes.push(format!(
                "{metric}: {} requests did not say how many prompt tokens were cached",
                client.missing_cached
            ));
            continue;
        };
        let server: f64 = series.iter().sum();
        lines.push(CheckLine {
            what: what.to_string(),
            server_metric: metric.to_string(),
            server,
            client: client_value,
            agrees: server == client_value,
        });
    }
    if lines.is_empty() && notes.is_empty() {
        return None;
    }
    notes.extend(
        ENGINE_NOTES
            .iter()
            .filter(|(e, _)| *e == engine)
            .map(|(_, note)| note.to_string()),
    );
    if client.missing_usage > 0 {
        notes.push(format!(
            "{} requests had no usage: the client's sums lack them",
            client.missing_usage
        ));
    }
    if client.failed > 0 {
        notes.push(format!(
            "{} requests failed: the server may have counted part of them",
            client.failed
        ));
    }
    Some(CounterCheck {
        requests: client.requests,
        agrees: !lines.is_empty() && lines.iter().all(|l| l.agrees),
        lines,
        notes,
    })
}
