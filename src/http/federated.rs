//! Requests to a federated catalog, forwarded to its remote catalog instead of being
//! served from the store (`crate::federation`).
//!
//! The front (`super::front`) hands a request here only when this node's security model
//! has a federated catalog at all (one atomic load for every other request); here its
//! path's catalog is looked up among them. Only the Iceberg REST resources under a
//! catalog are forwarded (`namespaces`, `tables`, `views`, `transactions`); the
//! configuration, the token endpoint and Floe's change events stay local.
//!
//! Each forwarded request is authorized here first, with the privileges its local route
//! would check (`federation::rules::needed`), and goes out with Floe's own credentials
//! for the remote. Answers come back as the remote gave them (status, body, ETag),
//! without storage credentials. When the remote cannot be reached nothing was sent: 503.
//! When a request went out and no answer came back, whether a change was applied there
//! is unknown: 502, which Iceberg clients treat as a commit's unknown state, not a failure.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;

use super::context::Ctx;
use super::error::ApiError;
use super::AppState;
use crate::federation::remote::{forwarded_headers, Outgoing, Remote, RemoteError};
use crate::federation::rules::{needed, scrub, Refusal};

/// The bases of the Iceberg REST API (`super::router`).
const BASES: [&str; 2] = ["/v1/", "/api/catalog/v1/"];
/// The resources under a catalog's prefix that a federated catalog's remote serves.
const FORWARDED: [&str; 4] = ["namespaces", "tables", "views", "transactions"];

/// Where a path names a catalog's forwarded resource: the prefix as sent, and where the
/// rest of the path (from its `/`) starts.
fn catalog_path(path: &str) -> Option<(&str, usize)> {
    let base = BASES.iter().find(|base| path.starts_with(**base))?;
    let after = &path[base.len()..];
    let (prefix, rest) = after.split_once('/')?;
    let resource = rest.split('/').next()?;
    (!prefix.is_empty() && FORWARDED.contains(&resource))
        .then_some((prefix, base.len() + prefix.len()))
}

fn decode(segment: &str) -> Option<Cow<'_, str>> {
    percent_decode_str(segment).decode_utf8().ok()
}

/// Forwards `request` if its catalog is federated; otherwise gives it back to be routed.
pub(super) async fn intercept(state: &AppState, request: Request) -> Result<Response, Request> {
    let path = request.uri().path();
    let Some((prefix, tail)) = catalog_path(path) else {
        return Err(request);
    };
    let Some(catalog) = decode(prefix).map(Cow::into_owned) else {
        return Err(request);
    };
    // A model the store cannot give now: the route answers (it meets the outage too).
    let Ok(Some(remote)) = state.catalog.federated(&catalog).await else {
        return Err(request);
    };
    Ok(forward(state, request, &catalog, tail, remote).await)
}

async fn forward(
    state: &AppState,
    request: Request,
    catalog: &str,
    tail: usize,
    remote: Arc<Remote>,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let ctx = match Ctx::from_request_parts(&mut parts, &()).await {
        Ok(Ctx(ctx)) => ctx,
        Err(refused) => return refused.into_response(),
    };
    let Ok(body) = axum::body::to_bytes(body, state.max_body_bytes).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BadRequestException",
            format!(
                "The request body is larger than {} bytes",
                state.max_body_bytes
            ),
        )
        .into_response();
    };
    let tail = &parts.uri.path()[tail..];
    let Some(segments) = tail[1..].split('/').map(decode).collect::<Option<Vec<_>>>() else {
        return ApiError::bad_request("A path segment is not UTF-8 once decoded").into_response();
    };
    let segments: Vec<&str> = segments.iter().map(|s| s.as_ref()).collect();
    let purge = url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
        .any(|(k, v)| k == "purgeRequested" && v.eq_ignore_ascii_case("true"));
    let needs = match needed(&parts.method, &segments, purge, &body) {
        Ok(needs) => needs,
        Err(Refusal::BadRequest(message)) => return ApiError::bad_request(message).into_response(),
        Err(Refusal::NotFound) => {
            return ApiError::not_found("No such endpoint for a federated catalog").into_response()
        }
    };
    for (privilege, securable) in &needs {
        if let Err(refused) = ctx.require(catalog, *privilege, securable) {
            return ApiError::from(refused).into_response();
        }
    }
    let sent = remote
        .send(Outgoing {
            method: parts.method.clone(),
            tail,
            query: parts.uri.query(),
            headers: forwarded_headers(&parts.headers, &ctx.request_id),
            body,
        })
        .await;
    match sent {
        Ok(answer) => {
            let body = match answer.status.is_success() {
                true => scrub(&answer.body).map_or(answer.body, Into::into),
                false => answer.body,
            };
            (answer.status, answer.headers, body).into_response()
        }
        Err(error) => remote_error(catalog, error).into_response(),
    }
}

/// The answer when the remote gave none; logged, as the caller cannot fix it.
fn remote_error(catalog: &str, error: RemoteError) -> ApiError {
    tracing::warn!(catalog, error = ?error, "federated catalog: no answer from its remote");
    match error {
        RemoteError::Unreachable(why) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableException",
            format!("Catalog {catalog} is federated and its remote catalog is unavailable ({why}); nothing was sent to it"),
        ),
        RemoteError::Failed(why) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "BadGatewayException",
            format!("Catalog {catalog} is federated and its remote catalog gave no answer ({why}); a change sent to it may or may not have been applied"),
        ),
        RemoteError::Refused(why) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "BadGatewayException",
            format!("Catalog {catalog} is federated and {why}: its connectionConfigInfo needs new credentials"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_catalogs_iceberg_resources_are_candidates() {
        assert_eq!(catalog_path("/v1/fed/namespaces"), Some(("fed", 7)));
        assert_eq!(
            catalog_path("/api/catalog/v1/f%20d/tables/rename"),
            Some(("f%20d", 21))
        );
        assert_eq!(
            catalog_path("/v1/fed/transactions/commit"),
            Some(("fed", 7))
        );
        for local in [
            "/v1/config",
            "/v1/oauth/tokens",
            "/v1/fed/events",
            "/v1//namespaces",
            "/api/management/v1/catalogs/fed",
            "/polaris/v1/fed/namespaces/a/generic-tables",
            "/v2/fed/namespaces",
        ] {
            assert_eq!(catalog_path(local), None, "{local}");
        }
    }
}
