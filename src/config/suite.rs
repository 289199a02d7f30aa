//! Workload suites: named cells read from a TOML file.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::artifact::{CellShape, Expect, Slo};
use crate::config::dataset::{self, Dataset};
use crate::config::embeddings::EmbeddingSpec;
use crate::config::turnover::TurnoverSpec;
use crate::config::workload::WorkloadSpec;
use crate::report::capacity::{CapacitySpec, LoadAxis};

#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    pub name: String,
    pub description: String,
    pub cells: Vec<CellSpec>,
    /// Turnover workloads, each checked when the suite is parsed.
    pub turnover: Vec<TurnoverSpec>,
    /// The model's Hugging Face `tokenizer.json`, for sizing prompts; a
    /// relative path is relative to the suite file (resolved by `load`).
    pub tokenizer: Option<std::path::PathBuf>,
    /// Inputs embedded on each side and compared across runtimes.
    pub embeddings: Vec<EmbeddingSpec>,
}

/// A suite file as TOML gives it: turnover tables are parsed apart, so each
/// error can name its table's line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default, rename = "cell")]
    cells: Vec<CellSpec>,
    #[serde(default)]
    turnover: Vec<toml::Table>,
    #[serde(default)]
    tokenizer: Option<std::path::PathBuf>,
    #[serde(default)]
    embeddings: Vec<EmbeddingSpec>,
}

/// Cache policy: every request gets a unique prefix (cold prefill), or all share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePolicy {
    Unique,
    Shared,
}

/// Serialize writes a cell back as TOML (`config::adhoc`'s suite file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    pub name: String,
    /// The prompt-token target (for `conversation`, the first turn's; for a
    /// dataset or trace, unused and may be left out).
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default = "default_tolerance")]
    pub tolerance_percent: f64,
    pub max_tokens: u64,
    #[serde(default = "one")]
    pub concurrency: usize,
    pub requests: usize,
    #[serde(default)]
    pub warmup: usize,
    #[serde(default = "unique")]
    pub cache: CachePolicy,
    /// "closed" (default), "constant:<req/s>" or "poisson:<req/s>".
    #[serde(default = "closed")]
    pub arrival: String,
    #[serde(default)]
    pub temperature: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// "fixed" (default): ask the server for exactly `max_tokens` in its
    /// dialect, so both sides decode the same length; "free": let it stop.
    #[serde(default)]
    pub output: OutputPolicy,
    /// Which OpenAI endpoint the cell measures: `chat` (default,
    /// `/v1/chat/completions`) or `completions` (`/v1/completions`, the
    /// prompt sent as text with no chat template).
    #[serde(default, skip_serializing_if = "CellEndpoint::is_chat")]
    pub endpoint: CellEndpoint,
    /// Extra body fields sent with every request (e.g. `cache_prompt = false`).
    /// May not set the fields infergate's measurement depends on (`RESERVED_BODY_KEYS`).
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub extra: toml::Table,
    /// Service-level objectives (`{ ttft_ms = 1500, tpot_ms = 80 }`, any
    /// subset, and `min_attainment`): the run reports attainment and goodput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// What the server must report doing in this cell (`{ cached_share_min
    /// = 0.5, spec_acceptance_min = 0.3 }`): a side whose own numbers fall
    /// short is named and the cell cannot pass as if the feature had run.
    #[serde(default, skip_serializing_if = "Expect::is_empty")]
    pub expect: Expect,
    /// Where the requests come from (`config::workload`); none: synthetic
    /// filler at `prompt_tokens`, unique or shared as `cache` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSpec>,
    /// A capacity cell (`{ by = "rate", low = 0.5, high = 8, precision_percent
    /// = 10 }`): instead of `requests` at one load, a search for the highest
    /// load whose SLO attainment holds (`report::capacity`). The level sets
    /// the load, so `arrival` stays `closed` (unset), `concurrency` 1
    /// (unset) and `warmup` 0: each contradicts the level and is refused
    /// (the table's own `warmup_requests` warms each segment). `requests`
    /// is then the most measured requests the search may spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacitySpec>,
    /// The dataset the workload names, read by `Suite::load`.
    #[serde(skip)]
    pub dataset: Option<Arc<Dataset>>,
    /// The dataset file's SHA-256, in the cell's shape: two runs that read
    /// different files under one name do not compare.
    #[serde(skip)]
    pub dataset_sha256: Option<String>,
}

/// Output length: fixed at `max_tokens`, or wherever the model stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputPolicy {
    #[default]
    Fixed,
    Free,
}

const COMPLETIONS: &str = "completions";

/// The endpoint a cell's requests go to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellEndpoint {
    #[default]
    Chat,
    Completions,
}

impl CellEndpoint {
    pub fn is_chat(&self) -> bool {
        *self == CellEndpoint::Chat
    }

    /// The name in a cell's shape; none for chat, which every shape means
    /// when it names none.
    fn shape_name(self) -> Option<String> {
        match self {
            CellEndpoint::Chat => None,
            CellEndpoint::Completions => Some(COMPLETIONS.into()),
        }
    }

    /// The endpoint a cell's shape names ([`Self::shape_name`] read back).
    pub fn of_shape(name: Option<&str>) -> CellEndpoint {
        match name {
            Some(COMPLETIONS) => CellEndpoint::Completions,
            _ => CellEndpoint::Chat,
        }
    }
}

/// Body fields a cell's `extra` may not override: streaming, usage, the
/// output cap and the prompt are what the measurement is made of.
pub const RESERVED_BODY_KEYS: &[&str] = &[
    "stream",
    "stream_options",
    "max_tokens",
    "messages",
    "prompt",
];

fn default_tolerance() -> f64 {
    10.0
}
fn one() -> usize {
    1
}
fn unique() -> CachePolicy {
    CachePolicy::Unique
}
fn closed() -> String {
    "closed".into()
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// A finished request is replaced at once, `concurrency` in flight.
    Closed,
    /// Open loop, fixed interval between sends.
    Constant { rate: f64 },
    /// Open loop, exponential gaps between sends.
    Poisson { rate: f64 },
}

