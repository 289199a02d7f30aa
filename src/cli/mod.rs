//! The `infergate` command line, in the binary only: [`args`] (what clap
//! parses), [`dispatch`] (one library call per subcommand) and the front
//! ends of the qualification commands ([`qualify`]).

pub mod args;
pub mod qualify;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;

use infergate::measure::runner::{self, RunOptions, RunPart};
use infergate::report;

pub use args::Cli;
use args::{CalibrateArgs, Cmd, ColorChoice, Format};

pub async fn dispatch(cmd: Cmd) -> Result<ExitCode> {
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
        Cmd::Qualify(a) => qualify::main_qualify(a).await,
        Cmd::Decide(a) => qualify::main_decide(a).await,
        Cmd::Status(a) => qualify::main_status(a).await,
        Cmd::Stop(a) => qualify::main_stop(a).await,
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
        Cmd::Verify { file } => {
            let value = report::read_report_value(&file)?;
            let problems = report::verify(&value);
            if problems.is_empty() {
                println!(
                    "{}: every delta, flag and gate agrees with its parts",
                    file.display()
                );
                Ok(ExitCode::SUCCESS)
            } else {
                println!("{}: {} disagreement(s)", file.display(), problems.len());
                for p in &problems {
                    println!("  {p}");
                }
                Ok(ExitCode::from(1))
            }
        }
        Cmd::Report(a) => {
            let value = report::read_report_value(&a.file)?;
            let color = match a.color {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => a.out.is_none() && std::io::stdout().is_terminal(),
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
    let c = report::calibrate::calibrate(&runs, &policy, &infergate::util::now_rfc3339())
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
        println!("wrote {}", path.display());
    }
    println!("wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}
