//! `infergate run`: measure one target with one suite. Orchestrates the stages
//! (discover → size prompts → load → journal → aggregate → artifact); holds no math.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::time::Instant;

use crate::artifact::{CellResult, Provenance, RUN_SCHEMA, RunArtifact};
use crate::config::suite::{CellEndpoint, CellSpec, Suite};
use crate::config::timeouts::BYTES_PER_TOKEN_ESTIMATE;
use crate::measure::client::{Client, ClientConfig, Endpoint, Timeouts};
use crate::measure::exact;
use crate::measure::journal::{self, Journal};
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::scrape::{self, Phase, SCRAPE_LOG_FILE, ScrapeEntry, ScrapeOptions, Scraper};
use crate::measure::tokenizer::TokenizerFile;
use crate::measure::turnover::TurnoverWorkload;
use crate::measure::workload::{self, PromptSizer};
use crate::measure::{aggregate, discover, source, windows};
use crate::util::{api_key, hostname, now_rfc3339, redact_url, sha256_hex};
use crate::{atomic, stats};

/// Everything `run` needs; plain data so the CLI and `qualify` share it.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub target: String,
    /// Name of the environment variable holding the API key (never the key).
    pub api_key_env: Option<String>,
    pub suite: PathBuf,
    pub out_dir: PathBuf,
    pub runtime_label: Option<String>,
    pub image: Option<String>,
    /// Run only these cells (all when empty).
    pub only_cells: Vec<String>,
    /// Keep the journal's finished requests and run only the missing ones.
    pub resume: bool,
    pub timeouts: Timeouts,
    pub skip_turnover: bool,
    pub quiet: bool,
    /// The model's `tokenizer.json`; overrides the suite's `tokenizer`.
    pub tokenizer: Option<PathBuf>,
    /// The whole suite, one block of its cells, or only its turnover.
    pub part: RunPart,
    /// The server's metrics endpoints read around each cell.
    pub scrape: ScrapeOptions,
}

/// Which part of the suite one `run` measures. `qualify`'s interleaved
/// schedule runs a cell as blocks, alternating targets between them, then
/// the turnover once per target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunPart {
    /// Every selected cell's `requests`, then the turnover.
    #[default]
    Whole,
    /// Requests `first .. first + count` of each selected cell (indices, so
    /// prompts and journal entries stay unique across blocks), after the
    /// cell's warmup requests (never recorded) when `warmup`; no turnover.
    /// The journal is shared by the blocks (`resume`); the artifact records
    /// provenance and method, no cells: the caller pools the blocks.
    Block {
        first: usize,
        count: usize,
        /// Run the cell's warmup first: the runtime's first block of this
        /// cell since it started (later blocks find it warm).
        warmup: bool,
    },
    /// No cell: only the suite's turnover.
    TurnoverOnly,
}

pub const ARTIFACT_FILE: &str = "run.json";
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// Read `opts.suite` and measure it.
pub async fn run(opts: &RunOptions) -> Result<RunArtifact> {
    let (suite, suite_text) = Suite::load(&opts.suite)?;
    run_suite(opts, &suite, &suite_text).await
}

/// Measure `suite`, already read from `opts.suite` (its text is recorded in
/// the provenance): a qualification reads its suite once for every block.
pub async fn run_suite(opts: &RunOptions, suite: &Suite, suite_text: &str) -> Result<RunArtifact> {
    Ok(measure_suite(opts, suite, suite_text, None, None)
        .await?
        .artifact)
}

/// What one run measured, in memory: its artifact, and the records and
/// server scrapes it took (not those an earlier run journaled); and the
/// server as it discovered it, for the next run against the same process.
pub struct Measured {
    pub artifact: RunArtifact,
    pub records: Vec<RequestRecord>,
    pub scrapes: Vec<ScrapeEntry>,
    pub target: Arc<Target>,
}

