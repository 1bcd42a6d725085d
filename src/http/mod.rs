//! The HTTP layer: parse the request, build its context, call the catalog, render the
//! result. No catalog logic lives here.
//!
//! - `config`: `GET /v1/config` and the endpoint list.
//! - `namespaces`, `tables`, `views`: the Iceberg REST resources, served under `/v1` and
//!   under Polaris's `/api/catalog/v1`.
//! - `events`: the REST events endpoint (the change-event outbox, page by page).
//! - `management`: Polaris's management API for catalogs; `dropped`: Floe's undrop
//!   endpoints beside it.
//! - `context`: the `Ctx` extractor (the catalog's request context); `idempotency`:
//!   the `Idempotency-Key` layer; `outcome`: rendering of catalog outcomes.
//! - `error`: the single mapping of errors to statuses and Iceberg exception types.
//! - `access_log`: the per-request log line, written off the request path.
//! - `console`: the web console (`/ui`) and the OpenAPI documents (`/openapi`), embedded.
//!
//! Authentication belongs in a layer here that turns a token into a `Principal` in the
//! request's extensions (`Ctx` picks it up). Authorization does not: it needs the
//! resources, so it happens at the catalog's entry points.

pub mod access_log;
pub mod auth;
mod config;
pub mod console;
pub mod context;
mod dropped;
pub mod error;
mod events;
mod extract;
pub mod idempotency;
mod management;
mod namespaces;
pub mod outcome;
mod principals;
mod tables;
mod views;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::catalog::Catalog;
use context::RequestId;
use error::ApiError;

/// What every handler can reach. One `Arc`: the router clones the state (with each
/// layered route) for every request, and one reference count is the cheapest clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The contents of [`AppState`].
pub struct Shared {
    pub catalog: Arc<Catalog>,
    /// The catalog used when a client names no warehouse.
    pub default_catalog: Arc<str>,
    /// Largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    pub auth: auth::AuthSettings,
}

/// Limits of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    /// How the console signs users in.
    pub console: console::ConsoleSettings,
}

pub fn router(state: AppState, settings: &HttpSettings) -> Router {
    let iceberg = Router::new()
        .route("/oauth/tokens", axum::routing::post(auth::token))
        .merge(config::routes())
        .merge(namespaces::routes())
        .merge(events::routes())
        .merge(tables::routes())
        .merge(views::routes());
    Router::new()
        .nest("/v1", iceberg.clone())
        .nest("/api/catalog/v1", iceberg)
        .nest(
            "/api/management/v1",
            management::routes()
                .merge(principals::routes())
                .merge(dropped::routes()),
        )
        .route(
            "/api/catalog/polaris/v1/{catalog}/applicable-policies",
            get(management::applicable_policies),
        )
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .merge(console::routes(&settings.console))
        // A route layer, added before the 405 fallback, so that the fallback stays outside
        // it: an undeclared method is a 405 even when it carries a reused Idempotency-Key.
        // One layer for both of its jobs: each costs a boxed clone per request.
        .route_layer(middleware::from_fn_with_state(state.clone(), routed))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        // One outer layer for what every request goes through (request id, log line,
        // authentication): each `from_fn` layer costs a boxed clone per request.
        .layer(middleware::from_fn_with_state(state.clone(), front))
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .with_state(state)
}

/// Alive: the process answers HTTP (a liveness probe restarts it otherwise).
async fn healthz() -> Response {
    axum::Json(serde_json::json!({"status": "ok"})).into_response()
}

/// Ready to serve: the store is reachable and its schema is this build's (a readiness
/// probe takes the node out of the load balancer otherwise).
async fn readyz(State(state): State<AppState>) -> Response {
    match state.catalog.is_ready().await {
        Ok(()) => axum::Json(serde_json::json!({"status": "ready"})).into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({"status": "unavailable", "reason": reason})),
        )
            .into_response(),
    }
}

/// Prometheus's text format (`metrics`), with the pool's state as of now.
async fn prometheus(State(state): State<AppState>) -> Response {
    let (store, pool) = state.catalog.store_state();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::render(store, pool),
    )
        .into_response()
}

/// A method as a metrics label: the standard ones, anything else as `other` (a client
/// must not be able to add series).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method as M;
    match *method {
        M::GET => "GET",
        M::HEAD => "HEAD",
        M::POST => "POST",
        M::PUT => "PUT",
        M::DELETE => "DELETE",
        M::PATCH => "PATCH",
        M::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The route template of the request, for metrics: put on the response by a route
/// layer (which runs after routing, where axum knows the template).
#[derive(Clone, Copy)]
struct Route(&'static str);

/// What runs once the route is known: a keyed mutation takes the idempotency path
/// (`idempotency`), and the response is marked with the route template for metrics.
async fn routed(
    State(state): State<AppState>,
    matched: Option<axum::extract::MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = if idempotency::is_keyed_mutation(&request) {
        idempotency::idempotent(state, request, next).await
    } else {
        next.run(request).await
    };
    if let Some(matched) = matched {
        response
            .extensions_mut()
            .insert(Route(crate::metrics::intern(matched.as_str())));
    }
    response
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

/// Gives the request its id (echoed as `X-Request-Id`) and logs one line per request:
/// method, path, status, latency, request id. The line is queued here and formatted and
/// written by background threads (`access_log`), so logging never holds up a request.
/// Then authenticates it (`auth::authenticate`).
async fn front(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = RequestId::from_header(request.headers().get(REQUEST_ID));
    request.extensions_mut().insert(id.clone());
    let method = method_label(request.method());
    let logged =
        access_log::enabled().then(|| (request.method().clone(), request.uri().path().to_string()));
    let mut response = match auth::authenticate(&state, &mut request).await {
        Ok(()) => next.run(request).await,
        Err(refused) => refused,
    };
    if let Ok(value) = HeaderValue::from_str(&id.0) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let status = response.status().as_u16();
    if crate::metrics::enabled() {
        let route = response
            .extensions()
            .get::<Route>()
            .map_or("unmatched", |r| r.0);
        crate::metrics::record_request(method, route, status, started.elapsed());
    }
    if let Some((method, path)) = logged {
        access_log::log(access_log::Line {
            at: std::time::SystemTime::now(),
            method,
            path,
            status,
            micros: started.elapsed().as_micros() as u64,
            request_id: id.0,
        });
    }
    response
}

const REQUEST_ID: &str = "x-request-id";
