//! Turnover runs: correctness under churn (DESIGN.md "Controlled output and canaries").
//!
//! Many short requests at a fixed client concurrency, closed loop (a finished
//! request is replaced at once), temperature 0, each carrying its own canary
//! marker. Every answer is judged on its complete captured text, and the first
//! failing check names the failure: `request_error` → `http_error` →
//! `stream_validation_failed` (all three from the client) →
//! `request_canary_failed` → `controlled_output_failed`.
//!
//! Suites declare workloads as `[[turnover]]` tables, parsed by
//! [`TurnoverSpec::from_table`]:
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
//! Pure parts (markers, contracts, judging, the run record) are unit tested in
//! the submodules and below; [`run_turnover`] is the only I/O.

pub mod canary;
pub mod contract;
pub mod generate;
pub mod prompt;

use std::time::Instant;

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::artifact::{Divergence, TurnoverFailure, TurnoverRun};
use crate::config::tasks::TaskItem;
use crate::measure::client::{Client, Endpoint, chat_body};
use crate::measure::features;
use crate::measure::record::{Outcome, RequestRecord, StreamCapture, bounded};
use crate::report::agreement::TokenLogprob;

pub use canary::{CanaryCheck, IssuedMarkers, MarkerSet};
pub use contract::Contract;

/// Characters of error text kept in a failure record.
pub const ERROR_CHARS: usize = 300;
/// Characters of captured output kept in a failure record.
pub const OUTPUT_CHARS: usize = 200;

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
    /// Worked examples before the request's own turn (at most [`prompt::MAX_SHOTS`]).
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
    pub generate: Option<generate::GenerateSpec>,
    /// The task file's items, read by `Suite::load`.
    #[serde(skip)]
    pub task_items: std::sync::Arc<Vec<TaskItem>>,
    /// Structured output asked of every request: `"json_object"`, or
    /// `{ schema = "FILE.json" }` (from the suite's folder). Each reference
    /// answer is marked ([`features`]) and `compare` gates the share valid.
    #[serde(default)]
    pub response_format: Option<features::ResponseFormatSpec>,
    /// `response_format` read and compiled, by `Suite::load`.
    #[serde(skip)]
    pub structured: Option<features::StructuredOutput>,
    /// Tools offered to every request: `{ file = "FILE.json", choice =
    /// "required" }` (OpenAI's `tools` array; choice `auto`, `required` or
    /// a function's name). Each reference answer's calls are marked
    /// ([`features`]) and `compare` gates the share valid.
    #[serde(default)]
    pub tools: Option<features::ToolsSpec>,
    /// `tools` read and compiled, by `Suite::load`.
    #[serde(skip)]
    pub tool_calling: Option<features::ToolCalling>,
    /// Every answer is expected to carry its reasoning apart from the
    /// answer (a reasoning model behind a reasoning parser): each reference
    /// answer is marked ([`features::reasoning_mark`]) and `compare` gates
    /// the share that was.
    #[serde(default)]
    pub reasoning: bool,
    /// Every marker of the qualification: this workload's repeats once
    /// parsed, every workload of the suite once the suite is (`with_suite_markers`).
    #[serde(skip)]
    pub issued: IssuedMarkers,
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

/// One request of a run, before it is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRequest {
    pub index: usize,
    pub marker: String,
    /// The code word (words prompt).
    pub code_word: Option<String>,
    pub messages: Value,
}

/// Everything one run sends, fixed before the first request.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub markers: MarkerSet,
    pub requests: Vec<PlannedRequest>,
}

