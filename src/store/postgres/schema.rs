//! The PostgreSQL schema: versioned migrations, applied in order, each once
//! (`floe_migrations` records them; `PostgresStore::migrate` applies them).

pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE catalogs (
    id             BIGINT PRIMARY KEY,
    name           TEXT COLLATE "C" NOT NULL UNIQUE,
    properties     TEXT NOT NULL,
    storage_config TEXT NOT NULL,
    created_ms     BIGINT NOT NULL,
    updated_ms     BIGINT NOT NULL,
    version        BIGINT NOT NULL
);
-- Every catalog has a root namespace row (path '', parent NULL), so that the parent of
-- every namespace, top-level ones included, is enforced by a foreign key.
CREATE TABLE namespaces (
    catalog_id BIGINT NOT NULL REFERENCES catalogs (id),
    path       TEXT COLLATE "C" NOT NULL,
    parent     TEXT COLLATE "C",
    name       TEXT COLLATE "C" NOT NULL,
    properties TEXT NOT NULL,
    PRIMARY KEY (catalog_id, path),
    FOREIGN KEY (catalog_id, parent) REFERENCES namespaces (catalog_id, path)
);
CREATE UNIQUE INDEX namespaces_children ON namespaces (catalog_id, parent, name);
CREATE TABLE objects (
    catalog_id        BIGINT NOT NULL,
    namespace         TEXT COLLATE "C" NOT NULL,
    name              TEXT COLLATE "C" NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('table', 'view')),
    metadata_location TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    location          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name),
    FOREIGN KEY (catalog_id, namespace) REFERENCES namespaces (catalog_id, path)
);
CREATE INDEX objects_by_kind ON objects (catalog_id, namespace, kind, name);
CREATE INDEX objects_by_location ON objects (location);
CREATE TABLE metrics_reports (
    id          BIGSERIAL PRIMARY KEY,
    catalog_id  BIGINT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    report      TEXT NOT NULL,
    received_ms BIGINT NOT NULL
);
"#,
    // Idempotency keys of the REST spec, written in the same transaction as the change.
    r#"
CREATE TABLE idempotency_keys (
    key         TEXT COLLATE "C" PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    expires_ms  BIGINT NOT NULL
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_ms);
"#,
    // The security model (principals, roles, grants, signing keys): one versioned row.
    r#"
CREATE TABLE security (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    version  BIGINT NOT NULL,
    document TEXT NOT NULL
);
"#,
    // The change-event outbox.
    super::outbox::MIGRATION,
    // Dropped tables and views, kept for undrop.
    super::dropped::MIGRATION,
    // Purges still to finish.
    super::dropped::PURGES_MIGRATION,
    // Polaris's generic tables join tables and views.
    r#"
ALTER TABLE objects DROP CONSTRAINT objects_kind_check;
ALTER TABLE objects ADD CONSTRAINT objects_kind_check
    CHECK (kind IN ('table', 'view', 'generic-table'));
"#,
    // Polaris's policies and their attachments: one versioned document per catalog.
    r#"
CREATE TABLE policies (
    catalog_id BIGINT PRIMARY KEY REFERENCES catalogs (id),
    version    BIGINT NOT NULL,
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
    catalog_id   BIGINT NOT NULL REFERENCES catalogs (id),
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    timestamp_ms BIGINT NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name)
);
"#,
    // Locations held for staged creates while their vended credentials live.
    super::reserved::MIGRATION,
    // Holds whose staged create has landed (they no longer serve its sign/credentials),
    // and when each was staged (extensions stop a day after).
    super::reserved::COMMITTED_MIGRATION,
    // Dropped objects by location: a purge never reaches one kept for undrop.
    super::dropped::BY_LOCATION_MIGRATION,
];
