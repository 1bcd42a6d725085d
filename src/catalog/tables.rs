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
    apply_table_updates, check_table_requirements, metadata_document, metadata_json,
    next_metadata_file, properties_text, spliced_or_whole, table_document_spliced,
    table_metadata_from_updates, table_property_keys, update_privileges,
};
use super::delegation::TableConfig;
use super::error::{object_exists, object_missing, CatalogError, CatalogResult, Missing};
use super::locations::{check_allowed, default_location, metadata_dir};
use super::namespaces::namespace_missing;
use super::objects::{
    require_internal, to_value, write_event, MetadataFiles, Prepared, Registered,
};
pub use super::outcome::LoadedTable;
use super::pagination::{ListRequest, Listed};
use super::parsed::{Kept, Model};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::Operation;
use crate::model::{CatalogRecord, Ident, Namespace, ObjectKind};
use crate::store::reservations::Reservation;
use crate::store::{Mutation, ObjectWrite, StoreError, StoredObject};

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

/// Checks a metrics report has the shape of the spec's ReportMetricsRequest: each field
/// it names of the type the spec gives (Java's `ReportMetricsRequestParser` refuses any
/// other), and each metric a counter (`unit`, `value`) or a timer (`time-unit`, `count`,
/// `total-duration`) with integer counts, not negative. The filter is checked only as
/// JSON's kind (an expression object or a bare boolean, Java's `alwaysTrue()`): a report
/// names the columns of the snapshot it scanned, which later schema changes may drop.
fn validate_metrics_report(report: &serde_json::Value) -> CatalogResult<()> {
    use serde_json::Value;
    let bad = |what: &str| CatalogError::bad_request(format!("Invalid metrics report: {what}"));
    let object = report
        .as_object()
        .ok_or_else(|| bad("expected a JSON object"))?;
    fn string(v: &Value) -> bool {
        v.is_string()
    }
    fn long(v: &Value) -> bool {
        v.is_i64()
    }
    fn int(v: &Value) -> bool {
        v.as_i64().is_some_and(|n| i32::try_from(n).is_ok())
    }
    fn ints(v: &Value) -> bool {
        v.as_array().is_some_and(|a| a.iter().all(int))
    }
    fn strings(v: &Value) -> bool {
        v.as_array().is_some_and(|a| a.iter().all(string))
    }
    fn expression(v: &Value) -> bool {
        v.is_object() || v.is_boolean()
    }
    fn metrics(v: &Value) -> bool {
        v.is_object()
    }
    type Check = (&'static str, fn(&Value) -> bool, &'static str);
    let fields: &[Check] = match object.get("report-type").and_then(Value::as_str) {
        Some("scan-report") => &[
            ("table-name", string, "a string"),
            ("snapshot-id", long, "an integer"),
            ("filter", expression, "an expression"),
            ("schema-id", int, "an integer of 32 bits"),
            (
                "projected-field-ids",
                ints,
                "an array of integers of 32 bits",
            ),
            ("projected-field-names", strings, "an array of strings"),
            ("metrics", metrics, "an object"),
        ],
        Some("commit-report") => &[
            ("table-name", string, "a string"),
            ("snapshot-id", long, "an integer"),
            ("sequence-number", long, "an integer"),
            ("operation", string, "a string"),
            ("metrics", metrics, "an object"),
        ],
        Some(other) => return Err(bad(&format!("unknown report-type {other}"))),
        None => return Err(bad("report-type is required")),
    };
    for (field, fits, kind) in fields {
        match object.get(*field) {
            None => return Err(bad(&format!("{field} is required"))),
            Some(value) if !fits(value) => {
                return Err(bad(&format!("{field} must be {kind}")));
            }
            Some(_) => {}
        }
    }
    if let Some(metadata) = object.get("metadata") {
        let map = metadata.as_object().filter(|m| m.values().all(string));
        if map.is_none() {
            return Err(bad("metadata must be an object of strings"));
        }
    }
    for (name, metric) in object["metrics"].as_object().into_iter().flatten() {
        check_metric(metric).map_err(|what| bad(&format!("metric {name}: {what}")))?;
    }
    Ok(())
}

