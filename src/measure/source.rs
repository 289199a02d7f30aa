//! What each request of a workload cell sends (`config::workload`): its
//! messages, output cap, prompt-token target and conversation turn, as a pure
//! function of the cell, the side's nonce, the sizing and the request index.
//!
//! Request `k` is built the same way on both sides: the same lengths, the
//! same structure (groups, sessions, turns, trace blocks) and the same
//! filler words. Only the short tags that keep one side's prompts out of the
//! other's prompt cache differ (a hex hash of the side's nonce, first in the
//! prompt), so an A/A run on one server is not a cache hit across sides.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::dataset::{Dataset, Message};
use crate::config::suite::CellSpec;
use crate::config::workload::{Distribution, History, WorkloadSpec};
use crate::measure::workload::{
    INSTRUCTION, Probe, SizedBody, cell_seed, push_filler, unique_prefix, user_content,
};

/// One planned request.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The chat `messages` array.
    pub messages: Value,
    pub max_tokens: u64,
    /// Prompt tokens aimed for, where the workload states one.
    pub target_prompt_tokens: Option<u64>,
    /// Conversation turn (0 = first).
    pub turn: Option<u32>,
    /// True when the request's whole prompt is meant to be unique (beyond
    /// the chat template): a cache hit there is a flaw of the measurement.
    pub unique: bool,
}

/// A workload cell's requests.
pub struct Source {
    cell: CellSpec,
    nonce: String,
    tokens_per_word: f64,
    overhead: u64,
    probe: Option<Probe>,
    /// ShareGPT sessions: the conversations with enough turns, in file order.
    eligible: Vec<usize>,
    /// `history = "own"`: each session's answers so far, by (session, turn).
    answers: Arc<Mutex<BTreeMap<(usize, u32), OwnAnswer>>>,
}

impl Source {
    /// `sized` gives the filler's tokens per word and the fixed overhead of a
    /// user message (template, prefix, instruction).
    pub fn new(cell: &CellSpec, nonce: &str, sized: &SizedBody) -> Source {
        let eligible = match (&cell.workload, cell.dataset.as_deref()) {
            (Some(WorkloadSpec::Sharegpt { turns, .. }), Some(Dataset::Conversations(c))) => c
                .iter()
                .enumerate()
                .filter(|(_, c)| c.turns.len() >= *turns as usize)
                .map(|(i, _)| i)
                .collect(),
            _ => Vec::new(),
        };
        Source {
            cell: cell.clone(),
            nonce: nonce.to_string(),
            tokens_per_word: sized.tokens_per_word(),
            overhead: sized.overhead(),
            probe: sized.workload_probe,
            eligible,
            answers: Arc::default(),
        }
    }

    fn spec(&self) -> &WorkloadSpec {
        self.cell
            .workload
            .as_ref()
            .expect("a Source is made for workload cells only")
    }

    /// Does this workload need a filler sizing (tokens per word)?
    pub fn needs_sizing(cell: &CellSpec) -> bool {
        !matches!(
            cell.workload,
            Some(WorkloadSpec::Sharegpt { .. } | WorkloadSpec::Openai { .. })
        )
    }

    /// The requests the probe sends (with a nonce of its own, so nothing it
    /// sends is a prefix of a measured request): request 0, and for
    /// conversations request 1 (turn 1 of the first session).
    pub fn probe_plans(&self) -> Vec<Planned> {
        match self.spec() {
            WorkloadSpec::Spread { .. } | WorkloadSpec::SharedPrefix { .. } => vec![self.plan(0)],
            WorkloadSpec::Conversation { turns, .. } if *turns > 1 => {
                vec![self.plan(0), self.plan(1)]
            }
            WorkloadSpec::Conversation { .. } => vec![self.plan(0)],
            _ => Vec::new(),
        }
    }

    pub fn with_probe(mut self, probe: Option<Probe>) -> Source {
        self.probe = probe;
        self
    }

    /// Words of filler for `tokens` tokens (at least one).
    fn words(&self, tokens: i64) -> usize {
        ((tokens.max(1) as f64) / self.tokens_per_word)
            .round()
            .max(1.0) as usize
    }

