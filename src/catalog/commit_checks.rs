//! What table metadata must be for Floe to keep it, beyond what iceberg-rust's builder
//! checks: iceberg-rust keeps some metadata that Iceberg's readers (Java's, its own)
//! refuse, or that makes a later walk or write fail. Pure; `commit.rs` runs these on each
//! commit (on what it adds), and create and register run [`check_built`] on the whole
//! document.

use iceberg::spec::{
    FormatVersion, Snapshot, SnapshotRef, SnapshotRetention, TableMetadata, Transform,
};
use iceberg::TableUpdate;

use super::error::{CatalogError, CatalogResult};

/// The format version a table has once `updates` apply (its own, or the one an update
/// upgrades it to; a downgrade fails in the builder).
pub(super) fn format_after(version: FormatVersion, updates: &[TableUpdate]) -> FormatVersion {
    updates
        .iter()
        .fold(version, |version, update| match update {
            TableUpdate::UpgradeFormatVersion { format_version } => version.max(*format_version),
            _ => version,
        })
}

/// The clock skew between writers that iceberg-rust's and Java's readers of a metadata
/// file tolerate in its logs (their `ONE_MINUTE`).
pub(super) const CLOCK_SKEW_MS: i64 = 60_000;

/// Checks what `updates` add, where iceberg-rust keeps what Iceberg's readers refuse:
/// - each schema as [`super::schemas::check`] wants it, and as a table of the format
///   `version` it will have may hold it ([`super::schemas::check_format`]);
/// - each snapshot timed at most [`CLOCK_SKEW_MS`] past this server's clock (`now_ms`).
///   An added snapshot's time becomes the table's `last-updated-ms`, which the next
///   commit logs in its metadata log behind its own, the present: a reader refuses a log
///   entry more than the skew past its file's `last-updated-ms`, so one writer with a
///   fast clock would leave every later commit failing until that time came;
/// - each snapshot's row range within a `long` (the spec's type for row ids: the next
///   row id past it would not be one);
/// - each ref named, its retention values positive (Java's `SnapshotRef` refuses others,
///   so its readers could not load the table).
pub(super) fn check_updates(
    updates: &[TableUpdate],
    now_ms: i64,
    version: FormatVersion,
) -> CatalogResult<()> {
    (updates.iter()).try_for_each(|update| match update {
        TableUpdate::AddSchema { schema } => {
            super::schemas::check(schema)?;
            super::schemas::check_format(schema, version)
        }
        TableUpdate::AddSnapshot { snapshot } => check_snapshot(snapshot, now_ms),
        TableUpdate::SetSnapshotRef {
            ref_name,
            reference,
        } => check_ref(ref_name, &reference.retention),
        _ => Ok(()),
    })
}

/// [`check_updates`] for an added snapshot.
fn check_snapshot(snapshot: &Snapshot, now_ms: i64) -> CatalogResult<()> {
    if snapshot.timestamp_ms() > now_ms.saturating_add(CLOCK_SKEW_MS) {
        return Err(CatalogError::bad_request(format!(
            "Snapshot {} has timestamp-ms {}, more than a minute past this catalog's clock ({now_ms}): is the writer's clock right?",
            snapshot.snapshot_id(),
            snapshot.timestamp_ms()
        )));
    }
    if let Some((first, added)) = snapshot.row_range() {
        let past = first
            .checked_add(added)
            .filter(|&next| next <= i64::MAX as u64);
        if past.is_none() {
            return Err(CatalogError::bad_request(format!(
                "Snapshot {} has first-row-id {first} and added-rows {added}: row ids must stay within a long ({})",
                snapshot.snapshot_id(),
                i64::MAX
            )));
        }
    }
    Ok(())
}

/// [`check_updates`] for a ref being set.
fn check_ref(name: &str, retention: &SnapshotRetention) -> CatalogResult<()> {
    if name.is_empty() {
        return Err(CatalogError::bad_request(
            "A snapshot ref needs a name: ref-name is empty",
        ));
    }
    let (min_snapshots, max_snapshot_age, max_ref_age) = match *retention {
        SnapshotRetention::Branch {
            min_snapshots_to_keep,
            max_snapshot_age_ms,
            max_ref_age_ms,
        } => (min_snapshots_to_keep, max_snapshot_age_ms, max_ref_age_ms),
        SnapshotRetention::Tag { max_ref_age_ms } => (None, None, max_ref_age_ms),
    };
    let values = [
        ("min-snapshots-to-keep", min_snapshots.map(i64::from)),
        ("max-snapshot-age-ms", max_snapshot_age),
        ("max-ref-age-ms", max_ref_age),
    ];
    match values
        .into_iter()
        .find(|(_, value)| value.is_some_and(|v| v <= 0))
    {
        Some((field, Some(value))) => Err(CatalogError::bad_request(format!(
            "Ref {name} has {field} {value}: it must be greater than 0"
        ))),
        _ => Ok(()),
    }
}

