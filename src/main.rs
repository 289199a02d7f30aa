//! The `infergate` command line: parses arguments and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};

use infergate::client::Timeouts;
use infergate::runner::{self, RunOptions, RunPart};
use infergate::{cli_qualify, report};
use std::io::IsTerminal;

#[derive(Parser)]
#[command(
    name = "infergate",
    version,
    about = "Qualify an LLM serving runtime against the one in service"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure one OpenAI-compatible target with a suite; writes run.json and journal.jsonl.
    Run(RunArgs),
    /// Compare two run artifacts into a runtime-profile-comparison/v1 report.
    Compare(CompareArgs),
    /// Measure a runtime's noise from several runs of it (A/A): drift between
    /// runs, false-alarm rates of every A/A pair, requests per side needed.
    Calibrate(CalibrateArgs),
    /// Recompute what a v1 report derives (bit for bit when it keeps its samples);
    /// exit 0 only when all agree. Says what it could not recompute.
    Verify {
        /// Report file (JSON).
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
    /// Render a v1 report for a terminal, a CI job summary (Markdown) or a browser (HTML).
    Report(ReportArgs),
    /// Qualify a candidate runtime against the baseline end to end, as a plan says.
    Qualify(cli_qualify::QualifyArgs),
    /// Record the human decision on a report: promote, or retain the baseline.
    Decide(cli_qualify::DecideArgs),
    /// Where each qualification stands, from the ledger.
    Status(cli_qualify::StatusArgs),
    /// Stop the runtime a qualification left serving.
    Stop(cli_qualify::StopArgs),
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// Run artifacts (run.json) or run directories of ONE runtime with one suite, at least two.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// Gate policy (TOML) whose metrics, margins and alpha to calibrate for.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Where to write the calibration (infergate-calibration/v1 JSON).
    #[arg(long, short)]
    out: PathBuf,
    /// Also write a policy (the given one, or the defaults) with the measured drift floor.
    #[arg(long)]
    write_policy: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Baseline run artifact (run.json).
    baseline: PathBuf,
    /// Candidate run artifact (run.json).
    candidate: PathBuf,
    /// Gate policy (TOML); defaults: the seed's three p50 metrics at 5%, strict turnover.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Where to write the report.
    #[arg(long, short)]
    out: PathBuf,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Terminal,
    Markdown,
    Html,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Report file (JSON).
    file: PathBuf,
    #[arg(long, value_enum, default_value = "terminal")]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Colour: auto (on a tty), always, never.
    #[arg(long, default_value = "auto")]
    color: String,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Base URL of the target, e.g. http://127.0.0.1:8080
    #[arg(long)]
    target: String,
    /// Workload suite (TOML).
    #[arg(long)]
    suite: PathBuf,
    /// Output directory for run.json and journal.jsonl.
    #[arg(long, short)]
    out: PathBuf,
    /// Name of the environment variable holding the API key (the key itself is never printed).
    #[arg(long)]
    api_key_env: Option<String>,
    /// Label of the runtime profile being measured (e.g. baseline).
    #[arg(long)]
    runtime: Option<String>,
    /// Image reference pinned by digest, recorded in provenance.
    #[arg(long)]
    image: Option<String>,
    /// Run only this cell (repeatable).
    #[arg(long = "cell")]
    cells: Vec<String>,
    /// Continue a run from its journal, running only the requests it lacks.
    #[arg(long)]
    resume: bool,
    /// Skip the suite's turnover runs.
    #[arg(long)]
    skip_turnover: bool,
    /// The model's Hugging Face tokenizer.json, for sizing prompts (overrides the suite's).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    #[command(flatten)]
    timeouts: TimeoutArgs,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args, Clone)]
