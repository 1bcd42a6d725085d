//! Soft delete: a dropped table or view stays recoverable for the drop retention
//! (`--drop-retention-days`, 7 by default). It can be listed, brought back under its
//! name or a new one (undrop), or purged at once; when the retention ends the expirer
//! forgets it and, if its drop asked for a purge, deletes its files. Files are never
//! deleted while an undrop could still need them.

use std::time::Duration;

use serde_json::{json, Value};

use super::error::{CatalogError, CatalogResult};
use super::locations::check_allowed;
use super::objects::{by_kind, identity, write_event, Identity};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::Operation;
use crate::model::{now_ms, CatalogRecord, Ident};
use crate::store::{Applied, DroppedObject, Mutation, ObjectWrite, Retention, StoreError};

/// Most dropped objects the expirer forgets per round.
const EXPIRE_BATCH: usize = 100;

impl Catalog {
    /// How a drop is kept now (`None`: the retention is off).
    pub(super) fn retention(&self, purge: bool) -> Option<Retention> {
        let retention = self.settings.drop_retention;
        (!retention.is_zero()).then(|| {
            let now = now_ms();
            Retention {
                id: uuid::Uuid::now_v7().to_string(),
                purge,
                dropped_ms: now,
                expires_ms: now + retention.as_millis() as i64,
            }
        })
    }

    /// How often the expirer looks for dropped objects past their retention.
    pub fn expiry_interval(&self) -> Duration {
        (self.settings.drop_retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// The catalog's dropped tables and views, newest first.
    pub async fn list_dropped(&self, ctx: &RequestContext, catalog: &str) -> CatalogResult<Value> {
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_CONTENT,
            &Securable::Catalog,
        )?;
        let dropped = self.store.list_dropped(catalog).await?;
        Ok(json!({ "dropped": dropped.iter().map(describe).collect::<Vec<_>>() }))
    }

    /// The catalog and its dropped object `id`, for a caller who may manage the catalog's
    /// content (404 for an id of another catalog, as for one that does not exist).
    async fn dropped_in(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        id: &str,
    ) -> CatalogResult<(CatalogRecord, DroppedObject)> {
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_CONTENT,
            &Securable::Catalog,
        )?;
        let record = self.get_catalog(catalog).await?;
        let dropped = self
            .store
            .get_dropped(id)
            .await?
            .filter(|d| d.catalog == record.id)
            .ok_or_else(|| StoreError::DroppedMissing(id.to_string()))?;
        Ok((record, dropped))
    }

    /// Brings a dropped table or view back, under `to` or its old name, pointing at the
    /// metadata it had. 409 if the name is taken, 404 if its namespace is gone.
    pub async fn undrop(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        id: &str,
        to: Option<Ident>,
    ) -> CatalogResult<Value> {
        let (record, dropped) = self.dropped_in(ctx, catalog, id).await?;
        let ident = to.unwrap_or_else(|| dropped.ident.clone());
        // Still inside the catalog's allowed locations (they may have changed).
        let Identity { uuid, location } = identity(dropped.kind, &dropped.metadata)?;
        check_allowed(&record, &location)?;
        let write = ObjectWrite {
            ident: ident.clone(),
            kind: dropped.kind,
            expected_metadata_location: None,
            metadata_location: dropped.metadata_location.clone(),
            metadata: dropped.metadata.clone(),
            location: dropped.location.clone(),
            check_location: true,
        };
        let operation = by_kind(
            dropped.kind,
            Operation::RegisterTable,
            Operation::RegisterView,
        );
        let event = write_event(operation, &write, &uuid).with("undropped-id", dropped.id.clone());
        let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
        let _guards = self.commit_locks.lock(record.id, &[&ident]).await;
        let undrop = Mutation::Undrop {
            catalog: record.id,
            id: id.to_string(),
            write,
        };
        self.write(ctx, undrop, &Outcome::NoContent, events).await?;
        Ok(json!({
            "namespace": ident.namespace.levels(),
            "name": ident.name,
            "type": dropped.kind.as_str(),
            "metadata-location": dropped.metadata_location,
        }))
    }

    /// Forgets a dropped table or view now and deletes its files.
    pub async fn purge_dropped(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        id: &str,
    ) -> CatalogResult<()> {
        self.dropped_in(ctx, catalog, id).await?;
        let forgotten = self.forget_dropped(ctx, id).await?;
        self.delete_dropped_files(&forgotten).await;
        Ok(())
    }

    /// Forgets dropped objects past their retention (purging the files of those whose
    /// drop asked for it); returns how many. The server runs this on one node at a time.
    pub async fn expire_dropped(&self) -> CatalogResult<u64> {
        let expired = self.store.expired_dropped(now_ms(), EXPIRE_BATCH).await?;
        let ctx = RequestContext::system();
        let mut n = 0;
        for d in expired {
            match self.forget_dropped(&ctx, &d.id).await {
                Ok(forgotten) => {
                    n += 1;
                    if forgotten.purge {
                        self.delete_dropped_files(&forgotten).await;
                    }
                }
                // Undropped or purged meanwhile.
                Err(CatalogError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    async fn forget_dropped(&self, ctx: &RequestContext, id: &str) -> CatalogResult<DroppedObject> {
        let forget = Mutation::ForgetDropped { id: id.to_string() };
        match self
            .write(ctx, forget, &Outcome::NoContent, Vec::new())
            .await?
        {
            Applied::Forgotten(d) => Ok(d),
            _ => Err(StoreError::DroppedMissing(id.to_string()).into()),
        }
    }

    /// Deletes a forgotten object's files (not at all if its catalog is gone: its
    /// allowed locations and storage are unknown then).
    async fn delete_dropped_files(&self, d: &DroppedObject) {
        let catalogs = match self.store.list_catalogs().await {
            Ok(catalogs) => catalogs,
            Err(e) => {
                tracing::warn!(dropped = %d.id, error = %e, "could not purge a dropped object's files");
                return;
            }
        };
        let Some(record) = catalogs.into_iter().find(|c| c.id == d.catalog) else {
            tracing::warn!(dropped = %d.id, location = %d.location, "not purging: the dropped object's catalog is gone");
            return;
        };
        match identity(d.kind, &d.metadata) {
            Ok(identity) => self.purge_files(&record, &identity.location).await,
            Err(e) => {
                tracing::warn!(dropped = %d.id, error = %e, "not purging: unreadable metadata")
            }
        }
    }
}

fn describe(d: &DroppedObject) -> Value {
    json!({
        "id": d.id,
        "type": d.kind.as_str(),
        "namespace": d.ident.namespace.levels(),
        "name": d.ident.name,
        "metadata-location": d.metadata_location,
        "location": d.location,
        "purge-requested": d.purge,
        "dropped-at-ms": d.dropped_ms,
        "expires-at-ms": d.expires_ms,
    })
}
