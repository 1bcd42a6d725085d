//! `Idempotency-Key` (Iceberg REST spec 1.10+): a retried mutation gets the first
//! request's final answer instead of running again.
//!
//! - A key must be a UUID. Its record lives in the store, so a retry sent to another node
//!   is answered the same way.
//! - A success is recorded by the catalog in the same store transaction as the change
//!   (see `Catalog::batch`): acknowledged changes and their keys commit together.
//! - A final rejection (a deterministic 4xx) is recorded here, after the handler; 5xx,
//!   401, 403, 408, 419 and 429 are not final and are not recorded.
//! - The same key with another method, path, query or body is a 422, as the IETF
//!   Idempotency-Key draft says (the Iceberg spec names no status for it). So is the same
//!   request from another principal: a key is its sender's, and a replay never hands one
//!   principal what another was answered (before any privilege check would run).
//! - Two requests with one key at once: the second finds the key taken when it tries to
//!   commit (nothing of it is applied) and answers with the first one's outcome.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::{BoxFuture, Either};
use tower_service::Service;

use super::context::RequestId;
use super::error::ApiError;
use super::extract::read_limited;
use super::outcome::render;
use super::AppState;
use crate::catalog::context::{IdempotencyKey, Principal, RequestContext};
use crate::catalog::{Outcome, IDEMPOTENCY_GRACE};
use crate::model::now_ms;
use crate::store::IdempotencyRecord;

pub const HEADER: &str = "idempotency-key";
/// Set on a response that replays a recorded outcome.
pub const REPLAYED_HEADER: &str = "idempotency-replayed";
/// Largest rejection body kept for replay.
const MAX_REJECTION_BYTES: usize = 64 * 1024;

/// Marks the response of a request whose key another request took meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct KeyTaken;

fn is_mutation(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::DELETE)
}

/// Whether a response is final, so that a retry must get it again.
fn is_final(status: StatusCode) -> bool {
    let not_final = [401, 403, 408, 419, 429];
    status.is_success() || (status.is_client_error() && !not_final.contains(&status.as_u16()))
}

/// The key header of a request that takes the idempotency path: a mutation with a key.
/// Reads and mutations without a key go straight through (this sits on every request's
/// path).
fn mutation_key(request: &Request) -> Option<&HeaderValue> {
    if is_mutation(request.method()) {
        request.headers().get(HEADER)
    } else {
        None
    }
}

/// The route layer that sends keyed mutations down the idempotency path. Written by hand,
/// not with `middleware::from_fn`: every other request (every read) then goes straight to
/// its handler, with no boxed future and no boxed `Next` of its own.
#[derive(Clone)]
pub struct IdempotencyLayer(pub AppState);

impl<S> tower_layer::Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Idempotency<S> {
        Idempotency {
            state: self.0.clone(),
            inner,
        }
    }
}

/// [`IdempotencyLayer`] around one route.
#[derive(Clone)]
pub struct Idempotency<S> {
    state: AppState,
    inner: S,
}

impl<S> Service<Request> for Idempotency<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let Some(raw) = mutation_key(&request).cloned() else {
            return Either::Left(self.inner.call(request));
        };
        // The service that was made ready goes with the request; a clone stays behind.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let state = self.state.clone();
        Either::Right(Box::pin(async move {
            Ok(idempotent(state, raw, request, inner).await)
        }))
    }
}