impl Arrival {
    pub fn parse(s: &str) -> Result<Arrival> {
        if s == "closed" {
            return Ok(Arrival::Closed);
        }
        let (kind, rate) = s.split_once(':').with_context(|| {
            format!("arrival '{s}': expected closed, constant:<req/s> or poisson:<req/s>")
        })?;
        let rate: f64 = rate
            .parse()
            .with_context(|| format!("arrival '{s}': rate '{rate}' is not a number"))?;
        if !(rate.is_finite() && rate > 0.0) {
            bail!("arrival '{s}': rate must be a positive number of requests per second");
        }
        match kind {
            "constant" => Ok(Arrival::Constant { rate }),
            "poisson" => Ok(Arrival::Poisson { rate }),
            _ => bail!("arrival '{s}': unknown kind '{kind}' (closed, constant, poisson)"),
        }
    }
}

impl CellSpec {
    pub fn arrival(&self) -> Result<Arrival> {
        Arrival::parse(&self.arrival).with_context(|| format!("cell '{}'", self.name))
    }

    pub fn shape(&self) -> CellShape {
        CellShape {
            prompt_tokens: self.prompt_tokens,
            tolerance_percent: self.tolerance_percent,
            max_tokens: self.max_tokens,
            concurrency: self.concurrency,
            requests: self.requests,
            warmup: self.warmup,
            cache: match self.cache {
                CachePolicy::Unique => "unique".into(),
                CachePolicy::Shared => "shared".into(),
            },
            arrival: match &self.workload {
                Some(WorkloadSpec::Trace { speed, .. }) => format!("trace:{speed}"),
                _ => self.arrival.clone(),
            },
            temperature: self.temperature,
            seed: self.seed,
            workload: self.workload.as_ref().map(|w| {
                let mut d = match &self.dataset_sha256 {
                    Some(h) => format!("{}, sha256 {}", w.describe(), &h[..h.len().min(16)]),
                    None => w.describe(),
                };
                if let Some(Dataset::Trace(t)) = self.dataset.as_deref()
                    && let Some(note) = t.note()
                {
                    d.push_str(", ");
                    d.push_str(&note);
                }
                d
            }),
            endpoint: self.endpoint.shape_name(),
        }
    }

    /// Open loop: sent on a schedule (a rate, or a trace's timestamps).
    pub fn open_loop(&self) -> bool {
        matches!(self.workload, Some(WorkloadSpec::Trace { .. }))
            || !matches!(self.arrival(), Ok(Arrival::Closed))
    }

    /// Is `actual` prompt tokens within this cell's tolerance of its target?
    pub fn prompt_within_tolerance(&self, actual: u64) -> bool {
        within_tolerance(self.prompt_tokens, actual, self.tolerance_percent)
    }

    /// The dataset the workload reads: loaded by `Suite::load`.
    pub fn dataset(&self) -> Result<&Dataset> {
        self.dataset.as_deref().with_context(|| {
            format!(
                "cell '{}': its workload's dataset was not read (suites naming a file must be loaded from disk)",
                self.name
            )
        })
    }

    /// The longest prompt a request of this cell may send, in tokens, where
    /// the workload states it (a dataset's lengths are only known when sent).
    fn longest_prompt(&self) -> Option<u64> {
        match &self.workload {
            None | Some(WorkloadSpec::SharedPrefix { .. }) => Some(self.prompt_tokens),
            Some(WorkloadSpec::Spread { prompt_tokens, .. }) => Some(prompt_tokens.bounds().1),
            Some(WorkloadSpec::Conversation {
                turns,
                turn_tokens,
                answer_tokens,
                ..
            }) => {
                let per_turn = turn_tokens.saturating_add(answer_tokens.unwrap_or(self.max_tokens));
                Some(
                    self.prompt_tokens
                        .saturating_add(per_turn.saturating_mul(u64::from(turns - 1))),
                )
            }
            Some(WorkloadSpec::Trace { .. }) => match self.dataset.as_deref() {
                Some(Dataset::Trace(t)) => t.iter().map(|e| e.input_length).max(),
                _ => None,
            },
            Some(WorkloadSpec::Sharegpt { .. } | WorkloadSpec::Openai { .. }) => None,
        }
    }

    /// The longest output a request may ask for.
    fn longest_output(&self) -> u64 {
        match &self.workload {
            Some(WorkloadSpec::Spread {
                max_tokens: Some(d),
                ..
            }) => d.bounds().1,
            _ => self.max_tokens,
        }
    }

    /// Refuse a cell that cannot fit the server's context window; never clamp.
    pub fn check_fits(&self, context_window: u64) -> Result<()> {
        let Some(longest) = self.longest_prompt() else {
            return Ok(());
        };
        let worst_prompt = (longest as f64 * (1.0 + self.tolerance_percent / 100.0)).ceil() as u64;
        // Saturating: both come from the suite file (u64::MAX overflowed here).
        let need = worst_prompt.saturating_add(self.longest_output());
        if need > context_window {
            bail!(
                "cell '{}' cannot fit: up to {} prompt tokens ({} + {}% tolerance) plus {} output tokens = {} > the server's context window of {} tokens per request",
                self.name,
                worst_prompt,
                longest,
                self.tolerance_percent,
                self.longest_output(),
                need,
                context_window
            );
        }
        Ok(())
    }
}

