//! The reference inference engine: llama.cpp's own HTTP server, run
//! in-process by the `xllamacpp` Python wheel, serving a small GGUF model.
//!
//! `scripts/setup-engine.sh` installs it into a versioned cache; profiles in
//! `engine/profiles.toml` say how to start it; [`start`] runs a profile through
//! the generic process driver and returns once `/health` answers 200.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::driver::process::{DEFAULT_STOP_GRACE, ManagedProcess, ProcessSpec};

/// xllamacpp wheel version; `scripts/setup-engine.sh` pins the same one.
pub const XLLAMACPP_VERSION: &str = "2026.10.11549";
/// sha256 of the SmolLM2-135M-Instruct Q4_1 GGUF the setup script installs.
pub const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// Cache-relative path of that model (named with its hash prefix).
pub const MODEL_RELATIVE_PATH: &str = "models/SmolLM2-135M-Instruct.Q4_1-b179c952.gguf";
/// `engine/serve.py` prints this, then the base URL, once it serves.
pub const READY_PREFIX: &str = "infergate-engine listening ";
/// Overall bound on starting: model load plus the first `/health`.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The most CPU threads (`-t` and `-tb`) any reference-engine server gets,
/// whatever its profile says; unset, the profile's own. For hosts where
/// several servers and a client share few cores (the test suite sets 1):
/// llama.cpp's threads meet in a spinning barrier at every op, so when they
/// outnumber the free cores each op waits for a descheduled thread. Seen on
/// this 2-core machine with two 2-thread servers busy at once: prompt eval
/// 60-130 tokens/s and decode 5-50 where one server alone does thousands and
/// hundreds. The logged command line and the run's profile show the value used.
pub const THREADS_CAP_ENV: &str = "INFERGATE_ENGINE_THREADS";

/// The launcher, compiled in so the binary does not depend on the source tree.
const SERVE_PY: &str = include_str!("../../engine/serve.py");
/// The profiles shipped in `engine/profiles.toml`.
const BUILTIN_PROFILES: &str = include_str!("../../engine/profiles.toml");

const SETUP_HINT: &str =
    "run scripts/setup-engine.sh (it installs into $INFERGATE_CACHE, default ~/.cache/infergate)";

/// One way of starting the reference engine (a table of `engine/profiles.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineProfile {
    /// The table name; filled in by the loader.
    #[serde(skip)]
    pub name: String,
    /// Total KV-cache tokens (`-c`), split evenly across slots.
    pub ctx_size: u32,
    /// Server slots (`-np`).
    pub parallel: u32,
    /// Logical batch (`-b`).
    pub batch: u32,
    /// Physical micro-batch (`-ub`).
    pub ubatch: u32,
    /// Generation threads (`-t`).
    pub threads: u32,
    /// Prompt-processing threads (`-tb`); default `threads`.
    #[serde(default)]
    pub threads_batch: Option<u32>,
    /// Model id served; default the GGUF file name.
    #[serde(default)]
    pub alias: Option<String>,
    #[serde(default = "yes")]
    pub cache_prompt: bool,
    #[serde(default = "yes")]
    pub cont_batching: bool,
    #[serde(default = "yes")]
    pub metrics: bool,
    /// Chat templates through Jinja (llama.cpp's `--jinja`, on by default):
    /// what OpenAI `tools` need; off, a request with `tools` is refused.
    #[serde(default = "yes")]
    pub jinja: bool,
    /// Speculative decoding without a draft model. Greedy outputs stay the same.
    #[serde(default)]
    pub speculative: Option<Speculative>,
    /// An embeddings server (`/v1/embeddings`; llama.cpp's `--embedding`),
    /// its token vectors pooled as `pooling` says (default the model's own).
    #[serde(default)]
    pub embedding: bool,
    #[serde(default)]
    pub pooling: Option<Pooling>,
    /// Another GGUF to serve; default the setup script's model.
    #[serde(default)]
    pub model: Option<PathBuf>,
    /// A GGUF by file name beside the setup script's model, in the cache
    /// (a derived model a setup script makes, e.g. the perturbed copy of
    /// `scripts/setup-perturbed-model.sh`).
    #[serde(default)]
    pub model_file: Option<String>,
    /// RoPE base frequency overriding the model's own (`--rope-freq-base`):
    /// how a misconfigured image is reproduced (a loader that falls back to
    /// Llama's 10000 for a model trained at 100000).
    #[serde(default)]
    pub rope_freq_base: Option<f64>,
}

