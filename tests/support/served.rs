//! An engine family served by a launcher script, for its tests: vLLM's CPU
//! build (`vllm.rs`) and SGLang (`sglang.rs`). The family's setup script
//! installs it (cached after the first run); its launcher starts it, here
//! through infergate's own process driver, on a free loopback port. Tests
//! never skip: without the engine they fail and say why.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use infergate::driver::process::{ManagedProcess, ProcessSpec};

/// What differs between the launcher-served families.
pub struct Family {
    /// For messages: "vLLM", "SGLang".
    pub name: &'static str,
    /// For file names: "vllm", "sglang".
    pub key: &'static str,
    /// Under `scripts/`.
    pub setup: &'static str,
    /// Under the repository root; takes `--port P`.
    pub serve: &'static str,
    /// Longest wait for `/health` 200 (generous: the tests share two cores).
    pub ready_timeout: Duration,
}

pub struct Served {
    pub base_url: String,
    pub process: ManagedProcess,
    pub startup: Duration,
}

/// The family's setup script's KEY=VALUE lines (installs on first use). If
/// the setup fails, the tests fail here, naming the script.
pub fn setup(f: &Family) -> Vec<(String, String)> {
    super::setup_script(f.setup)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A loopback port nothing listens on now (the launchers take a port, they
/// announce none).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    l.local_addr().unwrap().port()
}

/// Start the family on a free loopback port and wait for `/health` 200.
pub async fn start(f: &Family, log_dir: &Path) -> anyhow::Result<Served> {
    setup(f);
    let port = free_port();
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join(f.serve);
    std::fs::create_dir_all(log_dir)?;
    let spec = ProcessSpec::new(
        serve.into_os_string(),
        log_dir.join(format!("{}-{port}.log", f.key)),
    )
    .arg("--port")
    .arg(port.to_string());
    let t0 = Instant::now();
    let mut process = ManagedProcess::spawn(&spec)?;
    let base_url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()?;
    process
        .wait_for_http_ok(&http, &format!("{base_url}/health"), f.ready_timeout)
        .await?;
    Ok(Served {
        base_url,
        process,
        startup: t0.elapsed(),
    })
}

/// The family's shared server in this test binary, started on first use on
/// a thread with its own runtime (each `#[tokio::test]` runtime dies with
/// its test). Like the llama.cpp engines it lives until the binary exits;
/// the process driver's exit hook and PDEATHSIG stop it.
pub fn shared(f: &'static Family) -> &'static Served {
    static SERVERS: Mutex<BTreeMap<&'static str, &'static Served>> = Mutex::new(BTreeMap::new());
    let mut servers = SERVERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(s) = servers.get(f.key) {
        return s;
    }
    let dir = log_dir(f);
    let started = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(start(f, &dir))
    })
    .join()
    .unwrap_or_else(|_| Err(anyhow::anyhow!("the {} start thread panicked", f.name)));
    match started {
        Ok(v) => {
            eprintln!(
                "{}: {} (pid {}, ready in {:.1?}), log {}",
                f.key,
                v.base_url,
                v.process.pid(),
                v.startup,
                v.process.log_path().display()
            );
            let v: &'static Served = Box::leak(Box::new(v));
            servers.insert(f.key, v);
            v
        }
        Err(e) => panic!("{} did not start: {e:#}", f.name),
    }
}

pub fn log_dir(f: &Family) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-logs", f.key))
}
