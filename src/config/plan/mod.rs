//! Qualification plans (TOML): the baseline and candidate runtime profiles and
//! how to start each, the suite, the gate policy, readmission checks, the
//! decision policy and repeats.
//!
//! ```toml
//! name = "reference-engine"
//! suite = "../suites/reference-engine.toml"   # relative to this file
//! schedule = "interleaved"   # both up at once, short alternating blocks (default
//!                            # when both can serve at once); or "alternating" passes
//! window = 4             # interleaved: requests per block, every cell (default 1 for a
//!                        # closed-loop cell at concurrency 1, else max(4, 2 × concurrency));
//!                        # or by cell: a [window] table, `concurrent-512 = 4`, the cells
//!                        # it does not name at the default (a name not in the suite is refused)
//! # repeats = 2          # alternating only: 1: A B; 2: A B B A; 3: A B B A A B
//! policy = "../policies/default.toml"         # or an inline [policy] table
//!
//! [adaptive]             # interleaved only: add rounds until the gate resolves
//! enabled = true         # or `infergate qualify --adaptive` (default false)
//! max_requests = 200     # per side per cell (default 200)
//! max_minutes = 30       # wall clock, checked after each round (default 30)
//! looks_by = "design"    # information fraction: share of the rounds the design
//!                        # needs or the budget allows, the fewer (default); "budget"
//! # A round is a pair of blocks (A B B A: 2 × window requests per side) for
//! # every cell, then a look at the gate; the suite's `requests` is not used.
//! # Rounds: at most min over cells of max_requests / (2 × window); a budget
//! # below one round of some cell is refused before anything is sent. Each
//! # cell's warmup (once per runtime) and the prompt-sizing probes are sent
//! # beside it and named in what the run says it spent.
//!
//! [baseline]
//! driver = "process"                 # external | process | container
//! engine_profile = "baseline"        # the reference engine (engine/profiles.toml)
//!
//! [candidate]
//! driver = "container"
//! image = "ghcr.io/org/engine@sha256:…"    # pinned by digest (or a local image ID "sha256:…")
//! args = ["--port", "8080"]
//! port = 8080
//! # What GPU serving asks of the host, as `docker run` takes it (all optional):
//! gpus = "all"                       # or a count (2), or ids [0, "GPU-8f6c…"]
//! devices = ["/dev/infiniband/uverbs0"]   # HOST[:CONTAINER[:rwm]]
//! shm_size = "32g"                   # bytes, or with b/k/m/g
//! ipc = "host"                       # host | private | shareable
//! ulimits = { memlock = -1, stack = 67108864 }   # memlock, stack, nofile; [soft, hard]
//! # runtime = "nvidia"               # an OCI runtime the daemon knows
//! # user = "1000:1000"
//!
//! [readmission]
//! expected_model = "SmolLM2-135M-Instruct-Q4_1"
//! hook = { command = ["scripts/router-admit.sh"] }   # or { url = "http://127.0.0.1:9000/admit" }
//!
//! [hooks]                # told of the verdict and of the decision: a summary
//! # as JSON on standard input (a command) or as the body (a url POST)
//! on_verdict = [{ command = ["scripts/notify.sh"], timeout_s = 30 }]
//! on_decision = [{ url = "http://127.0.0.1:9000/infergate", bearer_env = "HOOK_TOKEN" }]
//! ```
//!
//! Errors name the file, the line and the field.

mod budget;
mod model;
mod raw;
mod runtime;
mod sections;

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::report::ConfigError;
pub use budget::{BLOCKS_PER_ROUND, BudgetSource, RoundCell, check_round_budget, round_requests};
pub use model::*;
use runtime::*;
use sections::*;

impl Plan {
    /// Read and check a plan file.
    pub fn load(path: &Path) -> Result<Plan, ConfigError> {
        let text = crate::util::read_input(path).map_err(|e| ConfigError {
            file: path.display().to_string(),
            line: None,
            column: None,
            field: None,
            message: format!("cannot read: {e}"),
        })?;
        let base_dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Plan::parse(&text, path, &base_dir)
    }

