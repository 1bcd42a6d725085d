//! Server-side scan planning (`POST …/plan`, `POST …/tasks`): which data files, and which
//! delete files with them, a scan of a table must read.
//!
//! How a plan is made:
//! 1. The caller needs to read the table's data (`TABLE_READ_DATA`), as for vended
//!    credentials: a plan names every file of the table.
//! 2. iceberg-rust's `TableScan` reads the snapshot's manifest list and manifests and
//!    prunes them with the filter (partition summaries, partition values, column
//!    metrics), matching delete files to data files by partition and sequence number.
//! 3. Its tasks name files by path only; the REST answer carries whole `DataFile`s, so
//!    the manifests the scan read (not those it pruned) are walked once more, from memory
//!    (`files.rs` keeps what it read), to encode each file (`encode.rs`).
//!
//! Plans are synchronous and the server keeps nothing: the answer is `completed` with
//! every task, or, past [`PAGE_TASKS`] tasks, the first page and one *plan task*. A plan
//! task is the request itself, pinned to its snapshot and the table's UUID, with the
//! offset of the next page: any node can serve it, and a client that edits one gets no
//! more than it could ask for directly (access is checked again). Tasks are ordered by
//! data file path, so pages of one pinned plan neither overlap nor miss files.
//!
//! Incremental scans (`start-snapshot-id`, `end-snapshot-id`) plan the files the range's
//! appends added (`incremental.rs`), through the same scan.
//!
//! Each file's residual filter is narrowed by its partition values (`residual.rs`), and a
//! file whose residual is `false` is left out of the plan: that is where transform terms
//! in filters prune (iceberg-rust's scan takes column references only, so it keeps those
//! files and reads every manifest the rest of the filter does not rule out).
//!
//! Not there yet: `min-rows-requested` is ignored (the spec allows returning more).

mod avro_names;
mod encode;
mod files;
pub mod filter;
mod incremental;
mod residual;
mod transformed;

use std::collections::{HashMap, HashSet};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures_util::TryStreamExt;
use iceberg::spec::{ManifestList, Schema, StructType, TableMetadata};
use iceberg::table::Table;
use iceberg::Runtime;
use iceberg::{NamespaceIdent, TableIdent};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::{CatalogError, CatalogResult, Missing};
use super::locations::check_allowed;
use super::outcome::LoadedTable;
use super::tables::SnapshotsMode;
use super::{Catalog, RequestContext};
use crate::model::Ident;
use crate::storage::{canonical_location, StorageError};
use files::PlanFiles;
use residual::Residual;

/// Most file scan tasks in one answer; past it, the rest come through plan tasks.
pub const PAGE_TASKS: usize = 10_000;

/// A `PlanTableScanRequest`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ScanRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
    #[serde(default, skip_serializing)]
    pub min_rows_requested: Option<i64>,
    #[serde(default = "yes")]
    pub case_sensitive: bool,
    #[serde(default)]
    pub use_snapshot_schema: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats_fields: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

/// A plan task: the request pinned to a table and snapshot, and where the next page
/// starts. Sent base64url-encoded; opaque to clients.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
struct PlanTask {
    table_uuid: String,
    offset: usize,
    request: ScanRequest,
}

impl PlanTask {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).expect("a plan task serializes"))
    }

    fn decode(text: &str) -> Option<PlanTask> {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).ok()?).ok()
    }
}

fn no_such_task(task: &str) -> CatalogError {
    let shown: String = task.chars().take(64).collect();
    CatalogError::not_found(
        Missing::PlanTask,
        format!("No such plan task: {shown} (plan tasks come from this table's plans)"),
    )
}

fn no_such_plan(plan_id: &str, ours: bool) -> CatalogError {
    let why = if ours {
        "it was completed when submitted, with all its tasks in that answer or its plan tasks"
    } else {
        "this server did not hand it out"
    };
    CatalogError::not_found(Missing::PlanId, format!("No such plan: {plan_id}: {why}"))
}