/// What table metadata must be for Floe to keep it, beyond what iceberg-rust's builder
/// checks: run on every document created or registered. A commit checks the same of
/// what it changes (`apply_table_updates`).
pub fn check_built(metadata: &TableMetadata) -> CatalogResult<()> {
    (metadata.schemas_iter())
        .try_for_each(|schema| super::schemas::check_format(schema, metadata.format_version()))?;
    check_transforms(metadata)?;
    check_metadata_log(metadata)
}

/// Refuses a bucket or truncate transform of width 0, which iceberg-rust parses and Java
/// refuses: projecting a scan's filter through it divides by zero (a panic).
pub(super) fn check_transforms(metadata: &TableMetadata) -> CatalogResult<()> {
    let zero =
        |transform: &Transform| matches!(transform, Transform::Bucket(0) | Transform::Truncate(0));
    let specs = (metadata.partition_specs_iter()).flat_map(|spec| {
        spec.fields()
            .iter()
            .map(|field| (&field.name, &field.transform))
    });
    let orders = (metadata.sort_orders_iter()).flat_map(|order| {
        order
            .fields
            .iter()
            .map(|field| (&field.transform, field.source_id))
    });
    for (name, transform) in specs {
        if zero(transform) {
            return Err(CatalogError::bad_request(format!(
                "Partition field {name} has transform {transform}: a bucket or truncate width must be at least 1"
            )));
        }
    }
    for (transform, source) in orders {
        if zero(transform) {
            return Err(CatalogError::bad_request(format!(
                "A sort field of source {source} has transform {transform}: a bucket or truncate width must be at least 1"
            )));
        }
    }
    Ok(())
}

/// Refuses metadata whose last metadata-log entry lies more than [`CLOCK_SKEW_MS`] past
/// its `last-updated-ms`: iceberg-rust and Java refuse to read it (iceberg-rust's builder
/// adds that entry after its own checks). Only a table already so written reaches it:
/// its commits fail, as they would in Java, until the clock passes the entry.
pub(super) fn check_metadata_log(metadata: &TableMetadata) -> CatalogResult<()> {
    match metadata.metadata_log().last() {
        Some(last) if metadata.last_updated_ms() < last.timestamp_ms.saturating_sub(CLOCK_SKEW_MS) => {
            Err(CatalogError::bad_request(format!(
                "Invalid update timestamp {}: before last metadata log entry at {} (the table's last update lies more than a minute ahead of this catalog's clock)",
                metadata.last_updated_ms(),
                last.timestamp_ms
            )))
        }
        _ => Ok(()),
    }
}

/// The ids of the snapshots `updates` add.
pub(super) fn added_snapshots(updates: &[TableUpdate]) -> Vec<i64> {
    (updates.iter())
        .filter_map(|update| match update {
            TableUpdate::AddSnapshot { snapshot } => Some(snapshot.snapshot_id()),
            _ => None,
        })
        .collect()
}

/// Refuses a commit whose added snapshots' history loops (a snapshot its own parent, or
/// the parent of an older snapshot whose parent had expired). iceberg-rust and Java store
/// such a history; every walk over it (an incremental scan's range) would never end.
pub(super) fn check_history(metadata: &TableMetadata, added: &[i64]) -> CatalogResult<()> {
    for snapshot in added.iter().filter_map(|&id| metadata.snapshot_by_id(id)) {
        for step in ancestry(metadata, snapshot.clone()) {
            step.map_err(|_| {
                CatalogError::bad_request(format!(
                    "Snapshot {} would be its own ancestor: its parent-snapshot-id loops back to it",
                    snapshot.snapshot_id()
                ))
            })?;
        }
    }
    Ok(())
}

/// `from` and its ancestors, newest first, to the first whose parent is none or unknown
/// (expired). A history is no longer than the table's snapshots: one that goes on past
/// that loops back on itself, and the walk ends with `Err` (the snapshot reached again)
/// instead of going on for ever.
pub fn ancestry(
    metadata: &TableMetadata,
    from: SnapshotRef,
) -> impl Iterator<Item = Result<SnapshotRef, i64>> + '_ {
    let most = metadata.snapshots().len();
    let mut at = Some(from);
    let mut walked = 0;
    std::iter::from_fn(move || {
        let snapshot = at.take()?;
        if walked == most {
            return Some(Err(snapshot.snapshot_id()));
        }
        walked += 1;
        at = (snapshot.parent_snapshot_id()).and_then(|id| metadata.snapshot_by_id(id).cloned());
        Some(Ok(snapshot))
    })
}
