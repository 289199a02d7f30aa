//! Turnover workloads as a suite declares them: correctness under churn.
//!
//! Many short requests at a fixed client concurrency, closed loop (a finished
//! request is replaced at once), temperature 0, each carrying its own canary
//! marker. Every answer is judged on its complete captured text, and the first
//! failing check names the failure: `request_error` → `http_error` →
//! `stream_validation_failed` (all three from the client) →
//! `request_canary_failed` → `controlled_output_failed`.
//!
//! Suites declare workloads as `[[turnover]]` tables, parsed and checked by
//! [`TurnoverSpec::from_tables`] when the suite is read; what is compiled for
//! a run (generated items, the suite's markers, prompts, judging) is
//! `measure::turnover`:
//!
//! ```toml
//! [[turnover]]
//! name = "words-c4"
//! contract = "words"        # or "reference"
//! requests = 60             # per run (default 60)
//! concurrency = 4           # requests in flight (default 4)
//! repeats = 2               # runs of this workload: the run and 1 repeat (default 1)
//! words = 5                 # N, the count the words prompt asks for (default 5)
//! code_words = ["cedar"]    # request i uses code_words[i % len] (default ["cedar"])
//! # prompt = "words"        # or "sentence" (free text; reference contract only)
//! #                         # or "task" (checkable questions; reference contract only) with
//! # tasks = "data/t.jsonl"   #   a task file (config::tasks), or
//! # generate = { kind = "needle", context_words = 200 }   # generated items (generate)
//! # shots = 3               # worked examples in the prompt (words 3, sentence 2, task 3)
//! # max_tokens = 26         # default 2*words + 16 (words prompt), 64 (sentence)
//! # temperature = 0.0       # of the measured pass; the reference pass is always 0
//! # seed = 1                # sent as the request seed; also picks the markers
//! # model = "…"             # request `model`; the runner fills in the served id
//! # extra = { cache_prompt = true }   # more body fields
//! # response_format = { schema = "schemas/answer.json" }   # or "json_object": structured
//! #                         # output asked of every request, each reference answer
//! #                         # marked by what came back (reference contract only; features)
//! # tools = { file = "tools/answer.json", choice = "required" }   # tool calls, likewise
//! # reasoning = true        # each answer's reasoning expected apart from it, likewise
//! ```
//!

pub mod generate;
pub mod marker;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::features::{ResponseFormatSpec, StructuredOutput, ToolCalling, ToolsSpec};
use crate::config::tasks::TaskItem;
use generate::GenerateSpec;

/// Most worked examples a prompt can have (the prompt has this many).
pub const MAX_SHOTS: usize = 4;

/// Which contract a turnover workload checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Contract {
    Words,
    Reference,
}

impl Contract {
    pub fn as_str(self) -> &'static str {
        match self {
            Contract::Words => "words",
            Contract::Reference => "reference",
        }
    }
}

/// Which prompt a workload sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptStyle {
    /// "Write the marker, then the word W exactly N times", with worked examples.
    Words,
    /// "Write the marker, then one sentence about T": free text, `reference` only.
    Sentence,
    /// A question from a task file, with worked examples of its kind and no
    /// marker (the marker costs a small model its accuracy): the reference
    /// answers are scored against the answer key (`task_answers`), and the
    /// measured pass held to them; only foreign markers are looked for.
    Task,
}

