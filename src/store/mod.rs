//! Persistence of the catalog's state, behind one trait.
//!
//! A store keeps catalogs, namespaces and the *pointer* of every table and view: its
//! current metadata location plus a copy of that metadata document (so that loads never
//! touch the file system). Metadata files themselves are written by the catalog layer,
//! through `storage`, before it asks the store to swap a pointer.
//!
//! **One write seam.** Every change goes through [`Store::write`] (or, for a commit that
//! lost a race, [`LockedObjects::write`]) as one [`WriteBatch`]: a [`Mutation`] plus the
//! rows that must commit or roll back with it (the idempotency record, the security
//! document, the change events of the outbox). Each backend applies a batch in one
//! transaction in one function, so a row kind added to `WriteBatch` is written by every
//! mutation at once.
//!
//! **The outbox.** A batch's events get a global position in commit order (readers
//! resuming after position `p` never miss an event that commits later with a smaller
//! one) and a per-entity sequence. Relays keep their confirmed position and a lease
//! (one active relay per deployment) in the store too.
//!
//! Reads resolve the catalog by name inside their one query (one round trip); writes name
//! the catalog by the id of the record the catalog layer already loaded for its rules.
//!
//! Commits are compare-and-swap on the metadata location, so a store only needs
//! single-row conditional updates inside one transaction; unrelated entities never
//! contend. `tests/it/store_contract.rs` holds every backend to the same rules.

/// The metadata caches' documents (both stores), in an allocator heap of their own.
mod batch;
pub mod cache_text;
pub mod postgres;
mod properties;
pub mod reservations;
pub mod sqlite;

pub use batch::{
    Applied, EventRead, IdempotencyRecord, Mutation, NotificationStamp, ObjectKey, PolicyDocument,
    PolicyWrite, Presence, Reach, SecurityDocument, Unchanged, WriteBatch,
};
pub use properties::{ExpectedText, StoredProperties};

use std::sync::Arc;

use async_trait::async_trait;

use crate::events::StoredEvent;
use crate::model::{
    CatalogId, CatalogRecord, CatalogType, Ident, Namespace, ObjectKind, Properties,
};

