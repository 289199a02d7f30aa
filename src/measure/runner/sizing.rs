//! A cell's prompt sized against the server before any request is sent,
//! kept across the blocks of one side of an interleaved qualification.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::RunOptions;
use super::session::Session;
use crate::atomic;
use crate::config::suite::CellSpec;
use crate::measure::source;
use crate::measure::workload::{self, PromptSizer};

/// Sizings kept across the blocks of one side, by cell.
pub const SIZING_FILE: &str = "sizing.json";

/// What a sizing depends on: the whole cell but its request and warmup
/// counts (which grow block by block).
fn sizing_key(cell: &CellSpec) -> String {
    let mut c = cell.clone();
    c.requests = 0;
    c.warmup = 0;
    serde_json::to_string(&c).unwrap_or_else(|_| cell.name.clone())
}

impl Session {
    /// The cell's prompt, sized against the server. A block of an
    /// interleaved qualification reuses the first block's sizing of its side
    /// (same server, same cell: `sizing.json` in its directory) rather than
    /// spend three chat probes and a dozen `/tokenize` calls per block; each
    /// request's own usage is still checked against the cell's tolerance.
    pub(super) async fn sized(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        sizer: &PromptSizer,
    ) -> Result<workload::SizedBody> {
        let cache = opts
            .part
            .pooled_by_caller()
            .then(|| opts.out_dir.join(SIZING_FILE));
        let key = sizing_key(cell);
        // Unreadable or absent: size again (and write it anew).
        let mut all: BTreeMap<String, workload::SizedBody> = cache
            .as_deref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if let Some(found) = all.get(&key) {
            return Ok(found.clone());
        }
        let sized = self
            .size_now(cell, sizer)
            .await
            .with_context(|| format!("sizing prompts for cell '{}'", cell.name))?;
        if let Some(path) = &cache {
            all.insert(key, sized.clone());
            atomic::write_json_atomic(path, &all)?;
        }
        Ok(sized)
    }

    /// Size a cell against the server: its filler (plain cells), or the
    /// filler's tokens per word and one probe of the workload's own shape.
    async fn size_now(&self, cell: &CellSpec, sizer: &PromptSizer) -> Result<workload::SizedBody> {
        let Some(w) = &cell.workload else {
            return sizer.size(cell, &self.nonce).await;
        };
        if !source::Source::needs_sizing(cell) {
            return Ok(workload::SizedBody {
                words: 0,
                body: String::new(),
                measured_prompt_tokens: 0,
                method: format!("{} dataset: the file's text as given, not sized", w.kind()),
                template_prompt_tokens: None,
                overhead_prompt_tokens: None,
                workload_probe: None,
            });
        }
        // The filler's tokens per word, from a plain cell of a typical length.
        let mut plain = cell.clone();
        plain.workload = None;
        plain.dataset = None;
        plain.prompt_tokens = cell.prompt_tokens.max(256);
        let mut sized = sizer.size(&plain, &self.nonce).await?;
        // Then the workload's own request 0 (and turn 1), under a nonce of
        // their own: what its message framing adds is measured, not guessed.
        let probe_src = source::Source::new(cell, &format!("probe-{}", self.nonce), &sized);
        let plans = probe_src.probe_plans();
        let mut measured = Vec::with_capacity(plans.len());
        for p in &plans {
            measured.push(sizer.messages_prompt_tokens(p.messages.clone()).await?);
        }
        sized.workload_probe = match (plans.first(), measured.first()) {
            (Some(p), Some(&m)) => Some(workload::Probe {
                planned: p.target_prompt_tokens.unwrap_or(m),
                measured: m,
                turn_step: measured.get(1).map(|m1| m1.saturating_sub(m)),
            }),
            _ => None,
        };
        Ok(sized)
    }
}
