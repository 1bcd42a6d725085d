//! The PostgreSQL store: stateless Floe nodes over one database.
//!
//! Designed so that unrelated requests never conflict (the failure that made Apache
//! Polaris answer 500 to concurrent creates):
//! - READ COMMITTED, no SERIALIZABLE: each write touches only its own rows. Names are
//!   unique by primary key, parents are enforced by foreign keys (so a namespace dropped
//!   while a child is created can never leave an orphan: one of the two waits and fails).
//! - Ids are random 63-bit numbers, not a shared sequence.
//! - Commits are compare-and-swap on one row (`... WHERE metadata_location = $old`).
//! - The location-overlap check takes transaction-scoped advisory locks: shared on every
//!   ancestor directory of the new location, exclusive on the location itself, so only
//!   genuinely overlapping creates queue behind each other.
//! - Serialization failures and deadlocks (40001, 40P01) are retried here with jittered
//!   backoff; a lost connection or a database that is down is `Unavailable` (503).
//!
//! Statements are sent unnamed (`query_typed`), one round trip each, so Floe also works
//! behind PgBouncer in transaction pooling mode, which cannot keep prepared statements.

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{NoTls, Row};

use super::{
    from_json, page_of, to_json, CatalogRecord, LockedObjects, ObjectKind, ObjectWrite, Page,
    PageRequest, Properties, PropertiesChange, Store, StoreError, StoreResult, StoredObject,
    CATALOG_COLUMNS,
};
use crate::catalog::ident::{Ident, Namespace};

/// Schema migrations, applied in order, each once; `floe_migrations` records them.
const MIGRATIONS: &[&str] = &[r#"
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
"#];

/// Key of the session advisory lock that serialises concurrent migrations.
const MIGRATION_LOCK: i64 = 0x466c_6f65_4d69_6772; // "FloeMigr"

/// Attempts of one store operation that keeps hitting serialization failures or
/// deadlocks.
const MAX_ATTEMPTS: u32 = 8;

/// Connection settings of the PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresSettings {
    pub url: String,
    /// Most connections this node opens.
    pub pool_size: usize,
    /// How long a request waits for a connection, or for the database to answer a
    /// connection attempt, before it fails with 503.
    pub timeout: Duration,
}

impl PostgresSettings {
    pub fn new(url: impl Into<String>) -> Self {
        PostgresSettings {
            url: url.into(),
            pool_size: 10,
            timeout: Duration::from_secs(5),
        }
    }
}

pub struct PostgresStore {
    pool: Pool,
}

/// Why one attempt of a store operation failed: a store-level answer, or an SQL error
/// that `run` classifies (retry, unavailable, internal).
enum Failure {
    Store(StoreError),
    Sql(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Self {
        Failure::Sql(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

type Attempt<T> = Result<T, Failure>;

fn is_retryable(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
    )
}

/// A database that is down, restarting or unreachable: the client may retry later.
fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        None => true, // I/O or protocol errors: the connection, not the statement, failed
        Some(code) => {
            let class = &code.code()[..2];
            // 08: connection exception, 57: operator intervention (shutdown, restart),
            // 53: insufficient resources (too many connections).
            matches!(class, "08" | "57" | "53")
        }
    }
}

fn sql_error(error: tokio_postgres::Error) -> StoreError {
    if is_unavailable(&error) {
        StoreError::Unavailable(format!("database: {error}"))
    } else {
        StoreError::Internal(anyhow::Error::new(error).context("database error"))
    }
}

fn has_code(error: &tokio_postgres::Error, code: &SqlState) -> bool {
    error.code() == Some(code)
}

/// Statement parameters with their types (`query_typed` needs them).
fn text(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::TEXT)
}

fn int8(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::INT8)
}

async fn backoff(attempt: u32) {
    use rand::Rng;
    let base_ms = 2u64.saturating_pow(attempt.min(7));
    let jitter = rand::rng().random_range(0..=base_ms);
    tokio::time::sleep(Duration::from_millis(base_ms + jitter)).await;
}

/// 64-bit FNV-1a: advisory lock keys for location prefixes. A collision only makes two
/// unrelated creates wait for each other, never lets overlapping ones through.
fn lock_key(location: &str) -> i64 {
    crate::stable_hash::fnv1a(location.bytes()) as i64
}