/// One of a report's metrics: a counter or a timer, its numbers integers not below 0.
fn check_metric(metric: &serde_json::Value) -> Result<(), String> {
    let object = metric.as_object().ok_or("expected an object")?;
    let (unit, numbers): (&str, &[&str]) = if object.contains_key("time-unit") {
        ("time-unit", &["count", "total-duration"])
    } else {
        ("unit", &["value"])
    };
    if !object.get(unit).is_some_and(|u| u.is_string()) {
        return Err(format!(
            "a counter needs unit and value, a timer time-unit, count and total-duration; {unit} must be a string"
        ));
    }
    for number in numbers {
        let value = object.get(*number).and_then(|v| v.as_i64());
        if value.is_none_or(|n| n < 0) {
            return Err(format!("{number} must be an integer of 0 or more"));
        }
    }
    Ok(())
}

impl Catalog {
    pub async fn list_tables(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Ident>> {
        self.list_objects(ctx, catalog, namespace, ObjectKind::Table, list)
            .await
    }

    pub async fn create_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        request: CreateTable,
    ) -> CatalogResult<(LoadedTable, TableConfig)> {
        let ident = Ident::new(namespace.clone(), request.name)?;
        // First: nothing (the namespace's existence, the allowed locations, a call to
        // STS) for a caller who may not create here.
        let parent = Securable::namespace(namespace);
        ctx.require(catalog, Privilege::TABLE_CREATE, &parent)?;
        let record = self.get_catalog(catalog).await?;
        let namespace_properties = self.namespace_properties(catalog, namespace).await?;
        let location = match request.location {
            Some(location) => location.trim_end_matches('/').to_string(),
            None => default_location(&record, &namespace_properties, &ident),
        };
        let canonical = check_allowed(&record, &location)?;
        let (format_version, properties) = format_version_and_properties(request.properties)?;
        super::schemas::check(&request.schema)?;
        let built = TableMetadataBuilder::new(
            request.schema,
            request
                .partition_spec
                .unwrap_or(UnboundPartitionSpec::builder().build()),
            request.write_order.unwrap_or(SortOrder::unsorted_order()),
            location.clone(),
            format_version,
            properties,
        )?
        .build()?;
        super::commit_checks::check_built(&built.metadata)?;
        let (metadata, changes) = (built.metadata, built.changes);
        let json = metadata_json(&metadata)?;
        if request.stage_create {
            require_internal(&record, ObjectKind::Table, "create")?;
            // Nothing is stored until the client commits the create; the name must be
            // free now, and is checked again then. So must the location, before any
            // credentials are vended for it: they would reach the files of the object
            // it overlaps.
            if let Some(existing) = self.store.load_object(catalog, &ident).await? {
                return Err(object_exists(ObjectKind::Table, existing.kind, &ident));
            }
            let store = &self.store;
            if let Some(other) = store
                .overlapping_object(record.id, &canonical, &ident)
                .await?
            {
                let location = canonical.clone();
                return Err(StoreError::LocationOverlap { location, other }.into());
            }
        }
        let config = self.table_config_in(ctx, &record, &ident, &json).await?;
        if request.stage_create {
            let staged = LoadedTable {
                metadata_location: None,
                metadata: json.into(),
            };
            let outcome = Outcome::Table(staged.clone());
            let now = crate::model::now_ms();
            match self.staged_hold_until(&config, now) {
                // Held while what was delegated reaches it, checked again under the
                // store's locks: a table created inside it meanwhile would be theirs
                // to read (`staged.rs`).
                Some(expires_ms) => {
                    let reserve = Mutation::ReserveLocation(Reservation {
                        catalog: record.id,
                        ident,
                        location: canonical,
                        table_uuid: metadata.uuid().to_string(),
                        principal: ctx.principal.name.clone(),
                        expires_ms,
                        staged_ms: now,
                    });
                    self.write(ctx, reserve, &outcome, Vec::new()).await?;
                }
                None => self.record_outcome(ctx, &outcome).await?,
            }
            return Ok((staged, config));
        }
        let write = ObjectWrite {
            ident,
            kind: ObjectKind::Table,
            expected_metadata_location: None,
            metadata_location: next_metadata_file(
                &metadata_dir(&record, &location, metadata.properties())?,
                None,
                0,
            ),
            metadata: json,
            location: canonical,
            check_location: true,
        };
        let uuid = metadata.uuid().to_string();
        let event =
            write_event(Operation::CreateTable, &write, &uuid).with("updates", to_value(&changes)?);
        let write = self
            .create_object(ctx, &record, write, event, |w| Outcome::Table(loaded(w)))
            .await?;
        Ok((into_loaded(write), config))
    }

