//! Polaris's generic table endpoints (`/polaris/v1/{prefix}/namespaces/{namespace}/
//! generic-tables`): list, create, load, drop. Served under `/api/catalog` (where Polaris
//! serves them, and where its Spark client looks) and at the root, as `/v1` is.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Json;
use serde_json::Value;

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::{ident, identifiers_page, namespace, JsonBody, Params};
use super::{AppState, Routes};
use crate::catalog::generic::{load_response, CreateGenericTable};

pub fn routes(routes: Routes) -> Routes {
    routes
        .route(
            "/{prefix}/namespaces/{namespace}/generic-tables",
            get(list).post(create),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/generic-tables/{table}",
            get(load).delete(drop_table),
        )
}

async fn list(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let page = state
        .catalog
        .list_generic_tables(&ctx, &prefix, &namespace(&ns)?, &params.list_request()?)
        .await?;
    Ok(Json(identifiers_page(&page.items, page.next_page_token)))
}

async fn create(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<CreateGenericTable>,
) -> ApiResult<Json<Value>> {
    let loaded = state
        .catalog
        .create_generic_table(&ctx, &prefix, &namespace(&ns)?, body)
        .await?;
    Ok(Json(load_response(&loaded)))
}

async fn load(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let loaded = state
        .catalog
        .load_generic_table(&ctx, &prefix, &ident(&ns, &table)?)
        .await?;
    Ok(Json(load_response(&loaded)))
}

async fn drop_table(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .drop_generic_table(&ctx, &prefix, &ident(&ns, &table)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