fn random_id() -> i64 {
    use rand::Rng;
    rand::rng().random_range(1..i64::MAX)
}

impl PostgresStore {
    /// Connects and brings the schema up to date, as `floe serve` does on start.
    pub async fn open(settings: &PostgresSettings) -> anyhow::Result<Self> {
        let store = Self::connect(settings)?;
        store.migrate().await?;
        Ok(store)
    }

    /// Builds the pool; connections are opened on demand, so this does not touch the
    /// database.
    pub fn connect(settings: &PostgresSettings) -> anyhow::Result<Self> {
        let mut config: tokio_postgres::Config =
            settings.url.parse().context("parsing the database URL")?;
        config.connect_timeout(settings.timeout);
        if config.get_application_name().is_none() {
            config.application_name("floe");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.timeout))
            .create_timeout(Some(settings.timeout))
            .recycle_timeout(Some(settings.timeout))
            .build()
            .context("building the connection pool")?;
        Ok(PostgresStore { pool })
    }

    /// Applies missing migrations; safe when several nodes run it at once (they queue on
    /// a transaction-scoped advisory lock, which, unlike a session lock, also holds
    /// behind PgBouncer in transaction mode) and when run again (applied versions are
    /// skipped). All of it is one transaction: DDL in PostgreSQL is transactional.
    pub async fn migrate(&self) -> anyhow::Result<usize> {
        let mut client = self.client().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let tx = client.transaction().await?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
             CREATE TABLE IF NOT EXISTS floe_migrations (
                 version    INTEGER PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             );"
        ))
        .await?;
        let done: i32 = tx
            .query_typed_one("SELECT COALESCE(MAX(version), 0) FROM floe_migrations", &[])
            .await?
            .get(0);
        let mut applied = 0;
        for (i, migration) in MIGRATIONS.iter().enumerate().skip(done as usize) {
            let version = i as i32 + 1;
            tx.batch_execute(&format!(
                "{migration}; INSERT INTO floe_migrations (version) VALUES ({version});"
            ))
            .await
            .with_context(|| format!("applying migration {version}"))?;
            applied += 1;
        }
        tx.commit().await?;
        Ok(applied)
    }

    async fn client(&self) -> StoreResult<Object> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(format!("database connection: {e}")))
    }

    /// Runs `attempt` on a pooled connection, retrying serialization failures and
    /// deadlocks with jittered backoff.
    async fn run<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        F: Fn(Object) -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        for n in 1..=MAX_ATTEMPTS {
            let client = self.client().await?;
            match attempt(client).await {
                Ok(value) => return Ok(value),
                Err(Failure::Store(e)) => return Err(e),
                Err(Failure::Sql(e)) if is_retryable(&e) && n < MAX_ATTEMPTS => {
                    tracing::info!(attempt = n, error = %e, "retrying a database conflict");
                    backoff(n).await;
                }
                Err(Failure::Sql(e)) => return Err(sql_error(e)),
            }
        }
        unreachable!("the loop returns on its last attempt")
    }
}

async fn catalog_id(client: &impl Queries, catalog: &str) -> Attempt<i64> {
    client
        .query_opt_typed("SELECT id FROM catalogs WHERE name = $1", &[text(&catalog)])
        .await?
        .map(|row| row.get(0))
        .ok_or_else(|| Failure::Store(StoreError::CatalogMissing(catalog.to_string())))
}

async fn namespace_exists(
    client: &impl Queries,
    catalog_id: i64,
    namespace: &Namespace,
) -> Attempt<bool> {
    let key = namespace.key();
    Ok(client
        .query_opt_typed(
            "SELECT 1 FROM namespaces WHERE catalog_id = $1 AND path = $2",
            &[int8(&catalog_id), text(&key)],
        )
        .await?
        .is_some())
}

async fn require_namespace(
    client: &impl Queries,
    catalog_id: i64,
    namespace: &Namespace,
) -> Attempt<()> {
    if namespace_exists(client, catalog_id, namespace).await? {
        Ok(())
    } else {
        Err(StoreError::NamespaceMissing(namespace.clone()).into())
    }
}