/// Measure `suite` and hand back what was measured. `earlier` is what the
/// journal in `opts.out_dir` already holds, when the caller keeps it in
/// memory (a qualification's blocks); `None` reads it (`opts.resume`).
/// A block ([`RunPart::Block`]) is not aggregated: its caller pools every
/// block's records, so its artifact carries provenance (the journal's
/// digest) and method, and no cells. `reached`: the same server as an
/// earlier run discovered it (a qualification's blocks, against a process
/// that stayed up), so it is not probed again nor its tokenizer file read.
pub async fn measure_suite(
    opts: &RunOptions,
    suite: &Suite,
    suite_text: &str,
    earlier: Option<&[RequestRecord]>,
    reached: Option<Arc<Target>>,
) -> Result<Measured> {
    let started_at = now_rfc3339();
    let target = match reached.filter(|t| t.base == opts.target.trim_end_matches('/')) {
        Some(t) => t,
        None => Arc::new(Target::reach(opts, suite).await?),
    };
    let cells = select_cells(suite, opts)?;
    // Refuse before any request is sent: never clamp a cell to fit.
    if let Some(ctx) = target.info.context_window {
        for c in &cells {
            c.check_fits(ctx)?;
        }
    }
    if !(opts.resume && opts.out_dir.join(JOURNAL_FILE).exists()) {
        RunIdentity::of(opts, &target, suite, suite_text).record(&opts.out_dir)?;
    }
    let (mut journal, read) = open_journal(opts, earlier.is_none())?;
    let previous = earlier.unwrap_or(&read);
    let (session, sizer) = target.session(opts)?;
    let mut records: Vec<RequestRecord> = Vec::new();
    for cell in &cells {
        session
            .measure_cell(cell, opts, &sizer, previous, &mut journal, &mut records)
            .await?;
    }
    let block = matches!(opts.part, RunPart::Block { .. });
    let turnover = if opts.skip_turnover || suite.turnover.is_empty() || block {
        Vec::new()
    } else {
        let model = &target.info.model_id;
        let client = &session.client;
        run_turnover(client, suite, model, &mut journal, previous, opts.quiet).await?
    };
    let embeddings = if opts.skip_turnover || block {
        Vec::new()
    } else {
        run_embeddings(&target, suite, opts).await?
    };
    let mut method = method_of(opts, &sizer, session.dialect);
    let results = if block {
        Vec::new()
    } else {
        let all: Vec<RequestRecord> = previous.iter().chain(&records).cloned().collect();
        let achieved = exact::achieved(&cells, &all);
        if !achieved.is_empty() {
            method.insert("prompt_tokens_achieved".into(), achieved);
        }
        aggregate_cells(opts, &cells, &all)?
    };
    let artifact = RunArtifact {
        schema: RUN_SCHEMA.to_string(),
        provenance: target.provenance(opts, suite, suite_text, started_at)?,
        method,
        rate_sweeps: crate::slo::rate_sweeps(&results),
        cells: results,
        turnover,
        schedule: None,
        embeddings,
    };
    atomic::write_json_atomic(&opts.out_dir.join(ARTIFACT_FILE), &artifact)?;
    let scrapes = session
        .scraper
        .as_ref()
        .map_or_else(Vec::new, |s| s.taken());
    Ok(Measured {
        artifact,
        records,
        scrapes,
        target,
    })
}

/// The server as discovered, and what every request to it needs.
pub struct Target {
    base: String,
    key: Option<String>,
    http: reqwest::Client,
    info: discover::ServerInfo,
    tokenizer: Option<Arc<TokenizerFile>>,
    /// What its `/tokenize` has counted, for every run against it.
    counted: workload::TokenMemo,
}

impl Target {
    /// Load the tokenizer file (an input error, found before anything is
    /// sent), then discover the server.
    async fn reach(opts: &RunOptions, suite: &Suite) -> Result<Target> {
        let key = api_key(opts.api_key_env.as_deref())?;
        let tokenizer = match opts.tokenizer.as_ref().or(suite.tokenizer.as_ref()) {
            Some(p) => Some(Arc::new(TokenizerFile::load(p)?)),
            None => None,
        };
        let base = opts.target.trim_end_matches('/').to_string();
        // Sizing and token counts wait what the run's timeouts allow, not a fixed time.
        let http = crate::measure::http_client()
            .connect_timeout(opts.timeouts.connect)
            .timeout(opts.timeouts.unstreamed())
            .build()
            .context("building HTTP client")?;
        let info = discover::discover(
            &http,
            &base,
            key.as_deref(),
            discover::discovery_wait(&opts.timeouts),
        )
        .await
        .with_context(|| format!("discovering the server at {}", redact_url(&base)))?;
        Ok(Target {
            base,
            key,
            http,
            info,
            tokenizer,
            counted: workload::TokenMemo::default(),
        })
    }

    /// The measuring session (client, estimator, scraper, clock) and the
    /// prompt sizer, both talking to this target.
    fn session(&self, opts: &RunOptions) -> Result<(Session, PromptSizer)> {
        let client = Arc::new(Client::new(ClientConfig {
            base_url: self.base.clone(),
            api_key: self.key.clone(),
            timeouts: opts.timeouts.clone(),
            capture_cap_bytes: 256 * 1024,
        })?);
        let mut sizer = PromptSizer::new(
            self.http.clone(),
            &self.base,
            self.key.clone(),
            &self.info.model_id,
            self.info.has_tokenize,
            opts.timeouts.clone(),
        );
        if let Some(t) = &self.tokenizer {
            sizer = sizer.with_file(t.clone());
        }
        sizer = sizer.with_memo(self.counted.clone());
        let t0 = Instant::now();
        let scraper = Scraper::new(
            &opts.scrape,
            &self.base,
            self.key.clone(),
            &opts.out_dir.join(SCRAPE_LOG_FILE),
            t0,
        )?;
        let session = Session {
            client,
            estimator: Estimator {
                http: self.http.clone(),
                base: self.base.clone(),
                key: self.key.clone(),
                tokenizer: self.tokenizer.clone(),
            },
            model: self.info.model_id.clone(),
            nonce: side_nonce(opts)?,
            t0,
            scraper,
            dialect: workload::LengthDialect::of_server(self.info.llama_cpp),
        };
        Ok((session, sizer))
    }