    fn adjust(&self) -> i64 {
        self.probe.map_or(0, |p| p.adjust())
    }

    fn seed(&self, parts: &[u64]) -> u64 {
        let mut h = cell_seed(&self.cell);
        for p in parts {
            h = splitmix(h ^ p.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        }
        h
    }

    /// A tag naming this side's cell (and a part of it): first in the
    /// prompt, so the two sides never share a cached prefix.
    fn tag(&self, what: &str) -> String {
        let p = unique_prefix(&self.nonce, &self.cell.name, what);
        // The hex and the readable rest up to `request`: short, and unique.
        p.split(" request").next().unwrap_or(&p).to_string() + &format!(" {what}]")
    }

    fn text(&self, tokens: i64, seed: u64) -> String {
        let mut s = String::new();
        push_filler(&mut s, self.words(tokens), seed);
        s
    }

    /// Request `index` of the cell.
    pub fn plan(&self, index: usize) -> Planned {
        match self.spec() {
            WorkloadSpec::Spread {
                prompt_tokens,
                max_tokens,
            } => self.spread_request(index, prompt_tokens, max_tokens.as_ref()),
            WorkloadSpec::SharedPrefix {
                groups,
                prefix_tokens,
            } => self.shared_prefix_request(index, *groups, *prefix_tokens),
            WorkloadSpec::Conversation {
                turns,
                turn_tokens,
                answer_tokens,
                history,
                ..
            } => self.conversation_turn(index, *turns, *turn_tokens, *answer_tokens, *history),
            WorkloadSpec::Sharegpt { turns, .. } => self.sharegpt_turn(index, *turns),
            WorkloadSpec::Openai { .. } => self.openai_request(index),
            WorkloadSpec::Trace { block_tokens, .. } => self.trace_request(index, *block_tokens),
        }
    }

    /// `spread`: a unique prompt and an output cap, each drawn from its
    /// distribution by the request's own seed.
    fn spread_request(
        &self,
        index: usize,
        prompt_tokens: &Distribution,
        max_tokens: Option<&Distribution>,
    ) -> Planned {
        let cell = &self.cell;
        let draw = |d: &Distribution, field: u64| {
            let s = self.seed(&[index as u64, field]);
            d.draw(unit(s), unit(splitmix(s)))
        };
        let target = draw(prompt_tokens, 1);
        let body_tokens = target as i64 - self.overhead as i64 - self.adjust();
        let content = user_content(
            &unique_prefix(&self.nonce, &cell.name, &index.to_string()),
            &self.text(body_tokens, self.seed(&[index as u64, 3])),
        );
        Planned {
            messages: json!([{"role": "user", "content": content}]),
            max_tokens: max_tokens.map_or(cell.max_tokens, |d| draw(d, 2)),
            target_prompt_tokens: Some(target),
            turn: None,
            unique: true,
        }
    }

    /// `shared_prefix`: the group's system prompt (the same for every
    /// request of the group), then a unique user message.
    fn shared_prefix_request(&self, index: usize, groups: u32, prefix_tokens: u64) -> Planned {
        let cell = &self.cell;
        let g = (index % groups as usize) as u64;
        let system = format!(
            "{}\n{}",
            self.tag(&format!("group {g}")),
            self.text(prefix_tokens as i64, self.seed(&[u64::MAX, g]))
        );
        let rest =
            cell.prompt_tokens as i64 - prefix_tokens as i64 - self.overhead as i64 - self.adjust();
        let user = user_content(
            &unique_prefix(&self.nonce, &cell.name, &index.to_string()),
            &self.text(rest, self.seed(&[index as u64])),
        );
        Planned {
            messages: json!([
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ]),
            max_tokens: cell.max_tokens,
            target_prompt_tokens: Some(cell.prompt_tokens),
            turn: None,
            unique: false,
        }
    }

    /// `openai`: the dataset's request lines in turn, tagged, their output
    /// cap within the cell's.
    fn openai_request(&self, index: usize) -> Planned {
        let cell = &self.cell;
        let Some(Dataset::Requests(r)) = cell.dataset.as_deref() else {
            unreachable!("Suite::load reads an openai cell's dataset")
        };
        let req = &r[index % r.len()];
        Planned {
            messages: self.tagged(None, &req.messages),
            max_tokens: req
                .max_tokens
                .map_or(cell.max_tokens, |m| m.min(cell.max_tokens)),
            target_prompt_tokens: None,
            turn: None,
            unique: false,
        }
    }

    /// `trace`: the trace line's input length as blocks of filler, a block
    /// with a hash id the same text wherever that id appears.
    fn trace_request(&self, index: usize, block_tokens: u64) -> Planned {
        let cell = &self.cell;
        let Some(Dataset::Trace(t)) = cell.dataset.as_deref() else {
            unreachable!("Suite::load reads a trace cell's dataset")
        };
        let e = &t[index % t.len()];
        let b = block_tokens;
        let blocks = e.input_length.div_ceil(b);
        let mut content = self.tag("trace");
        // The template around the text is where a real prompt's first
        // tokens are, so it takes the place of the first blocks' filler:
        // the same cut at the same position in every prompt keeps equal ids
        // equal text, and a prompt of small blocks still totals its length.
        let mut overhead = self.overhead as i64 + self.adjust();
        for j in 0..blocks {
            let mut tokens = b.min(e.input_length - j * b) as i64;
            let cut = tokens.min(overhead);
            tokens -= cut;
            overhead -= cut;
            // A block with a hash id is the same text wherever that
            // id appears: the trace's prefix sharing, reproduced.
            let seed = match e.hash_ids.get(j as usize) {
                Some(h) => self.seed(&[u64::MAX - 1, *h]),
                None => self.seed(&[index as u64, j]),
            };
            content.push('\n');
            push_filler(&mut content, self.words(tokens), seed);
        }
        content.push_str("\n\n");
        content.push_str(INSTRUCTION);
        Planned {
            messages: json!([{"role": "user", "content": content}]),
            max_tokens: e.output_length.min(cell.max_tokens),
            target_prompt_tokens: Some(e.input_length),
            turn: None,
            unique: false,
        }
    }

    fn conversation_turn(
        &self,
        index: usize,
        turns: u32,
        turn_tokens: u64,
        answer_tokens: Option<u64>,
        history: History,
    ) -> Planned {
        let cell = &self.cell;
        let (s, t) = (index / turns as usize, (index % turns as usize) as u32);
        let first = cell.prompt_tokens as i64 - self.overhead as i64 - self.adjust();
        let answer = answer_tokens.unwrap_or(cell.max_tokens) as i64;
        let user = |k: u32| -> String {
            if k == 0 {
                user_content(
                    &unique_prefix(&self.nonce, &cell.name, &format!("session {s}")),
                    &self.text(first, self.seed(&[s as u64, 0])),
                )
            } else {
                format!(
                    "{}\n\n{INSTRUCTION}",
                    self.text(turn_tokens as i64, self.seed(&[s as u64, u64::from(k)]))
                )
            }
        };
        let own = self.answers.lock().map(|a| a.clone()).unwrap_or_default();
        let mut messages = Vec::with_capacity(2 * t as usize + 1);
        for k in 0..t {
            messages.push(json!({"role": "user", "content": user(k)}));
            match history {
                History::Own => {
                    let a = own.get(&(s, k)).cloned().unwrap_or_default();
                    messages.extend(a.messages());
                }
                History::Recorded => {
                    let a = self.text(answer, self.seed(&[s as u64, u64::from(k), u64::MAX]));
                    messages.push(json!({"role": "assistant", "content": a}));
                }
            }
        }
        messages.push(json!({"role": "user", "content": user(t)}));
        let target = match (history, self.probe.and_then(|p| p.turn_step)) {
            (_, _) if t == 0 => Some(cell.prompt_tokens),
            (History::Recorded, Some(step)) => Some(cell.prompt_tokens + u64::from(t) * step),
            // Own answers differ by side and by run: no length is promised.
            _ => None,
        };
        Planned {
            messages: Value::Array(messages),
            max_tokens: cell.max_tokens,
            target_prompt_tokens: target,
            turn: Some(t),
            unique: false,
        }
    }

    fn sharegpt_turn(&self, index: usize, turns: u32) -> Planned {
        let Some(Dataset::Conversations(all)) = self.cell.dataset.as_deref() else {
            unreachable!("Suite::load reads a sharegpt cell's dataset")
        };
        let t = turns.max(1) as usize;
        let (s, k) = (index / t, index % t);
        let conv = &all[self.eligible[s % self.eligible.len().max(1)]];
        let mut msgs = Vec::with_capacity(2 * k + 1);
        for (u, a) in conv.turns.iter().take(k) {
            msgs.push(Message {
                role: crate::config::dataset::Role::User,
                content: u.clone(),
            });
            msgs.push(Message {
                role: crate::config::dataset::Role::Assistant,
                content: a.clone(),
            });
        }
        msgs.push(Message {
            role: crate::config::dataset::Role::User,
            content: conv.turns[k].0.clone(),
        });
        Planned {
            messages: self.tagged(conv.system.as_deref(), &msgs),
            max_tokens: self.cell.max_tokens,
            target_prompt_tokens: None,
            turn: (turns > 1).then_some(k as u32),
            unique: false,
        }
    }

    /// A dataset's messages, the side's tag leading the first one (so the
    /// dataset's own sharing holds within a side, never across sides).
    fn tagged(&self, system: Option<&str>, msgs: &[Message]) -> Value {
        let tag = self.tag("data");
        let mut out = Vec::with_capacity(msgs.len() + 1);
        let mut first = true;
        let mut push = |role: &str, content: &str| {
            let content = if first {
                first = false;
                format!("{tag}\n{content}")
            } else {
                content.to_string()
            };
            out.push(json!({"role": role, "content": content}));
        };
        if let Some(s) = system {
            push("system", s);
        }
        for m in msgs {
            push(m.role.as_str(), &m.content);
        }
        Value::Array(out)
    }

    /// Sessions to send in order (conversation kinds), from the requests to do.
    pub fn sessions(&self, todo: &[usize]) -> Option<Vec<Vec<usize>>> {
        let t = self.spec().turns()? as usize;
        let mut out: Vec<Vec<usize>> = Vec::new();
        for &i in todo {
            match out.last_mut() {
                Some(s) if s.last().is_some_and(|&j| j / t == i / t) => s.push(i),
                _ => out.push(vec![i]),
            }
        }
        Some(out)
    }

    /// A trace's send offsets for these requests, from the first of them.
    pub fn offsets(&self, todo: &[usize]) -> Option<Vec<Duration>> {
        let WorkloadSpec::Trace { speed, .. } = self.spec() else {
            return None;
        };
        let Some(Dataset::Trace(t)) = self.cell.dataset.as_deref() else {
            return None;
        };
        let at = |i: usize| t[i % t.len()].timestamp_ms;
        let t0 = todo.first().map_or(0, |&i| at(i));
        Some(
            todo.iter()
                .map(|&i| {
                    crate::measure::loadgen::send_offset(
                        at(i).saturating_sub(t0) as f64 / 1000.0 / speed,
                    )
                })
                .collect(),
        )
    }

    /// `history = "own"`: keep a finished turn's answer (its text and its
    /// tool calls) for the next turn.
    pub fn record_answer(&self, index: usize, cap: &crate::measure::record::StreamCapture) {
        let Some(WorkloadSpec::Conversation {
            turns,
            history: History::Own,
            ..
        }) = &self.cell.workload
        else {
            return;
        };
        let t = *turns as usize;
        if let Ok(mut a) = self.answers.lock() {
            let answer = OwnAnswer {
                content: cap.content.clone(),
                calls: cap.tool_calls.clone(),
            };
            a.insert((index / t, (index % t) as u32), answer);
        }
    }

    pub fn think(&self) -> Duration {
        Duration::from_millis(self.spec().think_ms())
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// What a session's turn answered, for the next turn's history.
#[derive(Debug, Clone, Default)]
struct OwnAnswer {
    content: String,
    calls: Vec<crate::measure::record::ToolCall>,
}

/// What a tool answers in a conversation: the same for every call, so
/// both runtimes see the same history after the same calls.
pub const TOOL_RESULT: &str = "{\"ok\": true}";

impl OwnAnswer {
    /// The assistant's message, and after a tool call each call's result
    /// as a `tool` message (OpenAI's shapes), as a client that runs the
    /// tools would send them back.
    fn messages(&self) -> Vec<Value> {
        if self.calls.is_empty() {
            return vec![json!({"role": "assistant", "content": self.content})];
        }
        let id = |i: usize, c: &crate::measure::record::ToolCall| {
            c.id.clone().unwrap_or_else(|| format!("call_{i}"))
        };
        let calls: Vec<Value> = self
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({"id": id(i, c), "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let content = (!self.content.is_empty()).then(|| self.content.clone());
        let mut out = vec![json!({"role": "assistant", "content": content, "tool_calls": calls})];
        out.extend(self.calls.iter().enumerate().map(
            |(i, c)| json!({"role": "tool", "tool_call_id": id(i, c), "content": TOOL_RESULT}),
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::suite::Suite;

    fn cell(workload: &str, extra: &str) -> CellSpec {
        let text = format!(
            "name = \"t\"\n[[cell]]\nname = \"w\"\nprompt_tokens = 300\nmax_tokens = 16\nrequests = 12\n{extra}workload = {workload}\n"
        );
        Suite::parse(&text, "t.toml").unwrap().cells.remove(0)
    }

    fn sized() -> SizedBody {
        SizedBody {
            words: 100,
            body: String::new(),
            measured_prompt_tokens: 180,
            method: "test".into(),
            template_prompt_tokens: Some(10),
            overhead_prompt_tokens: Some(30),
            workload_probe: None,
        }
    }

    fn content(m: &Value, i: usize) -> &str {
        m[i]["content"].as_str().unwrap()
    }

    #[test]
    fn groups_share_their_system_prompt_and_nothing_else() {
        let c = cell(
            "{ kind = \"shared_prefix\", groups = 3, prefix_tokens = 200 }",
            "",
        );
        let s = Source::new(&c, "n1", &sized());
        let (a, b, d) = (s.plan(0), s.plan(3), s.plan(1));
        assert_eq!(content(&a.messages, 0), content(&b.messages, 0));
        assert_ne!(content(&a.messages, 0), content(&d.messages, 0));
        assert_ne!(content(&a.messages, 1), content(&b.messages, 1));
        // 200 tokens at 1.5 tokens per word: about 133 words.
        let words = content(&a.messages, 0).split_whitespace().count();
        assert!((130..=140).contains(&words), "{words}");
        // The other side: same structure, no shared prefix.
        let other = Source::new(&c, "n2", &sized()).plan(0);
        assert_ne!(
            content(&a.messages, 0)[..10],
            content(&other.messages, 0)[..10]
        );
        assert_eq!(
            content(&a.messages, 0).split_whitespace().count(),
            content(&other.messages, 0).split_whitespace().count()
        );
    }

    #[test]
    fn a_conversation_turn_extends_the_one_before() {
        let c = cell(
            "{ kind = \"conversation\", turns = 3, turn_tokens = 60, answer_tokens = 30 }",
            "",
        );
        let probe = Probe {
            planned: 300,
            measured: 304,
            turn_step: Some(97),
        };
        let s = Source::new(&c, "n", &sized()).with_probe(Some(probe));
        let plans: Vec<Planned> = (0..6).map(|i| s.plan(i)).collect();
        for t in 1..3 {
            let (prev, next) = (
                plans[t - 1].messages.as_array().unwrap(),
                plans[t].messages.as_array().unwrap(),
            );
            assert_eq!(next.len(), prev.len() + 2);
            assert_eq!(
                &next[..prev.len()],
                &prev[..],
                "turn {t} carries turn {}'s prompt",
                t - 1
            );
            assert_eq!(next[prev.len()]["role"], "assistant");
        }
        assert_eq!(
            plans.iter().map(|p| p.turn).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2].map(Some)
        );
        assert_eq!(plans[2].target_prompt_tokens, Some(300 + 2 * 97));
        // Session 1 starts afresh, from its first token.
        assert_ne!(
            content(&plans[3].messages, 0)[..9],
            content(&plans[0].messages, 0)[..9]
        );
        assert_eq!(
            s.sessions(&[0, 1, 2, 3, 4, 5]).unwrap(),
            vec![vec![0, 1, 2], vec![3, 4, 5]]
        );
    }

    #[test]
    fn own_history_carries_the_answers_given() {
        let c = cell(
            "{ kind = \"conversation\", turns = 2, turn_tokens = 20, history = \"own\" }",
            "",
        );
        let s = Source::new(&c, "n", &sized());
        s.record_answer(
            0,
            &crate::measure::record::StreamCapture {
                content: "my own answer".into(),
                ..Default::default()
            },
        );
        let p = s.plan(1);
        assert_eq!(content(&p.messages, 1), "my own answer");
        assert_eq!(p.target_prompt_tokens, None);
    }

    /// A turn that called tools is followed, in the next turn's history,
    /// by its calls and each call's result, as a client running the tools
    /// would send them.
    #[test]
    fn own_history_feeds_each_tool_call_its_result() {
        use crate::measure::record::{StreamCapture, ToolCall};
        let c = cell(
            "{ kind = \"conversation\", turns = 3, turn_tokens = 20, history = \"own\" }",
            "",
        );
        let s = Source::new(&c, "n", &sized());
        let call = |id: Option<&str>, name: &str| ToolCall {
            id: id.map(str::to_string),
            name: name.into(),
            arguments: "{\"answer\": 1}".into(),
        };
        s.record_answer(
            0,
            &StreamCapture {
                tool_calls: vec![
                    call(Some("call_a"), "submit_answer"),
                    call(None, "ask_again"),
                ],
                ..Default::default()
            },
        );
        s.record_answer(
            1,
            &StreamCapture {
                content: "done".into(),
                ..Default::default()
            },
        );
        let m = s.plan(2).messages;
        let roles: Vec<&str> = m
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "tool",
                "user",
                "assistant",
                "user"
            ]
        );
        assert_eq!(m[1]["content"], serde_json::Value::Null);
        assert_eq!(m[1]["tool_calls"][0]["id"], "call_a");
        assert_eq!(m[1]["tool_calls"][1]["function"]["name"], "ask_again");
        assert_eq!(
            m[1]["tool_calls"][1]["function"]["arguments"],
            "{\"answer\": 1}"
        );
        assert_eq!(
            (m[2]["tool_call_id"].as_str(), m[3]["tool_call_id"].as_str()),
            (Some("call_a"), Some("call_1"))
        );
        assert_eq!(m[2]["content"], TOOL_RESULT);
        assert_eq!(m[5]["content"], "done");
    }

    #[test]
    fn spread_draws_per_request_and_identically_on_both_sides() {
        let c = cell(
            "{ kind = \"spread\", prompt_tokens = { dist = \"uniform\", min = 100, max = 900 }, max_tokens = { dist = \"uniform\", min = 4, max = 16 } }",
            "",
        );
        let (a, b) = (
            Source::new(&c, "a", &sized()),
            Source::new(&c, "b", &sized()),
        );
        let targets: Vec<u64> = (0..12)
            .map(|i| a.plan(i).target_prompt_tokens.unwrap())
            .collect();
        assert!(targets.iter().all(|t| (100..=900).contains(t)));
        assert!(
            targets.iter().max().unwrap() - targets.iter().min().unwrap() > 200,
            "{targets:?}"
        );
        for i in 0..12 {
            let (x, y) = (a.plan(i), b.plan(i));
            assert_eq!(
                (x.target_prompt_tokens, x.max_tokens),
                (y.target_prompt_tokens, y.max_tokens)
            );
            assert!((4..=16).contains(&x.max_tokens));
        }
    }
}
