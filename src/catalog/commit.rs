//! Commit rules as pure functions: check requirements, apply updates, get new metadata.
//! No I/O here; `tables.rs` and `views.rs` run these inside the optimistic commit loop.
//!
//! iceberg-rust decides whether a requirement holds and how an update changes metadata.
//! Two gaps are filled here, in one place: failure messages in the wording of Iceberg's
//! Java `UpdateRequirement` (clients and the conformance kit match on them), and view
//! updates/requirements, which iceberg-rust 0.10 can parse but not apply.

use std::collections::HashMap;

use iceberg::spec::{
    FormatVersion, MetadataLog, SortOrder, TableMetadata, TableMetadataBuilder,
    UnboundPartitionSpec, ViewFormatVersion, ViewMetadata, ViewMetadataBuilder,
};
use iceberg::{TableRequirement, TableUpdate, ViewUpdate};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use uuid::Uuid;

use super::commit_checks::{
    added_snapshots, check_built, check_history, check_metadata_log, check_transforms,
    check_updates, format_after,
};
use super::error::{CatalogError, CatalogResult, Missing};
use crate::auth::privileges::Privilege;
use crate::json_text::{Fields, MapText};

/// The privileges a commit of `updates` to an existing table needs, in the order of the
/// updates, each once: Polaris's fine-grained table privileges, one per kind of update
/// (`IcebergCatalogHandler.getUpdateTableAuthorizableOperations`). An update without
/// one of its own (set-default-spec, remove-schemas, partition statistics, encryption
/// keys), or a commit without updates, needs TABLE_WRITE_PROPERTIES, as in Polaris.
/// TABLE_WRITE_PROPERTIES implies every one of them, so holders of it see no change.
pub fn update_privileges(updates: &[TableUpdate]) -> Vec<Privilege> {
    use Privilege as P;
    let mut needed = Vec::with_capacity(2);
    for update in updates {
        let privilege = match update {
            TableUpdate::AssignUuid { .. } => P::TABLE_ASSIGN_UUID,
            TableUpdate::UpgradeFormatVersion { .. } => P::TABLE_UPGRADE_FORMAT_VERSION,
            TableUpdate::AddSchema { .. } => P::TABLE_ADD_SCHEMA,
            TableUpdate::SetCurrentSchema { .. } => P::TABLE_SET_CURRENT_SCHEMA,
            TableUpdate::AddSpec { .. } => P::TABLE_ADD_PARTITION_SPEC,
            TableUpdate::AddSortOrder { .. } => P::TABLE_ADD_SORT_ORDER,
            TableUpdate::SetDefaultSortOrder { .. } => P::TABLE_SET_DEFAULT_SORT_ORDER,
            TableUpdate::AddSnapshot { .. } => P::TABLE_ADD_SNAPSHOT,
            TableUpdate::SetSnapshotRef { .. } => P::TABLE_SET_SNAPSHOT_REF,
            TableUpdate::RemoveSnapshots { .. } => P::TABLE_REMOVE_SNAPSHOTS,
            TableUpdate::RemoveSnapshotRef { .. } => P::TABLE_REMOVE_SNAPSHOT_REF,
            TableUpdate::SetLocation { .. } => P::TABLE_SET_LOCATION,
            TableUpdate::SetProperties { .. } => P::TABLE_SET_PROPERTIES,
            TableUpdate::RemoveProperties { .. } => P::TABLE_REMOVE_PROPERTIES,
            TableUpdate::SetStatistics { .. } => P::TABLE_SET_STATISTICS,
            TableUpdate::RemoveStatistics { .. } => P::TABLE_REMOVE_STATISTICS,
            TableUpdate::RemovePartitionSpecs { .. } => P::TABLE_REMOVE_PARTITION_SPECS,
            TableUpdate::SetDefaultSpec { .. }
            | TableUpdate::RemoveSchemas { .. }
            | TableUpdate::SetPartitionStatistics { .. }
            | TableUpdate::RemovePartitionStatistics { .. }
            | TableUpdate::AddEncryptionKey { .. }
            | TableUpdate::RemoveEncryptionKey { .. } => P::TABLE_WRITE_PROPERTIES,
        };
        if !needed.contains(&privilege) {
            needed.push(privilege);
        }
    }
    if needed.is_empty() {
        needed.push(P::TABLE_WRITE_PROPERTIES);
    }
    needed
}

/// Checks every requirement against the current metadata (`None`: the table does not
/// exist). The first failure becomes a `CommitFailed` with Java's wording.
pub fn check_table_requirements(
    requirements: &[TableRequirement],
    base: Option<&TableMetadata>,
) -> CatalogResult<()> {
    for requirement in requirements {
        if requirement.check(base).is_err() {
            return Err(match base {
                None => CatalogError::not_found(Missing::Table, "Table does not exist"),
                Some(metadata) => {
                    CatalogError::CommitFailed(requirement_failure(requirement, metadata))
                }
            });
        }
    }
    Ok(())
}

