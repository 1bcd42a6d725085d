//! Soft delete: a dropped table or view stays recoverable for the drop retention
//! (`--drop-retention-days`, 7 by default). It can be listed, brought back under its
//! name or a new one (undrop), or purged at once; when the retention ends the expirer
//! forgets it and, if its drop asked for a purge, deletes its files. Files are never
//! deleted while an undrop could still need them.
//!
//! A purge is a record (`PendingPurge`) committed in the same transaction as the drop or
//! forget that asks for it, then carried out in rounds of at most
//! `purge_batch_files` deletions: the first at once, the rest by the expirer (on one
//! node at a time). The record goes only when a round finds nothing left, so a purge
//! outlives a crash, an unreachable object store (retried with a growing delay) and
//! tables larger than one round.

use std::time::Duration;

use serde_json::{json, Value};

use super::error::{CatalogError, CatalogResult};
use super::locations::check_allowed;
use super::objects::{by_kind, identity, require_internal, securable, write_event, Identity};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::Operation;
use crate::model::{now_ms, CatalogRecord, Ident};
use crate::store::{
    nobody, Applied, DroppedObject, Mutation, ObjectWrite, PendingPurge, Retention, StoreError,
};

/// Most dropped objects the expirer forgets per round.
const EXPIRE_BATCH: usize = 100;

/// Most purges the expirer works on per round.
const PURGE_BATCH: usize = 100;

/// Whether a dropped object's retention has ended. At its very millisecond too: a drop
/// then already forgets the grants kept for it (`grants_follow`), though the
/// expirer's query takes only those expiring strictly before its now.
fn expired(d: &DroppedObject) -> bool {
    d.expires_ms <= now_ms()
}

