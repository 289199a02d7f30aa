//! The plan as the qualification uses it: the two runtimes and how each is
//! started, the schedule, the budgets, readmission and the decision policy.
//! Typed values only; reading and checking a plan file is `Plan::load`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Interleaved: requests per block; a cell it does not name takes [`default_window`].
    pub window: Option<Window>,
    /// Interleaved: keep adding rounds of blocks until the gate resolves.
    pub adaptive: Adaptive,
    pub skip_turnover: bool,
    pub baseline: Runtime,
    pub candidate: Runtime,
    pub readmission: Readmission,
    /// `[hooks]`: who hears of the verdict and of the decision.
    pub hooks: Hooks,
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

/// Requests per interleaved block when the plan gives no `window`. A
/// closed-loop cell at concurrency 1: one, so request k of the two sides
/// run back to back and the host's drift, common to both in time, cancels
/// in their ratio (on the reference engine neighbouring requests correlate
/// about as much across sides as within one, and blocks of 4 leave request
/// k's two sides four slots apart; docs/gate-calibration.md).
/// Otherwise at least 4, and twice the concurrency so a block is more than
/// one batch (every in-flight slot filled, then drained) of the runtime; an
/// open-loop cell keeps its arrivals over several requests.
pub fn default_window(concurrency: usize, closed_loop: bool) -> usize {
    DefaultWindow::ByArrivals.window(concurrency, closed_loop)
}

/// Which rule cut the cells a plan gives no `window`: recorded in a
/// qualification's directory so `verify --runs` pools its blocks as they ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultWindow {
    /// max(4, 2 × concurrency) for every cell, closed-loop c=1 included:
    /// the rule of a qualification file without the field.
    TwiceConcurrency,
    /// [`default_window`]: one request for a closed-loop cell at
    /// concurrency 1.
    #[default]
    ByArrivals,
}

impl DefaultWindow {
    pub fn window(self, concurrency: usize, closed_loop: bool) -> usize {
        match self {
            DefaultWindow::ByArrivals if closed_loop && concurrency <= 1 => 1,
            _ => (2 * concurrency).max(4),
        }
    }
}

/// The plan's `window`: requests per block of an interleaved schedule, one
/// for every cell (`window = 4`) or by cell name (`[window]
/// concurrent-512 = 4`), so a concurrent cell's block can be one batch while
/// a concurrency-1 cell keeps its pairs back to back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum Window {
    All(usize),
    ByCell(BTreeMap<String, usize>),
}

impl Window {
    /// The block size this window sets for `cell`, if any.
    pub fn of(&self, cell: &str) -> Option<usize> {
        match self {
            Window::All(w) => Some(*w),
            Window::ByCell(m) => m.get(cell).copied(),
        }
    }

    /// What is wrong with a window by cell name for a suite of `cells`: a
    /// name the suite does not hold (a typo would silently leave that cell
    /// at its default).
    pub fn check_cells<'a>(&self, cells: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
        let Window::ByCell(m) = self else {
            return Ok(());
        };
        let cells: Vec<&str> = cells.into_iter().collect();
        let unknown: Vec<&str> = m
            .keys()
            .map(String::as_str)
            .filter(|k| !cells.contains(k))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(format!(
            "window names cell(s) the suite does not hold: {} (its cells: {})",
            unknown.join(", "),
            cells.join(", ")
        ))
    }
}

/// `[adaptive]`: budgets of an adaptive interleaved qualification.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adaptive {
    /// On for every run of this plan (else only with `qualify --adaptive`).
    pub enabled: bool,
    /// Most measured requests per side per cell (warmups and probes are
    /// named beside them); one round of every cell must fit
    /// ([`check_round_budget`](super::check_round_budget)).
    pub max_requests: usize,
    /// Most wall-clock time for the measuring, checked after every round.
    pub max_minutes: f64,
    /// What the looks' information fractions are shares of.
    pub looks_by: LooksBy,
}

/// `[adaptive] looks_by`: what an adaptive run's information fraction is a
/// share of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LooksBy {
    /// The fewer of the rounds the budget allows and the rounds the design
    /// needs (`design_requests_per_side` at the previous look): a run
    /// whose budget is generous for its noise spends its error where the
    /// evidence will suffice, and closes there.
    #[default]
    Design,
    /// The rounds the budget (requests and clock) allows.
    Budget,
}

impl LooksBy {
    pub fn as_str(self) -> &'static str {
        match self {
            LooksBy::Design => "design",
            LooksBy::Budget => "budget",
        }
    }
}