fn requirement_failure(requirement: &TableRequirement, base: &TableMetadata) -> String {
    match requirement {
        TableRequirement::NotExist => "Requirement failed: table already exists".into(),
        TableRequirement::UuidMatch { uuid } => format!(
            "Requirement failed: UUID does not match: expected {} != {uuid}",
            base.uuid()
        ),
        TableRequirement::RefSnapshotIdMatch { r#ref, snapshot_id } => {
            match (base.snapshot_for_ref(r#ref), snapshot_id) {
                (Some(_), None) => format!(
                    "Requirement failed: {} {ref} was created concurrently",
                    ref_type(base, r#ref)
                ),
                (Some(current), Some(expected)) => format!(
                    "Requirement failed: {} {ref} has changed: expected id {expected} != {}",
                    ref_type(base, r#ref),
                    current.snapshot_id()
                ),
                (None, expected) => format!(
                    "Requirement failed: branch or tag {ref} is missing, expected {}",
                    expected.map(|id| id.to_string()).unwrap_or_else(|| "null".into())
                ),
            }
        }
        TableRequirement::LastAssignedFieldIdMatch { last_assigned_field_id } => format!(
            "Requirement failed: last assigned field id changed: expected id {last_assigned_field_id} != {}",
            base.last_column_id()
        ),
        TableRequirement::CurrentSchemaIdMatch { current_schema_id } => format!(
            "Requirement failed: current schema changed: expected id {current_schema_id} != {}",
            base.current_schema_id()
        ),
        TableRequirement::LastAssignedPartitionIdMatch { last_assigned_partition_id } => format!(
            "Requirement failed: last assigned partition id changed: expected id {last_assigned_partition_id} != {}",
            base.last_partition_id()
        ),
        TableRequirement::DefaultSpecIdMatch { default_spec_id } => format!(
            "Requirement failed: default partition spec changed: expected id {default_spec_id} != {}",
            base.default_partition_spec_id()
        ),
        TableRequirement::DefaultSortOrderIdMatch { default_sort_order_id } => format!(
            "Requirement failed: default sort order changed: expected id {default_sort_order_id} != {}",
            base.default_sort_order_id()
        ),
    }
}

/// "branch" or "tag": iceberg-rust does not expose a ref's type, so read it from the
/// serialized refs (only on this failure path).
fn ref_type(base: &TableMetadata, name: &str) -> &'static str {
    let is_tag = serde_json::to_value(base)
        .ok()
        .and_then(|v| {
            v.get("refs")?
                .get(name)?
                .get("type")?
                .as_str()
                .map(|t| t == "tag")
        })
        .unwrap_or(false);
    if is_tag {
        "tag"
    } else {
        "branch"
    }
}

/// Applies updates to the current metadata. `current_metadata_location` goes into the
/// metadata log.
pub fn apply_table_updates(
    base: TableMetadata,
    current_metadata_location: &str,
    updates: Vec<TableUpdate>,
) -> CatalogResult<TableMetadata> {
    let version = format_after(base.format_version(), &updates);
    let mut builder = base.into_builder(Some(current_metadata_location.to_string()));
    check_updates(&updates, chrono::Utc::now().timestamp_millis(), version)?;
    let added = added_snapshots(&updates);
    for update in updates {
        builder = update.apply(builder)?;
    }
    let metadata = builder.build()?.metadata;
    check_history(&metadata, &added)?;
    // Not `check_built`: the base's schemas were checked when they came, and walking
    // them all on every commit would cost a table with a long history on each write.
    check_transforms(&metadata)?;
    check_metadata_log(&metadata)?;
    Ok(metadata)
}

/// Builds the first metadata of a table from the updates of a create transaction
/// (`assert-create` plus `add-schema`, `add-spec`, `set-location`, ...), as Java's
/// `TableMetadata.buildFromEmpty()` would. The first schema, spec and sort order seed the
/// builder; every other update is then applied in order. `default_location` is used when
/// the updates set none.
pub fn table_metadata_from_updates(
    updates: Vec<TableUpdate>,
    default_location: impl FnOnce() -> CatalogResult<String>,
) -> CatalogResult<TableMetadata> {
    let mut format_version = None;
    let mut schema = None;
    let mut spec = None;
    let mut sort_order = None;
    let mut location = None;
    let mut rest = Vec::with_capacity(updates.len());
    for update in updates {
        match update {
            TableUpdate::UpgradeFormatVersion { format_version: v } if format_version.is_none() => {
                format_version = Some(v)
            }
            TableUpdate::AddSchema { schema: s } if schema.is_none() => schema = Some(s),
            TableUpdate::AddSpec { spec: s } if spec.is_none() => spec = Some(s),
            TableUpdate::AddSortOrder { sort_order: s } if sort_order.is_none() => {
                sort_order = Some(s)
            }
            TableUpdate::SetLocation { location: l } => location = Some(l),
            other => rest.push(other),
        }
    }
    let schema = schema.ok_or_else(|| {
        CatalogError::bad_request("Cannot create a table without an add-schema update")
    })?;
    super::schemas::check(&schema)?;
    let version = format_after(format_version.unwrap_or(FormatVersion::V2), &rest);
    check_updates(&rest, chrono::Utc::now().timestamp_millis(), version)?;
    let location = match location {
        Some(l) => l,
        None => default_location()?,
    };
    let mut builder = TableMetadataBuilder::new(
        schema,
        spec.unwrap_or(UnboundPartitionSpec::builder().build()),
        sort_order.unwrap_or(SortOrder::unsorted_order()),
        location,
        format_version.unwrap_or(FormatVersion::V2),
        HashMap::new(),
    )?;
    let added = added_snapshots(&rest);
    for update in rest {
        builder = update.apply(builder)?;
    }
    let metadata = builder.build()?.metadata;
    check_history(&metadata, &added)?;
    check_built(&metadata)?;
    Ok(metadata)
}

/// Requirements of a view commit; the REST spec defines only `assert-view-uuid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ViewRequirement {
    #[serde(rename = "assert-view-uuid")]
    UuidMatch { uuid: Uuid },
}

pub fn check_view_requirements(
    requirements: &[ViewRequirement],
    base: &ViewMetadata,
) -> CatalogResult<()> {
    for requirement in requirements {
        match requirement {
            ViewRequirement::UuidMatch { uuid } if *uuid != base.uuid() => {
                return Err(CatalogError::CommitFailed(format!(
                    "Requirement failed: view UUID does not match: expected {} != {uuid}",
                    base.uuid()
                )))
            }
            ViewRequirement::UuidMatch { .. } => {}
        }
    }
    Ok(())
}

pub fn apply_view_updates(
    base: ViewMetadata,
    updates: Vec<ViewUpdate>,
) -> CatalogResult<ViewMetadata> {
    let mut builder = base.into_builder();
    for update in updates {
        builder = apply_view_update(builder, update)?;
    }
    Ok(builder.build()?.metadata)
}

fn apply_view_update(
    builder: ViewMetadataBuilder,
    update: ViewUpdate,
) -> CatalogResult<ViewMetadataBuilder> {
    Ok(match update {
        ViewUpdate::AssignUuid { uuid } => builder.assign_uuid(uuid),
        ViewUpdate::UpgradeFormatVersion { format_version } => {
            builder.upgrade_format_version(format_version)?
        }
        ViewUpdate::AddSchema { schema, .. } => {
            super::schemas::check(&schema)?;
            builder.add_schema(schema)
        }
        ViewUpdate::SetLocation { location } => builder.set_location(location),
        ViewUpdate::SetProperties { updates } => builder.set_properties(updates)?,
        ViewUpdate::RemoveProperties { removals } => builder.remove_properties(&removals),
        ViewUpdate::AddViewVersion { view_version } => builder.add_version(view_version)?,
        ViewUpdate::SetCurrentViewVersion { view_version_id } => {
            builder.set_current_version_id(view_version_id)?
        }
    })
}

/// Serialises table or view metadata with its lists in a stable order (iceberg-rust keeps
/// snapshots, schemas and versions in hash maps), and every object's keys sorted. Clients
/// compare these lists in order, and the same state must always produce the same document.
pub fn metadata_json<T: Serialize>(metadata: &T) -> CatalogResult<String> {
    metadata_json_with(metadata, None)
}

/// As [`metadata_json`], with the properties written as `properties`, their text (from
/// [`properties_text`]) instead of sorted and written again.
pub fn metadata_json_with<T: Serialize>(
    metadata: &T,
    properties: Option<&MapText>,
) -> CatalogResult<String> {
    metadata_document(metadata, properties).map(|(text, _)| text)
}

/// As [`metadata_json_with`], and where the document's top-level fields lie, for the
/// next commit to splice ([`table_document_spliced`]).
pub fn metadata_document<T: Serialize>(
    metadata: &T,
    properties: Option<&MapText>,
) -> CatalogResult<(String, Option<Fields>)> {
    let raw = properties.map(|p| ("properties", p.as_str()));
    let (text, fields) =
        crate::json_text::sorted::to_document(metadata, &METADATA_LISTS, raw.as_slice())
            .map_err(CatalogError::internal)?;
    // Straight to text, as the `Value` tree (sorted maps) it replaced wrote it: with the
    // self-check on (debug builds, the test suites' servers) every document is compared,
    // and so every properties text used.
    self_check_document(&text, metadata)?;
    Ok((text, fields))
}

/// With the self-check on, asserts that `text` is `metadata`'s document as the `Value`
/// path writes it.
fn self_check_document<T: Serialize>(text: &str, metadata: &T) -> CatalogResult<()> {
    if super::parsed::self_check() {
        assert_eq!(text, metadata_json_via_value(metadata)?);
    }
    Ok(())
}

/// A view's metadata document, written as [`metadata_json_with`] writes it. With the
/// self-check on, every document is compared with iceberg-rust's own serialisation.
pub fn view_metadata_json(
    metadata: &ViewMetadata,
    properties: Option<&MapText>,
) -> CatalogResult<String> {
    view_metadata_document(metadata, properties).map(|(text, _)| text)
}

/// As [`view_metadata_json`], and where the document's top-level fields lie.
pub fn view_metadata_document(
    metadata: &ViewMetadata,
    properties: Option<&MapText>,
) -> CatalogResult<(String, Option<Fields>)> {
    let document = metadata_document(&ViewDocument(metadata), properties)?;
    self_check_document(&document.0, metadata)?;
    Ok(document)
}

/// The document of a table commit whose updates only set or remove properties, written
/// from its base document's text and that text's top-level fields (`base`): of
/// the fields, such a commit changes only `properties`, `last-updated-ms` and
/// `metadata-log`, written here from `metadata` (the properties as their text,
/// `properties`); the others are copied. In iceberg-rust 0.10.1, `set_properties` and
/// `remove_properties` change only the map, and `build` then sets the time, logs the
/// previous file and trims the log (its snapshot log is rebuilt only after snapshot
/// changes; the default spec is bound again to the same schema). `None` when the updates
/// do anything else, or the base's or the properties' text is not at hand: the document is
/// then written whole ([`spliced_or_whole`]). With the self-check on, every document spliced is compared with the `Value`
/// path's.
pub fn table_document_spliced(
    base: Option<(&str, &Fields)>,
    metadata: &TableMetadata,
    updates: &[TableUpdate],
    properties: Option<&MapText>,
) -> CatalogResult<Option<(String, Fields)>> {
    let only_properties = updates.iter().all(|u| {
        matches!(
            u,
            TableUpdate::SetProperties { .. } | TableUpdate::RemoveProperties { .. }
        )
    });
    // V1 documents write other fields (and `parsed` keeps no V1 model to splice from).
    let Some((base, base_fields)) =
        base.filter(|_| only_properties && metadata.format_version() != FormatVersion::V1)
    else {
        return Ok(None);
    };
    // Empty lists and maps are left out of the document, as iceberg-rust writes it.
    let properties = match (metadata.properties().is_empty(), properties) {
        (true, _) => None,
        (false, Some(text)) => Some(text.as_str()),
        (false, None) => return Ok(None),
    };
    let log = match metadata.metadata_log() {
        [] => None,
        log => Some(metadata_log_text(log)),
    };
    let mut time = itoa::Buffer::new();
    let changes = [
        (
            "last-updated-ms",
            Some(time.format(metadata.last_updated_ms())),
        ),
        ("metadata-log", log.as_deref()),
        ("properties", properties),
    ];
    let spliced = base_fields.splice(base, &changes);
    if let Some((text, _)) = &spliced {
        self_check_document(text, metadata)?;
    }
    Ok(spliced)
}

/// A metadata log's JSON text, as the sorted writer writes it (the entries' two fields
/// happen to be in key order), written directly: through serde it took a tenth of a
/// table commit in Polaris's benchmark (100 entries, the default log length).
fn metadata_log_text(log: &[MetadataLog]) -> String {
    let mut out = Vec::with_capacity(log.iter().map(|e| e.metadata_file.len() + 48).sum());
    let mut number = itoa::Buffer::new();
    out.push(b'[');
    for (i, entry) in log.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"metadata-file\":");
        crate::json_text::push_str(&mut out, &entry.metadata_file);
        out.extend_from_slice(b",\"timestamp-ms\":");
        out.extend_from_slice(number.format(entry.timestamp_ms).as_bytes());
        out.push(b'}');
    }
    out.push(b']');
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// The document `spliced` gave (a property-only commit's), else the one `whole` writes.
pub fn spliced_or_whole(
    spliced: Option<(String, Fields)>,
    whole: impl FnOnce() -> CatalogResult<(String, Option<Fields>)>,
) -> CatalogResult<(String, Option<Fields>)> {
    match spliced {
        Some((text, fields)) => Ok((text, Some(fields))),
        None => whole(),
    }
}

