//! What tables and views share, written once: list, create, register, rename, drop, and
//! the optimistic commit loop with its metadata file writes. `tables.rs` and `views.rs`
//! keep only what differs (how metadata is built and changed), so a cross-cutting
//! feature (authorization, events, another file store) is added here, in one place.

use std::future::Future;

use serde::Deserialize;

use super::error::{object_exists, object_missing, CatalogError, CatalogResult};
use super::locations::check_allowed;
use super::pagination::{listed, ListRequest, Listed};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::{identifier_json, Draft, Operation};
use crate::model::{CatalogId, CatalogRecord, CatalogType, Ident, Namespace, ObjectKind};
use crate::store::{
    Applied, Mutation, ObjectWrite, PendingPurge, StoreError, StoredObject, Unchanged,
};

/// Whether the metadata files of a commit are new (written by the commit loop, removed if
/// the commit fails) or exist already (a register: never written, never removed; also a
/// generic table, which has no metadata file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MetadataFiles {
    New,
    Existing,
}

/// The table or view flavour of something (a privilege, an event's operation). A generic
/// table takes the table's: Polaris guards both with the same privileges.
pub(super) fn by_kind<T>(kind: ObjectKind, table: T, view: T) -> T {
    match kind {
        ObjectKind::Table | ObjectKind::GenericTable => table,
        ObjectKind::View => view,
    }
}

/// An EXTERNAL catalog's tables and views follow their source catalog through
/// notifications only (as Polaris's static facades do): a REST write to one is a 400
/// (but for a drop without purge, and a register that replaces nothing, which Polaris
/// allows too). Generic tables are not mirrored, and stay writable.
pub(super) fn require_internal(
    catalog: &CatalogRecord,
    kind: ObjectKind,
    action: &str,
) -> CatalogResult<()> {
    if catalog.catalog_type == CatalogType::External && kind != ObjectKind::GenericTable {
        return Err(CatalogError::bad_request(format!(
            "Cannot {action} a {} in catalog {}: it is EXTERNAL, and its tables and views change only through notifications",
            kind.title().to_lowercase(),
            catalog.name
        )));
    }
    Ok(())
}

/// A table or view as a securable (a generic table is a table to grants).
pub(super) fn securable(kind: ObjectKind, ident: &Ident) -> Securable {
    match kind {
        ObjectKind::Table | ObjectKind::GenericTable => Securable::table(ident),
        ObjectKind::View => Securable::view(ident),
    }
}

/// Whether a failed store write certainly changed nothing.
fn is_definitely_rejected(error: &StoreError) -> bool {
    !matches!(
        error,
        StoreError::Unavailable(_) | StoreError::Internal(_) | StoreError::OutcomeUnknown(_)
    )
}

/// The objects of a multi-object commit that it read (as `read`, in `idents`' order) but
/// does not write: the store commits it only if they are still so (`Unchanged`). A
/// single object's commit writes it or makes no store write at all.
fn unchanged(
    catalog: CatalogId,
    idents: &[Ident],
    read: Vec<Option<String>>,
    writes: &[ObjectWrite],
) -> Vec<Unchanged> {
    idents
        .iter()
        .zip(read)
        .filter(|(ident, _)| !writes.iter().any(|w| &w.ident == *ident))
        .map(|(ident, metadata_location)| Unchanged {
            catalog,
            ident: ident.clone(),
            metadata_location,
        })
        .collect()
}

/// Whether every object in `tipped` is among the writes: only a write carries the
/// compare-and-swap that fails if the in-flight write its check relied on fails.
fn all_written(tipped: &[&Ident], prepared: &[Prepared]) -> bool {
    tipped
        .iter()
        .all(|ident| prepared.iter().any(|p| &p.write.ident == *ident))
}

/// A metadata file named by a register request, parsed: its JSON as stored, the
/// object's location and uuid.
pub(super) struct Registered {
    pub metadata: String,
    pub location: String,
    pub uuid: String,
}

/// A write the commit loop will make, and the events that announce it.
pub(super) struct Prepared {
    pub write: ObjectWrite,
    pub events: Vec<Draft>,
}

