//! A capacity cell on one target: the search's next step
//! (`report::capacity::SearchRule::next`), one segment at the load it names
//! (its warm-up, then its measured requests, drained before the next), until
//! the search ends or the cell's `requests` cannot pay for another segment.
//!
//! Every request is journaled with its mark (`record::CapacityMark`: load,
//! segment, warm-up or measured), and the segments are counted from those
//! marks alone ([`segments`]): a resumed run picks the search up where its
//! journal left it, and a reader of the journal makes the same search again.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use super::progress::say;
use super::request::{RequestShape, request_job};
use super::session::Session;
use super::{RunOptions, RunPart};
use crate::artifact::Slo;
use crate::config::limits::MAX_CONCURRENCY;
use crate::config::suite::{Arrival, CellSpec};
use crate::measure::exact;
use crate::measure::journal::Journal;
use crate::measure::loadgen::{Pace, drive_paced};
use crate::measure::record::{CapacityMark, RequestRecord};
use crate::measure::workload::PromptSizer;
use crate::report::capacity::run::{assemble, rule_of, tried_of};
use crate::report::capacity::{
    CapacityRun, CapacitySpec, LoadAxis, Next, Segment, SegmentRun, Stopped,
};

/// A capacity cell's spec and SLO, as its suite was checked to hold.
fn table(cell: &CellSpec) -> Result<(&CapacitySpec, &Slo)> {
    match (&cell.capacity, &cell.slo) {
        (Some(spec), Some(slo)) => Ok((spec, slo)),
        _ => bail!("cell '{}' is not a capacity cell with an SLO", cell.name),
    }
}

impl Session {
    /// Run `cell`'s capacity search, appending every request to the journal
    /// (and to `all`) as it completes.
    pub(super) async fn measure_capacity(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        sizer: &PromptSizer,
        previous: &[RequestRecord],
        journal: &mut Journal,
        all: &mut Vec<RequestRecord>,
    ) -> Result<()> {
        let (spec, slo) = table(cell)?;
        let given = match opts.part {
            RunPart::Block { .. } => bail!(
                "cell '{}': a capacity cell is measured by segments at the search's levels; it cannot be cut into blocks",
                cell.name
            ),
            RunPart::CapacitySegment { load } => Some(load),
            RunPart::Whole | RunPart::TurnoverOnly => None,
        };
        let sized = self.sized(cell, opts, sizer).await?;
        // One body size for every request: the search's requests are not
        // known before it runs, so none is fitted one by one.
        let shape = RequestShape {
            cell: cell.clone(),
            model: self.model.clone(),
            bodies: Arc::new(exact::Bodies::uniform(cell, &sized)),
            fits: None,
            template_prompt_tokens: sized.template_prompt_tokens,
            dialect: self.dialect,
            source: None,
        };
        if given.is_none() {
            say(
                opts,
                &format!(
                    "cell {}: capacity search by {} from {} to {} ({} % precision), up to {} measured requests, prompt ≈{} tokens, max_tokens {}",
                    cell.name,
                    spec.by.unit(),
                    spec.low,
                    spec.high,
                    spec.precision_percent,
                    cell.requests,
                    sized.measured_prompt_tokens,
                    cell.max_tokens
                ),
            );
        }
        let mut mine: Vec<RequestRecord> = previous
            .iter()
            .filter(|r| r.cell == cell.name)
            .cloned()
            .collect();
        // Given a load, one segment there (the caller's schedule); else the
        // cell's own search to its end.
        let mut once = given;
        loop {
            let load = match given {
                Some(_) => match once.take() {
                    Some(load) => load,
                    None => break,
                },
                None => match step(cell, &segments(cell, &mine)?)? {
                    Step::Measure(load) => load,
                    Step::Stop(_) => break,
                },
            };
            let mark = CapacityMark {
                load,
                // Numbered past every segment begun, finished or not.
                segment: mine
                    .iter()
                    .filter_map(|r| r.capacity)
                    .map(|m| m.segment + 1)
                    .max()
                    .unwrap_or(0),
                warmup: false,
            };
            let first = mine.iter().map(|r| r.index + 1).max().unwrap_or(0);
            let got = self
                .segment(cell, spec, &shape, mark, first, journal)
                .await?;
            let met = got
                .iter()
                .filter(|r| r.capacity.is_some_and(|m| !m.warmup))
                .filter(|r| slo.met(&crate::measure::aggregate::request_row(r, 0)))
                .count();
            say(
                opts,
                &format!(
                    "  {} {}: segment {} met {met} of {}",
                    crate::report::capacity::run::shown(load),
                    spec.by.unit(),
                    mark.segment,
                    spec.segment_requests
                ),
            );
            mine.extend(got.iter().cloned());
            all.extend(got);
        }
        Ok(())
    }

