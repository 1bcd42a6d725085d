//! Tables: create (direct or staged), load, commit, multi-table transactions, drop,
//! rename, register and metrics reports.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{
    FormatVersion, Schema, SortOrder, TableMetadata, TableMetadataBuilder, TableProperties,
    UnboundPartitionSpec,
};
use iceberg::{TableRequirement, TableUpdate};
use serde::Deserialize;

use super::commit::{
    apply_table_updates, check_table_requirements, metadata_json, next_metadata_file,
    table_metadata_from_updates,
};
use super::error::{CatalogError, CatalogResult, Missing};
use super::ident::{Ident, Namespace};
use super::locations::{check_allowed, default_location, metadata_dir};
use super::namespaces::namespace_missing;
use super::objects::{object_error, object_exists, object_missing, rename_error};
use super::pagination::{listed, ListRequest, Listed};
use super::Catalog;
use crate::storage;
use crate::store::{ObjectKind, ObjectWrite, StoreError, StoredObject};

/// The body of a create-table request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CreateTable {
    pub name: String,
    pub location: Option<String>,
    pub schema: Schema,
    pub partition_spec: Option<UnboundPartitionSpec>,
    pub write_order: Option<SortOrder>,
    #[serde(default)]
    pub stage_create: bool,
    #[serde(default)]
    pub properties: HashMap<String, String>,
}

/// The changes to one table in a commit or transaction.
#[derive(Debug, Clone)]
pub struct TableChange {
    pub ident: Ident,
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

/// Which snapshots a load returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotsMode {
    All,
    /// Only snapshots some branch or tag points at.
    Refs,
}

/// A table's pointer and metadata document, ready to be sent as a LoadTableResult.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    /// `None` for a staged table, which has no metadata file yet.
    pub metadata_location: Option<String>,
    /// The metadata document as JSON text.
    pub metadata: String,
}

fn parse_metadata(json: &str) -> CatalogResult<TableMetadata> {
    serde_json::from_str(json).map_err(|e| {
        CatalogError::internal(anyhow::anyhow!("stored table metadata is invalid: {e}"))
    })
}

fn to_json<T: serde::Serialize>(value: &T) -> CatalogResult<String> {
    serde_json::to_string(value).map_err(CatalogError::internal)
}

/// Splits the reserved properties off a create request: `format-version` chooses the
/// format, the others describe state and are not persisted (as in Java).
fn format_version_and_properties(
    mut properties: HashMap<String, String>,
) -> CatalogResult<(FormatVersion, HashMap<String, String>)> {
    let version = match properties
        .remove(TableProperties::PROPERTY_FORMAT_VERSION)
        .as_deref()
    {
        None | Some("2") => FormatVersion::V2,
        Some("1") => FormatVersion::V1,
        Some("3") => FormatVersion::V3,
        Some(other) => {
            return Err(CatalogError::bad_request(format!(
                "Unsupported format-version {other}; use 1, 2 or 3"
            )))
        }
    };
    properties.retain(|k, _| !TableProperties::RESERVED_PROPERTIES.contains(&k.as_str()));
    Ok((version, properties))
}

/// Drops the snapshots no branch or tag points at, for `snapshots=refs` loads.
fn only_referenced_snapshots(metadata: &str) -> CatalogResult<String> {
    let mut doc: serde_json::Value =
        serde_json::from_str(metadata).map_err(CatalogError::internal)?;
    let referenced: HashSet<i64> = doc
        .get("refs")
        .and_then(|r| r.as_object())
        .map(|refs| {
            refs.values()
                .filter_map(|r| r.get("snapshot-id")?.as_i64())
                .collect()
        })
        .unwrap_or_default();
    if let Some(serde_json::Value::Array(snapshots)) = doc.get_mut("snapshots") {
        snapshots.retain(|s| {
            s.get("snapshot-id")
                .and_then(|id| id.as_i64())
                .is_some_and(|id| referenced.contains(&id))
        });
    }
    to_json(&doc)
}

/// Checks a metrics report has the shape of the spec's ReportMetricsRequest.
fn validate_metrics_report(report: &serde_json::Value) -> CatalogResult<()> {
    let bad = |what: &str| CatalogError::bad_request(format!("Invalid metrics report: {what}"));
    let object = report
        .as_object()
        .ok_or_else(|| bad("expected a JSON object"))?;
    let required: &[&str] = match object.get("report-type").and_then(|t| t.as_str()) {
        Some("scan-report") => &[
            "table-name",
            "snapshot-id",
            "filter",
            "schema-id",
            "projected-field-ids",
            "projected-field-names",
            "metrics",
        ],
        Some("commit-report") => &[
            "table-name",
            "snapshot-id",
            "sequence-number",
            "operation",
            "metrics",
        ],
        Some(other) => return Err(bad(&format!("unknown report-type {other}"))),
        None => return Err(bad("report-type is required")),
    };
    for field in required {
        if !object.contains_key(*field) {
            return Err(bad(&format!("{field} is required")));
        }
    }
    if !object["snapshot-id"].is_i64() {
        return Err(bad("snapshot-id must be an integer"));
    }
    if !object["metrics"].is_object() {
        return Err(bad("metrics must be an object"));
    }
    Ok(())
}

