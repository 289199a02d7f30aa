//! The container driver against a real Docker daemon (Debian's docker.io;
//! `scripts/setup-docker.sh` installs and starts it): an image built locally
//! around the reference engine (`docker/build-reference-image.sh`), pinned by
//! its image ID, run with host networking.
//!
//! Without a daemon these tests FAIL and say so: they never pass silently.

mod qualify_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use infergate::config::plan::{ContainerDriver, ContainerHost};
use infergate::decision::decide;
use infergate::driver::container::{self, Docker};
use infergate::driver::engine::{self, EngineInstall};
use infergate::driver::handle::Handle;
use infergate::qualify::{self, Verdict};
use infergate::report::DecisionAction;
use infergate::runtime::ledger::Ledger;
use infergate::runtime::lifecycle;
use qualify_support::*;
use serde_json::Value;

const SOCKET: &str = "/var/run/docker.sock";

async fn docker() -> Docker {
    let d = Docker::new(SOCKET);
    if let Err(e) = d.ping().await {
        panic!(
            "NO DOCKER DAEMON: the container-driver tests need a real Docker daemon and cannot pass without one \
             ({e:#}). Run scripts/setup-docker.sh (installs docker.io, starts dockerd) and rerun."
        );
    }
    d
}

/// Build the test image; its ID (`sha256:…`).
fn build_image() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/build-reference-image.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(id.starts_with("sha256:") && id.len() == 71, "{id:?}");
    id
}