impl Suite {
    pub fn parse(text: &str, origin: &str) -> Result<Suite> {
        let file: SuiteFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        // Lines are only needed to report an error: found then, not before.
        let at = |which: fn(&TableLines) -> &Vec<usize>, kind: &str, i: usize| {
            let line = which(&TableLines::of(text))
                .get(i)
                .map_or("?".into(), usize::to_string);
            format!("{origin}: line {line}: [[{kind}]]")
        };
        if let Some(why) = crate::report::text::name_problem(&file.name) {
            // The top-level key, above the first table header.
            let line = text
                .lines()
                .take_while(|l| !l.trim_start().starts_with('['))
                .position(|l| l.split('=').next().is_some_and(|k| k.trim() == "name"))
                .map_or("?".into(), |i| (i + 1).to_string());
            bail!("{origin}: line {line}: field `name`: {why}");
        }
        if file.cells.is_empty() && file.turnover.is_empty() && file.embeddings.is_empty() {
            bail!(
                "{origin}: the suite has no [[cell]], [[turnover]] or [[embeddings]]: nothing to measure"
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in file.cells.iter().enumerate() {
            c.validate(&mut seen)
                .with_context(|| at(|l| &l.cells, "cell", i))?;
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, e) in file.embeddings.iter().enumerate() {
            let at = || at(|l| &l.embeddings, "embeddings", i);
            e.validate().with_context(at)?;
            if !names.insert(&e.name) {
                return Err(anyhow::anyhow!("embeddings '{}' is defined twice", e.name))
                    .with_context(at);
            }
        }
        // Turnover tables are checked now, not after the cells have run.
        let turnover =
            TurnoverSpec::from_tables(&file.turnover, |i| at(|l| &l.turnover, "turnover", i))?;
        Ok(Suite {
            name: file.name,
            description: file.description,
            cells: file.cells,
            turnover,
            tokenizer: file.tokenizer,
            embeddings: file.embeddings,
        })
    }

    /// Read and check the suite at `path`, with the datasets and task files
    /// it names: (the suite, the file's text).
    pub fn load(path: &Path) -> Result<(Suite, String)> {
        let text = crate::util::read_input(path)
            .with_context(|| format!("reading suite {}", path.display()))?;
        let origin = path.display().to_string();
        let mut suite = Suite::parse(&text, &origin)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(t) = suite.tokenizer.take() {
            suite.tokenizer = Some(dir.join(t));
        }
        let lines = TableLines::of(&text);
        for (i, c) in suite.cells.iter_mut().enumerate() {
            let line = lines.cells.get(i).map_or("?".into(), usize::to_string);
            c.read_dataset(dir)
                .with_context(|| format!("{origin}: line {line}: [[cell]] '{}'", c.name))?;
        }
        for (i, e) in suite.embeddings.iter_mut().enumerate() {
            let line = lines.embeddings.get(i).map_or("?".into(), usize::to_string);
            e.read_inputs(dir)
                .with_context(|| format!("{origin}: line {line}: [[embeddings]] '{}'", e.name))?;
        }
        for (i, t) in suite.turnover.iter_mut().enumerate() {
            let line = lines.turnover.get(i).map_or("?".into(), usize::to_string);
            t.read_inputs(dir)
                .with_context(|| format!("{origin}: line {line}: [[turnover]] '{}'", t.name))?;
        }
        Ok((suite, text))
    }
}

/// A suite file as read once: the typed suite and the text it came from
/// (its sha256 goes into each run's provenance). A qualification reads it at
/// preflight and hands it to every step.
#[derive(Debug, Clone)]
pub struct LoadedSuite {
    pub suite: Suite,
    pub text: String,
}

impl LoadedSuite {
    pub fn read(path: &Path) -> Result<LoadedSuite> {
        let (suite, text) = Suite::load(path)?;
        Ok(LoadedSuite { suite, text })
    }
}

/// Is `actual` within `tolerance_percent` of `target`?
pub fn within_tolerance(target: u64, actual: u64, tolerance_percent: f64) -> bool {
    let target = target as f64;
    ((actual as f64 - target).abs() / target) * 100.0 <= tolerance_percent
}

/// Where each `[[cell]]` and `[[turnover]]` table starts, so checks made
/// after parsing can still name a line.
struct TableLines {
    cells: Vec<usize>,
    turnover: Vec<usize>,
    embeddings: Vec<usize>,
}

impl TableLines {
    fn of(text: &str) -> TableLines {
        #[derive(Deserialize)]
        struct Spans {
            #[serde(default)]
            cell: Vec<toml::Spanned<toml::Table>>,
            #[serde(default)]
            turnover: Vec<toml::Spanned<toml::Table>>,
            #[serde(default)]
            embeddings: Vec<toml::Spanned<toml::Table>>,
        }
        let line = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
        let spans: Spans = toml::from_str(text).unwrap_or(Spans {
            cell: Vec::new(),
            turnover: Vec::new(),
            embeddings: Vec::new(),
        });
        let lines =
            |ts: &[toml::Spanned<toml::Table>]| ts.iter().map(|t| line(t.span().start)).collect();
        TableLines {
            cells: lines(&spans.cell),
            turnover: lines(&spans.turnover),
            embeddings: lines(&spans.embeddings),
        }
    }
}

impl CellSpec {
    /// Read the workload's dataset (a relative path from the suite's folder)
    /// and check it can supply the cell's requests.
    fn read_dataset(&mut self, dir: &Path) -> Result<()> {
        let Some(w) = self.workload.as_mut() else {
            return Ok(());
        };
        let Some(p) = w.path_mut() else {
            return Ok(());
        };
        *p = dir.join(&*p);
        let w = &*w;
        let path = w.path().unwrap_or(Path::new(""));
        let file = path.display().to_string();
        // Read once: parsed, and hashed for the cell's shape.
        let data = dataset::read_bounded(path)
            .and_then(|text| {
                self.dataset_sha256 = Some(crate::util::sha256_hex(text.as_bytes()));
                match w {
                    WorkloadSpec::Sharegpt { .. } => dataset::sharegpt_text(&text, &file),
                    WorkloadSpec::Openai { .. } => dataset::openai_text(&text, &file),
                    _ => dataset::trace_text(&text, &file),
                }
            })
            .with_context(|| format!("workload.path ({} dataset)", w.kind()))?;
        let turns = w.turns().unwrap_or(1);
        let can = data.capacity(turns);
        if can < self.requests {
            bail!(
                "requests = {} but {} supplies only {can}{}",
                self.requests,
                path.display(),
                if turns > 1 {
                    format!(" (conversations with at least {turns} turns, {turns} requests each)")
                } else {
                    String::new()
                }
            );
        }
        if let (WorkloadSpec::Trace { speed, .. }, Dataset::Trace(t)) = (w, &data) {
            // Only the first `requests` lines are sent; their span, replayed at the speed.
            let sent = &t[..self.requests.min(t.len())];
            if let (Some(a), Some(b)) = (sent.first(), sent.last()) {
                let span_ms = b.timestamp_ms - a.timestamp_ms;
                super::limits::schedule_within(
                    &format!(
                        "at workload.speed {speed:?}, the {} trace lines it sends (spanning {span_ms} ms)",
                        sent.len()
                    ),
                    span_ms as f64 / 1000.0 / speed,
                )?;
            }
        }
        self.dataset = Some(Arc::new(data));
        Ok(())
    }

    /// Field checks the TOML types cannot express; `seen` holds the names so far.
    fn validate<'a>(&'a self, seen: &mut std::collections::BTreeSet<&'a String>) -> Result<()> {
        let name = &self.name;
        if name.trim().is_empty() {
            bail!("name must not be empty: the cell's name is its key in every artifact");
        }
        // Before any message that quotes the name.
        if let Some(why) = crate::report::text::name_problem(name) {
            bail!("field `name`: {why}");
        }
        if !seen.insert(name) {
            bail!("cell '{name}' is defined twice");
        }
        let from_file = self.workload.as_ref().is_some_and(|w| w.path().is_some());
        if self.prompt_tokens == 0 && !from_file {
            bail!("cell '{name}': prompt_tokens must be > 0");
        }
        if let Some(why) = self
            .workload
            .as_ref()
            .and_then(|w| w.problem(self.prompt_tokens, self.requests))
        {
            bail!("cell '{name}': {why}");
        }
        if matches!(self.workload, Some(WorkloadSpec::Trace { .. })) && self.arrival != "closed" {
            bail!(
                "cell '{name}': a trace is sent at its own timestamps; arrival = {:?} cannot apply (set workload.speed instead)",
                self.arrival
            );
        }
        if self.workload.is_some() && !self.endpoint.is_chat() {
            bail!(
                "cell '{name}': field `endpoint`: a workload sends chat messages; endpoint = \"completions\" takes the synthetic filler only (leave workload unset)"
            );
        }
        if self.workload.is_some() && self.cache == CachePolicy::Shared {
            bail!(
                "cell '{name}': cache = \"shared\" sends one prompt to every request; a workload decides what its requests share (leave cache unset)"
            );
        }
        if self.max_tokens == 0 {
            bail!("cell '{name}': max_tokens must be > 0");
        }
        if self.requests == 0 {
            bail!("cell '{name}': requests must be > 0");
        }
        if self.concurrency == 0 {
            bail!("cell '{name}': concurrency must be > 0");
        }
        if !(self.tolerance_percent.is_finite() && self.tolerance_percent >= 0.0) {
            bail!("cell '{name}': tolerance_percent must be >= 0");
        }
        if !(0.0..=super::limits::MAX_TEMPERATURE).contains(&self.temperature) {
            bail!(
                "cell '{name}': temperature must be a number in [0, {}], the OpenAI API's range (found {:?})",
                super::limits::MAX_TEMPERATURE,
                self.temperature
            );
        }
        let rate = match self.arrival()? {
            Arrival::Closed => None,
            Arrival::Constant { rate } | Arrival::Poisson { rate } => Some(rate),
        };
        super::limits::check_cell(
            self.requests,
            self.warmup,
            self.concurrency,
            rate,
            self.prompt_tokens,
            self.max_tokens,
            self.tolerance_percent,
        )
        .with_context(|| format!("cell '{name}'"))?;
        if let Some(why) = self.slo.as_ref().and_then(Slo::problem) {
            bail!("cell '{name}': slo: {why}");
        }
        if let Some(why) = self.expect.problem() {
            bail!("cell '{name}': {why}");
        }
        if let Some(spec) = &self.capacity {
            self.check_capacity(spec)
                .with_context(|| format!("cell '{name}': field `capacity`"))?;
        }
        if let Some(k) = RESERVED_BODY_KEYS
            .iter()
            .find(|k| self.extra.contains_key(**k))
        {
            bail!(
                "cell '{name}': extra.{k} is set by infergate itself (streaming with usage, the cell's max_tokens and prompt) and may not be overridden"
            );
        }
        Ok(())
    }
}

impl CellSpec {
    /// A capacity table against the rest of the cell: its own problems, an
    /// SLO to hold, the client's limits at its ends, and no field that sets
    /// a load of its own.
    fn check_capacity(&self, spec: &CapacitySpec) -> Result<()> {
        if let Some(why) = spec.problem() {
            bail!("{why}");
        }
        match &self.slo {
            None => bail!(
                "a capacity cell searches for the highest load that meets its SLO: give slo = {{ ttft_ms = …, min_attainment = … }}"
            ),
            Some(slo) if slo.is_empty() => {
                bail!("a capacity cell needs an slo with a target (ttft_ms, tpot_ms or e2e_ms)")
            }
            // The search's bound on attainment never reaches 1: no level could hold.
            Some(slo) if slo.min_attainment() >= 1.0 => bail!(
                "slo.min_attainment = 1 can never be shown to hold by a finite search: give one below 1 (e.g. 0.9)"
            ),
            Some(_) => {}
        }
        if self.arrival != "closed" {
            bail!(
                "by = \"{}\" sets the load at each level; arrival = {:?} contradicts it (leave arrival unset)",
                axis_name(spec.by),
                self.arrival
            );
        }
        if self.concurrency != 1 {
            bail!(
                "by = \"{}\" sets the load at each level; concurrency = {} contradicts it (leave concurrency unset)",
                axis_name(spec.by),
                self.concurrency
            );
        }
        if self.warmup != 0 {
            bail!(
                "each segment is warmed by capacity.warmup_requests; warmup = {} does not apply (leave it unset)",
                self.warmup
            );
        }
        // Its requests are not known before the search runs: each is the
        // synthetic filler at prompt_tokens, sized once.
        if self.workload.is_some() {
            bail!(
                "a capacity search sends the synthetic filler at prompt_tokens, sized once for every level; leave workload unset"
            );
        }
        // A level needs two segments to be decided.
        let least = spec.segment_requests.saturating_mul(2);
        if self.requests < least {
            bail!(
                "requests = {} is the most the search may measure; one level needs two segments of {} (at least {least})",
                self.requests,
                spec.segment_requests
            );
        }
        match spec.by {
            LoadAxis::Rate => {
                super::limits::at_most(
                    "capacity.high (req/s)",
                    spec.high,
                    super::limits::MAX_RATE_PER_S,
                )?;
                let sent = spec
                    .warmup_at(spec.low)
                    .saturating_add(spec.segment_requests);
                super::limits::schedule_within(
                    &format!(
                        "at capacity.low {:?} req/s, one segment's {sent} requests (warm-up included)",
                        spec.low
                    ),
                    sent as f64 / spec.low,
                )?;
            }
            LoadAxis::Concurrency => {
                super::limits::at_most(
                    "capacity.high (concurrency)",
                    spec.high,
                    super::limits::MAX_CONCURRENCY as f64,
                )?;
            }
        }
        Ok(())
    }
}

fn axis_name(by: LoadAxis) -> &'static str {
    match by {
        LoadAxis::Rate => "rate",
        LoadAxis::Concurrency => "concurrency",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_control_characters_are_refused_naming_file_line_and_field() {
        let cell = |name: &str| {
            format!(
                "name = \"t\"\n\n[[cell]]\nname = {}\nprompt_tokens = 10\nmax_tokens = 4\nrequests = 1\n",
                toml::Value::String(name.into())
            )
        };
        for (name, what) in [
            (
                "x\n```\n\n## ✅ QUALIFIED",
                "a line break (U+000A) at character 2",
            ),
            ("\u{1b}[31mpass", "an escape (ESC) (U+001B) at character 1"),
            (
                "cell\u{202E}kcap",
                "a bidirectional override (U+202E) at character 5",
            ),
            ("c\u{9b}", "a control character (U+009B) at character 2"),
        ] {
            let e = format!("{:#}", Suite::parse(&cell(name), "s.toml").unwrap_err());
            let want =
                format!("s.toml: line 3: [[cell]]: field `name`: {what} is not allowed in a name");
            assert!(e.starts_with(&want), "{e}");
        }
        let suite_name = cell("a").replace("name = \"t\"", "name = \"t\\r\"");
        let e = format!("{:#}", Suite::parse(&suite_name, "s.toml").unwrap_err());
        assert!(
            e.starts_with("s.toml: line 1: field `name`: a line break (U+000D)"),
            "{e}"
        );
        let turnover =
            "name = \"t\"\n\n[[turnover]]\nname = \"w\\u001b]0;x\"\ncontract = \"words\"\n";
        let e = format!("{:#}", Suite::parse(turnover, "s.toml").unwrap_err());
        assert!(
            e.starts_with("s.toml: line 3: [[turnover]]: field `name`: an escape (ESC) (U+001B) at character 2"),
            "{e}"
        );
        // Markdown, HTML and formula characters are the renderers' to escape.
        Suite::parse(&cell("=a|b <i>*c*</i> ✅"), "s.toml").expect("a printable name");
    }

    #[test]
    fn checks_after_parsing_name_the_line_of_the_table() {
        let text = "name = \"t\"\n\n[[cell]]\nname = \"a\"\nprompt_tokens = 10\nmax_tokens = 4\nrequests = 1\n\n[[cell]]\nname = \"b\"\nprompt_tokens = 10\nmax_tokens = 0\nrequests = 1\n";
        let e = format!("{:#}", Suite::parse(text, "s.toml").unwrap_err());
        assert!(e.starts_with("s.toml: line 9: [[cell]]"), "{e}");
        assert!(e.contains("cell 'b': max_tokens must be > 0"), "{e}");
    }

    #[test]
    fn nonsense_is_refused_at_parse_time_naming_line_and_field() {
        let e = format!(
            "{:#}",
            Suite::parse("name = \"t\"\n", "s.toml").unwrap_err()
        );
        assert!(e.starts_with("s.toml: the suite has no [[cell]]"), "{e}");
        let cell = |field: &str| {
            format!(
                "name = \"t\"\n\n[[cell]]\nname = \"a\"\nprompt_tokens = 10\nmax_tokens = 4\nrequests = 1\n{field}\n"
            )
        };
        for (field, says) in [
            (
                "temperature = nan",
                "temperature must be a number in [0, 2], the OpenAI API's range (found NaN)",
            ),
            (
                "temperature = -3.0",
                "temperature must be a number in [0, 2], the OpenAI API's range (found -3.0)",
            ),
            (
                "temperature = inf",
                "temperature must be a number in [0, 2]",
            ),
            (
                "temperature = 1e308",
                "temperature must be a number in [0, 2], the OpenAI API's range (found 1e308)",
            ),
            ("temperature = 2.01", "(found 2.01)"),
        ] {
            let e = format!("{:#}", Suite::parse(&cell(field), "s.toml").unwrap_err());
            assert!(e.starts_with("s.toml: line 3: [[cell]]"), "{e}");
            assert!(e.contains(says), "{e}");
        }
        let unnamed = cell("").replace("name = \"a\"", "name = \" \"");
        let e = format!("{:#}", Suite::parse(&unnamed, "s.toml").unwrap_err());
        assert!(e.starts_with("s.toml: line 3: [[cell]]"), "{e}");
        assert!(e.contains("name must not be empty"), "{e}");
        Suite::parse(&cell("temperature = 0.7"), "s.toml").unwrap();
        Suite::parse(&cell("temperature = 2.0"), "s.toml").unwrap();
        let turnover = |t: &str| {
            format!(
                "name = \"t\"\n\n[[turnover]]\nname = \"w\"\ncontract = \"words\"\ntemperature = {t}\n"
            )
        };
        let e = format!(
            "{:#}",
            Suite::parse(&turnover("1e308"), "s.toml").unwrap_err()
        );
        assert!(e.starts_with("s.toml: line 3: [[turnover]]"), "{e}");
        assert!(
            e.contains(
                "temperature must be a number in [0, 2], the OpenAI API's range (found 1e308)"
            ),
            "{e}"
        );
        Suite::parse(&turnover("2.0"), "s.toml").unwrap();
    }

    #[test]
    fn a_bad_turnover_table_is_refused_at_parse_time_with_its_line() {
        let text = "name = \"t\"\n[[turnover]]\nname = \"ok\"\ncontract = \"words\"\n\n[[turnover]]\nname = \"bad\"\ncontract = \"words\"\nconcurency = 4\n";
        let e = format!("{:#}", Suite::parse(text, "s.toml").unwrap_err());
        assert!(e.starts_with("s.toml: line 6: [[turnover]]"), "{e}");
        assert!(e.contains("concurency"), "{e}");
    }

    const SUITE: &str = r#"
name = "t"
[[cell]]
name = "a"
prompt_tokens = 1000
max_tokens = 64
requests = 4
concurrency = 2
arrival = "poisson:2.5"
"#;

    const CAPACITY: &str = r#"name = "t"

[[cell]]
name = "cap"
prompt_tokens = 100
max_tokens = 16
requests = 400
slo = { ttft_ms = 2000, min_attainment = 0.9 }
capacity = { by = "rate", low = 0.5, high = 8, precision_percent = 10 }
"#;

    #[test]
    fn a_capacity_table_is_read_and_written_back() {
        let s = Suite::parse(CAPACITY, "s.toml").unwrap();
        let spec = s.cells[0].capacity.as_ref().expect("capacity");
        assert_eq!(spec.by, LoadAxis::Rate);
        assert_eq!((spec.low, spec.high), (0.5, 8.0));
        // `config::adhoc` writes cells back as TOML: the table survives.
        #[derive(Serialize)]
        struct File<'a> {
            name: &'a str,
            cell: &'a [CellSpec],
        }
        let text = toml::to_string(&File {
            name: "t",
            cell: &s.cells,
        })
        .unwrap();
        assert_eq!(Suite::parse(&text, "back.toml").unwrap().cells, s.cells);
        let conc = CAPACITY.replace("by = \"rate\", low = 0.5", "by = \"concurrency\", low = 1");
        Suite::parse(&conc, "s.toml").unwrap();
    }

