//! Tags resolved to digests against a real OCI distribution registry on
//! loopback (Debian's `docker-registry`, started by `scripts/test.sh` through
//! `scripts/setup-registry.sh`, its address in INFERGATE_TEST_REGISTRY).
//! Each test pushes its own images over the registry's HTTP API (blobs, then
//! manifests), each build's content different, so a tag that moves names a
//! new digest.

use infergate::driver::registry::{self, ImageName, RegistryError};
use sha2::{Digest, Sha256};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

fn registry_host() -> String {
    std::env::var("INFERGATE_TEST_REGISTRY").expect(
        "INFERGATE_TEST_REGISTRY is unset: scripts/test.sh starts a registry on loopback (scripts/setup-registry.sh); run that, or export what it prints",
    )
}

fn sha256(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// One repository of the test registry, pushed to over its HTTP API.
struct Repo {
    host: String,
    name: String,
    http: reqwest::Client,
}

impl Repo {
    fn new(name: &str) -> Repo {
        // Unique per run: the registry may outlive one test binary.
        let nonce = std::process::id();
        Repo {
            host: registry_host(),
            name: format!("infergate-test/{name}-{nonce}"),
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, rest: &str) -> String {
        format!("http://{}/v2/{}/{rest}", self.host, self.name)
    }

    async fn blob(&self, bytes: &[u8]) -> serde_json::Value {
        let digest = sha256(bytes);
        let start = self
            .http
            .post(self.url("blobs/uploads/"))
            .send()
            .await
            .unwrap();
        assert_eq!(start.status().as_u16(), 202, "upload started");
        let location = start.headers()["location"].to_str().unwrap().to_string();
        let location = if location.starts_with('/') {
            format!("http://{}{location}", self.host)
        } else {
            location
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = self
            .http
            .put(format!("{location}{sep}digest={digest}"))
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(put.status().as_u16(), 201, "blob {digest} stored");
        serde_json::json!({"digest": digest, "size": bytes.len()})
    }

    /// An image manifest for `arch` whose config carries `marker`: the
    /// manifest's bytes and their digest.
    async fn image(&self, arch: &str, marker: &str) -> (Vec<u8>, String) {
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": arch, "os": "linux",
            "config": {"Labels": {"build": marker}},
            "rootfs": {"type": "layers", "diff_ids": []},
        }))
        .unwrap();
        let layer = format!("layer of build {marker}").into_bytes();
        let mut c = self.blob(&config).await;
        c["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
        let mut l = self.blob(&layer).await;
        l["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": c, "layers": [l],
        }))
        .unwrap();
        let digest = sha256(&manifest);
        self.put_manifest(&digest, OCI_MANIFEST, &manifest).await;
        (manifest, digest)
    }

    async fn put_manifest(&self, reference: &str, media_type: &str, bytes: &[u8]) {
        let r = self
            .http
            .put(self.url(&format!("manifests/{reference}")))
            .header("content-type", media_type)
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        assert_eq!(
            status,
            201,
            "manifest {reference}: {}",
            r.text().await.unwrap()
        );
    }

    fn name(&self, reference: &str) -> ImageName {
        let sep = if reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        ImageName::parse(&format!("{}/{}{sep}{reference}", self.host, self.name)).unwrap()
    }
}

#[tokio::test]
async fn a_tag_resolves_to_the_digest_of_its_bytes_and_follows_a_push() {
    let repo = Repo::new("engine");
    let (m1, d1) = repo.image("amd64", "build-1").await;
    repo.put_manifest("nightly", OCI_MANIFEST, &m1).await;
    let r = registry::resolve(&repo.name("nightly"), "amd64")
        .await
        .unwrap();
    assert_eq!(r.digest, d1);
    assert_eq!(r.tag.as_deref(), Some("nightly"));
    assert_eq!(r.media_type, OCI_MANIFEST);
    assert_eq!(r.platform_digest, None);
    assert_eq!(r.pinned(), format!("{}/{}@{d1}", repo.host, repo.name));

    // The tag moves to a new build: a new digest; the old one still resolves.
    let (m2, d2) = repo.image("amd64", "build-2").await;
    assert_ne!(d1, d2, "each build differs in content");
    repo.put_manifest("nightly", OCI_MANIFEST, &m2).await;
    let r = registry::resolve(&repo.name("nightly"), "amd64")
        .await
        .unwrap();
    assert_eq!(r.digest, d2);
    let by_digest = registry::resolve(&repo.name(&d1), "amd64").await.unwrap();
    assert_eq!((by_digest.digest, by_digest.tag), (d1, None));

    // An unknown tag: the registry's 404, named.
    let e = registry::resolve(&repo.name("no-such-tag"), "amd64")
        .await
        .unwrap_err();
    assert!(
        matches!(e, RegistryError::Status { status: 404, .. }),
        "{e}"
    );
    assert!(e.to_string().contains(":no-such-tag"), "{e}");
}