impl TurnoverSpec {
    /// Parse and validate one `[[turnover]]` table of a suite.
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
        let issued = IssuedMarkers::of_workloads([spec.marker_workload()]);
        Ok(TurnoverSpec { issued, ..spec })
    }

    fn marker_key(&self) -> u64 {
        canary::marker_key(&self.name, self.seed.unwrap_or(0))
    }

    fn marker_workload(&self) -> (&str, u64, usize, usize) {
        (&self.name, self.marker_key(), self.requests, self.repeats)
    }

    /// Judge every workload against the markers of all of them: a leak from
    /// another workload (or an earlier pass of it) is contamination too.
    pub fn with_suite_markers(specs: &mut [TurnoverSpec]) {
        let all = IssuedMarkers::of_workloads(specs.iter().map(TurnoverSpec::marker_workload));
        for s in specs {
            s.issued = all.clone();
        }
    }

    /// Every `[[turnover]]` table of a suite; names must be unique.
    pub fn from_tables(tables: &[toml::Table]) -> Result<Vec<TurnoverSpec>> {
        let mut specs = tables
            .iter()
            .map(TurnoverSpec::from_table)
            .collect::<Result<Vec<_>>>()?;
        TurnoverSpec::check_unique(&specs)?;
        TurnoverSpec::with_suite_markers(&mut specs);
        Ok(specs)
    }

    /// Turnover names must be unique within a suite.
    pub fn check_unique(specs: &[TurnoverSpec]) -> Result<()> {
        for (i, s) in specs.iter().enumerate() {
            if specs[..i].iter().any(|o| o.name == s.name) {
                bail!("turnover '{}' is defined twice", s.name);
            }
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("name must not be empty");
        }
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
        if total > canary::MARKER_SPACE {
            bail!(
                "requests × repeats = {total} exceeds the {} distinct canary markers",
                canary::MARKER_SPACE
            );
        }
        if self.contract == Contract::Words && self.prompt_style() != PromptStyle::Words {
            bail!("the words contract needs prompt = \"words\"");
        }
        if self.prompt_style() == PromptStyle::Words {
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
                // A marker-shaped code word would read as a canary.
                if canary::marker_shaped(w).next().is_some() {
                    bail!("code word {w:?} looks like a canary marker");
                }
            }
        }
        if self.prompt_style() == PromptStyle::Task {
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
        } else if self.tasks.is_some() || self.generate.is_some() {
            bail!("tasks and generate are read only with prompt = \"task\"");
        }
        // Each feature's answers are checked on the reference pass, and its
        // body fields are its own to send.
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
        if self.shots() > prompt::MAX_SHOTS {
            bail!("shots must be at most {}", prompt::MAX_SHOTS);
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

    /// Journal cell name of repeat `repeat`'s measured requests.
    pub fn cell_label(&self, repeat: usize) -> String {
        format!("turnover:{}#{repeat}", self.name)
    }

    /// Journal cell name of repeat `repeat`'s reference pass (not counted in the run).
    pub fn reference_label(&self, repeat: usize) -> String {
        format!("turnover:{}#{repeat}/reference", self.name)
    }

    /// The prompts of repeat `repeat`. Markers depend on the name, the seed
    /// and the repeat only, so two runtimes are sent identical requests.
    pub fn plan(&self, repeat: usize) -> RunPlan {
        let markers = MarkerSet::for_run(self.marker_key(), repeat, self.requests)
            .with_issued(self.issued.clone());
        let shots = self.shots();
        let requests = (0..self.requests)
            .map(|index| {
                // for_run made exactly `requests` markers.
                let marker = markers.get(index).unwrap_or_default().to_string();
                let (code_word, messages) = match self.prompt_style() {
                    PromptStyle::Words => {
                        let w = &self.code_words[index % self.code_words.len()];
                        (
                            Some(w.clone()),
                            prompt::words_messages(&marker, w, self.words, shots),
                        )
                    }
                    PromptStyle::Sentence => {
                        let topic = prompt::TOPICS[index % prompt::TOPICS.len()];
                        (None, prompt::sentence_messages(&marker, topic, shots))
                    }
                    PromptStyle::Task => {
                        (None, prompt::task_messages(&self.task_items, index, shots))
                    }
                };
                PlannedRequest {
                    index,
                    marker,
                    code_word,
                    messages,
                }
            })
            .collect();
        RunPlan { markers, requests }
    }

    /// The streamed chat body of `req` at `temperature`.
    /// The reference pass's body: temperature 0, and the per-token logprobs
    /// with `top_logprobs` alternatives (unless `extra` says otherwise, or
    /// the workload offers tools).
    pub fn reference_body(&self, req: &PlannedRequest) -> Value {
        let mut body = self.request_body(req, 0.0);
        // llama.cpp refuses logprobs with tools on a stream ("logprobs is
        // not supported with tools + stream"): a tool workload asks for none.
        if let Some(o) = body.as_object_mut()
            && self.top_logprobs > 0
            && !self.extra.contains_key("logprobs")
            && self.tool_calling.is_none()
        {
            o.insert("logprobs".into(), Value::Bool(true));
            o.insert("top_logprobs".into(), Value::from(self.top_logprobs));
        }
        body
    }

    pub fn request_body(&self, req: &PlannedRequest, temperature: f64) -> Value {
        let mut extra = self.extra.clone();
        if let Some(m) = &self.model {
            extra.insert("model".into(), Value::from(m.as_str()));
        }
        if let Some(s) = &self.structured {
            extra.insert("response_format".into(), s.body_field());
        }
        if let Some(t) = &self.tool_calling {
            for (field, value) in t.body_fields() {
                extra.insert(field.into(), value);
            }
        }
        chat_body(
            req.messages.clone(),
            self.max_tokens(),
            temperature,
            self.seed,
            extra,
        )
    }
}

