//! Incremental scans (`start-snapshot-id`, `end-snapshot-id`): the data files that the
//! `append` snapshots after the start (exclusive) up to the end (inclusive) added, as
//! Iceberg's `IncrementalAppendScan` reads them.
//!
//! - The range is the end snapshot's ancestry back to the snapshot whose parent is the
//!   start (which may itself have expired since). A start that is no ancestor of the end
//!   is a 400; a start equal to the end is an empty range; no start means every ancestor.
//! - Only `append` snapshots count: an `overwrite`, `delete` or `replace` (compaction)
//!   adds no rows a reader of appends has not seen, and their files are left out.
//! - A file counts if an `append` in the range added it (`ADDED`, with that snapshot's
//!   id), read from the manifests that snapshot wrote, so later merges of manifests (which
//!   turn its entry into `EXISTING`) do not hide it, nor make older files reappear.
//! - Delete files are not planned: an append scan reads what was appended, as in Java.
//!
//! Pruning by the filter stays iceberg-rust's (its evaluators are private to it): the
//! plan substitutes, for the end snapshot's manifest list, a list of only the range's
//! own manifests (`PlanFiles::substitute`, in memory, never written), scans that, and
//! keeps the tasks whose files the range added.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, ManifestContentType, ManifestEntryRef, ManifestFile, ManifestList,
    ManifestListWriter, ManifestStatus, Operation, SnapshotRef, TableMetadata,
};

use super::super::error::{CatalogError, CatalogResult};

/// The snapshots of `(start, end]` on `end`'s ancestry, newest first (appends or not).
pub fn range(
    metadata: &TableMetadata,
    start: Option<i64>,
    end: &SnapshotRef,
) -> CatalogResult<Vec<SnapshotRef>> {
    let mut snapshots = Vec::new();
    if start == Some(end.snapshot_id()) {
        return Ok(snapshots);
    }
    for snapshot in crate::catalog::commit_checks::ancestry(metadata, end.clone()) {
        // A table whose metadata was written elsewhere (registered, or notified) may have
        // a history that loops.
        let snapshot = snapshot.map_err(|again| {
            CatalogError::bad_request(format!(
                "The history of snapshot {} loops: snapshot {again} is its own ancestor",
                end.snapshot_id()
            ))
        })?;
        let parent = snapshot.parent_snapshot_id();
        snapshots.push(snapshot);
        if parent.is_some() && parent == start {
            return Ok(snapshots);
        }
    }
    match start {
        None => Ok(snapshots),
        Some(start) => Err(CatalogError::bad_request(format!(
            "Starting snapshot (exclusive) {start} is not an ancestor of end snapshot {}",
            end.snapshot_id()
        ))),
    }
}

/// What an incremental plan scans: the range's own data manifests (all of them, in
/// order: a plan task names its share by position), and the files its appends added in
/// the manifests in scope, by path.
pub struct Appended {
    pub manifests: Vec<ManifestFile>,
    pub files: HashMap<String, Found>,
}

/// A planned file's whole entry (shared with the manifest read, not copied), its spec
/// id, and the position of the manifest that holds it in the plan's manifest order.
pub type Found = (ManifestEntryRef, i32, usize);

/// Reads the manifest lists of the range's `append` snapshots, and the manifests among
/// theirs whose position `in_scope` accepts.
pub async fn appended(
    io: &FileIO,
    metadata: &TableMetadata,
    snapshots: &[SnapshotRef],
    in_scope: impl Fn(usize) -> bool,
) -> iceberg::Result<Appended> {
    let mut manifests = Vec::new();
    let mut files = HashMap::new();
    let mut seen: HashSet<String> = HashSet::new();
    for snapshot in snapshots
        .iter()
        .filter(|s| s.summary().operation == Operation::Append)
    {
        let id = snapshot.snapshot_id();
        let bytes = io.new_input(snapshot.manifest_list())?.read().await?;
        let list = ManifestList::parse_with_version(&bytes, metadata.format_version())?;
        for manifest in list.entries() {
            // The manifests this snapshot wrote; others hold nothing it added.
            if manifest.content != ManifestContentType::Data
                || manifest.added_snapshot_id != id
                || !seen.insert(manifest.manifest_path.clone())
            {
                continue;
            }
            let index = manifests.len();
            if in_scope(index) {
                for entry in manifest.load_manifest(io).await?.entries() {
                    if entry.status() == ManifestStatus::Added && entry.snapshot_id() == Some(id) {
                        files.insert(
                            entry.file_path().to_owned(),
                            (entry.clone(), manifest.partition_spec_id, index),
                        );
                    }
                }
            }
            manifests.push(manifest.clone());
        }
    }
    Ok(Appended { manifests, files })
}

