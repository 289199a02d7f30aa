//! `infergate qualify PLAN --check`: what a qualification would need, checked
//! before it spends anything. Nothing is pulled, started, created or
//! written: the plan, suite and policy are read; each runtime's files,
//! command or image (present locally, by digest) looked up; the environment
//! variables the plan names read; each cell held against the context a
//! runtime's profile states; the ledger opened read-only. Each line says
//! checked, unchecked (and why) or wrong (and what to change).

use std::fmt;
use std::path::Path;

use serde::Serialize;

use crate::config::plan::{Driver, Plan, PlanSchedule, ProcessDriver, PullPolicy, Runtime};
use crate::config::suite::LoadedSuite;
use crate::driver::container::{self, Docker};
use crate::runtime::ledger::{Ledger, Location};
use crate::runtime::lifecycle::{self, engine_profile};

mod spend;

use spend::{minutes, spend};

/// What one line of the check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    Checked,
    Unchecked,
    Wrong,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    pub what: String,
    pub found: Found,
    pub detail: String,
}

/// Every line, in the order a qualification meets them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Check {
    pub lines: Vec<CheckLine>,
}

impl Check {
    fn add(&mut self, what: impl Into<String>, found: Found, detail: impl Into<String>) {
        self.lines.push(CheckLine {
            what: what.into(),
            found,
            detail: detail.into(),
        });
    }

    pub fn is_wrong(&self) -> bool {
        self.lines.iter().any(|l| l.found == Found::Wrong)
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            let tag = match l.found {
                Found::Checked => "checked  ",
                Found::Unchecked => "unchecked",
                Found::Wrong => "WRONG    ",
            };
            writeln!(f, "{tag} {}: {}", l.what, l.detail)?;
        }
        let wrong = self
            .lines
            .iter()
            .filter(|l| l.found == Found::Wrong)
            .count();
        let unchecked = self
            .lines
            .iter()
            .filter(|l| l.found == Found::Unchecked)
            .count();
        writeln!(
            f,
            "{}: {wrong} wrong, {unchecked} unchecked, {} checked",
            if wrong == 0 { "ready" } else { "not ready" },
            self.lines.len() - wrong - unchecked
        )
    }
}

/// Check `plan_path` with the ledger the qualification would use (`given`
/// on the command line, else the plan's, else the default).
pub async fn check(
    plan_path: &Path,
    given: Option<&Location>,
    calibration: Option<&Path>,
) -> Check {
    let mut c = Check::default();
    let plan = match Plan::load(plan_path) {
        Ok(p) => {
            c.add(
                "plan",
                Found::Checked,
                format!("{} reads ({})", plan_path.display(), p.name),
            );
            c.add(
                "policy",
                Found::Checked,
                format!("{} gating metric(s)", p.gate_policy.metrics.len()),
            );
            p
        }
        Err(e) => {
            c.add("plan", Found::Wrong, e.to_string());
            return c;
        }
    };
    let suite = match LoadedSuite::read(&plan.suite) {
        Ok(s) => {
            if let Some(Err(why)) = plan
                .window
                .as_ref()
                .map(|w| w.check_cells(s.suite.cells.iter().map(|c| c.name.as_str())))
            {
                c.add("window", Found::Wrong, why);
            }
            c.add(
                "suite",
                Found::Checked,
                format!(
                    "{} reads: {} cell(s), {} turnover workload(s)",
                    plan.suite.display(),
                    s.suite.cells.len(),
                    s.suite.turnover.len()
                ),
            );
            Some(s)
        }
        Err(e) => {
            c.add("suite", Found::Wrong, format!("{e:#}"));
            None
        }
    };
    let docker = Docker::new(&plan.docker.socket);
    for rt in [&plan.baseline, &plan.candidate] {
        runtime(&mut c, &plan, rt, &docker).await;
        environment(&mut c, rt);
        if let Some(s) = &suite {
            context(&mut c, rt, s);
        }
    }
    daemon(&mut c, &plan, &docker).await;
    schedule(&mut c, &plan);
    ledger(&mut c, &plan, given);
    if let Some(s) = &suite {
        spend(&mut c, &plan, s);
        if let Some(file) = calibration {
            minutes(&mut c, &plan, s, file);
        }
    }
    c
}

