//! The HTTP layer: parse the request, authorize, call the catalog, map the result.
//! No catalog logic lives here.
//!
//! - `config`: `GET /v1/config` and the endpoint list.
//! - `namespaces`, `tables`, `views`: the Iceberg REST resources, served under `/v1` and
//!   under Polaris's `/api/catalog/v1`.
//! - `management`: Polaris's management API for catalogs.
//! - `error`: the single mapping of errors to statuses and Iceberg exception types.
//!
//! Authorization will sit in `authorize` (below): every route passes through it. Today
//! the server is open, as Floe has no principals yet.

mod config;
pub mod error;
mod extract;
mod management;
mod namespaces;
mod tables;
mod views;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::catalog::Catalog;
use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<Catalog>,
    /// The catalog used when a client names no warehouse.
    pub default_catalog: Arc<str>,
}

/// Limits of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Largest request body accepted (413 above it).
    pub max_body_bytes: usize,
}

pub fn router(state: AppState, settings: &HttpSettings) -> Router {
    let iceberg = Router::new()
        .merge(config::routes())
        .merge(namespaces::routes())
        .merge(tables::routes())
        .merge(views::routes());
    Router::new()
        .nest("/v1", iceberg.clone())
        .nest("/api/catalog/v1", iceberg)
        .nest("/api/management/v1", management::routes())
        .route("/healthz", get(healthz))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(authorize))
        .layer(middleware::from_fn(log_request))
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .with_state(state)
}

async fn healthz(State(state): State<AppState>) -> Response {
    if state.catalog.is_healthy().await {
        (
            StatusCode::OK,
            axum::Json(serde_json::json!({"status": "ok"})),
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({"status": "unavailable"})),
        )
            .into_response()
    }
}

async fn unknown_route() -> ApiError {
    ApiError::not_found("No such endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "BadRequestException",
        "Method not allowed on this endpoint",
    )
}

/// Where authentication and authorization will be enforced; admits every request until
/// Floe has principals and roles.
async fn authorize(request: Request, next: Next) -> Response {
    next.run(request).await
}

/// One log line per request: method, path, status, latency.
async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    tracing::info!(
        target: "floe::request",
        %method,
        path,
        status = response.status().as_u16(),
        micros = started.elapsed().as_micros() as u64,
    );
    response
}