/// Plan ids this server hands out: plans complete at once and nothing is kept.
const SYNC_PLAN_PREFIX: &str = "sync-";

impl Catalog {
    /// `POST …/plan`.
    pub async fn plan_table_scan(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        request: ScanRequest,
    ) -> CatalogResult<Value> {
        // The table first: a scan of a missing table is a 404 whatever it asks for.
        let table = self.data_table(ctx, catalog, ident).await?;
        if request.start_snapshot_id.is_some() || request.end_snapshot_id.is_some() {
            if request.snapshot_id.is_some() {
                return Err(CatalogError::bad_request(
                    "A scan is either point-in-time (snapshot-id) or incremental \
                     (start-snapshot-id, end-snapshot-id), not both",
                ));
            }
            if request.end_snapshot_id.is_none() {
                return Err(CatalogError::bad_request(
                    "An incremental scan needs end-snapshot-id with start-snapshot-id",
                ));
            }
        }
        let metadata = parse_metadata(&table)?;
        let mut page = self
            .plan_page(catalog, ident, &metadata, request, 0)
            .await?;
        page["status"] = "completed".into();
        page["plan-id"] = format!("{SYNC_PLAN_PREFIX}{}", uuid::Uuid::new_v4()).into();
        let config = self
            .table_config(ctx, catalog, ident, &table.metadata)
            .await?;
        if !config.credentials.is_empty() {
            page["storage-credentials"] =
                serde_json::to_value(&config.credentials).map_err(CatalogError::internal)?;
        }
        Ok(page)
    }

    /// `POST …/tasks`: the page a plan task names.
    pub async fn fetch_scan_tasks(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        task: &str,
    ) -> CatalogResult<Value> {
        let table = self.data_table(ctx, catalog, ident).await?;
        let decoded = PlanTask::decode(task).ok_or_else(|| no_such_task(task))?;
        let pinned =
            decoded.request.snapshot_id.is_some() || decoded.request.end_snapshot_id.is_some();
        let metadata = parse_metadata(&table)?;
        // A task whose snapshots have expired since is gone too, not a bad request.
        let request = &decoded.request;
        let expired = [request.snapshot_id, request.end_snapshot_id]
            .into_iter()
            .flatten()
            .any(|id| metadata.snapshot_by_id(id).is_none());
        if !pinned || decoded.table_uuid != metadata.uuid().to_string() || expired {
            return Err(no_such_task(task));
        }
        self.plan_page(catalog, ident, &metadata, decoded.request, decoded.offset)
            .await
    }

    /// `DELETE …/plan/{plan-id}`: plans are answered in full when submitted and nothing
    /// is kept, so cancelling one of this server's plan ids has nothing to release.
    pub async fn cancel_plan(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        plan_id: &str,
    ) -> CatalogResult<()> {
        self.plan_id_checked(ctx, catalog, ident, plan_id)
            .await?
            .then_some(())
            .ok_or_else(|| no_such_plan(plan_id, false))
    }

    /// `GET …/plan/{plan-id}`: never a result to fetch (see [`Catalog::cancel_plan`]);
    /// the error says why, after the caller's access and the table are checked.
    pub async fn fetch_plan(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        plan_id: &str,
    ) -> CatalogError {
        match self.plan_id_checked(ctx, catalog, ident, plan_id).await {
            Ok(ours) => no_such_plan(plan_id, ours),
            Err(e) => e,
        }
    }

    /// Checks access and the table; whether the plan id is one this server hands out.
    async fn plan_id_checked(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        plan_id: &str,
    ) -> CatalogResult<bool> {
        self.data_table(ctx, catalog, ident).await?;
        Ok(plan_id
            .strip_prefix(SYNC_PLAN_PREFIX)
            .is_some_and(|id| uuid::Uuid::parse_str(id).is_ok()))
    }

    /// The table, for a caller who may read its data: every scan endpoint's first step.
    /// `All`: the stored document as it is (`Refs` would parse it).
    async fn data_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<LoadedTable> {
        self.data_access(ctx, catalog, ident)?;
        self.load_table(ctx, catalog, ident, SnapshotsMode::All)
            .await
    }