/// As [`table_document_spliced`], for a view: a view commit that only sets or removes
/// properties changes only its `properties`, unless a smaller
/// `version.history.num-entries` drops versions. So the splice is used only when the view
/// kept its `versions` and `history` lengths (as the base had them) and current version.
pub fn view_document_spliced(
    base: Option<(&str, &Fields)>,
    (versions, history, current): (usize, usize, i32),
    metadata: &ViewMetadata,
    updates: &[ViewUpdate],
    properties: Option<&MapText>,
) -> CatalogResult<Option<(String, Fields)>> {
    let only_properties = updates.iter().all(|u| {
        matches!(
            u,
            ViewUpdate::SetProperties { .. } | ViewUpdate::RemoveProperties { .. }
        )
    });
    let unchanged = metadata.versions().len() == versions
        && metadata.history().len() == history
        && metadata.current_version_id() == current;
    let (Some((base, base_fields)), Some(properties)) = (base, properties) else {
        return Ok(None);
    };
    if !only_properties || !unchanged {
        return Ok(None);
    }
    // A view's document always writes its properties, even none (`ViewDocument`).
    let spliced = base_fields.splice(base, &[("properties", Some(properties.as_str()))]);
    if let Some((text, _)) = &spliced {
        self_check_document(text, metadata)?;
    }
    Ok(spliced)
}

/// The text of `properties`, a commit's new properties, for its document: `base`'s (the
/// text its base document was written with) with the keys in `changed` (those its updates
/// set or removed) changed, else written anew. `None` when they need an escape: the
/// document then writes them itself.
pub fn properties_text<'k>(
    base: Option<&MapText>,
    properties: &HashMap<String, String>,
    changed: impl IntoIterator<Item = &'k str>,
) -> Option<MapText> {
    base.and_then(|base| base.changed(properties, changed))
        .or_else(|| MapText::new(properties))
}

/// The property keys table updates set or remove (the only updates that change them).
pub fn table_property_keys(updates: &[TableUpdate]) -> impl Iterator<Item = &str> {
    property_keys(updates, |update| match update {
        TableUpdate::SetProperties { updates } => (Some(updates), &[]),
        TableUpdate::RemoveProperties { removals } => (None, removals),
        _ => (None, &[]),
    })
}

/// The property keys view updates set or remove (the only updates that change them).
pub fn view_property_keys(updates: &[ViewUpdate]) -> impl Iterator<Item = &str> {
    property_keys(updates, |update| match update {
        ViewUpdate::SetProperties { updates } => (Some(updates), &[]),
        ViewUpdate::RemoveProperties { removals } => (None, removals),
        _ => (None, &[]),
    })
}

/// The keys `updates` set or remove, given what each one sets and removes.
fn property_keys<'a, U>(
    updates: &'a [U],
    changes: impl Fn(&'a U) -> (Option<&'a HashMap<String, String>>, &'a [String]),
) -> impl Iterator<Item = &'a str> {
    updates.iter().flat_map(move |update| {
        let (set, removed) = changes(update);
        set.into_iter()
            .flat_map(HashMap::keys)
            .chain(removed)
            .map(String::as_str)
    })
}

/// A view's metadata as iceberg-rust serialises it (format 1, the fields of its
/// `ViewMetadataV1`), from borrowed parts: iceberg-rust's own `Serialize` first clones the
/// whole view, properties included, which was an eighth of a view commit's CPU in
/// Polaris's benchmark (it adds a property per update).
struct ViewDocument<'a>(&'a ViewMetadata);