/// One turnover workload, as a suite's `[[turnover]]` table declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnoverSpec {
    pub name: String,
    pub contract: Contract,
    #[serde(default = "default_requests")]
    pub requests: usize,
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Number of runs of this workload (the seed's candidate had 2: a run and its repeat).
    #[serde(default = "one")]
    pub repeats: usize,
    /// Default: `prompt` words → 2 × words + 16 (room to see a runaway), sentence → 64.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Temperature of the measured pass. The reference pass always uses 0;
    /// anything else here is for demonstrating that the check bites.
    #[serde(default)]
    pub temperature: f64,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub model: Option<String>,
    /// Default `words`. The `words` contract needs the `words` prompt.
    #[serde(default)]
    pub prompt: Option<PromptStyle>,
    /// N: repetitions of the code word the words prompt asks for.
    #[serde(default = "default_words")]
    pub words: usize,
    #[serde(default = "default_code_words")]
    pub code_words: Vec<String>,
    /// Worked examples before the request's own turn (at most [`MAX_SHOTS`]).
    #[serde(default)]
    pub shots: Option<usize>,
    /// Extra request body fields (e.g. `cache_prompt`). The contract's own
    /// fields (messages, max_tokens, temperature, seed, stream) win.
    #[serde(default)]
    pub extra: Map<String, Value>,
    /// Alternatives per token the reference pass asks for (`logprobs` with
    /// `top_logprobs`), so `compare` can tell a near-tie from a hard
    /// divergence across runtimes. 0: ask for none (a server that rejects
    /// the fields). The measured pass never asks: they cost the server time.
    #[serde(default = "default_top_logprobs")]
    pub top_logprobs: usize,
    /// `prompt = "task"`: the task file (JSON Lines; a relative path is
    /// from the suite's folder). Request i asks item i.
    #[serde(default)]
    pub tasks: Option<std::path::PathBuf>,
    /// `prompt = "task"`: items generated from `seed` instead of a file
    /// ([`generate`]: copy, needle, count, arithmetic).
    #[serde(default)]
    pub generate: Option<GenerateSpec>,
    /// The task file's items, read by `Suite::load` (generated items are
    /// made for a run: `measure::turnover`).
    #[serde(skip)]
    pub task_file_items: Arc<Vec<TaskItem>>,
    /// Structured output asked of every request: `"json_object"`, or
    /// `{ schema = "FILE.json" }` (from the suite's folder). Each reference
    /// answer is marked (`measure::features`) and `compare` gates the share valid.
    #[serde(default)]
    pub response_format: Option<ResponseFormatSpec>,
    /// `response_format` read and compiled, by `Suite::load`.
    #[serde(skip)]
    pub structured: Option<StructuredOutput>,
    /// Tools offered to every request: `{ file = "FILE.json", choice =
    /// "required" }` (OpenAI's `tools` array; choice `auto`, `required` or
    /// a function's name). Each reference answer's calls are marked
    /// (`measure::features`) and `compare` gates the share valid.
    #[serde(default)]
    pub tools: Option<ToolsSpec>,
    /// `tools` read and compiled, by `Suite::load`.
    #[serde(skip)]
    pub tool_calling: Option<ToolCalling>,
    /// Every answer is expected to carry its reasoning apart from the
    /// answer (a reasoning model behind a reasoning parser): each reference
    /// answer is marked (`measure::features::reasoning_mark`) and `compare` gates
    /// the share that was.
    #[serde(default)]
    pub reasoning: bool,
}

fn default_requests() -> usize {
    60
}
fn default_concurrency() -> usize {
    4
}
fn one() -> usize {
    1
}
fn default_top_logprobs() -> usize {
    crate::report::agreement::DEFAULT_TOP_LOGPROBS
}

fn default_words() -> usize {
    5
}
fn default_code_words() -> Vec<String> {
    vec!["cedar".into()]
}

impl TurnoverSpec {
    /// Parse and check one `[[turnover]]` table of a suite.
    pub fn from_table(table: &toml::Table) -> Result<TurnoverSpec> {
        let name = table
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or("(unnamed)")
            .to_string();
        // Before any message that quotes the name.
        if let Some(why) = crate::report::text::name_problem(&name) {
            bail!("field `name`: {why}");
        }
        let spec: TurnoverSpec = toml::Value::Table(table.clone())
            .try_into()
            .with_context(|| format!("turnover '{name}'"))?;
        spec.validate()
            .with_context(|| format!("turnover '{}'", spec.name))?;
        Ok(spec)
    }

