//! What one write carries to a store: the [`Mutation`] and the rows that commit or roll
//! back with it ([`WriteBatch`]), the presence a write depends on ([`Presence`]), and what
//! a store answers ([`Applied`]). Plain data: each backend applies a batch in one
//! transaction (`sqlite/writes.rs`, `postgres/writes.rs`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::reservations::Reservation;
use super::{
    DroppedObject, ExpectedText, ObjectWrite, PendingPurge, Retention, StoreError, StoredObject,
    StoredProperties,
};
use crate::events::ChangeEvent;
use crate::model::{CatalogId, CatalogRecord, Ident, Namespace, ObjectKind, Properties};

/// A namespace, or a table, view or generic table, that a write needs to exist, or the
/// policy document a policy was found in ([`WriteBatch::present`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Presence {
    Namespace {
        catalog: CatalogId,
        namespace: Namespace,
    },
    /// An object of one of `kinds` under `ident`.
    Object {
        catalog: CatalogId,
        ident: Ident,
        kinds: Vec<ObjectKind>,
    },
    /// The catalog's policy document still at `version` (`Conflict` otherwise): policies
    /// live in that document, which the store does not read, so a grant on one asserts
    /// the version it found the policy in, and a policy's drop, which swaps the document,
    /// cannot commit unseen beside it. Any other change of the document fails the grant
    /// too; its caller then looks for the policy again.
    Policies { catalog: CatalogId, version: i64 },
}

impl Presence {
    /// The error for its absence.
    pub fn missing(&self) -> StoreError {
        match self {
            Presence::Namespace { namespace, .. } => {
                StoreError::NamespaceMissing(namespace.clone())
            }
            Presence::Object { ident, kinds, .. } => StoreError::ObjectMissing {
                kind: kinds.first().copied().unwrap_or(ObjectKind::Table),
                ident: ident.clone(),
            },
            Presence::Policies { .. } => StoreError::Conflict,
        }
    }
}

/// An object a commit read and checked (a transaction's requirements on a table it does
/// not change) but does not write: the batch commits only if it is still as read
/// (`Conflict` otherwise), as a write's compare-and-swap would assert for a written one.
/// Without it, two transactions on two nodes, each asserting the table the other
/// changes, could both commit (write skew).
#[derive(Debug, Clone, PartialEq)]
pub struct Unchanged {
    pub catalog: CatalogId,
    pub ident: Ident,
    /// The metadata location read; `None`: the object did not exist.
    pub metadata_location: Option<String>,
}

/// Every change a store can make. Each is applied atomically with the rest of its
/// [`WriteBatch`].
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Only the batch's own rows (e.g. the idempotency record of a request that changed
    /// nothing).
    None,
    CreateCatalog(CatalogRecord),
    /// Replaces the catalog's record if its version is still `expected_version`
    /// (`Conflict` otherwise). The caller computes the new record, version and time.
    UpdateCatalog {
        expected_version: i64,
        record: CatalogRecord,
    },
    /// `CatalogNotEmpty` while it holds namespaces.
    DropCatalog {
        catalog: CatalogId,
        name: String,
    },
    /// `NamespaceMissing` when the parent does not exist.
    CreateNamespace {
        catalog: CatalogId,
        namespace: Namespace,
        properties: Properties,
    },
    /// Replaces the properties if they are still those of `expected` (`Conflict`
    /// otherwise). Built by [`Mutation::update_namespace`].
    UpdateNamespace {
        catalog: CatalogId,
        namespace: Namespace,
        /// The new properties, with the text to store, written by the request so that
        /// the store's serial commit path does not (the embedded store's cache keeps
        /// them once committed).
        properties: Arc<StoredProperties>,
        /// The expected properties' text, exactly as the store read it (and its packed
        /// form, if the store attached one to the properties read).
        expected: ExpectedText,
    },
    /// `NamespaceNotEmpty` while it holds namespaces, tables or views.
    DropNamespace {
        catalog: CatalogId,
        namespace: Namespace,
    },
    /// All writes or none: `Conflict` when any compare-and-swap lost.
    CommitObjects {
        catalog: CatalogId,
        writes: Vec<ObjectWrite>,
    },
    /// Removes the object if it is of `kind` and still points at `expected` (`Conflict`
    /// if it moved); [`Applied::Dropped`] says what it pointed at.
    DropObject {
        catalog: CatalogId,
        kind: ObjectKind,
        ident: Ident,
        expected: String,
        /// Keep it recoverable (undrop) instead of forgetting it.
        retain: Option<Retention>,
    },
    /// Brings a dropped table or view back as `write` (a create: under its old name or a
    /// new one), and forgets the dropped record; `DroppedMissing` if there is none.
    Undrop {
        catalog: CatalogId,
        id: String,
        write: ObjectWrite,
    },
    /// Forgets a dropped table or view for good ([`Applied::Forgotten`] says what it
    /// was: its files are the caller's to purge).
    ForgetDropped {
        id: String,
    },
    /// A purge deleted every file it was after: its record goes (nothing if it is gone).
    FinishPurge {
        id: String,
    },
    /// A purge is not finished (it reached its bound, or failed): it is tried again at
    /// `next_ms`, having failed `attempts` times so far (nothing if it is gone).
    DeferPurge {
        id: String,
        attempts: i64,
        next_ms: i64,
    },
    /// Renames the object if it is of `kind` and still points at `expected` (`Conflict`
    /// if it moved): its events name the object that was renamed.
    RenameObject {
        catalog: CatalogId,
        kind: ObjectKind,
        from: Ident,
        to: Ident,
        expected: String,
    },
    /// Holds a staged create's location while what was delegated for it reaches it
    /// (see [`Reservation`]).
    ReserveLocation(Reservation),
    /// Keeps a validated scan or commit metrics report.
    RecordMetrics {
        catalog: CatalogId,
        ident: Ident,
        report: String,
    },
}