/// What a request's answer is judged against.
#[derive(Debug, Clone, Copy)]
pub enum Expected<'a> {
    /// Exactly `n` × `code_word` after the canary.
    Words { code_word: &'a str, n: usize },
    /// Byte-identical to this capture of the same prompt run alone.
    Reference(&'a StreamCapture),
}

/// The verdict on one request of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    /// A complete, valid stream arrived (see [`summarize`]).
    pub received: bool,
    pub canary: CanaryCheck,
    /// Present iff `outcome` is not Ok.
    pub failure: Option<TurnoverFailure>,
}

/// Judge request `index` of a run from its capture. First failing check wins;
/// the canary is checked on whatever text arrived, so a leak is counted even
/// in a broken stream.
pub fn judge(
    markers: &MarkerSet,
    index: usize,
    capture: &StreamCapture,
    expected: Expected<'_>,
) -> Judgement {
    judge_with(markers, index, capture, expected, true)
}

/// [`judge`], where `own_marker` says whether the prompt asked the answer
/// to begin with its marker (task prompts do not: only foreign markers,
/// a leak, fail their canary).
pub fn judge_with(
    markers: &MarkerSet,
    index: usize,
    capture: &StreamCapture,
    expected: Expected<'_>,
    own_marker: bool,
) -> Judgement {
    let marker = markers.get(index).unwrap_or_default();
    let mut canary = canary::check(markers, index, &capture.content, &capture.reasoning);
    if !own_marker {
        canary.begins_with_own = true;
    }
    let after = contract::after_canary(&capture.content, marker);
    let mut words = after.split_whitespace().count();

    // Reference divergence is reported whatever the class, as a clue.
    let mut divergence: Option<Divergence> = None;
    let mut problem: Option<String> = None;
    match expected {
        Expected::Words { code_word, n } => {
            let v = contract::judge_words(
                after,
                code_word,
                n,
                &capture.finish_reasons,
                capture.truncated,
            );
            words = v.words;
            problem = v.problem;
        }
        Expected::Reference(reference) => {
            if let Some(f) = &reference.failure {
                problem = Some(format!(
                    "no reference text: the prompt's reference request failed ({}: {})",
                    f.class.as_str(),
                    f.message
                ));
            } else if reference.truncated || capture.truncated {
                problem = Some(
                    "capture truncated at the client's cap: the answer cannot be compared".into(),
                );
            } else if let Some(d) = contract::divergence(&reference.content, &capture.content) {
                problem = Some(format!(
                    "output differs from its reference (alone, temperature 0) from character {}",
                    d.char_index
                ));
                divergence = Some(d);
            } else if !canary.begins_with_own && !reference.content.trim_start().starts_with(marker)
            {
                // The model did not write the marker alone either (a small
                // model's near-tie at the first token), and this answer is
                // byte for byte its own alone answer: that identity is
                // stronger than the marker. Foreign markers still fail it.
                canary.begins_with_own = true;
            }
            if problem.is_none()
                && let Some(k) = differing_call(&reference.tool_calls, &capture.tool_calls)
            {
                problem = Some(format!(
                    "tool call {k} differs from its reference's (alone, temperature 0)"
                ));
            }
        }
    }

    let (outcome, error) = if let Some(f) = &capture.failure {
        (f.class, Some(f.message.clone()))
    } else if !canary.passed() {
        let mut why = Vec::new();
        if !canary.begins_with_own {
            why.push(format!("answer does not begin with its marker {marker}"));
        }
        if !canary.foreign.is_empty() {
            let named: Vec<String> = canary
                .foreign
                .iter()
                .map(|m| match markers.origin(m) {
                    Some(o) => format!("{m} ({o})"),
                    None => m.clone(),
                })
                .collect();
            why.push(format!(
                "answer carries other requests' markers: {}",
                named.join(", ")
            ));
        }
        (Outcome::RequestCanaryFailed, Some(why.join("; ")))
    } else if let Some(p) = problem {
        (Outcome::ControlledOutputFailed, Some(p))
    } else {
        (Outcome::Ok, None)
    };
    // A client-side failure is not a judged answer: a divergence would only restate it.
    if capture.failure.is_some() {
        divergence = None;
    }

    let failure = (outcome != Outcome::Ok).then(|| TurnoverFailure {
        request_index: index,
        failure_class: outcome.as_str().to_string(),
        words,
        finish_reasons: capture.finish_reasons.clone(),
        canary_passed: canary.passed(),
        foreign_markers: canary.foreign.clone(),
        error: error.map(|e| bounded(&e, ERROR_CHARS)),
        output: (!capture.content.is_empty()).then(|| bounded(&capture.content, OUTPUT_CHARS)),
        divergence,
    });
    Judgement {
        outcome,
        received: capture.failure.is_none(),
        canary,
        failure,
    }
}

