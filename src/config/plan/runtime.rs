//! The `[baseline]` and `[candidate]` tables: which driver (external,
//! process, container), the fields each accepts, image references by digest,
//! metrics endpoints, and two runtimes that would share an address.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;

use toml::Spanned;

use super::model::*;
use super::raw::*;
use super::sections::*;
use crate::report::ConfigError;

/// Which fields each driver accepts; everything else is a mistake worth naming.
pub(super) const EXTERNAL_FIELDS: &[&str] = &["url", "health_path"];
pub(super) const PROCESS_FIELDS: &[&str] = &[
    "engine_profile",
    "engine_profiles",
    "command",
    "args",
    "env",
    "cwd",
    "base_url",
    "health_url",
    "sha256",
];
pub(super) const CONTAINER_FIELDS: &[&str] = &[
    "image",
    "args",
    "entrypoint",
    "env",
    "env_from_host",
    "binds",
    "port",
    "health_path",
    "gpus",
    "devices",
    "shm_size",
    "ipc",
    "ulimits",
    "runtime",
    "user",
];

/// A `[baseline]` or `[candidate]` table being read: errors name
/// `label.field` and point at the field's own line.
pub(super) struct RuntimeTable<'a> {
    text: &'a str,
    label: &'a str,
    span: Range<usize>,
    resolve: &'a dyn Fn(&str) -> PathBuf,
    err: &'a ErrFn<'a>,
}

impl RuntimeTable<'_> {
    fn at(&self, field: &str) -> String {
        format!("{}.{field}", self.label)
    }

    /// The offending key's own line when it is in the table, else the table.
    fn key_span(&self, key: &str) -> Range<usize> {
        key_span(self.text, self.span.clone(), key)
    }

    /// An error at `key` = ….
    fn bad(&self, key: &str, message: String) -> ConfigError {
        (self.err)(Some(self.key_span(key)), &self.at(key), message)
    }

    /// An error at the table, for a `field` it lacks.
    fn missing(&self, field: &str, message: String) -> ConfigError {
        (self.err)(Some(self.span.clone()), &self.at(field), message)
    }
}

pub(super) fn runtime(
    text: &str,
    label: &str,
    raw: Spanned<RawRuntime>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Runtime, ConfigError> {
    let t = RuntimeTable {
        text,
        label,
        span: raw.span(),
        resolve,
        err,
    };
    let r = raw.into_inner();
    let present = present_fields(&r);
    let kind = driver_kind(&t, &r, &present)?;
    let health_path = r.health_path.clone().unwrap_or_else(|| "/health".into());
    if !health_path.starts_with('/') {
        return Err(t.bad("health_path", format!("{health_path:?} must start with /")));
    }
    let driver = match kind {
        "external" => external_driver(&t, &r, health_path)?,
        "process" => process_driver(&t, &r, &present)?,
        _ => container_driver(&t, &r, health_path)?,
    };
    Ok(Runtime {
        label: label.to_string(),
        driver,
        expected_model: r.expected_model,
        api_key_env: r.api_key_env,
        ready_timeout: seconds(r.ready_timeout_s, 120.0, &t.at("ready_timeout_s"), err)?,
        stop_grace: seconds(r.stop_grace_s, 10.0, &t.at("stop_grace_s"), err)?,
        scrape_metrics: r.scrape_metrics.unwrap_or(true),
        metrics_endpoints: metrics_endpoints(
            r.metrics_endpoints,
            &t.at("metrics_endpoints"),
            Some(t.key_span("metrics_endpoints")),
            err,
        )?,
    })
}

/// The driver-specific fields the table gives.
pub(super) fn present_fields(r: &RawRuntime) -> Vec<&'static str> {
    [
        ("url", r.url.is_some()),
        ("engine_profile", r.engine_profile.is_some()),
        ("engine_profiles", r.engine_profiles.is_some()),
        ("command", r.command.is_some()),
        ("args", r.args.is_some()),
        ("env", r.env.is_some()),
        ("cwd", r.cwd.is_some()),
        ("base_url", r.base_url.is_some()),
        ("health_url", r.health_url.is_some()),
        ("sha256", r.sha256.is_some()),
        ("image", r.image.is_some()),
        ("entrypoint", r.entrypoint.is_some()),
        ("env_from_host", r.env_from_host.is_some()),
        ("binds", r.binds.is_some()),
        ("port", r.port.is_some()),
        ("health_path", r.health_path.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect()
}

/// The driver named, once every field given is one it takes.
pub(super) fn driver_kind(
    t: &RuntimeTable,
    r: &RawRuntime,
    present: &[&str],
) -> Result<&'static str, ConfigError> {
    let (kind, allowed) = match r.driver.get_ref().as_str() {
        "external" => ("external", EXTERNAL_FIELDS),
        "process" => ("process", PROCESS_FIELDS),
        "container" => ("container", CONTAINER_FIELDS),
        other => {
            return Err((t.err)(
                Some(r.driver.span()),
                &t.at("driver"),
                format!("{other:?}: expected \"external\", \"process\" or \"container\""),
            ));
        }
    };
    if let Some(bad) = present.iter().find(|k| !allowed.contains(k)) {
        return Err(t.bad(
            bad,
            format!(
                "is not a field of the {kind} driver (it takes {})",
                allowed.join(", ")
            ),
        ));
    }
    Ok(kind)
}

pub(super) fn external_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    health_path: String,
) -> Result<Driver, ConfigError> {
    let Some(url) = &r.url else {
        return Err(t.missing(
            "url",
            "the external driver needs the runtime's base URL".into(),
        ));
    };
    check_http_url(url).map_err(|m| t.bad("url", m))?;
    Ok(Driver::External {
        url: url.trim_end_matches('/').to_string(),
        health_path,
    })
}