    /// One page of a plan, from `offset`: `file-scan-tasks`, `delete-files`, and a
    /// `plan-tasks` entry when more follow.
    async fn plan_page(
        &self,
        catalog: &str,
        ident: &Ident,
        metadata: &TableMetadata,
        mut request: ScanRequest,
        offset: usize,
    ) -> CatalogResult<Value> {
        avro_names::install();
        // An incremental scan reads its end snapshot's schema and files.
        let snapshot = match request.snapshot_id.or(request.end_snapshot_id) {
            Some(id) => Some(metadata.snapshot_by_id(id).cloned().ok_or_else(|| {
                CatalogError::InvalidArgument(format!("Cannot find snapshot with ID {id}"))
            })?),
            None => metadata.current_snapshot().cloned(),
        };
        // The filter is bound to the snapshot's schema, as iceberg-rust's scan binds it;
        // a table without snapshots still has its request checked.
        let schema = match &snapshot {
            Some(snapshot) => snapshot
                .schema(metadata)
                .map_err(|e| CatalogError::Unprocessable(e.message().to_owned()))?,
            None => metadata.current_schema().clone(),
        };
        let names = |fields: &[String]| -> CatalogResult<Vec<i32>> {
            fields
                .iter()
                .map(|name| field_id(&schema, name, request.case_sensitive))
                .collect()
        };
        names(request.select.as_deref().unwrap_or_default())?;
        let stats: HashSet<i32> = names(request.stats_fields.as_deref().unwrap_or_default())?
            .into_iter()
            .collect();
        let predicate = request
            .filter
            .as_ref()
            .map(|f| filter::predicate(f, &schema, request.case_sensitive))
            .transpose()
            .map_err(CatalogError::bad_request)?;
        let Some(snapshot) = snapshot else {
            return Ok(json!({ "file-scan-tasks": [], "delete-files": [] }));
        };
        // Pages of one plan must all see the same snapshot (an incremental one is pinned
        // by its end).
        let incremental = request.end_snapshot_id.is_some();
        if !incremental {
            request.snapshot_id = Some(snapshot.snapshot_id());
        }

        let record = self.delegation_catalog(catalog).await?;
        let files = PlanFiles::new(
            self.files.for_catalog(&record),
            read_bases(&record, metadata)?,
        );
        let io = files.file_io();
        let failed = |e: iceberg::Error| planning_failed(ident, &files, e);
        // An incremental plan scans a manifest list of the range's own manifests, put in
        // place of the end snapshot's.
        let appended = if incremental {
            let range = incremental::range(metadata, request.start_snapshot_id, &snapshot)?;
            let appended = incremental::appended(&io, metadata, &range)
                .await
                .map_err(failed)?;
            let list = incremental::manifest_list(metadata, &snapshot, appended.manifests)
                .await
                .map_err(CatalogError::internal)?;
            files.substitute(snapshot.manifest_list(), list);
            Some(appended.files)
        } else {
            None
        };
        let iceberg_table = Table::builder()
            .metadata(metadata.clone())
            .identifier(table_ident(ident))
            .file_io(io.clone())
            .runtime(Runtime::try_current().map_err(CatalogError::internal)?)
            .readonly(true)
            .build()
            .map_err(CatalogError::internal)?;
        let mut scan = iceberg_table
            .scan()
            .snapshot_id(snapshot.snapshot_id())
            .select_empty();
        if let Some(predicate) = predicate {
            scan = scan.with_filter(predicate);
        }
        let scan = scan.build().map_err(|e| {
            CatalogError::bad_request(format!("Cannot plan this scan: {}", e.message()))
        })?;
        let mut tasks: Vec<_> = scan
            .plan_files()
            .await
            .map_err(failed)?
            .try_collect()
            .await
            .map_err(failed)?;
        if let Some(appended) = &appended {
            // The range's manifests may hold older files too (as EXISTING, after a merge),
            // and a file the range added again once merged.
            tasks.retain(|task| appended.contains_key(&task.data_file_path));
        }
        tasks.sort_by(|a, b| a.data_file_path.cmp(&b.data_file_path));
        tasks.dedup_by(|a, b| a.data_file_path == b.data_file_path);
        let end = tasks.len().min(offset.saturating_add(PAGE_TASKS));
        let page = tasks.get(offset..end).unwrap_or_default();

        // The whole entries of the page's files, from the manifests read above.
        let mut wanted: HashSet<&str> = HashSet::new();
        for task in page {
            wanted.insert(&task.data_file_path);
            wanted.extend(task.deletes.iter().map(|d| d.file_path.as_str()));
        }
        let (mut found, entries): (_, Vec<_>) = match appended {
            Some(appended) => (appended, Vec::new()),
            None => {
                let list = io
                    .new_input(snapshot.manifest_list())
                    .map_err(failed)?
                    .read()
                    .await
                    .map_err(failed)?;
                let list = ManifestList::parse_with_version(&list, metadata.format_version())
                    .map_err(failed)?;
                (HashMap::new(), list.consume_entries().into_iter().collect())
            }
        };
        for manifest_file in &entries {
            if found.len() == wanted.len() {
                break;
            }
            // A manifest the scan pruned whole holds none of the planned files.
            if !files.was_read(&manifest_file.manifest_path) {
                continue;
            }
            let manifest = manifest_file.load_manifest(&io).await.map_err(failed)?;
            for entry in manifest.entries() {
                if entry.is_alive() && wanted.contains(entry.file_path()) {
                    found.insert(
                        entry.file_path().to_owned(),
                        (entry.data_file().clone(), manifest_file.partition_spec_id),
                    );
                }
            }
        }

        let mut partition_types: HashMap<i32, StructType> = HashMap::new();
        let mut encode = |path: &str| -> CatalogResult<Value> {
            let (file, spec_id) = found.get(path).ok_or_else(|| {
                CatalogError::Unprocessable(format!(
                    "Cannot plan a scan of {ident}: {path} is not in the snapshot's manifests"
                ))
            })?;
            if !partition_types.contains_key(spec_id) {
                let ty = partition_type(metadata, &schema, *spec_id)?;
                partition_types.insert(*spec_id, ty);
            }
            Ok(encode::content_file(
                file,
                *spec_id,
                &partition_types[spec_id],
                &stats,
            ))
        };
        // Each task's residual is the filter less what its file's partition values
        // decide (`residual.rs`). Sent whenever rows still need checking: a client that
        // gets none takes the file as matching throughout (PyIceberg 0.12's `count()`
        // does). A file whose residual is `false` has no matching row and is left out:
        // the scan cannot prune by transform terms, and a page may then hold fewer tasks.
        let filter = request
            .filter
            .as_ref()
            .filter(|f| f.get("type").and_then(Value::as_str) != Some("true"));
        let mut narrowers: HashMap<i32, residual::Narrower> = HashMap::new();
        let mut residual_of = |path: &str| -> Residual {
            let Some(filter) = filter else {
                return Residual::True;
            };
            let Some((file, spec_id)) = found.get(path) else {
                return Residual::Filter(filter.clone());
            };
            narrowers
                .entry(*spec_id)
                .or_insert_with(|| {
                    let fields: Vec<_> = metadata
                        .partition_spec_by_id(*spec_id)
                        .map(|spec| {
                            spec.fields()
                                .iter()
                                .map(|f| (f.source_id, f.transform))
                                .collect()
                        })
                        .unwrap_or_default();
                    residual::Narrower::new(filter, &schema, &fields, request.case_sensitive)
                })
                .residual(file.partition())
        };
        let mut delete_index: HashMap<&str, usize> = HashMap::new();
        let mut delete_files = Vec::new();
        let mut scan_tasks = Vec::with_capacity(page.len());
        for task in page {
            let residual = match residual_of(&task.data_file_path) {
                Residual::False => continue,
                Residual::True => None,
                Residual::Filter(narrowed) => Some(narrowed),
            };
            let mut references = Vec::with_capacity(task.deletes.len());
            for delete in &task.deletes {
                let index = match delete_index.get(delete.file_path.as_str()) {
                    Some(index) => *index,
                    None => {
                        delete_files.push(encode(&delete.file_path)?);
                        delete_index.insert(&delete.file_path, delete_files.len() - 1);
                        delete_files.len() - 1
                    }
                };
                references.push(index);
            }
            let mut scan_task = json!({ "data-file": encode(&task.data_file_path)? });
            if !references.is_empty() {
                scan_task["delete-file-references"] = references.into();
            }
            if let Some(residual) = residual {
                scan_task["residual-filter"] = residual;
            }
            scan_tasks.push(scan_task);
        }
        let mut out = json!({ "file-scan-tasks": scan_tasks, "delete-files": delete_files });
        if end < tasks.len() {
            let next = PlanTask {
                table_uuid: metadata.uuid().to_string(),
                offset: end,
                request,
            };
            out["plan-tasks"] = json!([next.encode()]);
        }
        Ok(out)
    }
}