    /// One segment at `mark.load`: its warm-up then its measured requests
    /// (indices from `first`), every one journaled as it completes; returns
    /// once all are done (the level drained).
    async fn segment(
        &self,
        cell: &CellSpec,
        spec: &CapacitySpec,
        shape: &RequestShape,
        mark: CapacityMark,
        first: usize,
        journal: &mut Journal,
    ) -> Result<Vec<RequestRecord>> {
        let warm = spec.warmup_at(mark.load);
        let n = warm + spec.segment_requests;
        // Each segment its own arrivals, the same for the same cell and segment.
        let seed = cell.seed.unwrap_or(0) ^ (mark.segment as u64).wrapping_mul(0x9E37_79B9);
        let (pace, in_flight) = match spec.by {
            LoadAxis::Rate => (
                Pace::Arrival(Arrival::Poisson { rate: mark.load }, seed),
                // Open loop: nothing holds a send back but the schedule.
                MAX_CONCURRENCY,
            ),
            LoadAxis::Concurrency => (
                Pace::Arrival(Arrival::Closed, seed),
                mark.load.round() as usize,
            ),
        };
        let job = request_job(
            self.estimator.clone(),
            self.client.clone(),
            shape.clone(),
            self.nonce.clone(),
            self.t0,
        );
        let mut got = Vec::with_capacity(n);
        let mut write_err: Option<anyhow::Error> = None;
        drive_paced(
            pace,
            in_flight,
            n,
            move |k, scheduled| {
                let fut = job(first + k, scheduled);
                async move {
                    let mut r = fut.await;
                    // Issue order: the first `warm` sent warm the segment.
                    r.capacity = Some(CapacityMark {
                        warmup: k < warm,
                        ..mark
                    });
                    r
                }
            },
            |r: RequestRecord| {
                if write_err.is_none()
                    && let Err(e) = journal.append(&r)
                {
                    write_err = Some(e);
                }
                got.push(r);
            },
        )
        .await;
        write_err.map_or(Ok(got), Err)
    }
}

/// The finished segments of a capacity cell's records, in the order run:
/// each segment's load and counts (a measured request meets the SLO as
/// `Slo::met` reads its row: TTFT and e2e from the scheduled send), and the
/// p99 of its measured requests' wait past their schedule. A segment with
/// fewer measured requests than the cell's `segment_requests` (a run
/// stopped inside it) is left out.
pub fn segments(cell: &CellSpec, records: &[RequestRecord]) -> Result<Vec<(f64, SegmentRun)>> {
    let (spec, slo) = table(cell)?;
    let mut by: BTreeMap<usize, (f64, Vec<&RequestRecord>, u64)> = BTreeMap::new();
    for r in records.iter().filter(|r| r.cell == cell.name) {
        let m = r.capacity.with_context(|| {
            format!(
                "cell '{}': request {} has no capacity mark",
                cell.name, r.index
            )
        })?;
        let e = by.entry(m.segment).or_insert((m.load, Vec::new(), 0));
        if m.warmup {
            e.2 += 1;
        } else {
            e.1.push(r);
        }
    }
    Ok(by
        .into_values()
        .filter(|(_, measured, _)| measured.len() == spec.segment_requests)
        .map(|(load, measured, warmup)| {
            let met = measured
                .iter()
                .filter(|r| slo.met(&crate::measure::aggregate::request_row(r, 0)))
                .count() as u64;
            let lags: Vec<f64> = measured.iter().map(|r| r.queue_ms).collect();
            let seg = SegmentRun {
                counts: Segment {
                    met,
                    of: measured.len() as u64,
                    warmup,
                },
                client_lag_p99_ms: crate::stats::percentile(&lags, 0.99).unwrap_or(0.0),
            };
            (load, seg)
        })
        .collect())
}

/// What a search does after its finished segments `done`.
enum Step {
    /// One more segment at this load.
    Measure(f64),
    /// It ended, or the cell's `requests` cannot pay for the next segment.
    Stop(Stopped),
}