/// A mutation with an `Idempotency-Key`: replay, refuse, or run and record.
async fn idempotent<S>(
    state: AppState,
    raw: HeaderValue,
    request: Request,
    mut inner: S,
) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    // One key however it is written (upper case, braces, no hyphens, a URN): its
    // canonical form, so a retry spelled another way is still the same key.
    let key = match raw.to_str().ok().map(str::trim).map(uuid::Uuid::try_parse) {
        Some(Ok(key)) => key.hyphenated().to_string(),
        _ => {
            return ApiError::bad_request("Idempotency-Key must be a UUID (UUIDv7 recommended)")
                .into_response()
        }
    };
    let (mut parts, body) = request.into_parts();
    let body = match read_limited(body, state.max_body_bytes).await {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let principal = parts.extensions.get::<Arc<Principal>>();
    let sender = principal.map_or("", |p| p.name.as_str());
    let fingerprint = fingerprint(sender, &parts.method, &parts.uri, &body);
    match state.catalog.idempotency_record(&key).await {
        Err(e) => return ApiError::from(e).into_response(),
        Ok(Some(record)) => return replay(&record, &fingerprint),
        Ok(None) => {}
    }
    let lifetime = state.catalog.idempotency_lifetime() + IDEMPOTENCY_GRACE;
    let idempotency = IdempotencyKey {
        key: key.clone(),
        fingerprint: fingerprint.clone(),
        expires_ms: now_ms() + lifetime.as_millis() as i64,
    };
    parts.extensions.insert(idempotency.clone());
    let request_id = parts.extensions.get::<RequestId>().cloned();
    let response = inner
        .call(Request::from_parts(parts, Body::from(body)))
        .await
        .unwrap_or_else(|never| match never {});
    if response.extensions().get::<KeyTaken>().is_some() {
        return match state.catalog.idempotency_record(&key).await {
            Ok(Some(record)) => replay(&record, &fingerprint),
            Ok(None) => response,
            Err(e) => ApiError::from(e).into_response(),
        };
    }
    let status = response.status();
    if status.is_success() || !is_final(status) {
        // Successes were recorded with their change; the rest is not final.
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(body) = to_bytes(body, MAX_REJECTION_BYTES).await else {
        return ApiError::new(status, "BadRequestException", "Request rejected").into_response();
    };
    let ctx = RequestContext {
        request_id: request_id.map(|id| id.0).unwrap_or_default(),
        idempotency: Some(idempotency),
        ..RequestContext::system()
    };
    let rejected = Outcome::Rejected {
        status: status.as_u16(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    match state.catalog.record_outcome(&ctx, &rejected).await {
        Err(crate::catalog::error::CatalogError::IdempotencyKeyUsed) => {
            if let Ok(Some(record)) = state.catalog.idempotency_record(&key).await {
                return replay(&record, &fingerprint);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not record a rejected request's idempotency key")
        }
        Ok(()) => {}
    }
    Response::from_parts(parts, Body::from(body))
}

/// Identifies a request: its sender, method, path, query and body.
fn fingerprint(sender: &str, method: &Method, uri: &axum::http::Uri, body: &[u8]) -> String {
    let parts: [&[u8]; 5] = [
        sender.as_bytes(),
        method.as_str().as_bytes(),
        uri.path().as_bytes(),
        uri.query().unwrap_or("").as_bytes(),
        body,
    ];
    // Each part ends in 0xff (never in UTF-8), so that no two splits hash the same text.
    let mut bytes = Vec::with_capacity(body.len() + 256);
    for part in parts {
        bytes.extend_from_slice(part);
        bytes.push(0xff);
    }
    format!(
        "{:016x}{:016x}",
        crate::stable_hash::fnv1a(bytes.iter().copied()),
        crate::stable_hash::fnv1a(bytes.iter().rev().copied())
    )
}

fn replay(record: &IdempotencyRecord, fingerprint: &str) -> Response {
    if record.fingerprint != fingerprint {
        return ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "UnprocessableEntityException",
            "Idempotency-Key was already used for a different request; use a new key for a new operation",
        )
        .into_response();
    }
    let Some(outcome) = Outcome::from_json(&record.outcome) else {
        return ApiError::from(crate::catalog::error::CatalogError::internal(
            anyhow::anyhow!("unreadable idempotency record for key {}", record.key),
        ))
        .into_response();
    };
    let mut response = render(&outcome);
    response
        .headers_mut()
        .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_tell_requests_apart() {
        let uri: axum::http::Uri = "/v1/a/namespaces".parse().unwrap();
        let a = fingerprint("p", &Method::POST, &uri, b"{}");
        assert_eq!(a, fingerprint("p", &Method::POST, &uri, b"{}"));
        assert_ne!(a, fingerprint("p", &Method::POST, &uri, b"{ }"));
        assert_ne!(a, fingerprint("p", &Method::DELETE, &uri, b"{}"));
        assert_ne!(a, fingerprint("q", &Method::POST, &uri, b"{}"));
        let other: axum::http::Uri = "/v1/b/namespaces".parse().unwrap();
        assert_ne!(a, fingerprint("p", &Method::POST, &other, b"{}"));
    }

    #[test]
    fn which_statuses_are_final() {
        assert!(is_final(StatusCode::OK));
        assert!(is_final(StatusCode::CONFLICT));
        assert!(is_final(StatusCode::NOT_FOUND));
        assert!(!is_final(StatusCode::SERVICE_UNAVAILABLE));
        assert!(!is_final(StatusCode::UNAUTHORIZED));
        assert!(!is_final(StatusCode::TOO_MANY_REQUESTS));
    }
}
