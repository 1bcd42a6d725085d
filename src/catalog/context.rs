//! Who is asking, and how: the request context every catalog entry point takes.
//!
//! The HTTP layer builds one per request (authentication will fill in the principal);
//! the catalog reads it where it can see the resources a request touches, which is where
//! authorization, credential vending and change events need it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::error::{CatalogError, CatalogResult};
use crate::auth::privileges::{Privilege, Securable};
use crate::auth::state::Access;

/// The caller. Until authentication exists every request is anonymous.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub name: String,
    /// The principal roles this request acts with (a token may carry fewer than the
    /// principal holds).
    pub roles: Vec<String>,
}

impl Principal {
    pub fn anonymous() -> Self {
        Principal {
            name: "anonymous".into(),
            roles: Vec::new(),
        }
    }
}

/// What the client asked for in `X-Iceberg-Access-Delegation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessDelegation {
    pub vended_credentials: bool,
    pub remote_signing: bool,
}

impl AccessDelegation {
    /// Whether the client asked for any delegation at all.
    pub fn any(self) -> bool {
        self.vended_credentials || self.remote_signing
    }

    /// Parses the header's comma-separated list; unknown modes are ignored, as the spec
    /// lets servers choose among the modes a client offers.
    pub fn parse(header: &str) -> Self {
        let mut modes = AccessDelegation::default();
        for mode in header.split(',').map(str::trim) {
            match mode {
                "vended-credentials" => modes.vended_credentials = true,
                "remote-signing" => modes.remote_signing = true,
                _ => {}
            }
        }
        modes
    }
}

/// A client's `Idempotency-Key` for this request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub key: String,
    /// Identifies the request (method, path, query, body).
    pub fingerprint: String,
    /// Until when the outcome is kept (the advertised lifetime plus a grace period).
    pub expires_ms: i64,
}

#[derive(Debug, Clone)]
pub struct RequestContext {
    /// Shared with the token cache (a request only reads it).
    pub principal: Arc<Principal>,
    /// Ties log lines, errors and (later) events to one request.
    pub request_id: String,
    pub access_delegation: AccessDelegation,
    pub idempotency: Option<IdempotencyKey>,
    /// What the caller may do; `None` when authorization is off (`--auth none`).
    pub access: Option<Arc<Access>>,
}

impl RequestContext {
    /// Refuses with 403 unless the caller holds `privilege` (or one implying it) on
    /// `securable` of `catalog`, or on something above it.
    pub fn require(
        &self,
        catalog: &str,
        privilege: Privilege,
        securable: &Securable,
    ) -> CatalogResult<()> {
        match &self.access {
            None => Ok(()),
            Some(access) if access.allows(catalog, privilege, securable) => Ok(()),
            Some(_) => Err(CatalogError::Forbidden(format!(
                "Principal '{}' is not authorized for op {} on {}",
                self.principal.name,
                privilege.as_str(),
                describe(catalog, securable)
            ))),
        }
    }

    /// Whether anything at all is granted to the caller in `catalog` (everything is,
    /// without access control). Asks only the caller's grants, never the store.
    pub fn sees_catalog(&self, catalog: &str) -> bool {
        self.access.as_ref().is_none_or(|a| a.sees_catalog(catalog))
    }

    /// Refuses with 403 unless the caller acts as `service_admin` (principals, principal
    /// roles, catalogs).
    pub fn require_service_admin(&self) -> CatalogResult<()> {
        match &self.access {
            None => Ok(()),
            Some(access) if access.service_admin => Ok(()),
            Some(_) => Err(CatalogError::Forbidden(format!(
                "Principal '{}' is not authorized: this needs the service_admin role",
                self.principal.name
            ))),
        }
    }

    /// An anonymous caller with a fresh request id: for tools, bootstrap and tests.
    pub fn system() -> Self {
        RequestContext {
            principal: Arc::new(Principal::anonymous()),
            request_id: uuid::Uuid::now_v7().to_string(),
            access_delegation: AccessDelegation::default(),
            idempotency: None,
            access: None,
        }
    }
}

fn describe(catalog: &str, securable: &Securable) -> String {
    match securable {
        Securable::Catalog => format!("catalog {catalog}"),
        Securable::Namespace { namespace } => {
            format!("namespace {}.{}", catalog, namespace.join("."))
        }
        Securable::Table { namespace, name } => {
            format!("table {}.{}.{}", catalog, namespace.join("."), name)
        }
        Securable::View { namespace, name } => {
            format!("view {}.{}.{}", catalog, namespace.join("."), name)
        }
        Securable::Policy { namespace, name } => {
            format!("policy {}.{}.{}", catalog, namespace.join("."), name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_delegation_modes() {
        let both = AccessDelegation::parse("vended-credentials, remote-signing");
        assert!(both.vended_credentials && both.remote_signing);
        assert_eq!(AccessDelegation::parse("x"), AccessDelegation::default());
    }
}
