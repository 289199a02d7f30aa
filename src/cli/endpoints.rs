//! `qualify --baseline URL --candidate URL`: discover both endpoints, then
//! write the plan and suite (`config::endpoints`) into the qualification's
//! directory, where `qualify` reads them like any plan.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use clap::Args;
use infergate::config::endpoints::{self, CellShape, Endpoints};
use infergate::measure::discover::{self, ServerInfo};

/// Two OpenAI-compatible endpoints someone else runs, qualified without a
/// plan file: the plan and suite are written from what discovery finds
/// (model, context per request) into the qualification's directory, and
/// `infergate qualify DIR/plan.toml` repeats it exactly. The defaults any
/// plan gets: an interleaved schedule, and adaptive rounds until the gate
/// decides or the budget (--max-requests, --max-minutes) is spent. The same
/// URL twice is an A/A run.
#[derive(Args, Debug, Clone)]
pub struct EndpointArgs {
    /// The endpoint in service (base URL, e.g. http://127.0.0.1:8000).
    #[arg(long, requires = "candidate", value_name = "URL")]
    pub baseline: Option<String>,
    /// The endpoint to qualify against it.
    #[arg(long, requires = "baseline", value_name = "URL")]
    pub candidate: Option<String>,
    /// Environment variable holding the API key both endpoints take (never
    /// written anywhere; the plan names the variable).
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// Cells as PROMPTxCONCURRENCY, comma-separated (default 512x1,2048x4,
    /// each shrunk to fit the servers' context per request).
    #[arg(long, value_name = "LIST")]
    pub cells: Option<String>,
    /// Adaptive budget: most measured requests per side per cell (warmups
    /// and probes are named beside them); one round of every cell (2 ×
    /// its window) must fit, else it is refused before anything is sent.
    #[arg(long, default_value_t = infergate::config::endpoints::default_budget().0)]
    pub max_requests: usize,
    /// Adaptive budget: most minutes of measuring.
    #[arg(long, default_value_t = infergate::config::endpoints::default_budget().1)]
    pub max_minutes: f64,
    /// No turnover workload (the exactness check under churn: 40 requests
    /// and their reference answers per endpoint).
    #[arg(long)]
    pub no_turnover: bool,
}

/// Longest wait for each discovery answer.
const DISCOVERY_WAIT: Duration = Duration::from_secs(30);

/// Check the flags, the id and the directory, discover both servers, and
/// write `OUT/ID/plan.toml` and `OUT/ID/suite.toml`. Returns the plan's path
/// and the id. Nothing is written, and no request but discovery's is sent,
/// when anything is wrong; nothing at all when a flag, the id or the
/// directory is.
pub async fn write_plan(
    a: &EndpointArgs,
    id: Option<String>,
    out: &Path,
) -> Result<(PathBuf, String)> {
    let e = endpoints_from(a)?;
    e.check().map_err(anyhow::Error::msg)?;
    let id = id.unwrap_or_else(|| infergate::qualify::new_id(e.name()));
    infergate::qualify::new_qualification_dir(out, &id)?;
    let key = e
        .api_key_env
        .as_ref()
        .and_then(|name| std::env::var(name).ok());
    let base = discover_one("--baseline", &e.baseline, key.as_deref()).await?;
    let cand = discover_one("--candidate", &e.candidate, key.as_deref()).await?;
    if base.model_id != cand.model_id {
        eprintln!(
            "note: the endpoints serve different model names ({:?} and {:?}); each is asked for its own",
            base.model_id, cand.model_id
        );
    }
    let context = [base.context_window, cand.context_window]
        .into_iter()
        .flatten()
        .min();
    let cells = if e.cells.is_empty() {
        endpoints::default_cells(context)
    } else {
        e.cells.clone()
    };
    endpoints::check_fit(&cells, context, !e.cells.is_empty()).map_err(anyhow::Error::msg)?;
    let suite_text = endpoints::suite_text(&e, &cells);
    let plan_text = endpoints::plan_text(&e, &command(a));
    // Checked again: the directory may have been made while discovery ran.
    let dir = infergate::qualify::new_qualification_dir(out, &id)?;
    let plan = dir.join(infergate::qualify::PLAN_COPY);
    let suite = dir.join("suite.toml");
    // Both read back as `qualify` will read them, before either is written.
    infergate::config::suite::Suite::parse(&suite_text, &suite.display().to_string())
        .context("the suite written from the flags does not read")?;
    infergate::config::plan::Plan::parse(&plan_text, &plan, &dir)
        .context("the plan written from the flags does not read")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    infergate::atomic::write_atomic(&suite, suite_text.as_bytes())?;
    infergate::atomic::write_atomic(&plan, plan_text.as_bytes())?;
    say(&e, &cells, context, &plan);
    Ok((plan, id))
}

fn endpoints_from(a: &EndpointArgs) -> Result<Endpoints> {
    let (Some(baseline), Some(candidate)) = (&a.baseline, &a.candidate) else {
        bail!("--baseline and --candidate go together");
    };
    Ok(Endpoints {
        baseline: baseline.trim_end_matches('/').to_string(),
        candidate: candidate.trim_end_matches('/').to_string(),
        api_key_env: a.api_key_env.clone(),
        cells: match &a.cells {
            Some(c) => endpoints::parse_cells(c).map_err(anyhow::Error::msg)?,
            None => Vec::new(),
        },
        max_requests: a.max_requests,
        max_minutes: a.max_minutes,
        turnover: !a.no_turnover,
    })
}

async fn discover_one(flag: &str, url: &str, key: Option<&str>) -> Result<ServerInfo> {
    let http = infergate::measure::http_client()
        .connect_timeout(Duration::from_secs(10))
        .timeout(DISCOVERY_WAIT)
        .build()
        .context("building HTTP client")?;
    discover::discover(&http, url, key, DISCOVERY_WAIT)
        .await
        .with_context(|| format!("{flag} {url}: discovering the server"))
}

/// The command line the plan was written from, for its first comment.
fn command(a: &EndpointArgs) -> String {
    let mut c = format!(
        "infergate qualify --baseline {} --candidate {}",
        a.baseline.as_deref().unwrap_or_default(),
        a.candidate.as_deref().unwrap_or_default()
    );
    if let Some(k) = &a.api_key_env {
        c.push_str(&format!(" --api-key-env {k}"));
    }
    if let Some(cells) = &a.cells {
        c.push_str(&format!(" --cells {cells}"));
    }
    c.push_str(&format!(
        " --max-requests {} --max-minutes {}",
        a.max_requests, a.max_minutes
    ));
    if a.no_turnover {
        c.push_str(" --no-turnover");
    }
    c
}

fn say(e: &Endpoints, cells: &[CellShape], context: Option<u64>, plan: &Path) {
    if e.is_aa() {
        eprintln!(
            "note: --baseline and --candidate are one endpoint: an A/A run. It measures this endpoint's noise; a pass is what it should show."
        );
    }
    let names: Vec<String> = cells.iter().map(CellShape::name).collect();
    eprintln!(
        "qualify: cells {} ({}), {}; adaptive budget {} requests per side per cell or {} minutes; plan and suite in {} (repeat: infergate qualify {})",
        names.join(", "),
        match context {
            Some(c) => format!("{c} tokens per request on both servers"),
            None => "neither server reports its context".into(),
        },
        if e.turnover {
            "a turnover check of 40 requests"
        } else {
            "no turnover check"
        },
        e.max_requests,
        e.max_minutes,
        plan.parent()
            .map(Path::display)
            .map(|d| d.to_string())
            .unwrap_or_default(),
        plan.display()
    );
}
