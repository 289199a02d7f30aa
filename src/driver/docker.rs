//! The Docker Engine API client: the calls the container driver makes, over
//! the daemon's unix socket.
//!
//! Hand-written HTTP/1.1 (one request per connection, `Connection: close`):
//! the handful of calls needed here do not justify a Docker SDK. Each call
//! is bounded in time; an error names the call, the socket and Docker's own
//! message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::config::plan::ImageRef;

/// Bound on one API call that does no long work.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a pull.
const PULL_TIMEOUT: Duration = Duration::from_secs(3600);

/// A Docker Engine API endpoint on a unix socket.
#[derive(Debug, Clone)]
pub struct Docker {
    socket: PathBuf,
}

#[derive(Debug)]
pub struct ApiResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

impl ApiResponse {
    fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "Docker answered HTTP {} with non-JSON: {}",
                self.status,
                self.text()
            )
        })
    }

    fn text(&self) -> String {
        let s = String::from_utf8_lossy(&self.body);
        let s = s.trim();
        if s.len() > 500 {
            format!("{}…", &s[..s.floor_char_boundary(500)])
        } else {
            s.to_string()
        }
    }

    /// Docker's `{"message": …}` error text, or the raw body.
    fn message(&self) -> String {
        serde_json::from_slice::<Value>(&self.body)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| self.text())
    }
}

/// What a local image is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The image ID, `sha256:…` (digest of its config).
    pub id: String,
    pub repo_digests: Vec<String>,
}

/// Container state as `inspect` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    pub running: bool,
    /// created, running, exited, dead, …
    pub status: String,
    pub exit_code: i64,
    pub oom_killed: bool,
    pub error: String,
    /// Image ID the container runs.
    pub image_id: String,
}

impl Docker {
    pub fn new(socket: impl Into<PathBuf>) -> Docker {
        Docker {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// One API call. `path` includes the query string.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<ApiResponse> {
        let what = format!("Docker API {method} {path} on {}", self.socket.display());
        tokio::time::timeout(timeout, self.call_inner(method, path, body, headers))
            .await
            .map_err(|_| anyhow!("{what}: no answer within {timeout:?}"))?
            .with_context(|| what)
    }

    async fn call_inner(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<ApiResponse> {
        let mut stream = UnixStream::connect(&self.socket).await.with_context(|| {
            format!("connecting to the Docker daemon at {} (is dockerd running? scripts/setup-docker.sh starts one)", self.socket.display())
        })?;
        let payload = match body {
            Some(v) => serde_json::to_vec(v).context("serializing request")?,
            None => Vec::new(),
        };
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: docker\r\nUser-Agent: infergate\r\nConnection: close\r\n"
        );
        if body.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n", payload.len()));
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .write_all(head.as_bytes())
            .await
            .context("sending request")?;
        stream
            .write_all(&payload)
            .await
            .context("sending request body")?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .await
            .context("reading response")?;
        parse_response(&raw)
    }

    pub async fn ping(&self) -> Result<()> {
        let r = self
            .call("GET", "/_ping", None, &[], Duration::from_secs(5))
            .await?;
        if r.status != 200 {
            bail!(
                "Docker daemon at {} answered /_ping with HTTP {}: {}",
                self.socket.display(),
                r.status,
                r.message()
            );
        }
        Ok(())
    }

    /// The daemon's version and the newest Engine API version it speaks
    /// (`GET /version`: `Version`, `ApiVersion`).
    pub async fn version(&self) -> Result<(String, String)> {
        let r = self
            .call("GET", "/version", None, &[], Duration::from_secs(5))
            .await?;
        if r.status != 200 {
            bail!("GET /version: HTTP {}: {}", r.status, r.message());
        }
        let v = r.json()?;
        let field = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .with_context(|| format!("GET /version without {k}"))
        };
        Ok((field("Version")?, field("ApiVersion")?))
    }