/// What a store can answer besides success: facts about the stored state, in the store's
/// terms. The catalog turns each into a response in exactly one place.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("catalog {0} does not exist")]
    CatalogMissing(String),
    #[error("catalog {0} already exists")]
    CatalogExists(String),
    #[error("catalog {0} is not empty")]
    CatalogNotEmpty(String),
    #[error("namespace {0} does not exist")]
    NamespaceMissing(Namespace),
    #[error("namespace {0} already exists")]
    NamespaceExists(Namespace),
    #[error("namespace {0} is not empty")]
    NamespaceNotEmpty(Namespace),
    /// No `kind` by this name (there may be an object of the other kind).
    #[error("{} {ident} does not exist", kind.title())]
    ObjectMissing { kind: ObjectKind, ident: Ident },
    /// Creating a `wanted` under a name an `existing` object holds.
    #[error("{} {ident} already exists", existing.title())]
    ObjectExists {
        wanted: ObjectKind,
        existing: ObjectKind,
        ident: Ident,
    },
    /// Renaming a `kind` onto a name an `existing` object holds.
    #[error("cannot rename {from} to {to}: a {} has that name", existing.as_str())]
    RenameTargetExists {
        kind: ObjectKind,
        existing: ObjectKind,
        from: Ident,
        to: Ident,
    },
    #[error("location {location} overlaps the location of {other}")]
    LocationOverlap { location: String, other: Ident },
    /// A location where a purge is still deleting files (of a dropped table or view).
    #[error("location {location} overlaps {purging}, where a purge is deleting files")]
    LocationPurging { location: String, purging: String },
    /// A location inside, or around, one a staged create holds while its vended
    /// credentials live ([`Mutation::ReserveLocation`]).
    #[error("location {location} overlaps the location held for the staged create of {staged}")]
    LocationReserved { location: String, staged: Ident },
    /// A compare-and-swap lost against a concurrent write: re-read and retry.
    #[error("concurrent modification")]
    Conflict,
    /// The batch's idempotency key is held by another request (within its lifetime);
    /// nothing of the batch was applied.
    #[error("idempotency key already used")]
    IdempotencyKeyUsed,
    /// No dropped table or view with this id (never, or expired, purged or undropped).
    #[error("no dropped table or view has id {0}")]
    DroppedMissing(String),
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store failed while committing (its connection lost during COMMIT, or the
    /// commit's own sync failed): the write may or may not have landed.
    #[error("the outcome of the write is unknown: {0}")]
    OutcomeUnknown(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The stored pointer of a table or view.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredObject {
    pub kind: ObjectKind,
    pub metadata_location: String,
    /// The metadata document at `metadata_location`, as JSON text (shared with the cache).
    pub metadata: cache_text::MetadataText,
}

/// One change to a table or view pointer inside [`Mutation::CommitObjects`].
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectWrite {
    pub ident: Ident,
    pub kind: ObjectKind,
    /// `None`: the object must not exist yet (create). `Some`: the pointer must still name
    /// this metadata location (compare-and-swap).
    pub expected_metadata_location: Option<String>,
    pub metadata_location: String,
    pub metadata: String,
    /// The object's base location, normalised with a trailing `/`. No object's location
    /// may contain or lie inside another's (checked by the store inside the same
    /// transaction), so purging a table deletes nothing of another object.
    pub location: String,
    /// Whether `location` is new for this object (a create, or a commit that moved it):
    /// only then must the store check it against other objects' locations.
    pub check_location: bool,
}

/// How a dropped table or view is kept for undrop.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    /// The dropped record's id (a UUIDv7, chosen by the catalog).
    pub id: String,
    /// Whether the drop asked for the files to be purged (after the retention).
    pub purge: bool,
    /// When the drop happened; `expires_ms` is counted from the same clock reading, so
    /// the two always differ by exactly the retention.
    pub dropped_ms: i64,
    pub expires_ms: i64,
}

/// Files still to delete: everything under a dropped table's or view's location. Kept
/// until a round of deletion finds nothing left, so a purge survives crashes, outages
/// of the object store and its own bound per round.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingPurge {
    /// A UUIDv7, chosen by the catalog.
    pub id: String,
    pub catalog: CatalogId,
    /// The directory location whose files go (checked against the catalog's allowed
    /// locations when scheduled and again before each round).
    pub location: String,
    pub created_ms: i64,
    /// Failed rounds so far (a round that reached its bound is no failure).
    pub attempts: i64,
    /// When the next round is due.
    pub next_ms: i64,
}

/// A dropped table or view, recoverable until `expires_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedObject {
    pub id: String,
    pub catalog: CatalogId,
    pub ident: Ident,
    pub kind: ObjectKind,
    pub metadata_location: String,
    pub metadata: String,
    pub location: String,
    pub purge: bool,
    pub dropped_ms: i64,
    pub expires_ms: i64,
}

#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    /// Return only names strictly after this one.
    pub after: Option<String>,
    /// At most this many items; `None` = all.
    pub limit: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The last name of this page when more items follow.
    pub next_after: Option<String>,
}

/// The outcome of an enqueued write, once it is durable or refused.
pub type WriteTicket =
    std::pin::Pin<Box<dyn std::future::Future<Output = StoreResult<Applied>> + Send>>;

/// Tables or views locked for a commit that already lost a race: their current state,
/// read under a lock that keeps every other writer (on any node) out until `write`
/// finishes or the value is dropped (which releases the lock without writing).
#[async_trait]
pub trait LockedObjects: Send {
    /// The current pointers, in the order the objects were asked for.
    fn current(&self) -> &[Option<StoredObject>];
    /// Applies the batch as [`Store::write`] does, inside the lock, and releases it.
    async fn write(self: Box<Self>, batch: WriteBatch) -> StoreResult<Applied>;
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Succeeds when the store can be reached.
    async fn ping(&self) -> StoreResult<()>;
    /// Succeeds when the store can serve requests: reachable, and its schema has every
    /// migration this build knows (another node may be running an older or newer one).
    async fn ready(&self) -> StoreResult<()> {
        self.ping().await
    }
    /// `embedded` or `postgres`, for metrics.
    fn kind(&self) -> &'static str;
    /// The connection pool's state, where there is one.
    fn pool_state(&self) -> Option<crate::metrics::PoolState> {
        None
    }