    fn provenance(
        &self,
        opts: &RunOptions,
        suite: &Suite,
        suite_text: &str,
        started_at: String,
    ) -> Result<Provenance> {
        Ok(Provenance {
            target: redact_url(&self.base),
            model: self.info.model_id.clone(),
            runtime: opts.runtime_label.clone(),
            image: opts.image.clone(),
            server_build: self.info.build.clone(),
            context_window: self.info.context_window,
            api_key_env: opts.api_key_env.clone(),
            suite: suite.name.clone(),
            suite_sha256: Some(sha256_hex(suite_text.as_bytes())),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            host: hostname(),
            started_at,
            ended_at: now_rfc3339(),
            journal: Some(journal::digest(&opts.out_dir.join(JOURNAL_FILE))?),
        })
    }
}

/// Each cell from the journal's records, with the server's metrics over its
/// windows from the scrape log.
fn aggregate_cells(
    opts: &RunOptions,
    cells: &[CellSpec],
    all: &[RequestRecord],
) -> Result<Vec<CellResult>> {
    let scrapes = scrape::read_log(&opts.out_dir.join(SCRAPE_LOG_FILE))?;
    Ok(cells
        .iter()
        .map(|c| {
            let mut r = aggregate::cell(c, all);
            windows::attach(
                &mut r,
                windows::cell_windows(&scrapes, &c.name, all, usize::MAX),
            );
            r
        })
        .collect())
}

/// The cells this run measures (`--cell`, or none for turnover only); in a
/// block, each cell's request count is the requests so far, so aggregation
/// covers every block to date.
fn select_cells(suite: &Suite, opts: &RunOptions) -> Result<Vec<CellSpec>> {
    for name in &opts.only_cells {
        if !suite.cells.iter().any(|c| &c.name == name) {
            bail!(
                "--cell {name}: no such cell in suite '{}' ({})",
                suite.name,
                opts.suite.display()
            );
        }
    }
    Ok(suite
        .cells
        .iter()
        .filter(|c| opts.only_cells.is_empty() || opts.only_cells.contains(&c.name))
        .filter(|_| opts.part != RunPart::TurnoverOnly)
        .cloned()
        .map(|mut c| {
            if let RunPart::Block { first, count, .. } = opts.part {
                c.requests = first + count;
            }
            c
        })
        .collect())
}

/// Beside a run's journal from its start: what it measures, so `--resume`
/// continues only the same run.
pub const IDENTITY_FILE: &str = "run-identity.json";

/// What makes two runs one: the suite's bytes, the target (redacted) and
/// the model it serves. `infergate run --resume` continues only the run
/// its directory holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunIdentity {
    pub suite: String,
    pub suite_sha256: String,
    pub target: String,
    pub model: String,
}

impl RunIdentity {
    fn of(opts: &RunOptions, target: &Target, suite: &Suite, suite_text: &str) -> RunIdentity {
        RunIdentity {
            suite: suite.name.clone(),
            suite_sha256: sha256_hex(suite_text.as_bytes()),
            target: redact_url(opts.target.trim_end_matches('/')),
            model: target.info.model_id.clone(),
        }
    }

    fn record(&self, dir: &std::path::Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(atomic::write_json_atomic(&dir.join(IDENTITY_FILE), self)?)
    }