struct TimeoutArgs {
    /// Connect timeout, seconds.
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    connect_timeout: f64,
    /// Time to the first response byte, seconds.
    #[arg(long, default_value_t = 300.0, value_parser = seconds)]
    first_byte_timeout: f64,
    /// Longest gap between stream reads, seconds.
    #[arg(long, default_value_t = 60.0, value_parser = seconds)]
    idle_timeout: f64,
    /// Whole request, seconds.
    #[arg(long, default_value_t = 900.0, value_parser = seconds)]
    total_timeout: f64,
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

impl TimeoutArgs {
    fn to_timeouts(&self) -> Timeouts {
        Timeouts {
            connect: Duration::from_secs_f64(self.connect_timeout),
            first_byte: Duration::from_secs_f64(self.first_byte_timeout),
            idle: Duration::from_secs_f64(self.idle_timeout),
            total: Duration::from_secs_f64(self.total_timeout),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(dispatch(cli.cmd)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn dispatch(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        Cmd::Run(a) => {
            let opts = RunOptions {
                target: a.target,
                api_key_env: a.api_key_env,
                suite: a.suite,
                out_dir: a.out.clone(),
                runtime_label: a.runtime,
                image: a.image,
                only_cells: a.cells,
                resume: a.resume,
                timeouts: a.timeouts.to_timeouts(),
                skip_turnover: a.skip_turnover,
                quiet: a.quiet,
                tokenizer: a.tokenizer,
                part: RunPart::Whole,
            };
            let art = runner::run(&opts).await?;
            for c in &art.cells {
                let eligible = if c.performance_eligible {
                    "eligible".to_string()
                } else {
                    format!("NOT eligible: {}", c.ineligible_reasons.join("; "))
                };
                println!(
                    "{}: {}/{} ok, {}",
                    c.name, c.succeeded, c.requests, eligible
                );
            }
            println!("wrote {}", a.out.join(runner::ARTIFACT_FILE).display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Qualify(a) => cli_qualify::main_qualify(a).await,
        Cmd::Decide(a) => cli_qualify::main_decide(a).await,
        Cmd::Status(a) => cli_qualify::main_status(a).await,
        Cmd::Stop(a) => cli_qualify::main_stop(a).await,
        Cmd::Compare(a) => {
            let report = report::compare_files(&a.baseline, &a.candidate, a.policy.as_deref())?;
            report::write_report_atomic(&a.out, &report)?;
            println!("wrote {}", a.out.display());
            print!(
                "{}",
                report::terminal(&report, std::io::stdout().is_terminal())
            );
            Ok(ExitCode::from(report::exit_code(&report)))
        }
        Cmd::Calibrate(a) => calibrate(a),
        Cmd::Verify { file, runs, suite } => {
            let value = report::read_report_value(&file)?;
            let v = match runs.as_slice() {
                [b, c] => {
                    let dirs = |s: &str| s.split(',').map(PathBuf::from).collect();
                    report::verify_runs(
                        &value,
                        &report::RunDirs {
                            baseline: dirs(b),
                            candidate: dirs(c),
                            suite,
                        },
                    )
                }
                _ => report::verify_report(&value),
            };
            print!("{}", verify_text(&file.display().to_string(), &v));
            Ok(ExitCode::from(if v.is_clean() { 0 } else { 1 }))
        }
        Cmd::Report(a) => {
            let value = report::read_report_value(&a.file)?;
            let color = match a.color.as_str() {
                "always" => true,
                "never" => false,
                _ => a.out.is_none() && std::io::stdout().is_terminal(),
            };
            let text = match a.format {
                Format::Terminal => report::terminal(&value, color),
                Format::Markdown => report::markdown(&value),
                Format::Html => report::html(&value),
            };
            match a.out {
                Some(path) => infergate::atomic::write_atomic(&path, text.as_bytes())?,
                None => print!("{text}"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Text from a report, made unable to drive a terminal: control and bidi
/// characters shown as escapes.
fn inert(s: &str) -> String {
    s.chars()
        .map(|c| {
            let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || bidi {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// What `verify` prints: the disagreements, then what could not be checked.
fn verify_text(name: &str, v: &report::Verification) -> String {
    let mut out = if v.is_clean() {
        format!("{name}: everything verify could recompute agrees with the report\n")
    } else {
        let mut s = format!("{name}: {} disagreement(s)\n", v.disagreements.len());
        for p in &v.disagreements {
            s.push_str(&format!("  {}\n", inert(&p.to_string())));
        }
        s
    };
    if !v.unchecked.is_empty() {
        out.push_str("not checked (this report does not hold what it would take):\n");
        for u in &v.unchecked {
            out.push_str(&format!("  - {u}\n"));
        }
    }
    out
}

fn calibrate(a: CalibrateArgs) -> Result<ExitCode> {
    use anyhow::Context;
    let policy = match &a.policy {
        Some(p) => report::Policy::from_file(p)?,
        None => report::Policy::default(),
    };
    let mut runs = Vec::new();
    for p in &a.runs {
        let file = if p.is_dir() {
            p.join(runner::ARTIFACT_FILE)
        } else {
            p.clone()
        };
        runs.push((file.display().to_string(), report::read_artifact(&file)?));
    }
    let c = report::calibrate::calibrate(&runs, &policy, &runner::now_rfc3339())
        .context("calibrating")?;
    infergate::atomic::write_json_atomic(&a.out, &c)?;
    println!(
        "{} runs, {} A/A pairs: point rule failed {}, evidence pass {} / fail {} / inconclusive {}",
        c.runs.len(),
        c.aa_pairs.pairs,
        c.aa_pairs.point_rule_failed,
        c.aa_pairs.evidence_pass,
        c.aa_pairs.evidence_fail,
        c.aa_pairs.evidence_inconclusive
    );
    for cell in &c.cells {
        for m in &cell.metrics {
            println!(
                "  {}/{}: per-request CV {:.1}%, within-run s.e. {:.2}%, between runs {:.2}%, drift {:.2}%, interleaved needs {} req/side",
                cell.cell,
                m.metric,
                m.per_request_cv_percent,
                m.within_run_se_percent,
                m.between_runs_sd_percent,
                m.drift_sd_percent,
                m.requests_per_side_interleaved
                    .map_or_else(|| "?".to_string(), |n| n.to_string())
            );
        }
    }
    println!("drift floor: {}% per run", c.drift_sd_percent);
    if let Some(path) = &a.write_policy {
        let base = match &a.policy {
            Some(p) => {
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?
            }
            None => include_str!("../policies/default.toml").to_string(),
        };
        let text =
            report::calibrate::policy_with_drift(&base, &c.policy_snippet).with_context(|| {
                format!(
                    "--write-policy: add this to the policy by hand:\n{}",
                    c.policy_snippet
                )
            })?;
        infergate::atomic::write_atomic(path, text.as_bytes())?;
        println!("wrote {}", path.display());
    }
    println!("wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}
