//! What a user installs without Rust, as `scripts/build-dist.sh` leaves it in
//! `dist/` (the install lane: `INFERGATE_TEST_DIST=1 scripts/test.sh`, which
//! builds it first; `#[ignore]`d outside it). The wheel installs into a fresh
//! virtual environment without the network, and its `infergate` measures the
//! real reference engine; the OCI image does the same on the host network.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist")
}

fn version() -> String {
    format!("infergate {}", env!("CARGO_PKG_VERSION"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// An ad-hoc run's arguments against `url`, written to `out`.
fn small_run(url: &str, out: &str) -> Vec<String> {
    [
        "run",
        "--target",
        url,
        "--prompt-tokens",
        "128",
        "--max-tokens",
        "8",
        "--requests",
        "4",
        "--out",
        out,
    ]
    .map(String::from)
    .to_vec()
}

/// A run directory holds its artifact and one journal line per request.
fn assert_ran(dir: &Path) {
    assert!(dir.join("run.json").is_file(), "{}", dir.display());
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 4, "{journal}");
    assert!(
        journal.lines().all(|l| l.contains("\"outcome\":\"ok\"")),
        "{journal}"
    );
}

/// `bin`'s small ad-hoc run against the reference engine, into `out`.
fn run_and_check(bin: &Path, out: &Path) {
    let engine = support::engine("baseline");
    let r = Command::new(bin)
        .args(small_run(&engine.base_url, out.to_str().unwrap()))
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", text(&r));
    assert_ran(out);
}

#[test]
#[ignore = "the install lane: INFERGATE_TEST_DIST=1 scripts/test.sh"]
fn the_wheel_installs_without_the_network_and_measures_the_reference_engine() {
    let wheel = std::fs::read_dir(dist())
        .expect("dist/ (scripts/build-dist.sh)")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("a wheel in dist/");
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let ok = |o: Output| {
        assert!(o.status.success(), "{}", text(&o));
        o
    };
    ok(Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap());
    ok(Command::new(venv.join("bin/pip"))
        .args(["install", "--no-index", "--quiet"])
        .arg(&wheel)
        .output()
        .unwrap());
    let bin = venv.join("bin/infergate");
    let v = ok(Command::new(&bin).arg("--version").output().unwrap());
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), version());

    run_and_check(&bin, &tmp.path().join("run"));
    // The shell completions and the manual page came with it.
    let man = ok(Command::new(&bin).arg("man").output().unwrap());
    assert!(String::from_utf8_lossy(&man.stdout).contains(".TH infergate"));
    let bash = ok(Command::new(&bin)
        .args(["completions", "bash"])
        .output()
        .unwrap());
    assert!(String::from_utf8_lossy(&bash.stdout).contains("qualify"));
}

#[test]
#[ignore = "the install lane: INFERGATE_TEST_DIST=1 scripts/test.sh"]
fn the_static_binary_and_its_image_measure_the_reference_engine() {
    let bin = dist().join(format!(
        "infergate-{}-x86_64-linux",
        env!("CARGO_PKG_VERSION")
    ));
    // Statically linked: the dynamic loader has no library to list.
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    assert!(!text(&ldd).contains("=>"), "{}", text(&ldd));
    let engine = support::engine("baseline");
    let tmp = tempfile::tempdir().unwrap();
    run_and_check(&bin, &tmp.path().join("static"));

    // The image: the binary alone, on the host network, writing into a
    // directory of the host.
    let image = format!("infergate:{}", env!("CARGO_PKG_VERSION"));
    let v = Command::new("docker")
        .args(["run", "--rm", &image, "--version"])
        .output()
        .expect("docker (scripts/setup-docker.sh)");
    assert!(v.status.success(), "{}", text(&v));
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), version());
    let mount = format!("{}:/work", tmp.path().display());
    let mut args = vec![
        "run".to_string(),
        "--rm".into(),
        "--network".into(),
        "host".into(),
        "-v".into(),
        mount,
        image,
    ];
    args.extend(small_run(&engine.base_url, "/work/image"));
    let r = Command::new("docker").args(&args).output().unwrap();
    assert!(r.status.success(), "{}", text(&r));
    assert_ran(&tmp.path().join("image"));
}