/// How an engine profile drafts tokens for speculative decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speculative {
    /// From n-grams already in the context (llama.cpp's
    /// `COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE`).
    NgramSimple,
}

impl Speculative {
    /// The name `engine/serve.py --speculative` takes, as a profile writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Speculative::NgramSimple => "ngram_simple",
        }
    }
}

/// How an embeddings server pools a sequence's token vectors into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    Mean,
    Cls,
    Last,
}

impl Pooling {
    /// The name `engine/serve.py --pooling` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
        }
    }
}

fn yes() -> bool {
    true
}

impl EngineProfile {
    /// Context available to one request: llama.cpp gives each slot `c / np`.
    pub fn context_per_slot(&self) -> u32 {
        self.ctx_size / self.parallel.max(1)
    }

    pub fn validate(&self) -> Result<()> {
        let name = &self.name;
        for (field, v) in [
            ("ctx_size", self.ctx_size),
            ("parallel", self.parallel),
            ("batch", self.batch),
            ("ubatch", self.ubatch),
            ("threads", self.threads),
        ] {
            if v == 0 {
                bail!("engine profile {name}: {field} must be at least 1");
            }
        }
        if self.threads_batch == Some(0) {
            bail!("engine profile {name}: threads_batch must be at least 1");
        }
        if !self.ctx_size.is_multiple_of(self.parallel) {
            bail!(
                "engine profile {name}: ctx_size {} is not a multiple of parallel {}, so slots would not get equal context",
                self.ctx_size,
                self.parallel
            );
        }
        if self.ubatch > self.batch {
            bail!(
                "engine profile {name}: ubatch {} exceeds batch {}",
                self.ubatch,
                self.batch
            );
        }
        if self.alias.as_deref() == Some("") {
            bail!("engine profile {name}: alias is empty");
        }
        if let Some(b) = self.rope_freq_base
            && !(b.is_finite() && b > 0.0)
        {
            bail!("engine profile {name}: rope_freq_base {b} must be a positive number");
        }
        if self.pooling.is_some() && !self.embedding {
            bail!("engine profile {name}: pooling needs embedding = true");
        }
        Ok(())
    }

    /// This profile with its threads capped at `cap` (see [`THREADS_CAP_ENV`]).
    pub fn with_threads_cap(&self, cap: Option<u32>) -> EngineProfile {
        let mut p = self.clone();
        if let Some(cap) = cap {
            p.threads = p.threads.min(cap);
            p.threads_batch = p.threads_batch.map(|t| t.min(cap));
        }
        p
    }

    /// Arguments for `engine/serve.py`, serving `model` on a free loopback port.
    pub fn serve_args(&self, model: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--model".into(), model.into()];
        let mut num = |flag: &str, v: u32| {
            args.push(flag.into());
            args.push(v.to_string().into());
        };
        num("--port", 0);
        num("--ctx-size", self.ctx_size);
        num("--parallel", self.parallel);
        num("--batch", self.batch);
        num("--ubatch", self.ubatch);
        num("--threads", self.threads);
        if let Some(tb) = self.threads_batch {
            num("--threads-batch", tb);
        }
        if let Some(alias) = &self.alias {
            args.push("--alias".into());
            args.push(alias.into());
        }
        if let Some(b) = self.rope_freq_base {
            args.push("--rope-freq-base".into());
            args.push(b.to_string().into());
        }
        if let Some(s) = self.speculative {
            args.push("--speculative".into());
            args.push(s.as_str().into());
        }
        if self.embedding {
            args.push("--embedding".into());
        }
        if let Some(p) = self.pooling {
            args.push("--pooling".into());
            args.push(p.as_str().into());
        }
        for (on, flag) in [
            (self.cache_prompt, "--no-cache-prompt"),
            (self.cont_batching, "--no-cont-batching"),
            (self.metrics, "--no-metrics"),
            (self.jinja, "--no-jinja"),
        ] {
            if !on {
                args.push(flag.into());
            }
        }
        args
    }
}

