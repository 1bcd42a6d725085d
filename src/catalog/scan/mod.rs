//! Server-side scan planning (`POST …/plan`, `POST …/tasks`): which data files, and which
//! delete files with them, a scan of a table must read.
//!
//! How a plan is made:
//! 1. The caller needs to read the table's data (`TABLE_READ_DATA`), as for vended
//!    credentials: a plan names every file of the table.
//! 2. iceberg-rust's `TableScan` reads the snapshot's manifest list and manifests and
//!    prunes them with the filter (partition summaries, partition values, column
//!    metrics), matching delete files to data files by partition and sequence number;
//!    a position delete file that names another data file (`referenced_data_file`, as
//!    deletion vectors do), or one that a deletion vector replaces, is dropped from a
//!    file's deletes here (`deletes.rs`).
//! 3. Its tasks name files by path only; the REST answer carries whole `DataFile`s, so
//!    the manifests the scan read (not those it pruned) are walked once more, from memory
//!    (`files.rs` keeps what it read), to encode each file (`encode.rs`).
//!
//! A plan with no filter, of a snapshot with no delete files, has nothing to prune or
//! match: its manifests are read once, every live entry a task, without the scan.
//!
//! Plans are synchronous and the server keeps nothing: the answer is `completed` with
//! every task, or, past [`PAGE_TASKS`] tasks, the tasks of a first group of manifests and
//! one *plan task* per other group. A plan task is the request itself, pinned to its
//! snapshot and the table's UUID, with the positions of its manifests and the offset of
//! its page: any node can serve it, and a client that edits one gets no more than it
//! could ask for directly (access is checked again; its manifests are taken from the
//! pinned snapshot's). Groups are consecutive runs of the manifest list (`pages.rs`),
//! and tasks within one are ordered by data file path, so the answers of one plan
//! neither overlap nor miss files. A plan without a filter is split before its scan, by
//! the manifest list's counts of live data files (each one task), so that its answer
//! reads only the first group's manifests; a filtered plan can only know its tasks by
//! planning them all.
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
mod deletes;
mod encode;
mod files;
pub mod filter;
mod incremental;
mod pages;
mod residual;
mod summaries;
mod transformed;

use std::collections::{HashMap, HashSet};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures_util::TryStreamExt;
use iceberg::spec::{ManifestContentType, ManifestList, Schema, StructType, TableMetadata};
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
use pages::{in_scope, live_data_files, split_by_manifests, split_counts, ManifestOrder};
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
    #[serde(
        default,
        deserialize_with = "filter::deserialize",
        skip_serializing_if = "Option::is_none"
    )]
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

/// A plan task: the request pinned to a table and snapshot, the manifests it plans, and
/// where its page starts among their tasks. Sent base64url-encoded; opaque to clients.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
struct PlanTask {
    table_uuid: String,
    offset: usize,
    /// The manifests this task plans, `[from, to)` by position in the plan's manifest
    /// order (the snapshot's manifest list, or an incremental range's own manifests);
    /// delete manifests are always read. None: all of them (also what a task handed
    /// out before manifests were named means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    manifests: Option<(usize, usize)>,
    /// The schema the request's names were resolved in when the plan was made (unless
    /// it asked for the snapshot's): every page reads them the same way, also after a
    /// rename since. None in tasks handed out before it was named: the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    names_schema_id: Option<i32>,
    request: ScanRequest,
}

/// What a plan task fixes of its plan's pages: its manifests (`PlanTask::manifests`),
/// where its page starts among their tasks, and the schema of the request's names.
#[derive(Debug, Default, Clone, Copy)]
struct Pinned {
    scope: Option<(usize, usize)>,
    offset: usize,
    names_schema_id: Option<i32>,
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
            .plan_page(catalog, ident, &metadata, request, Pinned::default())
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
            .any(|id| metadata.snapshot_by_id(id).is_none())
            || (decoded.names_schema_id).is_some_and(|id| metadata.schema_by_id(id).is_none());
        if !pinned || decoded.table_uuid != metadata.uuid().to_string() || expired {
            return Err(no_such_task(task));
        }
        let scope = decoded.manifests;
        if scope.is_some_and(|(from, to)| from >= to) {
            return Err(no_such_task(task));
        }
        self.plan_page(
            catalog,
            ident,
            &metadata,
            decoded.request,
            Pinned {
                scope,
                offset: decoded.offset,
                names_schema_id: decoded.names_schema_id,
            },
        )
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