/// How long a purge waits after its `attempts`-th failure: 1 s, doubling, at most an hour.
fn retry_delay_ms(attempts: i64) -> i64 {
    let doublings = attempts.saturating_sub(1).clamp(0, 12) as u32;
    (1_000i64 << doublings).min(3_600_000)
}

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
        // Past their retention they wait only for the expirer, and cannot be undropped.
        let dropped: Vec<_> = dropped
            .iter()
            .filter(|d| !expired(d))
            .map(describe)
            .collect();
        Ok(json!({ "dropped": dropped }))
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
            .filter(|d| d.catalog == record.id && !expired(d))
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
        require_internal(&record, dropped.kind, "undrop")?;
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
        let answer = json!({
            "namespace": ident.namespace.levels(),
            "name": ident.name,
            "type": dropped.kind.as_str(),
            "metadata-location": dropped.metadata_location,
        });
        // Kept with the idempotency key as sent: a retry learns the name and location too.
        let outcome = Outcome::Json {
            status: 200,
            body: answer.clone(),
        };
        let batch = self.batch(ctx, undrop, &outcome, events);
        let attempts = self.settings.max_commit_attempts.max(1);
        for attempt in 1..=attempts {
            // The grants it held come back with it (a retry: on the model re-read).
            let mut batch = batch.clone();
            self.grants_return(&mut batch, id, &securable(dropped.kind, &ident))
                .await?;
            // Checked after the security model was read: a drop past the retention
            // forgets the grants kept for it (`forget_expired_grants`, by any drop that
            // keeps grants), and the model read above must not predate that, or it would
            // come back without them. Once past, it is gone for undrop, as for the list.
            if expired(&dropped) {
                return Err(StoreError::DroppedMissing(id.to_string()).into());
            }
            match self.apply(batch, None).await {
                Err(StoreError::Conflict) if attempt < attempts => continue,
                other => {
                    other?;
                    break;
                }
            }
        }
        Ok(answer)
    }

    /// Forgets a dropped table or view now and deletes its files.
    pub async fn purge_dropped(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        id: &str,
    ) -> CatalogResult<()> {
        let (record, dropped) = self.dropped_in(ctx, catalog, id).await?;
        if let Some(purge) = self
            .forget_dropped(ctx, Some(&record), &dropped, true)
            .await?
        {
            self.purge_round(&purge).await;
        }
        Ok(())
    }

    /// Forgets dropped objects past their retention (scheduling the purge of those whose
    /// drop asked for it), then works on the purges that are due; returns how many
    /// objects it forgot. The server runs this on one node at a time.
    pub async fn expire_dropped(&self) -> CatalogResult<u64> {
        let now = now_ms();
        let expired = self.store.expired_dropped(now, EXPIRE_BATCH).await?;
        let all_expired = expired.len() < EXPIRE_BATCH;
        let ctx = RequestContext::system();
        let catalogs = if expired.is_empty() {
            Vec::new()
        } else {
            self.store.list_catalogs().await?
        };
        let mut n = 0;
        for d in expired {
            let record = catalogs.iter().find(|c| c.id == d.catalog);
            match self.forget_dropped(&ctx, record, &d, d.purge).await {
                Ok(_) => n += 1,
                // Undropped or purged meanwhile.
                Err(CatalogError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // Only once every record expired at `now` is forgotten: one left (a round holds
        // at most a batch) could still be undropped, and must get its grants back.
        if all_expired {
            self.forget_expired_grants(&ctx, now).await?;
        }
        self.run_purges().await?;
        Ok(n)
    }

    /// Forgets the grants kept for drops whose retention ended before `now` (the expirer
    /// has forgotten their records), which otherwise stayed in the security model until
    /// the next drop that keeps grants. Writes only when there are any.
    async fn forget_expired_grants(&self, ctx: &RequestContext, now: i64) -> CatalogResult<()> {
        // The store's query takes records expiring strictly before `now`: so do these.
        let through = now - 1;
        if !self.security().await?.state.has_expired_grants(through) {
            return Ok(());
        }
        self.change_security(ctx, "forget-expired-grants", Mutation::None, |state| {
            state.forget_expired_grants(through);
            Ok(((), Outcome::NoContent))
        })
        .await
    }

    /// Forgets a dropped object; with `purge`, records the purge of its files in the same
    /// transaction and returns it. Without its catalog (`record` is `None`), its allowed
    /// locations and storage are unknown: it is forgotten without a purge.
    async fn forget_dropped(
        &self,
        ctx: &RequestContext,
        record: Option<&CatalogRecord>,
        d: &DroppedObject,
        purge: bool,
    ) -> CatalogResult<Option<PendingPurge>> {
        let purge = match (purge, record, identity(d.kind, &d.metadata)) {
            (false, _, _) => None,
            (true, None, _) => {
                tracing::warn!(dropped = %d.id, location = %d.location, "not purging: the dropped object's catalog is gone");
                None
            }
            (true, Some(record), Ok(identity)) => self.purge_of(record, &identity.location),
            (true, Some(_), Err(e)) => {
                tracing::warn!(dropped = %d.id, error = %e, "not purging: unreadable metadata");
                None
            }
        };
        let forget = Mutation::ForgetDropped { id: d.id.clone() };
        let mut batch = self.batch(ctx, forget, &Outcome::NoContent, Vec::new());
        batch.purge = purge.clone();
        match self.apply(batch, None).await? {
            Applied::Forgotten(_) => Ok(purge),
            _ => Err(StoreError::DroppedMissing(d.id.clone()).into()),
        }
    }

    /// The purge of everything under `location`, to record with a change; none outside
    /// the catalog's allowed locations (files there are not the catalog's to delete).
    pub(super) fn purge_of(&self, record: &CatalogRecord, location: &str) -> Option<PendingPurge> {
        if let Err(e) = check_allowed(record, location) {
            tracing::warn!(%location, error = %e, "not purging outside the catalog's allowed locations");
            return None;
        }
        let now = now_ms();
        Some(PendingPurge {
            id: uuid::Uuid::now_v7().to_string(),
            catalog: record.id,
            location: location.to_string(),
            created_ms: now,
            attempts: 0,
            next_ms: now,
        })
    }

    /// Works on the purges that are due, round after round, for at most one expiry
    /// interval (so a large table does not wait a whole interval per round); returns
    /// how many finished.
    pub async fn run_purges(&self) -> CatalogResult<u64> {
        let started = std::time::Instant::now();
        let mut finished = 0;
        loop {
            let due = self.store.due_purges(now_ms(), PURGE_BATCH).await?;
            if due.is_empty() {
                return Ok(finished);
            }
            for purge in &due {
                if self.try_purge_round(purge).await? {
                    finished += 1;
                }
                if started.elapsed() >= self.expiry_interval() {
                    return Ok(finished);
                }
            }
        }
    }

    /// One round of a purge whose outcome only the log needs (a drop stands whatever
    /// happens to its files; the expirer takes over what is left).
    pub(super) async fn purge_round(&self, purge: &PendingPurge) {
        if let Err(e) = self.try_purge_round(purge).await {
            tracing::warn!(location = %purge.location, error = %e, "purge round not recorded; the expirer retries it");
        }
    }

    /// Deletes up to `purge_batch_files` files of the purge, then records whether it is
    /// finished or when its next round is due; returns whether it finished.
    async fn try_purge_round(&self, purge: &PendingPurge) -> CatalogResult<bool> {
        let catalogs = self.store.list_catalogs().await?;
        let deleted = match catalogs.iter().find(|c| c.id == purge.catalog) {
            // Its storage is unknown now, and so is what is allowed: nothing to do.
            None => {
                tracing::warn!(location = %purge.location, "purge abandoned: its catalog is gone");
                Ok(true)
            }
            Some(record) => match check_allowed(record, &purge.location) {
                Err(e) => {
                    tracing::warn!(location = %purge.location, error = %e, "purge abandoned: no longer inside the catalog's allowed locations");
                    Ok(true)
                }
                // Recorded purges never overlap a table or view (the store checks both
                // ways); asked again each round for any recorded before that was so.
                Ok(canonical) => match self
                    .store
                    .overlapping_object(record.id, &canonical, &nobody())
                    .await?
                {
                    Some(other) => {
                        tracing::warn!(location = %purge.location, %other, "purge abandoned: a table or view lies there now");
                        Ok(true)
                    }
                    None => {
                        self.files
                            .for_catalog(record)
                            .delete_prefix(&purge.location, self.settings.purge_batch_files.max(1))
                            .await
                    }
                },
            },
        };
        let id = purge.id.clone();
        let mutation = match deleted {
            Ok(true) => Mutation::FinishPurge { id },
            // Stopped at its bound: the next round is due at once.
            Ok(false) => Mutation::DeferPurge {
                id,
                attempts: purge.attempts,
                next_ms: now_ms(),
            },
            Err(e) => {
                let attempts = purge.attempts + 1;
                tracing::warn!(location = %purge.location, attempts, error = %e, "purge round failed; retrying later");
                Mutation::DeferPurge {
                    id,
                    attempts,
                    next_ms: now_ms() + retry_delay_ms(attempts),
                }
            }
        };
        let finished = matches!(mutation, Mutation::FinishPurge { .. });
        let ctx = RequestContext::system();
        self.write(&ctx, mutation, &Outcome::NoContent, Vec::new())
            .await?;
        Ok(finished)
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

#[cfg(test)]
mod tests {
    use super::retry_delay_ms;

    #[test]
    fn failed_purges_back_off_to_an_hour() {
        assert_eq!(retry_delay_ms(1), 1_000);
        assert_eq!(retry_delay_ms(2), 2_000);
        assert_eq!(retry_delay_ms(5), 16_000);
        assert_eq!(retry_delay_ms(13), 3_600_000);
        assert_eq!(retry_delay_ms(i64::MAX), 3_600_000);
        assert_eq!(retry_delay_ms(0), 1_000);
    }
}
