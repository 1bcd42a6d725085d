//! The catalog's own errors. Each variant says what went wrong in catalog terms; the HTTP
//! layer maps every variant to one status and Iceberg exception type (`http::error`).

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
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{message}")]
    NotFound { missing: Missing, message: String },
    #[error("{0}")]
    AlreadyExists(String),
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
    /// The store cannot be reached right now; a retry later may succeed (503).
    #[error("{0}")]
    Unavailable(String),
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

impl From<StoreError> for CatalogError {
    /// The fallback mapping for store errors the caller did not translate into a message
    /// with the entity's name. Callers translate the expected ones themselves.
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(message) => CatalogError::Unavailable(message),
            StoreError::Conflict => {
                CatalogError::CommitFailed("Concurrent modification, please retry".into())
            }
            StoreError::CatalogMissing(name) => {
                CatalogError::not_found(Missing::Catalog, format!("Catalog does not exist: {name}"))
            }
            other => CatalogError::Internal(anyhow::anyhow!("unexpected store error: {other}")),
        }
    }
}

impl From<iceberg::Error> for CatalogError {
    /// Errors from iceberg-rust's metadata builders are validation failures of what the
    /// client asked for: a bad request, not a server fault.
    fn from(error: iceberg::Error) -> Self {
        CatalogError::InvalidArgument(error.message().to_string())
    }
}