/// Read-only mounts of what the engine needs from the host: /usr (libc and
/// friends), the Python install behind the venv, and the engine cache.
fn binds(install: &EngineInstall) -> Vec<String> {
    let out = Command::new(&install.python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .expect("venv python");
    let prefix = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut b = vec![
        "/usr:/usr:ro".to_string(),
        "/etc/ld.so.cache:/etc/ld.so.cache:ro".to_string(),
    ];
    if !prefix.starts_with("/usr/") && prefix != "/usr" {
        b.push(format!("{prefix}:{prefix}:ro"));
    }
    let cache = install.cache_dir.display().to_string();
    b.push(format!("{cache}:{cache}:ro"));
    b
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `[baseline]`/`[candidate]` table running engine profile `profile` in the image.
fn container_table(image: &str, profile: &str, install: &EngineInstall, port: u16) -> String {
    // The suite's thread cap, as the process driver applies it.
    let p = engine::builtin_profiles()
        .unwrap()
        .remove(profile)
        .unwrap()
        .with_threads_cap(engine::threads_cap_from_env().unwrap());
    let mut args: Vec<String> = p
        .serve_args(&install.model)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // serve.py takes the last --port: the fixed one host networking needs.
    args.extend(["--port".into(), port.to_string()]);
    let list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "driver = \"container\"\nimage = \"{image}\"\nentrypoint = {}\nargs = {}\nbinds = {}\nport = {port}\nready_timeout_s = 180\nshm_size = \"64m\"\n",
        list(&[
            install.python.display().to_string(),
            "/engine/serve.py".into()
        ]),
        list(&args),
        list(&binds(install)),
    )
}

/// Removes every container this test's qualifications created, even on
/// panic: those of qualification `label`, or, for a label ending in `-`,
/// of every qualification whose id starts with it (by container name).
struct Containers(&'static str);

impl Drop for Containers {
    fn drop(&mut self) {
        let label = self.0;
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let d = Docker::new(SOCKET);
                let filter = match label.strip_suffix('-') {
                    Some(prefix) => format!("{{\"name\":[\"infergate-{prefix}-\"]}}"),
                    None => format!("{{\"label\":[\"infergate.qualification={label}\"]}}"),
                };
                let path = format!("/containers/json?all=1&filters={}", urlencode(&filter));
                let r = d
                    .call("GET", &path, None, &[], Duration::from_secs(10))
                    .await
                    .ok()?;
                let list: Value = serde_json::from_slice(&r.body).ok()?;
                for c in list.as_array()? {
                    if let Some(id) = c["Id"].as_str() {
                        let _ = d.remove(id).await;
                    }
                }
                Some(())
            })
        })
        .join();
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn inspect_raw(d: &Docker, id: &str) -> Value {
    let r = d
        .call(
            "GET",
            &format!("/containers/{id}/json"),
            None,
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    serde_json::from_slice(&r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qualify_and_retain_baseline_with_containers_pinned_by_image_id() {
    let _serial = serial().await;
    let d = docker().await;
    let _cleanup = Containers("q-container");
    let env = Env::new();
    let install = EngineInstall::locate().unwrap();
    let image = build_image();
    env.suite(2, 4);
    let plan = env.write(
        "plan.toml",
        &format!(
            "name = \"container\"\nsuite = \"suite.toml\"\n\n[baseline]\n{}\n[candidate]\n{}\n[readmission]\nexpected_model = \"{MODEL}\"\ntimeout_s = 60\n",
            container_table(&image, "baseline", &install, free_port()),
            container_table(&image, "candidate", &install, free_port()),
        ),
    );
    let o = qualify::run(&plan, &env.opts("q-container"))
        .await
        .expect("qualify");
    let entries = env.entries("q-container");
    // Each start records what its container was given.
    let started: Vec<&Value> = entries
        .iter()
        .filter(|e| e.step == "start" && e.status.as_str() == "ok")
        .map(|e| &e.detail["host"])
        .collect();
    assert!(!started.is_empty());
    for host in started {
        assert_eq!(*host, serde_json::json!({"shm_size": 64 << 20}), "{host}");
    }
    let s = steps(&entries).join("\n");
    assert!(
        matches!(o.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}\n{s}",
        o.verdict,
        o.failure
    );
    // Preflight resolved the image by its ID before anything started.
    let pre = detail_of(&entries, "preflight", "-", "ok");
    assert_eq!(pre[0]["baseline"]["image_id"], image.as_str(), "{}", pre[0]);

    // Every container ran exactly the pinned image, on the host network.
    let started: Vec<Handle> = detail_of(&entries, "start", "baseline", "ok")
        .into_iter()
        .chain(detail_of(&entries, "start", "candidate", "ok"))
        .filter_map(|d| Handle::from_value(&d["handle"]))
        .collect();
    assert_eq!(started.len(), 3, "{s}");
    let serving_now = lifecycle::serving(&entries).map(|x| x.1);
    for h in &started {
        let Handle::Container { image_id, log, .. } = h else {
            panic!("{h:?}")
        };
        assert_eq!(image_id, &image);
        if Some(h) != serving_now.as_ref() {
            // Stopped ones were removed, with their logs saved first.
            let text = std::fs::read_to_string(log).unwrap_or_default();
            assert!(
                text.contains("infergate-engine listening"),
                "{}",
                log.display()
            );
            let Handle::Container { id, .. } = h else {
                unreachable!()
            };
            assert!(d.inspect(id).await.unwrap().is_none());
        }
    }
    let serving = assert_baseline_serving(&entries).await;
    let Handle::Container { id, .. } = &serving else {
        panic!()
    };
    let raw = inspect_raw(&d, id).await;
    assert_eq!(raw["HostConfig"]["NetworkMode"], "host");
    assert_eq!(raw["Image"], image.as_str());
    assert_eq!(raw["State"]["Running"], true);

    // Retain the baseline: the running container is verified (image ID) and readmitted.
    let dd = decide::run(&decide::Options {
        report: o.report.clone().unwrap(),
        action: DecisionAction::RetainBaseline,
        note: "container test".into(),
        who: Some("ci".into()),
        ledger: None,
        force: false,
        verify: infergate::verify_runs::check_qualification,
        quiet: true,
    })
    .await
    .expect("decide");
    assert!(
        dd.carried_out
            && dd
                .promotion
                .contains("exact baseline verified and readmitted"),
        "{}",
        dd.promotion
    );

    // Stop: the container is stopped and removed, its logs kept.
    infergate::runtime::stop::stop("q-container", Some(env.ledger.clone().into()), true)
        .await
        .unwrap();
    assert!(
        d.inspect(id).await.unwrap().is_none(),
        "container {id} still exists"
    );
    let Handle::Container { log, .. } = &serving else {
        panic!()
    };
    assert!(
        std::fs::read_to_string(log)
            .unwrap()
            .contains("SIGTERM received"),
        "{}",
        log.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_digest_refuses_and_a_failing_container_keeps_its_logs() {
    let _serial = serial().await;
    let d = docker().await;
    let _cleanup = Containers("q-container-fail");
    let env = Env::new();
    let install = EngineInstall::locate().unwrap();
    let image = build_image();
    env.suite(2, 4);

    // The baseline's digest is not present and no registry is configured: refused untouched.
    let absent = format!("sha256:{}", "0".repeat(64));
    let plan = env.write(
        "plan.toml",
        &format!(
            "suite = \"suite.toml\"\n[baseline]\n{}\n[candidate]\n{}\n",
            container_table(&absent, "baseline", &install, free_port()),
            container_table(&image, "candidate", &install, free_port()),
        ),
    );
    let o = qualify::run(&plan, &env.opts("q-container-fail"))
        .await
        .expect("qualify");
    assert_eq!(o.verdict, Verdict::Refused);
    let f = o.failure.unwrap();
    assert!(
        f.contains("not present locally") && f.contains("no registry is configured"),
        "{f}"
    );
    assert_eq!(
        steps(&env.entries("q-container-fail")),
        ["plan - ok", "preflight baseline failed", "done - failed"]
    );
    // With pull = "never", the refusal names the policy to change.
    let never = env.write(
        "never.toml",
        &format!(
            "suite = \"suite.toml\"\n[docker]\npull = \"never\"\n[baseline]\n{}\n[candidate]\n{}\n",
            container_table(&absent, "baseline", &install, free_port()),
            container_table(&image, "candidate", &install, free_port()),
        ),
    );
    let o = qualify::run(&never, &env.opts("q-container-never"))
        .await
        .expect("qualify");
    assert_eq!(o.verdict, Verdict::Refused);
    let f = o.failure.unwrap();
    assert!(
        f.contains("not present locally and [docker] pull = \"never\""),
        "{f}"
    );
    // Interleaved on one GPU: refused before anything starts (the second
    // start would find the GPU taken), with the way out.
    let shared = env.write(
        "shared.toml",
        &format!(
            "suite = \"suite.toml\"\nschedule = \"interleaved\"\n[baseline]\n{}gpus = [\"0\"]\n[candidate]\n{}gpus = [\"0\"]\n",
            container_table(&image, "baseline", &install, free_port()),
            container_table(&image, "candidate", &install, free_port()),
        ),
    );
    let o = qualify::run(&shared, &env.opts("q-container-shared"))
        .await
        .expect("qualify");
    assert_eq!(o.verdict, Verdict::Refused);
    let f = o.failure.unwrap();
    assert!(
        f.contains("on the same GPUs") && f.contains("alternating"),
        "{f}"
    );
    assert_eq!(
        steps(&env.entries("q-container-shared")),
        ["plan - ok", "preflight - failed", "done - failed"]
    );

    // A container whose server cannot start: its logs are captured, then it is removed.
    let spec = ContainerDriver {
        image: infergate::config::plan::ImageRef::parse(&image).unwrap(),
        args: vec![
            "/engine/serve.py".into(),
            "--model".into(),
            "/nonexistent.gguf".into(),
            "--port".into(),
            free_port().to_string(),
        ],
        entrypoint: Some(vec![install.python.display().to_string()]),
        env: Default::default(),
        env_from_host: vec![],
        binds: binds(&install),
        port: free_port(),
        health_path: "/health".into(),
        host: Default::default(),
    };
    let log: PathBuf = env.path("failed.log");
    let labels = [(
        "infergate.qualification".to_string(),
        "q-container-fail".to_string(),
    )]
    .into();
    let name = container::container_name(&["infergate-test", "q-container-fail"]);
    let err = container::start(
        &d,
        &spec,
        &name,
        &image,
        &labels,
        Duration::from_secs(120),
        &log,
    )
    .await
    .expect_err("a server without a model must not start");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("exited while starting") && msg.contains(&log.display().to_string()),
        "{msg}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("nonexistent.gguf"), "{text}");
    assert!(
        d.inspect(&name).await.unwrap().is_none(),
        "failed container {name} was not removed"
    );
}

/// The reference engine in the test image on `port`, with `host` settings.
fn engine_spec(
    image: &str,
    install: &EngineInstall,
    port: u16,
    host: ContainerHost,
) -> ContainerDriver {
    let p = engine::builtin_profiles()
        .unwrap()
        .remove("baseline")
        .unwrap();
    let mut args: Vec<String> = vec!["/engine/serve.py".into()];
    args.extend(
        p.serve_args(&install.model)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    args.extend(["--port".into(), port.to_string()]);
    ContainerDriver {
        image: infergate::config::plan::ImageRef::parse(image).unwrap(),
        args,
        entrypoint: Some(vec![install.python.display().to_string()]),
        env: Default::default(),
        env_from_host: vec![],
        binds: binds(install),
        port,
        health_path: "/health".into(),
        host,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_settings_reach_the_container_and_a_gpu_the_host_lacks_is_named() {
    use infergate::config::plan::{DeviceMapping, Gpus, Ulimit};
    let _serial = serial().await;
    let d = docker().await;
    let _cleanup = Containers("q-container-host");
    let env = Env::new();
    let install = EngineInstall::locate().unwrap();
    let image = build_image();
    let labels = [(
        "infergate.qualification".to_string(),
        "q-container-host".to_string(),
    )]
    .into();

    // Devices, shared memory, IPC and ulimits: the daemon applies what the
    // plan asked (its own record of the container), and the engine serves.
    let host = ContainerHost {
        devices: vec![DeviceMapping {
            host: "/dev/null".into(),
            container: "/dev/infergate-null".into(),
            permissions: "rw".into(),
        }],
        shm_size: Some(96 << 20),
        ipc: Some("private".into()),
        ulimits: vec![Ulimit {
            name: "nofile".into(),
            soft: 4096,
            hard: 8192,
        }],
        ..ContainerHost::default()
    };
    let port = free_port();
    let name = container::container_name(&["infergate-test", "q-container-host", "ok"]);
    let c = container::start(
        &d,
        &engine_spec(&image, &install, port, host),
        &name,
        &image,
        &labels,
        Duration::from_secs(120),
        &env.path("host.log"),
    )
    .await
    .expect("the engine serves with the host settings");
    let raw = inspect_raw(&d, &c.id).await;
    let h = &raw["HostConfig"];
    assert_eq!(
        h["Devices"][0]["PathInContainer"], "/dev/infergate-null",
        "{h}"
    );
    assert_eq!(h["Devices"][0]["CgroupPermissions"], "rw");
    assert_eq!(h["ShmSize"], 96 << 20);
    assert_eq!(h["IpcMode"], "private");
    assert_eq!(
        h["Ulimits"][0],
        serde_json::json!({"Name": "nofile", "Soft": 4096, "Hard": 8192})
    );
    // Inside the container (a second client: the docker CLI): the device
    // node is there, /dev/shm has the size asked, the file limit holds.
    let inside = |script: &str| {
        let o = Command::new("docker")
            .args(["exec", &c.id, "/bin/sh", "-c", script])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(inside("test -c /dev/infergate-null && echo char"), "char");
    let df = inside("df -k /dev/shm");
    let kib = df.lines().last().and_then(|l| l.split_whitespace().nth(1));
    assert_eq!(kib, Some((96 * 1024).to_string().as_str()), "{df}");
    // The soft limit of the container's own process (PID 1, set when it was
    // created): an exec'd shell's `ulimit -n` is racy under runc 1.1, whose
    // Go runtime may raise an exec'd process's soft limit to the hard one
    // before the spec's is applied (opencontainers/runc#4266; seen here
    // once in a loaded suite as 8192).
    assert_eq!(
        inside(
            "while read -r l; do case \"$l\" in 'Max open files'*) set -- $l; echo \"$4\";; esac; done < /proc/1/limits"
        ),
        "4096"
    );
    c.stop(&d, Duration::from_secs(10)).await.unwrap();

    // A GPU on a daemon without the NVIDIA Container Toolkit: refused when
    // the container starts, naming the plan field and what is missing;
    // nothing is left behind.
    let name = container::container_name(&["infergate-test", "q-container-host", "gpu"]);
    let gpu = ContainerHost {
        gpus: Some(Gpus::All),
        ..ContainerHost::default()
    };
    let err = container::start(
        &d,
        &engine_spec(&image, &install, free_port(), gpu),
        &name,
        &image,
        &labels,
        Duration::from_secs(60),
        &env.path("gpu.log"),
    )
    .await
    .expect_err("this daemon has no GPU driver");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("the plan's `gpus`") && msg.contains("NVIDIA Container Toolkit"),
        "{msg}"
    );
    assert!(msg.contains("could not select device driver"), "{msg}");
    assert!(
        d.inspect(&name).await.unwrap().is_none(),
        "{name} left behind"
    );
}

/// A Docker daemon of the test's own: its socket, data and exec roots in a
/// temporary directory, and a stand-in `nvidia-container-runtime-hook`
/// first on its PATH, so it registers its NVIDIA device driver as it would
/// on a GPU host. The stand-in records what it is called with (its
/// arguments, and the OCI config of the container it runs for) and lets
/// the container start. Stopped when dropped.
struct GpuDaemon {
    dir: tempfile::TempDir,
    child: std::process::Child,
}

impl GpuDaemon {
    fn start() -> GpuDaemon {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let out = dir.path().join("hook");
        std::fs::create_dir(&out).unwrap();
        let hook = bin.join("nvidia-container-runtime-hook");
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > {o}/args\ncat > {o}/state.json\n\
                 exec python3 -c 'import json,sys,shutil; shutil.copy(json.load(open(sys.argv[1]))[\"bundle\"] + \"/config.json\", sys.argv[2])' {o}/state.json {o}/config.json\n",
                o = out.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sock = dir.path().join("docker.sock");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .arg("--host")
            .arg(format!("unix://{}", sock.display()))
            .arg("--data-root")
            .arg(dir.path().join("data"))
            .arg("--exec-root")
            .arg(dir.path().join("exec"))
            .arg("--pidfile")
            .arg(dir.path().join("dockerd.pid"))
            .args(["--bridge=none", "--iptables=false", "--ip6tables=false"])
            .env("PATH", path)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run dockerd for the GPU stand-in: {e}"));
        GpuDaemon { child, dir }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("docker.sock")
    }

    /// The reference engine's image, built into this daemon; its ID.
    fn build_image(&self) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/build-reference-image.sh");
        let built = Command::new(&script)
            .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        String::from_utf8_lossy(&built.stdout).trim().to_string()
    }

    fn hook_file(&self, name: &str) -> PathBuf {
        self.dir.path().join("hook").join(name)
    }

    async fn ready(&self) -> Docker {
        let d = Docker::new(self.socket());
        for _ in 0..120 {
            if d.ping().await.is_ok() {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let log = std::fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default();
        panic!("the test's own dockerd did not answer within 30 s:\n{log}");
    }
}

impl Drop for GpuDaemon {
    fn drop(&mut self) {
        // SIGTERM: dockerd stops its containers and unmounts its layers
        // before it exits; SIGKILL only if it has not within 15 s.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let mut exited = false;
        for _ in 0..150 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // dockerd leaves its network namespace's bind mount under the exec
        // root: unmount what is still mounted below the directory, deepest
        // first, so the directory can be removed.
        let root = self.dir.path().display().to_string();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut below: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&root))
            .collect();
        below.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in below {
            let _ = Command::new("umount").arg(m).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_request_reaches_the_nvidia_hook_exactly_as_asked() {
    let _serial = serial().await;
    let daemon = GpuDaemon::start();
    let d = daemon.ready().await;
    let install = EngineInstall::locate().unwrap();
    let image = daemon.build_image();

    let env = Env::new();
    let gpus = ContainerHost {
        gpus: Some(infergate::config::plan::Gpus::Ids(vec![
            "0".into(),
            "GPU-8f6c".into(),
        ])),
        ..ContainerHost::default()
    };
    let name = container::container_name(&["infergate-test", "gpu-hook"]);
    let c = container::start(
        &d,
        &engine_spec(&image, &install, free_port(), gpus),
        &name,
        &image,
        &BTreeMap::new(),
        Duration::from_secs(120),
        &env.path("gpu-hook.log"),
    )
    .await
    .expect("with the driver registered, the container starts and serves");
    // The daemon asked its NVIDIA driver for exactly these devices: the
    // prestart hook ran, and the container's environment names them.
    let args = std::fs::read_to_string(daemon.hook_file("args")).expect("the hook ran");
    assert_eq!(args.lines().collect::<Vec<_>>(), ["prestart"], "{args}");
    let oci: Value =
        serde_json::from_slice(&std::fs::read(daemon.hook_file("config.json")).unwrap()).unwrap();
    let env_list: Vec<&str> = oci["process"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        env_list.contains(&"NVIDIA_VISIBLE_DEVICES=0,GPU-8f6c"),
        "{env_list:?}"
    );
    let hooks = oci["hooks"]["prestart"].as_array().unwrap();
    assert!(
        hooks.iter().any(|h| h["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/bin/nvidia-container-runtime-hook"))),
        "{hooks:?}"
    );
    c.stop(&d, Duration::from_secs(10)).await.unwrap();
}

/// A qualification whose runtimes share GPU 0, on the daemon with the
/// stand-in NVIDIA hook, with a stand-in `nvidia-smi` first on the
/// command's PATH. Each of its answers is the next of a fixed cycle: GPU 0
/// busy (the runtime before still releasing its memory), then free, then
/// holding the runtime's 30 GB. So every start must wait for the release,
/// one poll, and its ledger row records the GPU as the host reports it.
/// About 15 s: three container starts, one request a pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_start_on_a_gpu_waits_for_it_to_be_free_and_records_what_it_got() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = serial().await;
    let daemon = GpuDaemon::start();
    let _d = daemon.ready().await;
    let install = EngineInstall::locate().unwrap();
    let image = daemon.build_image();

    let env = Env::new();
    env.suite(1, 2);
    let bin = env.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let line = |used: u64| format!("0, GPU-8f6c, NVIDIA Stand-In 80GB, 570.86.15, 81559, {used}\n");
    for (i, used) in [72_000, 100, 30_000].into_iter().enumerate() {
        std::fs::write(bin.join(format!("out{i}")), line(used)).unwrap();
    }
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\nd=$(dirname \"$0\")\nn=$(cat \"$d/calls\" 2>/dev/null || echo 0)\n\
         echo $((n + 1)) > \"$d/calls\"\ncat \"$d/out$((n % 3))\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let gpu = "gpus = [\"0\"]\n";
    let plan = env.write(
        "plan.toml",
        &format!(
            "name = \"gpu\"\nsuite = \"suite.toml\"\nschedule = \"alternating\"\nrepeats = 1\n\
             [docker]\nsocket = \"{}\"\n[baseline]\n{}{gpu}\n[candidate]\n{}{gpu}\n\
             [readmission]\nexpected_model = \"{MODEL}\"\ntimeout_s = 60\n",
            daemon.socket().display(),
            container_table(&image, "baseline", &install, free_port()),
            container_table(&image, "baseline", &install, free_port()),
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args([
            "qualify",
            "plan.toml",
            "--id",
            "q-gpu",
            "--out",
            "out",
            "--quiet",
        ])
        .arg("--ledger")
        .arg(&env.ledger)
        .current_dir(plan.parent().unwrap())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    let entries = env.entries("q-gpu");
    let s = steps(&entries).join("\n");
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{}\n{s}",
        String::from_utf8_lossy(&out.stderr)
    );
    let starts: Vec<&Value> = entries
        .iter()
        .filter(|e| e.step == "start" && e.status.as_str() == "ok")
        .map(|e| &e.detail)
        .collect();
    let waits: Vec<&Value> = entries
        .iter()
        .filter(|e| e.step == "gpu-free")
        .map(|e| &e.detail)
        .collect();
    assert!(starts.len() >= 2, "{s}");
    assert_eq!(
        waits.len(),
        starts.len(),
        "one wait before each start:\n{s}"
    );
    for w in &waits {
        // Busy at the first look, free at the second, one poll (1 s) later.
        assert!(w["waited_s"].as_f64().unwrap() >= 1.0, "{w}");
        assert_eq!(w["gpus"][0]["memory_used_mib"], 100, "{w}");
    }
    for st in &starts {
        let g = &st["gpu"][0];
        assert_eq!(g["uuid"], "GPU-8f6c", "{st}");
        assert_eq!(g["name"], "NVIDIA Stand-In 80GB", "{st}");
        assert_eq!(g["driver_version"], "570.86.15", "{st}");
        assert_eq!(g["memory_used_mib"], 30_000, "{st}");
        assert_eq!(st["host"]["gpus"], "[0]", "{st}");
    }
    // Leave nothing running on the test's daemon.
    let _ = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["stop", "q-gpu", "--ledger"])
        .arg(&env.ledger)
        .output();
}

/// Build the test image with build marker `build` and push it to the test
/// registry as `repo:tag`; its registry digest, as Docker reports it.
fn push_build(repo: &str, tag: &str, build: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/build-reference-image.sh");
    let named = format!("{repo}:{tag}");
    let out = Command::new(&script)
        .env("INFERGATE_TEST_IMAGE", &named)
        .env("INFERGATE_TEST_BUILD", build)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docker = |args: &[&str]| {
        let o = Command::new("docker").args(args).output().unwrap();
        assert!(
            o.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    docker(&["push", "--quiet", &named]);
    let digests = docker(&[
        "image",
        "inspect",
        "--format",
        "{{json .RepoDigests}}",
        &named,
    ]);
    let digests: Vec<String> = serde_json::from_str(&digests).unwrap();
    let pinned = digests
        .iter()
        .find(|d| d.starts_with(&format!("{repo}@")))
        .unwrap_or_else(|| panic!("{named} pushed, but Docker lists {digests:?}"));
    pinned.rsplit_once('@').unwrap().1.to_string()
}

/// `watch --once` against a tag on a real registry (Debian's docker-registry
/// on loopback, started by scripts/test.sh): the tag's digest is qualified,
/// pulled by digest (`pull = "always"`, the image removed locally first);
/// a second tick finds it judged and does nothing; a new build pushed to the
/// tag is the next qualification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_qualifies_each_new_digest_of_a_tag_once() {
    let _serial = serial().await;
    let d = docker().await;
    // Its qualifications are named `watch-<digest>-on-<digest>`.
    let _cleanup = Containers("watch-");
    let registry = std::env::var("INFERGATE_TEST_REGISTRY").expect(
        "INFERGATE_TEST_REGISTRY is unset: scripts/test.sh starts a registry on loopback (scripts/setup-registry.sh)",
    );
    let env = Env::new();
    let install = EngineInstall::locate().unwrap();
    let repo = format!("{registry}/infergate-test/watch-{}", std::process::id());
    let base = push_build(&repo, "base", "base");
    let first = push_build(&repo, "nightly", "nightly-1");
    assert_ne!(base, first);
    // The candidate's build is not on this host: only a pull brings it.
    let rm = |tag: &str| {
        Command::new("docker")
            .args(["image", "rm", &format!("{repo}:{tag}")])
            .output()
    };
    rm("nightly").unwrap();
    assert!(
        d.image(&format!("{repo}@{first}")).await.unwrap().is_none(),
        "the candidate's build is still on this host"
    );
    env.suite(2, 4);
    let plan = env.write(
        "plan.toml",
        &format!(
            "name = \"watch\"\nsuite = \"suite.toml\"\n\n[docker]\nregistry = \"{registry}\"\npull = \"always\"\n\n[baseline]\n{}\n[candidate]\n{}\n[readmission]\nexpected_model = \"{MODEL}\"\ntimeout_s = 60\n",
            container_table(&format!("{repo}@{base}"), "baseline", &install, free_port()),
            // The tag's digest replaces this image at each tick.
            container_table(&format!("{repo}@{base}"), "candidate", &install, free_port()),
        ),
    );
    let opts = infergate::watch::Options {
        plan: plan.clone(),
        candidate: format!("{repo}:nightly"),
        ledger: Some(env.ledger.clone().into()),
        out_root: Some(env.out.clone()),
        quiet: true,
    };
    let tick = infergate::watch::once(&opts).await.expect("first tick");
    let infergate::watch::Tick::Qualified { resolved, outcome } = &tick else {
        panic!("{tick:?}")
    };
    assert_eq!(resolved.digest, first, "the registry's digest is Docker's");
    let entries = env.entries(&outcome.id);
    let s = steps(&entries).join("\n");
    assert!(
        matches!(outcome.verdict, Verdict::Qualified | Verdict::NotQualified),
        "{:?} {:?}\n{s}",
        outcome.verdict,
        outcome.failure
    );
    let plan_entry = detail_of(&entries, "plan", "-", "ok");
    assert_eq!(plan_entry[0]["candidate_image_resolved"]["tag"], "nightly");
    assert_eq!(
        plan_entry[0]["candidate_image_resolved"]["digest"],
        first.as_str()
    );
    // The candidate ran the pulled digest; the plan copy says so.
    let pinned = format!("{repo}@{first}");
    let copy =
        std::fs::read_to_string(outcome.report.as_ref().unwrap().with_file_name("plan.toml"))
            .unwrap();
    assert!(copy.contains(&format!("image = \"{pinned}\"")), "{copy}");
    let info = d.image(&pinned).await.unwrap().expect("pulled by digest");
    let started: Vec<Handle> = detail_of(&entries, "start", "candidate", "ok")
        .into_iter()
        .filter_map(|d| Handle::from_value(&d["handle"]))
        .collect();
    assert!(!started.is_empty(), "{s}");
    for h in &started {
        let Handle::Container { image_id, .. } = h else {
            panic!("{h:?}")
        };
        assert_eq!(image_id, &info.id, "the candidate runs what was pulled");
    }
    let first_id = outcome.id.clone();
    // The lineage a history reads is in the ledger, not only in the report.
    let compare = detail_of(&entries, "compare", "-", "ok");
    let lineage = &compare[0]["lineage"];
    assert_eq!(lineage["candidate_image"], pinned.as_str());
    assert!(
        !lineage["steps"].as_array().unwrap().is_empty(),
        "{lineage}"
    );
    // Promote it: from now on it is the baseline the next build is paired with.
    let promoted = decide::run(&decide::Options {
        report: outcome.report.clone().unwrap(),
        action: DecisionAction::Promote,
        note: "watch test".into(),
        who: Some("ci".into()),
        ledger: Some(env.ledger.clone().into()),
        force: true,
        verify: infergate::verify_runs::check_qualification,
        quiet: true,
    })
    .await
    .expect("promote");
    assert!(promoted.carried_out, "{}", promoted.promotion);
    infergate::runtime::stop::stop(&first_id, Some(env.ledger.clone().into()), true)
        .await
        .unwrap();

    // The same digest again: it serves now (promoted), nothing run.
    let before = Ledger::open(&env.ledger).unwrap().qualifications().unwrap();
    let again = infergate::watch::once(&opts).await.expect("second tick");
    let infergate::watch::Tick::Judged { qualification, .. } = &again else {
        panic!("{again:?}")
    };
    assert_eq!(qualification, &first_id);
    assert!(infergate::watch::describe(&again).contains("nothing to do"));
    assert_eq!(
        Ledger::open(&env.ledger).unwrap().qualifications().unwrap(),
        before
    );

    // A new build on the tag: a new qualification.
    let second = push_build(&repo, "nightly", "nightly-2");
    assert_ne!(second, first);
    let tick = infergate::watch::once(&opts).await.expect("third tick");
    let infergate::watch::Tick::Qualified { resolved, outcome } = &tick else {
        panic!("{tick:?}")
    };
    assert_eq!(resolved.digest, second);
    assert_ne!(outcome.id, first_id);
    let entries = env.entries(&outcome.id);
    let plan_entry = detail_of(&entries, "plan", "-", "ok");
    assert_eq!(
        plan_entry[0]["baseline_image_promoted"],
        serde_json::json!({"image": pinned, "qualification": first_id}),
        "the promoted build is the baseline"
    );
    assert!(
        outcome.id.ends_with(&format!("-on-{}", &first[7..19])),
        "{}",
        outcome.id
    );

    // The lineage, from the ledger alone: two builds, each series a chain of
    // two steps from the first baseline through the promoted build.
    let h = infergate::history::read(
        &Ledger::open(&env.ledger).unwrap(),
        &infergate::history::Filter {
            repo: Some(repo.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let ids: Vec<&str> = h.builds.iter().map(|b| b.qualification.as_str()).collect();
    assert_eq!(ids, [first_id.as_str(), outcome.id.as_str()]);
    assert_eq!(h.builds[0].decision, "promote");
    assert_eq!(h.builds[1].tag.as_deref(), Some("nightly"));
    assert!(!h.series.is_empty());
    for series in &h.series {
        let c = series.chain.as_ref().expect("a chain");
        assert_eq!(
            c.chain,
            [first_id.clone(), outcome.id.clone()],
            "{}",
            series.metric
        );
        assert_eq!(c.anchor, format!("{repo}@{base}"));
        let sum: f64 = series.points.iter().map(|p| p.log_ratio).sum();
        let total = &c.cumulative;
        assert!((total.log_ratio - sum).abs() < 1e-12);
        assert!(total.low <= total.ratio && total.ratio <= total.high);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["history", "--repo", &repo, "--ledger"])
        .arg(&env.ledger)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(
        out.status.success() && text.contains("over 2 steps"),
        "{text}"
    );
    // The same lineage as a page: a point per build in each series, the
    // anchor at the first baseline, the tag in the builds' table.
    let page = env.out.join("history.html");
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["history", "--repo", &repo, "--html", "-o"])
        .arg(&page)
        .arg("--ledger")
        .arg(&env.ledger)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("class=\"build\"").count(),
        2 * h.series.len(),
        "{html:.600}"
    );
    assert_eq!(html.matches("class=\"anchor\"").count(), h.series.len());
    assert!(html.contains("<td>nightly</td>"), "{html:.600}");
    infergate::runtime::stop::stop(&outcome.id, Some(env.ledger.clone().into()), true)
        .await
        .unwrap();
    for tag in ["base", "nightly"] {
        let _ = rm(tag);
    }
}
