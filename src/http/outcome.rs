//! Outcomes to responses: the one rendering used both for a request's first answer and
//! for the replay of an idempotency key, so the two cannot differ.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::management::catalog_json;
use crate::catalog::delegation::TableConfig;
use crate::catalog::outcome::{LoadedTable, LoadedView};
use crate::catalog::Outcome;
use crate::json_text::{self, push_object, push_str};
use crate::stable_hash::fold_words;

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
        } => namespace_response(namespace, &json_text::map_to_string(properties)),
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
/// identifies the content; the snapshots mode is part of it because the bodies differ,
/// and so is the response's `config` when it has any (a remote signer's endpoint, the
/// storage's endpoint and region: a catalog's storage changed, or another delegation
/// asked for, must not be answered 304 with the client keeping the old ones).
pub fn etag(
    metadata_location: &str,
    mode: SnapshotsMode,
    config: &std::collections::BTreeMap<String, String>,
) -> String {
    let mode = match mode {
        SnapshotsMode::All => "all",
        SnapshotsMode::Refs => "refs",
    };
    // Word-wise: byte-wise FNV-1a cost ~750 instructions per load. (The switch changed
    // every ETag once: a client's next conditional load after it gets a full body.)
    let hash = if config.is_empty() {
        fold_words(&[metadata_location.as_bytes(), mode.as_bytes()])
    } else {
        let mut parts = vec![metadata_location.as_bytes(), mode.as_bytes()];
        parts.extend(
            config
                .iter()
                .flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]),
        );
        fold_words(&parts)
    };
    // `"` + 16 hex digits + `"`, written directly (`format!` costs more than the hash).
    let mut tag = String::with_capacity(18);
    tag.push('"');
    for shift in (0..16).rev() {
        tag.push(char::from(
            b"0123456789abcdef"[(hash >> (4 * shift)) as usize & 0xf],
        ));
    }
    tag.push('"');
    tag
}

/// Appends `value` as JSON text.
fn push_json(body: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    // Writing to memory cannot fail, and what is written here (strings, string maps,
    // credentials) always serialises: `json!` would unwrap the same way.
    serde_json::to_writer(&mut *body, value).expect("serialising to memory");
}

/// `"config":{…}` and, when there are any, `"storage-credentials":[…]`.
fn push_table_config(body: &mut Vec<u8>, config: &TableConfig) {
    body.extend_from_slice(b",\"config\":");
    let entries = config.config.iter();
    push_object(
        body,
        entries.map(|(k, v)| (k.as_str(), v.as_str())),
        push_str,
    );
    if !config.credentials.is_empty() {
        body.extend_from_slice(b",\"storage-credentials\":");
        push_json(body, &config.credentials);
    }
}

/// A LoadTableResult, assembled around the stored metadata text without re-serialising it,
/// with its ETag (`table_etag`).
pub fn table_response(table: &LoadedTable, mode: SnapshotsMode, config: &TableConfig) -> Response {
    tagged_table_response(table, config, table_etag(table, mode, config))
}

/// The ETag of a table's response in `mode`. None when the response carries credentials:
/// a 304 would have the client keep expiring keys.
pub fn table_etag(
    table: &LoadedTable,
    mode: SnapshotsMode,
    config: &TableConfig,
) -> Option<String> {
    let location = table.metadata_location.as_ref()?;
    config
        .credentials
        .is_empty()
        .then(|| etag(location, mode, &config.config))
}

