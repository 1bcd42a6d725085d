//! PostgreSQL's one write path: [`apply`] runs a `WriteBatch` inside an open transaction
//! (a fresh one from `Store::write`, or the locked one of [`PgLocked`]), its outbox
//! events last (`outbox::append`).

use async_trait::async_trait;
use deadpool_postgres::Object;
use tokio_postgres::error::SqlState;

use super::objects::{commit_objects, drop_object, rename_object, require_unchanged};
use super::{
    commit_failure, dropped, has_code, int8, locked_failure, outbox, reserved, text, Attempt,
    Failure, Queries,
};
use crate::model::{CatalogId, CatalogRecord, Namespace, ObjectKind, Properties};
use crate::store::{
    properties_json, to_json, Applied, IdempotencyRecord, LockedObjects, Mutation,
    NotificationStamp, PolicyWrite, Presence, StoreError, StoreResult, StoredObject, WriteBatch,
};

/// Applies the batch's rows, then its mutation, in the caller's transaction.
pub(super) async fn apply(q: &impl Queries, batch: &WriteBatch) -> Attempt<Applied> {
    let applied = apply_rows(q, batch).await?;
    outbox::append(q, &batch.events).await?;
    Ok(applied)
}

/// All of [`apply`] but the events (a group appends those of all its batches last).
pub(super) async fn apply_rows(q: &impl Queries, batch: &WriteBatch) -> Attempt<Applied> {
    if let Some(record) = &batch.idempotency {
        record_idempotency(q, record, batch.now_ms).await?;
    }
    if let Some((expected, document)) = &batch.security {
        replace_security(q, *expected, document).await?;
    }
    if let Some(policies) = &batch.policies {
        replace_policies(q, policies).await?;
    }
    if let Some(stamp) = &batch.notification {
        swap_notification_stamp(q, stamp).await?;
    }
    let applied = apply_mutation(q, batch).await?;
    if let Some(expected) = batch.security_seen {
        require_security_version(q, expected).await?;
    }
    if let Some(presence) = &batch.present {
        require_present(q, presence).await?;
    }
    if !matches!(batch.mutation, Mutation::CommitObjects { .. }) {
        // (A commit checks them with its writes, in their order: `commit_objects`.)
        for unchanged in &batch.unchanged {
            require_unchanged(q, unchanged).await?;
        }
    }
    if let Some(purge) = &batch.purge {
        dropped::schedule_purge(q, purge).await?;
    }
    Ok(applied)
}

async fn apply_mutation(q: &impl Queries, batch: &WriteBatch) -> Attempt<Applied> {
    match &batch.mutation {
        Mutation::None => {}
        Mutation::CreateCatalog(record) => create_catalog(q, record).await?,
        Mutation::UpdateCatalog {
            expected_version,
            record,
        } => update_catalog(q, *expected_version, record).await?,
        Mutation::DropCatalog { catalog, name } => drop_catalog(q, *catalog, name).await?,
        Mutation::CreateNamespace {
            catalog,
            namespace,
            properties,
        } => create_namespace(q, *catalog, namespace, properties).await?,
        Mutation::UpdateNamespace {
            catalog,
            namespace,
            expected,
            properties,
        } => update_namespace(q, *catalog, namespace, &expected.json, properties.json()).await?,
        Mutation::DropNamespace { catalog, namespace } => {
            drop_namespace(q, *catalog, namespace).await?
        }
        Mutation::CommitObjects { catalog, writes } => {
            commit_objects(q, *catalog, writes, &batch.unchanged, batch.now_ms).await?
        }
        Mutation::DropObject {
            catalog,
            kind,
            ident,
            expected,
            retain,
        } => {
            let (object, location) = drop_object(q, *catalog, *kind, ident, expected).await?;
            if let Some(retention) = retain {
                dropped::retain(q, *catalog, ident, &object, &location, retention).await?;
            }
            return Ok(Applied::Dropped(object));
        }
        Mutation::Undrop { catalog, id, write } => {
            dropped::take(q, Some(*catalog), id).await?;
            commit_objects(q, *catalog, std::slice::from_ref(write), &[], batch.now_ms).await?;
        }
        Mutation::ForgetDropped { id } => {
            return dropped::take(q, None, id).await.map(Applied::Forgotten);
        }
        Mutation::FinishPurge { id } => dropped::finish_purge(q, id).await?,
        Mutation::DeferPurge {
            id,
            attempts,
            next_ms,
        } => dropped::defer_purge(q, id, *attempts, *next_ms).await?,
        Mutation::RenameObject {
            catalog,
            kind,
            from,
            to,
            expected,
        } => rename_object(q, *catalog, *kind, from, to, expected).await?,
        Mutation::ReserveLocation(reservation) => {
            reserved::reserve(q, reservation, batch.now_ms).await?
        }
        Mutation::RecordMetrics {
            catalog,
            ident,
            report,
        } => {
            let ns = ident.namespace.key();
            q.execute_all_typed(
                "INSERT INTO metrics_reports (catalog_id, namespace, name, report, received_ms)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    int8(&catalog.0),
                    text(&ns),
                    text(&ident.name),
                    text(report),
                    int8(&batch.now_ms),
                ],
            )
            .await?;
        }
    }
    Ok(Applied::Done)
}