    /// The local image `reference` names (a `name@sha256:` digest or an ID), if present.
    pub async fn image(&self, reference: &str) -> Result<Option<ImageInfo>> {
        let r = self
            .call(
                "GET",
                &format!("/images/{reference}/json"),
                None,
                &[],
                CALL_TIMEOUT,
            )
            .await?;
        match r.status {
            200 => {
                let v = r.json()?;
                let id = v
                    .get("Id")
                    .and_then(Value::as_str)
                    .context("image inspect without Id")?
                    .to_string();
                let repo_digests = v
                    .get("RepoDigests")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Some(ImageInfo { id, repo_digests }))
            }
            404 => Ok(None),
            s => bail!("inspecting image {reference}: HTTP {s}: {}", r.message()),
        }
    }

    /// Pull `repository@digest`. `auth` is the X-Registry-Auth value (never logged).
    pub async fn pull_by_digest(&self, image: &ImageRef, auth: Option<&str>) -> Result<()> {
        let Some(repo) = &image.repository else {
            bail!("{image} is a local image ID: it names no repository to pull from");
        };
        let path = format!(
            "/images/create?fromImage={}&tag={}",
            query_escape(repo),
            query_escape(&image.digest)
        );
        let headers: Vec<(&str, &str)> = auth.map(|a| ("X-Registry-Auth", a)).into_iter().collect();
        let r = self
            .call("POST", &path, None, &headers, PULL_TIMEOUT)
            .await?;
        if r.status != 200 {
            bail!("pulling {image}: HTTP {}: {}", r.status, r.message());
        }
        // Errors during a pull arrive inside the 200 progress stream.
        for line in String::from_utf8_lossy(&r.body).lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line)
                && let Some(e) = v.get("error").and_then(Value::as_str)
            {
                bail!("pulling {image}: {e}");
            }
        }
        Ok(())
    }

    /// Create a container; returns its ID.
    pub async fn create(&self, name: &str, config: &Value) -> Result<String> {
        let r = self
            .call(
                "POST",
                &format!("/containers/create?name={}", query_escape(name)),
                Some(config),
                &[],
                CALL_TIMEOUT,
            )
            .await?;
        if r.status != 201 {
            bail!(
                "creating container {name}: HTTP {}: {}",
                r.status,
                r.message()
            );
        }
        let v = r.json()?;
        Ok(v.get("Id")
            .and_then(Value::as_str)
            .context("create answered without Id")?
            .to_string())
    }

    pub async fn start(&self, id: &str) -> Result<()> {
        let r = self
            .call(
                "POST",
                &format!("/containers/{id}/start"),
                None,
                &[],
                CALL_TIMEOUT,
            )
            .await?;
        match r.status {
            204 | 304 => Ok(()),
            s => bail!(
                "starting container {}: HTTP {s}: {}",
                short(id),
                r.message()
            ),
        }
    }

    /// None when no such container exists.
    pub async fn inspect(&self, id: &str) -> Result<Option<ContainerState>> {
        let r = self
            .call(
                "GET",
                &format!("/containers/{id}/json"),
                None,
                &[],
                CALL_TIMEOUT,
            )
            .await?;
        match r.status {
            200 => {
                let v = r.json()?;
                let st = v.get("State").cloned().unwrap_or(Value::Null);
                Ok(Some(ContainerState {
                    running: st.get("Running").and_then(Value::as_bool).unwrap_or(false),
                    status: st
                        .get("Status")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    exit_code: st.get("ExitCode").and_then(Value::as_i64).unwrap_or(0),
                    oom_killed: st
                        .get("OOMKilled")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    error: st
                        .get("Error")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    image_id: v
                        .get("Image")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                }))
            }
            404 => Ok(None),
            s => bail!(
                "inspecting container {}: HTTP {s}: {}",
                short(id),
                r.message()
            ),
        }
    }

    /// stdout and stderr so far, interleaved as Docker stored them.
    pub async fn logs(&self, id: &str) -> Result<Vec<u8>> {
        let r = self
            .call(
                "GET",
                &format!("/containers/{id}/logs?stdout=1&stderr=1"),
                None,
                &[],
                CALL_TIMEOUT,
            )
            .await?;
        if r.status != 200 {
            bail!(
                "reading logs of container {}: HTTP {}: {}",
                short(id),
                r.status,
                r.message()
            );
        }
        Ok(demux_logs(&r.body))
    }

    /// SIGTERM, then SIGKILL after `grace` (Docker's own stop).
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<()> {
        let secs = grace.as_secs().max(1);
        let r = self
            .call(
                "POST",
                &format!("/containers/{id}/stop?t={secs}"),
                None,
                &[],
                grace + CALL_TIMEOUT,
            )
            .await?;
        match r.status {
            204 | 304 | 404 => Ok(()),
            s => bail!(
                "stopping container {}: HTTP {s}: {}",
                short(id),
                r.message()
            ),
        }
    }

    pub async fn remove(&self, id: &str) -> Result<()> {
        let r = self
            .call(
                "DELETE",
                &format!("/containers/{id}?force=1"),
                None,
                &[],
                CALL_TIMEOUT,
            )
            .await?;
        match r.status {
            204 | 404 => Ok(()),
            s => bail!(
                "removing container {}: HTTP {s}: {}",
                short(id),
                r.message()
            ),
        }
    }
}

