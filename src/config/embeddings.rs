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
    /// Inputs per request.
    #[serde(default = "default_batch")]
    pub batch: usize,
    #[serde(default)]
    pub seed: u64,
    /// The file's lines, read by [`EmbeddingSpec::read_inputs`].
    #[serde(skip)]
    pub lines: Option<Vec<String>>,
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
        match (self.inputs, &self.file) {
            (Some(_), Some(_)) => {
                bail!("embeddings '{name}': give `inputs` (generated) or `file`, not both")
            }
            (None, None) => bail!(
                "embeddings '{name}': field `inputs` (how many to generate) or `file` (one input per line) is required"
            ),
            (Some(n), None) if n == 0 || n > MAX_INPUTS => {
                bail!("embeddings '{name}': field `inputs`: {n} is not in 1..={MAX_INPUTS}")
            }
            _ => {}
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            bail!(
                "embeddings '{name}': field `batch`: {} is not in 1..={MAX_BATCH}",
                self.batch
            );
        }
        Ok(())
    }

    /// Read the inputs file, if it names one (relative to `dir`).
    pub fn read_inputs(&mut self, dir: &Path) -> Result<()> {
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
