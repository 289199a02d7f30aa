//! A turnover workload compiled for a run: its declaration, its task items
//! (read from the task file, or generated from the seed), and every marker
//! the suite issues, from which each repeat's prompts and bodies are fixed
//! before the first request.

use std::sync::Arc;

use serde_json::Value;

use super::canary::{self, IssuedMarkers, MarkerSet};
use super::judge::{Expected, judge_with, summarize};
use super::{generate, prompt};
use crate::artifact::TurnoverRun;
use crate::config::tasks::TaskItem;
use crate::config::turnover::{Contract, PromptStyle, TurnoverSpec};
use crate::measure::client::chat_body;
use crate::measure::features;
use crate::measure::record::{RequestRecord, StreamCapture};
use crate::report::agreement::TokenLogprob;

/// A `[[turnover]]` workload ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnoverWorkload {
    pub spec: TurnoverSpec,
    /// The items a task prompt asks, request i item i: the task file's, or
    /// generated from the seed.
    pub task_items: Arc<Vec<TaskItem>>,
    /// Every marker of the qualification: a leak from another workload (or
    /// an earlier pass of this one) is contamination too.
    pub issued: IssuedMarkers,
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

impl TurnoverWorkload {
    /// `spec` run on its own: the markers it issues are its own.
    pub fn alone(spec: TurnoverSpec) -> TurnoverWorkload {
        let issued = IssuedMarkers::of_workloads([marker_workload(&spec)]);
        TurnoverWorkload::with_markers(spec, issued)
    }

    /// Every workload of a suite, each judged against the markers of all of them.
    pub fn of_suite(specs: &[TurnoverSpec]) -> Vec<TurnoverWorkload> {
        let issued = IssuedMarkers::of_workloads(specs.iter().map(marker_workload));
        specs
            .iter()
            .map(|s| TurnoverWorkload::with_markers(s.clone(), issued.clone()))
            .collect()
    }

    fn with_markers(spec: TurnoverSpec, issued: IssuedMarkers) -> TurnoverWorkload {
        let task_items = match &spec.generate {
            Some(g) => Arc::new(generate::items(g, spec.requests, spec.seed.unwrap_or(0))),
            None => spec.task_file_items.clone(),
        };
        TurnoverWorkload {
            spec,
            task_items,
            issued,
        }
    }

