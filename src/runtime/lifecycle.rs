//! A runtime's lifecycle, shared by `qualify`, `decide` and `stop`: verify
//! it is present (by digest or path), start it through its driver, know
//! whether it still runs, stop it, restore and readmit one, and read from the
//! ledger what is serving. Every step that changes something is a ledger
//! entry, written through [`Ctx`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use crate::config::plan::{
    BASELINE, CommandSpec, ContainerDriver, Driver, Gpus, Plan, ProcessDriver, Runtime,
};
use crate::driver::container;
use crate::driver::detached::DetachedProcess;
use crate::driver::docker::Docker;
use crate::driver::engine::{self, EngineInstall, EngineProfile};
use crate::driver::external;
use crate::driver::gpu;
use crate::driver::handle::Handle;
use crate::driver::process::ProcessSpec;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Entry, Ledger, Status};
use crate::runtime::readmit;
use crate::util::which;

/// A runtime started by this invocation.
#[derive(Debug)]
pub struct Started {
    pub handle: Handle,
    /// The spawned process, for exit status and log tails while we run.
    pub process: Option<DetachedProcess>,
    /// Seconds from start to healthy.
    pub startup_s: f64,
}

/// Check that `rt` can be started: the engine and its model installed, the
/// command present (and matching its sha256), or the image present locally by
/// digest (pulled by digest when a registry allows). Changes nothing except a pull.
pub async fn presence(ctx: &Ctx<'_>, rt: &Runtime) -> Result<Value> {
    match &rt.driver {
        Driver::Container(c) => {
            ctx.docker.ping().await?;
            let image_id = container::ensure_image(&ctx.docker, &c.image, &ctx.plan.docker).await?;
            Ok(json!({"driver": "container", "image": c.image.to_string(), "image_id": image_id}))
        }
        _ => local_presence(rt),
    }
}

/// [`presence`] for the drivers that need no daemon (external, process):
/// files and commands looked up, nothing changed.
pub fn local_presence(rt: &Runtime) -> Result<Value> {
    match &rt.driver {
        Driver::External { url, .. } => {
            Ok(json!({"driver": "external", "url": crate::util::redact_url(url)}))
        }
        Driver::Process(ProcessDriver::Engine {
            profile,
            profiles_file,
        }) => {
            let install = EngineInstall::locate()?;
            let p = engine_profile(profile, profiles_file.as_deref())?;
            let model = p.model.clone().unwrap_or_else(|| install.model.clone());
            if !model.is_file() {
                bail!(
                    "engine profile {profile}: model {} does not exist",
                    model.display()
                );
            }
            Ok(json!({
                "driver": "process",
                "engine": format!("xllamacpp {}", engine::XLLAMACPP_VERSION),
                "engine_profile": profile,
                "python": install.python,
                "model": model,
            }))
        }
        Driver::Process(ProcessDriver::Command(c)) => {
            let path = which(&c.command)
                .with_context(|| format!("{}: command {:?} not found", rt.label, c.command))?;
            let sha = file_sha256(&path)?;
            if let Some(want) = &c.sha256
                && &sha != want
            {
                bail!(
                    "{}: {} has sha256 {sha}, but the plan pins {want}",
                    rt.label,
                    path.display()
                );
            }
            Ok(json!({"driver": "process", "command": path, "sha256": sha}))
        }
        Driver::Container(c) => bail!(
            "{}: image {} needs the Docker daemon to be looked up",
            rt.label,
            c.image
        ),
    }
}

/// The engine profile `name`, from `file` or the built-in ones.
pub fn engine_profile(name: &str, file: Option<&Path>) -> Result<EngineProfile> {
    let profiles = match file {
        Some(f) => engine::load_profiles(f)?,
        None => engine::builtin_profiles()?,
    };
    let names: Vec<&String> = profiles.keys().collect();
    profiles
        .get(name)
        .cloned()
        .with_context(|| format!("no engine profile {name:?} (have: {names:?})"))
}