/// `table_response` with the ETag already computed (loadTable needs it first, for
/// `If-None-Match`).
pub fn tagged_table_response(
    table: &LoadedTable,
    config: &TableConfig,
    etag: Option<String>,
) -> Response {
    // Sized for the whole body, so it is not grown (growing copies the document); only
    // vended credentials, when there are any, can outgrow it.
    let location = table.metadata_location.as_deref().unwrap_or_default();
    let config_len: usize = config
        .config
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum();
    let mut body = Vec::with_capacity(table.metadata.len() + location.len() + config_len + 64);
    body.push(b'{');
    if let Some(location) = &table.metadata_location {
        body.extend_from_slice(b"\"metadata-location\":");
        push_str(&mut body, location);
        body.push(b',');
    }
    body.extend_from_slice(b"\"metadata\":");
    body.extend_from_slice(table.metadata.as_bytes());
    push_table_config(&mut body, config);
    body.push(b'}');
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(value) = etag.and_then(|tag| HeaderValue::try_from(tag).ok()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// A namespace's load (or create) response around its properties' JSON text, as the
/// store keeps it (`StoredProperties`): Polaris's benchmark grows namespaces to hundreds
/// of properties, and serialising them on every load showed in its read mix.
pub fn namespace_response(levels: &[String], properties_json: &str) -> Response {
    let body = namespace_body(levels, properties_json);
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn namespace_body(levels: &[String], properties_json: &str) -> Vec<u8> {
    let levels_len: usize = levels.iter().map(|level| level.len() + 3).sum();
    let mut body = Vec::with_capacity(properties_json.len() + levels_len + 32);
    body.extend_from_slice(b"{\"namespace\":[");
    for (i, level) in levels.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        push_str(&mut body, level);
    }
    body.extend_from_slice(b"],\"properties\":");
    body.extend_from_slice(properties_json.as_bytes());
    body.push(b'}');
    body
}

/// A LoadViewResult, assembled the same way.
pub fn view_response(view: &LoadedView) -> Response {
    let mut body = Vec::with_capacity(view.metadata.len() + view.metadata_location.len() + 64);
    body.extend_from_slice(b"{\"metadata-location\":");
    push_str(&mut body, &view.metadata_location);
    body.extend_from_slice(b",\"metadata\":");
    body.extend_from_slice(view.metadata.as_bytes());
    body.extend_from_slice(b",\"config\":{}}");
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Properties;

    #[test]
    fn namespace_bodies_are_what_serde_json_writes() {
        let levels = ["a\"b".to_string(), "é".to_string()];
        let mut properties = Properties::new();
        for (k, v) in [("owner", "x"), ("q\\", "\n"), ("", "")] {
            properties.insert(k.into(), v.into());
        }
        for levels in [&levels[..1], &levels[..]] {
            let ours = namespace_body(levels, &json_text::map_to_string(&properties));
            let theirs = json!({ "namespace": levels, "properties": properties });
            assert_eq!(ours, serde_json::to_vec(&theirs).unwrap());
        }
    }

    #[test]
    fn etags_differ_by_mode_location_and_config() {
        use std::collections::BTreeMap;
        let none = BTreeMap::new();
        let a = etag("file:///t/metadata/1.json", SnapshotsMode::All, &none);
        assert_ne!(
            a,
            etag("file:///t/metadata/1.json", SnapshotsMode::Refs, &none)
        );
        assert_ne!(
            a,
            etag("file:///t/metadata/2.json", SnapshotsMode::All, &none)
        );
        assert_eq!(
            a,
            etag("file:///t/metadata/1.json", SnapshotsMode::All, &none)
        );
        // The text clients keep: the quoted, zero-padded 16 hex digits of the hash.
        let hash = fold_words(&[b"file:///t/metadata/1.json", b"all"]);
        assert_eq!(a, format!("\"{hash:016x}\""));
        // A config (remote signing's endpoint, the storage's endpoint or region) is part
        // of the body, so of the tag: another one is another tag.
        let config = |endpoint: &str| {
            BTreeMap::from([
                ("s3.endpoint".to_string(), endpoint.to_string()),
                ("s3.remote-signing-enabled".to_string(), "true".to_string()),
            ])
        };
        let signed = etag(
            "file:///t/metadata/1.json",
            SnapshotsMode::All,
            &config("http://a"),
        );
        assert_ne!(a, signed);
        assert_ne!(
            signed,
            etag(
                "file:///t/metadata/1.json",
                SnapshotsMode::All,
                &config("http://b")
            )
        );
        assert_eq!(
            signed,
            etag(
                "file:///t/metadata/1.json",
                SnapshotsMode::All,
                &config("http://a")
            )
        );
    }

    #[tokio::test]
    async fn a_table_body_is_json_around_the_stored_text() {
        let table = LoadedTable {
            metadata_location: Some("file:///t/\"odd\"/metadata/1.json".into()),
            metadata: r#"{"format-version":2}"#.into(),
        };
        let config = TableConfig {
            config: [
                ("k".to_string(), "v\n".to_string()),
                ("plain".to_string(), "s3://b/p".to_string()),
            ]
            .into(),
            credentials: Vec::new(),
        };
        let response = table_response(&table, SnapshotsMode::All, &config);
        assert!(response.headers().contains_key(header::ETAG));
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            json!({
                "metadata-location": "file:///t/\"odd\"/metadata/1.json",
                "metadata": {"format-version": 2},
                "config": {"k": "v\n", "plain": "s3://b/p"},
            })
        );
    }
}
