//! Server-side scan planning: submit a plan, fetch a plan task's page, and the plan-id
//! endpoints (plans complete when submitted, so those only answer what they can).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::{ident, JsonBody};
use super::{AppState, Routes};
use crate::catalog::scan::ScanRequest;

pub fn routes(routes: Routes) -> Routes {
    routes
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/plan",
            post(plan),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan_id}",
            get(fetch_plan).delete(cancel_plan),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
            post(tasks),
        )
}

async fn plan(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<ScanRequest>,
) -> ApiResult<Json<Value>> {
    let result = state
        .catalog
        .plan_table_scan(&ctx, &prefix, &ident(&ns, &table)?, body)
        .await?;
    Ok(Json(result))
}

#[derive(Deserialize)]
struct FetchScanTasks {
    #[serde(rename = "plan-task")]
    plan_task: String,
}

async fn tasks(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<FetchScanTasks>,
) -> ApiResult<Json<Value>> {
    let result = state
        .catalog
        .fetch_scan_tasks(&ctx, &prefix, &ident(&ns, &table)?, &body.plan_task)
        .await?;
    Ok(Json(result))
}

async fn fetch_plan(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table, plan_id)): Path<(String, String, String, String)>,
) -> ApiResult<StatusCode> {
    let ident = ident(&ns, &table)?;
    Err(state
        .catalog
        .fetch_plan(&ctx, &prefix, &ident, &plan_id)
        .await
        .into())
}

async fn cancel_plan(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table, plan_id)): Path<(String, String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .cancel_plan(&ctx, &prefix, &ident(&ns, &table)?, &plan_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
