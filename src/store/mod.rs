//! Persistence of the catalog's state, behind one trait.
//!
//! A store keeps catalogs, namespaces and the *pointer* of every table and view: its
//! current metadata location plus a copy of that metadata document (so that loads never
//! touch the file system). Metadata files themselves are written by the catalog layer
//! before it asks the store to swap a pointer.
//!
//! Every method is one atomic step. Commits are compare-and-swap on the metadata
//! location, so a store only needs single-row conditional updates inside one transaction;
//! unrelated entities never contend.

pub mod postgres;
pub mod sqlite;

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::catalog::ident::{Ident, Namespace};

pub type Properties = BTreeMap<String, String>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("catalog {0} does not exist")]
    CatalogMissing(String),
    #[error("catalog already exists")]
    CatalogExists,
    #[error("catalog is not empty")]
    CatalogNotEmpty,
    #[error("namespace {0} does not exist")]
    NamespaceMissing(Namespace),
    #[error("namespace already exists")]
    NamespaceExists,
    #[error("namespace is not empty")]
    NamespaceNotEmpty,
    #[error("{0} does not exist")]
    ObjectMissing(Ident),
    #[error("{ident} already exists as a {kind:?}")]
    ObjectExists { ident: Ident, kind: ObjectKind },
    #[error("location {location} overlaps the location of {other}")]
    LocationOverlap { location: String, other: Ident },
    /// A compare-and-swap lost against a concurrent write: re-read and retry.
    #[error("concurrent modification")]
    Conflict,
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Table,
    View,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Table => "table",
            ObjectKind::View => "view",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "table" => Some(ObjectKind::Table),
            "view" => Some(ObjectKind::View),
            _ => None,
        }
    }
}

/// A catalog (the REST `prefix`): Polaris's catalog entity.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogRecord {
    pub name: String,
    pub properties: Properties,
    /// Polaris's `storageConfigInfo`, kept as sent.
    pub storage_config: serde_json::Value,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

/// The stored pointer of a table or view.
#[derive(Debug, Clone)]
pub struct StoredObject {
    pub kind: ObjectKind,
    pub metadata_location: String,
    /// The metadata document at `metadata_location`, as JSON text.
    pub metadata: String,
}

/// One change to a table or view pointer inside [`Store::commit_objects`].
#[derive(Debug, Clone)]
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PropertiesChange {
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    pub missing: Vec<String>,
}

/// Tables or views locked for a commit that already lost a race: their current state,
/// read under a lock that keeps every other writer (on any node) out until `commit`
/// finishes or the value is dropped (which releases the lock without writing).
#[async_trait]
pub trait LockedObjects: Send {
    /// The current pointers, in the order the objects were asked for.
    fn current(&self) -> &[Option<StoredObject>];
    /// Applies the writes as [`Store::commit_objects`] does, and releases the lock.
    async fn commit(self: Box<Self>, writes: &[ObjectWrite]) -> StoreResult<()>;
}

/// Columns of a catalog row, in the order both stores read them.
pub(crate) const CATALOG_COLUMNS: &str =
    "name, properties, storage_config, created_ms, updated_ms, version";

/// Properties and storage configs are kept as JSON text in both stores.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Internal(e.into()))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Internal(e.into()))
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

impl PropertiesChange {
    /// Removes, then sets, properties in place, and says what happened to each key.
    pub(crate) fn apply(
        properties: &mut Properties,
        removals: &[String],
        updates: &Properties,
    ) -> PropertiesChange {
        let mut change = PropertiesChange::default();
        for key in removals {
            if properties.remove(key).is_some() {
                change.removed.push(key.clone());
            } else {
                change.missing.push(key.clone());
            }
        }
        for (key, value) in updates {
            change.updated.push(key.clone());
            properties.insert(key.clone(), value.clone());
        }
        change
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Succeeds when the store can serve requests.
    async fn ping(&self) -> StoreResult<()>;

    async fn create_catalog(&self, catalog: &CatalogRecord) -> StoreResult<()>;
    async fn get_catalog(&self, name: &str) -> StoreResult<Option<CatalogRecord>>;
    async fn list_catalogs(&self) -> StoreResult<Vec<CatalogRecord>>;
    /// Replaces properties and storage config if the catalog's version is still
    /// `expected_version` (when given); bumps the version.
    async fn update_catalog(
        &self,
        name: &str,
        expected_version: Option<i64>,
        properties: &Properties,
        storage_config: &serde_json::Value,
        now_ms: i64,
    ) -> StoreResult<CatalogRecord>;
    /// Fails with `CatalogNotEmpty` while the catalog holds namespaces.
    async fn drop_catalog(&self, name: &str) -> StoreResult<()>;

    /// Fails with `NamespaceMissing` when the parent does not exist.
    async fn create_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
        properties: &Properties,
    ) -> StoreResult<()>;
    async fn get_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Properties>>;
    /// Children of `parent` (the root for top-level namespaces), ordered by name.
    async fn list_namespaces(
        &self,
        catalog: &str,
        parent: &Namespace,
        page: &PageRequest,
    ) -> StoreResult<Page<Namespace>>;
    async fn update_namespace_properties(
        &self,
        catalog: &str,
        namespace: &Namespace,
        removals: &[String],
        updates: &Properties,
    ) -> StoreResult<PropertiesChange>;
    /// Fails with `NamespaceNotEmpty` while it holds namespaces, tables or views.
    async fn drop_namespace(&self, catalog: &str, namespace: &Namespace) -> StoreResult<()>;

    async fn load_object(&self, catalog: &str, ident: &Ident) -> StoreResult<Option<StoredObject>>;
    /// Names of the tables or views in a namespace, ordered by name.
    async fn list_objects(
        &self,
        catalog: &str,
        namespace: &Namespace,
        kind: ObjectKind,
        page: &PageRequest,
    ) -> StoreResult<Page<String>>;
    /// Applies all writes atomically, or none: `Conflict` when any compare-and-swap lost.
    async fn commit_objects(&self, catalog: &str, writes: &[ObjectWrite]) -> StoreResult<()>;
    /// Locks the objects (existing or not) against other writers, for a commit that lost
    /// the optimistic race: queueing behind the lock is fair where racing again is not.
    async fn lock_objects(
        &self,
        catalog: &str,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>>;
    /// Removes the object if it is of `kind`; returns what it pointed at.
    async fn drop_object(
        &self,
        catalog: &str,
        ident: &Ident,
        kind: ObjectKind,
    ) -> StoreResult<StoredObject>;
    async fn rename_object(
        &self,
        catalog: &str,
        kind: ObjectKind,
        from: &Ident,
        to: &Ident,
    ) -> StoreResult<()>;
    /// Keeps a validated scan or commit metrics report.
    async fn record_metrics(&self, catalog: &str, ident: &Ident, report: &str) -> StoreResult<()>;
}
