//! Namespace endpoints.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Json;

use serde::Deserialize;
use serde_json::{json, Value};

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::{namespace, JsonBody, Params};
use super::outcome::{namespace_response, render};
use super::{AppState, Routes};
use crate::catalog::Outcome;
use crate::model::{Namespace, Properties};

pub fn routes(routes: Routes) -> Routes {
    routes
        .route("/{prefix}/namespaces", get(list).post(create))
        .route(
            "/{prefix}/namespaces/{namespace}",
            get(load).head(exists).delete(drop_namespace),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/properties",
            post(update_properties),
        )
}

async fn list(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let parent = match params.get("parent") {
        None | Some("") => None,
        Some(raw) => Some(namespace(raw)?),
    };
    let page = state
        .catalog
        .list_namespaces(&ctx, &prefix, parent.as_ref(), &params.list_request()?)
        .await?;
    let namespaces: Vec<&[String]> = page.items.iter().map(|ns| ns.levels()).collect();
    Ok(Json(
        json!({ "namespaces": namespaces, "next-page-token": page.next_page_token }),
    ))
}

#[derive(Deserialize)]
struct CreateNamespace {
    namespace: Vec<String>,
    #[serde(default)]
    properties: Properties,
}

async fn create(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    JsonBody(body): JsonBody<CreateNamespace>,
) -> ApiResult<Response> {
    let ns = Namespace::new(body.namespace)?;
    let properties = state
        .catalog
        .create_namespace(&ctx, &prefix, &ns, body.properties)
        .await?;
    Ok(render(&Outcome::Namespace {
        namespace: ns.levels().to_vec(),
        properties,
    }))
}

async fn load(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, raw)): Path<(String, String)>,
) -> ApiResult<Response> {
    let namespace = namespace(&raw)?;
    let properties = state
        .catalog
        .load_namespace(&ctx, &prefix, &namespace)
        .await?;
    Ok(namespace_response(namespace.levels(), properties.json()))
}

async fn exists(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, raw)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .load_namespace(&ctx, &prefix, &namespace(&raw)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn drop_namespace(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, raw)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .drop_namespace(&ctx, &prefix, &namespace(&raw)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct UpdateProperties {
    #[serde(default)]
    removals: Vec<String>,
    #[serde(default)]
    updates: Properties,
}

async fn update_properties(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, raw)): Path<(String, String)>,
    JsonBody(body): JsonBody<UpdateProperties>,
) -> ApiResult<Response> {
    let change = state
        .catalog
        .update_namespace_properties(
            &ctx,
            &prefix,
            &namespace(&raw)?,
            body.removals,
            body.updates,
        )
        .await?;
    Ok(render(&Outcome::PropertiesChange(change)))
}
