//! Who is asking, and how: the request context every catalog entry point takes.
//!
//! The HTTP layer builds one per request (authentication will fill in the principal);
//! the catalog reads it where it can see the resources a request touches, which is where
//! authorization, credential vending and change events need it.

use serde::{Deserialize, Serialize};

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
    pub principal: Principal,
    /// Ties log lines, errors and (later) events to one request.
    pub request_id: String,
    pub access_delegation: AccessDelegation,
    pub idempotency: Option<IdempotencyKey>,
}

impl RequestContext {
    /// An anonymous caller with a fresh request id: for tools, bootstrap and tests.
    pub fn system() -> Self {
        RequestContext {
            principal: Principal::anonymous(),
            request_id: uuid::Uuid::now_v7().to_string(),
            access_delegation: AccessDelegation::default(),
            idempotency: None,
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
