//! What a run says while it measures: a line per cell, and a progress bar
//! on a terminal (plain lines otherwise); nothing when quiet.

use std::io::IsTerminal;

use super::{RunOptions, RunPart};
use crate::config::suite::CellSpec;
use crate::measure::{exact, workload};

/// One line on stderr, unless quiet.
pub(super) fn say(opts: &RunOptions, line: &str) {
    if !opts.quiet {
        eprintln!("{line}");
    }
}

/// One line saying what the cell will send.
pub(super) fn announce(
    cell: &CellSpec,
    opts: &RunOptions,
    sized: &workload::SizedBody,
    fits: Option<&exact::Fits>,
) {
    let what = match opts.part {
        RunPart::Block { first, count, .. } => {
            format!("block of {count} requests (#{first}..{})", first + count)
        }
        _ => format!("{} requests", cell.requests),
    };
    let prompt = match (&cell.workload, fits) {
        (Some(w), _) => w.describe(),
        (None, Some(fits)) => format!(
            "prompt {} tokens each ({} requests fitted in {:.2} s by {})",
            cell.prompt_tokens,
            fits.len(),
            fits.took.as_secs_f64(),
            fits.method
        ),
        (None, None) => format!(
            "prompt ≈{} tokens (target {}, by {}; prefixes not counted)",
            sized.measured_prompt_tokens, cell.prompt_tokens, sized.method
        ),
    };
    say(
        opts,
        &format!(
            "cell {}: {what}, concurrency {}, {prompt}, max_tokens {}",
            cell.name, cell.concurrency, cell.max_tokens
        ),
    );
}

/// A progress bar on a tty (done, in flight, errors); plain lines otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    name: String,
    total: usize,
    done: std::cell::Cell<usize>,
    errors: std::cell::Cell<usize>,
    quiet: bool,
}

impl Progress {
    pub(super) fn new(opts: &RunOptions, name: &str, total: usize) -> Progress {
        let bar = (!opts.quiet && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} {msg} {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_prefix(name.to_string());
            b
        });
        Progress {
            bar,
            name: name.to_string(),
            total,
            done: 0.into(),
            errors: 0.into(),
            quiet: opts.quiet,
        }
    }

    pub(super) fn done(&self, failed: bool) {
        self.done.set(self.done.get() + 1);
        if failed {
            self.errors.set(self.errors.get() + 1);
        }
        let (d, e) = (self.done.get(), self.errors.get());
        match &self.bar {
            Some(b) => {
                b.set_position(d as u64);
                b.set_message(format!("errors {e}"));
            }
            None if !self.quiet && (d == self.total || d % 10 == 0) => {
                eprintln!("  {}: {d}/{} done, {e} errors", self.name, self.total)
            }
            None => {}
        }
    }

    pub(super) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}
