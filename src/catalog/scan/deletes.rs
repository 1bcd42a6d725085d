//! Which of the delete files iceberg-rust matched to a data file apply to it: the spec's
//! rules iceberg-rust does not apply itself (`referenced_data_file`, deletion vectors
//! replacing position deletes), read from the delete files' manifest entries.

use std::collections::HashMap;

use iceberg::spec::{DataContentType, DataFileFormat};

use super::incremental;

/// Of the delete files iceberg-rust matched to a data file, those that apply to it.
/// iceberg-rust matches position deletes by partition and sequence number only, so the
/// spec's other two rules are applied here, from the delete files' entries in `found`:
/// - a position delete file (or deletion vector) whose `referenced_data_file` names
///   another data file is that file's, not this one's (without it, a v3 table's deletion
///   vectors would reach every data file of their partition);
/// - when a deletion vector applies to the data file, its position delete files do not
///   (the spec: a writer adding a vector merges into it the position deletes it
///   replaces), whatever their sequence numbers.
///
/// Equality deletes are kept as matched. A delete file not in `found` is kept too (its
/// encoding then fails: it is not in the snapshot's manifests).
pub(super) fn applicable<'a>(
    data_file: &str,
    deletes: &'a [String],
    found: &HashMap<String, incremental::Found>,
) -> Vec<&'a str> {
    let file = |path: &str| found.get(path).map(|(entry, _, _)| entry.data_file());
    let positional = |path: &str| {
        file(path).is_some_and(|f| f.content_type() == DataContentType::PositionDeletes)
    };
    let vector = |path: &str| {
        positional(path) && file(path).is_some_and(|f| f.file_format() == DataFileFormat::Puffin)
    };
    let elsewhere = |path: &str| {
        positional(path)
            && file(path)
                .and_then(|f| f.referenced_data_file())
                .is_some_and(|referenced| referenced != data_file)
    };
    let kept: Vec<&str> = (deletes.iter())
        .map(String::as_str)
        .filter(|path| !elsewhere(path))
        .collect();
    if !kept.iter().any(|path| vector(path)) {
        return kept;
    }
    (kept.into_iter())
        .filter(|path| vector(path) || !positional(path))
        .collect()
}