/// The event of a table or view write: its identity and where its metadata was and is.
pub(super) fn write_event(operation: Operation, write: &ObjectWrite, uuid: &str) -> Draft {
    let event = Draft::object(operation, &write.ident, uuid)
        .with("metadata-location", write.metadata_location.clone());
    match &write.expected_metadata_location {
        Some(before) => event.with("metadata-location-before", before.clone()),
        None => event,
    }
}

/// A value as JSON for an event's data.
pub(super) fn to_value<T: serde::Serialize>(value: &T) -> CatalogResult<serde_json::Value> {
    serde_json::to_value(value).map_err(CatalogError::internal)
}

/// What drops, renames, undrops and purges need of a stored table's or view's metadata
/// document, read without building the whole model.
pub(super) struct Identity {
    pub uuid: String,
    /// The location as the metadata spells it (the store keeps a canonical form, e.g.
    /// `azure://…` for an `abfss://` table); files are deleted under this one.
    pub location: String,
}

pub(super) fn identity(kind: ObjectKind, metadata: &str) -> CatalogResult<Identity> {
    #[derive(Deserialize)]
    struct Parts {
        #[serde(rename = "table-uuid")]
        table: Option<String>,
        #[serde(rename = "view-uuid")]
        view: Option<String>,
        #[serde(rename = "generic-table-uuid")]
        generic: Option<String>,
        location: Option<String>,
        #[serde(rename = "base-location")]
        base_location: Option<String>,
    }
    let parts: Parts = serde_json::from_str(metadata).map_err(CatalogError::internal)?;
    let (uuid, location) = match kind {
        ObjectKind::Table => (parts.table, parts.location),
        ObjectKind::View => (parts.view, parts.location),
        // A generic table may have no location: nothing of it is ever purged.
        ObjectKind::GenericTable => (parts.generic, parts.base_location.or(Some(String::new()))),
    };
    let missing = |what| CatalogError::internal(anyhow::anyhow!("stored metadata has no {what}"));
    Ok(Identity {
        uuid: uuid.ok_or_else(|| missing("uuid"))?,
        location: location.ok_or_else(|| missing("location"))?,
    })
}

/// The event of a drop (also of a table replaced by a register over its name).
pub(super) fn drop_event(
    kind: ObjectKind,
    ident: &Ident,
    uuid: &str,
    before: &str,
    purge: bool,
) -> Draft {
    match kind {
        ObjectKind::Table => Draft::object(Operation::DropTable, ident, uuid)
            .with("metadata-location-before", before)
            .with("purge", purge),
        ObjectKind::View => {
            Draft::object(Operation::DropView, ident, uuid).with("metadata-location-before", before)
        }
        // It has no metadata file, and nothing of it is purged.
        ObjectKind::GenericTable => Draft::object(Operation::DropGenericTable, ident, uuid),
    }
}

impl Catalog {
    /// Loads a table or view only if it is of `kind`.
    pub(super) async fn load_kind(
        &self,
        catalog: &str,
        ident: &Ident,
        kind: ObjectKind,
    ) -> CatalogResult<Option<StoredObject>> {
        Ok(self
            .store
            .load_object(catalog, ident)
            .await?
            .filter(|o| o.kind == kind))
    }