/// The run record from every request's judgement (any order).
///
/// `responses_received` counts requests whose response arrived complete and
/// valid: HTTP 2xx, no transport error, a stream the client validated (it
/// ended properly and carried no error object). Those are the answers that
/// could be judged, so `responses_received - exact_output_passed` failed a
/// canary or the contract. `performance_eligible` is always false: turnover
/// runs are never performance evidence.
pub fn summarize(
    spec: &TurnoverSpec,
    repeat: usize,
    judged: impl IntoIterator<Item = Judgement>,
) -> TurnoverRun {
    let mut run = TurnoverRun {
        name: spec.name.clone(),
        repeat,
        contract: spec.contract.as_str().to_string(),
        concurrency: spec.concurrency,
        requests: 0,
        exact_output_passed: 0,
        failed: 0,
        responses_received: 0,
        performance_eligible: false,
        contaminated: 0,
        failures: Vec::new(),
        references: Vec::new(),
        reference_tokens: Vec::new(),
        task_answers: String::new(),
        task_set_sha256: spec.task_set_sha256(),
        features: Default::default(),
        first_ttft_ms: None,
        later_ttft_p50_ms: None,
    };
    for j in judged {
        run.requests += 1;
        run.responses_received += usize::from(j.received);
        run.contaminated += usize::from(!j.canary.foreign.is_empty());
        match j.failure {
            None => run.exact_output_passed += 1,
            Some(f) => {
                run.failed += 1;
                run.failures.push(f);
            }
        }
    }
    run.failures.sort_by_key(|f| f.request_index);
    run
}

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