/// The runtime's files, command or image, looked up without changing
/// anything: what preflight checks ([`lifecycle::local_presence`]), less
/// the pull.
async fn runtime(c: &mut Check, plan: &Plan, rt: &Runtime, docker: &Docker) {
    let what = format!("{} runtime", rt.label);
    match &rt.driver {
        Driver::External { url, .. } => c.add(
            what,
            Found::Unchecked,
            format!(
                "external {}: not contacted by --check (it is reached when the qualification runs)",
                crate::util::redact_url(url)
            ),
        ),
        Driver::Process(_) => match lifecycle::local_presence(rt) {
            Ok(found) => c.add(what, Found::Checked, describe(&found)),
            Err(e) => c.add(what, Found::Wrong, format!("{e:#}")),
        },
        Driver::Container(ct) => {
            image(c, plan, &what, &ct.image, docker).await;
            host_settings(c, rt, &ct.host, docker).await;
        }
    }
}

/// What the daemon must grant the container: a GPU device driver for
/// `gpus`, the named OCI `runtime`.
async fn host_settings(
    c: &mut Check,
    rt: &Runtime,
    host: &crate::config::plan::ContainerHost,
    docker: &Docker,
) {
    if let Some(g) = &host.gpus {
        let what = format!("{}.gpus", rt.label);
        // Docker registers its NVIDIA device driver only when this hook is
        // on its PATH (the NVIDIA Container Toolkit installs it).
        match crate::util::which("nvidia-container-runtime-hook") {
            Some(p) => c.add(
                what,
                Found::Checked,
                format!("gpus = {g}: {} is installed, so the daemon can grant GPUs", p.display()),
            ),
            None => c.add(
                what,
                Found::Wrong,
                format!(
                    "gpus = {g}: nvidia-container-runtime-hook is not on this host's PATH, so Docker has no GPU device driver: install the NVIDIA Container Toolkit and restart dockerd"
                ),
            ),
        }
    }
    for d in &host.devices {
        let (found, why) = device_on_host(&d.host);
        c.add(
            format!("{}.devices", rt.label),
            found,
            format!("{}: {why}", d.host),
        );
    }
    if let Some(name) = &host.runtime {
        let what = format!("{}.runtime", rt.label);
        let info = docker
            .call(
                "GET",
                "/info",
                None,
                &[],
                std::time::Duration::from_secs(10),
            )
            .await
            .ok()
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok());
        match info
            .as_ref()
            .and_then(|i| i.get("Runtimes"))
            .and_then(|r| r.as_object())
        {
            None => c.add(
                what,
                Found::Unchecked,
                format!("{name}: the daemon's runtimes could not be read"),
            ),
            Some(known) if known.contains_key(name) => {
                c.add(what, Found::Checked, format!("{name}: the daemon knows it"))
            }
            Some(known) => c.add(
                what,
                Found::Wrong,
                format!(
                    "{name}: the daemon knows only {}",
                    known.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ),
        }
    }
}

/// A device the daemon is asked to map, looked up on this host (the
/// daemon's socket is a local file, so its host is this one): the daemon
/// refuses to start a container whose device is missing.
fn device_on_host(path: &str) -> (Found, String) {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_char_device() => (Found::Checked, "a character device".into()),
        Ok(m) if m.file_type().is_block_device() => (Found::Checked, "a block device".into()),
        Ok(_) => (
            Found::Wrong,
            "not a device file: the daemon maps only devices".into(),
        ),
        Err(e) => (
            Found::Wrong,
            format!("not on this host ({e}): the daemon would refuse to start the container"),
        ),
    }
}

