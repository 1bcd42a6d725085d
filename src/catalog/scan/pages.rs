//! How a plan is paged: its manifests (the snapshot's manifest list, or an incremental
//! range's own) split into consecutive groups of at most [`PAGE_TASKS`] tasks, one
//! answer (or plan task) per group, counted from the manifest list before the scan when
//! the plan has no filter.

use iceberg::spec::{ManifestContentType, ManifestFile};

use super::PAGE_TASKS;

/// Whether a plan task's manifests (`scope`, `[from, to)`; `None`: all) hold position
/// `index`.
pub(super) fn in_scope(scope: Option<(usize, usize)>, index: usize) -> bool {
    scope.is_none_or(|(from, to)| (from..to).contains(&index))
}

/// The manifests a plan reads, in the order plan tasks name them by.
pub(super) enum ManifestOrder {
    /// A point-in-time plan's: the snapshot's manifest list.
    List(Vec<ManifestFile>),
    /// An incremental plan's: this many manifests of the range's own.
    Range(usize),
}

impl ManifestOrder {
    pub(super) fn len(&self) -> usize {
        match self {
            ManifestOrder::List(list) => list.len(),
            ManifestOrder::Range(count) => *count,
        }
    }
}

/// Splits `count` manifests into consecutive groups `[from, to)` of at most
/// [`PAGE_TASKS`] tasks each, given each task's manifest position; a manifest with more
/// tasks than that is a group of its own. Together the groups cover every position.
pub(super) fn split_by_manifests(positions: &[usize], count: usize) -> Vec<(usize, usize)> {
    let mut per_manifest = vec![0usize; count];
    for &position in positions {
        per_manifest[position] += 1;
    }
    split_counts(&per_manifest)
}

/// Splits manifests into consecutive groups `[from, to)` of at most [`PAGE_TASKS`]
/// tasks each, given each manifest's number of tasks (see [`split_by_manifests`]).
pub(super) fn split_counts(per_manifest: &[usize]) -> Vec<(usize, usize)> {
    let count = per_manifest.len();
    let mut groups = Vec::new();
    let (mut start, mut tasks) = (0, 0);
    for (position, &n) in per_manifest.iter().enumerate() {
        if tasks > 0 && tasks + n > PAGE_TASKS {
            groups.push((start, position));
            (start, tasks) = (position, 0);
        }
        tasks += n;
    }
    groups.push((start, count));
    groups
}

/// The live data files (added or existing) of each manifest in the list, as the list
/// counts them (delete manifests: none); `None` if a data manifest's counts are missing
/// (optional in format version 1).
pub(super) fn live_data_files(list: &[ManifestFile]) -> Option<Vec<usize>> {
    list.iter()
        .map(|manifest| match manifest.content {
            ManifestContentType::Deletes => Some(0),
            ManifestContentType::Data => {
                Some(manifest.added_files_count? as usize + manifest.existing_files_count? as usize)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_split_into_consecutive_groups_of_manifests_that_fit_a_page() {
        let tasks = |counts: &[usize]| -> Vec<usize> {
            (counts.iter().enumerate())
                .flat_map(|(position, n)| std::iter::repeat_n(position, *n))
                .collect()
        };
        let half = PAGE_TASKS / 2;
        // Two halves fill a page; the third starts the next group.
        assert_eq!(
            split_by_manifests(&tasks(&[half, half, half]), 3),
            [(0, 2), (2, 3)]
        );
        // A manifest larger than a page is a group of its own, wherever it stands.
        assert_eq!(
            split_by_manifests(&tasks(&[1, PAGE_TASKS + 1, 1]), 3),
            [(0, 1), (1, 2), (2, 3)]
        );
        assert_eq!(
            split_by_manifests(&tasks(&[PAGE_TASKS + 1, 1]), 2),
            [(0, 1), (1, 2)]
        );
        // Manifests that planned nothing (pruned, or delete manifests) join a group.
        assert_eq!(
            split_by_manifests(&tasks(&[0, PAGE_TASKS, 0, 0, 3, 0]), 6),
            [(0, 4), (4, 6)]
        );
        // The groups cover every position, in order, without gaps.
        let counts = [700, 9_000, 400, 10_000, 1, 0, 12_345, 5, 5];
        let groups = split_by_manifests(&tasks(&counts), counts.len());
        assert_eq!(groups.first().unwrap().0, 0);
        assert_eq!(groups.last().unwrap().1, counts.len());
        for pair in groups.windows(2) {
            assert_eq!(pair[0].1, pair[1].0);
        }
        for (from, to) in &groups {
            let n: usize = counts[*from..*to].iter().sum();
            assert!(n <= PAGE_TASKS || to - from == 1, "{from}..{to}: {n}");
        }
    }

    fn manifest(
        content: ManifestContentType,
        added: Option<u32>,
        existing: Option<u32>,
    ) -> ManifestFile {
        ManifestFile {
            manifest_path: "file:///m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: added,
            existing_files_count: existing,
            deleted_files_count: Some(7),
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id: None,
        }
    }

    #[test]
    fn an_unfiltered_plan_counts_its_tasks_from_the_manifest_list() {
        use ManifestContentType::{Data, Deletes};
        // Added and existing entries are live; deleted ones and delete manifests plan
        // no task of their own.
        let list = [
            manifest(Data, Some(3), Some(4)),
            manifest(Deletes, Some(9), Some(9)),
            manifest(Data, Some(0), Some(0)),
            manifest(Data, Some(5), Some(0)),
        ];
        assert_eq!(live_data_files(&list), Some(vec![7, 0, 0, 5]));
        // Counts are optional in format version 1: then the plan is split after its scan.
        let missing = [
            manifest(Data, Some(3), None),
            manifest(Data, Some(1), Some(1)),
        ];
        assert_eq!(live_data_files(&missing), None);
        let missing = [manifest(Data, None, Some(3))];
        assert_eq!(live_data_files(&missing), None);
        // A delete manifest's missing counts do not matter.
        assert_eq!(
            live_data_files(&[manifest(Deletes, None, None)]),
            Some(vec![0])
        );
        // The split from counts is the split the tasks would give.
        let counts = [6_000, 0, 6_000, 3_000];
        let positions: Vec<usize> = (counts.iter().enumerate())
            .flat_map(|(position, n)| std::iter::repeat_n(position, *n))
            .collect();
        assert_eq!(split_counts(&counts), split_by_manifests(&positions, 4));
        assert_eq!(split_counts(&counts), [(0, 2), (2, 4)]);
    }
}