    #[test]
    fn a_capacity_table_that_cannot_run_is_refused_naming_cell_and_field() {
        let cap = "capacity = { by = \"rate\", low = 0.5, high = 8, precision_percent = 10 }";
        let slo = "slo = { ttft_ms = 2000, min_attainment = 0.9 }\n";
        for (from, to, says) in [
            (
                cap,
                cap.replace("high = 8", "high = 0.5"),
                "high 0.5 is not above low 0.5",
            ),
            (
                cap,
                cap.replace("precision_percent = 10", "precision_percent = 0"),
                "precision_percent 0",
            ),
            (
                slo,
                String::new(),
                "a capacity cell searches for the highest load that meets its SLO",
            ),
            (slo, "slo = { min_attainment = 0.9 }\n".into(), "no target"),
            (
                slo,
                "slo = { ttft_ms = 2000, min_attainment = 1.0 }\n".into(),
                "can never be shown to hold",
            ),
            (
                cap,
                cap.replace("low = 0.5, high = 8", "low = 200, high = 200000"),
                "capacity.high (req/s) = 200000 is above the maximum",
            ),
            (
                cap,
                cap.replace(
                    "by = \"rate\", low = 0.5, high = 8",
                    "by = \"concurrency\", low = 10, high = 5000",
                ),
                "capacity.high (concurrency) = 5000 is above the maximum",
            ),
            (
                cap,
                cap.replace("low = 0.5", "low = 0.0001")
                    .replace("high = 8", "high = 0.01"),
                "one segment's 20 requests (warm-up included) take",
            ),
            (
                slo,
                format!("{slo}arrival = \"poisson:2\"\n"),
                "arrival = \"poisson:2\" contradicts it",
            ),
            (
                slo,
                format!("{slo}concurrency = 4\n"),
                "concurrency = 4 contradicts it",
            ),
            (
                slo,
                format!("{slo}warmup = 4\n"),
                "warmup = 4 does not apply",
            ),
            (
                "requests = 400",
                "requests = 31".into(),
                "requests = 31 is the most the search may measure; one level needs two segments of 16 (at least 32)",
            ),
        ] {
            let text = CAPACITY.replace(from, &to);
            let e = format!("{:#}", Suite::parse(&text, "s.toml").unwrap_err());
            assert!(e.starts_with("s.toml: line 3: [[cell]]"), "{to}: {e}");
            assert!(e.contains(says), "{to}: {e}");
            if !says.contains("no target") {
                assert!(e.contains("cell 'cap': field `capacity`"), "{to}: {e}");
            }
        }
    }

