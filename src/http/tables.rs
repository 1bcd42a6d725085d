//! Table endpoints, rename and multi-table transactions.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use iceberg::{TableRequirement, TableUpdate};
use serde::Deserialize;
use serde_json::{json, Value};

use super::context::Ctx;
use super::error::{ApiError, ApiResult};
use super::extract::{
    check_body_ident, ident, identifiers_page, namespace, IfNoneMatch, JsonBody, Params,
};
use super::outcome::{render, table_etag, table_response, tagged_table_response, SnapshotsMode};
use super::{AppState, Routes};
use crate::catalog::context::RequestContext;
use crate::catalog::tables::{CreateTable, TableChange};
use crate::catalog::Outcome;
use crate::model::{IdentBody, Rename};
use crate::storage::signing::SignRequest;

/// A table's route (under each base). Its `GET` is also served by the hot lane
/// (`super::hot`).
pub(super) const TABLE: &str = "/{prefix}/namespaces/{namespace}/tables/{table}";

pub fn routes(routes: Routes) -> Routes {
    routes
        .route(
            "/{prefix}/namespaces/{namespace}/tables",
            get(list).post(create),
        )
        .route(
            TABLE,
            get(load).head(exists).post(commit).delete(drop_table),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
            get(credentials),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/sign",
            post(sign),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
            post(report_metrics),
        )
        .route("/{prefix}/namespaces/{namespace}/register", post(register))
        .route("/{prefix}/tables/rename", post(rename))
        .route("/{prefix}/transactions/commit", post(commit_transaction))
}

fn snapshots_mode(params: &Params) -> ApiResult<SnapshotsMode> {
    match params.get("snapshots") {
        None | Some("") => Ok(SnapshotsMode::All),
        Some(v) if v.eq_ignore_ascii_case("all") => Ok(SnapshotsMode::All),
        Some(v) if v.eq_ignore_ascii_case("refs") => Ok(SnapshotsMode::Refs),
        Some(v) => Err(ApiError::bad_request(format!(
            "snapshots must be all or refs, not {v:?}"
        ))),
    }
}

async fn list(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let page = state
        .catalog
        .list_tables(&ctx, &prefix, &namespace(&ns)?, &params.list_request()?)
        .await?;
    Ok(Json(identifiers_page(&page.items, page.next_page_token)))
}

async fn create(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<CreateTable>,
) -> ApiResult<Response> {
    let (table, config) = state
        .catalog
        .create_table(&ctx, &prefix, &namespace(&ns)?, body)
        .await?;
    Ok(table_response(&table, SnapshotsMode::All, &config))
}

async fn load(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    params: Params,
    if_none_match: IfNoneMatch,
) -> ApiResult<Response> {
    load_table(&state, &ctx, &prefix, &ns, &table, &params, &if_none_match).await
}

/// `GET` a table, with the path's segments decoded: the route's handler, and the hot
/// lane's (`super::hot`), which serves it without the router.
pub(super) async fn load_table(
    state: &AppState,
    ctx: &RequestContext,
    prefix: &str,
    ns: &str,
    table: &str,
    params: &Params,
    if_none_match: &IfNoneMatch,
) -> ApiResult<Response> {
    let mode = snapshots_mode(params)?;
    let ident = ident(ns, table)?;
    let loaded = state.catalog.load_table(ctx, prefix, &ident, mode).await?;
    let config = state
        .catalog
        .table_config(ctx, prefix, &ident, &loaded.metadata)
        .await?;
    let etag = table_etag(&loaded, mode, &config);
    if let Some(tag) = etag.as_deref().filter(|tag| if_none_match.matches(tag)) {
        // A 304 carries the ETag it matched (RFC 9110, 15.4.5).
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, tag.to_owned())]).into_response());
    }
    Ok(tagged_table_response(&loaded, &config, etag))
}

async fn exists(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    // `All`: the stored document as it is; `Refs` would parse and filter it for a body
    // HEAD does not send.
    state
        .catalog
        .load_table(&ctx, &prefix, &ident(&ns, &table)?, SnapshotsMode::All)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct CommitTable {
    identifier: Option<IdentBody>,
    #[serde(default)]
    requirements: Vec<TableRequirement>,
    #[serde(default)]
    updates: Vec<TableUpdate>,
}

async fn commit(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<CommitTable>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &table)?;
    check_body_ident(body.identifier, &ident)?;
    let change = TableChange {
        ident,
        requirements: body.requirements,
        updates: body.updates,
    };
    let table = state.catalog.commit_table(&ctx, &prefix, change).await?;
    Ok(render(&Outcome::Table(table)))
}

async fn drop_table(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    params: Params,
) -> ApiResult<StatusCode> {
    let purge = params.flag("purgeRequested")?;
    state
        .catalog
        .drop_table(&ctx, &prefix, &ident(&ns, &table)?, purge)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Vended credentials for a table (an empty list on storage that vends none).
async fn credentials(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let credentials = state
        .catalog
        .load_credentials(&ctx, &prefix, &ident(&ns, &table)?)
        .await?;
    Ok(Json(json!({ "storage-credentials": credentials })))
}

/// Signs a request to the table's object store (`s3.remote-signing-enabled`).
async fn sign(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<SignRequest>,
) -> ApiResult<Response> {
    let signed = state
        .catalog
        .sign_request(&ctx, &prefix, &ident(&ns, &table)?, body)
        .await?;
    // A signature is for one request: no cache may keep it.
    Ok(([(header::CACHE_CONTROL, "no-cache")], Json(signed)).into_response())
}

async fn report_metrics(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .report_metrics(&ctx, &prefix, &ident(&ns, &table)?, body)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RegisterTable {
    name: String,
    metadata_location: String,
    #[serde(default)]
    overwrite: bool,
}

async fn register(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<RegisterTable>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &body.name)?;
    state
        .catalog
        .check_delegation(&ctx, &prefix, &ident)
        .await?;
    let table = state
        .catalog
        .register_table(
            &ctx,
            &prefix,
            &ident,
            &body.metadata_location,
            body.overwrite,
        )
        .await?;
    // Registered tables get what loaded ones get (the spec declares the delegation
    // header here too).
    let config = state
        .catalog
        .table_config(&ctx, &prefix, &ident, &table.metadata)
        .await?;
    Ok(table_response(&table, SnapshotsMode::All, &config))
}

async fn rename(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    JsonBody(body): JsonBody<Rename>,
) -> ApiResult<StatusCode> {
    let (from, to) = (body.source.into_ident()?, body.destination.into_ident()?);
    state
        .catalog
        .rename_table(&ctx, &prefix, &from, &to)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct CommitTransaction {
    #[serde(rename = "table-changes")]
    table_changes: Vec<CommitTable>,
}

async fn commit_transaction(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    JsonBody(body): JsonBody<CommitTransaction>,
) -> ApiResult<StatusCode> {
    let mut changes = Vec::with_capacity(body.table_changes.len());
    for change in body.table_changes {
        let ident = change
            .identifier
            .ok_or_else(|| {
                ApiError::bad_request("Every table change in a transaction needs an identifier")
            })?
            .into_ident()?;
        changes.push(TableChange {
            ident,
            requirements: change.requirements,
            updates: change.updates,
        });
    }
    if changes.is_empty() {
        return Err(ApiError::bad_request(
            "A transaction needs at least one table change",
        ));
    }
    state
        .catalog
        .commit_transaction(&ctx, &prefix, changes)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
