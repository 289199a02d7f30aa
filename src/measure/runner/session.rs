//! A run's measuring session: what every request shares, and each cell
//! driven through it (warmup, then the requests the journal lacks, inside
//! the server's metrics window).

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::time::Instant;

use super::progress::{Progress, announce, say};
use super::request::{Estimator, RequestShape, request_job};
use super::{RunOptions, RunPart};
use crate::config::suite::CellSpec;
use crate::measure::client::Client;
use crate::measure::exact;
use crate::measure::journal::Journal;
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::scrape::{Phase, Scraper};
use crate::measure::source;
use crate::measure::workload::{self, PromptSizer};

/// What every request of one run shares.
pub(super) struct Session {
    pub(super) client: Arc<Client>,
    pub(super) estimator: Estimator,
    pub(super) model: String,
    pub(super) nonce: String,
    pub(super) t0: Instant,
    pub(super) dialect: workload::LengthDialect,
    pub(super) scraper: Option<Arc<Scraper>>,
}

impl Session {
    /// One cell: size its prompts, warm up (never recorded), then send the
    /// requests the journal lacks, appending each record as it completes.
    pub(super) async fn measure_cell(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        sizer: &PromptSizer,
        previous: &[RequestRecord],
        journal: &mut Journal,
        all: &mut Vec<RequestRecord>,
    ) -> Result<()> {
        if cell.capacity.is_some() {
            return self
                .measure_capacity(cell, opts, sizer, previous, journal, all)
                .await;
        }
        let Some((range, todo)) = still_to_do(cell, opts, previous) else {
            return Ok(());
        };
        let sized = self.sized(cell, opts, sizer).await?;
        // Each request fitted to the target, before any is sent (no measured time).
        let indices = (0..todo.len()).map(|k| todo.nth(k));
        let fitted = exact::fit_requests(sizer, cell, &self.nonce, &sized, range, indices)
            .await
            .with_context(|| format!("sizing each request of cell '{}'", cell.name))?;
        announce(cell, opts, &sized, fitted.as_ref().map(|(_, f)| f));
        let (bodies, fits) = match fitted {
            Some((b, f)) => (Arc::new(b), Some(Arc::new(f))),
            None => (Arc::new(exact::Bodies::uniform(cell, &sized)), None),
        };
        let shape = |nonce: &str, fits: Option<Arc<exact::Fits>>| RequestShape {
            cell: cell.clone(),
            model: self.model.clone(),
            bodies: bodies.clone(),
            fits,
            template_prompt_tokens: sized.template_prompt_tokens,
            dialect: self.dialect,
            source: cell.workload.as_ref().map(|_| {
                Arc::new(source::Source::new(cell, nonce, &sized).with_probe(sized.workload_probe))
            }),
        };
        let warm_up = match opts.part {
            RunPart::Block { warmup, .. } => warmup,
            _ => true,
        };
        if cell.warmup > 0 && warm_up {
            // Warmup prompts are not measured: the sized body as it is.
            let nonce = format!("{}-warm", self.nonce);
            let warm = request_job(
                self.estimator.clone(),
                self.client.clone(),
                shape(&nonce, None),
                nonce,
                self.t0,
            );
            loadgen_drive(cell, cell.warmup, warm, |_| {}).await?;
        }
        self.drive_measured(cell, opts, todo, shape(&self.nonce, fits), journal, all)
            .await
    }

    /// The cell's measured requests, each appended to the journal as it
    /// completes, inside the server's metrics window.
    async fn drive_measured(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        todo: Missing,
        shape: RequestShape,
        journal: &mut Journal,
        all: &mut Vec<RequestRecord>,
    ) -> Result<()> {
        // The server's window: after the warmup, around the measured requests.
        let window = format!("{}/{}", self.nonce, todo.nth(0));
        if let Some(s) = &self.scraper {
            s.take(&cell.name, &window, Phase::Before, &todo.ranges)
                .await?;
        }
        let during = self
            .scraper
            .as_ref()
            .and_then(|s| s.during(&cell.name, &window));
        let progress = Progress::new(opts, &cell.name, todo.len());
        // Sessions and trace offsets need the indices themselves (workload
        // cells only: plain cells keep ranges, nothing per planned request).
        let listed: Vec<usize> = match &cell.workload {
            Some(_) => (0..todo.len()).map(|k| todo.nth(k)).collect(),
            None => Vec::new(),
        };
        let pace = pace_of(cell, shape.source.as_deref(), &listed)?;
        let measured = request_job(
            self.estimator.clone(),
            self.client.clone(),
            shape,
            self.nonce.clone(),
            self.t0,
        );
        let mut write_err: Option<anyhow::Error> = None;
        let todo = Arc::new(todo);
        let n = todo.len();
        crate::measure::loadgen::drive_paced(
            pace,
            cell.concurrency,
            n,
            move |k, s| measured(todo.nth(k), s),
            |rec: RequestRecord| {
                progress.done(rec.outcome != Outcome::Ok);
                if write_err.is_none()
                    && let Err(e) = journal.append(&rec)
                {
                    write_err = Some(e);
                }
                all.push(rec);
            },
        )
        .await;
        drop(during);
        if let Some(s) = &self.scraper {
            s.take(&cell.name, &window, Phase::After, &[]).await?;
        }
        progress.finish();
        write_err.map_or(Ok(()), Err)
    }
}