/// Start `rt` and wait until it is healthy. `tag` names this start in log
/// file names (`pass-1`, `restore`). Ledger: `start` started, then ok or failed.
pub async fn start(ctx: &Ctx<'_>, rt: &Runtime, tag: &str) -> Result<Started> {
    let label = rt.label.as_str();
    ctx.log(
        "start",
        Some(label),
        Status::Started,
        json!({"tag": tag, "driver": rt.driver.kind()}),
    )?;
    ctx.say(&format!("{label}: starting ({}, {tag})", rt.driver.kind()));
    let t0 = std::time::Instant::now();
    let started = match gpus_free(ctx, rt).await {
        Ok(smi) => start_inner(ctx, rt, tag).await.map(|s| (s, smi)),
        Err(e) => Err(e),
    };
    match started {
        Ok(((handle, process), smi)) => {
            let startup_s = t0.elapsed().as_secs_f64();
            let mut detail =
                json!({"tag": tag, "handle": handle.to_value(), "startup_s": startup_s});
            if let Driver::Container(c) = &rt.driver {
                // What the container was given: GPUs, devices, shared memory…
                detail["host"] = container::host_record(&c.host);
                if let Some(gpus) = &c.host.gpus {
                    detail["gpu"] = gpu_record(smi.as_deref(), gpus);
                }
            }
            ctx.log("start", Some(label), Status::Ok, detail)?;
            ctx.say(&format!(
                "{label}: ready in {startup_s:.1} s: {}",
                handle.describe()
            ));
            Ok(Started {
                handle,
                process,
                startup_s,
            })
        }
        Err(e) => {
            ctx.log(
                "start",
                Some(label),
                Status::Failed,
                json!({"tag": tag, "error": format!("{e:#}")}),
            )?;
            ctx.say(&format!("{label}: failed to start: {e:#}"));
            Err(e.context(format!("starting the {label} runtime")))
        }
    }
}

/// Before a container starts on GPUs, wait (bounded) until they are free:
/// the runtime stopped before may still be releasing its memory, and one
/// started beside it would get less KV cache than in production. Ledger:
/// `gpu-free` ok (waited how long, each GPU's memory) or failed. Returns
/// the `nvidia-smi` used, or None where the host has none (nothing waited
/// for; the start row says so).
async fn gpus_free(ctx: &Ctx<'_>, rt: &Runtime) -> Result<Option<PathBuf>> {
    let (Some(gpus), Some(smi)) = (rt.gpus(), which("nvidia-smi")) else {
        return Ok(None);
    };
    let label = rt.label.as_str();
    match gpu::await_free(&smi, gpus, gpu::FREE_WAIT, gpu::FREE_POLL).await {
        Ok(w) => {
            ctx.log("gpu-free", Some(label), Status::Ok, json!(w))?;
            if w.waited_s >= 1.0 {
                ctx.say(&format!(
                    "{label}: waited {:.0} s for GPUs {gpus} to be free",
                    w.waited_s
                ));
            }
            Ok(Some(smi))
        }
        Err(e) => {
            ctx.log(
                "gpu-free",
                Some(label),
                Status::Failed,
                json!({"gpus": gpus.to_string(), "error": e}),
            )?;
            bail!("GPUs {gpus} for the {label} runtime: {e}")
        }
    }
}

/// The start row's `gpu`: each GPU the container was given as `nvidia-smi`
/// reports it once the runtime is ready (name, driver, memory), or why not.
fn gpu_record(smi: Option<&Path>, gpus: &Gpus) -> Value {
    let Some(smi) = smi else {
        return json!({"unchecked": "nvidia-smi is not on this host's PATH"});
    };
    match gpu::query(smi).and_then(|all| gpu::selected(&all, gpus)) {
        Ok(g) => json!(g),
        Err(e) => json!({"unchecked": e}),
    }
}

/// How long a restore waits for an external runtime to answer.
const EXTERNAL_RESTORE_WAIT: Duration = Duration::from_secs(15);