/// A table or view as the caches and commit queues key it: catalog id, namespace key
/// (`Namespace::key`), name.
pub type ObjectKey = (i64, String, String);

/// How far a mutation's effect on tables and views reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Only the objects it named (none for namespaces, purges and metrics).
    Named,
    /// Any object: a catalog created, changed or dropped may make names map to other ids.
    Everything,
}

impl Mutation {
    /// The swap of a namespace's properties from `expected` (as a store read them) to
    /// `properties`.
    pub fn update_namespace(
        catalog: CatalogId,
        namespace: Namespace,
        expected: &StoredProperties,
        properties: Properties,
    ) -> Mutation {
        let properties = StoredProperties::new(properties);
        Self::swap_namespace(catalog, namespace, expected.expected(), properties)
    }

    /// As [`Mutation::update_namespace`], with the expected text and the new properties
    /// already made ([`StoredProperties::change`]).
    pub fn swap_namespace(
        catalog: CatalogId,
        namespace: Namespace,
        expected: ExpectedText,
        properties: StoredProperties,
    ) -> Mutation {
        Mutation::UpdateNamespace {
            catalog,
            namespace,
            expected,
            properties: Arc::new(properties),
        }
    }

    /// Adds the tables and views this mutation writes to `into`. The embedded store's
    /// cache evicts them; PostgreSQL's commit queue orders groups that share one.
    pub fn objects_written(&self, into: &mut impl Extend<ObjectKey>) -> Reach {
        let key = |catalog: &CatalogId, ident: &Ident| {
            (catalog.0, ident.namespace.key(), ident.name.clone())
        };
        match self {
            Mutation::None
            | Mutation::CreateNamespace { .. }
            | Mutation::UpdateNamespace { .. }
            // Only an empty namespace can be dropped.
            | Mutation::DropNamespace { .. }
            | Mutation::ForgetDropped { .. }
            | Mutation::FinishPurge { .. }
            | Mutation::DeferPurge { .. }
            // A reservation changes no object (a create of its name is a write of its own).
            | Mutation::ReserveLocation(_)
            | Mutation::RecordMetrics { .. } => {}
            Mutation::CreateCatalog(_)
            | Mutation::UpdateCatalog { .. }
            | Mutation::DropCatalog { .. } => return Reach::Everything,
            Mutation::CommitObjects { catalog, writes } => {
                into.extend(writes.iter().map(|w| key(catalog, &w.ident)));
            }
            Mutation::DropObject { catalog, ident, .. } => into.extend([key(catalog, ident)]),
            Mutation::Undrop { catalog, write, .. } => into.extend([key(catalog, &write.ident)]),
            Mutation::RenameObject {
                catalog, from, to, ..
            } => into.extend([key(catalog, from), key(catalog, to)]),
        }
        Reach::Named
    }
}

/// A client's idempotency key with the outcome of the request that first used it, kept
/// for `expires_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub key: String,
    /// Identifies the request (method, path, body): a key reused for another request is
    /// refused.
    pub fingerprint: String,
    /// The first outcome, serialised by the catalog.
    pub outcome: String,
    pub expires_ms: i64,
}

/// The security model (principals, roles, grants, signing keys) as one document,
/// swapped by compare-and-swap on its version.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityDocument {
    /// 0 before the first write.
    pub version: i64,
    pub document: String,
}

/// A catalog's policies (Polaris's policy API) and their attachments, as one document
/// swapped by compare-and-swap on its version, as the security document is: a catalog
/// holds tens to hundreds of policies, and every change to them must see all the
/// attachments (one policy of a type per target).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDocument {
    /// 0 before the first write.
    pub version: i64,
    pub document: String,
}

