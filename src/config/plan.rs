//! Qualification plans (TOML): the baseline and candidate runtime profiles and
//! how to start each, the suite, the gate policy, readmission checks, the
//! decision policy and repeats.
//!
//! ```toml
//! name = "reference-engine"
//! suite = "../suites/reference-engine.toml"   # relative to this file
//! schedule = "interleaved"   # both up at once, short alternating blocks (default
//!                            # when both can serve at once); or "alternating" passes
//! window = 4             # interleaved: requests per block (default max(4, 2 × concurrency))
//! # repeats = 2          # alternating only: 1: A B; 2: A B B A; 3: A B B A A B
//! policy = "../policies/default.toml"         # or an inline [policy] table
//!
//! [adaptive]             # interleaved only: add rounds until the gate resolves
//! enabled = true         # or `infergate qualify --adaptive` (default false)
//! max_requests = 200     # per side per cell (default 200)
//! max_minutes = 30       # wall clock, checked after each round (default 30)
//! # A round is one A B B A pair of blocks (2 × window requests per side) for
//! # every cell, then a look at the gate; the suite's `requests` is not used.
//! # Rounds: at most min over cells of max_requests / (2 × window), at least 1.
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
//!
//! [readmission]
//! expected_model = "SmolLM2-135M-Instruct-Q4_1"
//! hook = { command = ["scripts/router-admit.sh"] }   # or { url = "http://127.0.0.1:9000/admit" }
//! ```
//!
//! Errors name the file, the line and the field.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::report::{ConfigError, Policy};

/// The name of a runtime's own `/metrics` endpoint among those scraped.
pub const TARGET_ENDPOINT: &str = "target";
/// Labels of the two sides, as used in ledgers, directories and reports.
pub const BASELINE: &str = "baseline";
pub const CANDIDATE: &str = "candidate";

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub name: String,
    /// The file read, as given.
    pub path: PathBuf,
    /// Relative paths in the plan are taken from here.
    pub base_dir: PathBuf,
    /// sha256 of the plan file's bytes: a resumed qualification must run the same plan.
    pub sha256: String,
    /// The plan's text, kept so the qualification directory holds exactly what ran.
    pub text: String,
    pub suite: PathBuf,
    /// Where the gate policy came from.
    pub policy: PolicySource,
    /// The gate policy, read and checked once when the plan loads; every
    /// comparison of the qualification uses this value.
    pub gate_policy: Policy,
    /// Passes per runtime, in alternating order (A B B A …); 1 when interleaved.
    pub repeats: usize,
    /// How the two runtimes' requests are placed in time.
    pub schedule: PlanSchedule,
    /// Interleaved: requests per block, for every cell; `None`: [`default_window`].
    pub window: Option<usize>,
    /// Interleaved: keep adding rounds of blocks until the gate resolves.
    pub adaptive: Adaptive,
    pub skip_turnover: bool,
    pub baseline: Runtime,
    pub candidate: Runtime,
    pub readmission: Readmission,
    pub decision: DecisionPolicy,
    /// What serves once a qualification completes without a decision to act on.
    pub after: After,
    pub docker: DockerSettings,
    /// Client limits for every request of both runtimes' passes (`[timeouts]`).
    pub timeouts: crate::config::timeouts::Timeouts,
    /// The ledger the plan's qualifications are recorded in (a team's
    /// `postgres://…`); `--ledger` and `$INFERGATE_LEDGER` come first.
    pub ledger: Option<crate::config::ledger_location::Location>,
}

/// The plan's `schedule`: how the two runtimes share the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanSchedule {
    /// Both runtimes up at once; each cell's requests in blocks of `window`
    /// alternating between them (A B B A …) in one timeline, never both loaded at once.
    Interleaved,
    /// One runtime up at a time, whole passes in A B B A order (`repeats`).
    Alternating,
}

impl PlanSchedule {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanSchedule::Interleaved => "interleaved",
            PlanSchedule::Alternating => "alternating",
        }
    }
}

/// Requests per interleaved block when the plan gives no `window`: at least
/// 4, and twice the cell's concurrency so a block is more than one batch
/// (every in-flight slot filled, then drained) of the runtime.
pub fn default_window(concurrency: usize) -> usize {
    (2 * concurrency).max(4)
}

/// `[adaptive]`: budgets of an adaptive interleaved qualification.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adaptive {
    /// On for every run of this plan (else only with `qualify --adaptive`).
    pub enabled: bool,
    /// Most requests per side per cell (blocks of warmups not counted).
    pub max_requests: usize,
    /// Most wall-clock time for the measuring, checked after every round.
    pub max_minutes: f64,
}

pub const DEFAULT_ADAPTIVE_MAX_REQUESTS: usize = 200;
pub const DEFAULT_ADAPTIVE_MAX_MINUTES: f64 = 30.0;

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            enabled: false,
            max_requests: DEFAULT_ADAPTIVE_MAX_REQUESTS,
            max_minutes: DEFAULT_ADAPTIVE_MAX_MINUTES,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum PolicySource {
    Defaults,
    File(PathBuf),
    /// An inline `[policy]` table, re-serialized for `Policy::from_toml_str`.
    Inline(String),
}