/// Start `rt` through its driver and wait until it is ready.
async fn start_inner(
    ctx: &Ctx<'_>,
    rt: &Runtime,
    tag: &str,
) -> Result<(Handle, Option<DetachedProcess>)> {
    let log_path = ctx.log_dir().join(format!("{}-{tag}.log", rt.label));
    match &rt.driver {
        Driver::External { url, health_path } => {
            // Restoring an endpoint infergate does not run is a check that it
            // answers: waiting the whole ready timeout would not bring it back.
            let wait = if tag == "restore" {
                rt.ready_timeout.min(EXTERNAL_RESTORE_WAIT)
            } else {
                rt.ready_timeout
            };
            external::wait_healthy(url, health_path, wait).await?;
            Ok((
                Handle::External {
                    base_url: url.clone(),
                },
                None,
            ))
        }
        Driver::Process(ProcessDriver::Engine {
            profile,
            profiles_file,
        }) => start_engine(ctx, rt, profile, profiles_file.as_deref(), &log_path).await,
        Driver::Process(ProcessDriver::Command(c)) => start_command(rt, c, &log_path).await,
        Driver::Container(c) => start_container(ctx, rt, c, tag, log_path).await,
    }
}

/// The bundled engine with `profile`: ready once it prints its ready line
/// and its `/health` answers.
async fn start_engine(
    ctx: &Ctx<'_>,
    rt: &Runtime,
    profile: &str,
    profiles_file: Option<&Path>,
    log_path: &Path,
) -> Result<(Handle, Option<DetachedProcess>)> {
    let install = EngineInstall::locate()?;
    let p = engine_profile(profile, profiles_file)?;
    let script = engine::write_serve_script(&ctx.log_dir())?;
    let spec = install.process_spec(&p, &script, log_path)?;
    let mut proc = DetachedProcess::spawn(&spec)?;
    let ready = async {
        let line = proc
            .wait_for_line(
                &engine::ready_needle(proc.identity().pid.unsigned_abs()),
                rt.ready_timeout,
            )
            .await?;
        let base_url = engine::parse_ready_line(&line)?;
        proc.wait_for_http_ok(&format!("{base_url}/health"), rt.ready_timeout)
            .await?;
        Ok::<_, anyhow::Error>(base_url)
    }
    .await;
    finish_process(proc, ready, rt)
}

/// A command of the plan: ready once its health URL answers.
async fn start_command(
    rt: &Runtime,
    c: &CommandSpec,
    log_path: &Path,
) -> Result<(Handle, Option<DetachedProcess>)> {
    let program =
        which(&c.command).with_context(|| format!("command {:?} not found", c.command))?;
    let mut spec = ProcessSpec::new(program, log_path).args(&c.args);
    for (k, v) in &c.env {
        spec = spec.env(k, v);
    }
    spec.current_dir = c.cwd.clone();
    let mut proc = DetachedProcess::spawn(&spec)?;
    let ready = proc
        .wait_for_http_ok(&c.health_url, rt.ready_timeout)
        .await
        .map(|_| c.base_url.clone());
    finish_process(proc, ready, rt)
}

/// A container of the image pinned by digest, named for the qualification,
/// the runtime and `tag`.
async fn start_container(
    ctx: &Ctx<'_>,
    rt: &Runtime,
    c: &ContainerDriver,
    tag: &str,
    log_path: PathBuf,
) -> Result<(Handle, Option<DetachedProcess>)> {
    // Resolved again here, not trusted from preflight: the image could have been removed since.
    let image_id = container::resolve_image(&ctx.docker, &c.image)
        .await?
        .with_context(|| format!("image {} is no longer present locally", c.image))?;
    let name = container::container_name(&["infergate", ctx.qualification, &rt.label, tag]);
    // A container of that name left by an interrupted run would block the create.
    if ctx.docker.inspect(&name).await?.is_some() {
        ctx.docker.remove(&name).await?;
    }
    let labels: BTreeMap<String, String> = [
        (
            "infergate.qualification".to_string(),
            ctx.qualification.to_string(),
        ),
        ("infergate.runtime".to_string(), rt.label.clone()),
    ]
    .into();
    let running = container::start(
        &ctx.docker,
        c,
        &name,
        &image_id,
        &labels,
        rt.ready_timeout,
        &log_path,
    )
    .await?;
    Ok((
        Handle::Container {
            base_url: running.base_url,
            id: running.id,
            name: running.name,
            image_id: running.image_id,
            log: log_path,
        },
        None,
    ))
}

