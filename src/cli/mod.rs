//! The `infergate` command line, in the binary only: [`args`] (what clap
//! parses), [`dispatch`] (one library call per subcommand) and the front
//! ends of the qualification commands ([`qualify`]).

/// `print!` that returns an error instead of panicking when standard
/// output is closed ([`StdoutClosed`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::stdout(format!($($arg)*).as_bytes())
    };
}

/// `println!` as [`out!`] is `print!`.
macro_rules! outln {
    () => {
        $crate::cli::stdout(b"\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::stdout(format!("{}\n", format_args!($($arg)*)).as_bytes())
    };
}

pub mod args;
pub mod capture;
mod endpoints;
mod exports;
pub mod qualify;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use infergate::measure::runner::{self, RunOptions, RunPart};
use infergate::report;

pub use args::Cli;
use args::{CalibrateArgs, Cmd, ColorChoice, CompareArgs, Format, ReportArgs};

pub async fn dispatch(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        Cmd::Run(a) => run(*a).await,
        Cmd::Qualify(a) => qualify::main_qualify(a).await,
        Cmd::Decide(a) => qualify::main_decide(a).await,
        Cmd::Status(a) => qualify::main_status(a).await,
        Cmd::Stop(a) => qualify::main_stop(a).await,
        Cmd::Ledger(c) => qualify::main_ledger(c),
        Cmd::Capture(a) => capture::main_capture(a).await,
        Cmd::Compare(a) => compare(a),
        Cmd::Calibrate(a) => calibrate(a),
        Cmd::Verify { file, runs, suite } => verify(file, runs, suite),
        Cmd::Report(a) => render(a),
        Cmd::Watch(a) => qualify::main_watch(a).await,
        Cmd::History(a) => qualify::main_history(a),
        Cmd::Resolve { image, json } => resolve(&image, json).await,
        Cmd::Init { kind, out } => init(kind, &out),
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = args::Cli::command();
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut cmd, "infergate", &mut text);
            stdout(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Man { out } => {
            use clap::CommandFactory;
            match out {
                Some(dir) => man_pages(args::Cli::command(), &dir)
                    .with_context(|| format!("writing manual pages into {}", dir.display()))?,
                None => {
                    let mut text = Vec::new();
                    clap_mangen::Man::new(args::Cli::command())
                        .render(&mut text)
                        .context("rendering the manual page")?;
                    stdout(&text)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Standard output was closed before all was written (`infergate status
/// --json | head -c 600`): `main` ends the command as a Unix tool ends,
/// by SIGPIPE, saying nothing.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// Write `bytes` to standard output; a closed pipe is [`StdoutClosed`].
pub fn stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    std::io::stdout().lock().write_all(bytes).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            anyhow::Error::new(StdoutClosed)
        } else {
            anyhow::Error::new(e).context("writing to standard output")
        }
    })
}

/// `man --out DIR`: the page of `cmd` and of every subcommand that is not
/// hidden (`infergate.1`, `infergate-qualify.1`, …), each written as every
/// other output is: atomically, and only as a regular file.
fn man_pages(cmd: clap::Command, dir: &std::path::Path) -> Result<()> {
    fn pages(cmd: clap::Command, dir: &std::path::Path) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            pages(sub, dir)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let mut text = Vec::new();
        man.render(&mut text)?;
        infergate::atomic::write_atomic(&dir.join(man.get_filename()), &text)?;
        Ok(())
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    pages(cmd, dir)
}

/// `infergate compare`: two run artifacts → the report, never over an input.
fn compare(a: CompareArgs) -> Result<ExitCode> {
    let mut inputs = vec![
        ("baseline run artifact", a.baseline.as_path()),
        ("candidate run artifact", a.candidate.as_path()),
    ];
    if let Some(p) = &a.policy {
        inputs.push(("policy", p.as_path()));
    }
    infergate::atomic::refuse_overwriting_inputs(&a.out, &inputs)?;
    if infergate::atomic::same_file(&a.baseline, &a.candidate) {
        anyhow::bail!(
            "compare: baseline {} and candidate {} are the same file: a run compared with itself shows no difference by construction",
            a.baseline.display(),
            a.candidate.display()
        );
    }
    let report = report::compare_files(&a.baseline, &a.candidate, a.policy.as_deref())?;
    // The journals the run artifacts name are inputs too.
    let read: Vec<(String, PathBuf)> = report
        .provenance
        .iter()
        .flat_map(|p| &p.inputs)
        .map(|i| (format!("{} {}", i.side, i.role), PathBuf::from(&i.path)))
        .collect();
    let read: Vec<(&str, &std::path::Path)> = read
        .iter()
        .map(|(w, p)| (w.as_str(), p.as_path()))
        .collect();
    infergate::atomic::refuse_overwriting_inputs(&a.out, &read)?;
    report::write_report_atomic(&a.out, &report)?;
    outln!("wrote {}", a.out.display())?;
    inputs.extend(read.iter().copied());
    inputs.push(("report", a.out.as_path()));
    exports::after_report(&report.to_value(), a.junit.as_deref(), &inputs)?;
    let opts = report::TerminalOptions {
        color: std::io::stdout().is_terminal(),
        verbose: a.verbose,
    };
    out!("{}", report::terminal(&report, opts))?;
    Ok(ExitCode::from(report::exit_code(&report)))
}

/// `infergate verify`: a report (or a qualification directory) recomputed.
fn verify(file: PathBuf, runs: Vec<String>, suite: Option<PathBuf>) -> Result<ExitCode> {
    // A qualification directory: its report, made again from its runs.
    if file.is_dir() {
        if !runs.is_empty() {
            anyhow::bail!(
                "{}: a qualification directory names its own runs; give its report.json to choose them with --runs",
                file.display()
            );
        }
        let (path, dirs) = infergate::verify_runs::qualification_dirs(&file)?;
        let value = report::read_report_value(&path)?;
        let v = infergate::verify_runs::verify_runs(&value, &dirs);
        out!("{}", verify_text(&path.display().to_string(), &v))?;
        return Ok(ExitCode::from(if v.is_clean() { 0 } else { 1 }));
    }
    let value = report::read_report_value(&file)?;
    let v = match runs.as_slice() {
        [b, c] => {
            let dirs = |s: &str| s.split(',').map(PathBuf::from).collect();
            infergate::verify_runs::verify_runs(
                &value,
                &infergate::verify_runs::RunDirs {
                    baseline: dirs(b),
                    candidate: dirs(c),
                    suite,
                },
            )
        }
        _ => report::verify_report(&value),
    };
    out!("{}", verify_text(&file.display().to_string(), &v))?;
    Ok(ExitCode::from(if v.is_clean() { 0 } else { 1 }))
}

/// `infergate report`: a report rendered as text, Markdown, HTML, JUnit or CSV.
fn render(a: ReportArgs) -> Result<ExitCode> {
    let value = report::read_report_value(&a.file)?;
    if let Some(dir) = &a.csv {
        exports::write_csv(&value, dir, &a.file)?;
        return Ok(ExitCode::SUCCESS);
    }
    let color = match a.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => a.out.is_none() && std::io::stdout().is_terminal(),
    };
    let text = match a.format {
        Format::Terminal => report::terminal(
            &value,
            report::TerminalOptions {
                color,
                verbose: a.verbose,
            },
        ),
        Format::Markdown => report::markdown(&value),
        Format::Html => report::html(&value),
        Format::Junit => report::junit(&value),
    };
    match a.out {
        Some(path) => {
            infergate::atomic::refuse_overwriting_inputs(&path, &[("report", &a.file)])?;
            infergate::atomic::write_atomic(&path, text.as_bytes())?
        }
        None => out!("{text}")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `infergate run`: with `--suite`, or with the suite the cell flags make.
async fn run(a: args::RunArgs) -> Result<ExitCode> {
    infergate::config::urls::check_http_url(&a.target, infergate::config::urls::Password::Redacted)
        .map_err(|m| anyhow::anyhow!("--target {m}"))?;
    let scrape = a.scrape.to_options()?;
    let adhoc = a.suite.is_none();
    let suite = match a.suite {
        Some(path) => path,
        None => adhoc_suite(&a.cell, &a.out)?,
    };
    if a.resume {
        let text = infergate::util::read_input(&suite)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", suite.display()))?;
        runner::RunIdentity::check_resume(&a.out, &text, &a.target)?;
    }
    let opts = RunOptions {
        target: a.target,
        api_key_env: a.api_key_env,
        suite: suite.clone(),
        out_dir: a.out.clone(),
        runtime_label: a.runtime,
        image: a.image,
        only_cells: a.cells,
        resume: a.resume,
        timeouts: a.timeouts.to_timeouts(),
        skip_turnover: a
            .skip_turnover
            .then_some(infergate::artifact::TurnoverSkip::SkippedByRun),
        quiet: a.quiet,
        tokenizer: a.tokenizer,
        part: RunPart::Whole,
        scrape,
    };
    let art = runner::run(&opts).await?;
    for c in &art.cells {
        let eligible = if c.performance_eligible {
            "eligible".to_string()
        } else {
            format!("NOT eligible: {}", c.ineligible_reasons.join("; "))
        };
        outln!(
            "{}: {}/{} ok, {}",
            c.name,
            c.succeeded,
            c.requests,
            eligible
        )?;
        if let Some(s) = &c.slo {
            outln!("  {}", slo_summary(s))?;
        }
        if let Some(cap) = &c.capacity {
            outln!("{}: {}", c.name, cap.line())?;
        }
        if let Some(f) = &c.fidelity {
            outln!("  fidelity of the replay to the capture:")?;
            for l in f.table() {
                outln!("    {l}")?;
            }
        }
    }
    for s in &art.rate_sweeps {
        let at = |r: Option<f64>| r.map_or("none".to_string(), |r| format!("{r} req/s"));
        outln!(
            "rate sweep {}: highest rate holding {:.0}% attainment: {} (with 95% confidence: {})",
            s.cells.join(", "),
            s.min_attainment * 100.0,
            at(s.highest_rate_holding),
            at(s.highest_rate_confidently_holding)
        )?;
    }
    outln!("wrote {}", a.out.join(runner::ARTIFACT_FILE).display())?;
    if adhoc {
        outln!(
            "suite {} (run it again with --suite {})",
            suite.display(),
            suite.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `SLO ttft_ms <= 1500: 19/20 met = 95.0% [76.4%, 99.1%], goodput 0.81 req/s, 25.9 tok/s`.
fn slo_summary(s: &infergate::artifact::SloAttainment) -> String {
    let rate = |v: Option<f64>, unit: &str| v.map_or(String::new(), |v| format!(", {v:.2} {unit}"));
    format!(
        "SLO {}: {}/{} met = {:.1}% [{:.1}%, {:.1}%], goodput{}{}",
        s.targets.describe(),
        s.met,
        s.of,
        s.attainment * 100.0,
        s.interval[0] * 100.0,
        s.interval[1] * 100.0,
        rate(s.goodput_rps, "req/s"),
        rate(s.goodput_tok_s, "tok/s")
    )
}

/// An ad-hoc run's suite: made from the cell flags and written into the
/// output directory before anything is sent, so the run can be repeated.
fn adhoc_suite(cell: &args::CellArgs, out: &std::path::Path) -> Result<PathBuf> {
    let (_, text) = cell.to_flags().suite()?;
    infergate::config::adhoc::write_suite_file(out, &text)
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

/// Before a run: what a request-paired interleaved qualification of this
/// suite costs at the policy's margins, per cell and in all.
fn print_cost(c: &report::calibrate::Calibration) -> Result<()> {
    for cell in &c.cells {
        let Some(n) = cell.requests_per_side else {
            continue;
        };
        outln!(
            "  {}: a paired interleaved qualification needs about {n} requests per side{}",
            cell.cell,
            match (cell.seconds_per_request, cell.minutes) {
                (Some(s), Some(m)) =>
                    format!(", {m:.1} min of requests ({s:.2} s each, both runtimes)"),
                _ => String::new(),
            }
        )?;
    }
    if let Some(m) = c.minutes {
        outln!(
            "suite: about {m:.1} min of requests to decide at the policy's margins (the known-variance need; docs/gate-calibration.md says how far real runs stray from it)"
        )?;
    }
    Ok(())
}

fn calibrate(a: CalibrateArgs) -> Result<ExitCode> {
    use anyhow::Context;
    let files: Vec<PathBuf> = a
        .runs
        .iter()
        .map(|p| {
            if p.is_dir() {
                p.join(runner::ARTIFACT_FILE)
            } else {
                p.clone()
            }
        })
        .collect();
    let mut inputs: Vec<(&str, &std::path::Path)> = files
        .iter()
        .map(|f| ("run artifact", f.as_path()))
        .collect();
    if let Some(p) = &a.policy {
        inputs.push(("policy", p.as_path()));
    }
    infergate::atomic::refuse_overwriting_inputs(&a.out, &inputs)?;
    if let Some(w) = &a.write_policy {
        infergate::atomic::refuse_overwriting_inputs(w, &inputs)?;
        infergate::atomic::refuse_overwriting_inputs(w, &[("calibration output (-o)", &a.out)])?;
    }
    let policy = match &a.policy {
        Some(p) => report::Policy::from_file(p)?,
        None => report::Policy::default(),
    };
    let mut runs = Vec::new();
    for file in &files {
        runs.push((file.display().to_string(), report::read_artifact(file)?));
    }
    let c = report::calibrate::calibrate(&runs, &policy, &infergate::util::now_rfc3339())
        .context("calibrating")?;
    infergate::atomic::write_json_atomic(&a.out, &c)?;
    outln!(
        "{} runs, {} A/A pairs: point rule failed {}, evidence pass {} / fail {} / inconclusive {}",
        c.runs.len(),
        c.aa_pairs.pairs,
        c.aa_pairs.point_rule_failed,
        c.aa_pairs.evidence_pass,
        c.aa_pairs.evidence_fail,
        c.aa_pairs.evidence_inconclusive
    )?;
    for cell in &c.cells {
        for m in &cell.metrics {
            outln!(
                "  {}/{}: per-request CV {:.1}%, within-run s.e. {:.2}%, between runs {:.2}%, drift {:.2}%, interleaved needs {} req/side ({} paired)",
                cell.cell,
                m.metric,
                m.per_request_cv_percent,
                m.within_run_se_percent,
                m.between_runs_sd_percent,
                m.drift_sd_percent,
                m.requests_per_side_interleaved
                    .map_or_else(|| "?".to_string(), |n| n.to_string()),
                m.oracle_requests_per_side_paired
                    .map_or_else(|| "?".to_string(), |n| n.to_string())
            )?;
        }
    }
    print_cost(&c)?;
    outln!("drift floor: {}% per run", c.drift_sd_percent)?;
    if let Some(path) = &a.write_policy {
        let base = match &a.policy {
            Some(p) => infergate::util::read_input(p)
                .with_context(|| format!("reading {}", p.display()))?,
            None => include_str!("../../policies/default.toml").to_string(),
        };
        let text =
            report::calibrate::policy_with_drift(&base, &c.policy_snippet).with_context(|| {
                format!(
                    "--write-policy: add this to the policy by hand:\n{}",
                    c.policy_snippet
                )
            })?;
        infergate::atomic::write_atomic(path, text.as_bytes())?;
        outln!("wrote {}", path.display())?;
    }
    outln!("wrote {}", a.out.display())?;
    Ok(ExitCode::SUCCESS)
}

/// `infergate init`: the plan and its suite, written only where nothing is.
fn init(kind: infergate::config::init::Kind, plan: &std::path::Path) -> Result<ExitCode> {
    use infergate::config::init;
    let suite = init::suite_beside(plan).map_err(anyhow::Error::msg)?;
    infergate::atomic::write_atomic(&suite, init::suite_text().as_bytes())?;
    infergate::atomic::write_atomic(plan, init::plan_text(kind).as_bytes())?;
    outln!(
        "wrote {} and {}: edit them, then infergate qualify {} --check",
        plan.display(),
        suite.display(),
        plan.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `infergate resolve IMAGE`: the digest a tag names now.
async fn resolve(image: &str, json: bool) -> Result<ExitCode> {
    use infergate::driver::registry;
    let name = registry::ImageName::parse(image)?;
    let r = registry::resolve(&name, registry::host_architecture()).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        outln!("{}", r.pinned())?;
        if let (Some(d), Some(p)) = (&r.platform_digest, &r.platform) {
            outln!("  an index ({}); {p} runs {d}", r.media_type)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