impl PolicySource {
    pub fn load(&self, plan_path: &Path) -> anyhow::Result<Policy> {
        Ok(match self {
            PolicySource::Defaults => Policy::default(),
            PolicySource::File(p) => {
                let text = crate::util::read_input(p).map_err(|e| {
                    ConfigError::file(p.display().to_string(), format!("cannot read: {e}"))
                })?;
                Policy::from_toml_str(&text, &p.display().to_string())?
            }
            PolicySource::Inline(text) => {
                Policy::from_toml_str(text, &format!("{} [policy]", plan_path.display()))?
            }
        })
    }
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Runtime {
    /// "baseline" or "candidate".
    pub label: String,
    pub driver: Driver,
    /// Overrides `readmission.expected_model` for this runtime.
    pub expected_model: Option<String>,
    /// Name of the environment variable holding the API key (never the key).
    pub api_key_env: Option<String>,
    /// Longest wait for the runtime to become healthy after start.
    pub ready_timeout: Duration,
    /// Grace between SIGTERM (or docker stop) and SIGKILL.
    pub stop_grace: Duration,
    /// Read the runtime's own `/metrics` around each cell (default true).
    pub scrape_metrics: bool,
    /// Extra metrics endpoints read beside it: (name, URL), e.g. a DCGM exporter.
    pub metrics_endpoints: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Driver {
    /// A URL infergate does not control: never started, stopped or restarted.
    External {
        url: String,
        health_path: String,
    },
    Process(ProcessDriver),
    Container(ContainerDriver),
}

impl Driver {
    pub fn kind(&self) -> &'static str {
        match self {
            Driver::External { .. } => "external",
            Driver::Process(_) => "process",
            Driver::Container(_) => "container",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProcessDriver {
    /// The reference engine (xllamacpp) serving a profile of `engine/profiles.toml`
    /// or of another profiles file; it announces its own port.
    Engine {
        profile: String,
        profiles_file: Option<PathBuf>,
    },
    Command(CommandSpec),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    /// A path (relative to the plan) or a name looked up on PATH.
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub base_url: String,
    pub health_url: String,
    /// sha256 of the executable: the runtime is "present by digest".
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContainerDriver {
    pub image: ImageRef,
    /// The container's command (Docker `Cmd`), after the image's entrypoint.
    pub args: Vec<String>,
    pub entrypoint: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
    /// Host environment variables passed through by name (secrets: never written anywhere).
    pub env_from_host: Vec<String>,
    /// Bind mounts, Docker syntax `host:container[:ro]`.
    pub binds: Vec<String>,
    /// The server's port on 127.0.0.1 (host networking).
    pub port: u16,
    pub health_path: String,
}

/// An image pinned by digest: `name@sha256:<64 hex>`, or a local image ID `sha256:<64 hex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Repository without tag, when given (`ghcr.io/org/engine`).
    pub repository: Option<String>,
    /// `sha256:<64 hex>`.
    pub digest: String,
}

impl ImageRef {
    pub fn parse(s: &str) -> Result<ImageRef, String> {
        let (repository, digest) = match s.rsplit_once('@') {
            Some((repo, d)) => (Some(repo), d),
            None => (None, s),
        };
        let hex = digest
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("image {s:?} is not pinned by digest: use name@sha256:<64 hex digits> or a local image ID sha256:<64 hex digits>"))?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(format!(
                "image {s:?}: the digest must be sha256: followed by 64 lowercase hex digits"
            ));
        }
        let repository = match repository {
            None => None,
            Some(r) => {
                // A tag beside a digest is ignored by Docker and misleads a reader.
                let last = r.rsplit('/').next().unwrap_or(r);
                if r.is_empty() || last.contains(':') {
                    return Err(format!(
                        "image {s:?}: give the repository without a tag before @sha256:"
                    ));
                }
                Some(r.to_string())
            }
        };
        Ok(ImageRef {
            repository,
            digest: digest.to_string(),
        })
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repository {
            Some(r) => write!(f, "{r}@{}", self.digest),
            None => f.write_str(&self.digest),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Readmission {
    /// The model id `/v1/models` must serve; when unset, the one the runtime
    /// served when it was measured in this qualification.
    pub expected_model: Option<String>,
    /// Send a canary smoke request whose answer must begin with its marker.
    pub canary: bool,
    /// Longest wait for the health endpoint.
    pub timeout: Duration,
    pub hook: Option<Hook>,
}

/// Tells the router about a readmitted runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Hook {
    /// Run with INFERGATE_* variables in the environment; exit 0 admits.
    Command {
        argv: Vec<String>,
        timeout: Duration,
    },
    /// POST a JSON description; a 2xx answer admits.
    Http {
        url: String,
        timeout: Duration,
        bearer_env: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOutcome {
    /// Leave the decision to a human (`infergate decide`).
    Pending,
    Promote,
    RetainBaseline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionPolicy {
    /// When every gate passes.
    pub on_pass: OnOutcome,
    /// When a gate fails.
    pub on_fail: OnOutcome,
}

impl DecisionPolicy {
    pub fn is_pending(&self) -> bool {
        self.on_pass == OnOutcome::Pending && self.on_fail == OnOutcome::Pending
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Restore and readmit the baseline while the decision is pending.
    RestoreBaseline,
    /// Leave nothing running (labs, demos on a laptop).
    Stop,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DockerSettings {
    pub socket: PathBuf,
    /// Pulls (by digest only) are allowed from this registry; none configured means never pull.
    pub registry: Option<String>,
    /// Environment variable holding the base64 X-Registry-Auth value.
    pub auth_env: Option<String>,
}

impl Default for DockerSettings {
    fn default() -> Self {
        DockerSettings {
            socket: PathBuf::from("/var/run/docker.sock"),
            registry: None,
            auth_env: None,
        }
    }
}

// ---- raw TOML shape ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    name: Option<String>,
    suite: Spanned<String>,
    // Not `Spanned`: toml 0.8 cannot deserialize a spanned value holding a
    // sub-table (`[policy.gate]`), and a policy has sections.
    #[serde(default)]
    policy: Option<toml::Value>,
    #[serde(default)]
    repeats: Option<Spanned<i64>>,
    #[serde(default)]
    schedule: Option<Spanned<String>>,
    #[serde(default)]
    window: Option<Spanned<i64>>,
    #[serde(default)]
    adaptive: Option<Spanned<RawAdaptive>>,
    #[serde(default)]
    skip_turnover: bool,
    baseline: Spanned<RawRuntime>,
    candidate: Spanned<RawRuntime>,
    #[serde(default)]
    readmission: Option<RawReadmission>,
    #[serde(default)]
    decision: Option<RawDecision>,
    #[serde(default)]
    after: Option<Spanned<String>>,
    #[serde(default)]
    docker: Option<RawDocker>,
    #[serde(default)]
    timeouts: Option<RawTimeouts>,
    #[serde(default)]
    ledger: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdaptive {
    #[serde(default)]
    enabled: bool,
    max_requests: Option<Spanned<i64>>,
    max_minutes: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeouts {
    connect_s: Option<Spanned<f64>>,
    first_byte_s: Option<Spanned<f64>>,
    idle_s: Option<Spanned<f64>>,
    total_s: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    driver: Spanned<String>,
    // external
    url: Option<String>,
    // process
    engine_profile: Option<String>,
    engine_profiles: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    base_url: Option<String>,
    health_url: Option<String>,
    sha256: Option<String>,
    // container
    image: Option<Spanned<String>>,
    entrypoint: Option<Vec<String>>,
    env_from_host: Option<Vec<String>>,
    binds: Option<Vec<String>>,
    port: Option<Spanned<i64>>,
    health_path: Option<String>,
    // any
    expected_model: Option<String>,
    api_key_env: Option<String>,
    ready_timeout_s: Option<Spanned<f64>>,
    stop_grace_s: Option<Spanned<f64>>,
    scrape_metrics: Option<bool>,
    metrics_endpoints: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReadmission {
    expected_model: Option<String>,
    #[serde(default = "yes")]
    canary: bool,
    timeout_s: Option<Spanned<f64>>,
    hook: Option<Spanned<RawHook>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    command: Option<Vec<String>>,
    url: Option<String>,
    bearer_env: Option<String>,
    timeout_s: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDecision {
    on_pass: Option<Spanned<String>>,
    on_fail: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDocker {
    socket: Option<String>,
    registry: Option<String>,
    auth_env: Option<String>,
}

fn yes() -> bool {
    true
}

impl Plan {
    /// Read and check a plan file.
    pub fn load(path: &Path) -> Result<Plan, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
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
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base_dir.join(p)
            }
        };
        let policy = policy_source(raw.policy, &resolve, &err, key_line(text, "policy"))?;
        // Catch policy mistakes now, not after an hour of measuring.
        let gate_policy = policy
            .load(path)
            .map_err(|e| err(None, "policy", format!("{e:#}")))?;
        let repeats_given = raw.repeats.as_ref().map(|r| r.span());
        let repeats = repeats(raw.repeats, &err)?;
        let readmission = readmission(raw.readmission, &resolve, &err)?;
        let decision = decision(raw.decision, &err)?;
        let after = after(raw.after, &err)?;
        let docker = docker(raw.docker);
        let timeouts = timeouts(raw.timeouts, &err)?;
        let baseline = runtime(text, BASELINE, raw.baseline, &resolve, &err)?;
        let candidate = runtime(text, CANDIDATE, raw.candidate, &resolve, &err)?;
        let clash = same_fixed_address(&baseline, &candidate);
        let schedule = schedule(raw.schedule, repeats_given, clash, &err)?;
        let window = window(raw.window, schedule, &err)?;
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
            decision,
            after,
            docker,
            timeouts,
            ledger,
        })
    }

    pub fn runtime(&self, label: &str) -> Option<&Runtime> {
        match label {
            BASELINE => Some(&self.baseline),
            CANDIDATE => Some(&self.candidate),
            _ => None,
        }
    }

    /// The pass order: `repeats` passes per runtime, alternating A B B A ….
    pub fn pass_order(&self) -> Vec<(&'static str, usize)> {
        let mut order = Vec::with_capacity(self.repeats * 2);
        for i in 0..self.repeats {
            let pair = if i % 2 == 0 {
                [BASELINE, CANDIDATE]
            } else {
                [CANDIDATE, BASELINE]
            };
            for label in pair {
                order.push((label, i + 1));
            }
        }
        order
    }

    /// The model `label` must serve to be readmitted, when the plan says.
    pub fn expected_model(&self, label: &str) -> Option<&str> {
        self.runtime(label)
            .and_then(|r| r.expected_model.as_deref())
            .or(self.readmission.expected_model.as_deref())
    }
}

type ErrFn<'a> = dyn Fn(Option<Range<usize>>, &str, String) -> ConfigError + 'a;

/// The plan's TOML shape; errors name the field by its path.
fn raw_plan(text: &str, file: &str) -> Result<RawPlan, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        // Spanned wrappers add a private segment to the path; readers want the field.
        let path = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let inner = e.into_inner();
        ConfigError {
            file: file.to_string(),
            line: inner.span().map(|s| line_of(text, s.start)),
            column: None,
            field: (path != ".").then_some(path),
            message: crate::report::config_error::toml_error_message(text, &inner),
        }
    })
}

/// `policy = "file.toml"` or an inline `[policy]` table; absent: the defaults.
fn policy_source(
    v: Option<toml::Value>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
    span: Option<Range<usize>>,
) -> Result<PolicySource, ConfigError> {
    let Some(v) = v else {
        return Ok(PolicySource::Defaults);
    };
    match v {
        toml::Value::String(s) => Ok(PolicySource::File(resolve(&s))),
        toml::Value::Table(t) => Ok(PolicySource::Inline(
            toml::to_string(&t).map_err(|e| err(span.clone(), "policy", e.to_string()))?,
        )),
        other => Err(err(
            span,
            "policy",
            format!("expected a path or a table, found a {}", other.type_str()),
        )),
    }
}

/// Where top-level `key` is set (`key = …`, `[key]` or `[key.…]`), for
/// errors about a value read without its span.
fn key_line(text: &str, key: &str) -> Option<Range<usize>> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let header = t
            .strip_prefix('[')
            .map(|h| h.trim_start_matches('[').trim_start());
        let named = |rest: &str| {
            rest.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(['=', ']', '.']))
        };
        if header.map_or(named(t), named) {
            return Some(at..at + line.trim_end().len());
        }
        at += line.len();
    }
    None
}

fn repeats(v: Option<Spanned<i64>>, err: &ErrFn) -> Result<usize, ConfigError> {
    match v {
        None => Ok(1),
        Some(r) if *r.get_ref() >= 1 && *r.get_ref() <= 100 => Ok(*r.get_ref() as usize),
        Some(r) => Err(err(
            Some(r.span()),
            "repeats",
            format!("must be 1..=100, got {}", r.get_ref()),
        )),
    }
}

fn readmission(
    v: Option<RawReadmission>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Readmission, ConfigError> {
    let Some(r) = v else {
        return Ok(Readmission {
            expected_model: None,
            canary: true,
            timeout: Duration::from_secs(60),
            hook: None,
        });
    };
    Ok(Readmission {
        expected_model: r.expected_model,
        canary: r.canary,
        timeout: seconds(r.timeout_s, 60.0, "readmission.timeout_s", err)?,
        hook: match r.hook {
            None => None,
            Some(h) => Some(hook(h, resolve, err)?),
        },
    })
}

fn decision(v: Option<RawDecision>, err: &ErrFn) -> Result<DecisionPolicy, ConfigError> {
    let decision = match v {
        None => DecisionPolicy {
            on_pass: OnOutcome::Pending,
            on_fail: OnOutcome::Pending,
        },
        Some(d) => DecisionPolicy {
            on_pass: on_outcome(d.on_pass, "decision.on_pass", err)?,
            on_fail: on_outcome(d.on_fail, "decision.on_fail", err)?,
        },
    };
    if decision.on_fail == OnOutcome::Promote {
        return Err(err(
            None,
            "decision.on_fail",
            "a failed qualification is never promoted automatically".into(),
        ));
    }
    Ok(decision)
}

fn after(v: Option<Spanned<String>>, err: &ErrFn) -> Result<After, ConfigError> {
    let Some(a) = v else {
        return Ok(After::RestoreBaseline);
    };
    match a.get_ref().as_str() {
        "restore-baseline" => Ok(After::RestoreBaseline),
        "stop" => Ok(After::Stop),
        other => Err(err(
            Some(a.span()),
            "after",
            format!("{other:?}: expected \"restore-baseline\" or \"stop\""),
        )),
    }
}

fn docker(v: Option<RawDocker>) -> DockerSettings {
    match v {
        None => DockerSettings::default(),
        Some(d) => DockerSettings {
            socket: d
                .socket
                .map(PathBuf::from)
                .unwrap_or_else(|| DockerSettings::default().socket),
            registry: d.registry.filter(|r| !r.is_empty()),
            auth_env: d.auth_env,
        },
    }
}

fn timeouts(
    v: Option<RawTimeouts>,
    err: &ErrFn,
) -> Result<crate::config::timeouts::Timeouts, ConfigError> {
    let d = crate::config::timeouts::Timeouts::default();
    let t = v.unwrap_or(RawTimeouts {
        connect_s: None,
        first_byte_s: None,
        idle_s: None,
        total_s: None,
    });
    let secs = |v, default: Duration, field| seconds(v, default.as_secs_f64(), field, err);
    Ok(crate::config::timeouts::Timeouts {
        connect: secs(t.connect_s, d.connect, "timeouts.connect_s")?,
        first_byte: secs(t.first_byte_s, d.first_byte, "timeouts.first_byte_s")?,
        idle: secs(t.idle_s, d.idle, "timeouts.idle_s")?,
        total: secs(t.total_s, d.total, "timeouts.total_s")?,
    })
}

/// Interleaved unless the plan says otherwise, sets `repeats` (the
/// alternating schedule's knob keeps meaning what it meant), or both
/// runtimes need the same fixed address.
fn schedule(
    v: Option<Spanned<String>>,
    repeats_given: Option<Range<usize>>,
    clash: Option<String>,
    err: &ErrFn,
) -> Result<PlanSchedule, ConfigError> {
    let schedule = match &v {
        None if repeats_given.is_some() || clash.is_some() => PlanSchedule::Alternating,
        None => PlanSchedule::Interleaved,
        Some(s) => match s.get_ref().as_str() {
            "interleaved" => PlanSchedule::Interleaved,
            "alternating" => PlanSchedule::Alternating,
            other => {
                return Err(err(
                    Some(s.span()),
                    "schedule",
                    format!("{other:?}: expected \"interleaved\" or \"alternating\""),
                ));
            }
        },
    };
    if schedule == PlanSchedule::Interleaved {
        if let Some(span) = repeats_given {
            return Err(err(
                Some(span),
                "repeats",
                "applies only to schedule = \"alternating\" (interleaved blocks replace passes; size them with `window`)".into(),
            ));
        }
        if let (Some(why), Some(s)) = (&clash, &v) {
            return Err(err(
                Some(s.span()),
                "schedule",
                format!(
                    "\"interleaved\" needs both runtimes up at once, but {why}: use schedule = \"alternating\""
                ),
            ));
        }
    }
    Ok(schedule)
}

fn window(
    v: Option<Spanned<i64>>,
    schedule: PlanSchedule,
    err: &ErrFn,
) -> Result<Option<usize>, ConfigError> {
    match v {
        None => Ok(None),
        Some(w) if schedule == PlanSchedule::Alternating => Err(err(
            Some(w.span()),
            "window",
            "applies only to schedule = \"interleaved\"".into(),
        )),
        Some(w) if (1..=100_000).contains(w.get_ref()) => Ok(Some(*w.get_ref() as usize)),
        Some(w) => Err(err(
            Some(w.span()),
            "window",
            format!("must be 1..=100000 requests per block, got {}", w.get_ref()),
        )),
    }
}

fn adaptive(
    text: &str,
    v: Option<Spanned<RawAdaptive>>,
    schedule: PlanSchedule,
    err: &ErrFn,
) -> Result<Adaptive, ConfigError> {
    let Some(a) = v else {
        return Ok(Adaptive::default());
    };
    let span = a.span();
    let a = a.into_inner();
    let max_requests = match a.max_requests {
        None => DEFAULT_ADAPTIVE_MAX_REQUESTS,
        Some(m) if (1..=10_000_000).contains(m.get_ref()) => *m.get_ref() as usize,
        Some(m) => {
            return Err(err(
                Some(m.span()),
                "adaptive.max_requests",
                format!("must be 1..=10000000 requests, got {}", m.get_ref()),
            ));
        }
    };
    let max_minutes = match a.max_minutes {
        None => DEFAULT_ADAPTIVE_MAX_MINUTES,
        Some(m) if m.get_ref().is_finite() && *m.get_ref() > 0.0 && *m.get_ref() <= 1e6 => {
            *m.get_ref()
        }
        Some(m) => {
            return Err(err(
                Some(m.span()),
                "adaptive.max_minutes",
                format!("must be a positive number of minutes, got {}", m.get_ref()),
            ));
        }
    };
    if a.enabled && schedule == PlanSchedule::Alternating {
        return Err(err(
            Some(key_span(text, span, "enabled")),
            "adaptive.enabled",
            "adaptive mode adds interleaved blocks: it needs schedule = \"interleaved\"".into(),
        ));
    }
    Ok(Adaptive {
        enabled: a.enabled,
        max_requests,
        max_minutes,
    })
}

fn seconds(
    v: Option<Spanned<f64>>,
    default: f64,
    field: &str,
    err: &ErrFn,
) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(Duration::from_secs_f64(default)),
        Some(s) if s.get_ref().is_finite() && *s.get_ref() > 0.0 && *s.get_ref() < 1e7 => {
            Ok(Duration::from_secs_f64(*s.get_ref()))
        }
        Some(s) => Err(err(
            Some(s.span()),
            field,
            format!("must be a positive number of seconds, got {}", s.get_ref()),
        )),
    }
}

fn on_outcome(
    v: Option<Spanned<String>>,
    field: &str,
    err: &ErrFn,
) -> Result<OnOutcome, ConfigError> {
    let Some(v) = v else {
        return Ok(OnOutcome::Pending);
    };
    match v.get_ref().as_str() {
        "pending" => Ok(OnOutcome::Pending),
        "promote" => Ok(OnOutcome::Promote),
        "retain-baseline" => Ok(OnOutcome::RetainBaseline),
        other => Err(err(
            Some(v.span()),
            field,
            format!("{other:?}: expected \"pending\", \"promote\" or \"retain-baseline\""),
        )),
    }
}

fn hook(
    h: Spanned<RawHook>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Hook, ConfigError> {
    let span = h.span();
    let h = h.into_inner();
    // Bounded like every other duration here: `Duration::from_secs_f64` panics
    // on 1e300 (found by review, replayed through `fuzzing::plan`).
    let timeout = seconds(h.timeout_s, 30.0, "readmission.hook.timeout_s", err)?;
    match (h.command, h.url) {
        (Some(argv), None) => {
            let Some(first) = argv.first() else {
                return Err(err(
                    Some(span),
                    "readmission.hook.command",
                    "is empty".into(),
                ));
            };
            if h.bearer_env.is_some() {
                return Err(err(
                    Some(span),
                    "readmission.hook.bearer_env",
                    "applies only to a url hook".into(),
                ));
            }
            let mut argv = argv.clone();
            if first.contains('/') {
                argv[0] = resolve(first).display().to_string();
            }
            Ok(Hook::Command { argv, timeout })
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(err(
                    Some(span),
                    "readmission.hook.url",
                    format!("{url:?} is not an http(s) URL"),
                ));
            }
            Ok(Hook::Http {
                url,
                timeout,
                bearer_env: h.bearer_env,
            })
        }
        _ => Err(err(
            Some(span),
            "readmission.hook",
            "give exactly one of `command` or `url`".into(),
        )),
    }
}

/// Which fields each driver accepts; everything else is a mistake worth naming.
const EXTERNAL_FIELDS: &[&str] = &["url", "health_path"];
const PROCESS_FIELDS: &[&str] = &[
    "engine_profile",
    "engine_profiles",
    "command",
    "args",
    "env",
    "cwd",
    "base_url",
    "health_url",
    "sha256",
];
const CONTAINER_FIELDS: &[&str] = &[
    "image",
    "args",
    "entrypoint",
    "env",
    "env_from_host",
    "binds",
    "port",
    "health_path",
];

/// A `[baseline]` or `[candidate]` table being read: errors name
/// `label.field` and point at the field's own line.
struct RuntimeTable<'a> {
    text: &'a str,
    label: &'a str,
    span: Range<usize>,
    resolve: &'a dyn Fn(&str) -> PathBuf,
    err: &'a ErrFn<'a>,
}