/// Run repeat `repeat` of `spec` against `client` and judge it.
///
/// For the `reference` contract every prompt first runs alone (concurrency 1,
/// temperature 0) to fix its reference text; those requests are journaled
/// under [`TurnoverSpec::reference_label`] and are not counted in the run.
/// Then the measured pass runs closed-loop at `spec.concurrency`, and each
/// request is journaled (with its final outcome) as it completes.
pub async fn run_turnover(
    client: &Client,
    spec: &TurnoverSpec,
    repeat: usize,
    mut journal: Option<&mut dyn FnMut(&RequestRecord)>,
) -> TurnoverRun {
    let plan = spec.plan(repeat);
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
            }
        };

    let references: Option<Vec<StreamCapture>> = match spec.contract {
        Contract::Words => None,
        Contract::Reference => {
            let bodies: Vec<Value> = plan
                .requests
                .iter()
                .map(|r| spec.reference_body(r))
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
        .map(|r| spec.request_body(r, spec.temperature))
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
    run.references = reference_texts(references.iter().flatten());
    run.reference_tokens = reference_tokens(references.iter().flatten());
    run.task_answers = spec.task_answers(references.iter().flatten());
    run.features = spec.feature_marks(references.iter().flatten());
    if spec.structured.is_some() || spec.tool_calling.is_some() {
        (run.first_ttft_ms, run.later_ttft_p50_ms) =
            first_and_later_ttft(references.iter().flatten());
    }
    run
}

/// The first tool call (by position) whose function or arguments differ,
/// a call missing on either side included; ids are the server's own and
/// are not compared.
fn differing_call(
    reference: &[crate::measure::record::ToolCall],
    answer: &[crate::measure::record::ToolCall],
) -> Option<usize> {
    (0..reference.len().max(answer.len())).find(|&k| {
        let (r, a) = (reference.get(k), answer.get(k));
        r.map(|c| (&c.name, &c.arguments)) != a.map(|c| (&c.name, &c.arguments))
    })
}

/// The texts `compare` holds against the other runtime's: None where the
/// reference failed or was cut at the capture cap (nothing exact to compare).
fn reference_texts<'a>(refs: impl IntoIterator<Item = &'a StreamCapture>) -> Vec<Option<String>> {
    refs.into_iter()
        .map(|r| (r.failure.is_none() && !r.truncated).then(|| r.content.clone()))
        .collect()
}

/// Each reference's per-token logprobs, where its text is kept and the
/// server sent them; empty when no reference has any (a server without
/// logprobs: `compare` then judges the texts exactly, and says so).
fn reference_tokens<'a>(
    refs: impl IntoIterator<Item = &'a StreamCapture>,
) -> Vec<Option<Vec<TokenLogprob>>> {
    let out: Vec<Option<Vec<TokenLogprob>>> = refs
        .into_iter()
        .map(|r| {
            (r.failure.is_none() && !r.truncated && !r.tokens.is_empty()).then(|| r.tokens.clone())
        })
        .collect();
    if out.iter().all(Option::is_none) {
        return Vec::new();
    }
    out
}

impl TurnoverSpec {
    /// Whether the prompt asks the answer to begin with its marker.
    pub fn asks_marker(&self) -> bool {
        self.prompt_style() != PromptStyle::Task
    }

