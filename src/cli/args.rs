//! The command line's options: every subcommand's arguments, parsed by clap.
//! Choices are `ValueEnum`s, so a typo is an error rather than a default.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use infergate::config::adhoc::{CellFlags, OpenLoop};
use infergate::config::suite::{CachePolicy, CellEndpoint, OutputPolicy};
use infergate::measure::client::Timeouts;

use super::qualify;

#[derive(Parser)]
#[command(
    name = "infergate",
    version,
    about = "Qualify an LLM serving runtime against the one in service"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Measure one OpenAI-compatible target with a suite, or with cells described
    /// by flags (written to OUT/suite.toml); writes run.json and journal.jsonl.
    /// Their formats: schemas/infergate-run.v1.json and schemas/journal-record.v1.json.
    Run(Box<RunArgs>),
    /// A reverse proxy that records the traffic it forwards as a trace of
    /// shapes, not text (lengths, block hashes, sampling; docs/capture.md);
    /// replay it as a `trace` workload cell.
    Capture(super::capture::CaptureArgs),
    /// Compare two run artifacts into a runtime-profile-comparison/v1 report
    /// (its format: schemas/runtime-profile-comparison.v1.json).
    Compare(CompareArgs),
    /// Measure a runtime's noise from several runs of it (A/A): drift between
    /// runs, false-alarm rates of every A/A pair, requests per side needed.
    Calibrate(CalibrateArgs),
    /// Recompute what a v1 report derives (bit for bit when it keeps its samples);
    /// exit 0 only when all agree. Says what it could not recompute.
    Verify {
        /// Report file (JSON), or a qualification directory (`qualify --out`'s
        /// `<id>/`): its report made again from the runs it holds.
        file: PathBuf,
        /// Also make the report again from its run directories (or run.json
        /// files): each journal re-aggregated, every file's sha256 checked.
        /// A side of several passes lists them comma-separated, in order
        /// (`out/baseline-1,out/baseline-2`), with --suite.
        #[arg(long, num_args = 2, value_names = ["BASE_DIR", "CAND_DIR"])]
        runs: Vec<String>,
        /// With --runs: the suite the runs used, to judge turnover answers again.
        #[arg(long, requires = "runs")]
        suite: Option<PathBuf>,
    },
    /// Render a v1 report for a terminal, a CI job summary (Markdown) or a browser
    /// (HTML). To parse one instead: schemas/runtime-profile-comparison.v1.json.
    Report(ReportArgs),
    /// Qualify a candidate runtime against the baseline end to end, as a plan
    /// says; or two endpoints with no file (--baseline URL --candidate URL:
    /// the plan and suite written from what discovery finds).
    ///
    /// With --baseline and --candidate, the plan gets the defaults any plan
    /// gets: an interleaved schedule, and adaptive rounds until the gate
    /// decides or the budget (--max-requests per side per cell, --max-minutes)
    /// is spent. Its plan.toml and suite.toml are in the qualification's
    /// directory, so `infergate qualify DIR/plan.toml` repeats it.
    Qualify(qualify::QualifyArgs),
    /// Record the human decision on a report: promote, or retain the baseline.
    Decide(qualify::DecideArgs),
    /// Where each qualification stands, from the ledger.
    Status(qualify::StatusArgs),
    /// Stop the runtime a qualification left serving.
    Stop(qualify::StopArgs),
    /// The decision ledger itself.
    #[command(subcommand)]
    Ledger(qualify::LedgerCmd),
    /// Qualify each new digest an image tag resolves to against the plan's
    /// baseline, once: a digest the ledger holds a finished qualification of
    /// (against that baseline) is said and skipped; an interrupted one resumed.
    Watch(qualify::WatchArgs),
    /// The builds a ledger qualified, as a lineage: which image was paired
    /// with which, verdicts and decisions, and per cell and metric the paired
    /// ratios with the cumulative change along the chain of promotions.
    History(qualify::HistoryArgs),
    /// Resolve an image tag to its digest on its registry (OCI distribution):
    /// `HOST[:PORT]/REPOSITORY:TAG` to `HOST[:PORT]/REPOSITORY@sha256:…`, the
    /// pinned name a plan's `image` takes; for a multi-platform index, also the
    /// platform manifest this host runs. The digest is of the bytes received.
    Resolve {
        /// `HOST[:PORT]/REPOSITORY:TAG` (or `@sha256:…`, checked). A loopback
        /// registry is spoken to over HTTP; any other over HTTPS, with a bearer
        /// token from INFERGATE_REGISTRY_TOKEN when set.
        image: String,
        /// Print the resolution as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a commented plan, and a starter suite.toml beside it, for a
    /// common case: two endpoints, two container images by digest, or two
    /// engine profiles of the bundled reference engine.
    Init {
        #[arg(long, value_enum, default_value = "endpoints")]
        kind: infergate::config::init::Kind,
        /// The plan's path; its suite.toml goes beside it. Neither may exist.
        #[arg(long, short, default_value = "plan.toml")]
        out: PathBuf,
    },
    /// Shell completions on stdout, from these very definitions (e.g.
    /// `infergate completions bash > ~/.local/share/bash-completion/completions/infergate`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page (roff) on stdout: `infergate man > infergate.1; man ./infergate.1`;
    /// with --out DIR, a page for every subcommand too (infergate-qualify.1, …).
    Man {
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Run artifacts (run.json) or run directories of ONE runtime with one suite, at least two.
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// Gate policy (TOML) whose metrics, margins and alpha to calibrate for.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Where to write the calibration (infergate-calibration/v1 JSON).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Also write a policy (the given one, or the defaults) with the measured drift floor.
    #[arg(long)]
    pub write_policy: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Baseline run artifact (run.json).
    pub baseline: PathBuf,
    /// Candidate run artifact (run.json).
    pub candidate: PathBuf,
    /// Gate policy (TOML); defaults: the seed's three p50 metrics at 5%, strict turnover.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Where to write the report.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Also write JUnit XML here (the qualification and each deciding gate part a test case).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Every server timing and metrics line, and the evidence gate's design
    /// in full, in the rendered report.
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Terminal,
    Markdown,
    Html,
    /// JUnit XML for CI: the qualification and every deciding gate part a test case.
    Junit,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Report file (JSON).
    pub file: PathBuf,
    #[arg(long, value_enum, default_value = "terminal")]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Colour: auto (on a tty, when writing to standard output), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// Terminal format: every server timing and metrics line (by default one
    /// line per cell unless a check fails), and the evidence gate's design in
    /// full (by default one line).
    #[arg(long, short)]
    pub verbose: bool,
    /// Instead of rendering: write DIR/metrics.csv (one row per cell metric,
    /// both sides, the deciding bounds) and DIR/requests.csv (one row per
    /// recorded request, failures included).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "format"])]
    pub csv: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Base URL of the target, e.g. http://127.0.0.1:8080
    #[arg(long)]
    pub target: String,
    /// Workload suite (TOML). Without it, the cell flags below describe the
    /// cells, and the equivalent suite is written to OUT/suite.toml.
    #[arg(long, conflicts_with_all = CELL_FLAGS)]
    pub suite: Option<PathBuf>,
    /// Output directory for run.json and journal.jsonl.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Name of the environment variable holding the API key (the key itself is never printed).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Label of the runtime profile being measured (e.g. baseline).
    #[arg(long)]
    pub runtime: Option<String>,
    /// Image reference pinned by digest, recorded in provenance.
    #[arg(long)]
    pub image: Option<String>,
    /// Run only this cell (repeatable).
    #[arg(long = "cell")]
    pub cells: Vec<String>,
    /// Continue a run from its journal, running only the requests it lacks.
    #[arg(long)]
    pub resume: bool,
    /// Skip the suite's turnover runs.
    #[arg(long)]
    pub skip_turnover: bool,
    /// The model's Hugging Face tokenizer.json, for sizing prompts (overrides the suite's).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    #[command(flatten)]
    pub timeouts: TimeoutArgs,
    #[command(flatten)]
    pub scrape: ScrapeArgs,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub cell: CellArgs,
}

/// The server's metrics endpoints, read around each cell.
#[derive(clap::Args)]
pub struct ScrapeArgs {
    /// Do not read the target's /metrics (a target without one is only noted).
    #[arg(long)]
    pub no_server_metrics: bool,
    /// Seconds between scrapes while a cell runs; 0: only before and after it.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub scrape_interval: f64,
    /// Another metrics endpoint to read beside the target's (repeatable), e.g. dcgm=http://127.0.0.1:9400/metrics.
    // Checked in `to_options`, not by clap: clap's error would echo the
    // value, credentials and all.
    #[arg(long = "metrics-endpoint", value_name = "NAME=URL")]
    pub metrics_endpoints: Vec<String>,
}

/// Longest --scrape-interval, seconds (a day): past it a cell is only
/// scraped before and after anyway, and 1e300 s is no `Duration`.
const MAX_SCRAPE_INTERVAL_S: f64 = 86_400.0;

impl ScrapeArgs {
    pub fn to_options(&self) -> anyhow::Result<infergate::measure::scrape::ScrapeOptions> {
        if !(0.0..=MAX_SCRAPE_INTERVAL_S).contains(&self.scrape_interval) {
            anyhow::bail!(
                "--scrape-interval {:?}: expected seconds, from 0 to {MAX_SCRAPE_INTERVAL_S}",
                self.scrape_interval
            );
        }
        Ok(infergate::measure::scrape::ScrapeOptions {
            target: !self.no_server_metrics,
            extra: self
                .metrics_endpoints
                .iter()
                .map(|s| endpoint(s).map_err(|m| anyhow::anyhow!("--metrics-endpoint {m}")))
                .collect::<anyhow::Result<_>>()?,
            interval: (self.scrape_interval > 0.0)
                .then(|| std::time::Duration::from_secs_f64(self.scrape_interval)),
        })
    }
}

fn endpoint(s: &str) -> Result<(String, String), String> {
    let shown = infergate::util::redact(s);
    let (name, url) = s
        .split_once('=')
        .ok_or_else(|| format!("{shown:?}: expected NAME=URL"))?;
    if name.is_empty() || name == infergate::measure::scrape::TARGET_ENDPOINT {
        return Err(format!(
            "{shown:?}: NAME must be given and not `target` (the target's own /metrics)"
        ));
    }
    use infergate::config::urls::{Password, check_http_url};
    check_http_url(url, Password::Redacted).map_err(|m| format!("{name}: {m}"))?;
    Ok((name.to_string(), url.to_string()))
}

/// The ids of [`CellArgs`]' flags: `--suite` conflicts with each by name, so
/// clap's error names the one given (a group would list them all).
const CELL_FLAGS: [&str; 13] = [
    "prompt_tokens",
    "tolerance_percent",
    "max_tokens",
    "requests",
    "concurrency",
    "rate",
    "arrival",
    "warmup",
    "cache",
    "seed",
    "output",
    "endpoint",
    "slo",
];

/// An ad-hoc run's cells, instead of `--suite` (not together with it).
#[derive(clap::Args)]
#[command(next_help_heading = "Cell (without --suite)")]
pub struct CellArgs {
    /// Prompt tokens each request aims for (required without --suite).
    #[arg(long)]
    pub prompt_tokens: Option<u64>,
    /// How far a sized prompt may be from --prompt-tokens, percent [default: 10].
    #[arg(long)]
    pub tolerance_percent: Option<f64>,
    /// max_tokens of each request (required without --suite).
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Requests measured per cell (required without --suite).
    #[arg(long)]
    pub requests: Option<usize>,
    /// Requests in flight (closed loop) or their cap (with --rate); a list
    /// (1,4,16) makes one cell per value [default: 1; with --rate: no cap].
    #[arg(long, value_delimiter = ',')]
    pub concurrency: Vec<usize>,
    /// Open loop at this many requests per second; a list (2,4,8) makes one
    /// cell per value.
    #[arg(long, value_delimiter = ',')]
    pub rate: Vec<f64>,
    /// How --rate spaces the sends [default: poisson].
    #[arg(long, value_enum)]
    pub arrival: Option<ArrivalArg>,
    /// Requests sent before measuring, never recorded [default: 0].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// unique: a fresh prefix per request (cold prefill); shared: one prefix [default: unique].
    #[arg(long, value_enum)]
    pub cache: Option<CacheArg>,
    /// Seed of the open-loop schedule and prompt filler.
    #[arg(long)]
    pub seed: Option<u64>,
    /// fixed: ask the server for exactly --max-tokens (ignore_eos /
    /// min_tokens); free: let it stop [default: fixed].
    #[arg(long, value_enum)]
    pub output: Option<OutputArg>,
    /// chat: /v1/chat/completions; completions: /v1/completions, the prompt
    /// as text with no chat template [default: chat].
    #[arg(long, value_enum)]
    pub endpoint: Option<EndpointArg>,
    /// SLOs per request, any subset: `ttft:1500,tpot:80,e2e:4000` (ms), and
    /// `min:0.9`, the attainment a cell must reach to hold [default min: 0.9].
    /// The run reports attainment and goodput.
    #[arg(long)]
    pub slo: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum OutputArg {
    Fixed,
    Free,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum EndpointArg {
    Chat,
    Completions,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ArrivalArg {
    Poisson,
    Constant,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum CacheArg {
    Unique,
    Shared,
}

impl CellArgs {
    pub fn to_flags(&self) -> CellFlags {
        CellFlags {
            prompt_tokens: self.prompt_tokens,
            tolerance_percent: self.tolerance_percent,
            max_tokens: self.max_tokens,
            concurrency: self.concurrency.clone(),
            rate: self.rate.clone(),
            arrival: self.arrival.map(|a| match a {
                ArrivalArg::Poisson => OpenLoop::Poisson,
                ArrivalArg::Constant => OpenLoop::Constant,
            }),
            requests: self.requests,
            warmup: self.warmup,
            cache: self.cache.map(|c| match c {
                CacheArg::Unique => CachePolicy::Unique,
                CacheArg::Shared => CachePolicy::Shared,
            }),
            seed: self.seed,
            output: self.output.map(|o| match o {
                OutputArg::Fixed => OutputPolicy::Fixed,
                OutputArg::Free => OutputPolicy::Free,
            }),
            endpoint: self.endpoint.map(|e| match e {
                EndpointArg::Chat => CellEndpoint::Chat,
                EndpointArg::Completions => CellEndpoint::Completions,
            }),
            slo: self.slo.clone(),
        }
    }
}

#[derive(clap::Args, Clone)]
pub struct TimeoutArgs {
    /// Connect timeout, seconds.
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    pub connect_timeout: f64,
    /// Time to the first response byte, seconds.
    #[arg(long, default_value_t = 300.0, value_parser = seconds)]
    pub first_byte_timeout: f64,
    /// Longest gap between stream reads, seconds.
    #[arg(long, default_value_t = 60.0, value_parser = seconds)]
    pub idle_timeout: f64,
    /// Whole request, seconds.
    #[arg(long, default_value_t = 900.0, value_parser = seconds)]
    pub total_timeout: f64,
    /// Seconds added to the first-byte and total timeouts per 1,000 prompt
    /// tokens (prefill grows with the prompt); 0 for none.
    #[arg(long, default_value_t = 2.0, value_parser = allowance_seconds)]
    pub timeout_per_1k_prompt_tokens: f64,
}

/// A timeout in seconds: positive, finite, and small enough for a `Duration`
/// (`Duration::from_secs_f64` would panic on anything else).
fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if v.is_nan() || v <= 0.0 || Duration::try_from_secs_f64(v).is_err() {
        return Err(format!(
            "{s:?}: a timeout must be a positive, finite number of seconds"
        ));
    }
    Ok(v)
}

/// Like [`seconds`], zero allowed.
fn allowance_seconds(s: &str) -> Result<f64, String> {
    if s.trim().parse::<f64>() == Ok(0.0) {
        return Ok(0.0);
    }
    seconds(s)
}

impl TimeoutArgs {
    pub fn to_timeouts(&self) -> Timeouts {
        Timeouts {
            connect: Duration::from_secs_f64(self.connect_timeout),
            first_byte: Duration::from_secs_f64(self.first_byte_timeout),
            idle: Duration::from_secs_f64(self.idle_timeout),
            total: Duration::from_secs_f64(self.total_timeout),
            per_1k_prompt_tokens: Duration::from_secs_f64(self.timeout_per_1k_prompt_tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Args;

    use super::*;

    #[test]
    fn a_scrape_interval_too_long_for_a_duration_is_refused_not_a_panic() {
        let args = |v: f64| ScrapeArgs {
            no_server_metrics: false,
            scrape_interval: v,
            metrics_endpoints: Vec::new(),
        };
        for v in [
            1e300,
            f64::INFINITY,
            f64::NAN,
            -1.0,
            MAX_SCRAPE_INTERVAL_S + 1.0,
        ] {
            let e = args(v).to_options().unwrap_err().to_string();
            assert!(
                e.starts_with("--scrape-interval ") && e.contains("from 0 to 86400"),
                "{e}"
            );
        }
        assert!(args(0.0).to_options().unwrap().interval.is_none());
        assert_eq!(
            args(MAX_SCRAPE_INTERVAL_S).to_options().unwrap().interval,
            Some(Duration::from_secs(86_400))
        );
    }

    #[test]
    fn the_prompt_allowance_may_be_zero_but_never_negative() {
        assert_eq!(allowance_seconds("0"), Ok(0.0));
        assert_eq!(allowance_seconds("2.5"), Ok(2.5));
        for bad in ["-1", "nan", "inf", "x"] {
            assert!(allowance_seconds(bad).is_err(), "{bad}");
        }
        assert!(seconds("0").is_err(), "the other timeouts stay positive");
    }

    #[test]
    fn suite_conflicts_with_every_cell_flag() {
        let cmd = CellArgs::augment_args(clap::Command::new("t"));
        let ids: Vec<&str> = cmd.get_arguments().map(|a| a.get_id().as_str()).collect();
        assert_eq!(ids, CELL_FLAGS, "CELL_FLAGS must list CellArgs' flags");
    }
}