impl RuntimeTable<'_> {
    fn at(&self, field: &str) -> String {
        format!("{}.{field}", self.label)
    }

    /// The offending key's own line when it is in the table, else the table.
    fn key_span(&self, key: &str) -> Range<usize> {
        key_span(self.text, self.span.clone(), key)
    }

    /// An error at `key` = ….
    fn bad(&self, key: &str, message: String) -> ConfigError {
        (self.err)(Some(self.key_span(key)), &self.at(key), message)
    }

    /// An error at the table, for a `field` it lacks.
    fn missing(&self, field: &str, message: String) -> ConfigError {
        (self.err)(Some(self.span.clone()), &self.at(field), message)
    }
}

fn runtime(
    text: &str,
    label: &str,
    raw: Spanned<RawRuntime>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Runtime, ConfigError> {
    let t = RuntimeTable {
        text,
        label,
        span: raw.span(),
        resolve,
        err,
    };
    let r = raw.into_inner();
    let present = present_fields(&r);
    let kind = driver_kind(&t, &r, &present)?;
    let health_path = r.health_path.clone().unwrap_or_else(|| "/health".into());
    if !health_path.starts_with('/') {
        return Err(t.bad("health_path", format!("{health_path:?} must start with /")));
    }
    let driver = match kind {
        "external" => external_driver(&t, &r, health_path)?,
        "process" => process_driver(&t, &r, &present)?,
        _ => container_driver(&t, &r, health_path)?,
    };
    Ok(Runtime {
        label: label.to_string(),
        driver,
        expected_model: r.expected_model,
        api_key_env: r.api_key_env,
        ready_timeout: seconds(r.ready_timeout_s, 120.0, &t.at("ready_timeout_s"), err)?,
        stop_grace: seconds(r.stop_grace_s, 10.0, &t.at("stop_grace_s"), err)?,
        scrape_metrics: r.scrape_metrics.unwrap_or(true),
        metrics_endpoints: metrics_endpoints(
            r.metrics_endpoints,
            &t.at("metrics_endpoints"),
            Some(t.key_span("metrics_endpoints")),
            err,
        )?,
    })
}

/// The driver-specific fields the table gives.
fn present_fields(r: &RawRuntime) -> Vec<&'static str> {
    [
        ("url", r.url.is_some()),
        ("engine_profile", r.engine_profile.is_some()),
        ("engine_profiles", r.engine_profiles.is_some()),
        ("command", r.command.is_some()),
        ("args", r.args.is_some()),
        ("env", r.env.is_some()),
        ("cwd", r.cwd.is_some()),
        ("base_url", r.base_url.is_some()),
        ("health_url", r.health_url.is_some()),
        ("sha256", r.sha256.is_some()),
        ("image", r.image.is_some()),
        ("entrypoint", r.entrypoint.is_some()),
        ("env_from_host", r.env_from_host.is_some()),
        ("binds", r.binds.is_some()),
        ("port", r.port.is_some()),
        ("health_path", r.health_path.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect()
}

/// The driver named, once every field given is one it takes.
fn driver_kind(
    t: &RuntimeTable,
    r: &RawRuntime,
    present: &[&str],
) -> Result<&'static str, ConfigError> {
    let (kind, allowed) = match r.driver.get_ref().as_str() {
        "external" => ("external", EXTERNAL_FIELDS),
        "process" => ("process", PROCESS_FIELDS),
        "container" => ("container", CONTAINER_FIELDS),
        other => {
            return Err((t.err)(
                Some(r.driver.span()),
                &t.at("driver"),
                format!("{other:?}: expected \"external\", \"process\" or \"container\""),
            ));
        }
    };
    if let Some(bad) = present.iter().find(|k| !allowed.contains(k)) {
        return Err(t.bad(
            bad,
            format!(
                "is not a field of the {kind} driver (it takes {})",
                allowed.join(", ")
            ),
        ));
    }
    Ok(kind)
}

fn external_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    health_path: String,
) -> Result<Driver, ConfigError> {
    let Some(url) = &r.url else {
        return Err(t.missing(
            "url",
            "the external driver needs the runtime's base URL".into(),
        ));
    };
    check_http_url(url).map_err(|m| t.bad("url", m))?;
    Ok(Driver::External {
        url: url.trim_end_matches('/').to_string(),
        health_path,
    })
}

