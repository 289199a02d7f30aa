//! Turnover runs: correctness under churn.
//!
//! Many short requests at a fixed client concurrency, closed loop (a finished
//! request is replaced at once), temperature 0, each carrying its own canary
//! marker. Every answer is judged on its complete captured text, and the first
//! failing check names the failure: `request_error` → `http_error` →
//! `stream_validation_failed` (all three from the client) →
//! `request_canary_failed` → `controlled_output_failed`.
//!
//! Suites declare workloads as `[[turnover]]` tables (`config::turnover`,
//! where every field is described); [`TurnoverWorkload`] compiles one for a
//! run. Pure parts (markers, contracts, judging, the run record) are unit
//! tested in the submodules; [`run_turnover`] is the only I/O.

pub mod canary;
pub mod contract;
pub mod generate;
pub mod judge;
pub mod prompt;
pub mod workload;

use std::time::Instant;

use futures_util::StreamExt;
use serde_json::Value;

use crate::artifact::TurnoverRun;
use crate::measure::client::{Client, Endpoint};
use crate::measure::record::{Outcome, RequestRecord, StreamCapture};

pub use crate::config::turnover::{PromptStyle, TurnoverSpec};
pub use canary::{CanaryCheck, IssuedMarkers, MarkerSet};
pub use contract::Contract;
pub use judge::{ERROR_CHARS, Expected, Judgement, OUTPUT_CHARS, judge, judge_with, summarize};
pub use workload::{PlannedRequest, RunPlan, TurnoverWorkload};

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Stream every body closed-loop at `concurrency` and hand each capture to
/// `on_done` as it finishes (completion order). A finished request is
/// replaced at once; all of this runs on the caller's task.
async fn closed_loop(
    client: &Client,
    bodies: &[Value],
    concurrency: usize,
    mut on_done: impl FnMut(usize, Instant, StreamCapture),
) {
    let mut in_flight = futures_util::stream::iter(bodies.iter().enumerate())
        .map(|(i, body)| async move {
            let (t_send, cap) = client.stream_timed(Endpoint::Chat, body).await;
            (i, t_send, cap)
        })
        .buffer_unordered(concurrency.max(1));
    while let Some((i, t_send, cap)) = in_flight.next().await {
        on_done(i, t_send, cap);
    }
}

/// The first reference answer's TTFT (or TTFO, for a tool call) and the
/// later ones' median: a grammar compiled on a schema's first request
/// shows as the difference.
fn first_and_later_ttft<'a>(
    refs: impl IntoIterator<Item = &'a StreamCapture>,
) -> (Option<f64>, Option<f64>) {
    let ttft = |c: &StreamCapture| {
        c.failure
            .is_none()
            .then(|| c.ttft_ms.or(c.ttfo_ms))
            .flatten()
    };
    let mut refs = refs.into_iter();
    let first = refs.next().and_then(ttft);
    let later: Vec<f64> = refs.filter_map(ttft).collect();
    (first, crate::report::stats::median(&later))
}

/// Run repeat `repeat` of `workload` against `client` and judge it.
///
/// For the `reference` contract every prompt first runs alone (concurrency 1,
/// temperature 0) to fix its reference text; those requests are journaled
/// under [`TurnoverSpec::reference_label`] and are not counted in the run.
/// Then the measured pass runs closed-loop at `spec.concurrency`, and each
/// request is journaled (with its final outcome) as it completes.
pub async fn run_turnover(
    client: &Client,
    workload: &TurnoverWorkload,
    repeat: usize,
    mut journal: Option<&mut dyn FnMut(&RequestRecord)>,
) -> TurnoverRun {
    let plan = workload.plan(repeat);
    let spec = &workload.spec;
    let t0 = Instant::now();
    let record =
        |cell: &str, i: usize, t_send: Instant, capture: StreamCapture, outcome, detail| {
            RequestRecord {
                cell: cell.to_string(),
                index: i,
                send_offset_ms: ms(t_send.saturating_duration_since(t0)),
                queue_ms: 0.0,
                target_prompt_tokens: None,
                template_prompt_tokens: None,
                turn: None,
                capture,
                outcome,
                detail,
                capacity: None,
            }
        };

    let references: Option<Vec<StreamCapture>> = match spec.contract {
        Contract::Words => None,
        Contract::Reference => {
            let bodies: Vec<Value> = plan
                .requests
                .iter()
                .map(|r| workload.reference_body(r))
                .collect();
            let mut refs = vec![StreamCapture::default(); bodies.len()];
            let label = spec.reference_label(repeat);
            closed_loop(client, &bodies, 1, |i, t_send, cap| {
                if let Some(j) = journal.as_deref_mut() {
                    let (outcome, detail) = match &cap.failure {
                        Some(f) => (f.class, Some(f.message.clone())),
                        None => (Outcome::Ok, None),
                    };
                    j(&record(&label, i, t_send, cap.clone(), outcome, detail));
                }
                refs[i] = cap;
            })
            .await;
            Some(refs)
        }
    };

    let bodies: Vec<Value> = plan
        .requests
        .iter()
        .map(|r| workload.request_body(r, spec.temperature))
        .collect();
    let label = spec.cell_label(repeat);
    let mut judged = Vec::with_capacity(bodies.len());
    closed_loop(client, &bodies, spec.concurrency, |i, t_send, cap| {
        let req = &plan.requests[i];
        let expected = match (&references, &req.code_word) {
            (Some(refs), _) => Expected::Reference(&refs[i]),
            (None, Some(w)) => Expected::Words {
                code_word: w,
                n: spec.words,
            },
            // Validation ties the words contract to the words prompt.
            (None, None) => Expected::Words {
                code_word: "",
                n: spec.words,
            },
        };
        let j = judge_with(&plan.markers, i, &cap, expected, spec.asks_marker());
        if let Some(jr) = journal.as_deref_mut() {
            let detail = j.failure.as_ref().and_then(|f| f.error.clone());
            jr(&record(&label, i, t_send, cap, j.outcome, detail));
        }
        judged.push(j);
    })
    .await;
    let mut run = summarize(spec, repeat, judged);
    workload.keep_references(&mut run, references.iter().flatten());
    if spec.structured.is_some() || spec.tool_calling.is_some() {
        (run.first_ttft_ms, run.later_ttft_p50_ms) =
            first_and_later_ttft(references.iter().flatten());
    }
    run
}

#[cfg(test)]
mod tests;
