//! SGLang on the CPU serving the reference model, for tests of a third
//! engine family. `scripts/setup-sglang.sh` installs it (cached after the
//! first run); `engine/sglang-serve.sh` starts it, here through infergate's
//! own process driver. The tests are ignored unless the SGLang lane is on
//! (`INFERGATE_TEST_SGLANG=1 scripts/test.sh`); run, they never skip:
//! without SGLang they fail and say why.
#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use infergate::driver::process::{ManagedProcess, ProcessSpec};

/// The model id `engine/sglang-serve.sh` serves (as the llama.cpp profiles do).
pub const MODEL: &str = "SmolLM2-135M-Instruct-Q4_1";
/// Start-up measured here at 56–106 s (imports, model load, KV cache,
/// warm-up); generous, since the tests share two cores.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// `scripts/setup-sglang.sh`'s KEY=VALUE lines (installs on first use).
/// These tests need a real SGLang server: if the setup fails, they fail here,
/// naming the script.
pub fn setup() -> Vec<(String, String)> {
    super::setup_script("setup-sglang.sh")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A loopback port nothing listens on now (SGLang takes a port, it announces none).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    l.local_addr().unwrap().port()
}

pub struct Sglang {
    pub base_url: String,
    pub process: ManagedProcess,
    pub startup: Duration,
}

/// Start SGLang on a free loopback port and wait for `/health` 200.
pub async fn start(log_dir: &Path) -> anyhow::Result<Sglang> {
    setup();
    let port = free_port();
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/sglang-serve.sh");
    std::fs::create_dir_all(log_dir)?;
    let spec = ProcessSpec::new(
        serve.into_os_string(),
        log_dir.join(format!("sglang-{port}.log")),
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
    Ok(Sglang {
        base_url,
        process,
        startup: t0.elapsed(),
    })
}

/// The shared SGLang server of this test binary, started on first use on a
/// thread with its own runtime (each `#[tokio::test]` runtime dies with its
/// test). Like the llama.cpp engines it lives until the binary exits; the
/// process driver's exit hook and PDEATHSIG stop it.
pub fn shared() -> &'static Sglang {
    static SERVER: Mutex<Option<&'static Sglang>> = Mutex::new(None);
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
    .unwrap_or_else(|_| Err(anyhow::anyhow!("the SGLang start thread panicked")));
    match started {
        Ok(v) => {
            eprintln!(
                "sglang: {} (pid {}, ready in {:.1?}), log {}",
                v.base_url,
                v.process.pid(),
                v.startup,
                v.process.log_path().display()
            );
            let v: &'static Sglang = Box::leak(Box::new(v));
            *server = Some(v);
            v
        }
        Err(e) => panic!("SGLang did not start: {e:#}"),
    }
}

pub fn log_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("sglang-logs")
}