/// A process runtime starts from an engine profile or from a command line.
fn process_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    present: &[&str],
) -> Result<Driver, ConfigError> {
    match (&r.engine_profile, &r.command) {
        (Some(profile), None) => {
            if let Some(bad) = ["args", "env", "cwd", "base_url", "health_url", "sha256"]
                .iter()
                .find(|k| present.contains(k))
            {
                return Err(t.bad(bad, "does not apply to an engine_profile runtime (the engine profile says how it starts)".into()));
            }
            Ok(Driver::Process(ProcessDriver::Engine {
                profile: profile.clone(),
                profiles_file: r.engine_profiles.as_deref().map(t.resolve),
            }))
        }
        (None, Some(command)) => command_driver(t, r, command),
        (Some(_), Some(_)) => Err(t.bad(
            "command",
            "give either `engine_profile` or `command`, not both".into(),
        )),
        (None, None) => Err(t.missing(
            "command",
            "the process driver needs `command` (with base_url) or `engine_profile`".into(),
        )),
    }
}

fn command_driver(t: &RuntimeTable, r: &RawRuntime, command: &str) -> Result<Driver, ConfigError> {
    if r.engine_profiles.is_some() {
        return Err(t.bad("engine_profiles", "applies only with engine_profile".into()));
    }
    let Some(base_url) = &r.base_url else {
        return Err(t.missing(
            "base_url",
            "a command runtime needs the base URL it will serve on".into(),
        ));
    };
    check_http_url(base_url).map_err(|m| t.bad("base_url", m))?;
    let base_url = base_url.trim_end_matches('/').to_string();
    let health_url = r
        .health_url
        .clone()
        .unwrap_or_else(|| format!("{base_url}/health"));
    check_http_url(&health_url).map_err(|m| t.bad("health_url", m))?;
    if let Some(h) = &r.sha256
        && (h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(t.bad("sha256", "must be 64 hex digits".into()));
    }
    let command = if command.contains('/') {
        (t.resolve)(command).display().to_string()
    } else {
        command.to_string()
    };
    Ok(Driver::Process(ProcessDriver::Command(CommandSpec {
        command,
        args: r.args.clone().unwrap_or_default(),
        env: r.env.clone().unwrap_or_default(),
        cwd: r.cwd.as_deref().map(t.resolve),
        base_url,
        health_url,
        sha256: r.sha256.as_ref().map(|s| s.to_ascii_lowercase()),
    })))
}

