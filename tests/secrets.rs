//! An API key given to infergate never appears in anything it writes or prints.

mod qualify_support;
mod support;

use qualify_support::files_under;

use std::process::Command;

const KEY: &str = "sk-infergate-test-7f3a9c2e5b1d";

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn the_api_key_is_never_written_or_printed() {
    let engine = support::engine("baseline");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"secrets\"\n[[cell]]\nname = \"c\"\nprompt_tokens = 200\nmax_tokens = 8\nrequests = 3\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .env("INFERGATE_TEST_API_KEY", KEY)
        .args([
            "run",
            "--api-key-env",
            "INFERGATE_TEST_API_KEY",
            "--target",
            &engine.base_url,
            "--suite",
        ])
        .arg(&suite)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    // A failing run prints errors: they must not carry the key either.
    let bad = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .env("INFERGATE_TEST_API_KEY", KEY)
        .args([
            "run",
            "--api-key-env",
            "INFERGATE_TEST_API_KEY",
            "--target",
            "http://127.0.0.1:9",
            "--suite",
        ])
        .arg(&suite)
        .arg("--out")
        .arg(dir.path().join("out-bad"))
        .output()
        .unwrap();
    assert!(!bad.status.success());

    let mut files = Vec::new();
    files_under(dir.path(), &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("run.json"))
            && files.iter().any(|f| f.ends_with("journal.jsonl"))
    );
    for f in &files {
        if f == &suite {
            continue;
        }
        assert!(
            !contains(&std::fs::read(f).unwrap(), KEY),
            "key found in {}",
            f.display()
        );
    }
    for (name, bytes) in [
        ("stdout", &run.stdout),
        ("stderr", &run.stderr),
        ("failing stdout", &bad.stdout),
        ("failing stderr", &bad.stderr),
    ] {
        assert!(!contains(bytes, KEY), "key printed on {name}");
    }
    // The artifact records where the key came from, not the key.
    let art = std::fs::read_to_string(out.join("run.json")).unwrap();
    assert!(art.contains("INFERGATE_TEST_API_KEY"));
}

/// The test server's password, from the pgpass file scripts/setup-postgres.sh wrote.
fn pg_password() -> (String, String) {
    let admin = std::env::var("INFERGATE_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!("INFERGATE_TEST_POSTGRES is not set: run scripts/test.sh, or export what scripts/setup-postgres.sh prints")
    });
    let pgpass = std::env::var("PGPASSFILE").expect("PGPASSFILE, from scripts/setup-postgres.sh");
    let line = std::fs::read_to_string(pgpass).unwrap();
    let password = line.trim().rsplit(':').next().unwrap().to_string();
    assert!(password.len() >= 16, "a real password");
    (admin, password)
}

#[test]
fn the_ledger_password_is_never_written_or_printed() {
    let (admin, password) = pg_password();
    let dir = tempfile::tempdir().unwrap();
    let db = format!("ig_secrets_{}", std::process::id());
    let made = Command::new("psql")
        .args(["-X", "-q", &admin, "-c", &format!("CREATE DATABASE {db}")])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let url = format!("{}/{db}", admin.rsplit_once('/').unwrap().0);
    let sqlite = dir.path().join("mine.sqlite");
    let infergate = |args: &[&str], pw: &str| {
        // The password only in PGPASSWORD: no pgpass file, no ~/.pgpass.
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .env_remove("PGPASSFILE")
            .env("HOME", dir.path())
            .env("PGPASSWORD", pw)
            .args(args)
            .output()
            .unwrap()
    };
    // `status` never creates a ledger: made here, then read.
    infergate::runtime::ledger::Ledger::open(&sqlite).unwrap();
    let init = infergate(&["status", "--ledger", sqlite.to_str().unwrap()], &password);
    let migrate = infergate(
        &["ledger", "migrate", sqlite.to_str().unwrap(), &url],
        &password,
    );
    assert!(
        migrate.status.success(),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    let status = infergate(&["status", "--ledger", &url, "--json"], &password);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let wrong = infergate(&["status", "--ledger", &url], "not-the-password-3b9e");
    assert!(!wrong.status.success());
    assert!(!contains(&wrong.stderr, "not-the-password-3b9e"));
    assert!(
        contains(&wrong.stderr, "password authentication failed"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    let in_url = url.replacen("infergate@", &format!("infergate:{password}@"), 1);
    let refused = infergate(&["status", "--ledger", &in_url], "");
    assert!(!refused.status.success());
    assert!(contains(&refused.stderr, "PGPASSWORD"));
    for (name, out) in [
        ("init", &init),
        ("migrate", &migrate),
        ("status", &status),
        ("wrong", &wrong),
        ("refused", &refused),
    ] {
        assert!(
            !contains(&out.stdout, &password),
            "password printed on {name} stdout"
        );
        assert!(
            !contains(&out.stderr, &password),
            "password printed on {name} stderr"
        );
    }
    let mut files = Vec::new();
    files_under(dir.path(), &mut files);
    for f in &files {
        assert!(
            !contains(&std::fs::read(f).unwrap(), &password),
            "password in {}",
            f.display()
        );
    }
}