/// A process runtime starts from an engine profile or from a command line.
pub(super) fn process_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    present: &[&str],
) -> Result<Driver, ConfigError> {
    match (&r.engine_profile, &r.command) {
        (Some(profile), None) => {
            if let Some(bad) = ["args", "env", "cwd", "base_url", "health_url", "sha256"]
                .iter()
                .find(|k| present.contains(k))
            {
                return Err(t.bad(bad, "does not apply to an engine_profile runtime (the engine profile says how it starts)".into()));
            }
            Ok(Driver::Process(ProcessDriver::Engine {
                profile: profile.clone(),
                profiles_file: r.engine_profiles.as_deref().map(t.resolve),
            }))
        }
        (None, Some(command)) => command_driver(t, r, command),
        (Some(_), Some(_)) => Err(t.bad(
            "command",
            "give either `engine_profile` or `command`, not both".into(),
        )),
        (None, None) => Err(t.missing(
            "command",
            "the process driver needs `command` (with base_url) or `engine_profile`".into(),
        )),
    }
}

pub(super) fn command_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    command: &str,
) -> Result<Driver, ConfigError> {
    if r.engine_profiles.is_some() {
        return Err(t.bad("engine_profiles", "applies only with engine_profile".into()));
    }
    let Some(base_url) = &r.base_url else {
        return Err(t.missing(
            "base_url",
            "a command runtime needs the base URL it will serve on".into(),
        ));
    };
    check_http_url(base_url).map_err(|m| t.bad("base_url", m))?;
    let base_url = base_url.trim_end_matches('/').to_string();
    let health_url = r
        .health_url
        .clone()
        .unwrap_or_else(|| format!("{base_url}/health"));
    check_http_url(&health_url).map_err(|m| t.bad("health_url", m))?;
    if let Some(h) = &r.sha256
        && (h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(t.bad("sha256", "must be 64 hex digits".into()));
    }
    let command = if command.contains('/') {
        (t.resolve)(command).display().to_string()
    } else {
        command.to_string()
    };
    Ok(Driver::Process(ProcessDriver::Command(CommandSpec {
        command,
        args: r.args.clone().unwrap_or_default(),
        env: r.env.clone().unwrap_or_default(),
        cwd: r.cwd.as_deref().map(t.resolve),
        base_url,
        health_url,
        sha256: r.sha256.as_ref().map(|s| s.to_ascii_lowercase()),
    })))
}

pub(super) fn container_driver(
    t: &RuntimeTable,
    r: &RawRuntime,
    health_path: String,
) -> Result<Driver, ConfigError> {
    let Some(image) = &r.image else {
        return Err(t.missing(
            "image",
            "the container driver needs an image pinned by digest".into(),
        ));
    };
    let image_ref = ImageRef::parse(image.get_ref())
        .map_err(|m| (t.err)(Some(image.span()), &t.at("image"), m))?;
    let Some(port) = &r.port else {
        return Err(t.missing(
            "port",
            "the container driver needs the server's port (host networking)".into(),
        ));
    };
    let port_value = *port.get_ref();
    let port = u16::try_from(port_value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            (t.err)(
                Some(port.span()),
                &t.at("port"),
                format!("{port_value} is not a TCP port"),
            )
        })?;
    let binds = r.binds.clone().unwrap_or_default();
    if let Some(b) = binds.iter().find(|b| b.split(':').count() < 2) {
        return Err(t.bad("binds", format!("{b:?}: expected host:container[:ro]")));
    }
    Ok(Driver::Container(ContainerDriver {
        image: image_ref,
        args: r.args.clone().unwrap_or_default(),
        entrypoint: r.entrypoint.clone(),
        env: r.env.clone().unwrap_or_default(),
        env_from_host: r.env_from_host.clone().unwrap_or_default(),
        binds,
        port,
        health_path,
        host: container_host(t, r)?,
    }))
}

