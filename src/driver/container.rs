//! The container driver: a runtime image pinned by digest, run with host
//! networking through the Docker Engine API ([`super::docker`]).
//!
//! Order of work: verify the image exists locally by digest (pull by digest
//! only when a registry is configured), create with
//! `NetworkMode = "host"`, start, check the running container's image ID is
//! the one resolved from the digest, wait for health. A container that fails
//! has its logs captured before it is removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::docker::short;
use crate::config::plan::{
    ContainerDriver, ContainerHost, DockerSettings, Gpus, ImageRef, PullPolicy,
};

pub use super::docker::{ApiResponse, ContainerState, Docker, ImageInfo};

/// Between two looks at a starting container.
const POLL: Duration = Duration::from_millis(200);

/// Find `image` locally and return its image ID. A `name@sha256:` reference
/// must be listed in the image's RepoDigests; a bare ID must equal it.
pub async fn resolve_image(docker: &Docker, image: &ImageRef) -> Result<Option<String>> {
    let Some(info) = docker.image(&image.to_string()).await? else {
        return Ok(None);
    };
    let pinned = match &image.repository {
        None => info.id == image.digest,
        Some(_) => info
            .repo_digests
            .iter()
            .any(|d| d.ends_with(&format!("@{}", image.digest))),
    };
    if !pinned {
        bail!(
            "Docker resolved {image} to image {} whose digests ({}) do not include {}: refusing an image not pinned by that digest",
            info.id,
            info.repo_digests.join(", "),
            image.digest
        );
    }
    Ok(Some(info.id))
}

/// Whether the plan's `[docker] registry` lets `image` be pulled by digest:
/// its repository is on that registry.
pub fn registry_allows(image: &ImageRef, settings: &DockerSettings) -> bool {
    match (&settings.registry, &image.repository) {
        (Some(reg), Some(repo)) => repo.starts_with(&format!("{reg}/")) || repo == reg,
        _ => false,
    }
}

/// The image's ID, pulling it by digest first when it is missing and a
/// registry is configured. Never pulls by tag.
pub async fn ensure_image(
    docker: &Docker,
    image: &ImageRef,
    settings: &DockerSettings,
) -> Result<String> {
    let present = resolve_image(docker, image).await?;
    match (present, settings.pull) {
        (Some(id), PullPolicy::Missing | PullPolicy::Never) => return Ok(id),
        (None, PullPolicy::Never) => bail!(
            "image {image} is not present locally and [docker] pull = \"never\": load the image \
             (docker load, or a pull by digest), or set pull = \"missing\""
        ),
        (Some(_), PullPolicy::Always) if !registry_allows(image, settings) => bail!(
            "[docker] pull = \"always\", but image {image} is not from the registry {}: \
             name it by that registry, or set pull = \"missing\"",
            settings.registry.as_deref().unwrap_or_default()
        ),
        _ => {}
    }
    if !registry_allows(image, settings) {
        bail!(
            "image {image} is not present locally and no registry is configured to pull it from \
             (set [docker] registry in the plan to allow a pull by digest)"
        );
    }
    let auth = match &settings.auth_env {
        Some(name) => Some(
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .with_context(|| {
                    format!("environment variable {name} (docker.auth_env) is not set")
                })?,
        ),
        None => None,
    };
    docker.pull_by_digest(image, auth.as_deref()).await?;
    resolve_image(docker, image)
        .await?
        .with_context(|| format!("pulled {image}, but Docker still does not list it"))
}

/// A started container serving on the host network.
#[derive(Debug, Clone)]
pub struct RunningContainer {
    pub id: String,
    pub name: String,
    pub image_id: String,
    pub base_url: String,
    /// Where its logs are saved when it stops.
    pub log_path: PathBuf,
}