async fn object_kind_at(
    client: &impl Queries,
    catalog_id: i64,
    ident: &Ident,
) -> Attempt<Option<ObjectKind>> {
    let ns = ident.namespace.key();
    Ok(client
        .query_opt_typed(
            "SELECT kind FROM objects WHERE catalog_id = $1 AND namespace = $2 AND name = $3",
            &[int8(&catalog_id), text(&ns), text(&ident.name)],
        )
        .await?
        .and_then(|row| ObjectKind::parse(row.get(0))))
}

/// The object whose location contains `location` or lies inside it (see the SQLite store
/// for the range trick), after taking the advisory locks that make check-then-insert
/// safe between nodes.
async fn overlapping_object(
    tx: &impl Queries,
    catalog_id: i64,
    location: &str,
    ident: &Ident,
) -> Attempt<Option<Ident>> {
    let ancestors: Vec<&str> = location
        .match_indices('/')
        .map(|(i, _)| &location[..=i])
        .filter(|prefix| prefix.len() < location.len())
        .collect();
    let ancestor_keys: Vec<i64> = ancestors.iter().map(|a| lock_key(a)).collect();
    tx.query_all_typed(
        "SELECT pg_advisory_xact_lock_shared(k) FROM unnest($1::BIGINT[]) WITH ORDINALITY AS t(k, i) ORDER BY i",
        &[(&ancestor_keys, Type::INT8_ARRAY)],
    )
    .await?;
    tx.query_all_typed(
        "SELECT pg_advisory_xact_lock($1)",
        &[int8(&lock_key(location))],
    )
    .await?;
    let ns = ident.namespace.key();
    let mut candidates: Vec<String> = ancestors.iter().map(|a| a.to_string()).collect();
    candidates.push(location.to_string());
    let upper = format!("{}0", &location[..location.len() - 1]);
    let row = tx
        .query_all_typed(
            "SELECT namespace, name FROM objects
             WHERE (location = ANY($1) OR (location >= $2 AND location < $3))
               AND NOT (catalog_id = $4 AND namespace = $5 AND name = $6)
             LIMIT 1",
            &[
                (&candidates, Type::TEXT_ARRAY),
                text(&location),
                text(&upper),
                int8(&catalog_id),
                text(&ns),
                text(&ident.name),
            ],
        )
        .await?
        .into_iter()
        .next();
    Ok(row.map(|r| Ident {
        namespace: Namespace::from_key(r.get(0)),
        name: r.get(1),
    }))
}

