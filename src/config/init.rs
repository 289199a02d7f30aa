//! `infergate init`: a commented plan, and a starter suite beside it, for
//! the three common cases: two endpoints someone else runs, two container
//! images by digest, two engine profiles of the bundled reference engine.
//! Each reads as it is written (the tests load it); the comments say what
//! to change.

use std::path::{Path, PathBuf};

use super::endpoints::{self, Endpoints};

/// The suite's file name, beside the plan; the plan names it.
pub const SUITE_FILE: &str = "suite.toml";

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
    format!("{HEAD}name = \"{name}\"\nsuite = \"{SUITE_FILE}\"\n{SCHEDULE}{runtimes}{TAIL}")
}

/// Where `infergate init -o PLAN` writes its suite, `suite.toml` beside
/// the plan, once every path is checked and before any is written: the
/// plan names a file (not a directory), is not its own suite, and neither
/// it nor the suite is there in any form (a dangling link included).
pub fn suite_beside(plan: &Path) -> Result<PathBuf, String> {
    let text = plan.as_os_str().to_string_lossy();
    let last = text.rsplit(['/', std::path::MAIN_SEPARATOR]).next();
    if matches!(last, None | Some("" | "." | "..")) {
        return Err(format!(
            "{text:?} names a directory, not the plan's file: give a file's path (e.g. {})",
            plan.join("plan.toml").display()
        ));
    }
    let name = plan.file_name().map(|n| n.to_string_lossy());
    if name.is_some_and(|n| n.eq_ignore_ascii_case(SUITE_FILE)) {
        return Err(format!(
            "{}: the plan would be its own suite ({SUITE_FILE} is written beside it): name the plan otherwise (e.g. plan.toml)",
            plan.display()
        ));
    }
    let dir = plan
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let suite = dir.join(SUITE_FILE);
    for p in [plan, suite.as_path()] {
        if std::fs::symlink_metadata(p).is_ok() {
            return Err(format!(
                "{} already exists: nothing was written (choose another --out)",
                p.display()
            ));
        }
    }
    if let Ok(m) = std::fs::metadata(dir)
        && !m.is_dir()
    {
        return Err(format!(
            "{} is not a directory: nothing was written",
            dir.display()
        ));
    }
    Ok(suite)
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

    #[test]
    fn the_suite_goes_beside_the_plan_and_never_is_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(suite_beside(&d.join("p.toml")).unwrap(), d.join(SUITE_FILE));
        assert_eq!(
            suite_beside(Path::new("plan.toml")).unwrap(),
            Path::new("./suite.toml")
        );
        for (plan, why) in [
            (d.join("suite.toml"), "its own suite"),
            (d.join("x/Suite.TOML"), "its own suite"),
            (PathBuf::from("foo/"), "names a directory"),
            (d.join("."), "names a directory"),
            (d.join(".."), "names a directory"),
            (PathBuf::new(), "names a directory"),
        ] {
            let e = suite_beside(&plan).unwrap_err();
            assert!(e.contains(why), "{}: {e}", plan.display());
        }
        std::fs::write(d.join("file"), "").unwrap();
        let e = suite_beside(&d.join("file/plan.toml")).unwrap_err();
        assert!(e.contains("is not a directory"), "{e}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.join("nowhere"), d.join("plan.toml")).unwrap();
            let e = suite_beside(&d.join("plan.toml")).unwrap_err();
            assert!(e.contains("plan.toml already exists"), "{e}");
        }
    }
}
