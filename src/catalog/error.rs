//! The catalog's own errors. Each variant says what went wrong in catalog terms; the HTTP
//! layer maps every variant to one status and Iceberg exception type (`http::error`).
//!
//! Errors of the layers below become catalog errors here and only here: store errors,
//! file errors and invalid names each have one exhaustive `From` (no wildcard arm, so a
//! new store error is a compile error until it is given its meaning), worded as Iceberg's
//! Java catalogs word them, because clients match on the text.

use crate::model::{InvalidName, ObjectKind};
use crate::storage::StorageError;
use crate::store::StoreError;

/// What kind of entity a lookup did not find; decides the Iceberg exception type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Catalog,
    Namespace,
    Table,
    View,
    /// A file the catalog points at is gone (e.g. deleted behind the catalog's back).
    File,
    /// A scan plan id this server does not hold.
    PlanId,
    /// A plan task this table's plans did not hand out.
    PlanTask,
    /// A policy (Polaris's policy API).
    Policy,
    /// A policy's attachment to a target.
    PolicyMapping,
}

/// Why Polaris's policy API refuses a change that is well-formed (each has its own
/// error type there, which clients may match on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyRefusal {
    /// An update named another version than the current one (409).
    VersionMismatch,
    /// The target has another policy of the same inheritable type (409).
    MappingExists,
    /// A drop of a policy still attached, without `detach-all` (400).
    InUse,
    /// The content does not fit the policy's type (400).
    Invalid,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{message}")]
    NotFound { missing: Missing, message: String },
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{1}")]
    Policy(PolicyRefusal, String),
    #[error("{0}")]
    NamespaceNotEmpty(String),
    /// The request conflicts with the current state of the entity (409); the client may
    /// refresh and retry.
    #[error("{0}")]
    CommitFailed(String),
    #[error("{0}")]
    BadRequest(String),
    /// Metadata the client sent breaks Iceberg's rules (iceberg-rust's builders said no);
    /// Java clients raise this as `IllegalArgumentException`.
    #[error("{0}")]
    InvalidArgument(String),
    /// Well-formed but semantically impossible (422), e.g. a property both set and removed.
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    Forbidden(String),
    /// A valid request for something this server does not do (406).
    #[error("{0}")]
    Unsupported(String),
    /// No valid credentials (401).
    #[error("{0}")]
    Unauthorized(String),
    /// What was asked for existed once and is deleted for good (410): events past
    /// retention.
    #[error("{0}")]
    Gone(String),
    /// The store cannot be reached right now; a retry later may succeed (503).
    #[error("{0}")]
    Unavailable(String),
    /// The store failed while committing the write, which may or may not have landed
    /// (502, the spec's `CommitStateUnknownException`: a client must look, not retry).
    #[error("{0}")]
    OutcomeUnknown(String),
    /// Another request holds this request's idempotency key; nothing was applied. The
    /// HTTP layer answers with that request's outcome.
    #[error("Idempotency key already used")]
    IdempotencyKeyUsed,
    #[error("internal error: {0:#}")]
    Internal(anyhow::Error),
}

pub type CatalogResult<T> = Result<T, CatalogError>;