/// Inserts the key, or takes over an expired record of it; a live one refuses the batch.
/// Two requests with one key at once: the second waits on the first's row lock, then
/// finds the key taken.
async fn record_idempotency(q: &impl Queries, r: &IdempotencyRecord, now: i64) -> Attempt<()> {
    let taken = q
        .execute_all_typed(
            "INSERT INTO idempotency_keys (key, fingerprint, outcome, expires_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
                 outcome = EXCLUDED.outcome, expires_ms = EXCLUDED.expires_ms
             WHERE idempotency_keys.expires_ms < $5",
            &[
                text(&r.key),
                text(&r.fingerprint),
                text(&r.outcome),
                int8(&r.expires_ms),
                int8(&now),
            ],
        )
        .await?;
    if taken == 0 {
        return Err(StoreError::IdempotencyKeyUsed.into());
    }
    Ok(())
}

/// Swaps the security document if it is still at `expected` (0: none yet).
async fn replace_security(q: &impl Queries, expected: i64, document: &str) -> Attempt<()> {
    let swapped = if expected == 0 {
        q.execute_all_typed(
            "INSERT INTO security (id, version, document) VALUES (1, 1, $1) ON CONFLICT (id) DO NOTHING",
            &[text(&document)],
        )
        .await?
    } else {
        q.execute_all_typed(
            "UPDATE security SET version = version + 1, document = $2 WHERE id = 1 AND version = $1",
            &[int8(&expected), text(&document)],
        )
        .await?
    };
    if swapped == 0 {
        return Err(StoreError::Conflict.into());
    }
    Ok(())
}

/// `Conflict` unless the security document is at `expected` (0: none yet). Read after
/// the batch's mutation took its row locks: a grant that holds the same rows
/// (`require_present`) has either committed, and shows here, or waits and then finds
/// them gone.
async fn require_security_version(q: &impl Queries, expected: i64) -> Attempt<()> {
    let version: Option<i64> = q
        .query_opt_typed("SELECT version FROM security WHERE id = 1", &[])
        .await?
        .map(|row| row.get(0));
    if version.unwrap_or(0) != expected {
        return Err(StoreError::Conflict.into());
    }
    Ok(())
}