/// What preflight found, as `key value` pairs.
fn describe(found: &serde_json::Value) -> String {
    match found.as_object() {
        Some(m) => m
            .iter()
            .filter(|(k, _)| *k != "driver")
            .map(|(k, v)| match v.as_str() {
                Some(s) => format!("{k} {s}"),
                None => format!("{k} {v}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => found.to_string(),
    }
}

/// An image present locally by its digest; never pulled here.
async fn image(
    c: &mut Check,
    plan: &Plan,
    what: &str,
    image: &crate::config::plan::ImageRef,
    docker: &Docker,
) {
    if let Err(e) = docker.ping().await {
        c.add(
            what,
            Found::Unchecked,
            format!("image {image}: Docker is not reachable here ({e:#})"),
        );
        return;
    }
    let registry = plan.docker.registry.as_deref().unwrap_or_default();
    let pullable = container::registry_allows(image, &plan.docker);
    match (container::resolve_image(docker, image).await, plan.docker.pull) {
        (Ok(Some(id)), PullPolicy::Always) if pullable => c.add(
            what,
            Found::Unchecked,
            format!(
                "image {image} present locally (ID {id}); [docker] pull = \"always\" pulls it by digest from {registry} before each start (--check reaches no registry)"
            ),
        ),
        (Ok(Some(_)), PullPolicy::Always) => c.add(
            what,
            Found::Wrong,
            format!(
                "image {image}: [docker] pull = \"always\", but it is not from the registry {registry}: name it by that registry, or set pull = \"missing\""
            ),
        ),
        (Ok(Some(id)), _) => c.add(
            what,
            Found::Checked,
            format!("image {image} present locally (ID {id})"),
        ),
        (Ok(None), PullPolicy::Never) => c.add(
            what,
            Found::Wrong,
            format!(
                "image {image} is not present locally and [docker] pull = \"never\": load the image, or set pull = \"missing\""
            ),
        ),
        (Ok(None), _) if pullable => c.add(
            what,
            Found::Unchecked,
            format!(
                "image {image} is not present locally; qualify will pull it by digest from {registry} (--check reaches no registry)"
            ),
        ),
        (Ok(None), _) => c.add(
            what,
            Found::Wrong,
            format!(
                "image {image} is not present locally and no [docker] registry allows a pull by digest: load the image, or set the registry"
            ),
        ),
        (Err(e), _) => c.add(what, Found::Wrong, format!("image {image}: {e:#}")),
    }
}

/// The environment variables the plan reads for this runtime: set, or wrong.
fn environment(c: &mut Check, rt: &Runtime) {
    let mut names: Vec<(&str, String)> = Vec::new();
    if let Some(k) = &rt.api_key_env {
        names.push(("api_key_env", k.clone()));
    }
    if let Driver::Container(ct) = &rt.driver {
        names.extend(
            ct.env_from_host
                .iter()
                .map(|n| ("env_from_host", n.clone())),
        );
    }
    for (field, name) in names {
        let what = format!("{}.{field} {name}", rt.label);
        match std::env::var(&name) {
            Ok(v) if !v.is_empty() => c.add(what, Found::Checked, "set (its value is not shown)"),
            _ => c.add(what, Found::Wrong, "not set or empty in this environment"),
        }
    }
}

/// Each cell against the context per request the runtime's profile gives
/// (engine profiles); other runtimes report theirs only when they serve.
fn context(c: &mut Check, rt: &Runtime, suite: &LoadedSuite) {
    let what = format!("{} context", rt.label);
    let (per_slot, source) = match &rt.driver {
        Driver::Process(ProcessDriver::Engine {
            profile,
            profiles_file,
        }) => {
            let Ok(p) = engine_profile(profile, profiles_file.as_deref()) else {
                return;
            };
            let source = format!(
                "profile {profile}: {} over {} slots",
                p.ctx_size, p.parallel
            );
            (u64::from(p.context_per_slot()), source)
        }
        Driver::Container(ct) => match stated_context(&ct.args)
            .map(Ok)
            .or_else(|| model_config_context(&ct.binds))
        {
            Some(Ok(found)) => found,
            Some(Err(e)) => {
                c.add(what, Found::Wrong, e);
                return;
            }
            None => {
                c.add(
                    what,
                    Found::Unchecked,
                    "neither the engine's arguments (--context-length, --max-model-len, --ctx-size) nor a bound model's config.json state it; each cell is checked against what the server reports before its first request",
                );
                return;
            }
        },
        _ => {
            c.add(
                what,
                Found::Unchecked,
                "the plan does not state it; each cell is checked against what the server reports before its first request",
            );
            return;
        }
    };
    let misfits: Vec<String> = suite
        .suite
        .cells
        .iter()
        .filter_map(|cell| cell.check_fits(per_slot).err().map(|e| e.to_string()))
        .collect();
    if misfits.is_empty() {
        c.add(
            what,
            Found::Checked,
            format!("every cell fits {per_slot} tokens per request ({source})"),
        );
    } else {
        c.add(
            what,
            Found::Wrong,
            format!("{} ({source})", misfits.join("; ")),
        );
    }
}

/// The context per request an engine's arguments set: SGLang's
/// `--context-length`, vLLM's `--max-model-len`, llama.cpp's `--ctx-size`
/// / `-c` (shared by its `--parallel` / `-np` slots).
fn stated_context(args: &[String]) -> Option<(u64, String)> {
    let value = |names: &[&str]| {
        args.iter().enumerate().find_map(|(i, a)| {
            names.iter().find_map(|n| {
                let v = match a.strip_prefix(n)? {
                    "" => args.get(i + 1)?.as_str(),
                    rest => rest.strip_prefix('=')?,
                };
                Some((
                    v.parse::<u64>().ok()?,
                    format!(
                        "{a}{}",
                        if a == n {
                            format!(" {v}")
                        } else {
                            String::new()
                        }
                    ),
                ))
            })
        })
    };
    if let Some(found) = value(&["--context-length", "--max-model-len"]) {
        return Some(found);
    }
    let (ctx, shown) = value(&["--ctx-size", "-c"])?;
    match value(&["--parallel", "-np"]) {
        Some((slots, np)) if slots > 1 => Some((ctx / slots, format!("{shown} over {np}"))),
        _ => Some((ctx, shown)),
    }
}

/// The trained context of the model a container reads from a bind: the
/// first bound directory holding a `config.json`, read on the host. An
/// unreadable or shapeless `config.json` is wrong, naming the file.
fn model_config_context(binds: &[String]) -> Option<Result<(u64, String), String>> {
    const KEYS: [&str; 4] = [
        "max_position_embeddings",
        "max_sequence_length",
        "seq_length",
        "n_positions",
    ];
    let file = binds
        .iter()
        .filter_map(|b| b.split(':').next())
        .map(|host| Path::new(host).join("config.json"))
        .find(|f| f.is_file())?;
    let read = || -> Result<(u64, String), String> {
        let text =
            crate::util::read_input(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", file.display()))?;
        // Multimodal checkpoints keep the language model's under text_config.
        let n = KEYS.iter().find_map(|k| {
            let at = |o: &serde_json::Value| o.get(k).and_then(serde_json::Value::as_u64);
            at(&v)
                .or_else(|| v.get("text_config").and_then(at))
                .map(|n| (n, *k))
        });
        let (n, key) = n.ok_or_else(|| {
            format!(
                "{}: none of {} is a number",
                file.display(),
                KEYS.join(", ")
            )
        })?;
        Ok((
            n,
            format!(
                "{}'s {key}; the server may be started with less, which is checked again before the first request",
                file.display()
            ),
        ))
    };
    Some(read())
}

/// Oldest Engine API that has every field infergate sends (`DeviceRequests`
/// came in 1.40).
const MIN_DOCKER_API: (u32, u32) = (1, 40);

/// The Docker daemon, when a runtime is a container: reachable (else
/// wrong: nothing could be started), and new enough for the fields the
/// container driver sends.
async fn daemon(c: &mut Check, plan: &Plan, docker: &Docker) {
    let containers = [&plan.baseline, &plan.candidate]
        .iter()
        .any(|rt| matches!(rt.driver, Driver::Container(_)));
    if !containers {
        return;
    }
    let what = "docker daemon";
    let (version, api) = match docker.version().await {
        Ok(v) => v,
        Err(e) => {
            // The container runtimes cannot be started here: not ready.
            c.add(
                what,
                Found::Wrong,
                format!(
                    "{}: not reachable here ({e:#}), so the container runtimes cannot be started: start the daemon, or set [docker] socket to its socket",
                    plan.docker.socket.display()
                ),
            );
            return;
        }
    };
    let parsed = api
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    let (major, minor) = MIN_DOCKER_API;
    match parsed {
        Some(v) if v >= MIN_DOCKER_API => c.add(
            what,
            Found::Checked,
            format!("Docker {version}, Engine API {api} (infergate needs {major}.{minor} or newer)"),
        ),
        _ => c.add(
            what,
            Found::Wrong,
            format!(
                "Docker {version} speaks Engine API {api}; infergate needs {major}.{minor} or newer (GPU requests): upgrade the daemon"
            ),
        ),
    }
}

/// Whether the schedule keeps both runtimes up at once, and what that asks
/// of the host.
fn schedule(c: &mut Check, plan: &Plan) {
    let both_containers = matches!(plan.baseline.driver, Driver::Container(_))
        && matches!(plan.candidate.driver, Driver::Container(_));
    if let Some(why) = plan.shared_gpus_interleaved() {
        c.add("schedule", Found::Wrong, why);
        return;
    }
    match plan.schedule {
        PlanSchedule::Interleaved => match (plan.baseline.gpus(), plan.candidate.gpus()) {
            (Some(b), Some(cand)) => c.add(
                "schedule",
                Found::Checked,
                format!("interleaved on separate GPUs (baseline {b}, candidate {cand})"),
            ),
            _ if both_containers => c.add(
                "schedule",
                Found::Unchecked,
                "interleaved: both containers are up at once, each with its share of the host's memory and accelerators; whether they fit is not known here (the alternating schedule runs one at a time)",
            ),
            _ => c.add(
                "schedule",
                Found::Checked,
                "interleaved: both runtimes up at once, requests alternating in blocks",
            ),
        },
        PlanSchedule::Alternating => c.add(
            "schedule",
            Found::Checked,
            format!(
                "alternating: one runtime at a time, {} pass(es) each",
                plan.repeats
            ),
        ),
    }
}

/// The ledger the qualification would record in: opened read-only if it
/// exists, else where it would be made. A shared ledger is not contacted.
fn ledger(c: &mut Check, plan: &Plan, given: Option<&Location>) {
    let location = match super::ledger_for(plan, given) {
        Ok(l) => l,
        Err(e) => {
            c.add("ledger", Found::Wrong, format!("{e:#}"));
            return;
        }
    };
    match &location {
        Location::Postgres(_) => c.add(
            "ledger",
            Found::Unchecked,
            format!("{location}: a shared ledger is not contacted by --check (opening one brings its schema up to date)"),
        ),
        Location::Sqlite(p) if p.is_dir() => c.add(
            "ledger",
            Found::Wrong,
            format!("{location} is a directory, not a ledger file: give a file's path"),
        ),
        Location::Sqlite(p) if p.exists() => match Ledger::connect_read_only(&location) {
            Ok(l) => c.add(
                "ledger",
                Found::Checked,
                format!(
                    "{location} opens ({} qualification(s) recorded)",
                    l.qualifications().map(|q| q.len()).unwrap_or(0)
                ),
            ),
            Err(e) => c.add("ledger", Found::Wrong, format!("{e:#}")),
        },
        Location::Sqlite(_) => c.add(
            "ledger",
            Found::Checked,
            format!("{location} does not exist yet; qualify will create it"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(schedule: &str, b: &str, c: &str) -> Plan {
        let table = |gpus: &str| {
            format!(
                "driver = \"container\"\nimage = \"sha256:{}\"\nport = 30000\ngpus = {gpus}\n",
                "c".repeat(64)
            )
        };
        let text = format!(
            "suite = \"s.toml\"\nschedule = \"{schedule}\"\n[baseline]\n{}[candidate]\n{}",
            table(b),
            table(c).replace("30000", "30001")
        );
        Plan::parse(&text, Path::new("p.toml"), Path::new("/")).unwrap()
    }

    fn line(p: &Plan) -> CheckLine {
        let mut c = Check::default();
        schedule(&mut c, p);
        c.lines.remove(0)
    }

    #[test]
    fn a_device_is_checked_on_this_host() {
        assert!(matches!(device_on_host("/dev/null").0, Found::Checked));
        let (found, why) = device_on_host("/etc/hostname");
        assert!(
            matches!(found, Found::Wrong) && why.contains("not a device"),
            "{why}"
        );
        let (found, why) = device_on_host("/dev/infergate-no-such-device");
        assert!(
            matches!(found, Found::Wrong) && why.contains("not on this host"),
            "{why}"
        );
    }

    #[test]
    fn the_context_an_engines_arguments_state_is_read_per_slot() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ctx = |a: &[&str]| stated_context(&args(a)).map(|(n, _)| n);
        assert_eq!(
            ctx(&["--model-path", "/m", "--context-length", "131072"]),
            Some(131_072)
        );
        assert_eq!(ctx(&["--max-model-len=32768"]), Some(32_768));
        assert_eq!(
            ctx(&["-m", "x.gguf", "-c", "16384", "-np", "4"]),
            Some(4096)
        );
        assert_eq!(ctx(&["--ctx-size=8192", "--parallel", "1"]), Some(8192));
        assert_eq!(ctx(&["--port", "8000", "--cache"]), None);
        assert_eq!(ctx(&["--context-length"]), None, "no value");
        let (_, shown) = stated_context(&args(&["-c", "16384", "-np", "4"])).unwrap();
        assert_eq!(shown, "-c 16384 over -np 4");
    }

    #[test]
    fn a_bound_models_config_gives_its_trained_context_or_is_named_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model");
        std::fs::create_dir(&model).unwrap();
        let bind = vec![
            "/nonexistent/cache:/cache".to_string(),
            format!("{}:/models/m:ro", model.display()),
        ];
        assert!(model_config_context(&bind).is_none(), "no config.json yet");
        std::fs::write(
            model.join("config.json"),
            r#"{"text_config": {"max_position_embeddings": 131072}}"#,
        )
        .unwrap();
        let (n, source) = model_config_context(&bind).unwrap().unwrap();
        assert_eq!(n, 131_072);
        assert!(source.contains("max_position_embeddings"), "{source}");
        std::fs::write(model.join("config.json"), r#"{"hidden_size": 8}"#).unwrap();
        let e = model_config_context(&bind).unwrap().unwrap_err();
        assert!(
            e.contains("config.json: none of max_position_embeddings"),
            "{e}"
        );
    }

    #[test]
    fn interleaved_runtimes_on_the_same_gpus_are_named_with_the_way_out() {
        for (b, c) in [("\"all\"", "[1]"), ("1", "1"), ("[0, 1]", "[1, 2]")] {
            let l = line(&plan("interleaved", b, c));
            assert_eq!(l.found, Found::Wrong, "{b} {c}: {}", l.detail);
            assert!(
                l.detail.contains("schedule = \"alternating\"") && l.detail.contains("own GPUs"),
                "{}",
                l.detail
            );
        }
        let l = line(&plan("interleaved", "[0]", "[\"1\"]"));
        assert_eq!(l.found, Found::Checked, "{}", l.detail);
        assert!(l.detail.contains("separate GPUs"), "{}", l.detail);
        // One at a time: sharing every GPU is what production does.
        let l = line(&plan("alternating", "\"all\"", "\"all\""));
        assert_eq!(l.found, Found::Checked, "{}", l.detail);
    }
}
