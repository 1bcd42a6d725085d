//! View endpoints.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use iceberg::ViewUpdate;
use serde::Deserialize;
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::extract::{ident, namespace, IdentBody, JsonBody, Params};
use super::tables::{identifiers_page, Rename};
use super::AppState;
use crate::catalog::commit::ViewRequirement;
use crate::catalog::views::{CreateView, LoadedView};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/{prefix}/namespaces/{namespace}/views",
            get(list).post(create),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/views/{view}",
            get(load).head(exists).post(commit).delete(drop_view),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/register-view",
            post(register),
        )
        .route("/{prefix}/views/rename", post(rename))
}

fn load_view_response(view: LoadedView) -> Response {
    let mut body = String::with_capacity(view.metadata.len() + 128);
    body.push_str("{\"metadata-location\":");
    body.push_str(&serde_json::to_string(&view.metadata_location).expect("a string serialises"));
    body.push_str(",\"metadata\":");
    body.push_str(&view.metadata);
    body.push_str(",\"config\":{}}");
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn list(
    State(state): State<AppState>,
    Path((prefix, ns)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let page = state
        .catalog
        .list_views(&prefix, &namespace(&ns)?, &params.list_request()?)
        .await?;
    Ok(Json(identifiers_page(&page.items, page.next_page_token)))
}

async fn create(
    State(state): State<AppState>,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<CreateView>,
) -> ApiResult<Response> {
    let view = state
        .catalog
        .create_view(&prefix, &namespace(&ns)?, body)
        .await?;
    Ok(load_view_response(view))
}

async fn load(
    State(state): State<AppState>,
    Path((prefix, ns, view)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let view = state
        .catalog
        .load_view(&prefix, &ident(&ns, &view)?)
        .await?;
    Ok(load_view_response(view))
}

async fn exists(
    State(state): State<AppState>,
    Path((prefix, ns, view)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .load_view(&prefix, &ident(&ns, &view)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct CommitView {
    identifier: Option<IdentBody>,
    #[serde(default)]
    requirements: Vec<ViewRequirement>,
    #[serde(default)]
    updates: Vec<ViewUpdate>,
}

async fn commit(
    State(state): State<AppState>,
    Path((prefix, ns, view)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<CommitView>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &view)?;
    if let Some(named) = body.identifier {
        if named.into_ident()? != ident {
            return Err(ApiError::bad_request(
                "The identifier in the body does not match the path",
            ));
        }
    }
    let view = state
        .catalog
        .commit_view(&prefix, &ident, body.requirements, body.updates)
        .await?;
    Ok(load_view_response(view))
}

async fn drop_view(
    State(state): State<AppState>,
    Path((prefix, ns, view)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .drop_view(&prefix, &ident(&ns, &view)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RegisterView {
    name: String,
    metadata_location: String,
}

async fn register(
    State(state): State<AppState>,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<RegisterView>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &body.name)?;
    let view = state
        .catalog
        .register_view(&prefix, &ident, &body.metadata_location)
        .await?;
    Ok(load_view_response(view))
}

async fn rename(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
    JsonBody(body): JsonBody<Rename>,
) -> ApiResult<StatusCode> {
    let (from, to) = (body.source.into_ident()?, body.destination.into_ident()?);
    state.catalog.rename_view(&prefix, &from, &to).await?;
    Ok(StatusCode::NO_CONTENT)
}