pub const DEFAULT_ADAPTIVE_MAX_REQUESTS: usize = 200;
pub const DEFAULT_ADAPTIVE_MAX_MINUTES: f64 = 30.0;
/// The most `[adaptive] max_requests` a plan may give.
pub const MAX_ADAPTIVE_MAX_REQUESTS: usize = 10_000_000;

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            enabled: false,
            max_requests: DEFAULT_ADAPTIVE_MAX_REQUESTS,
            max_minutes: DEFAULT_ADAPTIVE_MAX_MINUTES,
            looks_by: LooksBy::Design,
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
    /// What GPU serving asks of the host: accelerators, devices, shared
    /// memory, IPC, ulimits, an OCI runtime, a user.
    pub host: ContainerHost,
}

/// A container's host settings beyond networking and binds, each as
/// `docker run` takes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerHost {
    /// `--gpus`: Docker's `DeviceRequests`.
    pub gpus: Option<Gpus>,
    /// `--device HOST[:CONTAINER[:PERMISSIONS]]`.
    pub devices: Vec<DeviceMapping>,
    /// `--shm-size`, bytes.
    pub shm_size: Option<u64>,
    /// `--ipc`: `host`, `private` or `shareable`.
    pub ipc: Option<String>,
    /// `--ulimit NAME=SOFT:HARD` (memlock, stack, nofile); -1 is unlimited.
    pub ulimits: Vec<Ulimit>,
    /// `--runtime` (an OCI runtime the daemon knows, e.g. `nvidia`).
    pub runtime: Option<String>,
    /// `--user USER[:GROUP]`.
    pub user: Option<String>,
}

/// Which GPUs a container is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpus {
    All,
    Count(u32),
    /// Device indices or UUIDs (`GPU-…`).
    Ids(Vec<String>),
}

impl std::fmt::Display for Gpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gpus::All => write!(f, "all"),
            Gpus::Count(n) => write!(f, "{n}"),
            Gpus::Ids(ids) => write!(f, "[{}]", ids.join(", ")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMapping {
    pub host: String,
    pub container: String,
    /// A subset of `rwm`.
    pub permissions: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
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

/// `[hooks]`: commands run and URLs posted when the qualification has a
/// verdict and when a decision is recorded, each given a summary as JSON.
/// A hook's failure is recorded and shown; it never changes the verdict
/// or the decision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hooks {
    pub on_verdict: Vec<Hook>,
    pub on_decision: Vec<Hook>,
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
    /// When an image is pulled (by digest, from `registry`).
    pub pull: PullPolicy,
}

/// `[docker] pull`, in `docker run --pull`'s words. Every pull is by digest,
/// so a pull never changes which image runs: `always` only proves, before
/// each start, that the registry still serves that digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    /// Pull when the image is not present locally and the registry allows.
    #[default]
    Missing,
    /// Never pull: an image not present locally stops the qualification.
    Never,
    /// Pull before every start, present or not (needs a registry).
    Always,
}

impl PullPolicy {
    pub fn word(self) -> &'static str {
        match self {
            PullPolicy::Missing => "missing",
            PullPolicy::Never => "never",
            PullPolicy::Always => "always",
        }
    }
}

impl Default for DockerSettings {
    fn default() -> Self {
        DockerSettings {
            socket: PathBuf::from("/var/run/docker.sock"),
            registry: None,
            auth_env: None,
            pull: PullPolicy::Missing,
        }
    }
}

impl Runtime {
    /// The GPUs a container runtime asks for; none for other drivers.
    pub fn gpus(&self) -> Option<&Gpus> {
        match &self.driver {
            Driver::Container(ct) => ct.host.gpus.as_ref(),
            _ => None,
        }
    }
}

impl Plan {
    /// Under the interleaved schedule, both runtimes up at once on one GPU
    /// (or possibly one: `all` and counts can land anywhere): each would hold
    /// part of its memory, so neither has production's KV capacity. The
    /// reason, with the way out; None when the schedule or the GPUs allow.
    pub fn shared_gpus_interleaved(&self) -> Option<String> {
        let (Some(b), Some(c)) = (self.baseline.gpus(), self.candidate.gpus()) else {
            return None;
        };
        let share = match (b, c) {
            (Gpus::Ids(x), Gpus::Ids(y)) => x.iter().any(|id| y.contains(id)),
            _ => true,
        };
        (self.schedule == PlanSchedule::Interleaved && share).then(|| {
            format!(
                "interleaved: both runtimes are up at once on the same GPUs (baseline gpus = {b}, candidate gpus = {c}), each with part of their memory, so neither has production's KV capacity: set schedule = \"alternating\", or give each its own GPUs (e.g. gpus = [0] and gpus = [1])"
            )
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
