//! The PostgreSQL store: stateless Floe nodes over one database.
//!
//! Designed so that unrelated requests never conflict (the failure that made Apache
//! Polaris answer 500 to concurrent creates):
//! - READ COMMITTED, no SERIALIZABLE: each write touches only its own rows. Names are
//!   unique by primary key, parents are enforced by foreign keys (so a namespace dropped
//!   while a child is created can never leave an orphan: one of the two waits and fails).
//! - Ids are random 63-bit numbers, not a shared sequence. (The one shared counter is the
//!   event outbox's position, taken last before COMMIT: see `outbox.rs`.)
//! - Commits are compare-and-swap on one row (`... WHERE metadata_location = $old`).
//! - The location-overlap check takes transaction-scoped advisory locks: shared on every
//!   ancestor directory of the new location, exclusive on the location itself, so only
//!   genuinely overlapping creates queue behind each other.
//! - Serialization failures and deadlocks (40001, 40P01) are retried here with jittered
//!   backoff; a lost connection or a database that is down is `Unavailable` (503).
//!
//! Statements are prepared once per connection and cached (PostgreSQL then skips parsing
//! and planning them); with `prepared_statements: false` they are sent unnamed
//! (`query_typed`, one round trip each), so Floe also works behind PgBouncer in
//! transaction pooling mode, which (before 1.21) cannot keep prepared statements. The
//! choice is made in one place, the [`Queries`] impls.
//!
//! - `mod.rs`: the pool, reads, the `Store` impl.
//! - `settings.rs`: [`PostgresSettings`], what a node is told about its database.
//! - `retry.rs`: error classification, and the retry loop every operation runs in.
//! - `queries.rs`: how statements are sent (prepared and cached, or unnamed).
//! - `readers.rs`: the connections single-statement reads share, so their statements
//!   are pipelined.
//! - `schema.rs`: migrations.
//! - `writes.rs`: [`writes::apply`], the one function that applies a `WriteBatch`, and
//!   the row locks of a commit that lost a race.
//! - `objects.rs`: its writes of tables and views (commit, drop, rename) and the
//!   location-overlap check with its advisory locks.
//! - `group.rs`: group commit (`--db-group-commit`).
//! - `documents.rs`: documents this node loaded, so a load whose pointer has not moved
//!   fetches only the pointer.
//! - `outbox.rs`: change events (appended by `apply` in commit order, read back) and
//!   relay leases.

mod documents;
mod dropped;
mod group;
mod objects;
mod outbox;
mod queries;
mod readers;
mod reserved;
mod retry;
mod schema;
mod settings;
mod writes;

use std::future::Future;
use std::sync::Arc;

use crate::store::cache_text::MetadataText;
use crate::store::{
    check_schema, stored_kind, PolicyDocument, SecurityDocument, StoredProperties, WriteTicket,
};
use anyhow::Context;
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{NoTls, Row};

use super::{
    page_of, Applied, CatalogRow, DroppedObject, EventRead, IdempotencyRecord, LockedObjects, Page,
    PageRequest, PendingPurge, Store, StoreError, StoreResult, StoredObject, WriteBatch,
    CATALOG_COLUMNS,
};
use crate::events::StoredEvent;
use crate::model::{CatalogId, CatalogRecord, Ident, Namespace, ObjectKind};
pub(super) use queries::{int8, text, Queries};
use retry::{
    backoff, commit_failure, has_code, is_retryable, is_unavailable, locked_failure,
    redo_or_failure, Attempt, Failure, MAX_ATTEMPTS,
};
use schema::MIGRATIONS;
pub use settings::{default_read_connections, PostgresSettings};
use writes::PgLocked;

/// Key of the session advisory lock that serialises concurrent migrations.
const MIGRATION_LOCK: i64 = 0x466c_6f65_4d69_6772; // "FloeMigr"