/// Create and start `spec` as container `name`, verify it runs `image_id`,
/// and wait until `health_path` answers 200. On failure the container's logs
/// are saved to `log_path` and the container is removed.
pub async fn start(
    docker: &Docker,
    spec: &ContainerDriver,
    name: &str,
    image_id: &str,
    labels: &BTreeMap<String, String>,
    ready_timeout: Duration,
    log_path: &Path,
) -> Result<RunningContainer> {
    let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for name in &spec.env_from_host {
        let v = std::env::var(name)
            .with_context(|| format!("environment variable {name} (env_from_host) is not set"))?;
        env.push(format!("{name}={v}"));
    }
    let config = create_config(spec, image_id, &env, labels);
    let id = docker.create(name, &config).await?;
    let running = RunningContainer {
        id: id.clone(),
        name: name.to_string(),
        image_id: image_id.to_string(),
        base_url: format!("http://127.0.0.1:{}", spec.port),
        log_path: log_path.to_path_buf(),
    };
    match bring_up(docker, &running, &spec.health_path, ready_timeout).await {
        Ok(()) => Ok(running),
        Err(e) => {
            let e = what_the_host_lacks(e, &spec.host);
            let saved = running.save_logs(docker).await;
            let _ = docker.remove(&id).await;
            let tail = match saved {
                Ok(text) => last_lines(&text, 30),
                Err(le) => format!("(logs unavailable: {le:#})"),
            };
            Err(e.context(format!(
                "container {name} ({}) failed and was removed; its logs are in {}; last lines:\n{tail}",
                short(&id),
                log_path.display()
            )))
        }
    }
}

/// The body of `POST /containers/create`: the image by ID, host
/// networking, and the host settings as `docker run` sends them.
pub fn create_config(
    spec: &ContainerDriver,
    image_id: &str,
    env: &[String],
    labels: &BTreeMap<String, String>,
) -> Value {
    let mut config = json!({
        // The ID, not the reference: what runs is exactly what was verified.
        "Image": image_id,
        "Cmd": spec.args,
        "Env": env,
        "Labels": labels,
        "HostConfig": {
            "NetworkMode": "host",
            "Binds": spec.binds,
            "AutoRemove": false,
        },
    });
    if let Some(ep) = &spec.entrypoint {
        config["Entrypoint"] = json!(ep);
    }
    if let Some(u) = &spec.host.user {
        config["User"] = json!(u);
    }
    let host = &mut config["HostConfig"];
    let h = &spec.host;
    if let Some(g) = &h.gpus {
        // Exactly what `docker run --gpus` sends: the empty driver and the
        // `gpu` capability let the daemon pick its NVIDIA device driver.
        let (count, ids) = match g {
            Gpus::All => (-1, Value::Null),
            Gpus::Count(n) => (i64::from(*n), Value::Null),
            Gpus::Ids(ids) => (0, json!(ids)),
        };
        host["DeviceRequests"] = json!([{
            "Driver": "",
            "Count": count,
            "DeviceIDs": ids,
            "Capabilities": [["gpu"]],
            "Options": {},
        }]);
    }
    if !h.devices.is_empty() {
        host["Devices"] = h
            .devices
            .iter()
            .map(|d| {
                json!({
                    "PathOnHost": d.host,
                    "PathInContainer": d.container,
                    "CgroupPermissions": d.permissions,
                })
            })
            .collect();
    }
    if let Some(n) = h.shm_size {
        host["ShmSize"] = json!(n);
    }
    if let Some(ipc) = &h.ipc {
        host["IpcMode"] = json!(ipc);
    }
    if !h.ulimits.is_empty() {
        host["Ulimits"] = h
            .ulimits
            .iter()
            .map(|u| json!({"Name": u.name, "Soft": u.soft, "Hard": u.hard}))
            .collect();
    }
    if let Some(rt) = &h.runtime {
        host["Runtime"] = json!(rt);
    }
    config
}

/// What a container was given beyond networking and binds, for the ledger:
/// only the settings the plan asked for, as `docker run` spells them.
pub fn host_record(h: &ContainerHost) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(g) = &h.gpus {
        m.insert("gpus".into(), json!(g.to_string()));
    }
    if !h.devices.is_empty() {
        let d: Vec<String> = h
            .devices
            .iter()
            .map(|d| format!("{}:{}:{}", d.host, d.container, d.permissions))
            .collect();
        m.insert("devices".into(), json!(d));
    }
    if let Some(n) = h.shm_size {
        m.insert("shm_size".into(), json!(n));
    }
    if let Some(ipc) = &h.ipc {
        m.insert("ipc".into(), json!(ipc));
    }
    if !h.ulimits.is_empty() {
        let u: Vec<String> = h
            .ulimits
            .iter()
            .map(|u| format!("{}={}:{}", u.name, u.soft, u.hard))
            .collect();
        m.insert("ulimits".into(), json!(u));
    }
    if let Some(rt) = &h.runtime {
        m.insert("runtime".into(), json!(rt));
    }
    if let Some(u) = &h.user {
        m.insert("user".into(), json!(u));
    }
    Value::Object(m)
}

