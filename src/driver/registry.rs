//! Tags to digests on an OCI distribution registry: `HOST[:PORT]/REPO:TAG`
//! becomes the digest a pull by digest fetches, and, when that digest names
//! a multi-platform index, the platform manifest this host would run.
//!
//! A tag moves; a digest does not. Resolving asks the registry for the tag's
//! manifest (`GET /v2/REPO/manifests/TAG`, every manifest kind in `Accept`),
//! hashes the bytes it sent and checks them against `Docker-Content-Digest`:
//! the digest recorded is the one of the bytes received, never a header
//! taken on trust. A loopback registry is spoken to over plain HTTP; any
//! other over HTTPS only, with a bearer token from the environment
//! (`INFERGATE_REGISTRY_TOKEN`), never printed.

use std::time::Duration;

use crate::report::digest::sha256_hex;
use serde::Serialize;
use serde_json::Value;

/// The environment variable holding a bearer token for a registry that is
/// not on loopback.
pub const TOKEN_ENV: &str = "INFERGATE_REGISTRY_TOKEN";

/// OCI image index, Docker manifest list, OCI image manifest, Docker image
/// manifest v2: a registry answers with the first kind it holds.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Bound on one registry call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A manifest is a few KB; more is not a manifest.
const MAX_MANIFEST_BYTES: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("image {0:?}: {1}")]
    Name(String, &'static str),
    #[error("{what}: {source}")]
    Transport {
        what: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{what}: the registry answered HTTP {status}: {body}")]
    Status {
        what: String,
        status: u16,
        body: String,
    },
    #[error("{what}: {why}")]
    Manifest { what: String, why: String },
    #[error(
        "{what}: the registry said the manifest is {header} but the bytes it sent hash to {computed}"
    )]
    DigestMismatch {
        what: String,
        header: String,
        computed: String,
    },
}

/// `HOST[:PORT]/REPOSITORY(:TAG|@sha256:…)`. The host is required: a name
/// without one would mean Docker Hub, which is never assumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    pub host: String,
    pub repository: String,
    pub reference: String,
}

impl ImageName {
    pub fn parse(s: &str) -> Result<ImageName, RegistryError> {
        let bad = |why| RegistryError::Name(s.to_string(), why);
        let (host, rest) = s
            .split_once('/')
            .ok_or_else(|| bad("give the registry host first: HOST[:PORT]/REPOSITORY:TAG"))?;
        if !(host.contains('.') || host.contains(':') || host == "localhost") {
            return Err(bad(
                "the part before the first '/' is not a registry host (it needs a '.', a ':PORT' or to be localhost); Docker Hub is never assumed",
            ));
        }
        let (repository, reference) = match rest.split_once('@') {
            Some((r, d)) => (r, d.to_string()),
            None => match rest.rsplit_once(':') {
                Some((r, t)) if !t.contains('/') => (r, t.to_string()),
                _ => (rest, "latest".to_string()),
            },
        };
        let path_ok = !repository.is_empty()
            && repository.split('/').all(|c| {
                !c.is_empty()
                    && c.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)
                    })
            });
        if !path_ok {
            return Err(bad(
                "the repository must be lowercase letters, digits and . _ - separated by /",
            ));
        }
        let ref_ok = !reference.is_empty()
            && reference.len() <= 128
            && reference
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b));
        if !ref_ok {
            return Err(bad(
                "the tag is empty, too long or has characters a tag cannot",
            ));
        }
        Ok(ImageName {
            host: host.to_string(),
            repository: repository.to_string(),
            reference,
        })
    }

    /// `HOST/REPOSITORY`, what a pull by digest puts before `@`.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.host, self.repository)
    }

    fn is_loopback(&self) -> bool {
        let host = self
            .host
            .rsplit_once(':')
            .map_or(self.host.as_str(), |(h, _)| h);
        host == "localhost"
            || host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

impl std::fmt::Display for ImageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        write!(
            f,
            "{}/{}{sep}{}",
            self.host, self.repository, self.reference
        )
    }
}

/// What a tag named when it was resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// `HOST/REPOSITORY`.
    pub repository: String,
    /// The tag asked for (absent when a digest was given).
    pub tag: Option<String>,
    /// The digest a pull by digest takes: the index's when the tag names a
    /// multi-platform index, else the image manifest's.
    pub digest: String,
    pub media_type: String,
    /// When `digest` is an index: the platform manifest this host runs.
    pub platform_digest: Option<String>,
    /// `os/architecture` of that manifest.
    pub platform: Option<String>,
}

impl Resolved {
    /// `HOST/REPOSITORY@DIGEST`, as a plan's `image` names it.
    pub fn pinned(&self) -> String {
        format!("{}@{}", self.repository, self.digest)
    }
}

/// The OCI platform name of this host's CPU.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Resolve `name` to its digest (and its platform manifest for `arch`).
pub async fn resolve(name: &ImageName, arch: &str) -> Result<Resolved, RegistryError> {
    let registry = Registry::new(name)?;
    let top = registry.manifest(&name.reference).await?;
    let tag = (!name.reference.starts_with("sha256:")).then(|| name.reference.clone());
    let mut resolved = Resolved {
        repository: name.repository_path(),
        tag,
        digest: top.digest.clone(),
        media_type: top.media_type.clone(),
        platform_digest: None,
        platform: None,
    };
    if INDEX_TYPES.contains(&top.media_type.as_str()) {
        let (digest, platform) =
            pick_platform(&top.body, arch).map_err(|why| RegistryError::Manifest {
                what: format!("{name}"),
                why,
            })?;
        // Fetched to prove it is there and hashes to what the index says.
        let platform_manifest = registry.manifest(&digest).await?;
        resolved.platform_digest = Some(platform_manifest.digest);
        resolved.platform = Some(platform);
    }
    Ok(resolved)
}