/// The host settings GPU serving needs, each checked as `docker run` would.
fn container_host(t: &RuntimeTable, r: &RawRuntime) -> Result<ContainerHost, ConfigError> {
    let gpus = match &r.gpus {
        None => None,
        Some(v) => Some(gpus(v.get_ref()).map_err(|m| t.bad("gpus", m))?),
    };
    let devices = r
        .devices
        .iter()
        .flatten()
        .map(|d| device(d).map_err(|m| t.bad("devices", m)))
        .collect::<Result<_, _>>()?;
    let shm_size = match &r.shm_size {
        None => None,
        Some(v) => Some(bytes(v.get_ref()).map_err(|m| t.bad("shm_size", m))?),
    };
    if let Some(ipc) = &r.ipc
        && !matches!(ipc.as_str(), "host" | "private" | "shareable")
    {
        return Err(t.bad(
            "ipc",
            format!("{ipc:?}: expected \"host\", \"private\" or \"shareable\""),
        ));
    }
    let ulimits = r
        .ulimits
        .iter()
        .flatten()
        .map(|(name, v)| ulimit(name, v).map_err(|m| t.bad("ulimits", m)))
        .collect::<Result<_, _>>()?;
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-:".contains(c))
    };
    if let Some(rt) = r.runtime.as_deref().filter(|s| !word(s) || s.contains(':')) {
        return Err(t.bad(
            "runtime",
            format!("{rt:?}: expected a runtime name the daemon knows (e.g. \"nvidia\")"),
        ));
    }
    if let Some(u) = r.user.as_deref().filter(|s| !word(s)) {
        return Err(t.bad(
            "user",
            format!("{u:?}: expected USER or USER:GROUP (names or ids)"),
        ));
    }
    Ok(ContainerHost {
        gpus,
        devices,
        shm_size,
        ipc: r.ipc.clone(),
        ulimits,
        runtime: r.runtime.clone(),
        user: r.user.clone(),
    })
}

/// `"all"`, a count, or a list of device indices or UUIDs.
fn gpus(v: &toml::Value) -> Result<Gpus, String> {
    match v {
        toml::Value::String(s) if s == "all" => Ok(Gpus::All),
        toml::Value::Integer(n) if *n > 0 && *n <= 1024 => Ok(Gpus::Count(*n as u32)),
        toml::Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| match x {
                toml::Value::String(s)
                    if !s.is_empty()
                        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') =>
                {
                    Ok(s.clone())
                }
                toml::Value::Integer(n) if *n >= 0 => Ok(n.to_string()),
                other => Err(format!("{other}: expected a GPU index or UUID")),
            })
            .collect::<Result<_, _>>()
            .map(Gpus::Ids),
        other => Err(format!(
            "{other}: expected \"all\", a count from 1, or a list of GPU indices or UUIDs"
        )),
    }
}

/// `HOST[:CONTAINER[:PERMISSIONS]]`, both paths absolute, permissions of `rwm`.
fn device(s: &str) -> Result<DeviceMapping, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let (host, container, permissions) = match parts.as_slice() {
        [h] => (*h, *h, "rwm"),
        [h, c] => (*h, *c, "rwm"),
        [h, c, p] => (*h, *c, *p),
        _ => return Err(format!("{s:?}: expected HOST[:CONTAINER[:PERMISSIONS]]")),
    };
    let perms_ok = !permissions.is_empty()
        && permissions.chars().all(|c| "rwm".contains(c))
        && permissions.len()
            == permissions
                .chars()
                .collect::<std::collections::BTreeSet<_>>()
                .len();
    if !host.starts_with('/') || !container.starts_with('/') || !perms_ok {
        return Err(format!(
            "{s:?}: expected absolute device paths and permissions made of r, w and m"
        ));
    }
    // What the daemon is asked to map must be the path the plan shows: a
    // `..` would name another file than the one a reviewer reads.
    for p in [host, container] {
        if p.split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(format!(
                "{s:?}: {p:?} is not a normal path (no empty, `.` or `..` components)"
            ));
        }
    }
    Ok(DeviceMapping {
        host: host.into(),
        container: container.into(),
        permissions: permissions.into(),
    })
}