/// A manifest list of these manifests, as the end snapshot's would be written: what a
/// plan scans in place of the snapshot's own list (kept in memory, never written).
pub async fn manifest_list(
    metadata: &TableMetadata,
    end: &SnapshotRef,
    manifests: Vec<ManifestFile>,
) -> iceberg::Result<Bytes> {
    let memory = FileIO::new_with_memory();
    let scratch = format!("memory:///incremental-{}", uuid::Uuid::new_v4());
    let out = memory.new_output(&scratch)?.writer().await?;
    let (id, parent, sequence) = (
        end.snapshot_id(),
        end.parent_snapshot_id(),
        end.sequence_number(),
    );
    let mut writer = match metadata.format_version() {
        FormatVersion::V1 => ManifestListWriter::v1(out, id, parent),
        FormatVersion::V2 => ManifestListWriter::v2(out, id, parent, sequence),
        // The manifests keep the first row ids their snapshots assigned.
        FormatVersion::V3 => ManifestListWriter::v3(out, id, parent, sequence, Some(0)),
    };
    writer.add_manifests(manifests.into_iter())?;
    writer.close().await?;
    memory.new_input(&scratch)?.read().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A table whose snapshots are `(id, parent)`.
    fn table(snapshots: &[(i64, Option<i64>)]) -> TableMetadata {
        let snapshots: Vec<_> = snapshots
            .iter()
            .map(|(id, parent)| {
                let mut s = json!({
                    "snapshot-id": id, "sequence-number": id, "timestamp-ms": 1_700_000_000_000i64 + id,
                    "manifest-list": format!("file:///t/metadata/snap-{id}.avro"),
                    "summary": { "operation": "append" }, "schema-id": 0 });
                if let Some(parent) = parent {
                    s["parent-snapshot-id"] = (*parent).into();
                }
                s
            })
            .collect();
        serde_json::from_value(json!({
            "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "file:///t", "last-sequence-number": 9, "last-updated-ms": 1_700_000_000_000i64,
            "last-column-id": 1, "current-schema-id": 0,
            "schemas": [{ "type": "struct", "schema-id": 0, "fields": [
                { "id": 1, "name": "id", "required": true, "type": "long" }] }],
            "default-spec-id": 0, "partition-specs": [{ "spec-id": 0, "fields": [] }],
            "last-partition-id": 999, "default-sort-order-id": 0,
            "sort-orders": [{ "order-id": 0, "fields": [] }],
            "properties": {}, "current-snapshot-id": 4, "snapshots": snapshots,
            "snapshot-log": [], "metadata-log": [], "refs": {}
        }))
        .unwrap()
    }

    fn ids(metadata: &TableMetadata, start: Option<i64>, end: i64) -> CatalogResult<Vec<i64>> {
        let end = metadata.snapshot_by_id(end).unwrap();
        Ok(range(metadata, start, end)?
            .iter()
            .map(|s| s.snapshot_id())
            .collect())
    }

    /// A history that loops (a snapshot its own parent, or two each other's) is refused,
    /// not walked for ever.
    #[test]
    fn a_history_that_loops_is_refused() {
        for snapshots in [
            &[(4, Some(4))][..],
            &[(3, Some(4)), (4, Some(3))],
            &[(1, None), (3, Some(4)), (4, Some(3))],
        ] {
            let t = table(snapshots);
            for start in [None, Some(1)] {
                let error = ids(&t, start, 4).unwrap_err().to_string();
                assert!(error.contains("loops"), "{snapshots:?}: {error}");
            }
        }
    }

    #[test]
    fn the_range_is_the_ends_ancestry_back_to_the_start() {
        // 1 ← 2 ← 3 ← 4, and 5 branched off 2.
        let t = table(&[
            (1, None),
            (2, Some(1)),
            (3, Some(2)),
            (4, Some(3)),
            (5, Some(2)),
        ]);
        assert_eq!(ids(&t, Some(1), 4).unwrap(), [4, 3, 2]);
        assert_eq!(ids(&t, Some(3), 4).unwrap(), [4]);
        assert_eq!(ids(&t, None, 4).unwrap(), [4, 3, 2, 1]);
        assert_eq!(ids(&t, Some(4), 4).unwrap(), Vec::<i64>::new());
        assert_eq!(ids(&t, Some(1), 5).unwrap(), [5, 2]);
        for (start, end) in [(5, 4), (3, 5), (4, 1), (42, 4)] {
            let error = ids(&t, Some(start), end).unwrap_err().to_string();
            assert!(error.contains("not an ancestor"), "{start}..{end}: {error}");
        }
        // An expired start still bounds the range through its child's parent id.
        let expired = table(&[(2, Some(1)), (3, Some(2)), (4, Some(3))]);
        assert_eq!(ids(&expired, Some(1), 4).unwrap(), [4, 3, 2]);
        assert_eq!(ids(&expired, None, 4).unwrap(), [4, 3, 2]);
    }
}