struct Manifest {
    digest: String,
    media_type: String,
    body: Value,
}

struct Registry<'a> {
    name: &'a ImageName,
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl<'a> Registry<'a> {
    fn new(name: &'a ImageName) -> Result<Registry<'a>, RegistryError> {
        let loopback = name.is_loopback();
        let scheme = if loopback { "http" } else { "https" };
        let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .https_only(!loopback)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|source| RegistryError::Transport {
                what: format!("registry client for {}", name.host),
                source,
            })?;
        Ok(Registry {
            name,
            base: format!("{scheme}://{}/v2/{}", name.host, name.repository),
            token,
            http,
        })
    }

    async fn manifest(&self, reference: &str) -> Result<Manifest, RegistryError> {
        let what = format!(
            "manifest {}/{}:{reference}",
            self.name.host, self.name.repository
        );
        let mut req = self
            .http
            .get(format!("{}/manifests/{reference}", self.base))
            .header(reqwest::header::ACCEPT, ACCEPT);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .map_err(|source| RegistryError::Transport {
                what: what.clone(),
                source,
            })?;
        let status = resp.status().as_u16();
        let header = |k: &str| {
            resp.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let header_digest = header("docker-content-digest");
        let content_type = header("content-type");
        let bytes = resp
            .bytes()
            .await
            .map_err(|source| RegistryError::Transport {
                what: what.clone(),
                source,
            })?;
        if status != 200 {
            return Err(RegistryError::Status {
                what,
                status,
                body: String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned(),
            });
        }
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(RegistryError::Manifest {
                what,
                why: format!(
                    "{} bytes is not a manifest (at most {MAX_MANIFEST_BYTES})",
                    bytes.len()
                ),
            });
        }
        let computed = format!("sha256:{}", sha256_hex(&bytes));
        let expected = if reference.starts_with("sha256:") {
            Some(reference.to_string())
        } else {
            header_digest
        };
        if let Some(expected) = expected
            && expected != computed
        {
            return Err(RegistryError::DigestMismatch {
                what,
                header: expected,
                computed,
            });
        }
        let body: Value = serde_json::from_slice(&bytes).map_err(|e| RegistryError::Manifest {
            what: what.clone(),
            why: format!("not JSON: {e}"),
        })?;
        let media_type = body
            .get("mediaType")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| content_type.map(|c| c.split(';').next().unwrap_or("").trim().to_string()))
            .unwrap_or_default();
        Ok(Manifest {
            digest: computed,
            media_type,
            body,
        })
    }
}

/// The `linux/ARCH` entry of an index: its digest and `os/architecture`.
fn pick_platform(index: &Value, arch: &str) -> Result<(String, String), String> {
    let entries = index
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or("an index without `manifests`")?;
    let mut offered = Vec::new();
    for m in entries {
        let p = m.get("platform");
        let os = p.and_then(|p| p.get("os")).and_then(Value::as_str);
        let a = p
            .and_then(|p| p.get("architecture"))
            .and_then(Value::as_str);
        if let (Some(os), Some(a)) = (os, a) {
            if os == "linux" && a == arch {
                let digest = m
                    .get("digest")
                    .and_then(Value::as_str)
                    .ok_or("an index entry without a digest")?;
                return Ok((digest.to_string(), format!("{os}/{a}")));
            }
            offered.push(format!("{os}/{a}"));
        }
    }
    Err(format!(
        "the index offers no linux/{arch} image (it offers: {})",
        if offered.is_empty() {
            "none with a platform".to_string()
        } else {
            offered.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_need_a_host_and_keep_tag_or_digest() {
        let n = ImageName::parse("127.0.0.1:5000/infergate/engine:nightly").unwrap();
        assert_eq!(n.host, "127.0.0.1:5000");
        assert_eq!(n.repository, "infergate/engine");
        assert_eq!(n.reference, "nightly");
        assert!(n.is_loopback());
        let d = format!("sha256:{}", "a".repeat(64));
        let n = ImageName::parse(&format!("localhost:5000/e@{d}")).unwrap();
        assert_eq!(n.reference, d);
        assert_eq!(n.to_string(), format!("localhost:5000/e@{d}"));
        let n = ImageName::parse("ghcr.io/org/engine").unwrap();
        assert_eq!(n.reference, "latest");
        assert!(!n.is_loopback());
        for bad in [
            "engine:nightly",
            "org/engine:nightly",
            "127.0.0.1:5000/Engine:x",
            "127.0.0.1:5000/e:",
            "127.0.0.1:5000//e:x",
        ] {
            assert!(ImageName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_index_gives_this_hosts_platform_or_says_what_it_offers() {
        let index = serde_json::json!({
            "manifests": [
                {"digest": "sha256:1", "platform": {"os": "linux", "architecture": "arm64"}},
                {"digest": "sha256:2", "platform": {"os": "linux", "architecture": "amd64"}},
            ]
        });
        assert_eq!(
            pick_platform(&index, "amd64").unwrap(),
            ("sha256:2".to_string(), "linux/amd64".to_string())
        );
        let e = pick_platform(&index, "s390x").unwrap_err();
        assert!(e.contains("linux/arm64, linux/amd64"), "{e}");
    }
}