/// The cap [`THREADS_CAP_ENV`] sets, if any; a value that is not a positive
/// integer is an error naming the variable.
pub fn threads_cap_from_env() -> Result<Option<u32>> {
    parse_threads_cap(std::env::var_os(THREADS_CAP_ENV))
}

fn parse_threads_cap(value: Option<OsString>) -> Result<Option<u32>> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match v.to_str().and_then(|v| v.trim().parse::<u32>().ok()) {
        Some(n) if n > 0 => Ok(Some(n)),
        _ => bail!("{THREADS_CAP_ENV}={v:?} is not a positive number of threads"),
    }
}

/// Profiles of a TOML file, by name. A relative `model` is resolved against
/// the file's directory.
pub fn load_profiles(path: &Path) -> Result<BTreeMap<String, EngineProfile>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_profiles(&text, &path.display().to_string(), path.parent())
}

/// The profiles shipped in `engine/profiles.toml`, compiled in.
pub fn builtin_profiles() -> Result<BTreeMap<String, EngineProfile>> {
    parse_profiles(BUILTIN_PROFILES, "built-in engine/profiles.toml", None)
}

/// Parse profiles from TOML text; `origin` names the source in errors.
pub fn parse_profiles(
    text: &str,
    origin: &str,
    base_dir: Option<&Path>,
) -> Result<BTreeMap<String, EngineProfile>> {
    let mut profiles: BTreeMap<String, EngineProfile> =
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
    if profiles.is_empty() {
        bail!("{origin}: no engine profiles");
    }
    for (name, p) in profiles.iter_mut() {
        p.name = name.clone();
        if let (Some(model), Some(dir)) = (&p.model, base_dir)
            && model.is_relative()
        {
            p.model = Some(dir.join(model));
        }
        p.validate().with_context(|| origin.to_string())?;
    }
    Ok(profiles)
}

/// Where the setup script put the engine and its model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInstall {
    pub cache_dir: PathBuf,
    /// The venv's python, which has xllamacpp.
    pub python: PathBuf,
    /// The default model.
    pub model: PathBuf,
}

/// `$INFERGATE_CACHE`, else `~/.cache/infergate` (the setup script's default).
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("INFERGATE_CACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither INFERGATE_CACHE nor HOME is set, so the engine cache cannot be found")?;
    Ok(PathBuf::from(home).join(".cache/infergate"))
}

impl EngineInstall {
    /// Find the installation in [`cache_dir`].
    pub fn locate() -> Result<Self> {
        Self::at(&cache_dir()?)
    }

    /// Find the installation in `cache_dir`; the error says how to install it.
    pub fn at(cache_dir: &Path) -> Result<Self> {
        let engine_dir = cache_dir.join(format!("engine/xllamacpp-{XLLAMACPP_VERSION}"));
        let python = engine_dir.join("venv/bin/python");
        // The setup script writes the stamp last: without it the venv may be half built.
        let stamp = engine_dir.join("installed");
        if !stamp.is_file() || !python.exists() {
            bail!(
                "reference engine (xllamacpp {XLLAMACPP_VERSION}) is not installed in {}: {SETUP_HINT}",
                engine_dir.display()
            );
        }
        let model = cache_dir.join(MODEL_RELATIVE_PATH);
        if !model.is_file() {
            bail!(
                "reference model {} is missing: {SETUP_HINT}",
                model.display()
            );
        }
        Ok(EngineInstall {
            cache_dir: cache_dir.to_path_buf(),
            python,
            model,
        })
    }

    /// The full command line that serves `profile`, logging to `log_path`.
    /// `serve_script` is a copy of `engine/serve.py`.
    pub fn process_spec(
        &self,
        profile: &EngineProfile,
        serve_script: &Path,
        log_path: &Path,
    ) -> Result<ProcessSpec> {
        let model = self.model_of(profile)?;
        let profile = profile.with_threads_cap(threads_cap_from_env()?);
        Ok(ProcessSpec::new(&self.python, log_path)
            .arg(serve_script)
            .args(profile.serve_args(&model))
            // The ready line must not sit in a pipe buffer.
            .env("PYTHONUNBUFFERED", "1"))
    }

