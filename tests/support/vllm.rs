//! vLLM's CPU build serving the reference model, for tests of a second
//! engine family. `scripts/setup-vllm.sh` installs it (cached after the
//! first run); `engine/vllm-serve.sh` starts it, here through infergate's
//! own process driver. Tests never skip: without vLLM they fail and say why.
#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use infergate::driver::process::{ManagedProcess, ProcessSpec};

/// The model id `engine/vllm-serve.sh` serves (as the llama.cpp profiles do).
pub const MODEL: &str = "SmolLM2-135M-Instruct-Q4_1";
/// Start-up measured here at 60–80 s (model load, KV cache, warm-up);
/// generous, since the tests share two cores.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// `scripts/setup-vllm.sh`'s KEY=VALUE lines (installs on first use).
/// These tests need a real vLLM server: if the setup fails, they fail here,
/// naming the script.
pub fn setup() -> Vec<(String, String)> {
    super::setup_script("setup-vllm.sh")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A loopback port nothing listens on now (vLLM takes a port, it announces none).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    l.local_addr().unwrap().port()
}

pub struct Vllm {
    pub base_url: String,
    pub process: ManagedProcess,
    pub startup: Duration,
}

/// Start vLLM on a free loopback port and wait for `/health` 200.
pub async fn start(log_dir: &Path) -> anyhow::Result<Vllm> {
    setup();
    let port = free_port();
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/vllm-serve.sh");
    std::fs::create_dir_all(log_dir)?;
    let spec = ProcessSpec::new(
        serve.into_os_string(),
        log_dir.join(format!("vllm-{port}.log")),
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
        .wait_for_http_ok(&http, &format!("{base_url}/health"), READY_TIMEOUT)
        .await?;
    Ok(Vllm {
        base_url,
        process,
        startup: t0.elapsed(),
    })
}

/// The shared vLLM server of this test binary, started on first use on a
/// thread with its own runtime (each `#[tokio::test]` runtime dies with its
/// test). Like the llama.cpp engines it lives until the binary exits; the
/// process driver's exit hook and PDEATHSIG stop it.
pub fn shared() -> &'static Vllm {
    static SERVER: Mutex<Option<&'static Vllm>> = Mutex::new(None);
    let mut server = SERVER.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(s) = *server {
        return s;
    }
    let dir = log_dir();
    let started = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(start(&dir))
    })
    .join()
    .unwrap_or_else(|_| Err(anyhow::anyhow!("the vLLM start thread panicked")));
    match started {
        Ok(v) => {
            eprintln!(
                "vllm: {} (pid {}, ready in {:.1?}), log {}",
                v.base_url,
                v.process.pid(),
                v.startup,
                v.process.log_path().display()
            );
            let v: &'static Vllm = Box::leak(Box::new(v));
            *server = Some(v);
            v
        }
        Err(e) => panic!("vLLM did not start: {e:#}"),
    }
}

pub fn log_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("vllm-logs")
}
