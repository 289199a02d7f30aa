//! `infergate run`: measure one target with one suite. Orchestrates the stages
//! (discover → size prompts → load → journal → aggregate → artifact); holds no math.
//!
//! [`target`]: the server as discovered; [`session`]: what every request of
//! the run shares, and each cell driven through it; [`sizing`]: a cell's
//! prompt sized before it is sent; [`request`]: one measured request;
//! [`identity`]: what makes a run resumable (identity, journal, nonce);
//! [`method`]: the definitions the artifact carries; [`progress`]: what the
//! run says as it goes.

mod capacity;
mod identity;
mod method;
mod progress;
mod request;
mod session;
mod sizing;
mod target;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};

use crate::artifact::{CellResult, RUN_SCHEMA, RunArtifact, TurnoverSkip};
use crate::atomic;
use crate::config::suite::{CellSpec, Suite};
use crate::measure::client::{Client, Timeouts};
use crate::measure::exact;
use crate::measure::journal::Journal;
use crate::measure::record::RequestRecord;
use crate::measure::scrape::{self, SCRAPE_LOG_FILE, ScrapeEntry, ScrapeOptions};
use crate::measure::turnover::TurnoverWorkload;
use crate::measure::{aggregate, windows};
use crate::util::now_rfc3339;

pub use capacity::{capacity_run, segments as capacity_segments};
pub use identity::{IDENTITY_FILE, NONCE_FILE, RunIdentity};
pub use method::method_notes;
pub use sizing::SIZING_FILE;
pub use target::Target;

use identity::open_journal;
use method::method_of;

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
    /// Leave the turnover workloads and embeddings out, and who asked: the
    /// artifact records it so `compare` reports those gates as not run.
    pub skip_turnover: Option<TurnoverSkip>,
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
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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
    /// One segment of each selected capacity cell at `load` (its warm-up,
    /// then its measured requests, drained), numbered past every segment
    /// the journal holds; no turnover, no cells aggregated: `qualify` runs
    /// two runtimes' searches on one level schedule and pools the segments.
    CapacitySegment { load: f64 },
}

impl RunPart {
    /// A part of a run whose caller pools what it measured.
    fn pooled_by_caller(self) -> bool {
        matches!(
            self,
            RunPart::Block { .. } | RunPart::CapacitySegment { .. }
        )
    }
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
    /// What this run sent besides its measured and warmup requests.
    pub probes: Probes,
}

/// Requests a run sent besides its measured and warmup requests: named
/// beside them in what a qualification spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Probes {
    /// Discovery (`/v1/models`, `/props`, the build, a `/tokenize` probe),
    /// when this run discovered the server (not one an earlier run reached).
    pub discovery: usize,
    /// Prompt-sizing requests of one output token.
    pub prompt_sizing: usize,
    /// `/tokenize` calls sizing and fitting the prompts.
    pub tokenize: usize,
    /// Scrapes of the server's own `/metrics` (those of other endpoints go
    /// to other servers).
    pub metrics: usize,
}

impl Probes {
    pub fn total(&self) -> usize {
        self.discovery + self.prompt_sizing + self.tokenize + self.metrics
    }
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
    let (target, discovery) = match reached.filter(|t| t.base == opts.target.trim_end_matches('/'))
    {
        Some(t) => (t, 0),
        None => {
            let t = Target::reach(opts, suite).await?;
            let sent = t.info.requests;
            (Arc::new(t), sent)
        }
    };
    let cells = select_cells(suite, opts)?;
    // Refuse before any request is sent: never clamp a cell to fit.
    if let Some(ctx) = target.info.context_window {
        for c in &cells {
            c.check_fits(ctx)?;
        }
    }
    if !(opts.resume && opts.out_dir.join(JOURNAL_FILE).exists()) {
        RunIdentity::of(opts, &target.info.model_id, suite, suite_text).record(&opts.out_dir)?;
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
    let block = opts.part.pooled_by_caller();
    let turnover = if opts.skip_turnover.is_some() || suite.turnover.is_empty() || block {
        Vec::new()
    } else {
        let model = &target.info.model_id;
        let client = &session.client;
        run_turnover(client, suite, model, &mut journal, previous, opts.quiet).await?
    };
    let embeddings = if opts.skip_turnover.is_some() || block {
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
        // A block is part of a run, not a run that skipped anything.
        turnover_not_run: opts.skip_turnover.filter(|_| !block),
    };
    atomic::write_json_atomic(&opts.out_dir.join(ARTIFACT_FILE), &artifact)?;
    let scrapes = session
        .scraper
        .as_ref()
        .map_or_else(Vec::new, |s| s.taken());
    let (prompt_sizing, tokenize) = sizer.probes_sent();
    let metrics = scrapes
        .iter()
        .filter(|s| s.endpoint == crate::measure::scrape::TARGET_ENDPOINT)
        .count();
    Ok(Measured {
        artifact,
        records,
        scrapes,
        target,
        probes: Probes {
            discovery,
            prompt_sizing,
            tokenize,
            metrics,
        },
    })
}

/// Each cell from the journal's records, with the server's metrics over its
/// windows from the scrape log.
fn aggregate_cells(
    opts: &RunOptions,
    cells: &[CellSpec],
    all: &[RequestRecord],
) -> Result<Vec<CellResult>> {
    let scrapes = scrape::read_log(&opts.out_dir.join(SCRAPE_LOG_FILE))?;
    cells
        .iter()
        .map(|c| {
            let mut r = aggregate::cell(c, all);
            windows::attach(
                &mut r,
                windows::cell_windows(&scrapes, &c.name, all, usize::MAX),
            );
            if c.capacity.is_some() {
                r.capacity = Some(capacity_run(c, all)?);
            }
            r.fidelity = crate::measure::fidelity::of(c, all);
            Ok(r)
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
                skip_turnover: Some(TurnoverSkip::SkippedByRun),
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
