//! Soft-deleted tables and views (Floe's own management endpoints, next to Polaris's):
//!
//! - `GET    /api/management/v1/catalogs/{catalog}/dropped`: list, newest first;
//! - `POST   /api/management/v1/catalogs/{catalog}/dropped/{id}/undrop`: bring one
//!   back, under its old name or `{"namespace": [...], "name": "..."}`;
//! - `DELETE /api/management/v1/catalogs/{catalog}/dropped/{id}`: purge it now.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::context::Ctx;
use super::error::{ApiError, ApiResult};
use super::extract::malformed;
use super::{AppState, Routes};
use crate::model::{Ident, Namespace};

pub fn routes(routes: Routes) -> Routes {
    routes
        .route("/catalogs/{catalog}/dropped", get(list))
        .route("/catalogs/{catalog}/dropped/{id}/undrop", post(undrop))
        .route("/catalogs/{catalog}/dropped/{id}", delete(purge))
}

async fn list(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(catalog): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(state.catalog.list_dropped(&ctx, &catalog).await?))
}

/// Where to bring it back: both fields, or neither (its old name).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct UndropRequest {
    namespace: Option<Vec<String>>,
    name: Option<String>,
}

async fn undrop(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((catalog, id)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let request: UndropRequest = if body.iter().all(u8::is_ascii_whitespace) {
        UndropRequest::default()
    } else {
        // Parsed here, not by `JsonBody`: an empty body is allowed (the old name).
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(malformed::<UndropRequest>(&body, e)))?
    };
    let to = match (request.namespace, request.name) {
        (None, None) => None,
        (Some(namespace), Some(name)) => Some(Ident::new(Namespace::new(namespace)?, name)?),
        _ => {
            return Err(ApiError::bad_request(
                "Give both namespace and name for a new name, or neither for the old one",
            ))
        }
    };
    Ok(Json(state.catalog.undrop(&ctx, &catalog, &id, to).await?))
}

async fn purge(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((catalog, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    state.catalog.purge_dropped(&ctx, &catalog, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
