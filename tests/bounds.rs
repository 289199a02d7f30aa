//! Inputs a suite names that are not regular files, or are too large: each
//! refused at once, naming the file, the field and the limit, before any
//! server is asked anything.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use infergate::config::limits::MAX_INPUT_FILE_BYTES;
use infergate::config::suite::Suite;

/// A suite whose one workload asks for structured output against `schema`.
fn suite_with_schema(dir: &Path, schema: &Path) -> PathBuf {
    let text = format!(
        r#"name = "bounds"

[[turnover]]
name = "json-answers"
contract = "reference"
prompt = "task"
generate = {{ kind = "arithmetic" }}
response_format = {{ schema = {schema:?} }}
requests = 4
concurrency = 1
max_tokens = 24
seed = 3
"#,
        schema = schema.display().to_string()
    );
    let p = dir.join("suite.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The suite's load error, or a failure if it takes more than a few seconds
/// (a FIFO read would block it until killed).
fn load_error(suite: PathBuf) -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(
            Suite::load(&suite)
                .map(|_| ())
                .map_err(|e| format!("{e:#}")),
        );
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(r) => r.expect_err("the suite was accepted"),
        Err(_) => panic!("reading the suite did not finish within 10 s"),
    }
}

fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok, "mkfifo {}", p.display());
}

#[test]
fn a_fifo_as_schema_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("schema.json");
    mkfifo(&fifo);
    let e = load_error(suite_with_schema(d.path(), &fifo));
    assert!(
        e.contains("response_format.schema") && e.contains("schema.json") && e.contains("a FIFO"),
        "{e}"
    );
}

#[test]
fn a_device_as_schema_is_refused_unread() {
    let d = tempfile::tempdir().unwrap();
    let e = load_error(suite_with_schema(d.path(), Path::new("/dev/zero")));
    assert!(
        e.contains("response_format.schema")
            && e.contains("/dev/zero")
            && e.contains("a character device"),
        "{e}"
    );
}

#[test]
fn an_oversized_schema_is_refused_with_the_limit_named() {
    let d = tempfile::tempdir().unwrap();
    let big = d.path().join("big.json");
    // Sparse: the size is set without writing 64 MiB.
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(MAX_INPUT_FILE_BYTES + 1).unwrap();
    let e = load_error(suite_with_schema(d.path(), &big));
    assert!(
        e.contains("response_format.schema")
            && e.contains("big.json")
            && e.contains(&MAX_INPUT_FILE_BYTES.to_string()),
        "{e}"
    );
}

#[test]
fn a_fifo_as_tokenizer_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("tokenizer.json");
    mkfifo(&fifo);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = infergate::measure::tokenizer::TokenizerFile::load(&fifo);
        let _ = tx.send(r.map(|_| ()).map_err(|e| format!("{e:#}")));
    });
    let e = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("reading the tokenizer did not finish within 10 s")
        .expect_err("a FIFO was accepted as a tokenizer");
    assert!(e.contains("tokenizer") && e.contains("a FIFO"), "{e}");
}
