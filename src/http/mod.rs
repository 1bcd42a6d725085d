//! The HTTP layer: parse the request, build its context, call the catalog, render the
//! result. No catalog logic lives here.
//!
//! - `config`: `GET /v1/config` and the endpoint list.
//! - `namespaces`, `tables`, `views`: the Iceberg REST resources, served under `/v1` and
//!   under Polaris's `/api/catalog/v1`.
//! - `scan`: server-side scan planning (`…/plan`, `…/tasks`).
//! - `generic`: Polaris's generic tables (`/polaris/v1/{prefix}/…/generic-tables`).
//! - `policies`: Polaris's policy API (`/polaris/v1/{prefix}/…/policies`,
//!   `/polaris/v1/{prefix}/applicable-policies`).
//! - `federated`: requests to a federated catalog, authorized here and forwarded to its
//!   remote catalog (before routing reaches a handler).
//! - `events`: the REST events endpoint (the change-event outbox, page by page).
//! - `management`: Polaris's management API for catalogs; `dropped`: Floe's undrop
//!   endpoints beside it.
//! - `hot`: the server's service, [`App`]: table loads served without the router (the
//!   request engines send most), everything else routed.
//! - `front`: what every request goes through (request id, authentication, metrics, the
//!   access log); `context`: the `Ctx` extractor (the catalog's request context);
//!   `idempotency`: the `Idempotency-Key` layer; `outcome`: rendering of catalog outcomes.
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
mod federated;
mod front;
mod generic;
mod hot;
pub mod idempotency;
mod management;
mod namespaces;
mod notifications;
pub mod outcome;
mod policies;
mod principals;
mod scan;
mod tables;
mod views;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Router;

use crate::catalog::Catalog;
use error::ApiError;
pub use hot::App;

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

/// The server's service: the router behind the hot lane.
pub fn app(state: AppState, settings: &HttpSettings) -> App {
    App::new(router(state.clone(), settings), state)
}

/// Every route, the table load included (the hot lane declines what it cannot serve exactly).
fn router(state: AppState, settings: &HttpSettings) -> Router {
    let iceberg = |base| {
        let routes = Routes::under(base).route("/oauth/tokens", axum::routing::post(auth::token));
        let routes = config::routes(routes);
        let routes = namespaces::routes(routes);
        let routes = events::routes(routes);
        let routes = tables::routes(routes);
        let routes = notifications::routes(routes);
        let routes = scan::routes(routes);
        views::routes(routes).0
    };
    let polaris = |base| policies::routes(generic::routes(Routes::under(base))).0;
    let management = Routes::under("/api/management/v1");
    let management = dropped::routes(principals::routes(management::routes(management))).0;
    Router::new()
        .merge(iceberg("/v1"))
        .merge(iceberg("/api/catalog/v1"))
        .merge(management)
        .merge(polaris("/polaris/v1"))
        .merge(polaris("/api/catalog/polaris/v1"))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .merge(console::routes(&settings.console))
        // A route layer, added before the 405 fallback, so that the fallback stays outside
        // it: an undeclared method is a 405 even when it carries a reused Idempotency-Key.
        .route_layer(idempotency::IdempotencyLayer(state.clone()))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        // What every request goes through (request id, log line, metrics, authentication).
        .layer(front::FrontLayer(state.clone()))
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .with_state(state)
}

/// A set of routes under one base path, registered with their full paths. Not
/// `Router::nest`: that wraps every nested route in a layer that rewrites the request's
/// URI (a new allocation) and adds a boxed service clone, on every request.
pub struct Routes(Router<AppState>, &'static str);

impl Routes {
    fn under(base: &'static str) -> Self {
        Routes(Router::new(), base)
    }

    /// Adds `path` (relative to the base) with its handlers.
    pub fn route(self, path: &str, handlers: MethodRouter<AppState>) -> Self {
        let Routes(router, base) = self;
        Routes(router.route(&format!("{base}{path}"), handlers), base)
    }
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