impl Serialize for ViewDocument<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let view = self.0;
        // A format iceberg-rust adds must be written here before it compiles.
        match view.format_version() {
            ViewFormatVersion::V1 => {}
        }
        let versions: Vec<_> = view.versions().map(|v| v.as_ref()).collect();
        let schemas: Vec<_> = view.schemas_iter().map(|s| s.as_ref()).collect();
        let mut doc = serializer.serialize_struct("ViewMetadataV1", 8)?;
        doc.serialize_field("format-version", &1u8)?;
        doc.serialize_field("view-uuid", &view.uuid())?;
        doc.serialize_field("location", view.location())?;
        doc.serialize_field("current-version-id", &view.current_version_id())?;
        doc.serialize_field("versions", &versions)?;
        doc.serialize_field("version-log", view.history())?;
        doc.serialize_field("schemas", &schemas)?;
        doc.serialize_field("properties", &Some(view.properties()))?;
        doc.end()
    }
}

/// The lists of a metadata document and the fields their items are ordered by.
const METADATA_LISTS: [crate::json_text::sorted::ListOrder<'static>; 7] = [
    (
        "snapshots",
        &["sequence-number", "timestamp-ms", "snapshot-id"],
    ),
    ("schemas", &["schema-id"]),
    ("partition-specs", &["spec-id"]),
    ("sort-orders", &["order-id"]),
    ("versions", &["version-id"]),
    ("statistics", &["snapshot-id"]),
    ("partition-statistics", &["snapshot-id"]),
];

/// The same document through a `serde_json::Value` (its maps sorted), then the lists
/// sorted: how documents were written before `json_text::sorted`, kept to check it.
fn metadata_json_via_value<T: Serialize>(metadata: &T) -> CatalogResult<String> {
    let mut doc = serde_json::to_value(metadata).map_err(CatalogError::internal)?;
    if let Some(object) = doc.as_object_mut() {
        for (list, keys) in METADATA_LISTS {
            if let Some(serde_json::Value::Array(items)) = object.get_mut(list) {
                items.sort_by_key(|item| {
                    keys.iter()
                        .map(|k| item.get(*k).and_then(|v| v.as_i64()).unwrap_or(0))
                        .collect::<Vec<i64>>()
                });
            }
        }
    }
    Ok(crate::json_text::to_string(&doc))
}

/// The path of the next metadata file in `metadata_dir`: `<version>-<uuid>.metadata.json`,
/// the version one past the current file's (or past the length of the metadata log when
/// the current name does not follow that pattern). The random UUID keeps the name unique
/// even when two writers race.
pub fn next_metadata_file(metadata_dir: &str, current: Option<&str>, log_len: usize) -> String {
    let version = current
        .and_then(|c| c.rsplit('/').next())
        .and_then(|file| file.split('-').next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|v| v.saturating_add(1))
        .unwrap_or(if current.is_some() {
            log_len as u64 + 1
        } else {
            0
        });
    format!(
        "{}/{version:05}-{}.metadata.json",
        metadata_dir.trim_end_matches('/'),
        Uuid::new_v4()
    )
}

