//! Table endpoints, rename and multi-table transactions.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use iceberg::{TableRequirement, TableUpdate};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{ident, namespace, IdentBody, JsonBody, Params};
use super::AppState;
use crate::catalog::ident::Ident;
use crate::catalog::tables::{CreateTable, LoadedTable, SnapshotsMode, TableChange};
use crate::stable_hash::fnv1a;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/{prefix}/namespaces/{namespace}/tables",
            get(list).post(create),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}",
            get(load).head(exists).post(commit).delete(drop_table),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
            get(credentials),
        )
        .route(
            "/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
            post(report_metrics),
        )
        .route("/{prefix}/namespaces/{namespace}/register", post(register))
        .route("/{prefix}/tables/rename", post(rename))
        .route("/{prefix}/transactions/commit", post(commit_transaction))
}

/// The ETag of a load: metadata files are immutable and uniquely named, so the location
/// identifies the content; the snapshots mode is part of it because the bodies differ.
fn etag(metadata_location: &str, mode: SnapshotsMode) -> String {
    let mode = match mode {
        SnapshotsMode::All => "all",
        SnapshotsMode::Refs => "refs",
    };
    // Each part ends in 0xff (never in UTF-8), so that no two pairs hash the same text.
    let bytes = [
        metadata_location.as_bytes(),
        &[0xff],
        mode.as_bytes(),
        &[0xff],
    ];
    format!("\"{:016x}\"", fnv1a(bytes.concat()))
}

fn matches_if_none_match(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().trim_start_matches("W/"))
        .any(|v| v == tag || v == "*")
}

/// A LoadTableResult, assembled around the stored metadata text without re-serialising it.
fn load_table_response(table: LoadedTable, mode: SnapshotsMode) -> Response {
    let mut body = String::with_capacity(table.metadata.len() + 128);
    body.push('{');
    if let Some(location) = &table.metadata_location {
        body.push_str("\"metadata-location\":");
        body.push_str(&serde_json::to_string(location).expect("a string serialises"));
        body.push(',');
    }
    body.push_str("\"metadata\":");
    body.push_str(&table.metadata);
    body.push_str(",\"config\":{}}");
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(location) = &table.metadata_location {
        if let Ok(value) = HeaderValue::from_str(&etag(location, mode)) {
            response.headers_mut().insert(header::ETAG, value);
        }
    }
    response
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
    Path((prefix, ns)): Path<(String, String)>,
    params: Params,
) -> ApiResult<Json<Value>> {
    let page = state
        .catalog
        .list_tables(&prefix, &namespace(&ns)?, &params.list_request()?)
        .await?;
    Ok(Json(identifiers_page(&page.items, page.next_page_token)))
}

pub fn identifiers_page(items: &[Ident], next_page_token: Option<String>) -> Value {
    let identifiers: Vec<Value> = items
        .iter()
        .map(|i| json!({ "namespace": i.namespace.levels(), "name": i.name }))
        .collect();
    json!({ "identifiers": identifiers, "next-page-token": next_page_token })
}

async fn create(
    State(state): State<AppState>,
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<CreateTable>,
) -> ApiResult<Response> {
    let table = state
        .catalog
        .create_table(&prefix, &namespace(&ns)?, body)
        .await?;
    Ok(load_table_response(table, SnapshotsMode::All))
}

async fn load(
    State(state): State<AppState>,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    params: Params,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let mode = snapshots_mode(&params)?;
    let loaded = state
        .catalog
        .load_table(&prefix, &ident(&ns, &table)?, mode)
        .await?;
    if let Some(location) = &loaded.metadata_location {
        if matches_if_none_match(&headers, &etag(location, mode)) {
            return Ok(StatusCode::NOT_MODIFIED.into_response());
        }
    }
    Ok(load_table_response(loaded, mode))
}

async fn exists(
    State(state): State<AppState>,
    Path((prefix, ns, table)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .load_table(&prefix, &ident(&ns, &table)?, SnapshotsMode::Refs)
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
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<CommitTable>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &table)?;
    if let Some(named) = body.identifier {
        if named.into_ident()? != ident {
            return Err(ApiError::bad_request(
                "The identifier in the body does not match the path",
            ));
        }
    }
    let change = TableChange {
        ident,
        requirements: body.requirements,
        updates: body.updates,
    };
    let table = state.catalog.commit_table(&prefix, change).await?;
    Ok(load_table_response(table, SnapshotsMode::All))
}

async fn drop_table(
    State(state): State<AppState>,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    params: Params,
) -> ApiResult<StatusCode> {
    let purge = params.flag("purgeRequested")?;
    state
        .catalog
        .drop_table(&prefix, &ident(&ns, &table)?, purge)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Tables on local storage need no credentials: the list is truthfully empty.
async fn credentials(
    State(state): State<AppState>,
    Path((prefix, ns, table)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    state
        .catalog
        .load_table(&prefix, &ident(&ns, &table)?, SnapshotsMode::Refs)
        .await?;
    Ok(Json(json!({ "storage-credentials": [] })))
}

async fn report_metrics(
    State(state): State<AppState>,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<StatusCode> {
    state
        .catalog
        .report_metrics(&prefix, &ident(&ns, &table)?, body)
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
    Path((prefix, ns)): Path<(String, String)>,
    JsonBody(body): JsonBody<RegisterTable>,
) -> ApiResult<Response> {
    let ident = ident(&ns, &body.name)?;
    let table = state
        .catalog
        .register_table(&prefix, &ident, &body.metadata_location, body.overwrite)
        .await?;
    Ok(load_table_response(table, SnapshotsMode::All))
}

#[derive(Deserialize)]
pub struct Rename {
    pub source: IdentBody,
    pub destination: IdentBody,
}

async fn rename(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
    JsonBody(body): JsonBody<Rename>,
) -> ApiResult<StatusCode> {
    let (from, to) = (body.source.into_ident()?, body.destination.into_ident()?);
    state.catalog.rename_table(&prefix, &from, &to).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct CommitTransaction {
    #[serde(rename = "table-changes")]
    table_changes: Vec<CommitTable>,
}

async fn commit_transaction(
    State(state): State<AppState>,
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
    state.catalog.commit_transaction(&prefix, changes).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_differ_by_mode_and_location() {
        let a = etag("file:///t/metadata/1.json", SnapshotsMode::All);
        assert_ne!(a, etag("file:///t/metadata/1.json", SnapshotsMode::Refs));
        assert_ne!(a, etag("file:///t/metadata/2.json", SnapshotsMode::All));
        assert_eq!(a, etag("file:///t/metadata/1.json", SnapshotsMode::All));
    }

    #[test]
    fn if_none_match_accepts_lists_and_weak_tags() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"x\", W/\"abc\""),
        );
        assert!(matches_if_none_match(&headers, "\"abc\""));
        assert!(!matches_if_none_match(&headers, "\"abd\""));
    }
}
