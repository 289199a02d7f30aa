//! The ledger's schema, as versioned migrations for each backend. A ledger
//! records the versions applied to it (`infergate_schema`); opening one
//! applies what it lacks, in order, in one transaction, and refuses a
//! ledger newer than this infergate.

pub struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub sql: &'static str,
}

/// Created on first use; lists the migrations applied.
pub const SCHEMA_TABLE_SQLITE: &str = "CREATE TABLE IF NOT EXISTS infergate_schema (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)";

pub const SCHEMA_TABLE_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS infergate_schema (
    version     BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)";

/// Version 1: `IF NOT EXISTS` throughout, since a ledger made before
/// migrations were recorded already has its objects and takes it as
/// applied. Version 2: the hash chain (`chain`); the rows already there
/// keep no hash, and `infergate_chain` records the last of them, so a row
/// after it without one is a removed hash, not an old row.
pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        description: "entries: append-only rows, ordered by seq",
        sql: "
CREATE TABLE IF NOT EXISTS entries (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    qualification TEXT NOT NULL,
    at            TEXT NOT NULL,
    step          TEXT NOT NULL,
    runtime       TEXT,
    status        TEXT NOT NULL CHECK (status IN ('started', 'ok', 'failed', 'info')),
    detail        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_qualification ON entries (qualification, seq);
CREATE TRIGGER IF NOT EXISTS entries_no_update BEFORE UPDATE ON entries
    BEGIN SELECT RAISE(ABORT, 'the infergate ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_no_delete BEFORE DELETE ON entries
    BEGIN SELECT RAISE(ABORT, 'the infergate ledger is append-only'); END;
",
    },
    Migration {
        version: 2,
        description: "the hash chain: prev and hash on each row; the rows before it named",
        sql: "
ALTER TABLE entries ADD COLUMN prev TEXT;
ALTER TABLE entries ADD COLUMN hash TEXT;
CREATE TABLE infergate_chain (
    unchained_through INTEGER NOT NULL
);
INSERT INTO infergate_chain (unchained_through) SELECT COALESCE(MAX(seq), 0) FROM entries;
CREATE TRIGGER infergate_chain_no_update BEFORE UPDATE ON infergate_chain
    BEGIN SELECT RAISE(ABORT, 'the infergate ledger is append-only'); END;
CREATE TRIGGER infergate_chain_no_delete BEFORE DELETE ON infergate_chain
    BEGIN SELECT RAISE(ABORT, 'the infergate ledger is append-only'); END;
",
    },
];

pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        description: "entries: append-only rows, ordered by seq",
        sql: "
CREATE TABLE IF NOT EXISTS entries (
    seq           BIGSERIAL PRIMARY KEY,
    qualification TEXT NOT NULL,
    at            TEXT NOT NULL,
    step          TEXT NOT NULL,
    runtime       TEXT,
    status        TEXT NOT NULL CHECK (status IN ('started', 'ok', 'failed', 'info')),
    detail        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_qualification ON entries (qualification, seq);
CREATE OR REPLACE FUNCTION infergate_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the infergate ledger is append-only';
END $$;
DROP TRIGGER IF EXISTS entries_no_rewrite ON entries;
CREATE TRIGGER entries_no_rewrite BEFORE UPDATE OR DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION infergate_append_only();
DROP TRIGGER IF EXISTS entries_no_truncate ON entries;
CREATE TRIGGER entries_no_truncate BEFORE TRUNCATE ON entries
    FOR EACH STATEMENT EXECUTE FUNCTION infergate_append_only();
",
    },
    Migration {
        version: 2,
        description: "the hash chain: prev and hash on each row; the rows before it named",
        sql: "
ALTER TABLE entries ADD COLUMN IF NOT EXISTS prev TEXT;
ALTER TABLE entries ADD COLUMN IF NOT EXISTS hash TEXT;
CREATE TABLE IF NOT EXISTS infergate_chain (
    unchained_through BIGINT NOT NULL
);
INSERT INTO infergate_chain (unchained_through) SELECT COALESCE(MAX(seq), 0) FROM entries;
DROP TRIGGER IF EXISTS infergate_chain_no_rewrite ON infergate_chain;
CREATE TRIGGER infergate_chain_no_rewrite BEFORE UPDATE OR DELETE ON infergate_chain
    FOR EACH ROW EXECUTE FUNCTION infergate_append_only();
DROP TRIGGER IF EXISTS infergate_chain_no_truncate ON infergate_chain;
CREATE TRIGGER infergate_chain_no_truncate BEFORE TRUNCATE ON infergate_chain
    FOR EACH STATEMENT EXECUTE FUNCTION infergate_append_only();
",
    },
];

/// The migrations after `applied`, or why the ledger cannot be used.
pub fn pending(
    all: &'static [Migration],
    applied: i64,
    origin: &str,
) -> Result<&'static [Migration], String> {
    let latest = all.last().map_or(0, |m| m.version);
    if applied > latest {
        return Err(format!(
            "ledger {origin} has schema version {applied}, newer than this infergate knows ({latest}): use a newer infergate"
        ));
    }
    Ok(&all[all.iter().take_while(|m| m.version <= applied).count()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_ascend_and_pending_starts_after_the_applied() {
        for all in [SQLITE, POSTGRES] {
            assert!(all.windows(2).all(|w| w[0].version < w[1].version));
            assert_eq!(pending(all, 0, "x").unwrap().len(), all.len());
            assert!(
                pending(all, all.last().unwrap().version, "x")
                    .unwrap()
                    .is_empty()
            );
            let e = pending(all, 99, "x").err().unwrap();
            assert!(e.contains("newer than this infergate"), "{e}");
        }
    }
}