/// The presence's error unless what it names exists; its row is share-locked until
/// commit, so a drop or rename of it waits for this transaction (or, if it came first,
/// this one waits and then finds the row gone).
async fn require_present(q: &impl Queries, presence: &Presence) -> Attempt<()> {
    let found = match presence {
        Presence::Namespace { catalog, namespace } => q
            .query_opt_typed(
                "SELECT 1 FROM namespaces WHERE catalog_id = $1 AND path = $2 FOR SHARE",
                &[int8(&catalog.0), text(&namespace.key())],
            )
            .await?
            .is_some(),
        Presence::Object {
            catalog,
            ident,
            kinds,
        } => q
            .query_opt_typed(
                "SELECT kind FROM objects WHERE catalog_id = $1 AND namespace = $2 AND name = $3
                 FOR SHARE",
                &[
                    int8(&catalog.0),
                    text(&ident.namespace.key()),
                    text(&ident.name),
                ],
            )
            .await?
            .and_then(|row| ObjectKind::parse(row.get(0)))
            .is_some_and(|kind| kinds.contains(&kind)),
        // A policy's drop holds this row (its document swap) until it commits; waiting
        // here, this then reads the version it left.
        Presence::Policies { catalog, version } => {
            q.query_opt_typed(
                "SELECT version FROM policies WHERE catalog_id = $1 FOR SHARE",
                &[int8(&catalog.0)],
            )
            .await?
            .map_or(0, |row| row.get::<_, i64>(0))
                == *version
        }
    };
    if !found {
        return Err(presence.missing().into());
    }
    Ok(())
}

/// Sets a table's notification stamp if it is still the one the caller read.
async fn swap_notification_stamp(q: &impl Queries, stamp: &NotificationStamp) -> Attempt<()> {
    let (catalog, ns, name) = (
        stamp.catalog.0,
        stamp.ident.namespace.key(),
        &stamp.ident.name,
    );
    let swapped = match stamp.expected {
        // A catalog dropped meanwhile: a lost race, not a foreign key error.
        None => match q
            .execute_all_typed(
                "INSERT INTO notification_stamps (catalog_id, namespace, name, timestamp_ms)
                 SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM catalogs WHERE id = $1)
                 ON CONFLICT (catalog_id, namespace, name) DO NOTHING",
                &[
                    int8(&catalog),
                    text(&ns),
                    text(name),
                    int8(&stamp.timestamp_ms),
                ],
            )
            .await
        {
            // The catalog's drop committed while this waited for its row.
            Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                return Err(StoreError::Conflict.into())
            }
            other => other?,
        },
        Some(expected) => {
            q.execute_all_typed(
                "UPDATE notification_stamps SET timestamp_ms = $4
                 WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND timestamp_ms = $5",
                &[
                    int8(&catalog),
                    text(&ns),
                    text(name),
                    int8(&stamp.timestamp_ms),
                    int8(&expected),
                ],
            )
            .await?
        }
    };
    if swapped == 0 {
        return Err(StoreError::Conflict.into());
    }
    Ok(())
}

/// Swaps a catalog's policy document if it is still at its expected version (0: none
/// yet).
async fn replace_policies(q: &impl Queries, write: &PolicyWrite) -> Attempt<()> {
    let swapped = if write.expected_version == 0 {
        match q
            .execute_all_typed(
                "INSERT INTO policies (catalog_id, version, document) VALUES ($1, 1, $2) ON CONFLICT (catalog_id) DO NOTHING",
                &[int8(&write.catalog.0), text(&write.document)],
            )
            .await
        {
            // The catalog was dropped since the caller read it: a lost race.
            Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                return Err(StoreError::Conflict.into())
            }
            other => other?,
        }
    } else {
        q.execute_all_typed(
            "UPDATE policies SET version = version + 1, document = $3 WHERE catalog_id = $1 AND version = $2",
            &[int8(&write.catalog.0), int8(&write.expected_version), text(&write.document)],
        )
        .await?
    };
    if swapped == 0 {
        return Err(StoreError::Conflict.into());
    }
    Ok(())
}