    #[test]
    fn extra_may_not_override_what_the_measurement_needs() {
        for key in [
            "stream = false",
            "max_tokens = 3",
            "stream_options = { include_usage = false }",
        ] {
            let text = format!(
                "name = \"t\"\n[[cell]]\nname = \"a\"\nprompt_tokens = 10\nmax_tokens = 4\nrequests = 1\nextra = {{ {key} }}\n"
            );
            let e = format!("{:#}", Suite::parse(&text, "s.toml").unwrap_err());
            let field = key.split(' ').next().unwrap();
            assert!(e.starts_with("s.toml: line 2: [[cell]]"), "{e}");
            assert!(
                e.contains(&format!("extra.{field} is set by infergate")),
                "{e}"
            );
        }
        let ok = "name = \"t\"\n[[cell]]\nname = \"a\"\nprompt_tokens = 10\nmax_tokens = 4\nrequests = 1\nextra = { cache_prompt = false }\n";
        let s = Suite::parse(ok, "s.toml").unwrap();
        assert_eq!(s.cells[0].output, OutputPolicy::Fixed);
    }

    #[test]
    fn parses_with_defaults() {
        let s = Suite::parse(SUITE, "t.toml").unwrap();
        let c = &s.cells[0];
        assert_eq!(c.tolerance_percent, 10.0);
        assert_eq!(c.cache, CachePolicy::Unique);
        assert_eq!(c.arrival().unwrap(), Arrival::Poisson { rate: 2.5 });
        assert!(c.prompt_within_tolerance(1100));
        assert!(!c.prompt_within_tolerance(1101));
    }