#[tokio::test]
async fn an_index_resolves_to_its_own_digest_and_this_hosts_platform_manifest() {
    let repo = Repo::new("multi");
    let (_, amd) = repo.image("amd64", "multi-amd64").await;
    let (_, arm) = repo.image("arm64", "multi-arm64").await;
    let entry = |digest: &str, arch: &str| {
        serde_json::json!({
            "mediaType": OCI_MANIFEST, "digest": digest, "size": 1,
            "platform": {"os": "linux", "architecture": arch},
        })
    };
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [entry(&arm, "arm64"), entry(&amd, "amd64")],
    }))
    .unwrap();
    repo.put_manifest("v1", OCI_INDEX, &index).await;

    for (arch, want) in [("amd64", &amd), ("arm64", &arm)] {
        let r = registry::resolve(&repo.name("v1"), arch).await.unwrap();
        assert_eq!(
            r.digest,
            sha256(&index),
            "the index's digest is what a pull takes"
        );
        assert_eq!(r.media_type, OCI_INDEX);
        assert_eq!(r.platform_digest.as_ref(), Some(want), "{arch}");
        assert_eq!(r.platform.as_deref(), Some(&*format!("linux/{arch}")));
    }
    let e = registry::resolve(&repo.name("v1"), "s390x")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no linux/s390x image"), "{e}");
    assert!(e.to_string().contains("linux/arm64, linux/amd64"), "{e}");
}

#[tokio::test]
async fn the_command_prints_the_pinned_name_a_plan_takes() {
    let repo = Repo::new("cli");
    let (m, d) = repo.image("amd64", "cli-build").await;
    repo.put_manifest("stable", OCI_MANIFEST, &m).await;
    let image = format!("{}/{}:stable", repo.host, repo.name);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["resolve", &image, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["digest"], d);
    assert_eq!(v["tag"], "stable");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["resolve", "engine:stable"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("registry host"), "{err}");
}

/// What the fault proxy does to each answer.
#[derive(Clone, Copy)]
enum Fault {
    /// The registry's answer, with its `Docker-Content-Digest` changed.
    WrongDigestHeader,
    /// A 500 instead, the registry not asked.
    ServerError,
}

/// A fault-injecting proxy in front of the real registry (one request per
/// connection); its `host:port`.
fn fault_proxy(upstream: &str, fault: Fault) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let upstream = upstream.to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut client) = conn else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match client.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let answer = match fault {
                Fault::ServerError => {
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\nConnection: close\r\n\r\noops!"
                        .to_vec()
                }
                Fault::WrongDigestHeader => {
                    // One request per upstream connection, read to its end.
                    let text = String::from_utf8_lossy(&request);
                    let head: Vec<&str> = text
                        .split("\r\n")
                        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                        .collect();
                    let request = head.join("\r\n").replacen("\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1);
                    let mut up = std::net::TcpStream::connect(&upstream).unwrap();
                    up.write_all(request.as_bytes()).unwrap();
                    let mut answer = Vec::new();
                    up.read_to_end(&mut answer).unwrap();
                    let text = String::from_utf8_lossy(&answer).into_owned();
                    let lower = text.to_ascii_lowercase();
                    match lower.find("docker-content-digest: sha256:") {
                        Some(i) => {
                            let at = i + "docker-content-digest: sha256:".len();
                            let c = if &text[at..at + 1] == "0" { "1" } else { "0" };
                            format!("{}{c}{}", &text[..at], &text[at + 1..]).into_bytes()
                        }
                        None => answer,
                    }
                }
            };
            let _ = client.write_all(&answer);
        }
    });
    addr
}

#[tokio::test]
async fn a_digest_header_that_does_not_match_the_bytes_and_a_failing_or_absent_registry_are_named()
{
    let repo = Repo::new("faults");
    let (m, d) = repo.image("amd64", "faults-build").await;
    repo.put_manifest("v1", OCI_MANIFEST, &m).await;
    let through = |host: &str| ImageName::parse(&format!("{host}/{}:v1", repo.name)).unwrap();

    let proxy = fault_proxy(&repo.host, Fault::WrongDigestHeader);
    let e = registry::resolve(&through(&proxy), "amd64")
        .await
        .unwrap_err();
    let RegistryError::DigestMismatch {
        computed, header, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(computed, &d, "the digest of the bytes received");
    assert_ne!(header, &d);

    let proxy = fault_proxy(&repo.host, Fault::ServerError);
    let e = registry::resolve(&through(&proxy), "amd64")
        .await
        .unwrap_err();
    assert!(
        matches!(e, RegistryError::Status { status: 500, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("HTTP 500: oops!"), "{e}");

    // Nothing listens: a bound port closed again.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let e = registry::resolve(&through(&closed), "amd64")
        .await
        .unwrap_err();
    assert!(matches!(e, RegistryError::Transport { .. }), "{e}");
    assert!(
        e.to_string().contains(&format!("manifest {closed}/")),
        "{e}"
    );
}