/// The requests of `cell` this run (or block) has yet to measure, as
/// ranges; `None`, said so, when the journal holds them all.
fn still_to_do(
    cell: &CellSpec,
    opts: &RunOptions,
    previous: &[RequestRecord],
) -> Option<(std::ops::Range<usize>, Missing)> {
    let done: BTreeSet<usize> = previous
        .iter()
        .filter(|r| r.cell == cell.name)
        .map(|r| r.index)
        .collect();
    let range = match opts.part {
        RunPart::Block { first, count, .. } => first..first + count,
        _ => 0..cell.requests,
    };
    // As ranges: memory follows what is done, never what is planned.
    let todo = Missing::new(range.clone(), &done);
    if todo.is_empty() {
        let n = range.len();
        say(
            opts,
            &format!(
                "cell {}: all {n} requests already in the journal",
                cell.name
            ),
        );
        return None;
    }
    Some((range, todo))
}

/// How a cell's requests are paced: a trace at its timestamps, sessions in
/// turn order, else the cell's arrival.
fn pace_of(
    cell: &CellSpec,
    source: Option<&source::Source>,
    todo: &[usize],
) -> Result<crate::measure::loadgen::Pace> {
    use crate::measure::loadgen::Pace;
    if let Some(s) = source {
        if let Some(offsets) = s.offsets(todo) {
            return Ok(Pace::At(offsets));
        }
        if let Some(sessions) = s.sessions(todo) {
            // Sessions of request indices, as positions in `todo`.
            let mut at = 0;
            let sessions = sessions
                .into_iter()
                .map(|v| {
                    let p: Vec<usize> = (at..at + v.len()).collect();
                    at += v.len();
                    p
                })
                .collect();
            return Ok(Pace::Sessions {
                sessions,
                think: s.think(),
            });
        }
    }
    Ok(Pace::Arrival(cell.arrival()?, cell.seed.unwrap_or(0)))
}

/// The requests of a range the journal lacks, as sorted half-open ranges:
/// built from the finished ones, so its size follows what is done (already
/// in memory), not what is planned (a cell may plan a million requests).
#[derive(Debug, PartialEq)]
struct Missing {
    ranges: Vec<[usize; 2]>,
    /// How many missing requests come before each range.
    before: Vec<usize>,
    len: usize,
}

impl Missing {
    fn new(range: std::ops::Range<usize>, done: &BTreeSet<usize>) -> Missing {
        let mut ranges = Vec::new();
        let mut at = range.start;
        for &d in done.range(range.clone()) {
            if d > at {
                ranges.push([at, d]);
            }
            at = d + 1;
        }
        if at < range.end {
            ranges.push([at, range.end]);
        }
        let mut before = Vec::with_capacity(ranges.len());
        let mut len = 0;
        for r in &ranges {
            before.push(len);
            len += r[1] - r[0];
        }
        Missing {
            ranges,
            before,
            len,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `k`-th missing request's index (`k < len`).
    fn nth(&self, k: usize) -> usize {
        let i = self.before.partition_point(|&b| b <= k) - 1;
        self.ranges[i][0] + (k - self.before[i])
    }
}

async fn loadgen_drive<F, Fut>(
    cell: &CellSpec,
    count: usize,
    job: F,
    on_done: impl FnMut(RequestRecord),
) -> Result<()>
where
    F: Fn(usize, Instant) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = RequestRecord> + Send + 'static,
{
    crate::measure::loadgen::drive(
        cell.arrival()?,
        cell.concurrency,
        count,
        cell.seed.unwrap_or(0),
        job,
        on_done,
    )
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_requests_are_ranges_of_what_is_not_done() {
        let done: BTreeSet<usize> = [0, 1, 4, 7, 12].into();
        let m = Missing::new(2..10, &done);
        assert_eq!(m.ranges, vec![[2, 4], [5, 7], [8, 10]]);
        assert_eq!(m.len(), 6);
        let all: Vec<usize> = (0..m.len()).map(|k| m.nth(k)).collect();
        assert_eq!(all, vec![2, 3, 5, 6, 8, 9]);
        assert!(Missing::new(0..2, &done).is_empty());
        // A billion planned requests, none done: one range, nothing per request.
        let huge = Missing::new(0..1_000_000_000, &BTreeSet::new());
        assert_eq!(huge.ranges, vec![[0, 1_000_000_000]]);
        assert_eq!(huge.nth(999_999_999), 999_999_999);
    }
}
