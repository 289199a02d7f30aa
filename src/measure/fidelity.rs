//! A capture's replay against the capture (`cells[].fidelity`): the lines a
//! trace cell sent, as captured, beside the requests as the replay measured
//! them (docs/capture.md, "Fidelity"; the comparison is `report::fidelity`).

use crate::config::dataset::Dataset;
use crate::config::suite::CellSpec;
use crate::config::workload::WorkloadSpec;
use crate::measure::record::{Outcome, RequestRecord};
use crate::report::fidelity::{Fidelity, LeftOut, compare};

/// The cell's fidelity, when it replays a capture; `None` for any other cell.
pub fn of(spec: &CellSpec, records: &[RequestRecord]) -> Option<Fidelity> {
    let Some(WorkloadSpec::Trace { speed, .. }) = &spec.workload else {
        return None;
    };
    let Some(Dataset::Trace(t)) = spec.dataset.as_deref() else {
        return None;
    };
    let skips = t.capture?;
    let mut recs: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.cell == spec.name && !r.capacity.is_some_and(|m| m.warmup))
        .collect();
    recs.sort_by_key(|r| r.index);
    let line = |r: &RequestRecord| &t[r.index % t.len()];
    let ok: Vec<&RequestRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Ok)
        .collect();

    let captured = |f: &dyn Fn(&RequestRecord) -> Option<f64>| -> Vec<f64> {
        recs.iter().filter_map(|r| f(r)).collect()
    };
    let replayed = |f: &dyn Fn(&RequestRecord) -> Option<f64>| -> Vec<f64> {
        ok.iter().filter_map(|r| f(r)).collect()
    };
    let prompt_tokens = compare(
        &captured(&|r| Some(line(r).input_length as f64)),
        &replayed(&|r| r.capture.prompt_tokens.map(|n| n as f64)),
    );
    let output_tokens = compare(
        &captured(&|r| Some(line(r).output_length as f64)),
        &replayed(&|r| r.capture.completion_tokens.map(|n| n as f64)),
    );
    let share = |cached: Option<u64>, prompt: Option<u64>| match (cached, prompt) {
        (Some(c), Some(p)) if p > 0 => Some(c as f64 / p as f64),
        _ => None,
    };
    let cache_hit_share = compare(
        &captured(&|r| share(line(r).cached_tokens, Some(line(r).input_length))),
        &replayed(&|r| share(r.capture.cached_prompt_tokens, r.capture.prompt_tokens)),
    );
    // Every request sent arrived, failed or not: the gaps are over all of them.
    let mut at_captured: Vec<f64> = recs
        .iter()
        .map(|r| line(r).timestamp_ms as f64 / speed)
        .collect();
    let mut at_replayed: Vec<f64> = recs.iter().map(|r| r.send_offset_ms).collect();
    let inter_arrival_ms = compare(&gaps(&mut at_captured), &gaps(&mut at_replayed));
    Some(Fidelity {
        lines: t.len(),
        sent: recs.len(),
        left_out: LeftOut {
            failed: skips.failed,
            embeddings: skips.embeddings,
            not_asked: t.len().saturating_sub(recs.len()),
        },
        replay_failed: recs.len() - ok.len(),
        prompt_tokens,
        output_tokens,
        inter_arrival_ms,
        cache_hit_share,
    })
}

/// Between consecutive times, in time order.
fn gaps(at: &mut [f64]) -> Vec<f64> {
    at.sort_unstable_by(f64::total_cmp);
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::dataset::trace_text;
    use crate::config::suite::Suite;
    use crate::measure::record::StreamCapture;

    /// A capture of three lines (one served half from the cache) and an
    /// embeddings line, replayed at speed 2: two requests succeed, one fails.
    #[test]
    fn captured_and_replayed_sides_come_from_the_trace_and_the_records() {
        let text = "name = \"t\"\n[[cell]]\nname = \"c\"\nmax_tokens = 64\nrequests = 3\nworkload = { kind = \"trace\", path = \"t.jsonl\", speed = 2.0 }\n";
        let mut cell = Suite::parse(text, "t.toml").unwrap().cells.remove(0);
        let trace = [
            "{\"infergate_capture\":1}",
            "{\"timestamp\":0,\"input_length\":100,\"output_length\":8,\"endpoint\":\"chat\",\"status\":200,\"cached_tokens\":50}",
            "{\"timestamp\":400,\"input_length\":200,\"output_length\":8,\"endpoint\":\"chat\",\"status\":200,\"cached_tokens\":0}",
            "{\"timestamp\":1000,\"input_length\":300,\"output_length\":8,\"endpoint\":\"chat\",\"status\":200}",
            "{\"timestamp\":1200,\"input_length\":5,\"output_length\":0,\"endpoint\":\"embeddings\",\"status\":200}",
        ]
        .join("\n");
        cell.dataset = Some(Arc::new(trace_text(&trace, "t.jsonl").unwrap()));
        let rec = |index: usize, at: f64, ok: bool, cached: Option<u64>| RequestRecord {
            cell: "c".into(),
            index,
            send_offset_ms: at,
            queue_ms: 0.0,
            target_prompt_tokens: None,
            template_prompt_tokens: None,
            turn: None,
            capture: StreamCapture {
                prompt_tokens: Some(100 * (index as u64 + 1) + 2),
                completion_tokens: Some(8),
                cached_prompt_tokens: cached,
                ..StreamCapture::default()
            },
            outcome: if ok { Outcome::Ok } else { Outcome::HttpError },
            detail: None,
            capacity: None,
        };
        let records = [
            rec(0, 10.0, true, Some(51)),
            rec(2, 510.0, false, None),
            rec(1, 230.0, true, Some(0)),
        ];
        let f = of(&cell, &records).expect("a capture's replay");
        assert_eq!((f.lines, f.sent, f.replay_failed), (3, 3, 1));
        assert_eq!(
            f.left_out,
            LeftOut {
                failed: 0,
                embeddings: 1,
                not_asked: 0
            }
        );
        // Captured over the lines sent; replayed over the requests that succeeded.
        assert_eq!(
            (f.prompt_tokens.captured.n, f.prompt_tokens.replayed.n),
            (3, 2)
        );
        assert_eq!(f.prompt_tokens.captured.p50, Some(200.0));
        assert_eq!(f.prompt_tokens.replayed.p50, Some(152.0));
        // Captured gaps of 400 and 600 ms at speed 2: 200 and 300; the
        // sends' own, 220 and 280, the failed one's included.
        assert_eq!(f.inter_arrival_ms.captured.p10, Some(210.0));
        assert_eq!(f.inter_arrival_ms.replayed.p10, Some(226.0));
        assert_eq!(f.inter_arrival_ms.replayed.n, 2);
        // Shares: captured 0.5 and 0 (the third line says nothing); replayed 0.5 and 0.
        assert_eq!(f.cache_hit_share.captured.n, 2);
        assert_eq!(f.cache_hit_share.captured.mean, Some(0.25));
        assert_eq!(f.cache_hit_share.replayed.mean, Some(0.25));
        assert_eq!(f.cache_hit_share.distance, Some(0.0));
        // A cell that is not a capture's replay has none.
        cell.dataset = Some(Arc::new(
            trace_text(
                "{\"timestamp\":0,\"input_length\":7,\"output_length\":1}\n",
                "m.jsonl",
            )
            .unwrap(),
        ));
        assert!(of(&cell, &records).is_none());
    }
}