    #[test]
    fn parse_error_names_file_line_and_field() {
        let bad = SUITE.replace("max_tokens = 64", "max_tokens = \"lots\"");
        let err = Suite::parse(&bad, "suites/x.toml").unwrap_err().to_string();
        assert!(err.contains("suites/x.toml"), "{err}");
        assert!(err.contains("line 6"), "{err}");
        assert!(err.contains("max_tokens"), "{err}");
    }

    #[test]
    fn a_completions_cell_takes_filler_and_reserves_the_prompt() {
        let c = SUITE.replace(
            "max_tokens = 64",
            "max_tokens = 64\nendpoint = \"completions\"",
        );
        let s = Suite::parse(&c, "t").unwrap();
        assert_eq!(s.cells[0].endpoint, CellEndpoint::Completions);
        assert_eq!(s.cells[0].shape().endpoint.as_deref(), Some("completions"));
        assert_eq!(
            Suite::parse(SUITE, "t").unwrap().cells[0].shape().endpoint,
            None
        );
        let with_workload = c.replace(
            "endpoint = \"completions\"",
            "endpoint = \"completions\"\nworkload = { kind = \"conversation\", turns = 2, turn_tokens = 10 }",
        );
        let err = format!("{:#}", Suite::parse(&with_workload, "s.toml").unwrap_err());
        assert!(
            err.contains("s.toml: line ") && err.contains("field `endpoint`"),
            "{err}"
        );
        let prompt = c.replace(
            "max_tokens = 64\n",
            "max_tokens = 64\nextra = { prompt = \"x\" }\n",
        );
        let err = format!("{:#}", Suite::parse(&prompt, "s.toml").unwrap_err());
        assert!(err.contains("extra.prompt"), "{err}");
        let bad = c.replace("\"completions\"", "\"embeddings\"");
        let err = format!("{:#}", Suite::parse(&bad, "s.toml").unwrap_err());
        assert!(err.contains("endpoint") && err.contains("line"), "{err}");
    }

