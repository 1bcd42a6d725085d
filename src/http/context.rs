//! The request context, as handlers receive it: [`Ctx`] assembles the catalog's
//! `RequestContext` from what the layers in front of the handler left in the request
//! (request id, idempotency key, and — with authentication — the principal) and from the
//! access delegation header.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use std::sync::Arc;

use super::error::ApiError;
use crate::auth::state::Access;
use crate::catalog::context::{AccessDelegation, IdempotencyKey, Principal, RequestContext};

/// The id of a request: the client's `X-Request-Id` when it sent a usable one, else a
/// fresh UUIDv7. Logged with the request and echoed in the response.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Longest client request id kept; longer ones are replaced.
const MAX_REQUEST_ID_BYTES: usize = 128;

/// Whether a client's request id is kept: letters, digits and `._:-+/=` only (UUIDs,
/// base64, trace ids), so that it reads as one field of a text log line (a space would
/// let it add fields such as a second `status=`).
fn usable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-+/=".contains(&b))
}

impl RequestId {
    pub fn from_header(value: Option<&axum::http::HeaderValue>) -> Self {
        let usable = value.and_then(|v| v.to_str().ok()).filter(|v| usable(v));
        RequestId(match usable {
            Some(id) => id.to_string(),
            // A v7 id (time-ordered to the millisecond) without `now_v7`'s clock
            // sequence, a lock shared by every request that made id generation cost
            // more than the rest of the front layer: the bits after the time are random.
            None => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                let at =
                    uuid::Timestamp::from_unix(uuid::NoContext, now.as_secs(), now.subsec_nanos());
                uuid::Uuid::new_v7(at).to_string()
            }
        })
    }
}

/// Named once: `HeaderMap::get` with a `&str` parses and validates the name every time.
static ACCESS_DELEGATION: axum::http::HeaderName =
    axum::http::HeaderName::from_static("x-iceberg-access-delegation");

/// The catalog's request context, extracted for a handler.
pub struct Ctx(pub RequestContext);

impl<S: Send + Sync> FromRequestParts<S> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let request_id = match parts.extensions.get::<RequestId>() {
            Some(id) => id.0.clone(),
            None => RequestId::from_header(None).0,
        };
        let access_delegation = parts
            .headers
            .get(&ACCESS_DELEGATION)
            .and_then(|v| v.to_str().ok())
            .map(AccessDelegation::parse)
            .unwrap_or_default();
        Ok(Ctx(RequestContext {
            principal: parts
                .extensions
                .get::<Arc<Principal>>()
                .cloned()
                .unwrap_or_else(|| Arc::new(Principal::anonymous())),
            request_id,
            access_delegation,
            idempotency: parts.extensions.get::<IdempotencyKey>().cloned(),
            access: parts.extensions.get::<Arc<Access>>().cloned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_request_ids_are_kept() {
        let id = |v: &str| RequestId::from_header(Some(&v.parse().unwrap())).0;
        for kept in [
            "abc-123",
            "0195f0c5-7d2c-7c6e-9a4c-1f2e3d4c5b6a",
            "job:7.run_2",
            "AQID+/8=",
        ] {
            assert_eq!(id(kept), kept);
        }
        for replaced in ["a status=200 path=/x", "a\"b", "x".repeat(129).as_str()] {
            let got = id(replaced);
            assert_ne!(got, replaced);
            assert!(uuid::Uuid::parse_str(&got).is_ok(), "{got}");
        }
    }
}