pub struct PostgresStore {
    pool: Pool,
    group_commit: bool,
    /// The group committer, started by the first write (inside the runtime).
    groups: std::sync::OnceLock<group::Groups>,
    documents: documents::Documents,
    readers: readers::Readers,
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
        queries::set_prepared(settings.prepared_statements);
        Ok(PostgresStore {
            pool,
            group_commit: settings.group_commit,
            groups: std::sync::OnceLock::new(),
            documents: documents::Documents::new(settings.document_cache_bytes),
            readers: readers::Readers::new(settings.shared_readers()),
        })
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
        pooled(&self.pool).await
    }

    /// Runs `attempt` on a pooled connection, retrying serialization failures and
    /// deadlocks with jittered backoff.
    async fn run<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        F: Fn(Object) -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        retry::retried(|| self.client(), attempt, false).await
    }

    /// `run` for a read of one statement, on a connection other reads share
    /// (`readers.rs`). A read whose connection failed (closed, or its backend terminated
    /// by a restart) is sent again on another: unlike a write's, sending it again cannot
    /// apply anything twice. After a restart the pool may still hand out a connection or
    /// two whose end it has not noticed yet, so this goes on (within the attempts'
    /// bound) until one works; a database that is really down fails the connect
    /// promptly (503).
    async fn read<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        F: Fn(Arc<Object>) -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        retry::retried(|| self.readers.get(&self.pool), attempt, true).await
    }
}

/// A connection of `pool`'s own, or 503 when none can be had in time.
async fn pooled(pool: &Pool) -> StoreResult<Object> {
    pool.get()
        .await
        .map_err(|e| StoreError::Unavailable(format!("database connection: {e}")))
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
    // Prepared like every other statement (`queries.rs`): the text is the same for
    // every call of one list, and unnamed it was parsed and planned each time.
    let row = client
        .query_opt_typed(&sql, params)
        .await?
        .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("a list query returned no row")))?;
    if row.get::<_, Option<i64>>(0).is_none() {
        return Err(StoreError::CatalogMissing(catalog.to_string()).into());
    }
    if !row.get::<_, bool>(1) {
        return Err(StoreError::NamespaceMissing(namespace.clone()).into());
    }
    Ok(row.get(2))
}

/// SQL LIMIT for a page: one more than asked, to learn whether more follow.
fn sql_limit(page: &PageRequest) -> Option<i64> {
    page.limit.map(|l| l as i64 + 1)
}

async fn object_kind_at(
    q: &impl Queries,
    catalog: CatalogId,
    ident: &Ident,
) -> Attempt<Option<ObjectKind>> {
    let ns = ident.namespace.key();
    Ok(q.query_opt_typed(
        "SELECT kind FROM objects WHERE catalog_id = $1 AND namespace = $2 AND name = $3",
        &[int8(&catalog.0), text(&ns), text(&ident.name)],
    )
    .await?
    .and_then(|row| ObjectKind::parse(row.get(0))))
}

fn catalog_record(row: &Row) -> StoreResult<CatalogRecord> {
    CatalogRow {
        id: row.get(0),
        name: row.get(1),
        properties: row.get(2),
        storage_config: row.get(3),
        created_ms: row.get(4),
        updated_ms: row.get(5),
        version: row.get(6),
        catalog_type: row.get(7),
    }
    .into_record()
}

fn stored_object(
    kind: &str,
    metadata_location: String,
    metadata: impl Into<MetadataText>,
) -> StoreResult<StoredObject> {
    Ok(StoredObject {
        kind: stored_kind(kind)?,
        metadata_location,
        metadata: metadata.into(),
    })
}

impl PostgresStore {
    /// This node's group committer, started on first use (inside the Tokio runtime).
    fn groups(&self) -> &group::Groups {
        self.groups
            .get_or_init(|| group::Groups::start(self.pool.clone()))
    }

