//! The web console (`/ui`) and the API documents (`/openapi`), built into the binary.
//!
//! The console is plain HTML, CSS and JavaScript modules under `console/` in the source
//! tree, with no build step and nothing fetched at run time: `include_bytes!` puts every
//! file in the binary, so `floe serve` alone serves it, offline. It talks to the same
//! REST and management endpoints as any client, with the user's own token, so it can
//! show and do exactly what the user may (authorization stays in the catalog).
//!
//! - `GET /ui/` and `/ui/{file}`: the console's files (`/ui` redirects to `/ui/`);
//! - `GET /ui/config.json`: how the console signs in. With `--console-oidc-client-id`,
//!   it names the external issuer's authorization and token endpoints, and the console
//!   signs users in there (authorization code flow with PKCE, as a public client whose
//!   redirect URI is this server's `/ui/`); the pages' Content-Security-Policy then also
//!   lets them call that token endpoint, and nothing else;
//! - `GET /openapi`: the list of documents; `GET /openapi/{file}`: the OpenAPI documents
//!   of the APIs Floe serves (Iceberg REST, Polaris management, Floe's own endpoints);
//! - `GET /docs`: the API reference, a page of the console.
//!
//! All of it is public (no token): it is the same for everyone and holds no data.

use std::sync::{Arc, OnceLock};

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::error::ApiError;
use super::AppState;

/// The console's sign-in at an external issuer, as configured.
#[derive(Debug, Clone)]
pub struct ConsoleClient {
    /// The public client registered at the issuer for the console (no secret: PKCE).
    pub client_id: String,
    /// What the console asks for (space-separated scopes).
    pub scope: String,
}

/// How the console signs users in at the external issuer (`/ui/config.json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConsoleLogin {
    pub issuer: String,
    pub client_id: String,
    pub scope: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
}

/// What the console's routes serve besides the embedded files.
#[derive(Debug, Clone, Default)]
pub struct ConsoleSettings {
    pub login: Option<ConsoleLogin>,
}

/// The console's pages only ever load this server's files and call this server (and,
/// with an external sign-in, the issuer's token endpoint); nothing inline, never framed.
fn content_security_policy(login: Option<&ConsoleLogin>) -> HeaderValue {
    let issuer = login
        .and_then(|l| url::Url::parse(&l.token_endpoint).ok())
        .map(|u| format!(" {}", u.origin().ascii_serialization()))
        .unwrap_or_default();
    HeaderValue::from_str(&format!(
        "default-src 'self'; connect-src 'self'{issuer}; img-src 'self' data:; \
         frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ))
    .expect("a URL origin is a valid header value")
}

/// Built once per router: the policy header and `/ui/config.json`.
struct Page {
    csp: HeaderValue,
    config: Vec<u8>,
}

/// One embedded file.
struct Asset {
    path: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($dir:literal, $path:literal, $mime:expr) => {
        Asset {
            path: $path,
            mime: $mime,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// The console's files (paths under `/ui/`).
const CONSOLE: &[Asset] = &[
    asset!("console", "index.html", "text/html; charset=utf-8"),
    asset!("console", "style.css", "text/css; charset=utf-8"),
    asset!("console", "app.js", JS),
    asset!("console", "api.js", JS),
    asset!("console", "dom.js", JS),
    asset!("console", "browse.js", JS),
    asset!("console", "table.js", JS),
    asset!("console", "chart.js", JS),
    asset!("console", "view.js", JS),
    asset!("console", "generic.js", JS),
    asset!("console", "policies.js", JS),
    asset!("console", "security.js", JS),
    asset!("console", "dropped.js", JS),
    asset!("console", "docs.js", JS),
    asset!("console", "oidc.js", JS),
    asset!("console", "favicon.svg", "image/svg+xml"),
];

/// The OpenAPI documents (paths under `/openapi/`), with their titles for the index.
const DOCUMENTS: &[(Asset, &str)] = &[
    (
        asset!(
            "docs/openapi",
            "iceberg-rest-catalog.json",
            "application/json"
        ),
        "Apache Iceberg REST catalog (/v1, also under /api/catalog/v1)",
    ),
    (
        asset!(
            "docs/openapi",
            "polaris-management.json",
            "application/json"
        ),
        "Apache Polaris management API (/api/management/v1)",
    ),
    (
        asset!("docs/openapi", "polaris-catalog.json", "application/json"),
        "Apache Polaris catalog extensions: generic tables and policies (/api/catalog/polaris/v1)",
    ),
    (
        asset!("docs/openapi", "floe.json", "application/json"),
        "Floe's own endpoints (events, undrop, health, metrics)",
    ),
];

pub fn routes(settings: &ConsoleSettings) -> Router<AppState> {
    let page = Arc::new(Page {
        csp: content_security_policy(settings.login.as_ref()),
        config: serde_json::to_vec(&serde_json::json!({ "oidc": settings.login }))
            .expect("the console config serializes"),
    });
    let (index_page, files, docs, config) = (page.clone(), page.clone(), page.clone(), page);
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route(
            "/ui/",
            get(|headers: HeaderMap| async move { serve(&headers, "index.html", &index_page) }),
        )
        .route(
            "/ui/config.json",
            get(|| async move {
                (
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    config.config.clone(),
                )
            }),
        )
        .route(
            "/ui/{file}",
            get(|headers: HeaderMap, Path(file): Path<String>| async move {
                serve(&headers, &file, &files)
            }),
        )
        .route("/docs", get(|| async { Redirect::to("/ui/#/docs") }))
        .route("/openapi", get(index))
        .route(
            "/openapi/{file}",
            get(|headers: HeaderMap, Path(file): Path<String>| async move {
                document(&headers, &file, &docs)
            }),
        )
}

fn document(headers: &HeaderMap, file: &str, page: &Page) -> Response {
    match DOCUMENTS.iter().position(|(a, _)| a.path == file) {
        Some(i) => respond(headers, &DOCUMENTS[i].0, etag(CONSOLE.len() + i), page),
        None => ApiError::not_found(format!("No API document named {file}")).into_response(),
    }
}

async fn index() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "documents": DOCUMENTS.iter().map(|(a, title)| serde_json::json!({
            "name": a.path,
            "title": title,
            "url": format!("/openapi/{}", a.path),
        })).collect::<Vec<_>>()
    }))
}

fn serve(headers: &HeaderMap, file: &str, page: &Page) -> Response {
    match CONSOLE.iter().position(|a| a.path == file) {
        Some(i) => respond(headers, &CONSOLE[i], etag(i), page),
        None => ApiError::not_found(format!("No console file named {file}")).into_response(),
    }
}

/// The file, or 304 when the browser's copy is current. `no-cache` makes the browser
/// ask every time (a new build may change any file), and the ETag keeps that cheap.
fn respond(headers: &HeaderMap, asset: &Asset, etag: &'static str, page: &Page) -> Response {
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let common = [
        (header::ETAG, HeaderValue::from_static(etag)),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::CONTENT_SECURITY_POLICY, page.csp.clone()),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime))],
        asset.body,
    )
        .into_response()
}