/// Turn a spawned process and its readiness into a handle, or stop it and fail.
fn finish_process(
    proc: DetachedProcess,
    ready: Result<String>,
    rt: &Runtime,
) -> Result<(Handle, Option<DetachedProcess>)> {
    match ready {
        Ok(base_url) => {
            let id = proc.identity();
            Ok((
                Handle::Process {
                    base_url,
                    pid: id.pid,
                    start_ticks: id.start_ticks,
                    log: proc.log_path().to_path_buf(),
                    command_line: proc.command_line().to_string(),
                },
                Some(proc),
            ))
        }
        Err(e) => {
            // Never leave a half-started runtime behind; its log stays.
            proc.identity().stop(rt.stop_grace);
            Err(e.context(format!("log kept at {}", proc.log_path().display())))
        }
    }
}

/// Stop a runtime this qualification started. Ledger: `stop` ok or failed.
pub async fn stop(ctx: &Ctx<'_>, label: &str, handle: &Handle, reason: &str) -> Result<()> {
    let what = stop_recorded(ctx, "stop", label, handle, reason)
        .await
        .with_context(|| format!("stopping the {label} runtime"))?;
    ctx.say(&format!("{label}: {what} ({reason})"));
    Ok(())
}

/// Stop `handle` within its runtime's grace and record it as `step`, ok
/// with what the stop did or failed with why.
async fn stop_recorded(
    ctx: &Ctx<'_>,
    step: &str,
    label: &str,
    handle: &Handle,
    reason: &str,
) -> Result<String> {
    let grace = ctx
        .plan
        .runtime(label)
        .map_or(Duration::from_secs(10), |r| r.stop_grace);
    let stopped = handle.stop(&ctx.docker, grace).await;
    let mut entry = json!({"handle": handle.to_value(), "reason": reason});
    let status = match &stopped {
        Ok(what) => {
            entry["result"] = json!(what);
            Status::Ok
        }
        Err(e) => {
            entry["error"] = json!(format!("{e:#}"));
            Status::Failed
        }
    };
    ctx.log(step, Some(label), status, entry)?;
    stopped
}

/// Why `started` is no longer running, or None while it runs.
pub async fn down_reason(started: &Started, docker: &Docker) -> Option<String> {
    match &started.process {
        Some(p) => p.exited().map(|how| {
            format!(
                "{} exited ({how}); last lines of {}:\n{}",
                started.handle.describe(),
                p.log_path().display(),
                p.log_tail(20)
            )
        }),
        None => started.handle.down(docker).await,
    }
}

/// Wait until `started` stops running; returns why. Never returns while it runs.
pub async fn watch(started: &Started, docker: &Docker) -> String {
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some(why) = down_reason(started, docker).await {
            return why;
        }
    }
}

/// The model `label` must serve: the plan's, else the one it served when
/// measured in this qualification (the `run` entry records it).
pub fn expected_model(plan: &Plan, entries: &[Entry], label: &str) -> Option<String> {
    if let Some(m) = plan.expected_model(label) {
        return Some(m.to_string());
    }
    entries
        .iter()
        .rev()
        .filter(|e| {
            e.step == "run" && e.status == Status::Ok && e.runtime.as_deref() == Some(label)
        })
        .find_map(|e| e.detail_str("model").map(str::to_string))
}