    /// The identity a run directory records: its file, else what its
    /// artifact's provenance says; None when it has neither.
    pub fn recorded(dir: &std::path::Path) -> Result<Option<RunIdentity>> {
        let path = dir.join(IDENTITY_FILE);
        if path.exists() {
            let bytes = crate::report::read_regular(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            return serde_json::from_slice(&bytes)
                .map(Some)
                .with_context(|| format!("{}: not a run identity", path.display()));
        }
        let art = dir.join(ARTIFACT_FILE);
        if !art.exists() {
            return Ok(None);
        }
        let p = crate::report::read_artifact(&art)?.provenance;
        Ok(p.suite_sha256.map(|sha| RunIdentity {
            suite: p.suite,
            suite_sha256: sha,
            target: p.target,
            model: p.model,
        }))
    }

    /// Refuse to resume `dir` with another suite (by its bytes) or another
    /// target, naming each difference. A qualification's passes do not
    /// call this: their runtime may come back on another port.
    pub fn check_resume(dir: &std::path::Path, suite_text: &str, target: &str) -> Result<()> {
        if !dir.join(JOURNAL_FILE).exists() {
            return Ok(());
        }
        let Some(before) = RunIdentity::recorded(dir)? else {
            return Ok(());
        };
        let (sha, target) = (
            sha256_hex(suite_text.as_bytes()),
            redact_url(target.trim_end_matches('/')),
        );
        let mut differs = Vec::new();
        if before.suite_sha256 != sha {
            differs.push(format!(
                "a suite with sha256 {sha} where it ran suite {} (sha256 {})",
                before.suite, before.suite_sha256
            ));
        }
        if before.target != target {
            differs.push(format!("target {target} where it ran {}", before.target));
        }
        if !differs.is_empty() {
            bail!(
                "--resume: {} holds another run: this one has {}; nothing was appended (choose another --out)",
                dir.display(),
                differs.join("; ")
            );
        }
        Ok(())
    }
}

/// The journal to append to, and the records it already holds (`--resume`,
/// read when `read`: not when the caller holds them);
/// an existing journal without `--resume` is refused, never overwritten.
fn open_journal(opts: &RunOptions, read: bool) -> Result<(Journal, Vec<RequestRecord>)> {
    std::fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let journal_path = opts.out_dir.join(JOURNAL_FILE);
    let mut previous = Vec::new();
    if opts.resume && journal_path.exists() {
        if read {
            previous = journal::read(&journal_path)?;
        }
    } else if journal_path.exists() {
        bail!(
            "{} already exists; pass --resume to continue that run, or choose another --out",
            journal_path.display()
        );
    }
    Ok((Journal::open(&journal_path)?, previous))
}

/// Definitions written into the artifact: the shared notes, how prompts were
/// sized and the timeouts in force.
fn method_of(
    opts: &RunOptions,
    sizer: &PromptSizer,
    dialect: workload::LengthDialect,
) -> BTreeMap<String, String> {
    let mut m = method_notes();
    m.insert("output_length".into(), dialect.describe().into());
    let sizing = if sizer.counts_text() {
        format!(
            "filler bodies counted with {m}; then each request of a plain cell fitted to the cell's target (its unique prefix counted with {m}, its body cut or extended by whole filler words and one-token pad words against the probe's usage.prompt_tokens), before any request is sent; prompt_tokens_achieved says what the server counted",
            m = sizer.method()
        )
    } else {
        format!(
            "filler bodies calibrated with {}; no tokenizer, so each request's unique prefix is not counted and prompts vary by a few tokens: prompt_tokens_achieved says by how much",
            sizer.method()
        )
    };
    m.insert("prompt_sizing".into(), sizing);
    if matches!(opts.part, RunPart::Block { .. }) {
        m.insert(
            "prompt_sizing_blocks".into(),
            format!("a side's first block sizes each cell; later blocks reuse it ({SIZING_FILE})"),
        );
    }
    if opts.scrape.target || !opts.scrape.extra.is_empty() {
        m.insert("server_metrics".into(), opts.scrape.describe());
    }
    let t = &opts.timeouts;
    m.insert(
        "timeouts".into(),
        format!(
            "connect {:?}, first byte {:?}, idle gap between reads {:?}, total {:?}, first byte and total each extended by {:?} per 1,000 prompt tokens (the planned count, else the body's bytes / {BYTES_PER_TOKEN_ESTIMATE}); a request exceeding one is a request_error naming it",
            t.connect, t.first_byte, t.idle, t.total, t.per_1k_prompt_tokens
        ),
    );
    m
}

/// What every request of one run shares.
struct Session {
    client: Arc<Client>,
    estimator: Estimator,
    model: String,
    nonce: String,
    t0: Instant,
    dialect: workload::LengthDialect,
    scraper: Option<Arc<Scraper>>,
}

impl Session {
    /// One cell: size its prompts, warm up (never recorded), then send the
    /// requests the journal lacks, appending each record as it completes.
    async fn measure_cell(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        sizer: &PromptSizer,
        previous: &[RequestRecord],
        journal: &mut Journal,
        all: &mut Vec<RequestRecord>,
    ) -> Result<()> {
        let Some((range, todo)) = still_to_do(cell, opts, previous) else {
            return Ok(());
        };
        let sized = self.sized(cell, opts, sizer).await?;
        // Each request fitted to the target, before any is sent (no measured time).
        let indices = (0..todo.len()).map(|k| todo.nth(k));
        let fitted = exact::fit_requests(sizer, cell, &self.nonce, &sized, range, indices)
            .await
            .with_context(|| format!("sizing each request of cell '{}'", cell.name))?;
        announce(cell, opts, &sized, fitted.as_ref().map(|(_, f)| f));
        let (bodies, fits) = match fitted {
            Some((b, f)) => (Arc::new(b), Some(Arc::new(f))),
            None => (Arc::new(exact::Bodies::uniform(cell, &sized)), None),
        };
        let shape = |nonce: &str, fits: Option<Arc<exact::Fits>>| RequestShape {
            cell: cell.clone(),
            model: self.model.clone(),
            bodies: bodies.clone(),
            fits,
            template_prompt_tokens: sized.template_prompt_tokens,
            dialect: self.dialect,
            source: cell.workload.as_ref().map(|_| {
                Arc::new(source::Source::new(cell, nonce, &sized).with_probe(sized.workload_probe))
            }),
        };
        let warm_up = match opts.part {
            RunPart::Block { warmup, .. } => warmup,
            _ => true,
        };
        if cell.warmup > 0 && warm_up {
            // Warmup prompts are not measured: the sized body as it is.
            let nonce = format!("{}-warm", self.nonce);
            let warm = request_job(
                self.estimator.clone(),
                self.client.clone(),
                shape(&nonce, None),
                nonce,
                self.t0,
            );
            loadgen_drive(cell, cell.warmup, warm, |_| {}).await?;
        }
        self.drive_measured(cell, opts, todo, shape(&self.nonce, fits), journal, all)
            .await
    }