/// The first 12 characters of a container ID, as Docker prints it.
pub(super) fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Parse a whole HTTP/1.1 response (read to EOF), de-chunking the body.
fn parse_response(raw: &[u8]) -> Result<ApiResponse> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("response ended before its headers did")?;
    let head = std::str::from_utf8(&raw[..end]).context("response headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length: Option<usize> = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            } else if k == "content-length" {
                length = v.parse().ok();
            }
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        match length {
            Some(n) if n <= rest.len() => rest[..n].to_vec(),
            _ => rest.to_vec(),
        }
    };
    Ok(ApiResponse { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            // Connection closed mid-chunk: keep what arrived.
            return Ok(out);
        };
        let size_text = std::str::from_utf8(&data[..eol]).context("bad chunk size")?;
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .with_context(|| format!("bad chunk size {size_hex:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        data = data.get(size + 2..).unwrap_or(&[]);
    }
}

/// Docker multiplexes stdout and stderr of a container without a TTY as
/// frames: [stream, 0, 0, 0, len (u32 BE)] then `len` bytes.
fn demux_logs(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while rest.len() >= 8 {
        let is_frame = matches!(rest[0], 0..=2) && rest[1..4] == [0, 0, 0];
        if !is_frame {
            // A TTY container's logs are raw.
            out.extend_from_slice(rest);
            return out;
        }
        let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let end = (8 + len).min(rest.len());
        out.extend_from_slice(&rest[8..end]);
        rest = &rest[end..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chunked_and_sized_responses() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let r = parse_response(raw).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world"[..]));
        let raw =
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 22\r\n\r\n{\"message\":\"no such\"}\n";
        let r = parse_response(raw).unwrap();
        assert_eq!(r.status, 404);
        assert_eq!(r.message(), "no such");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }

    #[test]
    fn demuxes_log_frames() {
        let mut data = vec![1, 0, 0, 0, 0, 0, 0, 3];
        data.extend_from_slice(b"out");
        data.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 4]);
        data.extend_from_slice(b"err\n");
        assert_eq!(demux_logs(&data), b"outerr\n");
        assert_eq!(demux_logs(b"plain tty text"), b"plain tty text");
    }

    #[test]
    fn escapes_query_values() {
        assert_eq!(query_escape("ghcr.io/o/e"), "ghcr.io%2Fo%2Fe");
        assert_eq!(query_escape("sha256:ab"), "sha256%3Aab");
    }
}