    /// Task prompts: each reference answer scored against its item's key,
    /// `1` right, `0` wrong, `-` no answer (failed, or cut at the capture
    /// cap). Empty for other prompts, and for a workload that asks for a
    /// feature: its answers are JSON or tool calls, which the key's
    /// first-line reading cannot score (the feature's marks gate it).
    pub fn task_answers<'a>(&self, refs: impl IntoIterator<Item = &'a StreamCapture>) -> String {
        if self.prompt_style() != PromptStyle::Task
            || self.structured.is_some()
            || self.tool_calling.is_some()
        {
            return String::new();
        }
        refs.into_iter()
            .enumerate()
            .map(|(i, r)| match self.task_items.get(i) {
                Some(_) if r.failure.is_some() || r.truncated => '-',
                Some(item) if item.is_right(&r.content) => '1',
                Some(_) => '0',
                None => '-',
            })
            .collect()
    }

    /// Each feature the workload asked for, its marks over the reference
    /// answers ([`features`]); empty when it asked for none.
    pub fn feature_marks<'a>(
        &self,
        refs: impl IntoIterator<Item = &'a StreamCapture>,
    ) -> std::collections::BTreeMap<String, String> {
        let refs: Vec<&StreamCapture> = refs.into_iter().collect();
        let structured = self.structured.as_ref().map(|s| {
            let marks = refs.iter().map(|c| s.mark(c)).collect();
            (features::STRUCTURED_OUTPUT.to_string(), marks)
        });
        let tools = self.tool_calling.as_ref().map(|t| {
            let marks = refs.iter().map(|c| t.mark(c)).collect();
            (features::TOOL_CALL.to_string(), marks)
        });
        let functions = self.tool_calling.as_ref().map(|t| {
            let marks = refs.iter().map(|c| t.function_mark(c)).collect();
            (features::TOOL_FUNCTION.to_string(), marks)
        });
        let reasoning = self.reasoning.then(|| {
            let marks = refs.iter().map(|c| features::reasoning_mark(c)).collect();
            (features::REASONING.to_string(), marks)
        });
        structured
            .into_iter()
            .chain(tools)
            .chain(functions)
            .chain(reasoning)
            .collect()
    }

    /// Task prompts: the identity of the items asked (None for other prompts).
    pub fn task_set_sha256(&self) -> Option<String> {
        (self.prompt_style() == PromptStyle::Task).then(|| {
            let items: Vec<Value> = self.task_items.iter().map(|t| t.identity()).collect();
            crate::util::sha256_hex(Value::Array(items).to_string().as_bytes())
        })
    }

    /// Read the task file (a relative path from `dir`, the suite's folder)
    /// and check it has an item for every request.
    pub fn read_tasks(&mut self, dir: &std::path::Path) -> Result<()> {
        if let Some(f) = &self.response_format {
            let s = features::StructuredOutput::load(f, dir).context("field `response_format`")?;
            self.structured = Some(s);
        }
        if let Some(t) = &self.tools {
            let t = features::ToolCalling::load(t, dir).context("field `tools`")?;
            self.tool_calling = Some(t);
        }
        if let Some(g) = &self.generate {
            self.task_items = std::sync::Arc::new(g.items(self.requests, self.seed.unwrap_or(0)));
            return Ok(());
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
        self.task_items = std::sync::Arc::new(items);
        Ok(())
    }

    /// Repeat `repeat` rebuilt from a journal that holds all of it (its
    /// `requests` records once each and, for the `reference` contract, its
    /// reference pass likewise), judged again from the captured streams —
    /// judging is deterministic, so this is the run as it was. `None` when
    /// anything is missing or doubled (a repeat re-run after an interruption
    /// leaves extra records): then the repeat must run again, whole.
    pub fn from_journal(&self, repeat: usize, records: &[RequestRecord]) -> Option<TurnoverRun> {
        let complete = |label: &str| -> Option<Vec<&StreamCapture>> {
            let mut caps: Vec<Option<&StreamCapture>> = vec![None; self.requests];
            let mut seen = 0;
            for r in records.iter().filter(|r| r.cell == label) {
                seen += 1;
                let slot = caps.get_mut(r.index)?;
                if slot.replace(&r.capture).is_some() {
                    return None;
                }
            }
            (seen == self.requests).then_some(())?;
            caps.into_iter().collect()
        };
        let measured = complete(&self.cell_label(repeat))?;
        let references = match self.contract {
            Contract::Words => None,
            Contract::Reference => Some(complete(&self.reference_label(repeat))?),
        };
        let plan = self.plan(repeat);
        let judged = measured.iter().enumerate().map(|(i, cap)| {
            let expected = match (&references, &plan.requests[i].code_word) {
                (Some(refs), _) => Expected::Reference(refs[i]),
                (None, w) => Expected::Words {
                    code_word: w.as_deref().unwrap_or(""),
                    n: self.words,
                },
            };
            judge_with(&plan.markers, i, cap, expected, self.asks_marker())
        });
        let mut run = summarize(self, repeat, judged);
        run.references = reference_texts(references.iter().flatten().copied());
        run.reference_tokens = reference_tokens(references.iter().flatten().copied());
        run.task_answers = self.task_answers(references.iter().flatten().copied());
        run.features = self.feature_marks(references.iter().flatten().copied());
        Some(run)
    }
}

#[cfg(test)]
mod tests;