impl CatalogError {
    pub fn not_found(missing: Missing, message: impl Into<String>) -> Self {
        CatalogError::NotFound {
            missing,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        CatalogError::BadRequest(message.into())
    }

    pub fn internal(error: impl Into<anyhow::Error>) -> Self {
        CatalogError::Internal(error.into())
    }
}

pub fn catalog_missing(name: &str) -> CatalogError {
    CatalogError::not_found(Missing::Catalog, format!("Catalog does not exist: {name}"))
}

pub fn object_missing(kind: ObjectKind, ident: impl std::fmt::Display) -> CatalogError {
    let missing = match kind {
        ObjectKind::Table | ObjectKind::GenericTable => Missing::Table,
        ObjectKind::View => Missing::View,
    };
    CatalogError::not_found(missing, format!("{} does not exist: {ident}", kind.title()))
}

/// "Table already exists" when the name is taken by the same kind, "... with same name"
/// when by the other kind: tables and views share one name space.
pub fn object_exists(
    wanted: ObjectKind,
    existing: ObjectKind,
    ident: impl std::fmt::Display,
) -> CatalogError {
    CatalogError::AlreadyExists(if wanted == existing {
        format!("{} already exists: {ident}", existing.title())
    } else {
        format!(
            "{} with same name already exists: {ident}",
            existing.title()
        )
    })
}

impl From<StoreError> for CatalogError {
    fn from(error: StoreError) -> Self {
        use StoreError as S;
        match error {
            S::CatalogMissing(name) => catalog_missing(&name),
            S::CatalogExists(name) => {
                CatalogError::AlreadyExists(format!("Catalog already exists: {name}"))
            }
            S::CatalogNotEmpty(name) => {
                CatalogError::NamespaceNotEmpty(format!("Catalog {name} is not empty"))
            }
            S::NamespaceMissing(ns) => CatalogError::not_found(
                Missing::Namespace,
                format!("Namespace does not exist: {ns}"),
            ),
            S::NamespaceExists(ns) => {
                CatalogError::AlreadyExists(format!("Namespace already exists: {ns}"))
            }
            S::NamespaceNotEmpty(ns) => {
                CatalogError::NamespaceNotEmpty(format!("Namespace {ns} is not empty"))
            }
            S::ObjectMissing { kind, ident } => object_missing(kind, ident),
            S::DroppedMissing(id) => CatalogError::not_found(
                Missing::Table,
                format!(
                    "No dropped table or view has id {id} (it may have expired or been purged)"
                ),
            ),
            S::ObjectExists {
                wanted,
                existing,
                ident,
            } => object_exists(wanted, existing, ident),
            // Java's wording for a rename onto a taken name; a table onto a table is the
            // plain "Table already exists".
            S::RenameTargetExists {
                kind: ObjectKind::Table,
                existing: ObjectKind::Table,
                to,
                ..
            } => object_exists(ObjectKind::Table, ObjectKind::Table, to),
            S::RenameTargetExists {
                existing, from, to, ..
            } => CatalogError::AlreadyExists(format!(
                "Cannot rename {from} to {to}. {} already exists",
                existing.title()
            )),
            S::LocationOverlap { location, other } => CatalogError::bad_request(format!(
                "Location {location} overlaps the location of {other}"
            )),
            S::LocationPurging { location, purging } => CatalogError::bad_request(format!(
                "Location {location} overlaps {purging}, where the files of a dropped table or view are being deleted; use another location, or this one once the purge is done"
            )),
            S::LocationReserved { location, staged } => CatalogError::bad_request(format!(
                "Location {location} overlaps the location of {staged}, a staged create whose vended credentials are still valid; use another location, or this one once they expire"
            )),
            S::Conflict => {
                CatalogError::CommitFailed("Concurrent modification, please retry".into())
            }
            S::IdempotencyKeyUsed => CatalogError::IdempotencyKeyUsed,
            S::Unavailable(message) => CatalogError::Unavailable(message),
            S::OutcomeUnknown(message) => CatalogError::OutcomeUnknown(format!(
                "{message}; the write may or may not have been made: load it to see (an Idempotency-Key retry answers its outcome)"
            )),
            S::Internal(error) => CatalogError::Internal(error),
        }
    }
}

impl From<StorageError> for CatalogError {
    fn from(error: StorageError) -> Self {
        match error {
            // Metadata file names are unique per commit: a taken name means another
            // writer got there first, so the client should refresh and retry.
            StorageError::AlreadyExists(location) => {
                CatalogError::CommitFailed(format!("Metadata file {location} already exists"))
            }
            // Files the catalog reads are named by clients (register): their mistake.
            StorageError::NotFound(location) => CatalogError::bad_request(format!(
                "Cannot read metadata file {location}: it does not exist"
            )),
            e @ StorageError::TooLarge { .. } => CatalogError::bad_request(e.to_string()),
            StorageError::InvalidLocation(message) => CatalogError::BadRequest(message),
            StorageError::Io(error) => CatalogError::Internal(error),
            StorageError::Unavailable(message) => {
                CatalogError::Unavailable(format!("Storage unavailable: {message}"))
            }
        }
    }
}

impl From<InvalidName> for CatalogError {
    fn from(error: InvalidName) -> Self {
        CatalogError::BadRequest(error.0)
    }
}

impl From<iceberg::Error> for CatalogError {
    /// Errors from iceberg-rust's metadata builders are validation failures of what the
    /// client asked for: a bad request, not a server fault.
    fn from(error: iceberg::Error) -> Self {
        CatalogError::InvalidArgument(error.message().to_string())
    }
}