/// The field id a full field name (`a.b`) names in the schema; 400 if none.
fn field_id(schema: &Schema, name: &str, case_sensitive: bool) -> CatalogResult<i32> {
    let field = if case_sensitive {
        schema.field_by_name(name)
    } else {
        schema.field_by_name_case_insensitive(name)
    };
    field.map(|f| f.id).ok_or_else(|| {
        CatalogError::bad_request(format!("Cannot find field '{name}' in the table's schema"))
    })
}

/// The partition tuple's type of a spec, against the scanned schema or, for a spec
/// over since-dropped columns, any schema of the table that has them.
fn partition_type(
    metadata: &TableMetadata,
    schema: &Schema,
    spec_id: i32,
) -> CatalogResult<StructType> {
    let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
        CatalogError::Unprocessable(format!(
            "Partition spec {spec_id} is not in the table's metadata"
        ))
    })?;
    spec.partition_type(schema)
        .or_else(|e| {
            metadata
                .schemas_iter()
                .find_map(|s| spec.partition_type(s).ok())
                .ok_or(e)
        })
        .map_err(|e| CatalogError::Unprocessable(e.message().to_owned()))
}

/// Where a plan may read: the table's location, and its `write.metadata.path` when the
/// catalog allows that location.
fn read_bases(
    record: &crate::model::CatalogRecord,
    metadata: &TableMetadata,
) -> CatalogResult<Vec<String>> {
    let mut bases = vec![canonical_location(metadata.location())?];
    if let Some(path) = metadata.properties().get("write.metadata.path") {
        if let Ok(allowed) = check_allowed(record, path) {
            bases.push(allowed);
        }
    }
    Ok(bases)
}

fn table_ident(ident: &Ident) -> TableIdent {
    let namespace = NamespaceIdent::from_vec(ident.namespace.levels().to_vec())
        .unwrap_or_else(|_| NamespaceIdent::new(String::new()));
    TableIdent::new(namespace, ident.name.clone())
}

fn parse_metadata(table: &LoadedTable) -> CatalogResult<TableMetadata> {
    serde_json::from_str(&table.metadata).map_err(CatalogError::internal)
}

/// What the client hears when reading the manifests failed: the storage's own error if
/// one caused it, else iceberg-rust's reading of a file it could not use.
fn planning_failed(ident: &Ident, files: &PlanFiles, error: iceberg::Error) -> CatalogError {
    match files.take_error() {
        Some(StorageError::NotFound(location)) => CatalogError::not_found(
            Missing::File,
            format!("Cannot plan a scan of {ident}: file {location} does not exist"),
        ),
        Some(StorageError::InvalidLocation(message)) => CatalogError::Forbidden(message),
        Some(other) => other.into(),
        None => CatalogError::Unprocessable(format!(
            "Cannot plan a scan of {ident}: {}",
            error.message()
        )),
    }
}