    /// One page of a plan: `file-scan-tasks`, `delete-files`, and `plan-tasks` when more
    /// follow. A plan of more than [`PAGE_TASKS`] tasks is split by manifests, in their
    /// order, into groups of at most that many tasks (a larger manifest is a group of its
    /// own, paged by offset): the first group is the answer, and each other group is a
    /// plan task that reads only its own manifests (and the delete manifests), so a plan
    /// is read about twice in all (once if it has no filter: split from the manifest
    /// list's counts), not once per page, and its tasks can be fetched in parallel.
    /// `pinned`: what a plan task fixes (nothing for the plan itself).
    async fn plan_page(
        &self,
        catalog: &str,
        ident: &Ident,
        metadata: &TableMetadata,
        mut request: ScanRequest,
        pinned: Pinned,
    ) -> CatalogResult<Value> {
        avro_names::install();
        let (scope, offset) = (pinned.scope, pinned.offset);
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
        // The request's names (select, stats fields, filter) are the table's current
        // schema's unless it asks for the snapshot's (`use-snapshot-schema`, false by
        // default as in the spec): a column added or renamed since the snapshot is named
        // as the client now sees it. Field ids carry them to the snapshot's columns.
        let named = match (request.use_snapshot_schema, pinned.names_schema_id) {
            (true, _) => schema.clone(),
            (false, None) => metadata.current_schema().clone(),
            // A plan task's, checked by `fetch_scan_tasks`.
            (false, Some(id)) => metadata.schema_by_id(id).cloned().ok_or_else(|| {
                CatalogError::InvalidArgument(format!("Cannot find schema with ID {id}"))
            })?,
        };
        let names_schema_id = (!request.use_snapshot_schema).then(|| named.schema_id());
        let names = |fields: &[String]| -> CatalogResult<Vec<i32>> {
            fields
                .iter()
                .map(|name| field_id(&named, name, request.case_sensitive))
                .collect()
        };
        names(request.select.as_deref().unwrap_or_default())?;
        let stats: HashSet<i32> = names(request.stats_fields.as_deref().unwrap_or_default())?
            .into_iter()
            .collect();
        // Comparisons of a column some schema of the table types otherwise prune nothing:
        // older manifests hold bounds of the older type (`filter::scan_predicate`).
        let promoted = filter::promoted_columns(&named, metadata.schemas_iter());
        let predicate = request
            .filter
            .as_ref()
            .map(|f| filter::scan_predicate(f, &named, &schema, &promoted, request.case_sensitive))
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
        // The filter, unless it keeps every row (`true`).
        let filter = (request.filter.as_ref())
            .filter(|f| f.get("type").and_then(Value::as_str) != Some("true"));
        // An incremental plan scans a manifest list of the range's own manifests in
        // scope, put in place of the end snapshot's.
        let (appended, manifests, counted) = if incremental {
            let range = incremental::range(metadata, request.start_snapshot_id, &snapshot)?;
            let appended =
                incremental::appended(&io, metadata, &range, |index| in_scope(scope, index))
                    .await
                    .map_err(failed)?;
            if predicate.is_some() {
                summaries::check(ident, metadata, &schema, &appended.manifests)?;
            }
            let count = appended.manifests.len();
            let scoped = (appended.manifests.into_iter().enumerate())
                .filter(|(index, _)| in_scope(scope, *index))
                .map(|(_, manifest)| manifest)
                .collect();
            // Manifests it cannot write back (their counts or sequence numbers out of
            // range) are the table's files at fault: a 422, as an unreadable one is.
            let list = incremental::manifest_list(metadata, &snapshot, scoped)
                .await
                .map_err(failed)?;
            files.substitute(snapshot.manifest_list(), list);
            (Some(appended.files), ManifestOrder::Range(count), None)
        } else {
            let list = io
                .new_input(snapshot.manifest_list())
                .map_err(failed)?
                .read()
                .await
                .map_err(failed)?;
            let list = ManifestList::parse_with_version(&list, metadata.format_version())
                .map_err(failed)?
                .consume_entries()
                .into_iter()
                .collect::<Vec<_>>();
            if predicate.is_some() {
                summaries::check(ident, metadata, &schema, &list)?;
            }
            // A whole plan without a filter has one task per live data file, which the
            // manifest list counts: when they are too many for one answer, it is split
            // before the scan, which then reads only the first group's manifests (the
            // same split the tasks would give, without planning the others twice).
            let counted = (scope.is_none() && offset == 0 && filter.is_none())
                .then(|| live_data_files(&list))
                .flatten()
                .filter(|counts| counts.iter().sum::<usize>() > PAGE_TASKS)
                .map(|counts| split_counts(&counts));
            (None, ManifestOrder::List(list), counted)
        };
        // Split from the manifest list's counts: this answer is the first group's, as
        // its plan task would be, and the other groups are plan tasks.
        let (scope, other_groups) = match &counted {
            Some(groups) => (Some(groups[0]), &groups[1..]),
            None => (scope, &[][..]),
        };
        // A point-in-time plan's share scans the snapshot's manifests in scope and its
        // delete manifests, as a manifest list put in place of the snapshot's.
        if let (Some(_), ManifestOrder::List(list)) = (scope, &manifests) {
            let scoped = (list.iter().enumerate())
                .filter(|(index, m)| {
                    m.content == ManifestContentType::Deletes || in_scope(scope, *index)
                })
                .map(|(_, manifest)| manifest.clone())
                .collect();
            let scoped = incremental::manifest_list(metadata, &snapshot, scoped)
                .await
                .map_err(failed)?;
            files.substitute(snapshot.manifest_list(), scoped);
        }
        // The entries of the files planned, by path, with their spec and manifest position:
        // an incremental plan's come with its range; the others', from the second pass
        // below (or the direct reading).
        let mut found = appended.unwrap_or_default();
        // A plan without a filter of a snapshot without delete files has a task for each
        // live entry of its data manifests: they are read once, here, and not scanned
        // (which would parse each one a second time, for no pruning and no deletes).
        let direct = match &manifests {
            ManifestOrder::List(list) if filter.is_none() => {
                (list.iter()).all(|manifest| manifest.content == ManifestContentType::Data)
            }
            _ => false,
        };
        let mut tasks = match &manifests {
            ManifestOrder::List(list) if direct => {
                let mut tasks = Vec::new();
                for (index, manifest_file) in list.iter().enumerate() {
                    if !in_scope(scope, index) {
                        continue;
                    }
                    let manifest = manifest_file.load_manifest(&io).await.map_err(failed)?;
                    for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
                        let path = entry.file_path().to_owned();
                        tasks.push(Planned {
                            path: path.clone(),
                            deletes: Vec::new(),
                        });
                        let spec_id = manifest_file.partition_spec_id;
                        found.insert(path, (entry.clone(), spec_id, index));
                    }
                }
                tasks
            }
            _ => {
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
                // Each task iceberg-rust plans holds its own copy of the bound filter:
                // they are taken one at a time, so that only those in flight hold one,
                // not every task of the plan at once.
                let mut scanned = scan.plan_files().await.map_err(failed)?;
                let mut tasks = Vec::new();
                while let Some(task) = scanned.try_next().await.map_err(failed)? {
                    // An incremental range's manifests may hold older files too (as
                    // EXISTING, after a merge), and a file the range added again once
                    // merged.
                    if incremental && !found.contains_key(&task.data_file_path) {
                        continue;
                    }
                    tasks.push(Planned {
                        path: task.data_file_path,
                        deletes: task.deletes.into_iter().map(|d| d.file_path).collect(),
                    });
                }
                tasks
            }
        };
        tasks.sort_by(|a, b| a.path.cmp(&b.path));
        tasks.dedup_by(|a, b| a.path == b.path);
        // A whole plan too large for one answer is split by manifests (above); a plan
        // task's share, or a task handed out before that, pages by offset.
        let split = scope.is_none() && offset == 0 && tasks.len() > PAGE_TASKS;
        let page_end = tasks.len().min(offset.saturating_add(PAGE_TASKS));

