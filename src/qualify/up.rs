//! Both runtimes of the interleaved schedule, up at once and watched: a run
//! against either ends the moment one of them stops.

use anyhow::anyhow;

use super::outcome::RuntimeStopped;
use crate::config::plan::{BASELINE, CANDIDATE};
use crate::config::suite::LoadedSuite;
use crate::measure::record::RequestRecord;
use crate::measure::runner::{self, Measured, RunOptions, Target};
use crate::runtime::ctx::Ctx;
use crate::runtime::lifecycle::{self, Started};
use std::sync::Arc;

/// Both runtimes, up for the interleaved schedule.
pub(super) struct Up {
    pub(super) baseline: Started,
    pub(super) candidate: Started,
    /// (runtime, cell) pairs warmed up since these processes started: a
    /// cell's warmup runs before its first block on each runtime lifetime,
    /// not before every block (the runtimes stay up between blocks).
    pub(super) warmed: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    /// Each runtime as its first run discovered it: later blocks against
    /// the same process neither probe it again nor reload a tokenizer file.
    pub(super) reached: std::sync::Mutex<std::collections::BTreeMap<&'static str, Arc<Target>>>,
}

impl Up {
    pub(super) fn get(&self, label: &str) -> &Started {
        if label == BASELINE {
            &self.baseline
        } else {
            &self.candidate
        }
    }

    fn reached_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<&'static str, Arc<Target>>> {
        self.reached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn reached_of(&self, label: &str) -> Option<Arc<Target>> {
        self.reached_lock().get(label).cloned()
    }

    /// Which runtime stopped, and why, if one did.
    async fn down(&self, ctx: &Ctx<'_>) -> Option<(&'static str, String)> {
        for (label, s) in [(BASELINE, &self.baseline), (CANDIDATE, &self.candidate)] {
            if let Some(why) = lifecycle::down_reason(s, &ctx.docker).await {
                return Some((label, why));
            }
        }
        None
    }

    /// Run `opts` against `label`, ended at once if either runtime stops;
    /// `earlier`: what its journal already holds, kept in memory.
    pub(super) async fn run(
        &self,
        ctx: &Ctx<'_>,
        label: &'static str,
        opts: &RunOptions,
        suite: &LoadedSuite,
        earlier: Option<&[RequestRecord]>,
    ) -> Result<Measured, (&'static str, anyhow::Error)> {
        let stopped = |l: &str, why: String| anyhow::Error::from(RuntimeStopped::new(l, why));
        let reached = self.reached_of(label);
        let result = tokio::select! {
            r = runner::measure_suite(opts, &suite.suite, &suite.text, earlier, reached) => r.map_err(|e| (label, e)),
            why = lifecycle::watch(&self.baseline, &ctx.docker) => Err((BASELINE, stopped(BASELINE, why))),
            why = lifecycle::watch(&self.candidate, &ctx.docker) => Err((CANDIDATE, stopped(CANDIDATE, why))),
        };
        // As in a pass: requests failing because a server died are the
        // server's failure (its exit may take a moment to be reaped).
        let mut down = self.down(ctx).await;
        if result.is_err() && down.is_none() {
            for _ in 0..10 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                down = self.down(ctx).await;
                if down.is_some() {
                    break;
                }
            }
        }
        if let Ok(m) = &result {
            self.reached_lock().insert(label, m.target.clone());
        }
        match (result, down) {
            (Ok(_), Some((l, why))) => Err((l, stopped(l, why))),
            (Err((_, e)), Some((l, why))) if !RuntimeStopped::is(&e) => Err((
                l,
                anyhow!(
                    "the {l} runtime stopped during the suite: {why}; the suite failed with: {e:#}"
                ),
            )),
            (r, _) => r,
        }
    }
}