    pub async fn load_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        snapshots: SnapshotsMode,
    ) -> CatalogResult<LoadedTable> {
        let target = Securable::table(ident);
        ctx.require(catalog, Privilege::TABLE_READ_PROPERTIES, &target)?;
        let object = self
            .load_kind(catalog, ident, ObjectKind::Table)
            .await?
            .ok_or_else(|| object_missing(ObjectKind::Table, ident))?;
        self.check_metadata_file(&object.metadata_location).await?;
        let metadata = match snapshots {
            SnapshotsMode::All => object.metadata,
            SnapshotsMode::Refs => only_referenced_snapshots(&object.metadata)?.into(),
        };
        Ok(LoadedTable {
            metadata_location: Some(object.metadata_location),
            metadata,
        })
    }

    /// The metadata comes from the store, but a table whose file was deleted behind the
    /// catalog's back is broken for every engine: say so, as a file-based catalog would.
    /// Only where the check is a local `stat`: on object storage it would cost a request
    /// per load, so there the store's copy is trusted.
    async fn check_metadata_file(&self, location: &str) -> CatalogResult<()> {
        let files = self.files.local();
        if files.cheap_exists() && location.starts_with("file:") && !files.exists(location).await? {
            return Err(CatalogError::not_found(
                Missing::File,
                format!("Failed to open input stream for file: {location}"),
            ));
        }
        Ok(())
    }

    /// Commits changes to one table; creates it when the requirements assert it must not
    /// exist yet (the second step of a staged create).
    pub async fn commit_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        change: TableChange,
    ) -> CatalogResult<LoadedTable> {
        let ident = change.ident.clone();
        let record = self.get_catalog(catalog).await?;
        let mut committed = self
            .commit_tables(ctx, &record, vec![change], |writes| {
                Outcome::Table(loaded(&writes[0]))
            })
            .await?;
        match committed.pop() {
            Some(write) => Ok(into_loaded(write)),
            // Nothing changed: answer with the current state.
            None => {
                let current = self
                    .load_table(ctx, catalog, &ident, SnapshotsMode::All)
                    .await?;
                self.record_outcome(ctx, &Outcome::Table(current.clone()))
                    .await?;
                Ok(current)
            }
        }
    }

    /// Commits changes to several tables atomically: all or none.
    pub async fn commit_transaction(
        &self,
        ctx: &RequestContext,
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
        let record = self.get_catalog(catalog).await?;
        let committed = self
            .commit_tables(ctx, &record, changes, |_| Outcome::NoContent)
            .await?;
        if committed.is_empty() {
            self.record_outcome(ctx, &Outcome::NoContent).await?;
        }
        Ok(())
    }

    /// Returns the writes of the tables that changed (unchanged ones are skipped, as no
    /// file is needed).
    async fn commit_tables(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        changes: Vec<TableChange>,
        outcome: impl Fn(&[ObjectWrite]) -> Outcome,
    ) -> CatalogResult<Vec<ObjectWrite>> {
        // Every table of the body is authorized before anything is written: a create
        // (the second step of a staged create) needs TABLE_CREATE on its namespace, a
        // change the fine-grained privilege of each kind of update it makes on its table
        // (TABLE_WRITE_PROPERTIES implies them all). A transaction's changes are
        // authorized one by one, as the same changes committed separately would be.
        for change in &changes {
            if change.requirements.contains(&TableRequirement::NotExist) {
                let parent = Securable::namespace(&change.ident.namespace);
                ctx.require(&record.name, Privilege::TABLE_CREATE, &parent)?;
            } else {
                let target = Securable::table(&change.ident);
                for privilege in update_privileges(&change.updates) {
                    ctx.require(&record.name, privilege, &target)?;
                }
            }
        }
        require_internal(record, ObjectKind::Table, "commit to")?;
        let idents: Vec<Ident> = changes.iter().map(|c| c.ident.clone()).collect();
        self.commit_with_retry(
            ctx,
            record,
            &idents,
            MetadataFiles::New,
            |current| async {
                let mut prepared = Vec::with_capacity(changes.len());
                for (change, current) in changes.iter().zip(current) {
                    if let Some(p) = self.prepare_table_change(record, change, current).await? {
                        prepared.push(p);
                    }
                }
                Ok(prepared)
            },
            outcome,
        )
        .await
    }

    async fn prepare_table_change(
        &self,
        record: &CatalogRecord,
        change: &TableChange,
        current: Option<StoredObject>,
    ) -> CatalogResult<Option<Prepared>> {
        let ident = &change.ident;
        let creating = change.requirements.contains(&TableRequirement::NotExist);
        let (metadata, base_properties, base_text, expected, previous_location, snapshots_before) =
            match current {
                Some(object) if object.kind != ObjectKind::Table => {
                    return Err(if creating {
                        object_exists(ObjectKind::Table, object.kind, ident)
                    } else {
                        object_missing(ObjectKind::Table, ident)
                    });
                }
                None if !creating => return Err(object_missing(ObjectKind::Table, ident)),
                None => (
                    self.prepare_table_create(record, change).await?,
                    None,
                    None,
                    None,
                    None,
                    HashSet::new(),
                ),
                Some(object) => {
                    let Kept {
                        model: base,
                        properties,
                        fields,
                    } = self
                        .parsed
                        .base(&object, Model::into_table, parse_metadata)?;
                    let previous_location = base.location().to_string();
                    let snapshots_before: HashSet<i64> =
                        base.snapshots().map(|s| s.snapshot_id()).collect();
                    let checked = check_table_requirements(&change.requirements, Some(&base));
                    if checked.is_err() || change.updates.is_empty() {
                        // Unchanged: the next commit may still start from this model.
                        let kept = Kept {
                            model: base,
                            properties,
                            fields,
                        };
                        self.parsed.keep(
                            &object.metadata_location,
                            &object.metadata,
                            Model::Table(Box::new(kept)),
                        );
                        checked.map_err(|e| match e {
                            CatalogError::NotFound { .. } => {
                                object_missing(ObjectKind::Table, ident)
                            }
                            other => other,
                        })?;
                        return Ok(None);
                    }
                    let metadata = apply_table_updates(
                        base,
                        &object.metadata_location,
                        change.updates.clone(),
                    )?;
                    (
                        metadata,
                        properties,
                        fields.map(|fields| (object.metadata, fields)),
                        Some(object.metadata_location),
                        Some(previous_location),
                        snapshots_before,
                    )
                }
            };
        let canonical = check_allowed(record, metadata.location())?;
        let log_len = metadata.metadata_log().len();
        let properties = properties_text(
            base_properties.as_ref(),
            metadata.properties(),
            table_property_keys(&change.updates),
        );
        // The base document's text with what a property-only commit changes, else the
        // whole document written from the model.
        let base = base_text
            .as_ref()
            .map(|(text, fields)| (text.as_str(), fields));
        let (document, fields) = spliced_or_whole(
            table_document_spliced(base, &metadata, &change.updates, properties.as_ref())?,
            || metadata_document(&metadata, properties.as_ref()),
        )?;
        let write = ObjectWrite {
            ident: ident.clone(),
            kind: ObjectKind::Table,
            metadata_location: next_metadata_file(
                &metadata_dir(record, metadata.location(), metadata.properties())?,
                expected.as_deref(),
                log_len,
            ),
            expected_metadata_location: expected,
            metadata: document,
            location: canonical,
            check_location: previous_location.as_deref() != Some(metadata.location()),
        };
        let operation = match creating {
            true => Operation::CreateTable,
            false => Operation::UpdateTable,
        };
        let snapshots_after: HashSet<i64> = metadata.snapshots().map(|s| s.snapshot_id()).collect();
        let mut added: Vec<i64> = snapshots_after
            .difference(&snapshots_before)
            .copied()
            .collect();
        let mut removed: Vec<i64> = snapshots_before
            .difference(&snapshots_after)
            .copied()
            .collect();
        added.sort_unstable();
        removed.sort_unstable();
        let event = write_event(operation, &write, &metadata.uuid().to_string())
            .with("updates", to_value(&change.updates)?)
            .with("requirements", to_value(&change.requirements)?)
            .with("snapshots-added", added)
            .with("snapshots-removed", removed);
        // Not V1: its document keeps no refs, so parsing it does not give this model back.
        if metadata.format_version() != FormatVersion::V1 {
            let kept = Kept {
                model: metadata,
                properties,
                fields,
            };
            self.parsed.keep(
                &write.metadata_location,
                &write.metadata,
                Model::Table(Box::new(kept)),
            );
        }
        Ok(Some(Prepared {
            write,
            events: vec![event],
        }))
    }

    /// The metadata of a table created by a commit (a staged create's second step).
    async fn prepare_table_create(
        &self,
        record: &CatalogRecord,
        change: &TableChange,
    ) -> CatalogResult<TableMetadata> {
        let ident = &change.ident;
        check_table_requirements(&change.requirements, None)?;
        let namespace_properties = self
            .store
            .get_namespace(&record.name, &ident.namespace)
            .await?
            .ok_or_else(|| namespace_missing(&ident.namespace))?;
        table_metadata_from_updates(change.updates.clone(), || {
            Ok(default_location(record, &namespace_properties, ident))
        })
    }

    /// Drops a table; with `purge`, also deletes the files under its location.
    pub async fn drop_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        purge: bool,
    ) -> CatalogResult<()> {
        if purge {
            let target = Securable::table(ident);
            ctx.require(catalog, Privilege::TABLE_WRITE_DATA, &target)?;
        }
        // With a drop retention the files stay until it ends (undrop needs them); the
        // expirer purges them then. Without one, the first round of the purge runs now,
        // and the expirer finishes what it leaves (a bound, a failure, a crash).
        if let Some(purge) = self
            .drop_object(ctx, catalog, ObjectKind::Table, ident, purge)
            .await?
        {
            self.purge_round(&purge).await;
        }
        Ok(())
    }

    pub async fn rename_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        from: &Ident,
        to: &Ident,
    ) -> CatalogResult<()> {
        self.rename_object(ctx, catalog, ObjectKind::Table, from, to)
            .await
    }

    /// Registers an existing metadata file as a table (or, with `overwrite`, points an
    /// existing table at it).
    pub async fn register_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        metadata_location: &str,
        overwrite: bool,
    ) -> CatalogResult<LoadedTable> {
        let parse = |bytes: &[u8]| table_registered(metadata_location, bytes);
        let write = self
            .register_object(
                ctx,
                catalog,
                ObjectKind::Table,
                ident,
                metadata_location,
                overwrite,
                parse,
                |w| Outcome::Table(loaded(w)),
            )
            .await?;
        Ok(into_loaded(write))
    }

    pub async fn report_metrics(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        report: serde_json::Value,
    ) -> CatalogResult<()> {
        ctx.require(
            catalog,
            Privilege::TABLE_READ_DATA,
            &Securable::table(ident),
        )?;
        validate_metrics_report(&report)?;
        let record = self.get_catalog(catalog).await?;
        if self
            .load_kind(catalog, ident, ObjectKind::Table)
            .await?
            .is_none()
        {
            return Err(object_missing(ObjectKind::Table, ident));
        }
        let report = Mutation::RecordMetrics {
            catalog: record.id,
            ident: ident.clone(),
            report: to_json(&report)?,
        };
        self.write(ctx, report, &Outcome::NoContent, Vec::new())
            .await?;
        Ok(())
    }
}