/// A new policy document for a catalog, replacing the one at `expected_version`.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyWrite {
    pub catalog: CatalogId,
    pub expected_version: i64,
    pub document: String,
}

/// The timestamp of the notification an EXTERNAL catalog's table change admits
/// (Polaris's notifications: each must be newer than the last one admitted for the table).
#[derive(Debug, Clone, PartialEq)]
pub struct NotificationStamp {
    pub catalog: CatalogId,
    pub ident: Ident,
    /// The stamp the caller read (`None`: no notification for this table yet); a store
    /// holding another one answers `Conflict`.
    pub expected: Option<i64>,
    pub timestamp_ms: i64,
}

/// One atomic write: a mutation and the rows that commit or roll back with it.
#[derive(Debug, Clone)]
pub struct WriteBatch {
    pub mutation: Mutation,
    /// From the catalog's one clock (`model::now_ms`).
    pub now_ms: i64,
    /// Written in the same transaction; `IdempotencyKeyUsed` (and nothing applied) if a
    /// live record holds the key.
    pub idempotency: Option<IdempotencyRecord>,
    /// A new security document, replacing the one at `expected_version` (`Conflict` if
    /// it moved): grants change with the entities they are about (a new catalog's
    /// `catalog_admin` role commits with the catalog).
    pub security: Option<(i64, String)>,
    /// The security document must still be at this version once the mutation is applied
    /// (`Conflict` otherwise; 0: none yet), though the batch does not change it: a drop
    /// or rename of an object nobody holds grants on asserts that no grant on it arrived
    /// meanwhile. Checked after the mutation, whose row locks a grant's `present` waits
    /// for (PostgreSQL), so one of the two always sees the other.
    pub security_seen: Option<i64>,
    /// What the batch's grant is about, which must exist when it commits (the store's
    /// `NamespaceMissing` / `ObjectMissing` otherwise; for a policy, its catalog's policy
    /// document at the version it was found in, `Conflict` otherwise), held until then
    /// against a concurrent drop or rename.
    pub present: Option<Presence>,
    /// Objects read and checked but not written, which must be unchanged when the batch
    /// commits (PostgreSQL share-locks their rows until then).
    pub unchanged: Vec<Unchanged>,
    /// A catalog's new policy document (`Conflict` if its version moved): a namespace
    /// drop carries one, so that no policy is created in, or attached to, a namespace
    /// that goes meanwhile.
    pub policies: Option<PolicyWrite>,
    /// The notification this change admits (`Conflict` if the table's stamp moved).
    pub notification: Option<NotificationStamp>,
    /// The change's events, appended to the outbox last (in PostgreSQL the position
    /// counter is a row lock held until commit, so the shorter the better).
    pub events: Vec<ChangeEvent>,
    /// Files to delete once this commits (a drop's or a forget's purge): recorded with
    /// the change, so a crash between the commit and the deletion loses no purge.
    pub purge: Option<PendingPurge>,
    /// The new metadata files of a `CommitObjects` are not synced: keep their text
    /// until they are (the embedded store's file journal, `--fsync-journal`; the server
    /// turns that on only over the embedded store).
    pub journal_files: bool,
}

impl WriteBatch {
    pub fn new(mutation: Mutation, now_ms: i64) -> Self {
        WriteBatch {
            mutation,
            now_ms,
            idempotency: None,
            security: None,
            security_seen: None,
            present: None,
            unchanged: Vec::new(),
            policies: None,
            notification: None,
            events: Vec::new(),
            purge: None,
            journal_files: false,
        }
    }
}

/// Which events to read from the outbox.
#[derive(Debug, Clone, Default)]
pub struct EventRead {
    /// Only events after this position (0: from the start).
    pub after: i64,
    /// Only this catalog's events; `None`: every catalog's.
    pub catalog: Option<CatalogId>,
    pub limit: usize,
    /// Stops after the event whose body takes the events read past this many bytes
    /// (at least one event is read): a commit's event may be megabytes, and `limit` of
    /// them would all be held at once.
    pub max_bytes: usize,
}

/// What a write returns besides success.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Done,
    /// A `CommitObjects` batch's writes, handed back: the catalog answers from them
    /// instead of a copy of each new document kept beside the batch (tens of KB each).
    Committed(Vec<ObjectWrite>),
    /// The pointer a dropped table or view had (its files are the caller's to purge).
    Dropped(StoredObject),
    Forgotten(DroppedObject),
}

impl Applied {
    /// What a store answers for `batch` once it committed with `self`: every store calls
    /// this on each success, so a `CommitObjects` always comes back as `Committed`.
    pub fn of(self, batch: WriteBatch) -> Applied {
        match (self, batch.mutation) {
            (Applied::Done, Mutation::CommitObjects { writes, .. }) => Applied::Committed(writes),
            (applied, _) => applied,
        }
    }
}