    pub(super) async fn list_objects(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        kind: ObjectKind,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Ident>> {
        let list_privilege = by_kind(kind, Privilege::TABLE_LIST, Privilege::VIEW_LIST);
        ctx.require(catalog, list_privilege, &Securable::namespace(namespace))?;
        let page = self
            .store
            .list_objects(catalog, namespace, kind, &list.to_page_request()?)
            .await?;
        Ok(listed(page, |name| Ident {
            namespace: namespace.clone(),
            name,
        }))
    }

    /// Creates a table or view from a prepared first write, unless the name is taken.
    pub(super) async fn create_object(
        &self,
        ctx: &RequestContext,
        catalog: &CatalogRecord,
        write: ObjectWrite,
        event: Draft,
        outcome: impl Fn(&ObjectWrite) -> Outcome,
    ) -> CatalogResult<ObjectWrite> {
        let create = by_kind(write.kind, Privilege::TABLE_CREATE, Privilege::VIEW_CREATE);
        ctx.require(
            &catalog.name,
            create,
            &Securable::namespace(&write.ident.namespace),
        )?;
        require_internal(catalog, write.kind, "create")?;
        let idents = [write.ident.clone()];
        let files = match write.kind {
            ObjectKind::GenericTable => MetadataFiles::Existing,
            ObjectKind::Table | ObjectKind::View => MetadataFiles::New,
        };
        let writes = self
            .commit_with_retry(
                ctx,
                catalog,
                &idents,
                files,
                |current| {
                    let result = match current.into_iter().next().flatten() {
                        Some(existing) => {
                            Err(object_exists(write.kind, existing.kind, &write.ident))
                        }
                        None => Ok(vec![Prepared {
                            write: write.clone(),
                            events: vec![event.clone()],
                        }]),
                    };
                    async move { result }
                },
                |writes| outcome(&writes[0]),
            )
            .await?;
        Ok(writes.into_iter().next().expect("a create has one write"))
    }

    /// Reads and parses an existing metadata file of the catalog (a register's, a
    /// notification's), and returns it with its object's location in canonical form.
    /// Only files inside the catalog's locations are read: a request must not be a way to
    /// read (or probe for) arbitrary files of the server; the location it names must be
    /// allowed too.
    pub(super) async fn read_registered(
        &self,
        record: &CatalogRecord,
        metadata_location: &str,
        parse: impl FnOnce(&[u8]) -> CatalogResult<Registered>,
    ) -> CatalogResult<(Registered, String)> {
        check_allowed(record, metadata_location)?;
        let bytes = self
            .files
            .for_catalog(record)
            .read(metadata_location, self.settings.max_metadata_file_bytes)
            .await?;
        let registered = parse(&bytes)?;
        let canonical = check_allowed(record, &registered.location)?;
        Ok((registered, canonical))
    }

    /// Registers an existing metadata file as a table or view (with `overwrite`, points
    /// an existing one of the same kind at it).
    #[allow(clippy::too_many_arguments)] // each is one part of the request
    pub(super) async fn register_object(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        kind: ObjectKind,
        ident: &Ident,
        metadata_location: &str,
        overwrite: bool,
        parse: impl FnOnce(&[u8]) -> CatalogResult<Registered>,
        outcome: impl Fn(&ObjectWrite) -> Outcome,
    ) -> CatalogResult<ObjectWrite> {
        let create = by_kind(kind, Privilege::TABLE_CREATE, Privilege::VIEW_CREATE);
        ctx.require(catalog, create, &Securable::namespace(&ident.namespace))?;
        if overwrite {
            let replace = by_kind(
                kind,
                Privilege::TABLE_FULL_METADATA,
                Privilege::VIEW_FULL_METADATA,
            );
            ctx.require(catalog, replace, &securable(kind, ident))?;
        }
        let record = self.get_catalog(catalog).await?;
        // Polaris registers into an EXTERNAL catalog too, but never over an object.
        if overwrite {
            require_internal(&record, kind, "register over")?;
        }
        self.namespace_properties(catalog, &ident.namespace).await?;
        let (registered, canonical) = self
            .read_registered(&record, metadata_location, parse)
            .await?;
        let writes = self
            .commit_with_retry(
                ctx,
                &record,
                std::slice::from_ref(ident),
                MetadataFiles::Existing,
                |current| {
                    let replaced = match current.into_iter().next().flatten() {
                        Some(object) if overwrite && object.kind == kind => Ok(Some(object)),
                        Some(object) => Err(object_exists(kind, object.kind, ident)),
                        None => Ok(None),
                    };
                    let write = replaced.and_then(|replaced| {
                        // Registering another table (or view) over this name replaces the
                        // one there: its own history ends with a drop.
                        let mut events = Vec::new();
                        let mut expected = None;
                        if let Some(old) = replaced {
                            let old_uuid = identity(kind, &old.metadata)?.uuid;
                            if old_uuid != registered.uuid {
                                let before = &old.metadata_location;
                                events.push(drop_event(kind, ident, &old_uuid, before, false));
                            }
                            expected = Some(old.metadata_location);
                        }
                        let write = ObjectWrite {
                            ident: ident.clone(),
                            kind,
                            expected_metadata_location: expected,
                            metadata_location: metadata_location.to_string(),
                            metadata: registered.metadata.clone(),
                            location: canonical.clone(),
                            check_location: true,
                        };
                        let operation =
                            by_kind(kind, Operation::RegisterTable, Operation::RegisterView);
                        events.push(write_event(operation, &write, &registered.uuid));
                        Ok(vec![Prepared { write, events }])
                    });
                    async move { write }
                },
                |writes| outcome(&writes[0]),
            )
            .await?;
        Ok(writes.into_iter().next().expect("a register has one write"))
    }

    pub(super) async fn rename_object(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        kind: ObjectKind,
        from: &Ident,
        to: &Ident,
    ) -> CatalogResult<()> {
        let drop = by_kind(kind, Privilege::TABLE_DROP, Privilege::VIEW_DROP);
        let create = by_kind(kind, Privilege::TABLE_CREATE, Privilege::VIEW_CREATE);
        ctx.require(catalog, drop, &securable(kind, from))?;
        ctx.require(catalog, create, &Securable::namespace(&to.namespace))?;
        let record = self.get_catalog(catalog).await?;
        require_internal(&record, kind, "rename")?;
        let _guards = self.commit_locks.lock(record.id, &[from, to]).await;
        let operation = by_kind(kind, Operation::RenameTable, Operation::RenameView);
        let record = &record;
        self.with_object(record, kind, from, |object| async move {
            let uuid = identity(kind, &object.metadata)?.uuid;
            let event = Draft::object(operation, from, &uuid)
                .with("source", identifier_json(from))
                .with("destination", identifier_json(to));
            let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
            let rename = Mutation::RenameObject {
                catalog: record.id,
                kind,
                from: from.clone(),
                to: to.clone(),
                expected: object.metadata_location,
            };
            let mut batch = self.batch(ctx, rename, &Outcome::NoContent, events);
            let (old, new) = (securable(kind, from), securable(kind, to));
            self.grants_follow(&mut batch, &record.name, &old, Some(&new))
                .await?;
            Ok(self.apply(batch, None).await?)
        })
        .await?;
        Ok(())
    }

    /// Runs `change` on the current pointer of a table or view, again on a fresh one if
    /// another node moved it meanwhile (`change` makes its write conditional on it).
    async fn with_object<T, F, Fut>(
        &self,
        record: &CatalogRecord,
        kind: ObjectKind,
        ident: &Ident,
        change: F,
    ) -> CatalogResult<T>
    where
        F: Fn(StoredObject) -> Fut,
        Fut: Future<Output = CatalogResult<T>>,
    {
        let attempts = self.settings.max_commit_attempts.max(1);
        for attempt in 1..=attempts {
            let object = self
                .load_kind(&record.name, ident, kind)
                .await?
                .ok_or_else(|| object_missing(kind, ident))?;
            match change(object).await {
                Err(CatalogError::CommitFailed(_)) if attempt < attempts => continue,
                other => return other,
            }
        }
        unreachable!("the loop returns on its last attempt")
    }

    /// Removes a table or view. `purge`: whether the request asked for its files to go
    /// too (told in the event). With a drop retention, the object is kept recoverable
    /// (`dropped.rs`) and its files stay until it expires; without one, a purge is
    /// recorded with the drop and returned, to be carried out now.
    pub(super) async fn drop_object(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        kind: ObjectKind,
        ident: &Ident,
        purge: bool,
    ) -> CatalogResult<Option<PendingPurge>> {
        let drop = by_kind(kind, Privilege::TABLE_DROP, Privilege::VIEW_DROP);
        ctx.require(catalog, drop, &securable(kind, ident))?;
        let record = self.get_catalog(catalog).await?;
        if purge {
            // The files are the source catalog's.
            require_internal(&record, kind, "purge")?;
        }
        let _guards = self.commit_locks.lock(record.id, &[ident]).await;
        let target = &record;
        let dropped = self
            .with_object(target, kind, ident, |object| async move {
                let record = target;
                let Identity { uuid, location } = identity(kind, &object.metadata)?;
                let mut event = drop_event(kind, ident, &uuid, &object.metadata_location, purge);
                // A generic table's drop is final, as in Polaris: undrop restores
                // Iceberg metadata, which it has none of.
                let retain = match kind {
                    ObjectKind::GenericTable => None,
                    _ => self.retention(purge),
                };
                let purge_now = match &retain {
                    None if purge => self.purge_of(record, &location),
                    _ => None,
                };
                if let Some(retention) = &retain {
                    event = event
                        .with("dropped-id", retention.id.clone())
                        .with("recoverable-until-ms", retention.expires_ms);
                }
                let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
                let drop = Mutation::DropObject {
                    catalog: record.id,
                    kind,
                    ident: ident.clone(),
                    expected: object.metadata_location,
                    retain,
                };
                let mut batch = self.batch(ctx, drop, &Outcome::NoContent, events);
                batch.purge = purge_now.clone();
                self.grants_follow(&mut batch, &record.name, &securable(kind, ident), None)
                    .await?;
                let applied = self.apply(batch, None).await?;
                Ok((applied, purge_now))
            })
            .await?;
        match dropped {
            (Applied::Dropped(_), purge) => Ok(purge),
            _ => Err(object_missing(kind, ident)),
        }
    }

    /// Writes the new metadata files of a commit (never overwriting one); on failure,
    /// removes the ones already written. Returns whether the store must keep their text
    /// until they are synced (`FileStore::journals`).
    async fn write_metadata_files(
        &self,
        catalog: &CatalogRecord,
        writes: &[ObjectWrite],
    ) -> CatalogResult<bool> {
        let files = self.files.for_catalog(catalog);
        for (i, w) in writes.iter().enumerate() {
            let written = files
                .write_new(&w.metadata_location, w.metadata.as_bytes())
                .await;
            if let Err(e) = written {
                let written: Vec<String> = writes[..i]
                    .iter()
                    .map(|w| w.metadata_location.clone())
                    .collect();
                self.remove_files_quietly(catalog, &written).await;
                return Err(e.into());
            }
        }
        Ok(files.journals())
    }

    /// Best-effort removal of files this server wrote but will not point at.
    async fn remove_files_quietly(&self, catalog: &CatalogRecord, locations: &[String]) {
        let files = self.files.for_catalog(catalog);
        for location in locations {
            if let Err(e) = files.delete(location).await {
                tracing::warn!(file = %location, error = %e, "could not remove an unused metadata file");
            }
        }
    }

    /// The commit loop. `prepare` gets the current state of the objects, checks
    /// requirements and applies updates (and drafts each write's events); the new
    /// metadata files are written (durably, never over an existing file) and the store
    /// then swaps all pointers atomically if none moved meanwhile, together with the
    /// request's idempotency record (whose outcome `outcome` computes from the writes)
    /// and the events. An empty set of writes (nothing
    /// changed) is returned without a store write.
    ///
    /// Commits to the same objects first queue on a lock in this process. The first
    /// attempt is optimistic (no database lock held while files are written). If it loses
    /// the race to another node, every later attempt runs under the store's lock on the
    /// objects, so it queues behind the other node's commit instead of racing it again
    /// (racing again would let a busy node win every round). Each attempt re-reads the
    /// state, so requirements are always checked against what the commit will replace.
    pub(super) async fn commit_with_retry<F, Fut>(
        &self,
        ctx: &RequestContext,
        catalog: &CatalogRecord,
        idents: &[Ident],
        files: MetadataFiles,
        prepare: F,
        outcome: impl Fn(&[ObjectWrite]) -> Outcome,
    ) -> CatalogResult<Vec<ObjectWrite>>
    where
        F: Fn(Vec<Option<StoredObject>>) -> Fut,
        Fut: Future<Output = CatalogResult<Vec<Prepared>>>,
    {
        let ident_refs: Vec<&Ident> = idents.iter().collect();
        let mut guards = Some(
            self.commit_locks
                .lock_keeping_tips(catalog.id, &ident_refs)
                .await,
        );
        let attempts = self.settings.max_commit_attempts.max(1);
        for attempt in 1..=attempts {
            if guards.is_none() {
                // A pipelined first attempt let go of the lock (see `locks.rs`).
                guards = Some(self.commit_locks.lock(catalog.id, &ident_refs).await);
            }
            let locked = if attempt == 1 {
                None
            } else {
                // Redone on the stored state: no tip describes it any more.
                self.commit_locks.forget_tips(catalog.id, idents);
                match self.store.lock_objects(catalog.id, idents).await {
                    Ok(locked) => Some(locked),
                    // Locking lost to a deadlock (the database chose this one): retry.
                    Err(StoreError::Conflict) if attempt < attempts => continue,
                    Err(e) => {
                        crate::metrics::record_commit("failed");
                        return Err(e.into());
                    }
                }
            };
            // What each object was read as, for those the commit does not write.
            let mut read: Vec<Option<String>> = Vec::new();
            let prepared = loop {
                // The objects read from a tip (a write still in flight).
                let mut tipped: Vec<&Ident> = Vec::new();
                let current = match &locked {
                    Some(locked) => locked.current().to_vec(),
                    None => {
                        let mut current = Vec::with_capacity(idents.len());
                        for ident in idents {
                            let tip = self.commit_locks.tip(catalog.id, ident);
                            if tip.is_some() {
                                tipped.push(ident);
                            }
                            current.push(match tip {
                                Some(tip) => Some(tip),
                                None => self
                                    .store
                                    .load_object(&catalog.name, ident)
                                    .await
                                    .inspect_err(|_| crate::metrics::record_commit("failed"))?,
                            });
                        }
                        current
                    }
                };
                if idents.len() > 1 {
                    read = current
                        .iter()
                        .map(|o| o.as_ref().map(|o| o.metadata_location.clone()))
                        .collect();
                }
                match prepare(current).await {
                    // Refused on the state of a write still in flight: refuse only on
                    // what is committed (see `locks.rs`).
                    Err(_) if !tipped.is_empty() => {
                        self.commit_locks.settled(catalog.id, idents).await
                    }
                    // An object checked against a tip but not written (requirements
                    // only) has no compare-and-swap to fail if that write fails: wait
                    // for it, and check again against what is committed.
                    Ok(prepared) if !all_written(&tipped, &prepared) => {
                        self.commit_locks.settled(catalog.id, idents).await
                    }
                    prepared => break prepared,
                }
            }
            .inspect_err(|_| crate::metrics::record_commit("rejected"))?;
            let (writes, drafts): (Vec<ObjectWrite>, Vec<Vec<Draft>>) =
                prepared.into_iter().map(|p| (p.write, p.events)).unzip();
            let drafts: Vec<Draft> = drafts.into_iter().flatten().collect();
            if writes.is_empty() {
                return Ok(writes);
            }
            let journal_files = match files {
                // A file that cannot be written (a storage outage) fails the commit.
                MetadataFiles::New => self
                    .write_metadata_files(catalog, &writes)
                    .await
                    .inspect_err(|_| crate::metrics::record_commit("failed"))?,
                _ => false,
            };
            // The writes go to the store with the batch, and come back once committed
            // (`Applied::Committed`): no copy of their documents is kept here meanwhile.
            // What a refusal needs (their files, to remove) is kept aside.
            let locations: Vec<String> =
                writes.iter().map(|w| w.metadata_location.clone()).collect();
            // Set while the locks are held, before the writes go: no tip is read without
            // its object's lock. A store that does not pipeline drops them at once.
            let tips = locked
                .is_none()
                .then(|| self.commit_locks.set_tips(catalog.id, &writes));
            let events = self.events(ctx, Some((catalog.id, &catalog.name)), drafts);
            // The outcome (for a keyed request only) is made from the writes before they
            // move into the batch.
            let mut batch =
                self.batch_with(ctx, Mutation::None, || outcome(&writes).to_json(), events);
            batch.unchanged = unchanged(catalog.id, idents, read, &writes);
            batch.mutation = Mutation::CommitObjects {
                catalog: catalog.id,
                writes,
            };
            batch.journal_files = journal_files;
            let committed = match locked {
                Some(locked) => self.apply(batch, Some(locked)).await,
                None => {
                    let has_events = !batch.events.is_empty();
                    let started = std::time::Instant::now();
                    match self.store.enqueue(batch) {
                        // In the commit order: the next commit may build on it now.
                        Ok(ticket) => {
                            guards = None;
                            let applied = ticket.await;
                            drop(tips);
                            self.written(has_events, started, applied)
                        }
                        Err(batch) => {
                            drop(tips);
                            self.apply(*batch, None).await
                        }
                    }
                }
            };
            let error = match committed {
                Ok(Applied::Committed(writes)) => {
                    crate::metrics::record_commit("committed");
                    return Ok(writes);
                }
                // Every store answers a committed `CommitObjects` so (`Applied::of`).
                Ok(other) => {
                    return Err(CatalogError::Internal(anyhow::anyhow!(
                        "the store answered a commit with {other:?}"
                    )))
                }
                Err(error) => error,
            };
            crate::metrics::record_commit(match &error {
                StoreError::Conflict => "conflict",
                e if is_definitely_rejected(e) => "rejected",
                _ => "failed",
            });
            // Remove the new files only when the store says for certain that nothing was
            // committed. After a lost connection or an internal error the outcome is
            // unknown, and the pointer may already name them: an orphan file is
            // harmless, a dangling pointer is not.
            if files == MetadataFiles::New && is_definitely_rejected(&error) {
                for location in &locations {
                    self.parsed.forget(location);
                }
                self.remove_files_quietly(catalog, &locations).await;
            }
            match error {
                StoreError::Conflict if attempt < attempts => {
                    tracing::info!(
                        attempt,
                        "commit lost a race; retrying under a lock on fresh metadata"
                    );
                }
                StoreError::Conflict => {
                    return Err(CatalogError::CommitFailed(format!(
                        "Commit failed after {attempts} attempts: concurrent modifications"
                    )))
                }
                other => return Err(other.into()),
            }
        }
        unreachable!("the loop returns on its last attempt")
    }
}

#[cfg(test)]
mod tests {
    use super::super::locks::tests::{ident, write as object_write};
    use super::*;