fn loaded(write: &ObjectWrite) -> LoadedTable {
    LoadedTable {
        metadata_location: Some(write.metadata_location.clone()),
        metadata: write.metadata.clone().into(),
    }
}

/// As [`loaded`], taking the write: the answer moves its document, not copies it.
fn into_loaded(write: ObjectWrite) -> LoadedTable {
    LoadedTable {
        metadata_location: Some(write.metadata_location),
        metadata: write.metadata.into(),
    }
}

/// A table's metadata file read for a register or a notification: its document, location
/// and uuid.
pub(super) fn table_registered(metadata_location: &str, bytes: &[u8]) -> CatalogResult<Registered> {
    let metadata: TableMetadata = serde_json::from_slice(bytes).map_err(|e| {
        CatalogError::bad_request(format!(
            "{metadata_location} is not valid table metadata: {e}"
        ))
    })?;
    // Floe writes the document back, and later commits keep its schemas: each is checked
    // as a request's would be.
    super::schemas::check_default_text(bytes)?;
    super::schemas::check_each(metadata.schemas_iter())?;
    super::commit_checks::check_built(&metadata)?;
    Ok(Registered {
        location: metadata.location().to_string(),
        metadata: metadata_json(&metadata)?,
        uuid: metadata.uuid().to_string(),
    })
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
        let scan = serde_json::json!({"report-type": "scan-report", "table-name": "t",
            "snapshot-id": 1, "filter": true, "schema-id": 0, "projected-field-ids": [1],
            "projected-field-names": ["id"], "metadata": {"engine": "spark"},
            "metrics": {"total-planning-duration": {"count": 1, "time-unit": "nanoseconds",
            "total-duration": 2644235116u64}, "result-data-files": {"unit": "count", "value": 1}}});
        validate_metrics_report(&scan).unwrap();
        for (path, value, message) in [
            (
                "/table-name",
                serde_json::json!(1),
                "table-name must be a string",
            ),
            (
                "/schema-id",
                serde_json::json!(1u64 << 40),
                "schema-id must be an integer",
            ),
            (
                "/projected-field-ids",
                serde_json::json!(["1"]),
                "projected-field-ids must be",
            ),
            (
                "/filter",
                serde_json::json!("x"),
                "filter must be an expression",
            ),
            (
                "/metadata",
                serde_json::json!({"a": 1}),
                "metadata must be an object of strings",
            ),
            (
                "/metrics/result-data-files/value",
                serde_json::json!(-1),
                "metric result-data-files: value must be an integer of 0 or more",
            ),
            (
                "/metrics/result-data-files/value",
                serde_json::json!("1"),
                "value must be",
            ),
            (
                "/metrics/total-planning-duration/count",
                serde_json::json!(1.5),
                "count must be",
            ),
            (
                "/metrics/total-planning-duration/time-unit",
                serde_json::json!(9),
                "time-unit must be a string",
            ),
            (
                "/metrics/x",
                serde_json::json!(3),
                "metric x: expected an object",
            ),
            (
                "/metrics/x",
                serde_json::json!({}),
                "metric x: a counter needs unit and value",
            ),
        ] {
            let mut report = scan.clone();
            let (parent, key) = path.rsplit_once('/').unwrap();
            report
                .pointer_mut(parent)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .insert(key.into(), value);
            let error = validate_metrics_report(&report).unwrap_err().to_string();
            assert!(error.contains(message), "{path}: {error}");
        }
    }
}
