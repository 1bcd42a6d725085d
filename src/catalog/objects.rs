//! What tables and views share: the optimistic commit loop, metadata file writes and the
//! translation of store errors into messages that name the entity.

use std::future::Future;

use super::error::{CatalogError, CatalogResult, Missing};
use super::ident::Ident;
use super::namespaces::namespace_missing;
use super::Catalog;
use crate::storage;
use crate::store::{ObjectKind, ObjectWrite, StoreError, StoredObject};

pub fn object_missing(kind: ObjectKind, ident: &Ident) -> CatalogError {
    match kind {
        ObjectKind::Table => {
            CatalogError::not_found(Missing::Table, format!("Table does not exist: {ident}"))
        }
        ObjectKind::View => {
            CatalogError::not_found(Missing::View, format!("View does not exist: {ident}"))
        }
    }
}

/// "Table already exists" when the name is taken by the same kind, "... with same name"
/// when by the other kind: tables and views share one name space.
pub fn object_exists(wanted: ObjectKind, existing: ObjectKind, ident: &Ident) -> CatalogError {
    CatalogError::AlreadyExists(match (wanted, existing) {
        (ObjectKind::Table, ObjectKind::Table) => format!("Table already exists: {ident}"),
        (ObjectKind::View, ObjectKind::View) => format!("View already exists: {ident}"),
        (ObjectKind::Table, ObjectKind::View) => {
            format!("View with same name already exists: {ident}")
        }
        (ObjectKind::View, ObjectKind::Table) => {
            format!("Table with same name already exists: {ident}")
        }
    })
}

/// Translates the store errors of a write on objects of `kind`.
pub fn object_error(kind: ObjectKind, error: StoreError) -> CatalogError {
    match error {
        StoreError::ObjectMissing(ident) => object_missing(kind, &ident),
        StoreError::ObjectExists {
            ident,
            kind: existing,
        } => object_exists(kind, existing, &ident),
        StoreError::NamespaceMissing(ns) => namespace_missing(&ns),
        StoreError::LocationOverlap { location, other } => CatalogError::bad_request(format!(
            "Location {location} overlaps the location of {other}"
        )),
        other => other.into(),
    }
}

/// Translates the store errors of a rename; Java's wording when the target name is taken.
pub fn rename_error(kind: ObjectKind, from: &Ident, error: StoreError) -> CatalogError {
    match error {
        StoreError::ObjectExists {
            ident,
            kind: existing,
        } if !(kind == ObjectKind::Table && existing == ObjectKind::Table) => {
            let existing = match existing {
                ObjectKind::Table => "Table",
                ObjectKind::View => "View",
            };
            CatalogError::AlreadyExists(format!(
                "Cannot rename {from} to {ident}. {existing} already exists"
            ))
        }
        other => object_error(kind, other),
    }
}

/// Whether a failed store write certainly changed nothing.
fn is_definitely_rejected(error: &StoreError) -> bool {
    !matches!(error, StoreError::Unavailable(_) | StoreError::Internal(_))
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

    /// Writes a new metadata file (never overwriting one) off the async threads.
    async fn write_metadata_file(&self, location: String, json: String) -> CatalogResult<()> {
        let fsync = self.settings.fsync;
        tokio::task::spawn_blocking(move || {
            storage::write_new_file(&location, json.as_bytes(), fsync)
        })
        .await
        .map_err(CatalogError::internal)?
    }

    /// The commit loop. `prepare` gets the current state of the objects, checks
    /// requirements and applies updates; the new metadata files are written (durably,
    /// never over an existing file) and the store then swaps all pointers atomically if
    /// none moved meanwhile.
    ///
    /// Commits to the same objects first queue on a lock in this process. The first
    /// attempt is optimistic (no database lock held while files are written). If it loses
    /// the race to another node, every later attempt runs under the store's lock on the
    /// objects, so it queues behind the other node's commit instead of racing it again
    /// (racing again would let a busy node win every round). Each attempt re-reads the
    /// state, so requirements are always checked against what the commit will replace.
    pub(super) async fn commit_with_retry<F, Fut>(
        &self,
        catalog: &str,
        kind: ObjectKind,
        idents: &[Ident],
        prepare: F,
    ) -> CatalogResult<Vec<ObjectWrite>>
    where
        F: Fn(Vec<Option<StoredObject>>) -> Fut,
        Fut: Future<Output = CatalogResult<Vec<ObjectWrite>>>,
    {
        let _guards = self.commit_locks.lock(catalog, idents).await;
        let attempts = self.settings.max_commit_attempts.max(1);
        for attempt in 1..=attempts {
            let locked = if attempt == 1 {
                None
            } else {
                match self.store.lock_objects(catalog, idents).await {
                    Ok(locked) => Some(locked),
                    // Locking lost to a deadlock (the database chose this one): retry.
                    Err(StoreError::Conflict) if attempt < attempts => continue,
                    Err(e) => return Err(object_error(kind, e)),
                }
            };
            let current = match &locked {
                Some(locked) => locked.current().to_vec(),
                None => {
                    let mut current = Vec::with_capacity(idents.len());
                    for ident in idents {
                        current.push(self.store.load_object(catalog, ident).await?);
                    }
                    current
                }
            };
            let writes = prepare(current).await?;
            if writes.is_empty() {
                return Ok(writes);
            }
            for (i, w) in writes.iter().enumerate() {
                if let Err(e) = self
                    .write_metadata_file(w.metadata_location.clone(), w.metadata.clone())
                    .await
                {
                    for written in &writes[..i] {
                        storage::remove_file_quietly(&written.metadata_location);
                    }
                    return Err(e);
                }
            }
            let committed = match locked {
                Some(locked) => locked.commit(&writes).await,
                None => self.store.commit_objects(catalog, &writes).await,
            };
            match committed {
                Ok(()) => return Ok(writes),
                Err(error) => {
                    // Remove the new files only when the store says for certain that
                    // nothing was committed. After a lost connection or an internal
                    // error the outcome is unknown, and the pointer may already name
                    // them: an orphan file is harmless, a dangling pointer is not.
                    if is_definitely_rejected(&error) {
                        for w in &writes {
                            storage::remove_file_quietly(&w.metadata_location);
                        }
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
                        other => return Err(object_error(kind, other)),
                    }
                }
            }
        }
        unreachable!("the loop returns on its last attempt")
    }
}