    /// Opens a transaction on a connection of its own and locks the objects' rows (in one
    /// global order, so overlapping multi-table commits queue instead of deadlocking).
    async fn lock_rows(
        &self,
        catalog: CatalogId,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>> {
        let mut locked = PgLocked {
            client: Some(self.client().await?),
            current: vec![None; idents.len()],
        };
        let client = locked.client.as_ref().expect("just set");
        let lock = async {
            client.batch_execute("BEGIN").await?;
            let mut order: Vec<usize> = (0..idents.len()).collect();
            order.sort_by(|a, b| idents[*a].cmp(&idents[*b]));
            let mut current = vec![None; idents.len()];
            for i in order {
                let ident = &idents[i];
                let ns = ident.namespace.key();
                let row = client
                    .query_opt_typed(
                        "SELECT kind, metadata_location, metadata FROM objects
                         WHERE catalog_id = $1 AND namespace = $2 AND name = $3 FOR UPDATE",
                        &[int8(&catalog.0), text(&ns), text(&ident.name)],
                    )
                    .await?;
                current[i] = match row {
                    None => None,
                    Some(row) => Some(stored_object(
                        row.get(0),
                        row.get(1),
                        row.get::<_, String>(2),
                    )?),
                };
            }
            Ok::<_, Failure>(current)
        };
        match lock.await {
            Ok(current) => {
                locked.current = current;
                Ok(Box::new(locked))
            }
            Err(Failure::Store(e)) => Err(e),
            Err(Failure::Sql(e)) => Err(locked_failure(e)),
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> StoreResult<()> {
        self.run(|client| async move {
            client.query_all_typed("SELECT 1", &[]).await?;
            Ok(())
        })
        .await
    }

    async fn ready(&self) -> StoreResult<()> {
        let applied: i32 = self
            .run(|client| async move {
                let row = client
                    .query_typed_one("SELECT COALESCE(MAX(version), 0) FROM floe_migrations", &[])
                    .await?;
                Ok(row.get(0))
            })
            .await?;
        check_schema(applied as usize, MIGRATIONS.len())
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn pool_state(&self) -> Option<crate::metrics::PoolState> {
        let status = self.pool.status();
        Some(crate::metrics::PoolState {
            in_use: status.size.saturating_sub(status.available) as u64,
            idle: status.available as u64,
            waiting: status.waiting as u64,
        })
    }

    async fn write(&self, batch: WriteBatch) -> StoreResult<Applied> {
        if self.group_commit {
            return self.groups().write(batch).await;
        }
        let applied = self
            .run(|mut client| {
                let batch = &batch;
                async move {
                    let tx = client.transaction().await?;
                    let applied = writes::apply(&tx, batch).await?;
                    tx.commit().await.map_err(commit_failure)?;
                    Ok(applied)
                }
            })
            .await?;
        Ok(applied.of(batch))
    }

    /// With group commit, a batch takes its place in this node's queue at once, so the
    /// next commit to the same table can prepare on top of it (`catalog/locks.rs`); groups
    /// writing the same tables commit in queue order (see `group::Groups::enqueue`).
    fn enqueue(&self, batch: WriteBatch) -> Result<WriteTicket, Box<WriteBatch>> {
        if self.group_commit {
            return Ok(self.groups().enqueue(batch));
        }
        Err(Box::new(batch))
    }

    async fn lock_objects(
        &self,
        catalog: CatalogId,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>> {
        self.lock_rows(catalog, idents).await
    }

    async fn get_catalog(&self, name: &str) -> StoreResult<Option<CatalogRecord>> {
        let row = self
            .read(|client| async move {
                Ok(client
                    .query_opt_typed(
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
            .read(|client| async move {
                Ok(client
                    .query_all_typed(
                        &format!("SELECT {CATALOG_COLUMNS} FROM catalogs ORDER BY name"),
                        &[],
                    )
                    .await?)
            })
            .await?;
        rows.iter().map(catalog_record).collect()
    }

    async fn get_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Arc<StoredProperties>>> {
        let key = namespace.key();
        // One round trip: no row means no catalog, a NULL means no namespace.
        let row = self
            .read(|client| {
                let key = &key;
                async move {
                    Ok(client
                        .query_opt_typed(
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
        row.get::<_, Option<String>>(0)
            .map(|text| StoredProperties::from_json(text).map(Arc::new))
            .transpose()
    }

    async fn list_namespaces(
        &self,
        catalog: &str,
        parent: &Namespace,
        page: &PageRequest,
    ) -> StoreResult<Page<Namespace>> {
        let (parent_key, after) = (parent.key(), page.after.clone().unwrap_or_default());
        let paths = self
            .read(|client| {
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

    async fn load_object(&self, catalog: &str, ident: &Ident) -> StoreResult<Option<StoredObject>> {
        let ns = ident.namespace.key();
        // The document comes back only if the row is no longer the version this node
        // has the document of (`documents.rs`: why that is exact).
        let known = self.documents.get(catalog, &ns, &ident.name);
        let (known_location, known_version) = known
            .as_ref()
            .map_or(("", ""), |k| (k.location.as_str(), k.version.as_str()));
        let row = self
            .read(|client| {
                let ns = &ns;
                async move {
                    Ok(client
                        .query_opt_typed(
                            "SELECT o.kind, o.metadata_location, o.xmin::text,
                                    CASE WHEN o.metadata_location = $4 AND o.xmin::text = $5
                                         THEN NULL ELSE o.metadata END
                             FROM catalogs c
                             LEFT JOIN objects o ON o.catalog_id = c.id AND o.namespace = $2 AND o.name = $3
                             WHERE c.name = $1",
                            &[
                                text(&catalog),
                                text(ns),
                                text(&ident.name),
                                text(&known_location),
                                text(&known_version),
                            ],
                        )
                        .await?)
                }
            })
            .await?;
        let row = row.ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))?;
        let Some(kind) = row.get::<_, Option<&str>>(0) else {
            return Ok(None);
        };
        let location: String = row.get(1);
        let metadata = match (row.get::<_, Option<&str>>(3), &known) {
            (Some(document), _) => {
                let key = (catalog, ns.as_str(), ident.name.as_str());
                self.documents.put(key, &location, row.get(2), document)
            }
            (None, Some(known)) => known.document(),
            (None, None) => {
                return Err(StoreError::Internal(anyhow::anyhow!(
                    "no metadata document came back for {catalog}: {ns}.{}",
                    ident.name
                )))
            }
        };
        stored_object(kind, location, metadata).map(Some)
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
            .read(|client| {
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

    async fn idempotency_record(
        &self,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let row = self
            .read(|client| async move {
                Ok(client
                    .query_opt_typed(
                        "SELECT key, fingerprint, outcome, expires_ms FROM idempotency_keys
                         WHERE key = $1 AND expires_ms >= $2",
                        &[text(&key), int8(&now_ms)],
                    )
                    .await?)
            })
            .await?;
        Ok(row.map(|r| IdempotencyRecord {
            key: r.get(0),
            fingerprint: r.get(1),
            outcome: r.get(2),
            expires_ms: r.get(3),
        }))
    }

    async fn purge_expired_idempotency(&self, now_ms: i64) -> StoreResult<u64> {
        self.run(|client| async move {
            Ok(client
                .execute_all_typed(
                    "DELETE FROM idempotency_keys WHERE expires_ms < $1",
                    &[int8(&now_ms)],
                )
                .await?)
        })
        .await
    }

    async fn list_dropped(&self, catalog: &str) -> StoreResult<Vec<DroppedObject>> {
        self.run(|client| async move { dropped::list(&client, catalog).await })
            .await?
            .ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))
    }

    async fn overlapping_object(
        &self,
        id: CatalogId,
        at: &str,
        ident: &Ident,
    ) -> StoreResult<Option<Ident>> {
        let candidates = super::location_prefixes(at);
        let candidates = &candidates;
        self.read(|client| async move {
            objects::object_overlapping(client.as_ref(), id, at, candidates, ident).await
        })
        .await
    }

    async fn staged_holds(
        &self,
        catalog: CatalogId,
        ident: &Ident,
        now_ms: i64,
    ) -> StoreResult<Vec<crate::store::reservations::Reservation>> {
        self.read(|client| async move {
            reserved::staged(client.as_ref(), catalog, ident, now_ms).await
        })
        .await
    }

    async fn get_dropped(&self, id: &str) -> StoreResult<Option<DroppedObject>> {
        self.run(|client| async move { dropped::get(&client, id).await })
            .await
    }

    async fn expired_dropped(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<DroppedObject>> {
        self.run(|client| async move { dropped::expired(&client, now_ms, limit).await })
            .await
    }

    async fn due_purges(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<PendingPurge>> {
        self.run(|client| async move { dropped::due_purges(&client, now_ms, limit).await })
            .await
    }

    async fn read_events(&self, read: &EventRead) -> StoreResult<Vec<StoredEvent>> {
        self.run(|client| async move { outbox::read(&client, read).await })
            .await
    }

    async fn event_bounds(&self) -> StoreResult<(i64, i64)> {
        self.run(|client| async move { outbox::bounds(&client).await })
            .await
    }

    async fn claim_relay(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<Option<i64>> {
        self.run(
            |client| async move { outbox::claim(&client, name, holder, now_ms, until_ms).await },
        )
        .await
    }

    async fn confirm_relay(
        &self,
        name: &str,
        holder: &str,
        position: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        self.run(|client| async move {
            outbox::confirm(&client, name, holder, position, until_ms).await
        })
        .await
    }

    async fn purge_events(&self, before_ms: i64) -> StoreResult<u64> {
        self.run(|client| async move { outbox::purge(&client, before_ms).await })
            .await
    }

    async fn security(&self) -> StoreResult<SecurityDocument> {
        let row = self
            .read(|client| async move {
                Ok(client
                    .query_opt_typed("SELECT version, document FROM security WHERE id = 1", &[])
                    .await?)
            })
            .await?;
        Ok(match row {
            Some(row) => SecurityDocument {
                version: row.get(0),
                document: row.get(1),
            },
            None => SecurityDocument {
                version: 0,
                document: "{}".into(),
            },
        })
    }

    async fn security_version(&self) -> StoreResult<i64> {
        let row = self
            .read(|client| async move {
                Ok(client
                    .query_opt_typed("SELECT version FROM security WHERE id = 1", &[])
                    .await?)
            })
            .await?;
        Ok(row.map(|r| r.get(0)).unwrap_or(0))
    }

    async fn policies(&self, catalog: CatalogId) -> StoreResult<PolicyDocument> {
        let row = self
            .read(|client| async move {
                Ok(client
                    .query_opt_typed(
                        "SELECT version, document FROM policies WHERE catalog_id = $1",
                        &[int8(&catalog.0)],
                    )
                    .await?)
            })
            .await?;
        Ok(match row {
            Some(row) => PolicyDocument {
                version: row.get(0),
                document: row.get(1),
            },
            None => PolicyDocument {
                version: 0,
                document: "{}".into(),
            },
        })
    }

    async fn notification_stamp(
        &self,
        catalog: CatalogId,
        ident: &Ident,
    ) -> StoreResult<Option<i64>> {
        let key = ident.namespace.key();
        let (ns, name) = (key.as_str(), ident.name.as_str());
        let row = self
            .read(|client| async move {
                Ok(client
                    .query_opt_typed(
                        "SELECT timestamp_ms FROM notification_stamps
                         WHERE catalog_id = $1 AND namespace = $2 AND name = $3",
                        &[int8(&catalog.0), text(&ns), text(&name)],
                    )
                    .await?)
            })
            .await?;
        Ok(row.map(|r| r.get(0)))
    }
}
