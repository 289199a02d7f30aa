//! A suite's `[[embeddings]]` tables: inputs sent to `/v1/embeddings` in
//! batches, their vectors compared across runtimes (`report::embedding`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// Most inputs one table may embed, and most per request.
pub const MAX_INPUTS: usize = 100_000;
pub const MAX_BATCH: usize = 2048;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSpec {
    pub name: String,
    /// Generated inputs: this many sentences of the filler's words, 8 to 40
    /// words each, from `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<usize>,
    /// Or a text file, one input per non-empty line (relative to the suite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Or an `infergate capture` trace (relative to the suite): its
    /// embeddings requests that succeeded, replayed in arrival order, each
    /// with as many inputs as it had and filler of its length in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<PathBuf>,
    /// Inputs per request (a capture's requests keep their own).
    #[serde(default = "default_batch")]
    pub batch: usize,
    #[serde(default)]
    pub seed: u64,
    /// The file's lines, read by [`EmbeddingSpec::read_inputs`].
    #[serde(skip)]
    pub lines: Option<Vec<String>>,
    /// The capture's requests, read by [`EmbeddingSpec::read_inputs`].
    #[serde(skip)]
    pub captured: Option<Vec<CapturedEmbedding>>,
}

/// One embeddings request of a capture: its inputs, and their tokens in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedEmbedding {
    pub inputs: usize,
    pub tokens: u64,
}

fn default_batch() -> usize {
    8
}

impl EmbeddingSpec {
    /// Field checks the TOML types cannot express.
    pub fn validate(&self) -> Result<()> {
        let name = &self.name;
        if let Some(why) = crate::report::text::name_problem(name) {
            bail!("field `name`: {why}");
        }
        let given = [
            self.inputs.is_some(),
            self.file.is_some(),
            self.capture.is_some(),
        ];
        match given.iter().filter(|g| **g).count() {
            0 => bail!(
                "embeddings '{name}': field `inputs` (how many to generate), `file` (one input per line) or `capture` (a capture's trace) is required"
            ),
            1 => {}
            _ => bail!(
                "embeddings '{name}': give one of `inputs` (generated), `file` and `capture`, not both"
            ),
        }
        if let Some(n) = self.inputs
            && (n == 0 || n > MAX_INPUTS)
        {
            bail!("embeddings '{name}': field `inputs`: {n} is not in 1..={MAX_INPUTS}")
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            bail!(
                "embeddings '{name}': field `batch`: {} is not in 1..={MAX_BATCH}",
                self.batch
            );
        }
        Ok(())
    }

    /// Read the inputs file or the capture, if it names one (relative to `dir`).
    pub fn read_inputs(&mut self, dir: &Path) -> Result<()> {
        if let Some(capture) = &self.capture {
            let path = dir.join(capture);
            let captured = read_capture(&path)
                .with_context(|| format!("field `capture`: reading {}", path.display()))?;
            self.batch = captured.iter().map(|c| c.inputs).max().unwrap_or(1);
            self.captured = Some(captured);
            return Ok(());
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        let path = dir.join(file);
        let text = crate::util::read_input(&path)
            .with_context(|| format!("field `file`: reading {}", path.display()))?;
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        if lines.is_empty() || lines.len() > MAX_INPUTS {
            bail!(
                "field `file`: {} has {} non-empty lines; 1..={MAX_INPUTS} inputs are needed",
                path.display(),
                lines.len()
            );
        }
        self.lines = Some(lines);
        Ok(())
    }
}

/// A capture's embeddings requests that succeeded, in arrival order.
fn read_capture(path: &Path) -> Result<Vec<CapturedEmbedding>> {
    use crate::config::dataset::{CAPTURE_HEADER_KEY, json_lines, read_bounded};
    #[derive(Deserialize)]
    struct Line {
        timestamp: u64,
        input_length: u64,
        #[serde(default)]
        endpoint: Option<String>,
        #[serde(default)]
        status: Option<u16>,
        #[serde(default)]
        inputs: Option<usize>,
    }
    let file = path.display().to_string();
    let mut lines = json_lines(&read_bounded(path)?, &file)?;
    if lines
        .first()
        .is_none_or(|(_, v)| v.get(CAPTURE_HEADER_KEY).is_none())
    {
        bail!("not a capture: its first line is not an `infergate capture` header");
    }
    lines.remove(0);
    let (mut read, mut failed, mut total) = (Vec::new(), 0usize, 0usize);
    for (at, v) in lines {
        let l: Line = serde_path_to_error::deserialize(&v).map_err(|e| {
            let field = e.path().to_string();
            anyhow::anyhow!("line {at}: field `{field}`: {}", e.into_inner())
        })?;
        if l.endpoint.as_deref() != Some("embeddings") {
            continue;
        }
        let n = l.inputs.unwrap_or(1);
        if !l.status.is_some_and(|s| (200..300).contains(&s)) || l.input_length == 0 || n == 0 {
            failed += 1;
            continue;
        }
        if n > MAX_BATCH {
            bail!("line {at}: field `inputs`: {n} inputs in one request, more than {MAX_BATCH}");
        }
        total += n;
        if total > MAX_INPUTS {
            bail!("line {at}: more than {MAX_INPUTS} inputs in all; take a shorter capture");
        }
        read.push((
            l.timestamp,
            CapturedEmbedding {
                inputs: n,
                tokens: l.input_length,
            },
        ));
    }
    if read.is_empty() {
        bail!("no embeddings request that succeeded to replay ({failed} failed)");
    }
    // Written as each exchange completed; replayed as they arrived.
    read.sort_by_key(|(t, _)| *t);
    Ok(read.into_iter().map(|(_, c)| c).collect())
}
