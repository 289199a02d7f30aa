//! Command-line front ends of `qualify`, `decide`, `status` and `stop`
//! (`cli::args` adds them as subcommands).
//!
//! Exit codes: 0 done as asked (qualified; decision carried out); 1 not
//! qualified, or a decision could not be carried out (the baseline was put
//! back); 2 the qualification failed or was refused, or an error.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use infergate::decision::{decide, status};
use infergate::qualify::{self, Verdict};
use infergate::report::{self, DecisionAction};
use infergate::runtime::ledger::{self, LEDGER_ENV, Ledger, Location};

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["plan", "baseline"])))]
pub struct QualifyArgs {
    /// Qualification plan (TOML): runtimes, suite, policy, readmission. Or,
    /// instead, two endpoints: --baseline URL --candidate URL.
    #[arg(conflicts_with_all = ["baseline", "candidate", "api_key_env", "cells", "max_requests", "max_minutes", "no_turnover"])]
    pub plan: Option<PathBuf>,
    #[command(flatten)]
    pub endpoints: super::endpoints::EndpointArgs,
    /// Qualification id. An existing id is resumed (finished passes kept,
    /// leftovers stopped); default `<plan name>-<UTC time>`.
    #[arg(long)]
    pub id: Option<String>,
    /// Parent directory of the qualification's directory.
    #[arg(long, default_value = "out/qualify")]
    pub out: PathBuf,
    /// Ledger: a SQLite file, or a team's postgres://user@host/db (the password
    /// from PGPASSWORD or a pgpass file). Default $INFERGATE_LEDGER, else the
    /// plan's `ledger`, else $XDG_DATA_HOME/infergate/ledger.sqlite.
    #[arg(long, env = LEDGER_ENV)]
    pub ledger: Option<String>,
    /// Abandon the interrupted qualification --id and restore the baseline.
    #[arg(long, requires = "id")]
    pub rollback: bool,
    /// Adaptive mode: add interleaved rounds of blocks until the performance
    /// gate resolves or the plan's `[adaptive]` budget (default 200 requests
    /// per side per cell, 30 minutes) is spent. Interleaved plans only.
    #[arg(long)]
    pub adaptive: bool,
    /// Afterwards, retire whatever the qualification left serving (demos, CI);
    /// `infergate decide` can still restore or promote later.
    #[arg(long)]
    pub then_stop: bool,
    /// No progress output and no rendered report.
    #[arg(long, short)]
    pub quiet: bool,
    /// Every server timing and metrics line, and the evidence gate's design
    /// in full, in the rendered report.
    #[arg(long, short)]
    pub verbose: bool,
    /// Also write the report as JUnit XML here (each deciding gate part a test case).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Check the plan and what it needs, spending nothing: no pull, no
    /// runtime started, no ledger or file written. Exit 0 ready, 2 not.
    #[arg(long, conflicts_with_all = ["rollback", "then_stop", "junit", "adaptive", "baseline"])]
    pub check: bool,
    /// With --check: a `calibrate` output of the baseline, whose seconds per
    /// request turn the spend into minutes.
    #[arg(long, requires = "check")]
    pub calibration: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("action").required(true).args(["promote", "retain_baseline"])))]
pub struct DecideArgs {
    /// The report.json `infergate qualify` wrote.
    pub report: PathBuf,
    /// Put the candidate in service (it must pass readmission, else the baseline is restored).
    #[arg(long)]
    pub promote: bool,
    /// Keep the baseline: restore it by its exact digest and readmit it.
    #[arg(long)]
    pub retain_baseline: bool,
    /// Why (recorded in the report and the ledger).
    #[arg(long)]
    pub note: String,
    /// Who decides; default $USER.
    #[arg(long)]
    pub who: Option<String>,
    /// Ledger; default the one the qualification was recorded in.
    #[arg(long)]
    pub ledger: Option<String>,
    /// Promote a qualification whose gates failed; the promotion records
    /// what it overrides.
    #[arg(long)]
    pub force: bool,
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["once", "every"])))]
pub struct WatchArgs {
    /// The plan: its candidate a container, whose image the tag's digest replaces.
    pub plan: PathBuf,
    /// `HOST[:PORT]/REPOSITORY:TAG`, resolved on its registry at each tick.
    #[arg(long)]
    pub candidate: String,
    /// One tick, then exit: 0 when the digest was judged before or the
    /// qualification completed, as `qualify` exits otherwise.
    #[arg(long)]
    pub once: bool,
    /// A tick every DURATION (`90s`, `30m`, `6h`) until interrupted.
    #[arg(long, value_parser = parse_period)]
    pub every: Option<std::time::Duration>,
    #[arg(long, default_value = "out/qualify")]
    pub out: PathBuf,
    #[arg(long, env = LEDGER_ENV)]
    pub ledger: Option<String>,
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_period(s: &str) -> Result<std::time::Duration, String> {
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?}: a whole number and a unit (s, m, h), e.g. 30m"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?}: the unit is s, m or h, e.g. 30m")),
    };
    if secs == 0 {
        return Err(format!(
            "{s:?}: a period of zero would ask the registry in a loop"
        ));
    }
    Ok(std::time::Duration::from_secs(secs))
}