/// Name the plan field and what the host lacks when the daemon refuses a
/// GPU request or a runtime: a GPU host without the NVIDIA Container
/// Toolkit fails here, before any measured request.
fn what_the_host_lacks(e: anyhow::Error, host: &ContainerHost) -> anyhow::Error {
    let text = format!("{e:#}");
    if host.gpus.is_some() && text.contains("could not select device driver") {
        return e.context(
            "the plan's `gpus`: this Docker daemon has no GPU device driver registered; install the NVIDIA Container Toolkit (it puts nvidia-container-runtime-hook on the daemon's PATH) and restart dockerd",
        );
    }
    if let Some(rt) = &host.runtime
        && text.contains("runtime")
    {
        return e.context(format!(
            "the plan's `runtime = {rt:?}`: this Docker daemon does not know that runtime (`docker info` lists the ones it has)"
        ));
    }
    e
}

async fn bring_up(
    docker: &Docker,
    c: &RunningContainer,
    health_path: &str,
    timeout: Duration,
) -> Result<()> {
    docker.start(&c.id).await?;
    let state = docker
        .inspect(&c.id)
        .await?
        .context("the container vanished right after start")?;
    if state.image_id != c.image_id {
        bail!(
            "the running container's image is {}, not {} as resolved from the plan's digest",
            state.image_id,
            c.image_id
        );
    }
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building HTTP client")?;
    let url = format!("{}{health_path}", c.base_url);
    let t0 = Instant::now();
    let mut last = String::from("no attempt finished");
    loop {
        let state = docker
            .inspect(&c.id)
            .await?
            .context("the container vanished while starting")?;
        if !state.running {
            bail!("container exited while starting ({})", describe(&state));
        }
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            bail!("GET {url} did not answer 200 within {timeout:?} (last: {last})");
        }
        match http
            .get(&url)
            .timeout(left.min(Duration::from_secs(2)))
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::OK => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(POLL).await;
    }
}

impl RunningContainer {
    /// Write the container's logs to `log_path`; returns them as text.
    pub async fn save_logs(&self, docker: &Docker) -> Result<String> {
        let bytes = docker.logs(&self.id).await?;
        if let Some(dir) = self.log_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&self.log_path, &bytes)
            .with_context(|| format!("writing {}", self.log_path.display()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Stop, save the logs, remove. Logs are saved even when stop fails.
    pub async fn stop(&self, docker: &Docker, grace: Duration) -> Result<()> {
        let stopped = docker.stop(&self.id, grace).await;
        let saved = self.save_logs(docker).await;
        stopped?;
        saved.map(drop)?;
        docker.remove(&self.id).await
    }

    /// Running, and still running the verified image.
    pub async fn check(&self, docker: &Docker) -> Result<()> {
        match docker.inspect(&self.id).await? {
            None => bail!(
                "container {} ({}) no longer exists",
                self.name,
                short(&self.id)
            ),
            Some(s) if !s.running => {
                bail!("container {} is not running ({})", self.name, describe(&s))
            }
            Some(s) if s.image_id != self.image_id => {
                bail!(
                    "container {} runs image {}, expected {}",
                    self.name,
                    s.image_id,
                    self.image_id
                )
            }
            Some(_) => Ok(()),
        }
    }
}

pub fn describe(s: &ContainerState) -> String {
    let mut d = format!("status {}, exit code {}", s.status, s.exit_code);
    if s.oom_killed {
        d.push_str(", OOM-killed");
    }
    if !s.error.is_empty() {
        d.push_str(&format!(", error: {}", s.error));
    }
    d
}

/// A container name Docker accepts: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`.
pub fn container_name(parts: &[&str]) -> String {
    let joined = parts.join("-");
    let mut name: String = joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.insert(0, 'x');
    }
    name
}

fn last_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(host: ContainerHost) -> ContainerDriver {
        ContainerDriver {
            image: ImageRef::parse(&format!("sha256:{}", "b".repeat(64))).unwrap(),
            args: vec!["--port".into(), "30000".into()],
            entrypoint: None,
            env: BTreeMap::new(),
            env_from_host: vec![],
            binds: vec!["/models:/models:ro".into()],
            port: 30000,
            health_path: "/health".into(),
            host,
        }
    }