fn container_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    health_path: String,
) -> Result<Driver, ConfigError> {
    let Some(image) = &r.image else {
        return Err(t.missing(
            "image",
            "the container driver needs an image pinned by digest".into(),
        ));
    };
    let image_ref = ImageRef::parse(image.get_ref())
        .map_err(|m| (t.err)(Some(image.span()), &t.at("image"), m))?;
    let Some(port) = &r.port else {
        return Err(t.missing(
            "port",
            "the container driver needs the server's port (host networking)".into(),
        ));
    };
    let port_value = *port.get_ref();
    let port = u16::try_from(port_value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            (t.err)(
                Some(port.span()),
                &t.at("port"),
                format!("{port_value} is not a TCP port"),
            )
        })?;
    let binds = r.binds.clone().unwrap_or_default();
    if let Some(b) = binds.iter().find(|b| b.split(':').count() < 2) {
        return Err(t.bad("binds", format!("{b:?}: expected host:container[:ro]")));
    }
    Ok(Driver::Container(ContainerDriver {
        image: image_ref,
        args: r.args.clone().unwrap_or_default(),
        entrypoint: r.entrypoint.clone(),
        env: r.env.clone().unwrap_or_default(),
        env_from_host: r.env_from_host.clone().unwrap_or_default(),
        binds,
        port,
        health_path,
    }))
}