    /// The cell's measured requests, each appended to the journal as it
    /// completes, inside the server's metrics window.
    async fn drive_measured(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        todo: Missing,
        shape: RequestShape,
        journal: &mut Journal,
        all: &mut Vec<RequestRecord>,
    ) -> Result<()> {
        // The server's window: after the warmup, around the measured requests.
        let window = format!("{}/{}", self.nonce, todo.nth(0));
        if let Some(s) = &self.scraper {
            s.take(&cell.name, &window, Phase::Before, &todo.ranges)
                .await?;
        }
        let during = self
            .scraper
            .as_ref()
            .and_then(|s| s.during(&cell.name, &window));
        let progress = Progress::new(opts, &cell.name, todo.len());
        // Sessions and trace offsets need the indices themselves (workload
        // cells only: plain cells keep ranges, nothing per planned request).
        let listed: Vec<usize> = match &cell.workload {
            Some(_) => (0..todo.len()).map(|k| todo.nth(k)).collect(),
            None => Vec::new(),
        };
        let pace = pace_of(cell, shape.source.as_deref(), &listed)?;
        let measured = request_job(
            self.estimator.clone(),
            self.client.clone(),
            shape,
            self.nonce.clone(),
            self.t0,
        );
        let mut write_err: Option<anyhow::Error> = None;
        let todo = Arc::new(todo);
        let n = todo.len();
        crate::measure::loadgen::drive_paced(
            pace,
            cell.concurrency,
            n,
            move |k, s| measured(todo.nth(k), s),
            |rec: RequestRecord| {
                progress.done(rec.outcome != Outcome::Ok);
                if write_err.is_none()
                    && let Err(e) = journal.append(&rec)
                {
                    write_err = Some(e);
                }
                all.push(rec);
            },
        )
        .await;
        drop(during);
        if let Some(s) = &self.scraper {
            s.take(&cell.name, &window, Phase::After, &[]).await?;
        }
        progress.finish();
        write_err.map_or(Ok(()), Err)
    }
}

/// The requests of `cell` this run (or block) has yet to measure, as
/// ranges; `None`, said so, when the journal holds them all.
fn still_to_do(
    cell: &CellSpec,
    opts: &RunOptions,
    previous: &[RequestRecord],
) -> Option<(std::ops::Range<usize>, Missing)> {
    let done: BTreeSet<usize> = previous
        .iter()
        .filter(|r| r.cell == cell.name)
        .map(|r| r.index)
        .collect();
    let range = match opts.part {
        RunPart::Block { first, count, .. } => first..first + count,
        _ => 0..cell.requests,
    };
    // As ranges: memory follows what is done, never what is planned.
    let todo = Missing::new(range.clone(), &done);
    if todo.is_empty() {
        let n = range.len();
        say(
            opts,
            &format!(
                "cell {}: all {n} requests already in the journal",
                cell.name
            ),
        );
        return None;
    }
    Some((range, todo))
}

/// One line saying what the cell will send.
fn announce(
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

impl Session {
    /// The cell's prompt, sized against the server. A block of an
    /// interleaved qualification reuses the first block's sizing of its side
    /// (same server, same cell: `sizing.json` in its directory) rather than
    /// spend three chat probes and a dozen `/tokenize` calls per block; each
    /// request's own usage is still checked against the cell's tolerance.
    async fn sized(
        &self,
        cell: &CellSpec,
        opts: &RunOptions,
        sizer: &PromptSizer,
    ) -> Result<workload::SizedBody> {
        let cache =
            matches!(opts.part, RunPart::Block { .. }).then(|| opts.out_dir.join(SIZING_FILE));
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
}

impl Session {
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

/// How a cell's requests are paced: a trace at its timestamps, sessions in
/// turn order, else the cell's arrival.
fn pace_of(
    cell: &CellSpec,
    source: Option<&source::Source>,
    todo: &[usize],
) -> Result<crate::measure::loadgen::Pace> {
    use crate::measure::loadgen::Pace;
    if let Some(s) = source {
        if let Some(offsets) = s.offsets(todo) {
            return Ok(Pace::At(offsets));
        }
        if let Some(sessions) = s.sessions(todo) {
            // Sessions of request indices, as positions in `todo`.
            let mut at = 0;
            let sessions = sessions
                .into_iter()
                .map(|v| {
                    let p: Vec<usize> = (at..at + v.len()).collect();
                    at += v.len();
                    p
                })
                .collect();
            return Ok(Pace::Sessions {
                sessions,
                think: s.think(),
            });
        }
    }
    Ok(Pace::Arrival(cell.arrival()?, cell.seed.unwrap_or(0)))
}

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

/// The suite's embeddings workloads, one after another.
async fn run_embeddings(
    target: &Target,
    suite: &Suite,
    opts: &RunOptions,
) -> Result<Vec<crate::report::embedding::EmbeddingRun>> {
    let server = crate::measure::embeddings::Server {
        http: &target.http,
        base: &target.base,
        key: target.key.as_deref(),
        model: &target.info.model_id,
        timeouts: opts.timeouts.clone(),
    };
    let mut runs = Vec::with_capacity(suite.embeddings.len());
    for spec in &suite.embeddings {
        let run = crate::measure::embeddings::run(&server, spec, &opts.out_dir).await?;
        if !opts.quiet {
            eprintln!(
                "embeddings {}: {} inputs in {} requests of {}, {} failed, dimension {}",
                run.name,
                run.inputs,
                run.requests,
                run.batch,
                run.failed,
                run.dimension.map_or("-".into(), |d| d.to_string())
            );
        }
        runs.push(run);
    }
    Ok(runs)
}

/// The suite's turnover runs, every request journaled as it completes.
async fn run_turnover(
    client: &Arc<Client>,
    suite: &Suite,
    model: &str,
    journal: &mut Journal,
    previous: &[RequestRecord],
    quiet: bool,
) -> Result<Vec<crate::artifact::TurnoverRun>> {
    let mut runs = Vec::new();
    let mut write_err: Option<anyhow::Error> = None;
    // Parsed and checked when the suite was loaded.
    for mut workload in TurnoverWorkload::of_suite(&suite.turnover) {
        if workload.spec.model.is_none() {
            workload.spec.model = Some(model.to_string());
        }
        let spec = &workload.spec;
        if !quiet {
            eprintln!(
                "turnover {}: {} × {} requests, concurrency {}, contract {}",
                spec.name,
                spec.repeats,
                spec.requests,
                spec.concurrency,
                spec.contract.as_str()
            );
        }
        let mut done = Vec::with_capacity(spec.repeats);
        for repeat in 0..spec.repeats {
            // Resuming: a repeat the journal holds whole is judged again, not re-run.
            if let Some(run) = workload.from_journal(repeat, previous) {
                if !quiet {
                    eprintln!("  {} repeat {repeat}: from the journal", spec.name);
                }
                done.push(run);
                continue;
            }
            let mut on_record = |r: &RequestRecord| {
                if write_err.is_none()
                    && let Err(e) = journal.append(r)
                {
                    write_err = Some(e);
                }
            };
            done.push(
                crate::measure::turnover::run_turnover(
                    client,
                    &workload,
                    repeat,
                    Some(&mut on_record),
                )
                .await,
            );
            if let Some(e) = write_err.take() {
                return Err(e);
            }
        }
        if !quiet {
            for r in &done {
                eprintln!(
                    "  {} repeat {}: {}/{} exact, {} failed, {} contaminated",
                    r.name, r.repeat, r.exact_output_passed, r.requests, r.failed, r.contaminated
                );
            }
        }
        runs.extend(done);
    }
    Ok(runs)
}

/// The requests of a range the journal lacks, as sorted half-open ranges:
/// built from the finished ones, so its size follows what is done (already
/// in memory), not what is planned (a cell may plan a million requests).
#[derive(Debug, PartialEq)]
struct Missing {
    ranges: Vec<[usize; 2]>,
    /// How many missing requests come before each range.
    before: Vec<usize>,
    len: usize,
}

impl Missing {
    fn new(range: std::ops::Range<usize>, done: &BTreeSet<usize>) -> Missing {
        let mut ranges = Vec::new();
        let mut at = range.start;
        for &d in done.range(range.clone()) {
            if d > at {
                ranges.push([at, d]);
            }
            at = d + 1;
        }
        if at < range.end {
            ranges.push([at, range.end]);
        }
        let mut before = Vec::with_capacity(ranges.len());
        let mut len = 0;
        for r in &ranges {
            before.push(len);
            len += r[1] - r[0];
        }
        Missing {
            ranges,
            before,
            len,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `k`-th missing request's index (`k < len`).
    fn nth(&self, k: usize) -> usize {
        let i = self.before.partition_point(|&b| b <= k) - 1;
        self.ranges[i][0] + (k - self.before[i])
    }
}

async fn loadgen_drive<F, Fut>(
    cell: &CellSpec,
    count: usize,
    job: F,
    on_done: impl FnMut(RequestRecord),
) -> Result<()>
where
    F: Fn(usize, Instant) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = RequestRecord> + Send + 'static,
{
    crate::measure::loadgen::drive(
        cell.arrival()?,
        cell.concurrency,
        count,
        cell.seed.unwrap_or(0),
        job,
        on_done,
    )
    .await;
    Ok(())
}

/// One request of a cell: build its body, stream it, classify it.
/// Counts completion tokens client-side when a server sends no usage.
#[derive(Clone)]
struct Estimator {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
    tokenizer: Option<Arc<TokenizerFile>>,
}

impl Estimator {
    /// With the model's own tokenizer (the `tokenizer.json` given, else the
    /// server's `/tokenize`), after the stream ended — never in the per-chunk
    /// loop. The value is flagged as estimated.
    async fn fill(&self, cap: &mut crate::measure::record::StreamCapture) {
        if cap.completion_tokens.is_some() || cap.failure.is_some() {
            return;
        }
        let text = format!("{}{}", cap.reasoning, cap.content);
        if let Some(t) = &self.tokenizer {
            if let Ok(n) = t.count(&text) {
                cap.completion_tokens = Some(n);
                cap.completion_tokens_estimated = true;
            }
            return;
        }
        if let Ok(Some(n)) =
            discover::tokenize_with_key(&self.http, &self.base, self.key.as_deref(), &text).await
        {
            cap.completion_tokens = Some(n as u64);
            cap.completion_tokens_estimated = true;
        }
    }
}

/// What every request of a cell shares.
#[derive(Clone)]
struct RequestShape {
    cell: CellSpec,
    model: String,
    /// Plain cells: the filler, and each request's cut of it (none: the sized body).
    bodies: Arc<exact::Bodies>,
    fits: Option<Arc<exact::Fits>>,
    template_prompt_tokens: Option<u64>,
    dialect: workload::LengthDialect,
    /// Workload cells: what each request sends.
    source: Option<Arc<source::Source>>,
}

fn request_job(
    estimator: Estimator,
    client: Arc<Client>,
    shape: RequestShape,
    nonce: String,
    run_t0: Instant,
) -> impl Fn(
    usize,
    Instant,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = RequestRecord> + Send>>
+ Send
+ Sync
+ 'static {
    move |index, scheduled| {
        let (estimator, client, shape, nonce) = (
            estimator.clone(),
            client.clone(),
            shape.clone(),
            nonce.clone(),
        );
        Box::pin(async move {
            let RequestShape {
                cell,
                model,
                bodies,
                fits,
                template_prompt_tokens,
                dialect,
                source,
            } = shape;
            let (req, target, template, turn) = match &source {
                Some(src) => {
                    let p = src.plan(index);
                    let req =
                        workload::messages_body(&cell, &model, p.messages, p.max_tokens, dialect);
                    let template = template_prompt_tokens.filter(|_| p.unique);
                    (req, p.target_prompt_tokens, template, p.turn)
                }
                None => {
                    let pre = workload::prefix(cell.cache, &nonce, &cell.name, index);
                    let fit = fits.as_ref().and_then(|f| f.get(index));
                    let body = bodies.body(fit.unwrap_or(bodies.base));
                    let content = workload::user_content(&pre, &body);
                    let req = workload::request_body(&cell, &model, content, dialect);
                    (req, Some(cell.prompt_tokens), template_prompt_tokens, None)
                }
            };
            let (sent, mut capture) = client
                .stream_sized(endpoint(cell.endpoint), &req, target)
                .await;
            let sent = Instant::from_std(sent);
            estimator.fill(&mut capture).await;
            if let Some(src) = &source {
                src.record_answer(index, &capture);
            }
            let (outcome, detail) = match &capture.failure {
                Some(f) => (f.class, Some(f.message.clone())),
                None => (Outcome::Ok, None),
            };
            RequestRecord {
                cell: cell.name.clone(),
                index,
                send_offset_ms: ms(sent - run_t0),
                queue_ms: ms(sent.saturating_duration_since(scheduled)),
                target_prompt_tokens: target,
                template_prompt_tokens: template,
                turn,
                capture,
                outcome,
                detail,
            }
        })
    }
}

/// The client's endpoint for a cell's (config does not know the client).
fn endpoint(e: CellEndpoint) -> Endpoint {
    match e {
        CellEndpoint::Chat => Endpoint::Chat,
        CellEndpoint::Completions => Endpoint::Completions,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Definitions written into every artifact, so no reader has to guess.
pub fn method_notes() -> BTreeMap<String, String> {
    [
        ("percentile", stats::PERCENTILE_METHOD),
        ("clock", "monotonic; t_send taken immediately before the request is handed to the HTTP client (connection setup counts)"),
        ("ttfo_ms", "first non-empty reasoning or content delta after t_send"),
        ("ttft_ms", "first non-empty visible content delta after t_send (a role-only chunk is not a token)"),
        ("e2e_ms", "end of stream: [DONE], or connection close after the final chunk"),
        ("decode_tok_s", "(completion_tokens - 1) / (e2e - TTFO); reasoning tokens count in completion_tokens"),
        ("tpot_ms", "(e2e - TTFO) / (completion_tokens - 1)"),
        ("itl_ms", "gaps between consecutive output-bearing chunks (content or reasoning deltas, as both are output tokens), pooled over all requests of the cell (a chunk may carry several tokens, so ITL != TPOT)"),
        ("prefill_tok_s", "prompt_tokens / TTFO"),
        ("queue_ms", "open loop: time between a request's scheduled send and its actual send (coordinated-omission guard); 0 in closed loop"),
        ("tokens", "prompt and completion tokens from the server's usage (stream_options.include_usage); client-side counts are flagged tokens_estimated"),
        ("summaries", "over successful requests only; warmup requests are never recorded"),
        ("slo", "cells with SLOs: a request meets them when it succeeded and every target holds (TTFT and e2e from the scheduled send, TPOT as measured; one output token has no TPOT); failures count as not met; goodput: those requests, and their output tokens, per second of the cell's window (per cluster, first send to last end); request_rows keeps every recorded request"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The nonce a run's unique tags hash: a fresh one per run, but one per side
/// across an interleaved qualification's blocks (kept in the side's
/// directory), so what a workload shares — a group's system prompt, a trace's
/// blocks — is shared across blocks as it would be in one run.
fn side_nonce(opts: &RunOptions) -> Result<String> {
    if !matches!(opts.part, RunPart::Block { .. }) {
        return Ok(run_nonce());
    }
    let path = opts.out_dir.join(NONCE_FILE);
    if let Ok(n) = std::fs::read_to_string(&path)
        && !n.trim().is_empty()
    {
        return Ok(n.trim().to_string());
    }
    let n = run_nonce();
    atomic::write_atomic(&path, n.as_bytes())?;
    Ok(n)
}

/// A side's nonce across its blocks.
pub const NONCE_FILE: &str = "nonce";

fn run_nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}", (t as u64) ^ ((std::process::id() as u64) << 32))
}

fn say(opts: &RunOptions, line: &str) {
    if !opts.quiet {
        eprintln!("{line}");
    }
}

/// A progress bar on a tty (done, in flight, errors); plain lines otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    name: String,
    total: usize,
    done: std::cell::Cell<usize>,
    errors: std::cell::Cell<usize>,
    quiet: bool,
}

impl Progress {
    fn new(opts: &RunOptions, name: &str, total: usize) -> Progress {
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

    fn done(&self, failed: bool) {
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

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_requests_are_ranges_of_what_is_not_done() {
        let done: BTreeSet<usize> = [0, 1, 4, 7, 12].into();
        let m = Missing::new(2..10, &done);
        assert_eq!(m.ranges, vec![[2, 4], [5, 7], [8, 10]]);
        assert_eq!(m.len(), 6);
        let all: Vec<usize> = (0..m.len()).map(|k| m.nth(k)).collect();
        assert_eq!(all, vec![2, 3, 5, 6, 8, 9]);
        assert!(Missing::new(0..2, &done).is_empty());
        // A billion planned requests, none done: one range, nothing per request.
        let huge = Missing::new(0..1_000_000_000, &BTreeSet::new());
        assert_eq!(huge.ranges, vec![[0, 1_000_000_000]]);
        assert_eq!(huge.nth(999_999_999), 999_999_999);
    }

    /// A loopback listener that names a model on `GET /v1/models`, answers
    /// any other GET 404, and accepts every POST (sizing, `/tokenize`) but
    /// never answers it: a server stuck before its first byte.
    async fn answers_discovery_only() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let reply = if head.starts_with(b"GET /v1/models ") {
                        let body = r#"{"object":"list","data":[{"id":"m"}]}"#;
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        )
                    } else if head.starts_with(b"GET ") {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .into()
                    } else {
                        // Held open, never answered, until the client gives up.
                        while !matches!(conn.read(&mut buf).await, Ok(0) | Err(_)) {}
                        return;
                    };
                    let _ = conn.write_all(reply.as_bytes()).await;
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_sizing_request_never_answered_ends_at_the_runs_own_timeouts() {
        let target = answers_discovery_only().await;
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("s.toml");
        std::fs::write(
            &suite,
            "name = \"t\"\n[[cell]]\nname = \"a\"\nprompt_tokens = 64\nmax_tokens = 4\nrequests = 1\n",
        )
        .unwrap();
        let second = Duration::from_secs(1);
        // The first-byte timeout, then the total timeout, is the shorter one.
        for (first_byte, total) in [
            (second, Duration::from_secs(900)),
            (Duration::from_secs(300), second),
        ] {
            let opts = RunOptions {
                target: target.clone(),
                api_key_env: None,
                suite: suite.clone(),
                out_dir: dir.path().join(format!("out-{}", first_byte.as_secs())),
                runtime_label: None,
                image: None,
                only_cells: Vec::new(),
                resume: false,
                timeouts: Timeouts {
                    connect: Duration::from_secs(5),
                    first_byte,
                    idle: Duration::from_secs(60),
                    total,
                    per_1k_prompt_tokens: Duration::ZERO,
                },
                skip_turnover: true,
                quiet: true,
                tokenizer: None,
                part: RunPart::Whole,
                scrape: ScrapeOptions {
                    target: false,
                    extra: Vec::new(),
                    interval: None,
                },
            };
            let t0 = std::time::Instant::now();
            // Before the fix this waited a fixed 600 s: far past this bound.
            let e = tokio::time::timeout(Duration::from_secs(60), run(&opts))
                .await
                .expect("the run ends at its timeouts")
                .expect_err("nothing was sized");
            let e = format!("{e:#}");
            assert!(
                e.contains("(prompt sizing): no answer within 1.0 s (the shorter of the run's first-byte and total timeouts, with the prompt's allowance)"),
                "{e}"
            );
            assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
        }
    }
}