pub async fn main_watch(a: WatchArgs) -> anyhow::Result<ExitCode> {
    use infergate::watch;
    let opts = watch::Options {
        plan: a.plan,
        candidate: a.candidate,
        ledger: location(a.ledger)?,
        out_root: Some(a.out),
        quiet: a.quiet,
    };
    match a.every {
        None => {
            let tick = watch::once(&opts).await?;
            outln!("{}", watch::describe(&tick))?;
            Ok(match &tick {
                watch::Tick::Judged { .. } => ExitCode::SUCCESS,
                watch::Tick::Qualified { outcome, .. } => {
                    let value = outcome.read_report()?;
                    ExitCode::from(outcome.exit_code(value.as_ref())?)
                }
            })
        }
        Some(period) => {
            watch::every(&opts, period, |tick| {
                let line = match tick {
                    Ok(t) => watch::describe(&t),
                    Err(e) => format!("watch: this tick failed: {e:#}; trying again in {period:?}"),
                };
                let _ = outln!("{line}");
            })
            .await;
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    /// Only builds of this repository (`HOST/REPO`).
    #[arg(long)]
    pub repo: Option<String>,
    #[arg(long)]
    pub cell: Option<String>,
    #[arg(long)]
    pub metric: Option<String>,
    /// Measure the cumulative change from this build (a digest or an image
    /// holding it); default as far back as the chain of promotions goes.
    #[arg(long)]
    pub anchor: Option<String>,
    /// The drift gate's margin on the cumulative change, percent.
    #[arg(long, default_value_t = infergate::history::DRIFT_MARGIN_PERCENT)]
    pub margin_percent: f64,
    #[arg(long, env = LEDGER_ENV)]
    pub ledger: Option<String>,
    /// Machine-readable output (`infergate-history/1`).
    #[arg(long, conflicts_with = "html")]
    pub json: bool,
    /// One offline HTML page (the series drawn) written to `-o FILE`.
    #[arg(long, requires = "out")]
    pub html: bool,
    /// Where `--html` writes its page.
    #[arg(short = 'o', long = "out", value_name = "FILE", requires = "html")]
    pub out: Option<std::path::PathBuf>,
}

pub fn main_history(a: HistoryArgs) -> anyhow::Result<ExitCode> {
    use infergate::history;
    let location = match location(a.ledger)? {
        Some(l) => l,
        None => Location::default_location()?,
    };
    let ledger = infergate::runtime::ledger::Ledger::connect_existing(&location)?;
    let h = history::read(
        &ledger,
        &history::Filter {
            repo: a.repo,
            cell: a.cell,
            metric: a.metric,
            anchor: a.anchor,
            margin_percent: a.margin_percent,
            ..Default::default()
        },
    )?;
    if let Some(file) = a.out.as_deref() {
        infergate::atomic::write_atomic(file, history::render_html(&h).as_bytes())?;
        outln!(
            "history: {} build(s), {} series: {}",
            h.builds.len(),
            h.series.len(),
            file.display()
        )?;
    } else if a.json {
        outln!("{}", serde_json::to_string_pretty(&h)?)?;
    } else {
        out!("{}", history::render_text(&h))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    /// One qualification, with its whole ledger; default all.
    pub id: Option<String>,
    #[arg(long, env = LEDGER_ENV)]
    pub ledger: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct StopArgs {
    /// Qualification whose serving runtime (and any leftover) to stop.
    pub id: String,
    #[arg(long, env = LEDGER_ENV)]
    pub ledger: Option<String>,
    #[arg(long, short)]
    pub quiet: bool,
}

pub async fn main_qualify(a: QualifyArgs) -> anyhow::Result<ExitCode> {
    let ledger = location(a.ledger)?;
    let (plan, id) = match a.plan {
        Some(p) => (p, a.id),
        None => {
            let (p, id) = super::endpoints::write_plan(&a.endpoints, a.id, &a.out).await?;
            (p, Some(id))
        }
    };
    if a.check {
        let c = qualify::check::check(&plan, ledger.as_ref(), a.calibration.as_deref()).await;
        out!("{c}")?;
        return Ok(ExitCode::from(if c.is_wrong() { 2 } else { 0 }));
    }
    if let Some(junit) = &a.junit {
        refuse_junit_over_inputs(junit, &plan, ledger.as_ref())?;
    }
    let opts = qualify::Options {
        id,
        out_root: Some(a.out),
        ledger,
        rollback: a.rollback,
        adaptive: a.adaptive,
        quiet: a.quiet,
        ..Default::default()
    };
    let mut o = qualify::run(&plan, &opts).await?;
    // Read once: --then-stop's note, the exports, the rendering and the exit
    // code show one report.
    let mut value = o.read_report()?;
    if a.then_stop && o.serving.is_some() {
        qualify::then_stop(&mut o, value.as_mut(), a.quiet).await?;
    }
    if let (Some(v), Some(r)) = (&value, &o.report) {
        super::exports::after_report(v, a.junit.as_deref(), &[("plan", &plan), ("report", r)])?;
    }
    let code = o.exit_code(value.as_ref())?;
    outln!("qualification {}: {}", o.id, verdict_text(&o.verdict, code))?;
    if let Some(f) = &o.failure {
        outln!("  {f}")?;
    }
    if let Some(spent) = &o.spent {
        outln!("  spent:   {spent}")?;
    }
    match &o.serving {
        Some((label, h)) => outln!("  serving: {label} — {}", h.describe())?,
        None if a.then_stop => outln!("  serving: nothing (--then-stop retired it)")?,
        None => outln!("  serving: nothing")?,
    }
    outln!("  ledger:  {} (infergate status {})", o.ledger, o.id)?;
    if let Some(r) = &o.report {
        outln!("  report:  {}", r.display())?;
        if o.decision == DecisionAction::Pending {
            outln!(
                "  decide:  infergate decide {} --promote|--retain-baseline --note \"…\"",
                r.display()
            )?;
        }
        // The rendered report comes last: it is what a reader came for.
        if !a.quiet
            && let Some(v) = &value
        {
            outln!()?;
            let opts = report::TerminalOptions {
                color: std::io::stdout().is_terminal(),
                verbose: a.verbose,
            };
            outln!("{}", report::terminal(v, opts))?;
        }
    }
    Ok(ExitCode::from(code))
}

/// The verdict in words; `code` is the exit code, which tells a skipped
/// turnover apart from a failed gate.
fn verdict_text(v: &Verdict, code: u8) -> &'static str {
    match v {
        Verdict::Qualified => "QUALIFIED (every gate passed)",
        Verdict::NotQualified if code == report::EXIT_GATES_NOT_RUN => {
            "NOT QUALIFIED, NOT FAILED (every gate that ran passed; the turnover gates did not run: see the report)"
        }
        Verdict::NotQualified => {
            "NOT QUALIFIED (a gate failed, or the evidence could not decide: see the report)"
        }
        Verdict::Failed => "FAILED before a comparison",
        Verdict::Refused => "REFUSED at preflight; nothing was changed",
        Verdict::RolledBack => "rolled back",
    }
}

pub async fn main_decide(a: DecideArgs) -> anyhow::Result<ExitCode> {
    let action = if a.promote {
        DecisionAction::Promote
    } else {
        DecisionAction::RetainBaseline
    };
    let o = decide::run(&decide::Options {
        report: a.report,
        action,
        note: a.note,
        who: a.who,
        ledger: location(a.ledger)?,
        force: a.force,
        verify: infergate::verify_runs::check_qualification,
        quiet: a.quiet,
    })
    .await?;
    outln!("qualification {}: {}", o.qualification, o.promotion)?;
    match &o.serving {
        Some((label, h)) => outln!("  serving: {label} — {}", h.describe())?,
        None => outln!("  serving: nothing")?,
    }
    Ok(ExitCode::from(if o.carried_out { 0 } else { 1 }))
}

pub async fn main_status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let text = status::run(&status::Options {
        id: a.id,
        ledger: location(a.ledger)?,
        json: a.json,
    })
    .await?;
    out!("{text}")?;
    if a.json {
        outln!()?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn main_stop(a: StopArgs) -> anyhow::Result<ExitCode> {
    out!(
        "{}",
        infergate::runtime::stop::stop(&a.id, location(a.ledger)?, a.quiet).await?
    )?;
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum LedgerCmd {
    /// Copy every entry of one ledger into another, ids kept (e.g. a SQLite
    /// file into a team's PostgreSQL); then check the two are equal entry for
    /// entry. Run again, it copies only what is missing.
    Migrate {
        /// The ledger to copy (a SQLite file or postgres:// URL).
        from: String,
        /// The ledger to copy into (created and its schema applied if new).
        to: String,
    },
    /// Check the ledger's hash chain, every qualification's: name each row
    /// edited, deleted, reordered or slipped in outside infergate, and the
    /// rows written before the ledger had a chain. Exits 1 when a row or an
    /// exported head does not verify.
    Verify {
        #[arg(long, env = LEDGER_ENV)]
        ledger: Option<String>,
        /// A head exported earlier (the hook summary's `ledger_head`), as
        /// QUALIFICATION:SEQ:SHA256: checked to be still in the ledger
        /// unchanged. Repeatable.
        #[arg(long = "head", value_name = "QUALIFICATION:SEQ:SHA256")]
        heads: Vec<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

pub fn main_ledger(cmd: LedgerCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        LedgerCmd::Migrate { from, to } => {
            let (from, to) = (Location::parse(&from)?, Location::parse(&to)?);
            if from == to {
                anyhow::bail!("ledger migrate: {from} is both FROM and TO");
            }
            if from.same_ledger(&to) {
                anyhow::bail!(
                    "ledger migrate: {from} and {to} are one file (the same device and inode): FROM and TO must be two ledgers"
                );
            }
            // The source is read: one that does not exist is a typo, not an empty ledger.
            let src = Ledger::connect_read_only(&from)?;
            let dst = Ledger::connect(&to)?;
            let m = ledger::migrate(&src, &dst)?;
            outln!(
                "ledger {from} -> {to}: {} entries copied, {} already there; {to} now equals {from} entry for entry ({} entries, ids kept)",
                m.copied,
                m.already,
                m.copied + m.already
            )?;
            outln!("{}", migrated_chain(&m))?;
            Ok(ExitCode::SUCCESS)
        }
        LedgerCmd::Verify {
            ledger,
            heads,
            json,
        } => {
            let (text, intact) = infergate::runtime::ledger::verify::run(
                &infergate::runtime::ledger::verify::Options {
                    ledger: location(ledger)?,
                    heads,
                    json,
                },
            )?;
            out!("{text}")?;
            Ok(if intact {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// What `ledger migrate` says of the chain it carried.
fn migrated_chain(m: &ledger::Migrated) -> String {
    let mut line = format!(
        "hash chain carried and verified in the copy: {} qualification(s), every chained row intact",
        m.chains
    );
    if !m.unchained.is_empty() {
        line.push_str(&format!(
            "; seq {}: written before the ledger had a chain, not covered",
            ledger::chain::ranges(&m.unchained)
        ));
    }
    line
}

/// The ledger a flag names, parsed here rather than by clap: clap would echo
/// a refused value, and a URL with a password in it must not be printed.
/// Before anything runs: `--junit` must not name the plan, its suite, its
/// policy file or the ledger (the report is checked once its path is known).
fn refuse_junit_over_inputs(
    junit: &std::path::Path,
    plan_path: &std::path::Path,
    ledger: Option<&Location>,
) -> anyhow::Result<()> {
    let plan = infergate::config::plan::Plan::load(plan_path)?;
    let ledger = qualify::ledger_for(&plan, ledger)?;
    let mut inputs = vec![("plan", plan_path), ("plan's suite", plan.suite.as_path())];
    if let infergate::config::plan::PolicySource::File(p) = &plan.policy {
        inputs.push(("plan's gate policy", p.as_path()));
    }
    if let Location::Sqlite(p) = &ledger {
        inputs.push(("ledger", p.as_path()));
    }
    infergate::atomic::refuse_overwriting_inputs(junit, &inputs)?;
    Ok(())
}

fn location(arg: Option<String>) -> anyhow::Result<Option<Location>> {
    arg.map(|s| Location::parse(&s)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate_refuses_one_file_under_two_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("L.sqlite");
        Ledger::connect(&Location::Sqlite(file.clone())).unwrap();
        let hard = dir.path().join("hard.sqlite");
        std::fs::hard_link(&file, &hard).unwrap();
        let soft = dir.path().join("soft.sqlite");
        std::os::unix::fs::symlink(&file, &soft).unwrap();
        // Paths that differ as paths (`a/./b` is `a/b` to `Path`'s `==`; a
        // leading `./`, as in `L.sqlite ./L.sqlite`, is not).
        let d = dir.path().display();
        for to in [
            format!(
                "{d}/../{}/L.sqlite",
                dir.path().file_name().unwrap().to_string_lossy()
            ),
            hard.display().to_string(),
            soft.display().to_string(),
        ] {
            let e = main_ledger(LedgerCmd::Migrate {
                from: file.display().to_string(),
                to: to.clone(),
            })
            .expect_err("one file");
            assert_eq!(
                e.to_string(),
                format!(
                    "ledger migrate: {} and {to} are one file (the same device and inode): FROM and TO must be two ledgers",
                    file.display()
                )
            );
        }
        // A second file is a second ledger.
        let other = dir.path().join("M.sqlite").display().to_string();
        main_ledger(LedgerCmd::Migrate {
            from: file.display().to_string(),
            to: other,
        })
        .unwrap();
    }
}