/// Extra metrics endpoints: each an http(s) URL, by a name that is not `target`.
fn metrics_endpoints(
    raw: Option<BTreeMap<String, String>>,
    at: &str,
    span: Option<Range<usize>>,
    err: &ErrFn,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for (name, url) in raw.unwrap_or_default() {
        if name == TARGET_ENDPOINT {
            return Err(err(
                span,
                at,
                "`target` names the runtime's own /metrics; choose another name".into(),
            ));
        }
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(err(
                span,
                &format!("{at}.{name}"),
                format!("{url:?} is not an http(s) URL"),
            ));
        }
        out.push((name, url));
    }
    Ok(out)
}

/// Why the two runtimes cannot both serve at once, if they cannot: both
/// bind one fixed address (a command's base_url, a container's host port).
/// The reference engine announces a free port; an external URL is already up.
fn same_fixed_address(a: &Runtime, b: &Runtime) -> Option<String> {
    fn fixed(r: &Runtime) -> Option<(String, u16)> {
        match &r.driver {
            Driver::Process(ProcessDriver::Command(c)) => {
                let rest = c.base_url.split_once("://")?.1;
                let authority = rest.split('/').next()?;
                let authority = authority.rsplit('@').next()?;
                let (host, port) = match authority.rsplit_once(':') {
                    Some((h, p)) => (h, p.parse().ok()?),
                    None if c.base_url.starts_with("https") => (authority, 443),
                    None => (authority, 80),
                };
                let host = match host {
                    "localhost" | "127.0.0.1" | "0.0.0.0" | "[::1]" => "local",
                    h => h,
                };
                Some((host.to_string(), port))
            }
            Driver::Container(c) => Some(("local".into(), c.port)),
            _ => None,
        }
    }
    match (fixed(a), fixed(b)) {
        (Some(x), Some(y)) if x == y => Some(format!(
            "the baseline and the candidate both listen on port {}",
            x.1
        )),
        _ => None,
    }
}

fn check_http_url(url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("{url:?} is not an http(s) URL"))
    }
}

/// The span of `key = …` inside `table` (a `[table]` span), else `table`.
fn key_span(text: &str, table: Range<usize>, key: &str) -> Range<usize> {
    let body = text.get(table.clone()).unwrap_or("");
    let mut offset = table.start;
    for line in body.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            let start = offset + (line.len() - t.len());
            return start..start + key.len();
        }
        offset += line.len();
    }
    table
}