    /// The GGUF `profile` serves: its `model`, a `model_file` beside the
    /// default model, or the default; refused before any start when missing.
    pub fn model_of(&self, profile: &EngineProfile) -> Result<PathBuf> {
        let model = match (&profile.model, &profile.model_file) {
            (Some(m), _) => m.clone(),
            (None, Some(f)) => self.model.with_file_name(f),
            (None, None) => self.model.clone(),
        };
        if !model.is_file() {
            bail!(
                "engine profile {:?}: model {} is missing{}",
                profile.name,
                model.display(),
                if profile.model_file.is_some() {
                    " (run scripts/setup-perturbed-model.sh, or the setup script that makes it)"
                } else {
                    ""
                }
            );
        }
        Ok(model)
    }
}

/// A reference engine serving one profile. Stops (SIGTERM, then SIGKILL after
/// a grace) when dropped.
#[derive(Debug)]
pub struct RunningEngine {
    pub profile: EngineProfile,
    /// e.g. `http://127.0.0.1:34095`, no trailing slash.
    pub base_url: String,
    pub pid: u32,
    /// This run's stdout and stderr (appended to, across restarts).
    pub log_path: PathBuf,
    pub command_line: String,
    /// e.g. `xllamacpp 2026.10.11549` (llama.cpp's own build string is `b0-unknown` in this wheel).
    pub engine_version: String,
    /// Time from spawn until `/health` answered 200.
    pub startup: Duration,
    process: ManagedProcess,
}

impl RunningEngine {
    /// Stop the server; blocks for at most the default grace (10 s) plus SIGKILL.
    pub fn stop(&mut self) -> Result<()> {
        self.process.stop(DEFAULT_STOP_GRACE).map(drop)
    }

