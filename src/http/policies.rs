//! Polaris's policy API (`/polaris/v1/{prefix}/namespaces/{namespace}/policies…` and
//! `/polaris/v1/{prefix}/applicable-policies`): policies, their attachments and what
//! applies where. Served under `/api/catalog` (where Polaris serves it) and at the root,
//! as the generic tables are.
//!
//! Lists come in one page (`next-page-token` is null), as Polaris answers them: a
//! catalog's policies are one document. A `policyType` filter that names no type is no
//! filter, as in Polaris.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::Json;
use serde_json::{json, Value};

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::{namespace, JsonBody, Params};
use super::{AppState, Routes};
use crate::catalog::policies::{
    AttachPolicy, CreatePolicy, DetachPolicy, PolicyType, UpdatePolicy,
};

pub fn routes(routes: Routes) -> Routes {
    routes
        .route(
            "/{prefix}/namespaces/{namespace}/policies",
            get(list).post(create),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/policies/{policy}",
            get(load).put(update).delete(drop_policy),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/policies/{policy}/mappings",
            put(attach).post(detach),
        )
        .route("/{prefix}/applicable-policies", get(applicable))
}

/// The `policyType` filter: a known type, or none (Polaris ignores an unknown one).
fn type_filter(params: &Params) -> Option<&'static str> {
    params
        .get("policyType")
        .and_then(PolicyType::parse)
        .map(PolicyType::name)
}

async fn list(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let identifiers = state
        .catalog
        .list_policies(&ctx, &prefix, &namespace(&ns)?, type_filter(&params))
        .await?;
    Ok(Json(
        json!({ "identifiers": identifiers, "next-page-token": null }),
    ))
}

async fn create(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<CreatePolicy>,
) -> ApiResult<Json<Value>> {
    let created = state
        .catalog
        .create_policy(&ctx, &prefix, &namespace(&ns)?, body)
        .await?;
    Ok(Json(created))
}

async fn load(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, policy)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let loaded = state
        .catalog
        .load_policy(&ctx, &prefix, &namespace(&ns)?, &policy)
        .await?;
    Ok(Json(loaded))
}

async fn update(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, policy)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<UpdatePolicy>,
) -> ApiResult<Json<Value>> {
    let updated = state
        .catalog
        .update_policy(&ctx, &prefix, &namespace(&ns)?, &policy, body)
        .await?;
    Ok(Json(updated))
}

async fn drop_policy(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, policy)): Path<(String, String, String)>,
    params: Params,
) -> ApiResult<StatusCode> {
    let detach_all = params.flag("detach-all")?;
    state
        .catalog
        .drop_policy(&ctx, &prefix, &namespace(&ns)?, &policy, detach_all)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn attach(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, policy)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<AttachPolicy>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .map_policy(
            &ctx,
            &prefix,
            &namespace(&ns)?,
            &policy,
            &body.target,
            Some(body.parameters.unwrap_or_default()),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn detach(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, policy)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<DetachPolicy>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .map_policy(&ctx, &prefix, &namespace(&ns)?, &policy, &body.target, None)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `namespace` (levels joined by U+001F) and `target-name`: the catalog without a
/// namespace, a namespace without a name, else a table.
async fn applicable(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let ns = match params.get("namespace") {
        None | Some("") => None,
        Some(raw) => Some(namespace(raw)?),
    };
    let table = params.get("target-name").filter(|t| !t.is_empty());
    let policies = state
        .catalog
        .applicable_policies(&ctx, &prefix, ns.as_ref(), table, type_filter(&params))
        .await?;
    Ok(Json(
        json!({ "applicable-policies": policies, "next-page-token": null }),
    ))
}