/// 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).unwrap_or(text).matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0c0637959c3931829f05154087bbefd2c50003fb9b2010200ce0ec82f4d71a53";

    fn parse(text: &str) -> Result<Plan, ConfigError> {
        Plan::parse(text, Path::new("plans/t.toml"), Path::new("/p"))
    }

    fn minimal(extra: &str) -> String {
        format!(
            "suite = \"s.toml\"\n[baseline]\ndriver = \"process\"\nengine_profile = \"baseline\"\n\
             [candidate]\ndriver = \"process\"\nengine_profile = \"candidate\"\n{extra}"
        )
    }

    #[test]
    fn parses_the_shipped_reference_plan() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/reference.toml");
        let plan = Plan::load(&path).unwrap();
        assert!(matches!(
            plan.baseline.driver,
            Driver::Process(ProcessDriver::Engine { .. })
        ));
        assert!(plan.suite.ends_with("suites/reference-engine.toml"));
        assert!(plan.decision.is_pending());
    }

    #[test]
    fn parses_the_shipped_cross_engine_plans() {
        for engine in ["vllm", "sglang"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("plans/llamacpp-to-{engine}.toml"));
            let plan = Plan::load(&path).unwrap();
            assert!(matches!(
                plan.baseline.driver,
                Driver::Process(ProcessDriver::Engine { .. })
            ));
            let Driver::Process(ProcessDriver::Command(c)) = &plan.candidate.driver else {
                panic!("{:?}", plan.candidate.driver)
            };
            // The launcher, resolved from the plan's folder, serves the port the
            // plan reads: the two must name the same one.
            assert!(
                c.command.ends_with(&format!("engine/{engine}-serve.sh")),
                "{}",
                c.command
            );
            assert!(Path::new(&c.command).is_file(), "{}", c.command);
            let port = c.args.iter().skip_while(|a| *a != "--port").nth(1).unwrap();
            assert_eq!(c.base_url, format!("http://127.0.0.1:{port}"));
            assert!(
                plan.suite
                    .ends_with(format!("suites/llamacpp-to-{engine}.toml")),
                "{}",
                plan.suite.display()
            );
            assert_eq!(plan.schedule, PlanSchedule::Interleaved);
        }
    }

    #[test]
    fn metrics_endpoints_are_named_urls_beside_the_runtimes_own() {
        let with = |extra: &str| {
            minimal("").replace(
                "engine_profile = \"candidate\"",
                &format!("engine_profile = \"candidate\"\n{extra}"),
            )
        };
        let plan = parse(&with(
            "scrape_metrics = false\nmetrics_endpoints = { dcgm = \"http://127.0.0.1:9400/metrics\" }",
        ))
        .unwrap();
        assert!(plan.baseline.scrape_metrics && plan.baseline.metrics_endpoints.is_empty());
        assert!(!plan.candidate.scrape_metrics);
        assert_eq!(
            plan.candidate.metrics_endpoints,
            vec![(
                "dcgm".to_string(),
                "http://127.0.0.1:9400/metrics".to_string()
            )]
        );
        let e = parse(&with("metrics_endpoints = { dcgm = \"127.0.0.1:9400\" }")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("candidate.metrics_endpoints.dcgm"));
        assert_eq!(e.line, Some(8), "{e}");
        let e = parse(&with(
            "metrics_endpoints = { target = \"http://x/metrics\" }",
        ))
        .unwrap_err();
        assert!(e.message.contains("own /metrics"), "{e}");
    }

    #[test]
    fn relative_paths_follow_the_plan_and_order_alternates() {
        let plan = parse(&format!("repeats = 2\n{}", minimal(""))).unwrap();
        assert_eq!(plan.suite, Path::new("/p/s.toml"));
        assert_eq!(
            plan.pass_order(),
            vec![(BASELINE, 1), (CANDIDATE, 1), (CANDIDATE, 2), (BASELINE, 2)]
        );
    }

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let e = parse(&minimal("").replace(
            "engine_profile = \"candidate\"",
            "engine_profile = \"candidate\"\nimgae = \"x\"",
        ))
        .unwrap_err();
        assert_eq!(e.file, "plans/t.toml");
        assert_eq!(e.line, Some(8), "{e}");
        assert_eq!(e.field.as_deref(), Some("candidate.imgae"), "{e}");
        assert!(e.message.contains("imgae"), "{e}");
    }

    #[test]
    fn client_timeouts_come_from_the_plan_and_bad_ones_name_their_line() {
        let plan = parse(&minimal("[timeouts]\nidle_s = 5\ntotal_s = 120.5\n")).unwrap();
        let d = crate::config::timeouts::Timeouts::default();
        assert_eq!(plan.timeouts.idle, Duration::from_secs(5));
        assert_eq!(plan.timeouts.total, Duration::from_secs_f64(120.5));
        assert_eq!(
            (plan.timeouts.connect, plan.timeouts.first_byte),
            (d.connect, d.first_byte)
        );
        assert_eq!(parse(&minimal("")).unwrap().timeouts, d);

        let e = parse(&minimal("[timeouts]\nidle_s = -1\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("timeouts.idle_s"), "{e}");
        assert_eq!(e.line, Some(9), "{e}");
        let e = parse(&minimal("[timeouts]\nidle = 5\n")).unwrap_err();
        assert!(e.message.contains("idle"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_field_path() {
        let e = parse(&minimal("[readmission]\ncanary = \"yes\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("readmission.canary"), "{e}");
        assert_eq!(e.line, Some(9), "{e}");
    }

    #[test]
    fn container_image_must_be_pinned_by_digest() {
        let text = minimal("").replace(
            "driver = \"process\"\nengine_profile = \"candidate\"",
            "driver = \"container\"\nimage = \"ghcr.io/o/e:latest\"\nport = 8080",
        );
        let e = parse(&text).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("candidate.image"));
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.message.contains("not pinned by digest"), "{e}");

        let ok =
            parse(&text.replace("ghcr.io/o/e:latest", &format!("ghcr.io/o/e@{DIGEST}"))).unwrap();
        let Driver::Container(c) = &ok.candidate.driver else {
            panic!()
        };
        assert_eq!(c.image.repository.as_deref(), Some("ghcr.io/o/e"));
        assert_eq!(c.image.to_string(), format!("ghcr.io/o/e@{DIGEST}"));
        assert!(ImageRef::parse(DIGEST).unwrap().repository.is_none());
        assert!(ImageRef::parse(&format!("e:1.0@{DIGEST}")).is_err());
    }

    #[test]
    fn driver_fields_do_not_mix() {
        let e = parse(&minimal("").replace(
            "engine_profile = \"candidate\"",
            "engine_profile = \"candidate\"\nport = 1",
        ))
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("candidate.port"), "{e}");
        assert_eq!(e.line, Some(8), "{e}");
        let e = parse(&minimal("").replace("engine_profile = \"candidate\"", "command = \"x\""))
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("candidate.base_url"), "{e}");
    }

    #[test]
    fn inline_policy_is_checked_at_load() {
        let e = parse(&minimal("[policy]\nthreshold_percent = \"five\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("policy"), "{e}");
        let ok = parse(&minimal("[policy]\nthreshold_percent = 3\n")).unwrap();
        // A policy has sections: an inline one may too.
        let nested = parse(&minimal(
            "[policy.gate]\nalpha = 0.1\n[policy.quality]\ncross_runtime = \"near_tie\"\n",
        ))
        .unwrap();
        let PolicySource::Inline(text) = &nested.policy else {
            panic!("{:?}", nested.policy)
        };
        let p = Policy::from_toml_str(text, "inline").unwrap();
        assert_eq!(p.gate.alpha, 0.1);
        assert_eq!(p.quality.cross_runtime.as_str(), "near_tie");
        let e = parse(&format!("policy = 3\n{}", minimal(""))).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(1), Some("policy")),
            "{e:?}"
        );
        assert!(matches!(ok.policy, PolicySource::Inline(_)));
    }

    #[test]
    fn hook_timeout_out_of_range_is_an_error_not_a_panic() {
        for bad in ["1e300", "-1", "0", "nan", "inf"] {
            let e = parse(&minimal(&format!(
                "[readmission]\nhook = {{ command = [\"x\"], timeout_s = {bad} }}\n"
            )))
            .unwrap_err();
            assert_eq!(
                e.field.as_deref(),
                Some("readmission.hook.timeout_s"),
                "{e}"
            );
            assert_eq!(e.line, Some(9), "{e}");
        }
        let ok = parse(&minimal(
            "[readmission]\nhook = { command = [\"x\"], timeout_s = 2.5 }\n",
        ))
        .unwrap();
        assert!(matches!(
            ok.readmission.hook,
            Some(Hook::Command { timeout, .. }) if timeout == Duration::from_millis(2500)
        ));
    }

    #[test]
    fn toml_errors_always_have_a_message() {
        // Found by fuzzing: a control character in a comment gave `plans/t.toml:2: `.
        let e = parse(&format!("# x\n# a\u{7}b\n{}", minimal(""))).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("U+0007"), "{e}");
    }

    #[test]
    fn schedule_defaults_to_interleaved_and_repeats_means_alternating() {
        let plan = parse(&minimal("")).unwrap();
        assert_eq!(plan.schedule, PlanSchedule::Interleaved);
        assert_eq!((plan.window, plan.repeats), (None, 1));
        assert_eq!(plan.adaptive, Adaptive::default());
        let plan = parse(&format!("repeats = 2\n{}", minimal(""))).unwrap();
        assert_eq!(plan.schedule, PlanSchedule::Alternating);
        let plan = parse(&format!("schedule = \"alternating\"\n{}", minimal(""))).unwrap();
        assert_eq!(
            (plan.schedule, plan.repeats),
            (PlanSchedule::Alternating, 1)
        );
        let plan = parse(&format!(
            "schedule = \"interleaved\"\nwindow = 6\n{}",
            minimal("")
        ))
        .unwrap();
        assert_eq!(
            (plan.schedule, plan.window),
            (PlanSchedule::Interleaved, Some(6))
        );
        assert_eq!(default_window(1), 4);
        assert_eq!(default_window(2), 4);
        assert_eq!(default_window(8), 16);
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/reference.toml");
        let shipped = Plan::load(&shipped).unwrap();
        assert_eq!(shipped.schedule, PlanSchedule::Interleaved);
        // The demo runs adaptive (#31): rounds until the evidence decides.
        assert!(shipped.adaptive.enabled);
    }

    #[test]
    fn schedule_errors_name_line_and_field() {
        let e = parse(&format!("schedule = \"zigzag\"\n{}", minimal(""))).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(1), Some("schedule")),
            "{e}"
        );
        assert!(e.message.contains("zigzag"), "{e}");
        let e = parse(&format!(
            "schedule = \"interleaved\"\nrepeats = 2\n{}",
            minimal("")
        ))
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("repeats")),
            "{e}"
        );
        let e = parse(&format!(
            "schedule = \"alternating\"\nwindow = 4\n{}",
            minimal("")
        ))
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("window")),
            "{e}"
        );
        let e = parse(&format!("\nwindow = 0\n{}", minimal(""))).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("window")),
            "{e}"
        );
        let e = parse(&format!("window = \"4\"\n{}", minimal(""))).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(1), Some("window")),
            "{e}"
        );
    }

    #[test]
    fn runtimes_on_one_fixed_port_cannot_interleave() {
        let cmd = |port: u16| {
            format!(
                "driver = \"process\"\ncommand = \"srv\"\nbase_url = \"http://127.0.0.1:{port}\""
            )
        };
        let two = |a: &str, b: &str, top: &str| {
            format!("{top}suite = \"s.toml\"\n[baseline]\n{a}\n[candidate]\n{b}\n")
        };
        let plan = parse(&two(
            &cmd(9000),
            &cmd(9000).replace("127.0.0.1", "localhost"),
            "",
        ))
        .unwrap();
        assert_eq!(plan.schedule, PlanSchedule::Alternating);
        let plan = parse(&two(&cmd(9000), &cmd(9001), "")).unwrap();
        assert_eq!(plan.schedule, PlanSchedule::Interleaved);
        let e = parse(&two(&cmd(9000), &cmd(9000), "schedule = \"interleaved\"\n")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(1), Some("schedule")),
            "{e}"
        );
        assert!(e.message.contains("port 9000"), "{e}");
    }

    #[test]
    fn adaptive_table_is_checked_and_needs_interleaving() {
        let plan = parse(&minimal(
            "[adaptive]\nenabled = true\nmax_requests = 64\nmax_minutes = 2.5\n",
        ))
        .unwrap();
        assert_eq!(
            plan.adaptive,
            Adaptive {
                enabled: true,
                max_requests: 64,
                max_minutes: 2.5
            }
        );
        let plan = parse(&minimal("[adaptive]\nmax_requests = 10\n")).unwrap();
        assert!(!plan.adaptive.enabled);
        assert_eq!(plan.adaptive.max_minutes, DEFAULT_ADAPTIVE_MAX_MINUTES);
        for (bad, field, line) in [
            ("max_requests = 0", "adaptive.max_requests", 9),
            ("max_minutes = -1", "adaptive.max_minutes", 9),
            ("max_minutes = nan", "adaptive.max_minutes", 9),
            ("max_requets = 5", "adaptive.max_requets", 9),
            ("enabled = \"yes\"", "adaptive.enabled", 9),
        ] {
            let e = parse(&minimal(&format!("[adaptive]\n{bad}\n"))).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{bad}: {e}");
            assert_eq!(e.line, Some(line), "{bad}: {e}");
        }
        let e = parse(&format!(
            "schedule = \"alternating\"\n{}",
            minimal("[adaptive]\nmax_requests = 8\nenabled = true\n")
        ))
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(11), Some("adaptive.enabled")),
            "{e}"
        );
    }

    #[test]
    fn decision_policy_never_promotes_a_failure() {
        let e = parse(&minimal("[decision]\non_fail = \"promote\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("decision.on_fail"));
        let e = parse(&minimal("[decision]\non_pass = \"ship-it\"\n")).unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
    }
}