    /// The plan's text with `side`'s (`baseline` or `candidate`) `image`
    /// replaced by `image` (a pinned `REPOSITORY@sha256:…`), everything else
    /// byte for byte: what `watch` qualifies for a digest its tag resolved
    /// to, against the build a promotion left serving. That runtime must be a
    /// container with an `image`.
    pub fn with_image(
        text: &str,
        path: &Path,
        side: &str,
        image: &str,
    ) -> Result<String, ConfigError> {
        let file = path.display().to_string();
        let raw = raw_plan(text, &file)?;
        let runtime = match side {
            BASELINE => &raw.baseline,
            _ => &raw.candidate,
        };
        let refuse = |message: String| ConfigError {
            file: file.clone(),
            line: Some(line_of(text, runtime.span().start)),
            column: None,
            field: Some(format!("{side}.image")),
            message,
        };
        let rt = runtime.get_ref();
        if rt.driver.get_ref() != "container" {
            return Err(refuse(format!(
                "an image given by tag or promotion needs driver = \"container\" in [{side}] (it has \"{}\")",
                rt.driver.get_ref()
            )));
        }
        let Some(old) = &rt.image else {
            return Err(refuse(format!("[{side}] has no image to replace")));
        };
        ImageRef::parse(image).map_err(refuse)?;
        let span = old.span();
        let quoted = toml::Value::String(image.to_string()).to_string();
        Ok(format!(
            "{}{quoted}{}",
            &text[..span.start],
            &text[span.end..]
        ))
    }

    /// Parse plan text; `path` names it in errors, `base_dir` anchors relative paths.
    pub fn parse(text: &str, path: &Path, base_dir: &Path) -> Result<Plan, ConfigError> {
        let file = path.display().to_string();
        let err = |span: Option<Range<usize>>, field: &str, message: String| ConfigError {
            file: file.clone(),
            line: span.map(|s| line_of(text, s.start)),
            column: None,
            field: Some(field.to_string()),
            message,
        };
        let raw = raw_plan(text, &file)?;
        if let Some(why) = raw
            .name
            .as_deref()
            .and_then(crate::report::text::name_problem)
        {
            return Err(err(key_line(text, "name"), "name", why));
        }
        // `.` components dropped (`./x` beside a plan in `.` is `./x`, not
        // `././x`): the paths are shown to the user and recorded.
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            let full = if p.is_absolute() {
                p.to_path_buf()
            } else {
                base_dir.join(p)
            };
            full.components().collect()
        };
        let policy = policy_source(raw.policy, &resolve, &err, key_line(text, "policy"))?;
        // Catch policy mistakes now, not after an hour of measuring.
        let gate_policy = policy
            .load(path)
            .map_err(|e| err(None, "policy", format!("{e:#}")))?;
        let repeats_given = raw.repeats.as_ref().map(|r| r.span());
        let repeats = repeats(raw.repeats, &err)?;
        let readmission = readmission(raw.readmission, &resolve, &err)?;
        let hooks = hooks(raw.hooks, &resolve, &err)?;
        let decision = decision(raw.decision, &err)?;
        let after = after(raw.after, &err)?;
        let docker = docker(raw.docker, &err)?;
        let timeouts = timeouts(raw.timeouts, &err)?;
        let baseline = runtime(text, BASELINE, raw.baseline, &resolve, &err)?;
        let candidate = runtime(text, CANDIDATE, raw.candidate, &resolve, &err)?;
        let clash = same_fixed_address(&baseline, &candidate);
        let schedule = schedule(raw.schedule, repeats_given, clash, &err)?;
        let window = window(raw.window, text, schedule, &err)?;
        let adaptive = adaptive(text, raw.adaptive, schedule, &err)?;
        let ledger = match &raw.ledger {
            None => None,
            Some(l) => Some(
                match crate::config::ledger_location::Location::parse(l.get_ref())
                    .map_err(|e| err(Some(l.span()), "ledger", format!("{e:#}")))?
                {
                    crate::config::ledger_location::Location::Sqlite(p) => {
                        crate::config::ledger_location::Location::Sqlite(resolve(
                            &p.to_string_lossy(),
                        ))
                    }
                    shared => shared,
                },
            ),
        };
        Ok(Plan {
            name: raw.name.unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "plan".into())
            }),
            path: path.to_path_buf(),
            base_dir: base_dir.to_path_buf(),
            sha256: crate::util::sha256_hex(text.as_bytes()),
            text: text.to_string(),
            suite: resolve(raw.suite.get_ref()),
            policy,
            gate_policy,
            repeats,
            schedule,
            window,
            adaptive,
            skip_turnover: raw.skip_turnover,
            baseline,
            candidate,
            readmission,
            hooks,
            decision,
            after,
            docker,
            timeouts,
            ledger,
        })
    }
}

#[cfg(test)]
mod tests;