async fn create_catalog(q: &impl Queries, c: &CatalogRecord) -> Attempt<()> {
    let (properties, storage) = (to_json(&c.properties)?, to_json(&c.storage_config)?);
    let inserted = q
        .query_all_typed(
            "INSERT INTO catalogs (id, name, properties, storage_config, created_ms, updated_ms, version, catalog_type)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (name) DO NOTHING RETURNING id",
            &[
                int8(&c.id.0),
                text(&c.name),
                text(&properties),
                text(&storage),
                int8(&c.created_ms),
                int8(&c.updated_ms),
                int8(&c.version),
                text(&c.catalog_type.as_str()),
            ],
        )
        .await?;
    if inserted.is_empty() {
        return Err(StoreError::CatalogExists(c.name.clone()).into());
    }
    q.execute_all_typed(
        "INSERT INTO namespaces (catalog_id, path, parent, name, properties) VALUES ($1, '', NULL, '', '{}')",
        &[int8(&c.id.0)],
    )
    .await?;
    Ok(())
}

async fn update_catalog(q: &impl Queries, expected_version: i64, c: &CatalogRecord) -> Attempt<()> {
    let (properties, storage) = (to_json(&c.properties)?, to_json(&c.storage_config)?);
    let updated = q
        .execute_all_typed(
            "UPDATE catalogs SET properties = $2, storage_config = $3, updated_ms = $4, version = $5
             WHERE id = $1 AND version = $6",
            &[
                int8(&c.id.0),
                text(&properties),
                text(&storage),
                int8(&c.updated_ms),
                int8(&c.version),
                int8(&expected_version),
            ],
        )
        .await?;
    if updated == 0 {
        let exists = q
            .query_opt_typed("SELECT 1 FROM catalogs WHERE id = $1", &[int8(&c.id.0)])
            .await?
            .is_some();
        return Err(if exists {
            StoreError::Conflict
        } else {
            StoreError::CatalogMissing(c.name.clone())
        }
        .into());
    }
    Ok(())
}

async fn drop_catalog(q: &impl Queries, id: CatalogId, name: &str) -> Attempt<()> {
    let not_empty = || Failure::Store(StoreError::CatalogNotEmpty(name.to_string()));
    // The row is locked first: a notification's stamp, which needs no namespace, either
    // committed before (and is deleted below) or waits and then finds the catalog gone,
    // rather than breaking the foreign key of the catalog's own delete.
    q.query_opt_typed(
        "SELECT 1 FROM catalogs WHERE id = $1 FOR UPDATE",
        &[int8(&id.0)],
    )
    .await?;
    let children = q
        .query_opt_typed(
            "SELECT 1 FROM namespaces WHERE catalog_id = $1 AND path <> '' LIMIT 1",
            &[int8(&id.0)],
        )
        .await?;
    if children.is_some() {
        return Err(not_empty());
    }
    // Deleting the root row fails on the foreign key if a namespace was created
    // meanwhile: the catalog is not empty after all.
    match q
        .execute_all_typed(
            "DELETE FROM namespaces WHERE catalog_id = $1 AND path = ''",
            &[int8(&id.0)],
        )
        .await
    {
        Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => return Err(not_empty()),
        other => other?,
    };
    q.execute_all_typed("DELETE FROM policies WHERE catalog_id = $1", &[int8(&id.0)])
        .await?;
    q.execute_all_typed(
        "DELETE FROM notification_stamps WHERE catalog_id = $1",
        &[int8(&id.0)],
    )
    .await?;
    q.execute_all_typed(
        "DELETE FROM metrics_reports WHERE catalog_id = $1",
        &[int8(&id.0)],
    )
    .await?;
    if q.execute_all_typed("DELETE FROM catalogs WHERE id = $1", &[int8(&id.0)])
        .await?
        == 0
    {
        return Err(StoreError::CatalogMissing(name.to_string()).into());
    }
    Ok(())
}

