//! Authentication: the OAuth2 token endpoint (`/v1/oauth/tokens`, also under Polaris's
//! `/api/catalog/v1`), and the layer that turns `Authorization: Bearer <token>` into the
//! request's principal and access (read by `context::Ctx`). With `--auth none` the layer
//! lets everything through and the catalog authorizes nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde_json::json;

use super::error::ApiError;
use super::AppState;
use crate::auth::oidc::OidcSettings;
use crate::catalog::security::{OAuthError, TokenRequest};

/// How requests are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthMode {
    /// Everyone may do everything (only for a trusted network; refused on a
    /// non-loopback address without `--insecure`).
    None,
    /// Tokens Floe issues at its token endpoint, to its principals.
    Internal,
    /// Tokens of an external OpenID Connect issuer only (`--oidc-issuer`); the token
    /// endpoint is closed.
    External,
    /// Both: a token naming the external issuer is checked against it, any other as
    /// one of Floe's.
    Both,
}

/// Settings of authentication.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub mode: AuthMode,
    pub token_lifetime: Duration,
    /// The external issuer (modes `external` and `both`).
    pub oidc: Option<OidcSettings>,
    /// The console signs users in at the external issuer (needs `oidc`).
    pub console_client: Option<super::console::ConsoleClient>,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            mode: AuthMode::None,
            token_lifetime: Duration::from_secs(3600),
            oidc: None,
            console_client: None,
        }
    }
}

/// Paths served without a token: probes, metrics, the token endpoint, and the console's
/// files and API documents (the same for everyone; the console's calls carry a token).
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/metrics" | "/v1/oauth/tokens" | "/api/catalog/v1/oauth/tokens"
    ) || super::console::is_console_path(path)
}

/// Turns the bearer token into the request's principal and access (extensions read by
/// `context::Ctx`), or answers 401. Called by the router's outer layer (`super::front`).
pub async fn authenticate(state: &AppState, request: &mut Request) -> Result<(), Response> {
    if state.auth.mode == AuthMode::None || is_public(request.uri().path()) {
        return Ok(());
    }
    let Some(token) = bearer(request.headers()) else {
        return Err(unauthorized(
            "Authentication required: send Authorization: Bearer <token> (client credentials at /v1/oauth/tokens)",
        ));
    };
    let authenticated = state.catalog.authenticate(token).await;
    match authenticated {
        Ok((principal, access)) => {
            request.extensions_mut().insert::<Arc<_>>(principal);
            request.extensions_mut().insert::<Arc<_>>(access);
            Ok(())
        }
        Err(e) => Err(ApiError::from(e).into_response()),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    // UTF-8 rather than `HeaderValue::to_str`'s visible-ASCII test, which goes byte by
    // byte over the whole token on every request. A token with other characters is
    // still refused: it matches no cached token and does not verify (401 either way).
    let value = std::str::from_utf8(headers.get(header::AUTHORIZATION)?.as_bytes()).ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unauthorized(message: &str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "NotAuthorizedException", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Bearer"),
    );
    response
}

/// `POST /v1/oauth/tokens`: form fields, or client credentials in HTTP Basic.
pub async fn token(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if state.auth.mode == AuthMode::None {
        return oauth_error(&OAuthError {
            status: 400,
            error: "unsupported_grant_type",
            description:
                "This server runs without authentication (--auth none); no tokens are needed".into(),
        });
    }
    if state.auth.mode == AuthMode::External {
        let issuer = state.auth.oidc.as_ref().map_or("", |o| o.issuer.as_str());
        return oauth_error(&OAuthError {
            status: 400,
            error: "unsupported_grant_type",
            description: format!(
                "This server accepts tokens of the identity provider {issuer} only; get one there"
            ),
        });
    }
    let form_ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form_ok {
        return oauth_error(&OAuthError {
            status: 400,
            error: "invalid_request",
            description: "The request is invalid: send application/x-www-form-urlencoded".into(),
        });
    }
    let mut request = TokenRequest::default();
    for (key, value) in url::form_urlencoded::parse(&body) {
        let value = Some(value.into_owned());
        match key.as_ref() {
            "grant_type" => request.grant_type = value,
            "client_id" => request.client_id = value,
            "client_secret" => request.client_secret = value,
            "scope" => request.scope = value,
            "subject_token" => request.subject_token = value,
            "subject_token_type" => request.subject_token_type = value,
            "requested_token_type" => request.requested_token_type = value,
            _ => {}
        }
    }
    if let Some((id, secret)) = basic(&headers) {
        request.client_id = Some(id);
        request.client_secret = Some(secret);
    }
    match state
        .catalog
        .issue_token(&request, state.auth.token_lifetime)
        .await
    {
        Ok(issued) => {
            let mut body = json!({
                "access_token": issued.access_token,
                "token_type": "bearer",
                "issued_token_type": crate::auth::tokens::ACCESS_TOKEN_TYPE,
                "expires_in": issued.expires_in,
            });
            // RFC 6749 §3.3: a scope is one or more tokens; a principal without roles
            // gets none, and an empty `scope` makes Iceberg Java reject the response.
            if !issued.scope.is_empty() {
                body["scope"] = json!(issued.scope);
            }
            ([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
        }
        Err(e) => oauth_error(&e),
    }
}

fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_string(), secret.to_string()))
}

fn oauth_error(e: &OAuthError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    (
        status,
        Json(json!({ "error": e.error, "error_description": e.description })),
    )
        .into_response()
}