    /// Last `lines` lines of this run's log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// Start `profile` from the cached installation ([`EngineInstall::locate`]),
/// logging to `log_dir/engine-<profile>.log`.
pub async fn start(profile: &EngineProfile, log_dir: &Path) -> Result<RunningEngine> {
    let install = EngineInstall::locate()?;
    start_with(&install, profile, log_dir, DEFAULT_READY_TIMEOUT).await
}

/// Start `profile` from `install`: spawn, read the port from the ready line,
/// then wait for `/health`. Everything together is bounded by `timeout`.
pub async fn start_with(
    install: &EngineInstall,
    profile: &EngineProfile,
    log_dir: &Path,
    timeout: Duration,
) -> Result<RunningEngine> {
    profile.validate()?;
    // The profile as it is started, recorded below; `process_spec` applies
    // the same cap (it is also the detached driver's way in).
    let profile = &profile.with_threads_cap(threads_cap_from_env()?);
    let t0 = Instant::now();
    std::fs::create_dir_all(log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let script = write_serve_script(log_dir)?;
    let label = if profile.name.is_empty() {
        "unnamed"
    } else {
        &profile.name
    };
    let log_path = log_dir.join(format!("engine-{label}.log"));
    let spec = install.process_spec(profile, &script, &log_path)?;
    let mut process = ManagedProcess::spawn(&spec)?;
    let what = format!("reference engine profile {label}");

    let line = process
        .wait_for_line(&ready_needle(process.pid()), timeout)
        .await
        .context(what.clone())?;
    let base_url =
        parse_ready_line(&line).with_context(|| format!("{what}: log {}", log_path.display()))?;

    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building HTTP client")?;
    let left = timeout
        .saturating_sub(t0.elapsed())
        .max(Duration::from_secs(1));
    process
        .wait_for_http_ok(&http, &format!("{base_url}/health"), left)
        .await
        .context(what)?;

    Ok(RunningEngine {
        profile: profile.clone(),
        base_url,
        pid: process.pid(),
        log_path,
        command_line: process.command_line().to_string(),
        engine_version: format!("xllamacpp {XLLAMACPP_VERSION}"),
        startup: t0.elapsed(),
        process,
    })
}

/// The ready line of the engine process `pid` (serve.py heads it with its
/// pid). Two engines of one profile started at once append to one log file,
/// and each starter must take its own process's URL, never the other's.
pub fn ready_needle(pid: u32) -> String {
    format!("[pid {pid}] {READY_PREFIX}")
}

/// The base URL of a ready line; only loopback is accepted.
pub fn parse_ready_line(line: &str) -> Result<String> {
    let Some(at) = line.find(READY_PREFIX) else {
        bail!("not a ready line: {line:?}");
    };
    let url = line[at + READY_PREFIX.len()..].trim();
    let Some(rest) = url.strip_prefix("http://127.0.0.1:") else {
        bail!("engine announced {url:?}, expected http://127.0.0.1:PORT");
    };
    // The engine's native log shares the file and may follow on the same
    // line without a newline (seen: `…:39499I srv load_model: …`): the port
    // is the digits, whatever comes after them.
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[..digits].parse::<u16>() {
        Ok(p) if p != 0 => Ok(format!("http://127.0.0.1:{p}")),
        _ => bail!("engine announced {url:?}: {rest:?} does not start with a port"),
    }
}

/// Copy the compiled-in launcher into `log_dir`, so each run's log directory
/// also records exactly what ran. Written via rename: engines started at
/// once never see a half-written file.
pub fn write_serve_script(log_dir: &Path) -> Result<PathBuf> {
    let path = log_dir.join("infergate-serve.py");
    crate::atomic::write_atomic(&path, SERVE_PY.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_share_per_slot_context_but_differ() {
        let profiles = builtin_profiles().unwrap();
        let base = &profiles["baseline"];
        let cand = &profiles["candidate"];
        assert_eq!(base.name, "baseline");
        assert_eq!(base.context_per_slot(), cand.context_per_slot());
        assert_eq!(base.alias, cand.alias);
        let (mut b, mut c) = (base.clone(), cand.clone());
        b.name.clear();
        c.name.clear();
        assert_ne!(b, c, "profiles must differ in a runtime setting");
    }

    #[test]
    fn profiles_file_on_disk_matches_builtin() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/profiles.toml");
        assert_eq!(load_profiles(&path).unwrap(), builtin_profiles().unwrap());
    }

    #[test]
    fn rejects_uneven_slots_and_unknown_fields() {
        let uneven = "[p]\nctx_size = 1000\nparallel = 3\nbatch = 64\nubatch = 64\nthreads = 1\n";
        let err = parse_profiles(uneven, "t.toml", None).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a multiple of parallel"),
            "{err:#}"
        );
        let typo = "[p]\nctx_size = 1024\nparallel = 2\nbatch = 64\nubatch = 64\nthreads = 1\nparalel = 4\n";
        let err = parse_profiles(typo, "t.toml", None).unwrap_err();
        assert!(format!("{err:#}").contains("paralel"), "{err:#}");
    }

    #[test]
    fn relative_model_is_taken_from_the_profiles_directory() {
        let text = "[p]\nctx_size = 1024\nparallel = 2\nbatch = 64\nubatch = 64\nthreads = 1\nmodel = \"m/tiny.gguf\"\n";
        let profiles = parse_profiles(text, "t.toml", Some(Path::new("/etc/ig"))).unwrap();
        assert_eq!(
            profiles["p"].model.as_deref(),
            Some(Path::new("/etc/ig/m/tiny.gguf"))
        );
    }

    #[test]
    fn serve_args_carry_every_setting() {
        let text = "[p]\nctx_size = 4096\nparallel = 4\nbatch = 256\nubatch = 128\nthreads = 2\n\
                    threads_batch = 1\nalias = \"m\"\ncache_prompt = false\nrope_freq_base = 10000.0\n";
        let p = &parse_profiles(text, "t.toml", None).unwrap()["p"];
        let args: Vec<String> = p
            .serve_args(Path::new("/m.gguf"))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args.join(" "),
            "--model /m.gguf --port 0 --ctx-size 4096 --parallel 4 --batch 256 --ubatch 128 \
             --threads 2 --threads-batch 1 --alias m --rope-freq-base 10000 --no-cache-prompt"
        );
        let bad = text.replace("10000.0", "-1.0");
        let err = parse_profiles(&bad, "t.toml", None).unwrap_err();
        assert!(format!("{err:#}").contains("rope_freq_base"), "{err:#}");
    }

