//! Where the decision ledger lives: a SQLite file or a PostgreSQL database,
//! as a plan, `--ledger` or `$INFERGATE_LEDGER` names it. Parsed here, with
//! the configuration, so a bad location (or a password in a URL) is refused
//! when the plan is read; the ledger itself (`runtime::ledger`) opens it.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

/// Environment variable overriding the ledger's location.
pub const LEDGER_ENV: &str = "INFERGATE_LEDGER";

/// Where a ledger lives: a SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    /// A `postgres://` URL without a password.
    Postgres(String),
}

impl Location {
    /// `postgres://…` or `postgresql://…`, or a libpq `key=value` connection
    /// string (`host=… dbname=…`); `sqlite://PATH`; else a file path.
    pub fn parse(s: &str) -> Result<Location> {
        let s = s.trim();
        if s.is_empty() {
            bail!("the ledger location is empty");
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") || is_libpq_keywords(s) {
            // Refused here, before anything prints or records it.
            parse_postgres_url(s)?;
            return Ok(Location::Postgres(s.to_string()));
        }
        Ok(Location::Sqlite(PathBuf::from(
            s.strip_prefix("sqlite://").unwrap_or(s),
        )))
    }

    /// `$INFERGATE_LEDGER`, else `$XDG_DATA_HOME/infergate/ledger.sqlite`,
    /// else `~/.local/share/infergate/ledger.sqlite`.
    pub fn default_location() -> Result<Location> {
        if let Some(p) = std::env::var_os(LEDGER_ENV).filter(|p| !p.is_empty()) {
            return Location::parse(&p.to_string_lossy());
        }
        let data = match std::env::var_os("XDG_DATA_HOME").filter(|p| !p.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => {
                let home = std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .with_context(|| {
                        format!(
                            "neither {LEDGER_ENV}, XDG_DATA_HOME nor HOME is set; pass --ledger"
                        )
                    })?;
                PathBuf::from(home).join(".local/share")
            }
        };
        Ok(Location::Sqlite(data.join("infergate/ledger.sqlite")))
    }

    /// Whether there is a ledger here to read: a SQLite file that exists,
    /// or any database (the server says when it is not there).
    pub fn exists(&self) -> bool {
        match self {
            Location::Sqlite(p) => p.is_file(),
            Location::Postgres(_) => true,
        }
    }

    /// Whether `other` is this very ledger: the same URL, or one SQLite file
    /// however it is named (`L.sqlite`, `./L.sqlite`, a link), known by its
    /// device and inode rather than by how its path is spelt.
    pub fn same_ledger(&self, other: &Location) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self, other) {
            (Location::Sqlite(a), Location::Sqlite(b)) => {
                match (std::fs::metadata(a), std::fs::metadata(b)) {
                    (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
                    // A file not there yet is no other file's second name.
                    _ => a == b,
                }
            }
            (a, b) => a == b,
        }
    }

    /// Shared by several machines: its locks must live in the database.
    pub fn is_shared(&self) -> bool {
        matches!(self, Location::Postgres(_))
    }

    /// A relative SQLite path made absolute (recorded, so `decide` finds it
    /// from anywhere); a URL as it is.
    pub fn absolute(&self) -> Result<Location> {
        Ok(match self {
            Location::Sqlite(p) if p.is_relative() => Location::Sqlite(
                std::env::current_dir()
                    .context("reading the current directory")?
                    .join(p),
            ),
            other => other.clone(),
        })
    }
}

/// The keywords of a libpq connection string (`host=db port=5432 …`).
const LIBPQ_KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "sslmode",
    "sslcert",
    "sslkey",
    "sslrootcert",
    "target_session_attrs",
    "service",
    "channel_binding",
    "keepalives",
];

/// Whether `s` reads as a libpq `key=value` connection string: its first
/// word is a libpq keyword followed by `=`. Such a string is never a SQLite
/// path (write `sqlite://host=x` or `./host=x` for a file of that name).
fn is_libpq_keywords(s: &str) -> bool {
    let Some((key, _)) = s.split_once('=') else {
        return false;
    };
    LIBPQ_KEYWORDS.contains(&key.trim())
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            // Parsing refused any password (in the URL or its options).
            Location::Postgres(u) => write!(f, "{u}"),
        }
    }
}

impl std::str::FromStr for Location {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Location> {
        Location::parse(s)
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Location {
        Location::Sqlite(p)
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Location {
        Location::Sqlite(p.to_path_buf())
    }
}

impl serde::Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Location {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Location, D::Error> {
        let s = String::deserialize(d)?;
        Location::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The settings a `postgres://` URL or libpq `key=value` string names,
/// refused when it holds a password:
/// the URL is printed and recorded. Errors show it with credentials removed.
pub fn parse_postgres_url(url: &str) -> Result<postgres::Config> {
    let shown = crate::util::redact_url(url);
    let config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
        anyhow!(
            "ledger URL {shown}: {}",
            crate::util::redact(&e.to_string())
        )
    })?;
    if config.get_password().is_some() {
        bail!(
            "ledger URL {shown}: holds a password, which would be printed and recorded; put it in PGPASSWORD or a pgpass file instead"
        );
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_urls_and_paths_and_never_show_a_password() {
        assert_eq!(
            Location::parse("postgres://ig@127.0.0.1:5432/ledger").unwrap(),
            Location::Postgres("postgres://ig@127.0.0.1:5432/ledger".into())
        );
        assert_eq!(
            Location::parse("sqlite:///tmp/l.sqlite").unwrap(),
            Location::Sqlite("/tmp/l.sqlite".into())
        );
        assert_eq!(
            Location::parse("l.sqlite").unwrap(),
            Location::Sqlite("l.sqlite".into())
        );
        let e = Location::parse("postgres://ig:s3cret@127.0.0.1/ledger")
            .unwrap_err()
            .to_string();
        assert!(e.contains("PGPASSWORD") && !e.contains("s3cret"), "{e}");
        let l: Location = serde_json::from_str("\"/a/b.sqlite\"").unwrap();
        assert_eq!(l, Location::Sqlite("/a/b.sqlite".into()));
    }
}