/// Runs a list query over the children of `namespace` in one round trip, telling a
/// missing catalog or namespace from an empty list. `list_sql` sees the catalog's id as
/// `(SELECT id FROM c)`; `$1` is the catalog's name and `$2` the namespace's key.
async fn list_in_namespace(
    client: &Object,
    catalog: &str,
    namespace: &Namespace,
    list_sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Attempt<Vec<String>> {
    let sql = format!(
        "WITH c AS (SELECT id FROM catalogs WHERE name = $1)
         SELECT (SELECT id FROM c),
                $2 = '' OR EXISTS (SELECT 1 FROM namespaces WHERE catalog_id = (SELECT id FROM c) AND path = $2),
                ARRAY({list_sql})"
    );
    let row = client.query_typed_one(&sql, params).await?;
    if row.get::<_, Option<i64>>(0).is_none() {
        return Err(StoreError::CatalogMissing(catalog.to_string()).into());
    }
    if !row.get::<_, bool>(1) {
        return Err(StoreError::NamespaceMissing(namespace.clone()).into());
    }
    Ok(row.get(2))
}

fn catalog_record(row: &Row) -> StoreResult<CatalogRecord> {
    Ok(CatalogRecord {
        name: row.get(0),
        properties: from_json(row.get(1))?,
        storage_config: from_json(row.get(2))?,
        created_ms: row.get(3),
        updated_ms: row.get(4),
        version: row.get(5),
    })
}

/// SQL LIMIT for a page: one more than asked, to learn whether more follow.
fn sql_limit(page: &PageRequest) -> Option<i64> {
    page.limit.map(|l| l as i64 + 1)
}

/// The query methods shared by a pooled connection and a transaction.
trait Queries {
    async fn query_opt_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Option<Row>, tokio_postgres::Error>;
    async fn query_all_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, tokio_postgres::Error>;
    async fn execute_all_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<u64, tokio_postgres::Error>;
}

macro_rules! impl_queries {
    ($type:ty) => {
        impl Queries for $type {
            async fn query_opt_typed(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<Option<Row>, tokio_postgres::Error> {
                self.query_typed_opt(sql, params).await
            }
            async fn query_all_typed(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<Vec<Row>, tokio_postgres::Error> {
                self.query_typed(sql, params).await
            }
            async fn execute_all_typed(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<u64, tokio_postgres::Error> {
                self.execute_typed(sql, params).await
            }
        }
    };
}

impl_queries!(Object);
impl_queries!(deadpool_postgres::Transaction<'_>);

/// Applies object writes inside the caller's transaction (see `Store::commit_objects`).
async fn apply_writes(q: &impl Queries, catalog_id: i64, writes: &[ObjectWrite]) -> Attempt<()> {
    let id = catalog_id;
    // Rows are locked in one global order (as `lock_objects` does), so that concurrent
    // multi-table commits over overlapping tables queue instead of deadlocking.
    let mut ordered: Vec<&ObjectWrite> = writes.iter().collect();
    ordered.sort_by(|a, b| a.ident.cmp(&b.ident));
    for w in ordered {
        let ns = w.ident.namespace.key();
        let kind = w.kind.as_str();
        match &w.expected_metadata_location {
            None => {
                let inserted = q
                    .query_all_typed(
                        "INSERT INTO objects (catalog_id, namespace, name, kind, metadata_location, metadata, location)
                         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING 1",
                        &[
                            int8(&id),
                            text(&ns),
                            text(&w.ident.name),
                            text(&kind),
                            text(&w.metadata_location),
                            text(&w.metadata),
                            text(&w.location),
                        ],
                    )
                    .await;
                match inserted {
                    Ok(rows) if rows.is_empty() => {
                        // Taken by a table or view; a retry sees which.
                        let existing = object_kind_at(q, id, &w.ident).await?.unwrap_or(w.kind);
                        return Err(StoreError::ObjectExists {
                            ident: w.ident.clone(),
                            kind: existing,
                        }
                        .into());
                    }
                    Ok(_) => {}
                    Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                        return Err(StoreError::NamespaceMissing(w.ident.namespace.clone()).into())
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Some(expected) => {
                let updated = q
                    .execute_all_typed(
                        "UPDATE objects SET metadata_location = $6, metadata = $7, location = $8
                         WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND kind = $4
                           AND metadata_location = $5",
                        &[
                            int8(&id),
                            text(&ns),
                            text(&w.ident.name),
                            text(&kind),
                            text(expected),
                            text(&w.metadata_location),
                            text(&w.metadata),
                            text(&w.location),
                        ],
                    )
                    .await?;
                if updated == 0 {
                    return Err(match object_kind_at(q, id, &w.ident).await? {
                        Some(kind) if kind == w.kind => StoreError::Conflict,
                        _ => StoreError::ObjectMissing(w.ident.clone()),
                    }
                    .into());
                }
            }
        }
        if w.check_location {
            if let Some(other) = overlapping_object(q, id, &w.location, &w.ident).await? {
                return Err(StoreError::LocationOverlap {
                    location: w.location.clone(),
                    other,
                }
                .into());
            }
        }
    }
    Ok(())
}

/// Row locks (`SELECT ... FOR UPDATE`) on the objects of a commit that lost a race, held
/// in an open transaction on a connection of its own. Other nodes' commits to these rows
/// wait in line instead of racing. Dropped without `commit`, the connection is closed
/// rather than returned to the pool, so the transaction can never leak into other work.
struct PgLocked {
    client: Option<Object>,
    catalog_id: i64,
    current: Vec<Option<StoredObject>>,
}

impl Drop for PgLocked {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}

#[async_trait]
impl LockedObjects for PgLocked {
    fn current(&self) -> &[Option<StoredObject>] {
        &self.current
    }

    async fn commit(mut self: Box<Self>, writes: &[ObjectWrite]) -> StoreResult<()> {
        let client = self.client.as_ref().expect("a locked connection");
        let outcome = match apply_writes(client, self.catalog_id, writes).await {
            Ok(()) => client.batch_execute("COMMIT").await.map_err(Failure::Sql),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                // The transaction is over: the connection may go back to the pool.
                drop(self.client.take());
                Ok(())
            }
            Err(Failure::Store(e)) => Err(e),
            // Two locked commits over overlapping sets can still deadlock: redo it.
            Err(Failure::Sql(e)) if is_retryable(&e) => Err(StoreError::Conflict),
            Err(Failure::Sql(e)) => Err(sql_error(e)),
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> StoreResult<()> {
        self.run(|client| async move {
            client.query_typed("SELECT 1", &[]).await?;
            Ok(())
        })
        .await
    }

    async fn create_catalog(&self, catalog: &CatalogRecord) -> StoreResult<()> {
        let properties = to_json(&catalog.properties)?;
        let storage = to_json(&catalog.storage_config)?;
        self.run(|mut client| {
            let (properties, storage) = (&properties, &storage);
            async move {
                let tx = client.transaction().await?;
                let id = random_id();
                let inserted = tx
                    .query_typed(
                        "INSERT INTO catalogs (id, name, properties, storage_config, created_ms, updated_ms, version)
                         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO NOTHING RETURNING id",
                        &[
                            int8(&id),
                            text(&catalog.name),
                            text(properties),
                            text(storage),
                            int8(&catalog.created_ms),
                            int8(&catalog.updated_ms),
                            int8(&catalog.version),
                        ],
                    )
                    .await?;
                if inserted.is_empty() {
                    return Err(StoreError::CatalogExists.into());
                }
                tx.query_typed(
                    "INSERT INTO namespaces (catalog_id, path, parent, name, properties) VALUES ($1, '', NULL, '', '{}')",
                    &[int8(&id)],
                )
                .await?;
                tx.commit().await?;
                Ok(())
            }
        })
        .await
    }

    async fn get_catalog(&self, name: &str) -> StoreResult<Option<CatalogRecord>> {
        let row = self
            .run(|client| async move {
                Ok(client
                    .query_typed_opt(
                        &format!("SELECT {CATALOG_COLUMNS} FROM catalogs WHERE name = $1"),
                        &[text(&name)],
                    )
                    .await?)
            })
            .await?;
        row.as_ref().map(catalog_record).transpose()
    }

    async fn list_catalogs(&self) -> StoreResult<Vec<CatalogRecord>> {
        let rows = self
            .run(|client| async move {
                Ok(client
                    .query_typed(
                        &format!("SELECT {CATALOG_COLUMNS} FROM catalogs ORDER BY name"),
                        &[],
                    )
                    .await?)
            })
            .await?;
        rows.iter().map(catalog_record).collect()
    }

    async fn update_catalog(
        &self,
        name: &str,
        expected_version: Option<i64>,
        properties: &Properties,
        storage_config: &serde_json::Value,
        now_ms: i64,
    ) -> StoreResult<CatalogRecord> {
        let properties = to_json(properties)?;
        let storage = to_json(storage_config)?;
        let row = self
            .run(|client| {
                let (properties, storage) = (&properties, &storage);
                async move {
                    let updated = client
                        .query_typed_opt(
                            &format!(
                                "UPDATE catalogs SET properties = $2, storage_config = $3, updated_ms = $4, version = version + 1
                                 WHERE name = $1 AND ($5::BIGINT IS NULL OR version = $5)
                                 RETURNING {CATALOG_COLUMNS}"
                            ),
                            &[
                                text(&name),
                                text(properties),
                                text(storage),
                                int8(&now_ms),
                                int8(&expected_version),
                            ],
                        )
                        .await?;
                    match updated {
                        Some(row) => Ok(row),
                        None => {
                            catalog_id(&client, name).await?;
                            Err(StoreError::Conflict.into())
                        }
                    }
                }
            })
            .await?;
        catalog_record(&row)
    }

    async fn drop_catalog(&self, name: &str) -> StoreResult<()> {
        self.run(|mut client| async move {
            let tx = client.transaction().await?;
            let id = catalog_id(&tx, name).await?;
            let children = tx
                .query_typed_opt(
                    "SELECT 1 FROM namespaces WHERE catalog_id = $1 AND path <> '' LIMIT 1",
                    &[int8(&id)],
                )
                .await?;
            if children.is_some() {
                return Err(StoreError::CatalogNotEmpty.into());
            }
            // Deleting the root row fails on the foreign key if a namespace was created
            // meanwhile: the catalog is not empty after all.
            match tx
                .query_typed(
                    "DELETE FROM namespaces WHERE catalog_id = $1 AND path = ''",
                    &[int8(&id)],
                )
                .await
            {
                Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                    return Err(StoreError::CatalogNotEmpty.into())
                }
                other => other?,
            };
            tx.query_typed(
                "DELETE FROM metrics_reports WHERE catalog_id = $1",
                &[int8(&id)],
            )
            .await?;
            tx.query_typed("DELETE FROM catalogs WHERE id = $1", &[int8(&id)])
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn create_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
        properties: &Properties,
    ) -> StoreResult<()> {
        let properties = to_json(properties)?;
        let (key, parent, last) = (
            namespace.key(),
            namespace.parent().key(),
            namespace.last().to_string(),
        );
        self.run(|client| {
            let (properties, key, parent, last) = (&properties, &key, &parent, &last);
            async move {
                let id = catalog_id(&client, catalog).await?;
                let inserted = client
                    .query_typed(
                        "INSERT INTO namespaces (catalog_id, path, parent, name, properties)
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING 1",
                        &[
                            int8(&id),
                            text(key),
                            text(parent),
                            text(last),
                            text(properties),
                        ],
                    )
                    .await;
                match inserted {
                    Ok(rows) if rows.is_empty() => Err(StoreError::NamespaceExists.into()),
                    Ok(_) => Ok(()),
                    Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                        Err(StoreError::NamespaceMissing(namespace.parent()).into())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        })
        .await
    }

    async fn get_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Properties>> {
        let key = namespace.key();
        // One round trip: no row means no catalog, a NULL means no namespace.
        let row = self
            .run(|client| {
                let key = &key;
                async move {
                    Ok(client
                        .query_typed_opt(
                            "SELECT n.properties FROM catalogs c
                             LEFT JOIN namespaces n ON n.catalog_id = c.id AND n.path = $2
                             WHERE c.name = $1",
                            &[text(&catalog), text(key)],
                        )
                        .await?)
                }
            })
            .await?;
        let row = row.ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))?;
        row.get::<_, Option<&str>>(0).map(from_json).transpose()
    }

    async fn list_namespaces(
        &self,
        catalog: &str,
        parent: &Namespace,
        page: &PageRequest,
    ) -> StoreResult<Page<Namespace>> {
        let (parent_key, after) = (parent.key(), page.after.clone().unwrap_or_default());
        let paths = self
            .run(|client| {
                let (parent_key, after) = (&parent_key, &after);
                async move {
                    list_in_namespace(
                        &client,
                        catalog,
                        parent,
                        "SELECT path FROM namespaces WHERE catalog_id = (SELECT id FROM c)
                           AND parent = $2 AND name > $3 ORDER BY name LIMIT $4",
                        &[
                            text(&catalog),
                            text(parent_key),
                            text(after),
                            int8(&sql_limit(page)),
                        ],
                    )
                    .await
                }
            })
            .await?;
        let items = paths.iter().map(|p| Namespace::from_key(p)).collect();
        Ok(page_of(items, page, |ns| ns.last().to_string()))
    }

    async fn update_namespace_properties(
        &self,
        catalog: &str,
        namespace: &Namespace,
        removals: &[String],
        updates: &Properties,
    ) -> StoreResult<PropertiesChange> {
        let key = namespace.key();
        self.run(|mut client| {
            let key = &key;
            async move {
                let tx = client.transaction().await?;
                let id = catalog_id(&tx, catalog).await?;
                let current = tx
                    .query_typed_opt(
                        "SELECT properties FROM namespaces WHERE catalog_id = $1 AND path = $2 FOR UPDATE",
                        &[int8(&id), text(key)],
                    )
                    .await?
                    .ok_or_else(|| StoreError::NamespaceMissing(namespace.clone()))?;
                let mut properties: Properties = from_json(current.get(0))?;
                let change = PropertiesChange::apply(&mut properties, removals, updates);
                let json = to_json(&properties)?;
                tx.query_typed(
                    "UPDATE namespaces SET properties = $3 WHERE catalog_id = $1 AND path = $2",
                    &[int8(&id), text(key), text(&json)],
                )
                .await?;
                tx.commit().await?;
                Ok(change)
            }
        })
        .await
    }

    async fn drop_namespace(&self, catalog: &str, namespace: &Namespace) -> StoreResult<()> {
        let key = namespace.key();
        self.run(|client| {
            let key = &key;
            async move {
                let id = catalog_id(&client, catalog).await?;
                // Children hold foreign keys to this row: deleting it fails, rather than
                // orphaning them, even when a child is being created at this moment.
                match client
                    .query_typed(
                        "DELETE FROM namespaces WHERE catalog_id = $1 AND path = $2 RETURNING 1",
                        &[int8(&id), text(key)],
                    )
                    .await
                {
                    Ok(rows) if rows.is_empty() => {
                        Err(StoreError::NamespaceMissing(namespace.clone()).into())
                    }
                    Ok(_) => Ok(()),
                    Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                        Err(StoreError::NamespaceNotEmpty.into())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        })
        .await
    }

    async fn load_object(&self, catalog: &str, ident: &Ident) -> StoreResult<Option<StoredObject>> {
        let ns = ident.namespace.key();
        let row = self
            .run(|client| {
                let ns = &ns;
                async move {
                    Ok(client
                        .query_typed_opt(
                            "SELECT o.kind, o.metadata_location, o.metadata FROM catalogs c
                             LEFT JOIN objects o ON o.catalog_id = c.id AND o.namespace = $2 AND o.name = $3
                             WHERE c.name = $1",
                            &[text(&catalog), text(ns), text(&ident.name)],
                        )
                        .await?)
                }
            })
            .await?;
        let row = row.ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))?;
        let kind: Option<&str> = row.get(0);
        match kind {
            None => Ok(None),
            Some(kind) => Ok(Some(StoredObject {
                kind: ObjectKind::parse(kind)
                    .ok_or_else(|| anyhow::anyhow!("unknown object kind {kind}"))?,
                metadata_location: row.get(1),
                metadata: row.get(2),
            })),
        }
    }

    async fn list_objects(
        &self,
        catalog: &str,
        namespace: &Namespace,
        kind: ObjectKind,
        page: &PageRequest,
    ) -> StoreResult<Page<String>> {
        let (ns, after) = (namespace.key(), page.after.clone().unwrap_or_default());
        let items = self
            .run(|client| {
                let (ns, after) = (&ns, &after);
                async move {
                    list_in_namespace(
                        &client,
                        catalog,
                        namespace,
                        "SELECT name FROM objects WHERE catalog_id = (SELECT id FROM c)
                           AND namespace = $2 AND kind = $5 AND name > $3 ORDER BY name LIMIT $4",
                        &[
                            text(&catalog),
                            text(ns),
                            text(after),
                            int8(&sql_limit(page)),
                            text(&kind.as_str()),
                        ],
                    )
                    .await
                }
            })
            .await?;
        Ok(page_of(items, page, Clone::clone))
    }

    async fn commit_objects(&self, catalog: &str, writes: &[ObjectWrite]) -> StoreResult<()> {
        self.run(|mut client| async move {
            let tx = client.transaction().await?;
            let id = catalog_id(&tx, catalog).await?;
            apply_writes(&tx, id, writes).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn lock_objects(
        &self,
        catalog: &str,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>> {
        let client = self.client().await?;
        let mut locked = PgLocked {
            client: Some(client),
            catalog_id: 0,
            current: vec![None; idents.len()],
        };
        let client = locked.client.as_ref().expect("just set");
        let lock = async {
            client.batch_execute("BEGIN").await?;
            let id = catalog_id(client, catalog).await?;
            // Lock in one global order, so that overlapping multi-table commits queue
            // instead of deadlocking.
            let mut order: Vec<usize> = (0..idents.len()).collect();
            order.sort_by(|a, b| idents[*a].cmp(&idents[*b]));
            let mut current = vec![None; idents.len()];
            for i in order {
                let ident = &idents[i];
                let ns = ident.namespace.key();
                let row = client
                    .query_typed_opt(
                        "SELECT kind, metadata_location, metadata FROM objects
                         WHERE catalog_id = $1 AND namespace = $2 AND name = $3 FOR UPDATE",
                        &[int8(&id), text(&ns), text(&ident.name)],
                    )
                    .await?;
                current[i] = match row {
                    None => None,
                    Some(row) => Some(StoredObject {
                        kind: ObjectKind::parse(row.get(0)).ok_or_else(|| {
                            StoreError::Internal(anyhow::anyhow!("unknown object kind"))
                        })?,
                        metadata_location: row.get(1),
                        metadata: row.get(2),
                    }),
                };
            }
            Ok::<_, Failure>((id, current))
        };
        match lock.await {
            Ok((id, current)) => {
                locked.catalog_id = id;
                locked.current = current;
                Ok(Box::new(locked))
            }
            Err(Failure::Store(e)) => Err(e),
            Err(Failure::Sql(e)) if is_retryable(&e) => Err(StoreError::Conflict),
            Err(Failure::Sql(e)) => Err(sql_error(e)),
        }
    }

    async fn drop_object(
        &self,
        catalog: &str,
        ident: &Ident,
        kind: ObjectKind,
    ) -> StoreResult<StoredObject> {
        let ns = ident.namespace.key();
        self.run(|client| {
            let ns = &ns;
            async move {
                let id = catalog_id(&client, catalog).await?;
                let row = client
                    .query_typed_opt(
                        "DELETE FROM objects WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND kind = $4
                         RETURNING metadata_location, metadata",
                        &[int8(&id), text(ns), text(&ident.name), text(&kind.as_str())],
                    )
                    .await?
                    .ok_or_else(|| StoreError::ObjectMissing(ident.clone()))?;
                Ok(StoredObject {
                    kind,
                    metadata_location: row.get(0),
                    metadata: row.get(1),
                })
            }
        })
        .await
    }

    async fn rename_object(
        &self,
        catalog: &str,
        kind: ObjectKind,
        from: &Ident,
        to: &Ident,
    ) -> StoreResult<()> {
        let (from_ns, to_ns) = (from.namespace.key(), to.namespace.key());
        self.run(|mut client| {
            let (from_ns, to_ns) = (&from_ns, &to_ns);
            async move {
                let tx = client.transaction().await?;
                let id = catalog_id(&tx, catalog).await?;
                if object_kind_at(&tx, id, from).await? != Some(kind) {
                    return Err(StoreError::ObjectMissing(from.clone()).into());
                }
                require_namespace(&tx, id, &to.namespace).await?;
                if let Some(existing) = object_kind_at(&tx, id, to).await? {
                    return Err(StoreError::ObjectExists {
                        ident: to.clone(),
                        kind: existing,
                    }
                    .into());
                }
                let renamed = tx
                    .execute_typed(
                        "UPDATE objects SET namespace = $4, name = $5
                         WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND kind = $6",
                        &[
                            int8(&id),
                            text(from_ns),
                            text(&from.name),
                            text(to_ns),
                            text(&to.name),
                            text(&kind.as_str()),
                        ],
                    )
                    .await;
                match renamed {
                    // A concurrent create took the name, or a concurrent drop removed the
                    // target namespace, between the checks and the update.
                    Err(e) if has_code(&e, &SqlState::UNIQUE_VIOLATION) => {
                        return Err(StoreError::ObjectExists {
                            ident: to.clone(),
                            kind,
                        }
                        .into());
                    }
                    Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                        return Err(StoreError::NamespaceMissing(to.namespace.clone()).into());
                    }
                    Ok(0) => return Err(StoreError::ObjectMissing(from.clone()).into()),
                    other => other?,
                };
                tx.commit().await?;
                Ok(())
            }
        })
        .await
    }

    async fn record_metrics(&self, catalog: &str, ident: &Ident, report: &str) -> StoreResult<()> {
        let ns = ident.namespace.key();
        let now = chrono::Utc::now().timestamp_millis();
        self.run(|client| {
            let ns = &ns;
            async move {
                let id = catalog_id(&client, catalog).await?;
                client
                    .execute_typed(
                        "INSERT INTO metrics_reports (catalog_id, namespace, name, report, received_ms)
                         VALUES ($1, $2, $3, $4, $5)",
                        &[int8(&id), text(ns), text(&ident.name), text(&report), int8(&now)],
                    )
                    .await?;
                Ok(())
            }
        })
        .await
    }
}
