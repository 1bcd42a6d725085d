//! View endpoints.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Json;
use iceberg::ViewUpdate;
use serde::Deserialize;
use serde_json::Value;

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::{check_body_ident, ident, identifiers_page, namespace, JsonBody, Params};
use super::outcome::render;
use super::{AppState, Routes};
use crate::catalog::commit::ViewRequirement;
use crate::catalog::views::{CreateView, ViewChange};
use crate::catalog::Outcome;
use crate::model::{IdentBody, Rename};

pub fn routes(routes: Routes) -> Routes {
    routes
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

async fn list(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let page = state
        .catalog
        .list_views(&ctx, &prefix, &namespace(&ns)?, &params.list_request()?)
        .await?;
    Ok(Json(identifiers_page(&page.items, page.next_page_token)))
}

async fn create(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<CreateView>,
) -> ApiResult<Response> {
    let view = state
        .catalog
        .create_view(&ctx, &prefix, &namespace(&ns)?, body)
        .await?;
    Ok(render(&Outcome::View(view)))
}

async fn load(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, view)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let view = state
        .catalog
        .load_view(&ctx, &prefix, &ident(&ns, &view)?)
        .await?;
    Ok(render(&Outcome::View(view)))
}

async fn exists(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, view)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .load_view(&ctx, &prefix, &ident(&ns, &view)?)
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
    Ctx(ctx): Ctx,
    Path((prefix, ns, view)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<CommitView>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &view)?;
    check_body_ident(body.identifier, &ident)?;
    let change = ViewChange {
        ident,
        requirements: body.requirements,
        updates: body.updates,
    };
    let view = state.catalog.commit_view(&ctx, &prefix, change).await?;
    Ok(render(&Outcome::View(view)))
}

async fn drop_view(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, view)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .drop_view(&ctx, &prefix, &ident(&ns, &view)?)
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
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<RegisterView>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &body.name)?;
    let view = state
        .catalog
        .register_view(&ctx, &prefix, &ident, &body.metadata_location)
        .await?;
    Ok(render(&Outcome::View(view)))
}

async fn rename(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    JsonBody(body): JsonBody<Rename>,
) -> ApiResult<StatusCode> {
    let (from, to) = (body.source.into_ident()?, body.destination.into_ident()?);
    state.catalog.rename_view(&ctx, &prefix, &from, &to).await?;
    Ok(StatusCode::NO_CONTENT)
}