/// The ETag of asset `i` (console files first, then documents): a hash of its bytes,
/// computed once.
fn etag(i: usize) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        CONSOLE
            .iter()
            .chain(DOCUMENTS.iter().map(|(a, _)| a))
            .map(|a| {
                format!(
                    "\"{:016x}\"",
                    crate::stable_hash::fnv1a(a.body.iter().copied())
                )
            })
            .collect()
    })[i]
        .as_str()
}

/// Whether `path` is one of this module's (served without a token).
pub fn is_console_path(path: &str) -> bool {
    path == "/ui"
        || path == "/docs"
        || path == "/openapi"
        || path.starts_with("/ui/")
        || path.starts_with("/openapi/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_json_and_openapi_3() {
        for (asset, _) in DOCUMENTS {
            let doc: serde_json::Value = serde_json::from_slice(asset.body)
                .unwrap_or_else(|e| panic!("{}: {e}", asset.path));
            assert!(
                doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
                "{}",
                asset.path
            );
        }
    }

    #[test]
    fn console_paths_are_only_the_console_and_documents() {
        for public in [
            "/ui",
            "/ui/",
            "/ui/app.js",
            "/docs",
            "/openapi",
            "/openapi/floe.json",
        ] {
            assert!(is_console_path(public), "{public}");
        }
        for private in [
            "/uix",
            "/v1/config",
            "/openapix",
            "/api/management/v1/catalogs",
        ] {
            assert!(!is_console_path(private), "{private}");
        }
    }

    #[test]
    fn the_policy_lets_the_console_call_only_the_issuers_token_endpoint() {
        let alone = content_security_policy(None);
        assert!(alone.to_str().unwrap().contains("connect-src 'self';"));
        let login = ConsoleLogin {
            issuer: "https://idp.example/realms/data".into(),
            client_id: "floe-console".into(),
            scope: "openid".into(),
            authorization_endpoint: "https://idp.example/realms/data/auth".into(),
            token_endpoint: "https://idp.example:8443/realms/data/token".into(),
        };
        let policy = content_security_policy(Some(&login));
        let policy = policy.to_str().unwrap();
        assert!(
            policy.contains("connect-src 'self' https://idp.example:8443;"),
            "{policy}"
        );
        assert!(policy.starts_with("default-src 'self';"), "{policy}");
    }

    #[test]
    fn every_console_module_import_is_embedded() {
        // A module the browser cannot load leaves a blank page; catch it at build time.
        for asset in CONSOLE.iter().filter(|a| a.mime == JS) {
            let text = std::str::from_utf8(asset.body).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let file = line
                    .rsplit_once("\"./")
                    .map(|(_, rest)| rest.trim_end_matches(['"', ';']))
                    .unwrap_or_else(|| panic!("{}: unusual import {line}", asset.path));
                assert!(
                    CONSOLE.iter().any(|a| a.path == file),
                    "{} imports {file}, which is not embedded",
                    asset.path
                );
            }
        }
    }
}