fn step(cell: &CellSpec, done: &[(f64, SegmentRun)]) -> Result<Step> {
    let (spec, slo) = table(cell)?;
    let tried: Vec<_> = tried_of(done).into_iter().map(|(t, _)| t).collect();
    let measured: u64 = done.iter().map(|(_, s)| s.counts.of).sum();
    Ok(match rule_of(spec, slo.min_attainment()).next(&tried) {
        Next::Done(e) => Step::Stop(Stopped::from(e)),
        Next::Measure(_) if measured + spec.segment_requests as u64 > cell.requests as u64 => {
            Step::Stop(Stopped::BudgetSpent)
        }
        Next::Measure(load) => Step::Measure(load),
    })
}

/// The search a capacity cell's records hold, as the run artifact records
/// it: stopped where the search ended, by the budget when it could not pay
/// for the next segment, else unfinished (the records end before it did).
pub fn capacity_run(cell: &CellSpec, records: &[RequestRecord]) -> Result<CapacityRun> {
    let (spec, slo) = table(cell)?;
    let done = segments(cell, records)?;
    let stopped = match step(cell, &done)? {
        Step::Stop(s) => s,
        Step::Measure(_) => Stopped::Unfinished,
    };
    Ok(assemble(
        spec,
        crate::report::capacity::words::targets(slo),
        slo.min_attainment(),
        &done,
        stopped,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::suite::Suite;
    use crate::measure::record::{Outcome, StreamCapture};

    fn cell() -> CellSpec {
        let text = "name = \"t\"\n[[cell]]\nname = \"c\"\nprompt_tokens = 100\nmax_tokens = 8\nrequests = 40\nslo = { ttft_ms = 100, min_attainment = 0.5 }\ncapacity = { by = \"rate\", low = 1, high = 8, precision_percent = 10, segment_requests = 4, warmup_requests = 2 }\n";
        Suite::parse(text, "t.toml").unwrap().cells.remove(0)
    }

    /// A request of segment `segment` at `load`, its TTFT and its wait in the client.
    fn rec(index: usize, segment: usize, warmup: bool, ttft: f64, queue: f64) -> RequestRecord {
        RequestRecord {
            cell: "c".into(),
            index,
            send_offset_ms: 0.0,
            queue_ms: queue,
            target_prompt_tokens: Some(100),
            template_prompt_tokens: None,
            turn: None,
            capture: StreamCapture {
                ttft_ms: Some(ttft),
                ttfo_ms: Some(ttft),
                e2e_ms: Some(ttft + 10.0),
                completion_tokens: Some(8),
                ..Default::default()
            },
            outcome: Outcome::Ok,
            detail: None,
            capacity: Some(CapacityMark {
                load: 1.0 + segment as f64,
                segment,
                warmup,
            }),
        }
    }

    #[test]
    fn segments_are_counted_from_their_marks_and_a_begun_one_is_left_out() {
        let c = cell();
        let mut records = vec![
            rec(0, 0, true, 500.0, 0.0),
            rec(1, 0, true, 500.0, 0.0),
            // Met, met, late by its own TTFT, late by its wait in the client.
            rec(2, 0, false, 50.0, 0.0),
            rec(3, 0, false, 50.0, 1.0),
            rec(4, 0, false, 150.0, 0.0),
            rec(5, 0, false, 50.0, 60.0),
        ];
        // A run stopped inside segment 1: two of its four measured.
        records.extend([rec(6, 1, true, 1.0, 0.0), rec(7, 1, false, 1.0, 0.0)]);
        records.push(rec(8, 1, false, 1.0, 0.0));
        let got = segments(&c, &records).unwrap();
        assert_eq!(got.len(), 1);
        let (load, s) = got[0];
        assert_eq!(load, 1.0);
        assert_eq!(
            s.counts,
            Segment {
                met: 2,
                of: 4,
                warmup: 2
            }
        );
        assert!(s.client_lag_p99_ms > 50.0, "{}", s.client_lag_p99_ms);
        // Not finished and within budget: the search would go on.
        let run = capacity_run(&c, &records).unwrap();
        assert_eq!(run.stopped, Stopped::Unfinished);
        let mut poorer = c.clone();
        poorer.requests = 7;
        assert_eq!(
            capacity_run(&poorer, &records).unwrap().stopped,
            Stopped::BudgetSpent
        );
        assert_eq!(run.slo, "TTFT ≤ 100 ms");
        // A record of the cell without a mark is named.
        records[0].capacity = None;
        let e = format!("{:#}", segments(&c, &records).unwrap_err());
        assert!(e.contains("request 0 has no capacity mark"), "{e}");
    }
}