    fn write(name: &str) -> Prepared {
        Prepared {
            write: object_write(name, "v1"),
            events: Vec::new(),
        }
    }

    #[test]
    fn an_object_checked_on_a_tip_must_be_written_to_rely_on_it() {
        let (a, b) = (ident("a"), ident("b"));
        // Nothing read from a tip: nothing to wait for, written or not.
        assert!(all_written(&[], &[]));
        assert!(all_written(&[], &[write("a")]));
        // Read from a tip and written: the write's compare-and-swap guards the check.
        assert!(all_written(&[&a], &[write("a"), write("b")]));
        // Read from a tip and only checked (a transaction's requirement-only table, or
        // a commit with no updates): nothing guards the check.
        assert!(!all_written(&[&a], &[]));
        assert!(!all_written(&[&a, &b], &[write("b")]));
    }

    #[test]
    fn a_commit_asserts_what_it_read_of_the_objects_it_does_not_write() {
        let (a, b, c) = (ident("a"), ident("b"), ident("c"));
        let read = vec![Some("la".to_string()), Some("lb".to_string()), None];
        let asserted = unchanged(
            CatalogId(7),
            &[a.clone(), b, c.clone()],
            read,
            &[write("b").write],
        );
        let asserted: Vec<_> = asserted
            .iter()
            .map(|u| (u.catalog, &u.ident, u.metadata_location.as_deref()))
            .collect();
        assert_eq!(
            asserted,
            vec![(CatalogId(7), &a, Some("la")), (CatalogId(7), &c, None)]
        );
        // Everything written: nothing to assert besides the writes' own swaps.
        assert!(unchanged(CatalogId(7), &[ident("b")], vec![None], &[write("b").write]).is_empty());
    }
}