        // The whole entries of the files wanted, from the manifests read above: the
        // page's, or every task's when the plan is split (to know their manifests).
        let wanted_tasks = if split {
            &tasks[..]
        } else {
            tasks.get(offset..page_end).unwrap_or_default()
        };
        let mut wanted: HashSet<&str> = HashSet::new();
        for task in wanted_tasks {
            wanted.insert(&task.path);
            wanted.extend(task.deletes.iter().map(String::as_str));
        }
        if let (false, ManifestOrder::List(entries)) = (direct, &manifests) {
            for (index, manifest_file) in entries.iter().enumerate() {
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
                            (entry.clone(), manifest_file.partition_spec_id, index),
                        );
                    }
                }
            }
        }
        let not_in_manifests = |path: &str| {
            CatalogError::Unprocessable(format!(
                "Cannot plan a scan of {ident}: {path} is not in the snapshot's manifests"
            ))
        };

        // This answer's tasks, and the plan tasks for the rest.
        let mut next: Vec<PlanTask> = Vec::new();
        let plan_task = |manifests: Option<(usize, usize)>, offset: usize| PlanTask {
            table_uuid: metadata.uuid().to_string(),
            offset,
            manifests,
            names_schema_id,
            request: request.clone(),
        };
        let page: Vec<&Planned> = if split {
            let mut positions = Vec::with_capacity(tasks.len());
            for task in &tasks {
                let (_, _, index) = found
                    .get(&task.path)
                    .ok_or_else(|| not_in_manifests(&task.path))?;
                positions.push(*index);
            }
            let groups = split_by_manifests(&positions, manifests.len());
            let first = groups[0];
            let mut page: Vec<&Planned> = (tasks.iter().zip(&positions))
                .filter(|(_, index)| (first.0..first.1).contains(*index))
                .map(|(task, _)| task)
                .collect();
            if page.len() > PAGE_TASKS {
                page.truncate(PAGE_TASKS);
                next.push(plan_task(Some(first), PAGE_TASKS));
            }
            next.extend(groups[1..].iter().map(|group| plan_task(Some(*group), 0)));
            page
        } else {
            if page_end < tasks.len() {
                next.push(plan_task(scope, page_end));
            }
            next.extend(other_groups.iter().map(|group| plan_task(Some(*group), 0)));
            wanted_tasks.iter().collect()
        };

        let mut partition_types: HashMap<i32, StructType> = HashMap::new();
        let mut encode = |path: &str| -> CatalogResult<Value> {
            let (entry, spec_id, _) = found.get(path).ok_or_else(|| not_in_manifests(path))?;
            let file = entry.data_file();
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
        let mut narrowers: HashMap<i32, residual::Narrower> = HashMap::new();
        let mut residual_of = |path: &str| -> Residual {
            let Some(filter) = filter else {
                return Residual::True;
            };
            let Some((entry, spec_id, _)) = found.get(path) else {
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
                    // The residual is the client's filter, in its names.
                    residual::Narrower::new(filter, &named, &fields, request.case_sensitive)
                })
                .residual(entry.data_file().partition())
        };
        let mut delete_index: HashMap<&str, usize> = HashMap::new();
        let mut delete_files = Vec::new();
        let mut scan_tasks = Vec::with_capacity(page.len());
        for task in page {
            let residual = match residual_of(&task.path) {
                Residual::False => continue,
                Residual::True => None,
                Residual::Filter(narrowed) => Some(narrowed),
            };
            let mut references = Vec::with_capacity(task.deletes.len());
            for delete in deletes::applicable(&task.path, &task.deletes, &found) {
                let index = match delete_index.get(delete) {
                    Some(index) => *index,
                    None => {
                        delete_files.push(encode(delete)?);
                        delete_index.insert(delete, delete_files.len() - 1);
                        delete_files.len() - 1
                    }
                };
                references.push(index);
            }
            let mut scan_task = json!({ "data-file": encode(&task.path)? });
            if !references.is_empty() {
                scan_task["delete-file-references"] = references.into();
            }
            if let Some(residual) = residual {
                scan_task["residual-filter"] = residual;
            }
            scan_tasks.push(scan_task);
        }
        let mut out = json!({ "file-scan-tasks": scan_tasks, "delete-files": delete_files });
        if !next.is_empty() {
            out["plan-tasks"] = next.iter().map(PlanTask::encode).collect();
        }
        Ok(out)
    }
}

/// A planned data file and the delete files that apply to it, by path (as iceberg-rust
/// matched them: see [`deletes::applicable`]).
struct Planned {
    path: String,
    deletes: Vec<String>,
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