/// Readmit a started runtime; on success it is `serving`. Ledger: one
/// `readmit` entry per check, then `readmit` ok/failed and `serving`.
pub async fn readmit(ctx: &Ctx<'_>, label: &str, handle: &Handle) -> Result<readmit::Outcome> {
    let rt = ctx
        .plan
        .runtime(label)
        .with_context(|| format!("no runtime {label}"))?;
    let entries = ctx.ledger.entries(ctx.qualification)?;
    let Some(expected) = expected_model(ctx.plan, &entries, label) else {
        let detail = "no expected model: set readmission.expected_model in the plan".to_string();
        ctx.log(
            "readmit",
            Some(label),
            Status::Failed,
            json!({"error": detail}),
        )?;
        return Ok(readmit::Outcome {
            admitted: false,
            checks: vec![readmit::Check {
                name: "identity".into(),
                passed: false,
                detail,
            }],
        });
    };
    let health_url = match &rt.driver {
        Driver::External { url, health_path } => format!("{url}{health_path}"),
        Driver::Process(ProcessDriver::Command(c)) => c.health_url.clone(),
        Driver::Process(ProcessDriver::Engine { .. }) => format!("{}/health", handle.base_url()),
        Driver::Container(c) => format!("{}{}", handle.base_url(), c.health_path),
    };
    let target = readmit::Target {
        qualification: ctx.qualification.to_string(),
        runtime: label.to_string(),
        base_url: handle.base_url().to_string(),
        health_url,
        api_key_env: rt.api_key_env.clone(),
    };
    ctx.say(&format!(
        "{label}: readmission checks (expecting model {expected:?})"
    ));
    let mut write_err = None;
    let outcome = readmit::readmit(&target, &expected, &ctx.plan.readmission, |c| {
        let status = if c.passed { Status::Ok } else { Status::Failed };
        if let Err(e) = ctx.log(
            "readmit-check",
            Some(label),
            status,
            json!({"check": c.name, "detail": c.detail}),
        ) {
            write_err.get_or_insert(e);
        }
        ctx.say(&format!(
            "  {} {}: {}",
            if c.passed { "ok  " } else { "FAIL" },
            c.name,
            c.detail
        ));
    })
    .await?;
    if let Some(e) = write_err {
        return Err(e);
    }
    if outcome.admitted {
        ctx.log(
            "readmit",
            Some(label),
            Status::Ok,
            json!({"handle": handle.to_value(), "model": expected}),
        )?;
        ctx.log(
            "serving",
            Some(label),
            Status::Ok,
            json!({"handle": handle.to_value()}),
        )?;
        ctx.say(&format!(
            "{label}: readmitted and serving: {}",
            handle.describe()
        ));
    } else {
        let failure = outcome.failure().unwrap_or_default();
        ctx.log(
            "readmit",
            Some(label),
            Status::Failed,
            json!({"handle": handle.to_value(), "error": failure, "log": handle.log()}),
        )?;
        ctx.say(&format!("{label}: NOT readmitted: {failure}"));
    }
    Ok(outcome)
}

/// Start the exact runtime `label` and readmit it. On a failed readmission the
/// runtime is stopped (its logs kept). Returns the serving handle.
pub async fn restore(ctx: &Ctx<'_>, label: &str, reason: &str) -> Result<Handle> {
    let rt = ctx
        .plan
        .runtime(label)
        .with_context(|| format!("no runtime {label}"))?;
    ctx.log(
        "restore",
        Some(label),
        Status::Started,
        json!({"reason": reason}),
    )?;
    ctx.say(&format!("{label}: restoring ({reason})"));
    let result = async {
        // Verified again at restore time: the exact runtime, by digest or path.
        let presence = presence(ctx, rt).await?;
        let started = start(ctx, rt, "restore").await?;
        let outcome = readmit(ctx, label, &started.handle).await?;
        if !outcome.admitted {
            let _ = stop(ctx, label, &started.handle, "failed readmission").await;
            bail!(
                "{label} failed readmission: {}",
                outcome.failure().unwrap_or_default()
            );
        }
        Ok((started.handle, presence))
    }
    .await;
    match result {
        Ok((handle, presence)) => {
            ctx.log(
                "restore",
                Some(label),
                Status::Ok,
                json!({"handle": handle.to_value(), "verified": presence}),
            )?;
            Ok(handle)
        }
        Err(e) => {
            ctx.log(
                "restore",
                Some(label),
                Status::Failed,
                json!({"error": format!("{e:#}")}),
            )?;
            Err(e)
        }
    }
}

/// Restore and readmit the baseline to roll back, then record how that
/// ended: `rollback` ok (what serves now) or failed (why). The outer error
/// is the ledger's; the inner one, the restore's.
pub async fn roll_back_to_baseline(ctx: &Ctx<'_>, reason: &str) -> Result<Result<Handle>> {
    match restore(ctx, BASELINE, reason).await {
        Ok(h) => {
            ctx.log(
                "rollback",
                None,
                Status::Ok,
                json!({"serving": h.to_value()}),
            )?;
            Ok(Ok(h))
        }
        Err(e) => {
            ctx.log(
                "rollback",
                None,
                Status::Failed,
                json!({"error": format!("{e:#}")}),
            )?;
            Ok(Err(e))
        }
    }
}

