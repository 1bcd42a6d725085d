//! The web console (`/ui`) and the API documents (`/openapi`), built into the binary.
//!
//! The console is plain HTML, CSS and JavaScript modules under `console/` in the source
//! tree, with no build step and nothing fetched at run time: `include_bytes!` puts every
//! file in the binary, so `floe serve` alone serves it, offline. It talks to the same
//! REST and management endpoints as any client, with the user's own token, so it can
//! show and do exactly what the user may (authorization stays in the catalog).
//!
//! - `GET /ui/` and `/ui/{file}`: the console's files (`/ui` redirects to `/ui/`);
//! - `GET /openapi`: the list of documents; `GET /openapi/{file}`: the OpenAPI documents
//!   of the APIs Floe serves (Iceberg REST, Polaris management, Floe's own endpoints);
//! - `GET /docs`: the API reference, a page of the console.
//!
//! All of it is public (no token): it is the same for everyone and holds no data.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::error::ApiError;
use super::AppState;

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
    asset!("console", "security.js", JS),
    asset!("console", "dropped.js", JS),
    asset!("console", "docs.js", JS),
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
        asset!("docs/openapi", "floe.json", "application/json"),
        "Floe's own endpoints (events, undrop, health, metrics)",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route(
            "/ui/",
            get(|headers: HeaderMap| async move { serve(&headers, "index.html") }),
        )
        .route("/ui/{file}", get(console_file))
        .route("/docs", get(|| async { Redirect::to("/ui/#/docs") }))
        .route("/openapi", get(index))
        .route("/openapi/{file}", get(document))
}

async fn console_file(headers: HeaderMap, Path(file): Path<String>) -> Response {
    serve(&headers, &file)
}

async fn document(headers: HeaderMap, Path(file): Path<String>) -> Response {
    match DOCUMENTS.iter().position(|(a, _)| a.path == file) {
        Some(i) => respond(&headers, &DOCUMENTS[i].0, etag(CONSOLE.len() + i)),
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

fn serve(headers: &HeaderMap, file: &str) -> Response {
    match CONSOLE.iter().position(|a| a.path == file) {
        Some(i) => respond(headers, &CONSOLE[i], etag(i)),
        None => ApiError::not_found(format!("No console file named {file}")).into_response(),
    }
}

/// The file, or 304 when the browser's copy is current. `no-cache` makes the browser
/// ask every time (a new build may change any file), and the ETag keeps that cheap.
fn respond(headers: &HeaderMap, asset: &Asset, etag: &'static str) -> Response {
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let common = [
        (header::ETAG, HeaderValue::from_static(etag)),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        // The console only ever loads its own files and calls its own server; nothing
        // inline, nothing from elsewhere, never framed.
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; \
                 base-uri 'none'; form-action 'none'",
            ),
        ),
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