async fn create_namespace(
    q: &impl Queries,
    id: CatalogId,
    namespace: &Namespace,
    properties: &Properties,
) -> Attempt<()> {
    let properties = properties_json(properties);
    let (key, parent) = (namespace.key(), namespace.parent().key());
    let inserted = q
        .query_all_typed(
            "INSERT INTO namespaces (catalog_id, path, parent, name, properties)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING 1",
            &[
                int8(&id.0),
                text(&key),
                text(&parent),
                text(&namespace.last()),
                text(&properties),
            ],
        )
        .await;
    match inserted {
        Ok(rows) if rows.is_empty() => Err(StoreError::NamespaceExists(namespace.clone()).into()),
        Ok(_) => Ok(()),
        // The parent row is missing: the parent namespace, or (for a top-level one) the
        // catalog's root row, i.e. the catalog was dropped meanwhile.
        Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
            Err(StoreError::NamespaceMissing(namespace.parent()).into())
        }
        Err(e) => Err(e.into()),
    }
}

async fn update_namespace(
    q: &impl Queries,
    id: CatalogId,
    namespace: &Namespace,
    expected: &str,
    properties: &str,
) -> Attempt<()> {
    let key = namespace.key();
    let row = q
        .query_opt_typed(
            "SELECT properties = $3 FROM namespaces WHERE catalog_id = $1 AND path = $2 FOR UPDATE",
            &[int8(&id.0), text(&key), text(&expected)],
        )
        .await?
        .ok_or_else(|| StoreError::NamespaceMissing(namespace.clone()))?;
    if !row.get::<_, bool>(0) {
        return Err(StoreError::Conflict.into());
    }
    q.execute_all_typed(
        "UPDATE namespaces SET properties = $3 WHERE catalog_id = $1 AND path = $2",
        &[int8(&id.0), text(&key), text(&properties)],
    )
    .await?;
    Ok(())
}

async fn drop_namespace(q: &impl Queries, id: CatalogId, namespace: &Namespace) -> Attempt<()> {
    let key = namespace.key();
    // Children hold foreign keys to this row: deleting it fails, rather than orphaning
    // them, even when a child is being created at this moment.
    match q
        .execute_all_typed(
            "DELETE FROM namespaces WHERE catalog_id = $1 AND path = $2",
            &[int8(&id.0), text(&key)],
        )
        .await
    {
        Ok(0) => Err(StoreError::NamespaceMissing(namespace.clone()).into()),
        Ok(_) => {
            // The stamps of its dropped tables: a namespace made again starts anew.
            q.execute_all_typed(
                "DELETE FROM notification_stamps WHERE catalog_id = $1 AND namespace = $2",
                &[int8(&id.0), text(&key)],
            )
            .await?;
            Ok(())
        }
        Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
            Err(StoreError::NamespaceNotEmpty(namespace.clone()).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Row locks (`SELECT ... FOR UPDATE`) on the objects of a commit that lost a race, held
/// in an open transaction on a connection of its own. Other nodes' commits to these rows
/// wait in line instead of racing. Dropped without `write`, the connection is closed
/// rather than returned to the pool, so the transaction can never leak into other work.
pub(super) struct PgLocked {
    pub(super) client: Option<Object>,
    pub(super) current: Vec<Option<StoredObject>>,
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

    async fn write(mut self: Box<Self>, batch: WriteBatch) -> StoreResult<Applied> {
        let client = self.client.as_ref().expect("a locked connection");
        let outcome = match apply(client, &batch).await {
            Ok(applied) => client
                .batch_execute("COMMIT")
                .await
                .map(|()| applied)
                .map_err(commit_failure),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(applied) => {
                // The transaction is over: the connection may go back to the pool.
                drop(self.client.take());
                Ok(applied.of(batch))
            }
            Err(Failure::Store(e)) => Err(e),
            // Two locked commits over overlapping sets can still deadlock: redo it.
            Err(Failure::Sql(e)) => Err(locked_failure(e)),
        }
    }
}