impl Catalog {
    pub async fn list_tables(
        &self,
        catalog: &str,
        namespace: &Namespace,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Ident>> {
        let page = self
            .store
            .list_objects(
                catalog,
                namespace,
                ObjectKind::Table,
                &list.to_page_request()?,
            )
            .await
            .map_err(|e| object_error(ObjectKind::Table, e))?;
        Ok(listed(page, |name| Ident {
            namespace: namespace.clone(),
            name,
        }))
    }

    pub async fn create_table(
        &self,
        catalog: &str,
        namespace: &Namespace,
        request: CreateTable,
    ) -> CatalogResult<LoadedTable> {
        let ident = Ident::new(namespace.clone(), request.name)?;
        let catalog_record = self.get_catalog(catalog).await?;
        let namespace_properties = self.load_namespace(catalog, namespace).await?;
        if let Some(existing) = self.store.load_object(catalog, &ident).await? {
            return Err(object_exists(ObjectKind::Table, existing.kind, &ident));
        }
        let location = match request.location {
            Some(location) => location.trim_end_matches('/').to_string(),
            None => default_location(&catalog_record, &namespace_properties, &ident),
        };
        let canonical = check_allowed(&catalog_record, &location)?;
        let (format_version, properties) = format_version_and_properties(request.properties)?;
        let metadata = TableMetadataBuilder::new(
            request.schema,
            request
                .partition_spec
                .unwrap_or(UnboundPartitionSpec::builder().build()),
            request.write_order.unwrap_or(SortOrder::unsorted_order()),
            location.clone(),
            format_version,
            properties,
        )?
        .build()?
        .metadata;
        let json = metadata_json(&metadata)?;
        if request.stage_create {
            return Ok(LoadedTable {
                metadata_location: None,
                metadata: json,
            });
        }
        let write = ObjectWrite {
            ident: ident.clone(),
            kind: ObjectKind::Table,
            expected_metadata_location: None,
            metadata_location: next_metadata_file(
                &metadata_dir(&catalog_record, &location, metadata.properties())?,
                None,
                0,
            ),
            metadata: json,
            location: canonical,
            check_location: true,
        };
        let writes = self
            .commit_with_retry(
                catalog,
                ObjectKind::Table,
                std::slice::from_ref(&ident),
                |_current| {
                    let write = write.clone();
                    async move { Ok(vec![write]) }
                },
            )
            .await?;
        Ok(loaded(writes.into_iter().next()))
    }

    pub async fn load_table(
        &self,
        catalog: &str,
        ident: &Ident,
        snapshots: SnapshotsMode,
    ) -> CatalogResult<LoadedTable> {
        let object = self
            .load_kind(catalog, ident, ObjectKind::Table)
            .await?
            .ok_or_else(|| object_missing(ObjectKind::Table, ident))?;
        // The metadata comes from the store, but a table whose file was deleted behind the
        // catalog's back is broken for every engine: say so, as a file-based catalog would.
        if !storage::file_exists(&object.metadata_location) {
            return Err(CatalogError::not_found(
                Missing::File,
                format!(
                    "Failed to open input stream for file: {}",
                    object.metadata_location
                ),
            ));
        }
        let metadata = match snapshots {
            SnapshotsMode::All => object.metadata,
            SnapshotsMode::Refs => only_referenced_snapshots(&object.metadata)?,
        };
        Ok(LoadedTable {
            metadata_location: Some(object.metadata_location),
            metadata,
        })
    }

    /// Commits changes to one table; creates it when the requirements assert it must not
    /// exist yet (the second step of a staged create).
    pub async fn commit_table(
        &self,
        catalog: &str,
        change: TableChange,
    ) -> CatalogResult<LoadedTable> {
        let ident = change.ident.clone();
        let mut committed = self.commit_tables(catalog, vec![change]).await?;
        match committed.pop() {
            Some(table) => Ok(table),
            // Nothing changed: answer with the current state.
            None => self.load_table(catalog, &ident, SnapshotsMode::All).await,
        }
    }

    /// Commits changes to several tables atomically: all or none.
    pub async fn commit_transaction(
        &self,
        catalog: &str,
        changes: Vec<TableChange>,
    ) -> CatalogResult<()> {
        let mut seen = HashSet::new();
        for change in &changes {
            if !seen.insert(&change.ident) {
                return Err(CatalogError::bad_request(format!(
                    "Table {} appears more than once in the transaction",
                    change.ident
                )));
            }
        }
        self.commit_tables(catalog, changes).await.map(|_| ())
    }

    /// Returns the tables that changed (unchanged ones are skipped, as no file is needed).
    async fn commit_tables(
        &self,
        catalog: &str,
        changes: Vec<TableChange>,
    ) -> CatalogResult<Vec<LoadedTable>> {
        let catalog_record = self.get_catalog(catalog).await?;
        let idents: Vec<Ident> = changes.iter().map(|c| c.ident.clone()).collect();
        let writes = self
            .commit_with_retry(catalog, ObjectKind::Table, &idents, |current| async {
                let mut writes = Vec::with_capacity(changes.len());
                for (change, current) in changes.iter().zip(current) {
                    if let Some(write) = self
                        .prepare_table_change(catalog, &catalog_record, change, current)
                        .await?
                    {
                        writes.push(write);
                    }
                }
                Ok(writes)
            })
            .await?;
        Ok(writes.into_iter().map(|w| loaded(Some(w))).collect())
    }

    async fn prepare_table_change(
        &self,
        catalog: &str,
        catalog_record: &crate::store::CatalogRecord,
        change: &TableChange,
        current: Option<StoredObject>,
    ) -> CatalogResult<Option<ObjectWrite>> {
        let ident = &change.ident;
        let (metadata, expected, previous_location) = match current {
            Some(object) if object.kind == ObjectKind::View => {
                return Err(
                    if change.requirements.contains(&TableRequirement::NotExist) {
                        object_exists(ObjectKind::Table, ObjectKind::View, ident)
                    } else {
                        object_missing(ObjectKind::Table, ident)
                    },
                );
            }
            None => {
                if !change.requirements.contains(&TableRequirement::NotExist) {
                    return Err(object_missing(ObjectKind::Table, ident));
                }
                check_table_requirements(&change.requirements, None)?;
                let namespace_properties = self
                    .store
                    .get_namespace(catalog, &ident.namespace)
                    .await?
                    .ok_or_else(|| namespace_missing(&ident.namespace))?;
                let metadata = table_metadata_from_updates(change.updates.clone(), || {
                    Ok(default_location(
                        catalog_record,
                        &namespace_properties,
                        ident,
                    ))
                })?;
                (metadata, None, None)
            }
            Some(object) => {
                let base = parse_metadata(&object.metadata)?;
                let previous_location = base.location().to_string();
                check_table_requirements(&change.requirements, Some(&base)).map_err(
                    |e| match e {
                        CatalogError::NotFound { .. } => object_missing(ObjectKind::Table, ident),
                        other => other,
                    },
                )?;
                if change.updates.is_empty() {
                    return Ok(None);
                }
                let metadata =
                    apply_table_updates(base, &object.metadata_location, change.updates.clone())?;
                (
                    metadata,
                    Some(object.metadata_location),
                    Some(previous_location),
                )
            }
        };
        let canonical = check_allowed(catalog_record, metadata.location())?;
        let log_len = metadata.metadata_log().len();
        Ok(Some(ObjectWrite {
            ident: ident.clone(),
            kind: ObjectKind::Table,
            metadata_location: next_metadata_file(
                &metadata_dir(catalog_record, metadata.location(), metadata.properties())?,
                expected.as_deref(),
                log_len,
            ),
            expected_metadata_location: expected,
            metadata: metadata_json(&metadata)?,
            location: canonical,
            check_location: previous_location.as_deref() != Some(metadata.location()),
        }))
    }

    /// Drops a table; with `purge`, also deletes the files under its location.
    pub async fn drop_table(&self, catalog: &str, ident: &Ident, purge: bool) -> CatalogResult<()> {
        let dropped = self
            .store
            .drop_object(catalog, ident, ObjectKind::Table)
            .await
            .map_err(|e| object_error(ObjectKind::Table, e))?;
        if purge {
            let location = parse_metadata(&dropped.metadata)?.location().to_string();
            // Only ever delete inside the catalog's own locations.
            let catalog_record = self.get_catalog(catalog).await?;
            if check_allowed(&catalog_record, &location).is_ok() {
                let result =
                    tokio::task::spawn_blocking(move || storage::remove_tree(&location)).await;
                if let Ok(Err(e)) | Err(e) = result.map_err(anyhow::Error::from) {
                    tracing::warn!(table = %ident, error = %e, "purge could not delete all files");
                }
            }
        }
        Ok(())
    }

    pub async fn rename_table(&self, catalog: &str, from: &Ident, to: &Ident) -> CatalogResult<()> {
        let _guards = self.commit_locks.lock(catalog, [from, to]).await;
        self.store
            .rename_object(catalog, ObjectKind::Table, from, to)
            .await
            .map_err(|e| rename_error(ObjectKind::Table, from, e))
    }

    /// Registers an existing metadata file as a table (or, with `overwrite`, points an
    /// existing table at it).
    pub async fn register_table(
        &self,
        catalog: &str,
        ident: &Ident,
        metadata_location: &str,
        overwrite: bool,
    ) -> CatalogResult<LoadedTable> {
        let catalog_record = self.get_catalog(catalog).await?;
        self.load_namespace(catalog, &ident.namespace).await?;
        // Only read files inside the catalog's locations: a register request must not be a
        // way to read (or probe for) arbitrary files of the server.
        check_allowed(&catalog_record, metadata_location)?;
        let max = self.settings.max_metadata_file_bytes;
        let file_location = metadata_location.to_string();
        let bytes = tokio::task::spawn_blocking(move || storage::read_file(&file_location, max))
            .await
            .map_err(CatalogError::internal)??;
        let metadata: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| {
            CatalogError::bad_request(format!(
                "{metadata_location} is not valid table metadata: {e}"
            ))
        })?;
        let canonical = check_allowed(&catalog_record, metadata.location())?;
        let json = metadata_json(&metadata)?;
        let _guards = self.commit_locks.lock(catalog, [ident]).await;
        let existing = self.store.load_object(catalog, ident).await?;
        let expected = match existing {
            Some(object) if overwrite && object.kind == ObjectKind::Table => {
                Some(object.metadata_location)
            }
            Some(object) => return Err(object_exists(ObjectKind::Table, object.kind, ident)),
            None => None,
        };
        let write = ObjectWrite {
            ident: ident.clone(),
            kind: ObjectKind::Table,
            expected_metadata_location: expected,
            metadata_location: metadata_location.to_string(),
            metadata: json.clone(),
            location: canonical,
            check_location: true,
        };
        match self.store.commit_objects(catalog, &[write]).await {
            Ok(()) => Ok(LoadedTable {
                metadata_location: Some(metadata_location.to_string()),
                metadata: json,
            }),
            Err(StoreError::Conflict) => Err(CatalogError::CommitFailed(format!(
                "Table {ident} changed while it was being registered"
            ))),
            Err(e) => Err(object_error(ObjectKind::Table, e)),
        }
    }

