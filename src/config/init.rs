//! `infergate init`: a commented plan, and a starter suite beside it, for
//! the three common cases: two endpoints someone else runs, two container
//! images by digest, two engine profiles of the bundled reference engine.
//! Each reads as it is written (the tests load it); the comments say what
//! to change.

use super::endpoints::{self, Endpoints};

/// What the plan qualifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Two OpenAI-compatible endpoints someone else runs (the external driver).
    Endpoints,
    /// Two container images, pinned by digest (the container driver).
    Containers,
    /// Two engine profiles of the bundled reference engine (the process driver).
    Profiles,
}

const HEAD: &str = "\
# A qualification plan, written by `infergate init`. Check it before it
# spends anything:  infergate qualify plan.toml --check
# Then run it:      infergate qualify plan.toml
# Every key: src/config/plan/mod.rs; the container settings: docs/gpu.md.
";

const SCHEDULE: &str = "\
# Both runtimes up at once, each cell's requests alternating between them in
# short blocks (drift hits both alike), adaptive rounds until the gate
# decides or the budget is spent. Runtimes that cannot both be up (one GPU,
# one port) take schedule = \"alternating\" with repeats = 2 instead.
schedule = \"interleaved\"

[adaptive]
enabled = true
max_requests = 200   # per side per cell
max_minutes = 30

";

const ENDPOINTS: &str = "\
[baseline]
driver = \"external\"
url = \"http://127.0.0.1:8000\"           # the endpoint in service
# api_key_env = \"SERVING_API_KEY\"       # the variable holding its key

[candidate]
driver = \"external\"
url = \"http://127.0.0.1:8001\"           # the endpoint to qualify
# api_key_env = \"SERVING_API_KEY\"
";

const CONTAINERS: &str = "\
# Each image pinned by its digest (docker pull IMAGE@sha256:…, or set
# [docker] registry to let infergate pull by digest). Both listen on the
# host network, each on its own port.
[baseline]
driver = \"container\"
image = \"registry.example/engine@sha256:0000000000000000000000000000000000000000000000000000000000000000\"
args = [\"--port\", \"30000\"]
port = 30000
# gpus = [0]                  # each runtime its own GPUs when interleaved
# shm_size = \"32g\"
# ipc = \"host\"
# binds = [\"/srv/models/m:/models/m:ro\"]
# env = { HF_HUB_OFFLINE = \"1\" }

[candidate]
driver = \"container\"
image = \"registry.example/engine@sha256:1111111111111111111111111111111111111111111111111111111111111111\"
args = [\"--port\", \"30001\"]
port = 30001
# gpus = [1]

# [docker]
# registry = \"registry.example\"   # pulls by digest from here only
# pull = \"missing\"                # or \"never\", \"always\"
";

const PROFILES: &str = "\
# The bundled reference engine (llama.cpp with SmolLM2-135M, installed by
# scripts/setup-engine.sh), started two ways: engine/profiles.toml.
[baseline]
driver = \"process\"
engine_profile = \"baseline\"

[candidate]
driver = \"process\"
engine_profile = \"candidate\"

[readmission]
expected_model = \"SmolLM2-135M-Instruct-Q4_1\"
";

const TAIL: &str = "
# The human decides (infergate decide); meanwhile the baseline is restored.
[decision]
on_pass = \"pending\"
on_fail = \"pending\"

# Told of the verdict and the decision (docs/pipelines.md):
# [hooks]
# on_verdict = [{ command = [\"scripts/notify.sh\"] }]
";

/// The plan's text for `kind`, its suite in `suite.toml` beside it.
pub fn plan_text(kind: Kind) -> String {
    let (name, runtimes) = match kind {
        Kind::Endpoints => ("endpoints", ENDPOINTS),
        Kind::Containers => ("containers", CONTAINERS),
        Kind::Profiles => ("profiles", PROFILES),
    };
    format!("{HEAD}name = \"{name}\"\nsuite = \"suite.toml\"\n{SCHEDULE}{runtimes}{TAIL}")
}

/// The starter suite: the cells and turnover check `qualify --baseline
/// --candidate` uses, at their default sizes.
pub fn suite_text() -> String {
    let (max_requests, max_minutes) = endpoints::default_budget();
    let e = Endpoints {
        baseline: String::new(),
        candidate: String::new(),
        api_key_env: None,
        cells: Vec::new(),
        max_requests,
        max_minutes,
        turnover: true,
    };
    endpoints::suite_text(&e, &endpoints::default_cells(None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::{Driver, Plan};
    use crate::config::suite::LoadedSuite;

    #[test]
    fn every_kind_of_plan_reads_as_written_with_its_suite() {
        for kind in [Kind::Endpoints, Kind::Containers, Kind::Profiles] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("suite.toml"), suite_text()).unwrap();
            let path = dir.path().join("plan.toml");
            std::fs::write(&path, plan_text(kind)).unwrap();
            let plan = Plan::load(&path).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            let driver = |d: &Driver| d.kind();
            let want = match kind {
                Kind::Endpoints => "external",
                Kind::Containers => "container",
                Kind::Profiles => "process",
            };
            assert_eq!(driver(&plan.baseline.driver), want, "{kind:?}");
            assert_eq!(driver(&plan.candidate.driver), want, "{kind:?}");
            assert!(plan.adaptive.enabled, "{kind:?}");
            let suite = LoadedSuite::read(&plan.suite).unwrap();
            assert_eq!(suite.suite.cells.len(), 2);
            assert_eq!(suite.suite.turnover.len(), 1);
        }
    }
}