/// Bytes as `docker run --shm-size` takes them: a number of bytes, or a
/// string with a `b`, `k`, `m` or `g` suffix (powers of 1024).
fn bytes(v: &toml::Value) -> Result<u64, String> {
    let too_big = || format!("{v}: larger than 1 TiB");
    let n = match v {
        toml::Value::Integer(n) if *n > 0 => *n as u64,
        toml::Value::String(s) => {
            let lower = s.to_ascii_lowercase();
            let (digits, unit) = match lower.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
                Some((i, _)) => lower.split_at(i),
                None => (lower.as_str(), ""),
            };
            let scale: u64 = match unit {
                "" | "b" => 1,
                "k" | "kb" => 1 << 10,
                "m" | "mb" => 1 << 20,
                "g" | "gb" => 1 << 30,
                _ => {
                    return Err(format!(
                        "{s:?}: expected a size such as \"32g\" or \"512m\""
                    ));
                }
            };
            let n: u64 = digits
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{s:?}: expected a size such as \"32g\" or \"512m\""))?;
            n.checked_mul(scale).ok_or_else(too_big)?
        }
        other => {
            return Err(format!(
                "{other}: expected bytes, or a size such as \"32g\""
            ));
        }
    };
    if n > 1 << 40 {
        return Err(too_big());
    }
    Ok(n)
}

/// `NAME = LIMIT` or `NAME = [SOFT, HARD]` for memlock, stack or nofile;
/// -1 is unlimited.
fn ulimit(name: &str, v: &toml::Value) -> Result<Ulimit, String> {
    if !matches!(name, "memlock" | "stack" | "nofile") {
        return Err(format!("{name:?}: expected memlock, stack or nofile"));
    }
    let one = |x: &toml::Value| match x {
        toml::Value::Integer(n) if *n >= -1 => Ok(*n),
        other => Err(format!(
            "{name} = {other}: expected a limit ≥ 0, or -1 for unlimited"
        )),
    };
    let (soft, hard) = match v {
        toml::Value::Array(a) if a.len() == 2 => (one(&a[0])?, one(&a[1])?),
        x => {
            let n = one(x)?;
            (n, n)
        }
    };
    let unlimited = |n: i64| n == -1;
    if !unlimited(hard) && (unlimited(soft) || soft > hard) {
        return Err(format!(
            "{name}: the soft limit {soft} is above the hard limit {hard}"
        ));
    }
    Ok(Ulimit {
        name: name.into(),
        soft,
        hard,
    })
}

/// Extra metrics endpoints: each an http(s) URL, by a name that is not `target`.
pub(super) fn metrics_endpoints(
    raw: Option<BTreeMap<String, String>>,
    at: &str,
    span: Option<Range<usize>>,
    err: &ErrFn,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for (name, url) in raw.unwrap_or_default() {
        if name == TARGET_ENDPOINT {
            return Err(err(
                span,
                at,
                "`target` names the runtime's own /metrics; choose another name".into(),
            ));
        }
        if let Err(m) = check_http_url(&url) {
            return Err(err(span, &format!("{at}.{name}"), m));
        }
        out.push((name, url));
    }
    Ok(out)
}

/// Why the two runtimes cannot both serve at once, if they cannot: both
/// bind one fixed address (a command's base_url, a container's host port).
/// The reference engine announces a free port; an external URL is already up.
pub(super) fn same_fixed_address(a: &Runtime, b: &Runtime) -> Option<String> {
    fn fixed(r: &Runtime) -> Option<(String, u16)> {
        match &r.driver {
            Driver::Process(ProcessDriver::Command(c)) => {
                let rest = c.base_url.split_once("://")?.1;
                let authority = rest.split('/').next()?;
                let authority = authority.rsplit('@').next()?;
                let (host, port) = match authority.rsplit_once(':') {
                    Some((h, p)) => (h, p.parse().ok()?),
                    None if c.base_url.starts_with("https") => (authority, 443),
                    None => (authority, 80),
                };
                let host = match host {
                    "localhost" | "127.0.0.1" | "0.0.0.0" | "[::1]" => "local",
                    h => h,
                };
                Some((host.to_string(), port))
            }
            Driver::Container(c) => Some(("local".into(), c.port)),
            _ => None,
        }
    }
    match (fixed(a), fixed(b)) {
        (Some(x), Some(y)) if x == y => Some(format!(
            "the baseline and the candidate both listen on port {}",
            x.1
        )),
        _ => None,
    }
}

pub(super) fn check_http_url(url: &str) -> Result<(), String> {
    crate::config::urls::check_http_url(url, crate::config::urls::Password::Refused)
}
