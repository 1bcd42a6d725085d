//! The embedded store's schema: its migrations, in order, and how they are applied
//! (`PRAGMA user_version` counts those that ran; `SqliteStore::ready` refuses a database
//! newer than this build).

use anyhow::Context;
use rusqlite::{Connection, TransactionBehavior};

use super::journal::object_triggers;
use super::{dropped, journal, outbox};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE catalogs (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    properties     TEXT NOT NULL,
    storage_config TEXT NOT NULL,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    version        INTEGER NOT NULL
);
CREATE TABLE namespaces (
    catalog_id INTEGER NOT NULL REFERENCES catalogs(id),
    path       TEXT NOT NULL,   -- levels joined by U+001F
    parent     TEXT NOT NULL,   -- the parent's path; '' for top-level namespaces
    name       TEXT NOT NULL,   -- the last level
    properties TEXT NOT NULL,
    PRIMARY KEY (catalog_id, path)
) WITHOUT ROWID;
CREATE UNIQUE INDEX namespaces_children ON namespaces (catalog_id, parent, name);
CREATE TABLE objects (
    catalog_id        INTEGER NOT NULL,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('table', 'view')),
    metadata_location TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    location          TEXT NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name),
    FOREIGN KEY (catalog_id, namespace) REFERENCES namespaces (catalog_id, path)
);
CREATE INDEX objects_by_kind ON objects (catalog_id, namespace, kind, name);
CREATE INDEX objects_by_location ON objects (location) WHERE kind = 'table';
CREATE TABLE metrics_reports (
    id          INTEGER PRIMARY KEY,
    catalog_id  INTEGER NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    report      TEXT NOT NULL,
    received_ms INTEGER NOT NULL
);
"#,
    // Views join the location-overlap check: purging a table must never delete files of a
    // view placed inside it.
    r#"
DROP INDEX objects_by_location;
CREATE INDEX objects_by_location ON objects (location);
"#,
    // Idempotency keys of the REST spec, written in the same transaction as the change.
    r#"
CREATE TABLE idempotency_keys (
    key         TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    expires_ms  INTEGER NOT NULL
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_ms);
"#,
    // The security model (principals, roles, grants, signing keys): one versioned row.
    r#"
CREATE TABLE security (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    version  INTEGER NOT NULL,
    document TEXT NOT NULL
);
"#,
    // The change-event outbox.
    outbox::MIGRATION,
    // Dropped tables and views, kept for undrop.
    dropped::MIGRATION,
    // Purges still to finish.
    dropped::PURGES_MIGRATION,
    // New metadata files not yet synced.
    journal::MIGRATION,
    // ... kept by reference to the rows that hold their text.
    journal::BY_REFERENCE_MIGRATION,
    // Namespaces as a rowid table, found through an index that holds only their keys. In
    // the WITHOUT ROWID layout every cell of the key's b-tree held the whole row, so once
    // a namespace's properties overflowed a page, each lookup (an existence check, the
    // objects' foreign key check, a list's parent check) read all of its properties at
    // every cell the search compared, and interior pages held copies of them too.
    r#"
CREATE TABLE namespaces_by_rowid (
    id         INTEGER PRIMARY KEY,
    catalog_id INTEGER NOT NULL REFERENCES catalogs(id),
    path       TEXT NOT NULL,
    parent     TEXT NOT NULL,
    name       TEXT NOT NULL,
    properties TEXT NOT NULL,
    UNIQUE (catalog_id, path)
);
INSERT INTO namespaces_by_rowid (catalog_id, path, parent, name, properties)
    SELECT catalog_id, path, parent, name, properties FROM namespaces ORDER BY catalog_id, path;
DROP TABLE namespaces;
ALTER TABLE namespaces_by_rowid RENAME TO namespaces;
CREATE UNIQUE INDEX namespaces_children ON namespaces (catalog_id, parent, name);
"#,
    // Polaris's generic tables join tables and views. A CHECK constraint cannot change in
    // place: the table is rebuilt, and the journal's triggers on it made again.
    concat!(
        r#"
CREATE TABLE objects_new (
    catalog_id        INTEGER NOT NULL,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('table', 'view', 'generic-table')),
    metadata_location TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    location          TEXT NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name),
    FOREIGN KEY (catalog_id, namespace) REFERENCES namespaces (catalog_id, path)
);
INSERT INTO objects_new (catalog_id, namespace, name, kind, metadata_location, metadata, location)
    SELECT catalog_id, namespace, name, kind, metadata_location, metadata, location FROM objects;
DROP TABLE objects;
ALTER TABLE objects_new RENAME TO objects;
CREATE INDEX objects_by_kind ON objects (catalog_id, namespace, kind, name);
CREATE INDEX objects_by_location ON objects (location);
"#,
        object_triggers!()
    ),
    // Polaris's policies and their attachments: one versioned document per catalog.
    r#"
CREATE TABLE policies (
    catalog_id INTEGER PRIMARY KEY REFERENCES catalogs (id),
    version    INTEGER NOT NULL,
    document   TEXT NOT NULL
);
"#,
    // EXTERNAL catalogs (Polaris's static facades), and the timestamp of the last
    // notification admitted for each of their tables: kept after a drop, so that a late
    // notification cannot bring the table back.
    r#"
ALTER TABLE catalogs ADD COLUMN catalog_type TEXT NOT NULL DEFAULT 'INTERNAL'
    CHECK (catalog_type IN ('INTERNAL', 'EXTERNAL'));
CREATE TABLE notification_stamps (
    catalog_id   INTEGER NOT NULL REFERENCES catalogs (id),
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name)
);
"#,
    // Locations held for staged creates while their vended credentials live.
    super::reserved::MIGRATION,
    // Holds whose staged create has landed (they no longer serve its sign/credentials),
    // and when each was staged (extensions stop a day after).
    super::reserved::COMMITTED_MIGRATION,
    // Dropped objects by location: a purge never reaches one kept for undrop.
    dropped::BY_LOCATION_MIGRATION,
];

pub(super) fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    // A migration may rebuild a table that others reference (SQLite's way to change a
    // table's layout), which foreign key enforcement forbids mid-way; the check before the
    // commit makes sure the rebuilt rows still satisfy every key. The setting cannot change
    // inside a transaction, hence around it.
    conn.pragma_update(None, "foreign_keys", false)?;
    let migrated = apply_migrations(conn);
    conn.pragma_update(None, "foreign_keys", true)?;
    migrated
}

fn apply_migrations(conn: &mut Connection) -> anyhow::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
    let applied: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(migration)
            .with_context(|| format!("applying migration {}", i + 1))?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
    }
    let violations: i64 =
        tx.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })?;
    anyhow::ensure!(
        violations == 0,
        "the migrated database breaks {violations} foreign keys"
    );
    tx.commit()?;
    Ok(())
}