    #[test]
    fn a_threads_cap_lowers_both_thread_counts_and_never_raises_them() {
        let text = "[p]\nctx_size = 4096\nparallel = 4\nbatch = 256\nubatch = 128\nthreads = 2\nthreads_batch = 3\n";
        let p = &parse_profiles(text, "t.toml", None).unwrap()["p"];
        let one = p.with_threads_cap(Some(1));
        assert_eq!((one.threads, one.threads_batch), (1, Some(1)));
        let four = p.with_threads_cap(Some(4));
        assert_eq!((four.threads, four.threads_batch), (2, Some(3)));
        assert_eq!(&p.with_threads_cap(None), p);
        assert_eq!(parse_threads_cap(Some("1".into())).unwrap(), Some(1));
        assert_eq!(parse_threads_cap(Some("".into())).unwrap(), None);
        assert_eq!(parse_threads_cap(None).unwrap(), None);
        for bad in ["0", "two", "-1"] {
            let err = parse_threads_cap(Some(bad.into())).unwrap_err();
            assert!(err.to_string().contains(THREADS_CAP_ENV), "{err}");
        }
    }

    #[test]
    fn missing_install_names_the_setup_script() {
        let dir = tempfile::tempdir().unwrap();
        let err = EngineInstall::at(dir.path()).unwrap_err();
        assert!(err.to_string().contains("scripts/setup-engine.sh"), "{err}");
        // A venv without the stamp is a half-finished install.
        let venv_bin = dir
            .path()
            .join(format!("engine/xllamacpp-{XLLAMACPP_VERSION}/venv/bin"));
        std::fs::create_dir_all(&venv_bin).unwrap();
        std::fs::write(venv_bin.join("python"), "").unwrap();
        assert!(EngineInstall::at(dir.path()).is_err());
    }

    #[test]
    fn ready_line_must_be_loopback() {
        let ok = parse_ready_line("infergate-engine listening http://127.0.0.1:34095\n").unwrap();
        assert_eq!(ok, "http://127.0.0.1:34095");
        assert!(parse_ready_line("infergate-engine listening http://0.0.0.0:34095").is_err());
        assert!(parse_ready_line("infergate-engine listening http://127.0.0.1:0").is_err());
        assert!(parse_ready_line("listening http://127.0.0.1:1").is_err());
        assert!(parse_ready_line("infergate-engine listening http://127.0.0.1:x1").is_err());
    }

    #[test]
    fn ready_line_survives_native_log_glued_to_it() {
        let line = "infergate-engine listening http://127.0.0.1:39499I srv    load_model: initializing, n_slots = 2";
        assert_eq!(parse_ready_line(line).unwrap(), "http://127.0.0.1:39499");
        let line = "I srv main: x infergate-engine listening http://127.0.0.1:8/";
        assert_eq!(parse_ready_line(line).unwrap(), "http://127.0.0.1:8");
    }

    #[test]
    fn pins_agree_with_the_setup_script() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup-engine.sh"),
        )
        .unwrap();
        assert!(script.contains(&format!("\nXLLAMACPP_VERSION={XLLAMACPP_VERSION}\n")));
        assert!(script.contains(&format!("\nMODEL_SHA256={MODEL_SHA256}\n")));
        let stem = MODEL_RELATIVE_PATH.trim_end_matches(&format!("-{}.gguf", &MODEL_SHA256[..8]));
        assert!(
            script.contains(&format!("/{}-${{MODEL_SHA256:0:8}}.gguf", stem)),
            "{stem}"
        );
    }

    #[test]
    fn serve_script_prints_the_ready_prefix() {
        assert!(SERVE_PY.contains(&format!("READY_PREFIX = \"{READY_PREFIX}\"")));
        assert!(SERVE_PY.contains(r#"f"[pid {os.getpid()}] {READY_PREFIX}{address}\n""#));
        assert_eq!(ready_needle(42), format!("[pid 42] {READY_PREFIX}"));
    }
}