    /// Every host setting asked for.
    fn host_of_all() -> ContainerHost {
        use crate::config::plan::{DeviceMapping, Ulimit};
        ContainerHost {
            gpus: Some(Gpus::All),
            devices: vec![DeviceMapping {
                host: "/dev/x".into(),
                container: "/dev/y".into(),
                permissions: "rw".into(),
            }],
            shm_size: Some(32 << 30),
            ipc: Some("host".into()),
            ulimits: vec![Ulimit {
                name: "memlock".into(),
                soft: -1,
                hard: -1,
            }],
            runtime: Some("nvidia".into()),
            user: Some("1000:1000".into()),
        }
    }

    #[test]
    fn host_settings_reach_the_create_body_as_docker_run_sends_them() {
        let host = host_of_all();
        let c = create_config(&spec(host), "sha256:i", &[], &BTreeMap::new());
        let h = &c["HostConfig"];
        assert_eq!(
            h["DeviceRequests"],
            json!([{"Driver": "", "Count": -1, "DeviceIDs": null, "Capabilities": [["gpu"]], "Options": {}}])
        );
        assert_eq!(
            h["Devices"],
            json!([{"PathOnHost": "/dev/x", "PathInContainer": "/dev/y", "CgroupPermissions": "rw"}])
        );
        assert_eq!(h["ShmSize"], json!(34359738368u64));
        assert_eq!(h["IpcMode"], "host");
        assert_eq!(
            h["Ulimits"],
            json!([{"Name": "memlock", "Soft": -1, "Hard": -1}])
        );
        assert_eq!(h["Runtime"], "nvidia");
        assert_eq!(c["User"], "1000:1000");
        assert_eq!(h["NetworkMode"], "host");
        for (g, count, ids) in [
            (Gpus::Count(2), json!(2), json!(null)),
            (
                Gpus::Ids(vec!["0".into(), "GPU-1".into()]),
                json!(0),
                json!(["0", "GPU-1"]),
            ),
        ] {
            let c = create_config(
                &spec(ContainerHost {
                    gpus: Some(g),
                    ..ContainerHost::default()
                }),
                "sha256:i",
                &[],
                &BTreeMap::new(),
            );
            let r = &c["HostConfig"]["DeviceRequests"][0];
            assert_eq!((&r["Count"], &r["DeviceIDs"]), (&count, &ids));
        }
        assert_eq!(
            host_record(&host_of_all()),
            json!({"gpus": "all", "devices": ["/dev/x:/dev/y:rw"], "shm_size": 34359738368u64,
                "ipc": "host", "ulimits": ["memlock=-1:-1"], "runtime": "nvidia", "user": "1000:1000"})
        );
        assert_eq!(host_record(&ContainerHost::default()), json!({}));
        // Nothing asked, nothing sent: the daemon's defaults stand.
        let plain = create_config(
            &spec(ContainerHost::default()),
            "sha256:i",
            &[],
            &BTreeMap::new(),
        );
        for k in [
            "DeviceRequests",
            "Devices",
            "ShmSize",
            "IpcMode",
            "Ulimits",
            "Runtime",
        ] {
            assert!(plain["HostConfig"].get(k).is_none(), "{k}");
        }
        assert!(plain.get("User").is_none());
    }

    #[test]
    fn names() {
        assert_eq!(
            container_name(&["infergate", "q 1/x", "baseline"]),
            "infergate-q-1-x-baseline"
        );
    }
}