    /// The prompts of repeat `repeat`. Markers depend on the name, the seed
    /// and the repeat only, so two runtimes are sent identical requests.
    pub fn plan(&self, repeat: usize) -> RunPlan {
        let markers = MarkerSet::for_run(marker_key(&self.spec), repeat, self.spec.requests)
            .with_issued(self.issued.clone());
        let shots = self.spec.shots();
        let requests = (0..self.spec.requests)
            .map(|index| {
                // for_run made exactly `requests` markers.
                let marker = markers.get(index).unwrap_or_default().to_string();
                let (code_word, messages) = match self.spec.prompt_style() {
                    PromptStyle::Words => {
                        let w = &self.spec.code_words[index % self.spec.code_words.len()];
                        (
                            Some(w.clone()),
                            prompt::words_messages(&marker, w, self.spec.words, shots),
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
            && self.spec.top_logprobs > 0
            && !self.spec.extra.contains_key("logprobs")
            && self.spec.tool_calling.is_none()
        {
            o.insert("logprobs".into(), Value::Bool(true));
            o.insert("top_logprobs".into(), Value::from(self.spec.top_logprobs));
        }
        body
    }

    pub fn request_body(&self, req: &PlannedRequest, temperature: f64) -> Value {
        let mut extra = self.spec.extra.clone();
        if let Some(m) = &self.spec.model {
            extra.insert("model".into(), Value::from(m.as_str()));
        }
        if let Some(s) = &self.spec.structured {
            extra.insert("response_format".into(), s.body_field());
        }
        if let Some(t) = &self.spec.tool_calling {
            for (field, value) in t.body_fields() {
                extra.insert(field.into(), value);
            }
        }
        chat_body(
            req.messages.clone(),
            self.spec.max_tokens(),
            temperature,
            self.spec.seed,
            extra,
        )
    }

    /// What the run record keeps of the reference pass (`refs`, in request
    /// order; none for the words contract): the texts and per-token
    /// logprobs `compare` holds against the other runtime's, the task
    /// answers scored, each feature's marks, and the task set's identity.
    pub fn keep_references<'a>(
        &self,
        run: &mut TurnoverRun,
        refs: impl IntoIterator<Item = &'a StreamCapture>,
    ) {
        let refs: Vec<&StreamCapture> = refs.into_iter().collect();
        run.references = reference_texts(refs.iter().copied());
        run.reference_tokens = reference_tokens(refs.iter().copied());
        run.task_answers = self.task_answers(refs.iter().copied());
        run.features = self.feature_marks(refs.iter().copied());
        run.task_set_sha256 = self.task_set_sha256();
    }

    /// Task prompts: each reference answer scored against its item's key,
    /// `1` right, `0` wrong, `-` no answer (failed, or cut at the capture
    /// cap). Empty for other prompts, and for a workload that asks for a
    /// feature: its answers are JSON or tool calls, which the key's
    /// first-line reading cannot score (the feature's marks gate it).
    pub fn task_answers<'a>(&self, refs: impl IntoIterator<Item = &'a StreamCapture>) -> String {
        if self.spec.prompt_style() != PromptStyle::Task
            || self.spec.structured.is_some()
            || self.spec.tool_calling.is_some()
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
        let structured = self.spec.structured.as_ref().map(|s| {
            let marks = refs
                .iter()
                .map(|c| features::structured_mark(s, c))
                .collect();
            (features::STRUCTURED_OUTPUT.to_string(), marks)
        });
        let tools = self.spec.tool_calling.as_ref().map(|t| {
            let marks = refs
                .iter()
                .map(|c| features::tool_call_mark(t, c))
                .collect();
            (features::TOOL_CALL.to_string(), marks)
        });
        let functions = self.spec.tool_calling.as_ref().map(|t| {
            let marks = refs
                .iter()
                .map(|c| features::tool_function_mark(t, c))
                .collect();
            (features::TOOL_FUNCTION.to_string(), marks)
        });
        let reasoning = self.spec.reasoning.then(|| {
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
        (self.spec.prompt_style() == PromptStyle::Task).then(|| {
            let items: Vec<Value> = self.task_items.iter().map(|t| t.identity()).collect();
            crate::util::sha256_hex(Value::Array(items).to_string().as_bytes())
        })
    }

    /// Repeat `repeat` rebuilt from a journal that holds all of it (its
    /// `requests` records once each and, for the `reference` contract, its
    /// reference pass likewise), judged again from the captured streams —
    /// judging is deterministic, so this is the run as it was. `None` when
    /// anything is missing or doubled (a repeat re-run after an interruption
    /// leaves extra records): then the repeat must run again, whole.
    pub fn from_journal(&self, repeat: usize, records: &[RequestRecord]) -> Option<TurnoverRun> {
        let complete = |label: &str| -> Option<Vec<&StreamCapture>> {
            let mut caps: Vec<Option<&StreamCapture>> = vec![None; self.spec.requests];
            let mut seen = 0;
            for r in records.iter().filter(|r| r.cell == label) {
                seen += 1;
                let slot = caps.get_mut(r.index)?;
                if slot.replace(&r.capture).is_some() {
                    return None;
                }
            }
            (seen == self.spec.requests).then_some(())?;
            caps.into_iter().collect()
        };
        let measured = complete(&self.spec.cell_label(repeat))?;
        let references = match self.spec.contract {
            Contract::Words => None,
            Contract::Reference => Some(complete(&self.spec.reference_label(repeat))?),
        };
        let plan = self.plan(repeat);
        let judged = measured.iter().enumerate().map(|(i, cap)| {
            let expected = match (&references, &plan.requests[i].code_word) {
                (Some(refs), _) => Expected::Reference(refs[i]),
                (None, w) => Expected::Words {
                    code_word: w.as_deref().unwrap_or(""),
                    n: self.spec.words,
                },
            };
            judge_with(&plan.markers, i, cap, expected, self.spec.asks_marker())
        });
        let mut run = summarize(&self.spec, repeat, judged);
        self.keep_references(&mut run, references.iter().flatten().copied());
        Some(run)
    }
}

/// Which markers a workload gets: decided by its name and seed.
fn marker_key(spec: &TurnoverSpec) -> u64 {
    canary::marker_key(&spec.name, spec.seed.unwrap_or(0))
}

fn marker_workload(spec: &TurnoverSpec) -> (&str, u64, usize, usize) {
    (&spec.name, marker_key(spec), spec.requests, spec.repeats)
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
pub(super) fn reference_tokens<'a>(
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