    pub async fn report_metrics(
        &self,
        catalog: &str,
        ident: &Ident,
        report: serde_json::Value,
    ) -> CatalogResult<()> {
        validate_metrics_report(&report)?;
        if self
            .load_kind(catalog, ident, ObjectKind::Table)
            .await?
            .is_none()
        {
            return Err(object_missing(ObjectKind::Table, ident));
        }
        self.store
            .record_metrics(catalog, ident, &to_json(&report)?)
            .await?;
        Ok(())
    }
}

fn loaded(write: Option<ObjectWrite>) -> LoadedTable {
    let write = write.expect("a committed create has one write");
    LoadedTable {
        metadata_location: Some(write.metadata_location),
        metadata: write.metadata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_mode_keeps_only_referenced_snapshots() {
        let doc = r#"{"refs":{"main":{"snapshot-id":2,"type":"branch"}},"snapshots":[{"snapshot-id":1},{"snapshot-id":2}]}"#;
        let filtered: serde_json::Value =
            serde_json::from_str(&only_referenced_snapshots(doc).unwrap()).unwrap();
        assert_eq!(
            filtered["snapshots"],
            serde_json::json!([{"snapshot-id": 2}])
        );
    }

    #[test]
    fn reserved_properties_are_not_persisted() {
        let props = HashMap::from([
            ("format-version".to_string(), "1".to_string()),
            ("uuid".to_string(), "x".to_string()),
            ("owner".to_string(), "me".to_string()),
        ]);
        let (version, kept) = format_version_and_properties(props).unwrap();
        assert_eq!(version, FormatVersion::V1);
        assert_eq!(
            kept,
            HashMap::from([("owner".to_string(), "me".to_string())])
        );
        let bad = HashMap::from([("format-version".to_string(), "9".to_string())]);
        assert!(format_version_and_properties(bad).is_err());
    }

    #[test]
    fn metrics_reports_are_validated() {
        let ok = serde_json::json!({"report-type": "commit-report", "table-name": "t", "snapshot-id": 1,
            "sequence-number": 1, "operation": "append", "metrics": {}});
        assert!(validate_metrics_report(&ok).is_ok());
        let missing =
            serde_json::json!({"report-type": "scan-report", "table-name": "t", "snapshot-id": 1});
        assert!(validate_metrics_report(&missing).is_err());
        assert!(validate_metrics_report(&serde_json::json!([])).is_err());
    }
}