/// What serves for a qualification now, per the ledger: the last `serving`
/// entry not followed by a `retire` of the same handle.
pub fn serving(entries: &[Entry]) -> Option<(String, Handle)> {
    let mut current: Option<(String, Handle)> = None;
    for e in entries.iter().filter(|e| e.status == Status::Ok) {
        match e.step.as_str() {
            "serving" => {
                if let (Some(label), Some(h)) = (
                    &e.runtime,
                    e.detail.get("handle").and_then(Handle::from_value),
                ) {
                    current = Some((label.clone(), h));
                }
            }
            "retire" => {
                let h = e.detail.get("handle").and_then(Handle::from_value);
                if current
                    .as_ref()
                    .map(|(_, c)| Some(c) == h.as_ref())
                    .unwrap_or(false)
                {
                    current = None;
                }
            }
            _ => {}
        }
    }
    current
}

/// Runtimes started by this qualification that were neither stopped nor put
/// in service: left behind by an interrupted invocation.
pub fn leftovers(entries: &[Entry]) -> Vec<(String, Handle)> {
    let mut live: Vec<(String, Handle)> = Vec::new();
    for e in entries.iter().filter(|e| e.status == Status::Ok) {
        let h = e.detail.get("handle").and_then(Handle::from_value);
        match (e.step.as_str(), h, &e.runtime) {
            ("start", Some(h), Some(label)) => live.push((label.clone(), h)),
            ("stop" | "serving" | "retire", Some(h), _) => live.retain(|(_, x)| x != &h),
            _ => {}
        }
    }
    live
}

/// Take the serving runtime out of service and stop it. Ledger: `retire`.
pub async fn retire(ctx: &Ctx<'_>, label: &str, handle: &Handle, reason: &str) -> Result<()> {
    let what = stop_recorded(ctx, "retire", label, handle, reason).await?;
    ctx.say(&format!("{label}: retired: {what} ({reason})"));
    Ok(())
}

/// Stop whatever an interrupted invocation left running.
pub async fn stop_leftovers(ctx: &Ctx<'_>) -> Result<()> {
    for (label, h) in leftovers(&ctx.ledger.entries(ctx.qualification)?) {
        stop(ctx, &label, &h, "left running by an interrupted invocation").await?;
    }
    Ok(())
}

fn file_sha256(path: &Path) -> Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Error for a missing qualification.
pub fn unknown_qualification(id: &str, ledger: &Ledger) -> anyhow::Error {
    anyhow!("no qualification {id:?} in ledger {}", ledger.location())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, step: &str, runtime: &str, status: Status, detail: Value) -> Entry {
        Entry {
            seq,
            qualification: "q".into(),
            at: String::new(),
            step: step.into(),
            runtime: Some(runtime.into()),
            status,
            detail,
        }
    }

    fn h(pid: i32) -> Handle {
        crate::driver::handle::test_process(pid)
    }

    #[test]
    fn serving_and_leftovers_follow_the_ledger() {
        let d = |h: &Handle| json!({"handle": h.to_value()});
        let es = vec![
            entry(1, "start", "baseline", Status::Ok, d(&h(1))),
            entry(2, "stop", "baseline", Status::Ok, d(&h(1))),
            entry(3, "start", "candidate", Status::Ok, d(&h(2))),
            entry(4, "start", "baseline", Status::Ok, d(&h(3))),
            entry(5, "serving", "baseline", Status::Ok, d(&h(3))),
        ];
        assert_eq!(leftovers(&es), vec![("candidate".to_string(), h(2))]);
        assert_eq!(serving(&es), Some(("baseline".to_string(), h(3))));
        let mut es2 = es.clone();
        es2.push(entry(6, "retire", "baseline", Status::Ok, d(&h(3))));
        assert_eq!(serving(&es2), None);
        // A failed retire changes nothing.
        let mut es3 = es;
        es3.push(entry(6, "retire", "baseline", Status::Failed, d(&h(3))));
        assert!(serving(&es3).is_some());
    }
}