    #[test]
    fn refuses_a_cell_that_cannot_fit() {
        let s = Suite::parse(SUITE, "t").unwrap();
        let err = s.cells[0].check_fits(1100).unwrap_err().to_string();
        assert!(err.contains("cell 'a'") && err.contains("1164 > "), "{err}");
        s.cells[0].check_fits(1164).unwrap();
    }

    #[test]
    fn huge_cells_are_refused_not_overflowed() {
        // Found by review, replayed through `fuzzing::plan`: the sum overflowed.
        // The suite's limits refuse these now; `check_fits` still must not overflow.
        let mut s = Suite::parse(SUITE, "t").unwrap();
        s.cells[0].prompt_tokens = 9223372036854775807;
        s.cells[0].max_tokens = 9223372036854775807;
        assert!(s.cells[0].check_fits(u64::MAX - 1).is_err());
    }

    #[test]
    fn what_a_suite_asks_for_is_bounded_at_parse_time_naming_line_and_field() {
        use crate::config::limits::*;
        let over = |n: u64| (n + 1).to_string();
        for (from, to, field) in [
            (
                "requests = 4",
                format!("requests = {}", over(MAX_CELL_REQUESTS as u64)),
                "requests",
            ),
            (
                "requests = 4",
                "requests = 1000000000".to_string(),
                "requests",
            ),
            (
                "requests = 4",
                format!("requests = 4\nwarmup = {}", over(MAX_WARMUP as u64)),
                "warmup",
            ),
            (
                "concurrency = 2",
                format!("concurrency = {}", over(MAX_CONCURRENCY as u64)),
                "concurrency",
            ),
            (
                "arrival = \"poisson:2.5\"",
                "arrival = \"constant:1e9\"".to_string(),
                "arrival rate",
            ),
            (
                "prompt_tokens = 1000",
                format!("prompt_tokens = {}", over(MAX_PROMPT_TOKENS)),
                "prompt_tokens",
            ),
            (
                "max_tokens = 64",
                format!("max_tokens = {}", over(MAX_OUTPUT_TOKENS)),
                "max_tokens",
            ),
        ] {
            let text = SUITE.replace(from, &to);
            let e = format!("{:#}", Suite::parse(&text, "s.toml").unwrap_err());
            assert!(e.starts_with("s.toml: line 3: [[cell]]"), "{e}");
            assert!(e.contains(&format!("cell 'a': {field}")), "{e}");
            assert!(e.contains("above the maximum"), "{e}");
        }
        // At 100 req/s, the most requests a cell may ask for plan under 3 h.
        let at_max = SUITE
            .replace("requests = 4", &format!("requests = {MAX_CELL_REQUESTS}"))
            .replace("poisson:2.5", "poisson:100");
        Suite::parse(&at_max, "s.toml").unwrap();
        let turnover = |field: &str| {
            format!("name = \"t\"\n\n[[turnover]]\nname = \"w\"\ncontract = \"words\"\n{field}\n")
        };
        for (field, n) in [
            ("requests", MAX_TURNOVER_REQUESTS as u64),
            ("repeats", MAX_TURNOVER_REPEATS as u64),
            ("concurrency", MAX_CONCURRENCY as u64),
            ("words", MAX_TURNOVER_WORDS as u64),
            ("max_tokens", MAX_OUTPUT_TOKENS),
        ] {
            let text = turnover(&format!("{field} = {}", over(n)));
            let e = format!("{:#}", Suite::parse(&text, "s.toml").unwrap_err());
            assert!(e.starts_with("s.toml: line 3: [[turnover]]"), "{e}");
            assert!(
                e.contains(&format!("{field} = ")) && e.contains("above the maximum"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_cells_expectation_is_read_and_a_bad_one_named_at_its_line() {
        let with =
            |e: &str| SUITE.replace("arrival = \"poisson:2.5\"\n", &format!("expect = {e}\n"));
        let s = Suite::parse(&with("{ spec_acceptance_min = 0.3 }"), "s.toml").unwrap();
        assert_eq!(s.cells[0].expect.spec_acceptance_min, Some(0.3));
        let e = format!(
            "{:#}",
            Suite::parse(&with("{ spec_acceptance_min = 1.5 }"), "s.toml").unwrap_err()
        );
        assert!(e.starts_with("s.toml: line 3: [[cell]]"), "{e}");
        assert!(
            e.contains("cell 'a': expect.spec_acceptance_min must be a share in [0, 1], found 1.5"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            Suite::parse(&with("{ spec_accept = 0.3 }"), "s.toml").unwrap_err()
        );
        assert!(e.contains("spec_accept"), "{e}");
    }

    #[test]
    fn a_rate_whose_schedule_outlasts_a_day_is_refused_at_parse_time() {
        for arrival in ["constant:1e-300", "poisson:1e-300"] {
            let text = SUITE.replace("poisson:2.5", arrival);
            let e = format!("{:#}", Suite::parse(&text, "s.toml").unwrap_err());
            assert!(e.starts_with("s.toml: line 3: [[cell]]"), "{e}");
            assert!(
                e.contains("cell 'a': at arrival rate 1e-300 req/s, its 4 requests (warmup included) take 4.000e300 s to send, above the maximum of 86400 s (24 h) a schedule may plan"),
                "{e}"
            );
        }
        // 4 requests at 0.001 req/s plan 4000 s; with 100 warmup requests, 104000 s.
        let slow = SUITE.replace("poisson:2.5", "constant:0.001");
        Suite::parse(&slow, "s.toml").unwrap();
        let warm = slow.replace("requests = 4", "requests = 4\nwarmup = 100");
        let e = format!("{:#}", Suite::parse(&warm, "s.toml").unwrap_err());
        assert!(
            e.contains("its 104 requests (warmup included) take 1.040e5 s"),
            "{e}"
        );
    }

    #[test]
    fn a_trace_replayed_past_a_day_is_refused_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let trace = |lines: &[u64]| {
            let text: String = lines
                .iter()
                .map(|t| format!("{{\"timestamp\":{t},\"input_length\":7,\"output_length\":1}}\n"))
                .collect();
            std::fs::write(dir.path().join("t.jsonl"), text).unwrap();
        };
        let suite = |speed: &str| {
            let p = dir.path().join("s.toml");
            std::fs::write(
                &p,
                format!("name = \"t\"\n\n[[cell]]\nname = \"tr\"\nmax_tokens = 4\nrequests = 2\nworkload = {{ kind = \"trace\", path = \"t.jsonl\", speed = {speed} }}\n"),
            )
            .unwrap();
            Suite::load(&p).map(|_| ()).map_err(|e| format!("{e:#}"))
        };
        trace(&[0, 100_000, 10_000_000_000]);
        // The speed alone, before the file is read: it panicked making offsets.
        let e = suite("1e-300").unwrap_err();
        assert!(e.contains("line 3: [[cell]]"), "{e}");
        assert!(
            e.contains(
                "cell 'tr': workload.speed must be a number in [0.001, 1000] (found 1e-300)"
            ),
            "{e}"
        );
        // 100 s of trace sent (its third line is not) at a thousandth of its pace.
        let e = suite("0.001").unwrap_err();
        assert!(e.contains("line 3: [[cell]] 'tr'"), "{e}");
        assert!(
            e.contains("at workload.speed 0.001, the 2 trace lines it sends (spanning 100000 ms) take 1.000e5 s to send, above the maximum of 86400 s (24 h)"),
            "{e}"
        );
        suite("0.002").unwrap();
        // A timestamp of 2^64 − 1 after a first line at 0.
        trace(&[0, u64::MAX]);
        let e = suite("1").unwrap_err();
        assert!(
            e.contains("t.jsonl: line 2: field `timestamp`: 18446744073709551615 is more than"),
            "{e}"
        );
    }

    #[test]
    fn a_response_format_that_is_not_a_json_schema_is_refused_with_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.json"), "{\"type\": 12}").unwrap();
        let suite = |extra: &str| {
            let p = dir.path().join("s.toml");
            std::fs::write(
                &p,
                format!("name = \"t\"\n\n[[turnover]]\nname = \"json\"\ncontract = \"reference\"\nprompt = \"task\"\ngenerate = {{ kind = \"arithmetic\" }}\nrequests = 4\n{extra}\n"),
            )
            .unwrap();
            Suite::load(&p).map(|_| ()).map_err(|e| format!("{e:#}"))
        };
        let e = suite("response_format = { schema = \"bad.json\" }").unwrap_err();
        assert!(e.contains("s.toml: line 3: [[turnover]] 'json'"), "{e}");
        assert!(e.contains("field `response_format`"), "{e}");
        assert!(
            e.contains("bad.json") && e.contains("not a JSON Schema"),
            "{e}"
        );
        let e = suite("response_format = \"yaml\"").unwrap_err();
        assert!(
            e.contains("field `response_format`") && e.contains("json_object"),
            "{e}"
        );
        let e = suite("response_format = \"json_object\"\nextra = { response_format = { type = \"json_object\" } }")
            .unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        let e = suite("response_format = { schema = \"bad.json\", strict = false }").unwrap_err();
        assert!(e.contains("unknown field `strict`"), "{e}");
        let e = suite("response_format = 3").unwrap_err();
        assert!(e.contains("\"json_object\" or { schema"), "{e}");
        suite("response_format = \"json_object\"").unwrap();
    }

    #[test]
    fn unknown_field_is_an_error() {
        let bad = SUITE.replace("requests = 4", "requests = 4\nrequets = 5");
        let err = Suite::parse(&bad, "t").unwrap_err().to_string();
        assert!(err.contains("requets"), "{err}");
    }
}
