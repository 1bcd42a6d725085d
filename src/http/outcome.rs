//! Outcomes to responses: the one rendering used both for a request's first answer and
//! for the replay of an idempotency key, so the two cannot differ.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::management::catalog_json;
use crate::catalog::delegation::TableConfig;
use crate::catalog::outcome::{LoadedTable, LoadedView};
use crate::catalog::Outcome;
use crate::stable_hash::fnv1a;

/// Which snapshots a table body holds; part of its ETag, because the bodies differ.
pub use crate::catalog::tables::SnapshotsMode;

pub fn render(outcome: &Outcome) -> Response {
    match outcome {
        // Credentials are never kept with an outcome: a replay answers without them (the
        // client can ask `/credentials`).
        Outcome::Table(table) => table_response(table, SnapshotsMode::All, &TableConfig::default()),
        Outcome::View(view) => view_response(view),
        Outcome::Namespace {
            namespace,
            properties,
        } => {
            axum::Json(json!({ "namespace": namespace, "properties": properties })).into_response()
        }
        Outcome::PropertiesChange(change) => axum::Json(json!({
            "updated": change.updated,
            "removed": change.removed,
            "missing": change.missing,
        }))
        .into_response(),
        Outcome::Catalog { record, created } => {
            let status = if *created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            (status, axum::Json(catalog_json(record))).into_response()
        }
        Outcome::NoContent => StatusCode::NO_CONTENT.into_response(),
        Outcome::Json { status, body } => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
            axum::Json(body.clone()),
        )
            .into_response(),
        Outcome::Rejected { status, body } => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            [(header::CONTENT_TYPE, "application/json")],
            body.clone(),
        )
            .into_response(),
    }
}

/// The ETag of a load: metadata files are immutable and uniquely named, so the location
/// identifies the content; the snapshots mode is part of it because the bodies differ.
pub fn etag(metadata_location: &str, mode: SnapshotsMode) -> String {
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
    let hash = fnv1a(bytes.into_iter().flatten().copied());
    format!("\"{hash:016x}\"")
}

/// `"config":{…}` and, when there are any, `"storage-credentials":[…]`.
fn push_table_config(body: &mut String, config: &TableConfig) {
    body.push_str(",\"config\":");
    body.push_str(&json!(config.config).to_string());
    if !config.credentials.is_empty() {
        body.push_str(",\"storage-credentials\":");
        body.push_str(&json!(config.credentials).to_string());
    }
}

/// A LoadTableResult, assembled around the stored metadata text without re-serialising it.
/// A response carrying credentials has no ETag: a 304 would have the client keep
/// expiring keys.
pub fn table_response(table: &LoadedTable, mode: SnapshotsMode, config: &TableConfig) -> Response {
    let mut body = String::with_capacity(table.metadata.len() + 128);
    body.push('{');
    if let Some(location) = &table.metadata_location {
        body.push_str("\"metadata-location\":");
        push_json_string(&mut body, location);
        body.push(',');
    }
    body.push_str("\"metadata\":");
    body.push_str(&table.metadata);
    push_table_config(&mut body, config);
    body.push('}');
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let (Some(location), true) = (&table.metadata_location, config.credentials.is_empty()) {
        if let Ok(value) = HeaderValue::from_str(&etag(location, mode)) {
            response.headers_mut().insert(header::ETAG, value);
        }
    }
    response
}

/// A LoadViewResult, assembled the same way.
pub fn view_response(view: &LoadedView) -> Response {
    let mut body = String::with_capacity(view.metadata.len() + 128);
    body.push_str("{\"metadata-location\":");
    push_json_string(&mut body, &view.metadata_location);
    body.push_str(",\"metadata\":");
    body.push_str(&view.metadata);
    body.push_str(",\"config\":{}}");
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn push_json_string(body: &mut String, value: &str) {
    body.push_str(&serde_json::Value::from(value).to_string());
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
}