    /// Every `[[turnover]]` table of a suite, each checked alone and the
    /// names unique; `at(i)` says where table `i` is (its file and line).
    pub fn from_tables(
        tables: &[toml::Table],
        at: impl Fn(usize) -> String,
    ) -> Result<Vec<TurnoverSpec>> {
        let mut specs: Vec<TurnoverSpec> = Vec::with_capacity(tables.len());
        for (i, t) in tables.iter().enumerate() {
            let spec = TurnoverSpec::from_table(t).with_context(|| at(i))?;
            if specs.iter().any(|s| s.name == spec.name) {
                return Err(anyhow::anyhow!("turnover '{}' is defined twice", spec.name))
                    .with_context(|| at(i));
            }
            specs.push(spec);
        }
        Ok(specs)
    }

    /// Every field within its limits and the fields consistent with each
    /// other; the first problem found is named.
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("name must not be empty");
        }
        self.check_sizes()?;
        if self.contract == Contract::Words && self.prompt_style() != PromptStyle::Words {
            bail!("the words contract needs prompt = \"words\"");
        }
        match self.prompt_style() {
            PromptStyle::Words => self.check_code_words()?,
            PromptStyle::Task => self.check_tasks()?,
            PromptStyle::Sentence => {}
        }
        if self.prompt_style() != PromptStyle::Task
            && (self.tasks.is_some() || self.generate.is_some())
        {
            bail!("tasks and generate are read only with prompt = \"task\"");
        }
        self.check_features()?;
        self.check_sampling()
    }

    /// Counts above zero and within the stated limits, with a distinct
    /// canary marker for every request of every repeat.
    fn check_sizes(&self) -> Result<()> {
        if self.requests == 0 || self.concurrency == 0 || self.repeats == 0 {
            bail!("requests, concurrency and repeats must be > 0");
        }
        // A words prompt holds `shots + 1` turns of up to `words` code words.
        let prompt_words = (self.prompt_style() == PromptStyle::Words).then(|| {
            self.words
                .saturating_mul(self.shots().saturating_add(1))
                .saturating_mul(self.requests)
        });
        crate::config::limits::check_turnover(
            self.requests,
            self.repeats,
            self.concurrency,
            self.words,
            prompt_words,
            self.max_tokens,
        )?;
        let total = (self.requests as u64).saturating_mul(self.repeats as u64);
        if total > marker::MARKER_SPACE {
            bail!(
                "requests × repeats = {total} exceeds the {} distinct canary markers",
                marker::MARKER_SPACE
            );
        }
        Ok(())
    }

    /// The words prompt: a count to ask for, and code words that are one
    /// word each and could not be read as a canary marker.
    fn check_code_words(&self) -> Result<()> {
        if self.words == 0 {
            bail!("words must be > 0");
        }
        if self.code_words.is_empty() {
            bail!("code_words must not be empty");
        }
        for w in &self.code_words {
            if w.is_empty() || w.contains(char::is_whitespace) {
                bail!("code word {w:?} must be one word without spaces");
            }
            if marker::marker_shaped(w).next().is_some() {
                bail!("code word {w:?} looks like a canary marker");
            }
        }
        Ok(())
    }

    /// The task prompt: the reference contract, one source of items, and
    /// one run (a repeat would count the same answers twice).
    fn check_tasks(&self) -> Result<()> {
        if self.contract != Contract::Reference {
            bail!("the task prompt needs contract = \"reference\"");
        }
        match (&self.tasks, &self.generate) {
            (None, None) => bail!(
                "prompt = \"task\" needs tasks = \"<file.jsonl>\" or generate = {{ kind = \"…\" }}"
            ),
            (Some(_), Some(_)) => bail!("tasks and generate: give one of them"),
            (None, Some(g)) => g
                .validate(self.requests, self.shots())
                .map_err(anyhow::Error::msg)?,
            (Some(_), None) => {}
        }
        if self.repeats != 1 {
            bail!(
                "a task workload runs once (repeats = 1): a repeat asks the same questions and would count their answers twice"
            );
        }
        Ok(())
    }

    /// Each feature's answers are checked on the reference pass, and its
    /// body fields are its own to send.
    fn check_features(&self) -> Result<()> {
        for (field, asked, body_fields) in [
            (
                "response_format",
                self.response_format.is_some(),
                &["response_format"][..],
            ),
            (
                "tools",
                self.tools.is_some(),
                &["tools", "tool_choice", "parallel_tool_calls"][..],
            ),
            ("reasoning", self.reasoning, &[][..]),
        ] {
            if !asked {
                continue;
            }
            if self.contract != Contract::Reference {
                bail!(
                    "field `{field}`: needs contract = \"reference\" (the reference answers, taken alone at temperature 0, are the ones checked)"
                );
            }
            if let Some(twice) = body_fields.iter().find(|f| self.extra.contains_key(**f)) {
                bail!("field `{twice}` is given twice: by `{field}` and in `extra`");
            }
        }
        Ok(())
    }

    /// Worked examples, temperature and the output cap within range.
    fn check_sampling(&self) -> Result<()> {
        if self.shots() > MAX_SHOTS {
            bail!("shots must be at most {MAX_SHOTS}");
        }
        if !(0.0..=crate::config::limits::MAX_TEMPERATURE).contains(&self.temperature) {
            bail!(
                "temperature must be a number in [0, {}], the OpenAI API's range (found {:?})",
                crate::config::limits::MAX_TEMPERATURE,
                self.temperature
            );
        }
        if self.max_tokens == Some(0) {
            bail!("max_tokens must be > 0");
        }
        Ok(())
    }

    pub fn prompt_style(&self) -> PromptStyle {
        self.prompt.unwrap_or(PromptStyle::Words)
    }

    pub fn shots(&self) -> usize {
        self.shots.unwrap_or(match self.prompt_style() {
            PromptStyle::Words | PromptStyle::Task => 3,
            PromptStyle::Sentence => 2,
        })
    }

    pub fn max_tokens(&self) -> u64 {
        self.max_tokens.unwrap_or(match self.prompt_style() {
            // Saturating: `words` comes from the suite (i64::MAX overflowed here).
            PromptStyle::Words => (self.words as u64).saturating_mul(2).saturating_add(16),
            PromptStyle::Sentence => 64,
            // Short answers; room to see one run on.
            PromptStyle::Task => 16,
        })
    }

    /// Whether the prompt asks the answer to begin with its marker.
    pub fn asks_marker(&self) -> bool {
        self.prompt_style() != PromptStyle::Task
    }

    /// Journal cell name of repeat `repeat`'s measured requests.
    pub fn cell_label(&self, repeat: usize) -> String {
        format!("turnover:{}#{repeat}", self.name)
    }

    /// Journal cell name of repeat `repeat`'s reference pass (not counted in the run).
    pub fn reference_label(&self, repeat: usize) -> String {
        format!("turnover:{}#{repeat}/reference", self.name)
    }

    /// Read the files the workload names (a relative path is from `dir`,
    /// the suite's folder): the schema and tools it asks for, compiled, and
    /// the task file, which must hold an item for every request.
    pub fn read_inputs(&mut self, dir: &Path) -> Result<()> {
        if let Some(f) = &self.response_format {
            let s = StructuredOutput::load(f, dir).context("field `response_format`")?;
            self.structured = Some(s);
        }
        if let Some(t) = &self.tools {
            let t = ToolCalling::load(t, dir).context("field `tools`")?;
            self.tool_calling = Some(t);
        }
        let Some(p) = self.tasks.as_mut() else {
            return Ok(());
        };
        *p = dir.join(&*p);
        let file = p.display().to_string();
        let items = crate::config::dataset::read_bounded(p)
            .and_then(|text| crate::config::tasks::tasks_text(&text, &file))
            .context("tasks")?;
        if items.len() < self.requests {
            bail!(
                "requests = {} but {file} holds only {} items",
                self.requests,
                items.len()
            );
        }
        self.task_file_items = Arc::new(items);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