    /// The only way to change the store: one batch, one transaction.
    async fn write(&self, batch: WriteBatch) -> StoreResult<Applied>;
    /// Where a store can order this node's writes (the embedded store, the database's
    /// only writer; PostgreSQL with group commit): fixes `batch`'s place in the commit
    /// order now (every batch enqueued later for the same objects applies after it) and
    /// returns the wait for its outcome, as [`Store::write`] would give it. Elsewhere the
    /// batch comes back, to be written with `write`. Other nodes' writes are not ordered
    /// with it: the compare-and-swap still decides between them.
    fn enqueue(&self, batch: WriteBatch) -> Result<WriteTicket, Box<WriteBatch>> {
        Err(Box::new(batch))
    }
    /// Locks the objects (existing or not) against other writers, for a commit that lost
    /// the optimistic race: queueing behind the lock is fair where racing again is not.
    async fn lock_objects(
        &self,
        catalog: CatalogId,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>>;

    async fn get_catalog(&self, name: &str) -> StoreResult<Option<CatalogRecord>>;
    async fn list_catalogs(&self) -> StoreResult<Vec<CatalogRecord>>;
    /// `CatalogMissing` when the catalog does not exist, `None` when the namespace does not.
    async fn get_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Arc<StoredProperties>>>;
    /// As [`Store::get_namespace`], for a caller about to replace the properties. A store
    /// that caches them may hand its copy over and forget it, so that the caller can change
    /// them in place instead of copying them (the write would evict the entry anyway; a
    /// read before it commits reads the database).
    async fn get_namespace_for_update(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Arc<StoredProperties>>> {
        self.get_namespace(catalog, namespace).await
    }
    /// Children of `parent` (the root for top-level namespaces), ordered by name.
    async fn list_namespaces(
        &self,
        catalog: &str,
        parent: &Namespace,
        page: &PageRequest,
    ) -> StoreResult<Page<Namespace>>;
    /// `CatalogMissing` when the catalog does not exist, `None` when the object does not.
    async fn load_object(&self, catalog: &str, ident: &Ident) -> StoreResult<Option<StoredObject>>;
    /// The table or view, other than `ident`, whose location contains `location` or lies
    /// inside it (in any catalog): for a staged create, whose location nothing claims
    /// before its commit, checked before credentials are vended for it.
    async fn overlapping_object(
        &self,
        catalog: CatalogId,
        location: &str,
        ident: &Ident,
    ) -> StoreResult<Option<Ident>>;
    /// The live holds of staged creates under `ident` whose commit has not landed (one
    /// per location staged): what `/sign` and `/credentials` serve a staged table from.
    async fn staged_holds(
        &self,
        catalog: CatalogId,
        ident: &Ident,
        now_ms: i64,
    ) -> StoreResult<Vec<reservations::Reservation>>;
    /// Names of the tables or views in a namespace, ordered by name.
    async fn list_objects(
        &self,
        catalog: &str,
        namespace: &Namespace,
        kind: ObjectKind,
        page: &PageRequest,
    ) -> StoreResult<Page<String>>;

    /// The live record of an idempotency key, if any (expired ones count as absent).
    async fn idempotency_record(
        &self,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<IdempotencyRecord>>;
    /// Deletes idempotency records that expired before `now_ms`; returns how many.
    async fn purge_expired_idempotency(&self, now_ms: i64) -> StoreResult<u64>;

    /// A catalog's dropped tables and views, newest first (`CatalogMissing` without the
    /// catalog).
    async fn list_dropped(&self, catalog: &str) -> StoreResult<Vec<DroppedObject>>;
    async fn get_dropped(&self, id: &str) -> StoreResult<Option<DroppedObject>>;
    /// Dropped tables and views whose retention ended before `now_ms`, oldest first.
    async fn expired_dropped(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<DroppedObject>>;
    /// Purges whose next round is due at `now_ms`, the longest-waiting first.
    async fn due_purges(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<PendingPurge>>;

    /// Outbox events in position order.
    async fn read_events(&self, read: &EventRead) -> StoreResult<Vec<StoredEvent>>;
    /// The smallest position still kept (events before it were deleted by retention),
    /// and the largest one written; `(0, 0)` for an empty outbox.
    async fn event_bounds(&self) -> StoreResult<(i64, i64)>;
    /// Takes (or renews) the lease of relay `name` for `holder` until `until_ms` if it is
    /// free, expired at `now_ms`, or already the holder's; returns its confirmed position.
    /// Names starting `expirer:` are leases of housekeeping tasks (one node at a time),
    /// whose position means nothing and holds no event back.
    async fn claim_relay(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<Option<i64>>;
    /// Records that the relay's broker confirmed everything up to `position`, and renews
    /// the lease; `false` (nothing recorded) if `holder` no longer holds it.
    async fn confirm_relay(
        &self,
        name: &str,
        holder: &str,
        position: i64,
        until_ms: i64,
    ) -> StoreResult<bool>;
    /// Deletes events older than `before_ms` that every relay has confirmed (all of them
    /// when there is no relay); returns how many.
    async fn purge_events(&self, before_ms: i64) -> StoreResult<u64>;

    /// The current security document (version 0 and `{}` before the first write).
    async fn security(&self) -> StoreResult<SecurityDocument>;
    /// Only the version of the security document: a cheap check whether a cached copy
    /// is still current.
    async fn security_version(&self) -> StoreResult<i64>;

    /// A catalog's policy document (version 0 and `{}` before the first write; dropping
    /// the catalog drops it).
    async fn policies(&self, catalog: CatalogId) -> StoreResult<PolicyDocument>;

    /// The timestamp of the last notification admitted for a table of an EXTERNAL
    /// catalog (kept after the table's drop; a namespace's or catalog's drop clears it).
    async fn notification_stamp(
        &self,
        catalog: CatalogId,
        ident: &Ident,
    ) -> StoreResult<Option<i64>>;
}

/// Columns of a catalog row, in the order both stores read them.
pub(crate) const CATALOG_COLUMNS: &str =
    "id, name, properties, storage_config, created_ms, updated_ms, version, catalog_type";

/// Properties and storage configs are kept as JSON text in both stores.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Internal(e.into()))
}

/// Properties as the JSON text both stores keep (compact, as serde_json writes it, with
/// `json_text`'s faster escaping); [`StoredProperties::new`] writes it too.
pub(crate) fn properties_json(properties: &Properties) -> String {
    crate::json_text::map_to_string(properties)
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Internal(e.into()))
}

/// A catalog row as both stores read it (`CATALOG_COLUMNS`).
pub(crate) struct CatalogRow {
    pub id: i64,
    pub name: String,
    pub properties: String,
    pub storage_config: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
    pub catalog_type: String,
}

impl CatalogRow {
    pub(crate) fn into_record(self) -> StoreResult<CatalogRecord> {
        Ok(CatalogRecord {
            id: CatalogId(self.id),
            name: self.name,
            catalog_type: CatalogType::parse(&self.catalog_type).ok_or_else(|| {
                StoreError::Internal(anyhow::anyhow!(
                    "catalog {} has an unknown type {:?}",
                    self.id,
                    self.catalog_type
                ))
            })?,
            properties: from_json(&self.properties)?,
            storage_config: from_json(&self.storage_config)?,
            connection: None,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            version: self.version,
        })
    }
}

/// An object kind as both stores keep it (`table`, `view`).
pub(crate) fn stored_kind(kind: &str) -> StoreResult<ObjectKind> {
    ObjectKind::parse(kind)
        .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("unknown object kind {kind}")))
}

/// Ready only when the schema has exactly this build's migrations (`applied` of them):
/// a node must not serve a schema it does not know.
pub(crate) fn check_schema(applied: usize, known: usize) -> StoreResult<()> {
    if applied != known {
        return Err(StoreError::Unavailable(format!(
            "schema at migration {applied}, this build needs {known}"
        )));
    }
    Ok(())
}

/// Columns of a dropped object's row, in the order both stores read them.
/// Columns of a pending purge, in the order both stores read them (`PendingPurge`).
pub(crate) const PURGE_COLUMNS: &str = "id, catalog_id, location, created_ms, attempts, next_ms";

pub(crate) const DROPPED_COLUMNS: &str = "id, catalog_id, namespace, name, kind, metadata_location, metadata, location, purge, dropped_ms, expires_ms";

/// A dropped object's row as both stores read it (`DROPPED_COLUMNS`).
pub(crate) struct DroppedRow {
    pub id: String,
    pub catalog: i64,
    pub namespace: String,
    pub name: String,
    pub kind: String,
    pub metadata_location: String,
    pub metadata: String,
    pub location: String,
    pub purge: bool,
    pub dropped_ms: i64,
    pub expires_ms: i64,
}

impl DroppedRow {
    pub(crate) fn into_dropped(self) -> StoreResult<DroppedObject> {
        Ok(DroppedObject {
            id: self.id,
            catalog: CatalogId(self.catalog),
            ident: stored_ident(&self.namespace, self.name),
            kind: stored_kind(&self.kind)?,
            metadata_location: self.metadata_location,
            metadata: self.metadata,
            location: self.location,
            purge: self.purge,
            dropped_ms: self.dropped_ms,
            expires_ms: self.expires_ms,
        })
    }
}

/// Cuts the one extra row a store fetched (it asks for `limit + 1`) and notes where the
/// next page starts.
pub(crate) fn page_of<T>(
    mut items: Vec<T>,
    page: &PageRequest,
    name_of: impl Fn(&T) -> String,
) -> Page<T> {
    let next_after = match page.limit {
        Some(limit) if items.len() > limit => {
            items.truncate(limit);
            items.last().map(name_of)
        }
        _ => None,
    };
    Page { items, next_after }
}

/// A table's or view's identifier from what a store row keeps: its namespace's key
/// (`Namespace::key`) and its name.
pub(crate) fn stored_ident(namespace_key: &str, name: String) -> Ident {
    Ident {
        namespace: Namespace::from_key(namespace_key),
        name,
    }
}

/// An identifier no table or view has (the root namespace holds none): for an overlap
/// check that leaves nothing out.
pub(crate) fn nobody() -> Ident {
    Ident {
        namespace: Namespace::root(),
        name: String::new(),
    }
}

/// The first of `purging` (purges' locations, as recorded) that overlaps the canonical
/// `location`: contains it or lies inside it. A purge deletes everything under its
/// location, so nothing may be created there until it is done.
pub(crate) fn purge_overlapping(location: &str, purging: Vec<String>) -> Option<String> {
    purging.into_iter().find(|purge| {
        crate::storage::location::canonical_location(purge)
            .is_ok_and(|p| p.starts_with(location) || location.starts_with(&p))
    })
}

/// The directory prefixes of a canonical location (which ends in `/`), shortest first,
/// the location itself last: the candidates for an object that contains it.
pub(crate) fn location_prefixes(location: &str) -> Vec<&str> {
    debug_assert!(location.ends_with('/'));
    let mut prefixes: Vec<&str> = location
        .match_indices('/')
        .map(|(i, _)| &location[..=i])
        .collect();
    prefixes.dedup();
    prefixes
}

/// The exclusive upper bound of the locations inside `location` (which ends in `/`):
/// they sort in `[location, location with its final '/' replaced by '0')`, as '0' is the
/// character after '/'.
pub(crate) fn location_upper_bound(location: &str) -> String {
    format!("{}0", &location[..location.len() - 1])
}

/// A store's answer to a create whose name is taken.
pub(crate) fn exists_error(wanted: ObjectKind, existing: ObjectKind, ident: &Ident) -> StoreError {
    StoreError::ObjectExists {
        wanted,
        existing,
        ident: ident.clone(),
    }
}