#[cfg(test)]
mod tests {
    use super::super::commit_checks::CLOCK_SKEW_MS;
    use super::*;
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "data", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap()
    }

    fn table() -> TableMetadata {
        table_metadata_from_updates(vec![TableUpdate::AddSchema { schema: schema() }], || {
            Ok("file:///tmp/t".into())
        })
        .unwrap()
    }

    /// A new table of `version` at `file:///tmp/t`.
    fn table_of(version: FormatVersion) -> TableMetadata {
        let updates = vec![
            TableUpdate::UpgradeFormatVersion {
                format_version: version,
            },
            TableUpdate::AddSchema { schema: schema() },
        ];
        table_metadata_from_updates(updates, || Ok("file:///tmp/t".into())).unwrap()
    }

    /// An `add-snapshot` update of snapshot `id` whose parent is `parent`.
    fn add_snapshot(id: i64, parent: Option<i64>, sequence: i64) -> TableUpdate {
        let mut snapshot = serde_json::json!({
            "snapshot-id": id, "sequence-number": sequence,
            "timestamp-ms": chrono::Utc::now().timestamp_millis(),
            "manifest-list": format!("file:///tmp/t/metadata/snap-{id}.avro"),
            "summary": {"operation": "append"}, "schema-id": 0});
        if let Some(parent) = parent {
            snapshot["parent-snapshot-id"] = parent.into();
        }
        serde_json::from_value(serde_json::json!({"action": "add-snapshot", "snapshot": snapshot}))
            .unwrap()
    }

    /// Refs Java's readers could not load, and row ranges past a `long`, are refused; the
    /// base is left as it was (the commit is pure).
    #[test]
    fn refs_and_row_ranges_iceberg_readers_refuse_are_a_400() {
        let update =
            |value: serde_json::Value| -> TableUpdate { serde_json::from_value(value).unwrap() };
        let set_ref = |name: &str, extra: serde_json::Value| {
            let mut value = serde_json::json!({"action": "set-snapshot-ref", "ref-name": name,
                "type": "branch", "snapshot-id": 1});
            value
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            update(value)
        };
        for (extra, field) in [
            (
                serde_json::json!({"min-snapshots-to-keep": 0}),
                "min-snapshots-to-keep 0",
            ),
            (
                serde_json::json!({"max-snapshot-age-ms": -5}),
                "max-snapshot-age-ms -5",
            ),
            (
                serde_json::json!({"max-ref-age-ms": -1}),
                "max-ref-age-ms -1",
            ),
        ] {
            let updates = vec![add_snapshot(1, None, 1), set_ref("b", extra)];
            let error = apply_table_updates(table(), "m0", updates)
                .unwrap_err()
                .to_string();
            assert!(error.contains(field), "{error}");
        }
        let error = apply_table_updates(
            table(),
            "m0",
            vec![add_snapshot(1, None, 1), set_ref("", serde_json::json!({}))],
        )
        .unwrap_err();
        assert!(error.to_string().contains("ref-name is empty"), "{error}");
        let kept = set_ref(
            "b",
            serde_json::json!({"min-snapshots-to-keep": 1, "max-ref-age-ms": 1}),
        );
        apply_table_updates(table(), "m0", vec![add_snapshot(1, None, 1), kept]).unwrap();

        // Row ids: `first-row-id + added-rows` is the next row id, a `long`.
        let rows = |first: u64, added: u64| {
            let mut value = serde_json::to_value(add_snapshot(1, None, 1)).unwrap();
            value["snapshot"]["first-row-id"] = first.into();
            value["snapshot"]["added-rows"] = added.into();
            update(value)
        };
        let error = apply_table_updates(table_of(FormatVersion::V3), "m0", vec![rows(0, 1 << 63)])
            .unwrap_err();
        assert!(error.to_string().contains("within a long"), "{error}");
        let error = apply_table_updates(
            table_of(FormatVersion::V3),
            "m0",
            vec![rows(i64::MAX as u64, 1)],
        )
        .unwrap_err();
        assert!(error.to_string().contains("within a long"), "{error}");
        apply_table_updates(table_of(FormatVersion::V3), "m0", vec![rows(0, 10)]).unwrap();
    }

    /// Below format version 3 a schema holds no nanosecond timestamps and no initial
    /// defaults (Java's readers refuse them there); an upgrade in the same commit allows
    /// them.
    #[test]
    fn v3_schema_features_need_a_v3_table() {
        let field = |extra: serde_json::Value, ty: &str| -> TableUpdate {
            let mut field =
                serde_json::json!({"id": 3, "name": "n", "required": false, "type": ty});
            field
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(serde_json::json!({"action": "add-schema", "schema": {
                "type": "struct", "schema-id": 1, "fields": [
                    {"id": 1, "name": "id", "required": true, "type": "long"},
                    {"id": 2, "name": "data", "required": false, "type": "string"}, field]}}))
            .unwrap()
        };
        let cases = [
            (
                field(serde_json::json!({}), "timestamp_ns"),
                "Invalid type for n: timestamp_ns",
            ),
            (
                field(serde_json::json!({"initial-default": 5}), "int"),
                "Invalid initial default for n",
            ),
        ];
        for (update, wanted) in cases {
            let error = apply_table_updates(table(), "m0", vec![update.clone()])
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(wanted) && error.contains("until v3"),
                "{error}"
            );
            let upgrade = TableUpdate::UpgradeFormatVersion {
                format_version: FormatVersion::V3,
            };
            apply_table_updates(table(), "m0", vec![upgrade, update.clone()]).unwrap();
            apply_table_updates(table_of(FormatVersion::V3), "m0", vec![update]).unwrap();
        }
        // A created or registered document is checked as a whole.
        let mut doc = serde_json::to_value(table()).unwrap();
        doc["schemas"][0]["fields"][1]["type"] = "timestamptz_ns".into();
        let registered: TableMetadata = serde_json::from_value(doc).unwrap();
        assert!(check_built(&registered)
            .unwrap_err()
            .to_string()
            .contains("until v3"));
    }

    /// A snapshot timed past the clock's skew is refused, and the commit after a snapshot
    /// at the edge of it still writes metadata its readers accept.
    #[test]
    fn snapshots_from_a_fast_clock_are_refused_and_the_log_stays_readable() {
        let at = |id: i64, ms: i64| {
            let mut update = serde_json::to_value(add_snapshot(id, None, id)).unwrap();
            update["snapshot"]["timestamp-ms"] = ms.into();
            serde_json::from_value::<TableUpdate>(update).unwrap()
        };
        let now = chrono::Utc::now().timestamp_millis();
        let error = apply_table_updates(table(), "m0", vec![at(1, now + 10 * CLOCK_SKEW_MS)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("past this catalog's clock"), "{error}");
        let error =
            check_updates(&[at(1, now + CLOCK_SKEW_MS + 1)], now, FormatVersion::V2).unwrap_err();
        assert!(error.to_string().contains("timestamp-ms"));
        check_updates(&[at(1, now + CLOCK_SKEW_MS)], now, FormatVersion::V2).unwrap();
        // Within the skew: the next commit's log entry is accepted by iceberg-rust's reader.
        let base =
            apply_table_updates(table(), "m0", vec![at(1, now + CLOCK_SKEW_MS / 2)]).unwrap();
        let next = apply_table_updates(base, "m1", Vec::new()).unwrap();
        let text = serde_json::to_string(&next).unwrap();
        serde_json::from_str::<TableMetadata>(&text).unwrap();
        // A table whose last update lies ahead of the skew (written before this check, or
        // registered): its commits are a 400, not a file its readers refuse.
        let mut doc: serde_json::Value = serde_json::to_value(table()).unwrap();
        doc["last-updated-ms"] = (now + 10 * CLOCK_SKEW_MS).into();
        let ahead: TableMetadata = serde_json::from_value(doc).unwrap();
        let error = apply_table_updates(ahead, "m1", Vec::new()).unwrap_err();
        assert!(error.to_string().contains("metadata log entry"), "{error}");
    }

    /// Bucket and truncate transforms of width 0 are refused in a spec or a sort order, at
    /// creation and at commit.
    #[test]
    fn transforms_of_width_zero_are_refused() {
        for transform in ["bucket[0]", "truncate[0]"] {
            let spec = serde_json::json!({"action": "add-spec", "spec": {"fields": [
                {"source-id": 1, "field-id": 1000, "name": "p", "transform": transform}]}});
            let order = serde_json::json!({"action": "add-sort-order", "sort-order": {
                "order-id": 1, "fields": [{"source-id": 1, "transform": transform,
                "direction": "asc", "null-order": "nulls-first"}]}});
            for update in [spec, order] {
                let update: TableUpdate = serde_json::from_value(update).unwrap();
                let error = apply_table_updates(table(), "m0", vec![update.clone()])
                    .unwrap_err()
                    .to_string();
                assert!(error.contains("at least 1"), "{transform}: {error}");
                let create = vec![TableUpdate::AddSchema { schema: schema() }, update];
                let error = table_metadata_from_updates(create, || Ok("file:///tmp/t".into()))
                    .unwrap_err()
                    .to_string();
                assert!(error.contains("at least 1"), "{transform}: {error}");
            }
        }
        let spec = serde_json::json!({"action": "add-spec", "spec": {"fields": [
            {"source-id": 1, "field-id": 1000, "name": "p", "transform": "bucket[1]"}]}});
        apply_table_updates(table(), "m0", vec![serde_json::from_value(spec).unwrap()]).unwrap();
    }

    /// A snapshot that would be its own ancestor is refused, at creation and at commit,
    /// and the base is untouched; a parent that is gone (expired) is still allowed.
    #[test]
    fn a_snapshot_history_that_loops_is_refused() {
        let error = apply_table_updates(table(), "m0", vec![add_snapshot(7, Some(7), 1)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("its own ancestor"), "{error}");
        let create = vec![
            TableUpdate::AddSchema { schema: schema() },
            add_snapshot(7, Some(7), 1),
        ];
        let error = table_metadata_from_updates(create, || Ok("file:///tmp/t".into()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("its own ancestor"), "{error}");
        // 2's parent, 1, has expired; a new snapshot 1 whose parent is 2 would loop.
        let base = apply_table_updates(table(), "m0", vec![add_snapshot(2, Some(1), 1)]).unwrap();
        let error = apply_table_updates(base.clone(), "m1", vec![add_snapshot(1, Some(2), 2)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("its own ancestor"), "{error}");
        assert!(base.snapshot_by_id(1).is_none());
        // A history that ends (at a missing parent, or none) is fine.
        let next = apply_table_updates(base, "m1", vec![add_snapshot(3, Some(2), 2)]).unwrap();
        assert_eq!(
            next.snapshot_by_id(3).unwrap().parent_snapshot_id(),
            Some(2)
        );
    }

    /// Each update as a client sends it, and the privilege Polaris asks for.
    #[test]
    fn commits_need_the_privileges_of_their_updates() {
        use Privilege as P;
        let parse = |updates: serde_json::Value| -> Vec<TableUpdate> {
            serde_json::from_value(updates).unwrap()
        };
        let append = parse(serde_json::json!([
            {"action": "add-snapshot", "snapshot": {
                "snapshot-id": 1, "timestamp-ms": 1, "manifest-list": "file:///m.avro",
                "summary": {"operation": "append"}, "schema-id": 0}},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
        ]));
        assert_eq!(
            update_privileges(&append),
            [P::TABLE_ADD_SNAPSHOT, P::TABLE_SET_SNAPSHOT_REF]
        );
        let evolve = parse(serde_json::json!([
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": []}},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "set-properties", "updates": {"a": "b"}},
            {"action": "set-properties", "updates": {"c": "d"}},
            {"action": "remove-properties", "removals": ["a"]},
        ]));
        assert_eq!(
            update_privileges(&evolve),
            [
                P::TABLE_ADD_SCHEMA,
                P::TABLE_SET_CURRENT_SCHEMA,
                P::TABLE_SET_PROPERTIES,
                P::TABLE_REMOVE_PROPERTIES
            ],
            "in order, each once"
        );
        let others = parse(serde_json::json!([
            {"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-spec", "spec": {"fields": []}},
            {"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": 1},
            {"action": "remove-snapshots", "snapshot-ids": [1]},
            {"action": "remove-snapshot-ref", "ref-name": "b"},
            {"action": "set-location", "location": "file:///x"},
            {"action": "set-statistics", "snapshot-id": 1, "statistics": {
                "snapshot-id": 1, "statistics-path": "file:///s", "file-size-in-bytes": 1,
                "file-footer-size-in-bytes": 1, "blob-metadata": []}},
            {"action": "remove-statistics", "snapshot-id": 1},
            {"action": "remove-partition-specs", "spec-ids": [1]},
        ]));
        assert_eq!(
            update_privileges(&others),
            [
                P::TABLE_ASSIGN_UUID,
                P::TABLE_UPGRADE_FORMAT_VERSION,
                P::TABLE_ADD_PARTITION_SPEC,
                P::TABLE_ADD_SORT_ORDER,
                P::TABLE_SET_DEFAULT_SORT_ORDER,
                P::TABLE_REMOVE_SNAPSHOTS,
                P::TABLE_REMOVE_SNAPSHOT_REF,
                P::TABLE_SET_LOCATION,
                P::TABLE_SET_STATISTICS,
                P::TABLE_REMOVE_STATISTICS,
                P::TABLE_REMOVE_PARTITION_SPECS,
            ]
        );
        // No privilege of its own in Polaris: the coarse one.
        let coarse = parse(serde_json::json!([
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "remove-schemas", "schema-ids": [0]},
        ]));
        assert_eq!(update_privileges(&coarse), [P::TABLE_WRITE_PROPERTIES]);
        let mixed = parse(serde_json::json!([
            {"action": "set-properties", "updates": {"a": "b"}},
            {"action": "set-default-spec", "spec-id": -1},
        ]));
        assert_eq!(
            update_privileges(&mixed),
            [P::TABLE_SET_PROPERTIES, P::TABLE_WRITE_PROPERTIES]
        );
        assert_eq!(update_privileges(&[]), [P::TABLE_WRITE_PROPERTIES]);
    }

    #[test]
    fn create_from_updates_uses_given_location_or_default() {
        let md = table();
        assert_eq!(md.location(), "file:///tmp/t");
        assert_eq!(md.last_column_id(), 2);
        let md = table_metadata_from_updates(
            vec![
                TableUpdate::AddSchema { schema: schema() },
                TableUpdate::SetLocation {
                    location: "file:///x".into(),
                },
                TableUpdate::SetProperties {
                    updates: HashMap::from([("k".into(), "v".into())]),
                },
            ],
            || panic!("default location must not be needed"),
        )
        .unwrap();
        assert_eq!(md.location(), "file:///x");
        assert_eq!(md.properties().get("k").map(String::as_str), Some("v"));
    }

    #[test]
    fn create_without_schema_is_a_bad_request() {
        let err = table_metadata_from_updates(vec![], || Ok("file:///t".into())).unwrap_err();
        assert!(matches!(err, CatalogError::BadRequest(_)));
    }

    #[test]
    fn failed_requirements_use_java_wording() {
        let md = table();
        let err = check_table_requirements(
            &[TableRequirement::LastAssignedFieldIdMatch {
                last_assigned_field_id: 1,
            }],
            Some(&md),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Requirement failed: last assigned field id changed: expected id 1 != 2"
        );
        let err = check_table_requirements(&[TableRequirement::NotExist], Some(&md)).unwrap_err();
        assert_eq!(err.to_string(), "Requirement failed: table already exists");
        assert!(check_table_requirements(&[TableRequirement::NotExist], None).is_ok());
        let missing = check_table_requirements(
            &[TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: 0,
            }],
            None,
        );
        assert!(matches!(
            missing,
            Err(CatalogError::NotFound {
                missing: Missing::Table,
                ..
            })
        ));
    }

    #[test]
    fn updates_apply_and_log_the_previous_file() {
        let md = table();
        let next = apply_table_updates(
            md,
            "file:///tmp/t/metadata/00000-a.metadata.json",
            vec![TableUpdate::SetProperties {
                updates: HashMap::from([("a".into(), "1".into())]),
            }],
        )
        .unwrap();
        assert_eq!(next.properties().get("a").map(String::as_str), Some("1"));
        assert_eq!(next.metadata_log().len(), 1);
    }

    /// `parsed.rs` keeps the model a commit wrote instead of parsing its document again;
    /// that is exact only if parsing the written document gives back the same model.
    #[test]
    fn parsing_a_written_document_gives_back_its_model() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            // In the past: iceberg-rust refuses a metadata update older than the last
            // metadata-log entry (by more than a minute), and a snapshot timestamp sets
            // that entry's time.
            - 1_000;
        let snapshot = |id: i64, parent: Option<i64>, sequence: i64, v3: bool| {
            let mut s = serde_json::json!({
                "snapshot-id": id, "timestamp-ms": now + id, "sequence-number": sequence,
                "manifest-list": format!("file:///tmp/t/metadata/snap-{id}.avro"),
                "summary": {"operation": "append", "added-records": "3"}, "schema-id": 0
            });
            if let Some(parent) = parent {
                s["parent-snapshot-id"] = parent.into();
            }
            if v3 {
                s["first-row-id"] = (id * 10).into();
                s["added-rows"] = 10.into();
            }
            serde_json::json!({"action": "add-snapshot", "snapshot": s})
        };
        // V1's document has no refs (iceberg-rust reads `main` back from
        // `current-snapshot-id`, without retention), so `parsed.rs` keeps no V1 model;
        // its documents are still written (and, with the self-check on, checked against the
        // `Value` path by `metadata_json`).
        for version in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
            let v3 = version == FormatVersion::V3;
            let sequence = |n: i64| if version == FormatVersion::V1 { 0 } else { n };
            let steps = vec![
                serde_json::json!({"action": "set-properties", "updates": {"a": "1", "b": "2"}}),
                snapshot(1, None, sequence(1), v3),
                serde_json::json!({"action": "set-snapshot-ref", "ref-name": "main",
                    "type": "branch", "snapshot-id": 1}),
                snapshot(2, Some(1), sequence(2), v3),
                serde_json::json!({"action": "set-snapshot-ref", "ref-name": "main",
                    "type": "branch", "snapshot-id": 2, "max-snapshot-age-ms": 86400000,
                    "min-snapshots-to-keep": 2}),
                serde_json::json!({"action": "set-snapshot-ref", "ref-name": "v1",
                    "type": "tag", "snapshot-id": 1, "max-ref-age-ms": 1000}),
                serde_json::json!({"action": "add-schema", "schema": {"type": "struct",
                    "schema-id": 1, "fields": [
                        {"id": 1, "name": "id", "required": true, "type": "long"},
                        {"id": 2, "name": "data", "required": false, "type": "string"},
                        {"id": 3, "name": "ts", "required": false, "type": "timestamptz"}]}}),
                serde_json::json!({"action": "set-current-schema", "schema-id": 1}),
                serde_json::json!({"action": "add-spec", "spec": {"fields": [
                    {"source-id": 1, "field-id": 1000, "name": "id_bucket",
                     "transform": "bucket[4]"},
                    {"source-id": 3, "field-id": 1001, "name": "ts_day", "transform": "day"}]}}),
                serde_json::json!({"action": "set-default-spec", "spec-id": 1}),
                serde_json::json!({"action": "add-sort-order", "sort-order": {"order-id": 1,
                    "fields": [{"source-id": 1, "transform": "identity", "direction": "desc",
                                "null-order": "nulls-last"}]}}),
                serde_json::json!({"action": "set-default-sort-order", "sort-order-id": 1}),
                serde_json::json!({"action": "set-statistics", "statistics": {
                    "snapshot-id": 2, "statistics-path": "file:///tmp/t/stats-2.puffin",
                    "file-size-in-bytes": 100, "file-footer-size-in-bytes": 20,
                    "blob-metadata": [{"type": "apache-datasketches-theta-v1",
                        "snapshot-id": 2, "sequence-number": sequence(2), "fields": [1],
                        "properties": {"ndv": "3"}}]}}),
                serde_json::json!({"action": "set-partition-statistics",
                    "partition-statistics": {"snapshot-id": 2,
                    "statistics-path": "file:///tmp/t/part-2.parquet",
                    "file-size-in-bytes": 50}}),
                serde_json::json!({"action": "remove-snapshot-ref", "ref-name": "v1"}),
                serde_json::json!({"action": "remove-snapshots", "snapshot-ids": [1]}),
                serde_json::json!({"action": "remove-properties", "removals": ["a"]}),
                serde_json::json!({"action": "set-location", "location": "file:///tmp/t2"}),
            ];
            let mut md = table_of(version);
            let check = |md: &TableMetadata, properties: Option<&MapText>, step: &str| {
                let doc = metadata_json(md).unwrap();
                assert_eq!(doc, metadata_json_via_value(md).unwrap());
                // The properties' text carried from commit to commit gives the same text.
                assert!(properties.is_some());
                assert_eq!(doc, metadata_json_with(md, properties).unwrap(), "{step}");
                let parsed: TableMetadata = serde_json::from_str(&doc).unwrap();
                if version != FormatVersion::V1 {
                    assert_eq!(&parsed, md, "{version:?} after {step}");
                }
            };
            let mut properties = properties_text(None, md.properties(), []);
            check(&md, properties.as_ref(), "the create");
            for (i, step) in steps.into_iter().enumerate() {
                let update: TableUpdate = serde_json::from_value(step.clone()).unwrap();
                let context = format!("{version:?}: {step}");
                (md, properties) = next_commit(md, i, &[update], properties, &context);
                check(&md, properties.as_ref(), &step.to_string());
            }
        }
    }

    #[test]
    fn parsing_a_written_view_document_gives_back_its_model() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let version = |id: i64, schema: i64, sql: &str| {
            serde_json::json!({"version-id": id, "schema-id": schema, "timestamp-ms": now + id,
                "summary": {"engine-name": "spark"}, "default-namespace": ["ns"],
                "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}]})
        };
        let mut md: ViewMetadata = serde_json::from_value(serde_json::json!({
            "view-uuid": "fa6506c3-7681-40c8-86dc-e36561f83385", "format-version": 1,
            "location": "file:///tmp/v", "current-version-id": 1,
            "properties": {"comment": "c"},
            "versions": [version(1, 0, "select 1")],
            "version-log": [{"version-id": 1, "timestamp-ms": now + 1}],
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "x", "required": false, "type": "int"}]}]
        }))
        .unwrap();
        let steps = vec![
            serde_json::json!({"action": "set-properties", "updates": {"a": "1", "b": "2"}}),
            serde_json::json!({"action": "add-schema", "schema": {"type": "struct",
                "schema-id": 1, "fields": [
                    {"id": 1, "name": "x", "required": false, "type": "int"},
                    {"id": 2, "name": "y", "required": false, "type": "string"}]}}),
            serde_json::json!({"action": "add-view-version",
                "view-version": version(2, 1, "select 1, 'a'")}),
            serde_json::json!({"action": "set-current-view-version", "view-version-id": 2}),
            serde_json::json!({"action": "add-view-version",
                "view-version": version(3, 0, "select 2")}),
            serde_json::json!({"action": "set-current-view-version", "view-version-id": 3}),
            serde_json::json!({"action": "remove-properties", "removals": ["a"]}),
            serde_json::json!({"action": "set-location", "location": "file:///tmp/v2"}),
        ];
        let mut properties = properties_text(None, md.properties(), []);
        for step in steps {
            let updates: Vec<ViewUpdate> = vec![serde_json::from_value(step.clone()).unwrap()];
            md = apply_view_updates(md, updates.clone()).unwrap_or_else(|e| panic!("{step}: {e}"));
            // Written from borrowed parts, and exactly as iceberg-rust writes it.
            let doc = view_metadata_json(&md, None).unwrap();
            assert_eq!(doc, metadata_json_via_value(&md).unwrap());
            // And so with the properties' text carried from commit to commit.
            properties = properties_text(
                properties.as_ref(),
                md.properties(),
                view_property_keys(&updates),
            );
            assert!(properties.is_some());
            assert_eq!(doc, view_metadata_json(&md, properties.as_ref()).unwrap());
            let parsed: ViewMetadata = serde_json::from_str(&doc).unwrap();
            assert_eq!(parsed, md, "after {step}");
        }
    }

    /// Commit `i` of a test's chain: `updates` applied to `md` (`context` names it if that
    /// fails), and the properties' text carried from the commit before.
    fn next_commit(
        md: TableMetadata,
        i: usize,
        updates: &[TableUpdate],
        properties: Option<MapText>,
        context: &str,
    ) -> (TableMetadata, Option<MapText>) {
        let location = format!("file:///tmp/t/metadata/{i}.json");
        let md = apply_table_updates(md, &location, updates.to_vec())
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        let properties = properties_text(
            properties.as_ref(),
            md.properties(),
            table_property_keys(updates),
        );
        (md, properties)
    }

    /// Makes a commit's document the current one: the spliced one, checked against the
    /// one written whole, or else the whole one. Gives whether it was spliced.
    fn take_document(
        doc: &mut String,
        fields: &mut Fields,
        spliced: Option<(String, Fields)>,
        whole: (String, Option<Fields>),
        step: &serde_json::Value,
    ) -> bool {
        let was_spliced = spliced.is_some();
        if let Some((text, new_fields)) = &spliced {
            assert_eq!(*text, whole.0, "after {step}");
            assert_eq!(Some(new_fields), whole.1.as_ref(), "after {step}");
        }
        (*doc, *fields) = spliced.unwrap_or_else(|| (whole.0, whole.1.unwrap()));
        was_spliced
    }

    /// Applies `steps` (one commit each) from `md`, writing each document by splicing the
    /// one before where it can; checks each against the document written whole. Gives
    /// which steps were spliced.
    fn splice_table_chain(mut md: TableMetadata, steps: &[serde_json::Value]) -> Vec<bool> {
        let mut properties = properties_text(None, md.properties(), []);
        let (mut doc, fields) = metadata_document(&md, properties.as_ref()).unwrap();
        let mut fields = fields.expect("a table document is an object");
        let mut spliced = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            let updates: Vec<TableUpdate> = serde_json::from_value(step.clone()).unwrap();
            (md, properties) = next_commit(md, i, &updates, properties, &step.to_string());
            let whole = metadata_document(&md, properties.as_ref()).unwrap();
            let base = Some((doc.as_str(), &fields));
            let result = table_document_spliced(base, &md, &updates, properties.as_ref());
            spliced.push(take_document(
                &mut doc,
                &mut fields,
                result.unwrap(),
                whole,
                step,
            ));
            let parsed: TableMetadata = serde_json::from_str(&doc).unwrap();
            assert_eq!(parsed, md, "after {step}");
        }
        spliced
    }

    #[test]
    fn property_only_table_commits_splice_their_base_document() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 1_000;
        for version in [FormatVersion::V2, FormatVersion::V3] {
            let v3 = version == FormatVersion::V3;
            let md = table_of(version);
            let mut snapshot = serde_json::json!({"snapshot-id": 1, "timestamp-ms": now,
                "sequence-number": 1, "manifest-list": "file:///tmp/t/metadata/snap-1.avro",
                "summary": {"operation": "append"}, "schema-id": 0});
            if v3 {
                snapshot["first-row-id"] = 0.into();
                snapshot["added-rows"] = 10.into();
            }
            let set = |updates: serde_json::Value| serde_json::json!([{"action": "set-properties", "updates": updates}]);
            let steps = [
                // From no properties (the field is left out) to some.
                set(serde_json::json!({"b": "1", "a": "2"})),
                serde_json::json!([{"action": "add-snapshot", "snapshot": snapshot},
                    {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                     "snapshot-id": 1}]),
                set(serde_json::json!({"c": "3"})),
                // A shorter metadata log: the oldest entries go.
                set(serde_json::json!({"write.metadata.previous-versions-max": "2"})),
                serde_json::json!([{"action": "remove-properties", "removals": ["a", "zz"]}]),
                // Both kinds in one commit, and a key that needs an escape.
                serde_json::json!([{"action": "set-properties", "updates": {"q\"uote": "x"}},
                    {"action": "remove-properties", "removals": ["b"]}]),
                serde_json::json!([{"action": "remove-properties", "removals": ["q\"uote"]}]),
                // Back to no properties: the field is left out again.
                serde_json::json!([{"action": "remove-properties",
                    "removals": ["c", "write.metadata.previous-versions-max"]}]),
                set(serde_json::json!({"d": "4"})),
                // A commit that does more than properties is written whole.
                serde_json::json!([{"action": "set-properties", "updates": {"e": "5"}},
                    {"action": "set-location", "location": "file:///tmp/t2"}]),
                set(serde_json::json!({"f": "6"})),
            ];
            let spliced = splice_table_chain(md, &steps);
            // A map with a key that needs an escape has no properties' text, so the commit
            // that sets it is written whole; once it is gone, the map's text is written anew.
            assert_eq!(
                spliced,
                [true, false, true, true, true, false, true, true, true, false, true],
                "{version:?}"
            );
        }
    }

    #[test]
    fn metadata_log_text_is_what_serde_writes() {
        let log: Vec<MetadataLog> = serde_json::from_value(serde_json::json!([
            {"metadata-file": "file:///t/metadata/1.json", "timestamp-ms": 1},
            {"metadata-file": "s3://b/t \"q\"\\/2.json", "timestamp-ms": -2},
        ]))
        .unwrap();
        for log in [&log[..0], &log[..1], &log[..]] {
            let value = serde_json::to_value(log).unwrap();
            assert_eq!(metadata_log_text(log), crate::json_text::to_string(&value));
        }
    }

    #[test]
    fn property_only_view_commits_splice_their_base_document() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let version = |id: i64, sql: &str| {
            serde_json::json!({"version-id": id, "schema-id": 0, "timestamp-ms": now + id,
                "summary": {"engine-name": "spark"}, "default-namespace": ["ns"],
                "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}]})
        };
        let mut md: ViewMetadata = serde_json::from_value(serde_json::json!({
            "view-uuid": "fa6506c3-7681-40c8-86dc-e36561f83385", "format-version": 1,
            "location": "file:///tmp/v", "current-version-id": 1,
            "versions": [version(1, "select 1")],
            "version-log": [{"version-id": 1, "timestamp-ms": now + 1}],
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "x", "required": false, "type": "int"}]}]
        }))
        .unwrap();
        let steps = [
            serde_json::json!([{"action": "set-properties", "updates": {"b": "1", "a": "2"}}]),
            serde_json::json!([{"action": "add-view-version", "view-version": version(2, "select 2")},
                {"action": "set-current-view-version", "view-version-id": -1}]),
            serde_json::json!([{"action": "set-properties", "updates": {"c": "3"}}]),
            // Fewer versions kept: the oldest goes, so the document is written whole.
            serde_json::json!([{"action": "set-properties",
                "updates": {"version.history.num-entries": "1"}}]),
            // Every property removed: a view still writes its (empty) properties.
            serde_json::json!([{"action": "remove-properties",
                "removals": ["a", "b", "c", "version.history.num-entries"]}]),
            serde_json::json!([{"action": "set-properties", "updates": {"d": "4"}}]),
        ];
        let mut properties = properties_text(None, md.properties(), []);
        let (mut doc, fields) = view_metadata_document(&md, properties.as_ref()).unwrap();
        let mut fields = fields.unwrap();
        let mut spliced = Vec::new();
        for step in steps {
            let updates: Vec<ViewUpdate> = serde_json::from_value(step.clone()).unwrap();
            let shape = (
                md.versions().len(),
                md.history().len(),
                md.current_version_id(),
            );
            md = apply_view_updates(md, updates.clone()).unwrap_or_else(|e| panic!("{step}: {e}"));
            properties = properties_text(
                properties.as_ref(),
                md.properties(),
                view_property_keys(&updates),
            );
            let whole = view_metadata_document(&md, properties.as_ref()).unwrap();
            let base = Some((doc.as_str(), &fields));
            let result = view_document_spliced(base, shape, &md, &updates, properties.as_ref());
            spliced.push(take_document(
                &mut doc,
                &mut fields,
                result.unwrap(),
                whole,
                &step,
            ));
            let parsed: ViewMetadata = serde_json::from_str(&doc).unwrap();
            assert_eq!(parsed, md, "after {step}");
        }
        assert_eq!(spliced, [true, false, true, false, true, true]);
    }

    #[test]
    fn property_keys_are_those_set_or_removed() {
        let table: Vec<TableUpdate> = serde_json::from_value(serde_json::json!([
            {"action": "set-properties", "updates": {"b": "1", "a": "2"}},
            {"action": "set-location", "location": "file:///tmp/t"},
            {"action": "remove-properties", "removals": ["c", "a"]},
        ]))
        .unwrap();
        let mut keys: Vec<&str> = table_property_keys(&table).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["a", "a", "b", "c"]);
        let view: Vec<ViewUpdate> = serde_json::from_value(serde_json::json!([
            {"action": "remove-properties", "removals": ["x"]},
            {"action": "set-location", "location": "file:///tmp/v"},
            {"action": "set-properties", "updates": {"y": "1"}},
        ]))
        .unwrap();
        assert_eq!(view_property_keys(&view).collect::<Vec<_>>(), ["x", "y"]);
    }

    #[test]
    fn metadata_file_versions_increase() {
        let first = next_metadata_file("file:///t/metadata/", None, 0);
        assert!(first.starts_with("file:///t/metadata/00000-"), "{first}");
        let second = next_metadata_file("file:///t/metadata", Some(&first), 0);
        assert!(second.starts_with("file:///t/metadata/00001-"), "{second}");
        let odd = next_metadata_file(
            "file:///t/metadata",
            Some("file:///t/metadata/v3.metadata.json"),
            3,
        );
        assert!(odd.starts_with("file:///t/metadata/00004-"), "{odd}");
    }
}
