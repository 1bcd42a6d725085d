//! Requests to a federated catalog, forwarded to its remote catalog instead of being
//! served from the store (`crate::federation`).
//!
//! The front (`super::front`) hands a request here only when this node's security model
//! has a federated catalog at all (one atomic load for every other request); here its
//! path's catalog is looked up among them. Only the Iceberg REST resources under a
//! catalog are forwarded (`namespaces`, `tables`, `views`, `transactions`); the token
//! endpoint and Floe's change events stay local, and `/v1/config` answers with the
//! endpoints forwarded that the remote serves, and the remote's idempotency ([`config`]).
//!
//! The path sent is rebuilt from the decoded segments whose privileges were checked,
//! each encoded whole, and a segment that is empty, `.` or `..` is refused: a URL parser
//! resolves those (and reads `\` as `/`), which would let a request checked as one
//! operation reach another path on the remote's host with Floe's credentials.
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
use super::extract::read_limited;
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
    let body = match read_limited(body, state.max_body_bytes).await {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let segments = match checked_segments(&parts.uri.path()[tail + 1..]) {
        Ok(segments) => segments,
        Err(refused) => return refused.into_response(),
    };
    let segments: Vec<&str> = segments.iter().map(|s| s.as_ref()).collect();
    let tail = encoded_path(&segments);
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
            tail: &tail,
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
        Err(error) => remote_error(catalog, &ctx.request_id, error).into_response(),
    }
}

/// `/v1/config` for a federated catalog: its prefix here, and of Floe's endpoints those
/// it forwards and the remote serves (all it forwards if the remote lists none), and
/// the remote's idempotency-key lifetime if it has one: a retry's replay is the
/// remote's to give, Floe records nothing for a forwarded request.
pub(super) async fn config(
    catalog: &str,
    prefix: &str,
    remote: &Remote,
    request_id: &str,
) -> Result<serde_json::Value, ApiError> {
    let remote_config = remote
        .config()
        .await
        .map_err(|e| remote_error(catalog, request_id, e))?;
    let endpoints: Vec<&str> = super::config::ENDPOINTS
        .iter()
        .copied()
        .filter(|endpoint| is_forwarded(endpoint))
        .filter(|endpoint| {
            (remote_config.endpoints.as_ref())
                .is_none_or(|served| served.iter().any(|s| s == endpoint))
        })
        .collect();
    let mut answer = serde_json::json!({
        "defaults": {},
        "overrides": { "prefix": prefix },
        "endpoints": endpoints,
    });
    if let Some(lifetime) = &remote_config.idempotency_key_lifetime {
        answer["idempotency-key-lifetime"] = lifetime.clone().into();
    }
    Ok(answer)
}

/// Whether an endpoint of `/v1/config`'s list is forwarded for a federated catalog.
fn is_forwarded(endpoint: &str) -> bool {
    let Some((_, path)) = endpoint.split_once(" /v1/{prefix}/") else {
        return false;
    };
    let resource = path.split('/').next().unwrap_or_default();
    FORWARDED.contains(&resource) && !path.ends_with("/credentials") && !path.ends_with("/sign")
}

/// The answer when the remote gave none. The details (the remote's address, the
/// network's error) go to the log, under the request's id: the connection is shown only
/// to those who may read the catalog's properties, and the caller cannot fix it anyway.
pub(super) fn remote_error(catalog: &str, request_id: &str, error: RemoteError) -> ApiError {
    tracing::warn!(catalog, request_id, error = ?error, "federated catalog: no answer from its remote");
    let see = format!("the server log has the details under request id {request_id}");
    match error {
        RemoteError::Unreachable(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableException",
            format!("Catalog {catalog} is federated and its remote catalog cannot be reached; nothing was sent to it ({see})"),
        ),
        RemoteError::Failed(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "BadGatewayException",
            format!("Catalog {catalog} is federated and its remote catalog gave no answer: a change sent to it may or may not have been applied ({see})"),
        ),
        RemoteError::Refused(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "BadGatewayException",
            format!("Catalog {catalog} is federated and its remote catalog refused Floe's credentials: its connectionConfigInfo needs new ones ({see})"),
        ),
    }
}

/// The path's segments after the prefix, decoded. One that is empty, `.` or `..` is
/// refused: the remote's URL parser would resolve it (and read a `\` as a `/`), and the
/// path it reached would not be the one whose privileges were checked here.
fn checked_segments(path: &str) -> Result<Vec<Cow<'_, str>>, ApiError> {
    let segments = path
        .split('/')
        .map(decode)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ApiError::bad_request("A path segment is not UTF-8 once decoded"))?;
    if segments
        .iter()
        .any(|s| matches!(s.as_ref(), "" | "." | ".."))
    {
        return Err(ApiError::bad_request(
            "A path segment of a federated catalog's request must not be empty, . or ..",
        ));
    }
    Ok(segments)
}

/// The decoded segments as a path, each segment percent-encoded whole (`/`, `\`, `%`,
/// `.` and the namespace separator included), so no URL parser can read another path
/// into it.
fn encoded_path(segments: &[&str]) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'~');
    let mut path = String::new();
    for segment in segments {
        path.push('/');
        path.extend(percent_encoding::utf8_percent_encode(segment, SEGMENT));
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_and_empty_segments_are_refused() {
        for refused in [
            "namespaces/a/tables/t/plan/%2E%2E",
            "namespaces/a/tables/t/plan/..",
            "namespaces/%2e/tables",
            "namespaces/a//tables",
            "namespaces/a/tables/%FF",
        ] {
            assert!(checked_segments(refused).is_err(), "{refused}");
        }
        let kept = checked_segments("namespaces/a%1Fb/tables/x%5C..%2F..").unwrap();
        assert_eq!(kept, ["namespaces", "a\u{1f}b", "tables", "x\\../.."]);
    }

    #[test]
    fn forwarded_paths_are_built_from_the_checked_segments() {
        assert_eq!(
            encoded_path(&["namespaces", "a\u{1f}b", "tables", "t x"]),
            "/namespaces/a%1Fb/tables/t%20x"
        );
        // Nothing a URL parser resolves survives: `\`, `/`, `%` and dots are encoded.
        let tricky = encoded_path(&["namespaces", "a", "tables", "x\\..\\..\\api", "p/../q%2e"]);
        assert_eq!(
            tricky,
            "/namespaces/a/tables/x%5C%2E%2E%5C%2E%2E%5Capi/p%2F%2E%2E%2Fq%252e"
        );
        let url = url::Url::parse(&format!("http://remote/v1/cat{tricky}")).unwrap();
        assert_eq!(url.path(), format!("/v1/cat{tricky}"));
    }

    #[test]
    fn a_federated_catalog_advertises_what_it_forwards() {
        let forwarded: Vec<&str> = super::super::config::ENDPOINTS
            .iter()
            .copied()
            .filter(|e| is_forwarded(e))
            .collect();
        assert!(forwarded.contains(&"POST /v1/{prefix}/transactions/commit"));
        assert!(forwarded.contains(&"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}"));
        for local in ["/credentials", "/sign", "/events", "polaris/v1"] {
            assert!(!forwarded.iter().any(|e| e.contains(local)), "{local}");
        }
    }

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
