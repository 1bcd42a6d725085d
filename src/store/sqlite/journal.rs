//! The file journal (`--fsync-journal`): the text of each new local metadata file, kept
//! in the same transaction as the pointer that names it, until a sync round has made the
//! file itself durable.
//!
//! With it, a commit does not sync its metadata file: the COMMIT that makes the pointer
//! durable makes the file's contents durable too (here), and the storage layer's syncer
//! (`storage/journal.rs`) syncs the files' file systems every interval, off every
//! commit's path. The two sides meet in [`JournalMarks`]:
//! - the commit thread publishes the last entry each group committed (`committed`);
//! - the syncer reads it, syncs, and publishes it as covered (`synced`): every file of
//!   an entry up to there was written before its entry committed, so before the round;
//! - the commit thread deletes the covered entries with its next group.
//!
//! After a crash, [`super::SqliteStore::restore_file_journal`] rewrites the file of
//! every entry left before the server serves, so a pointer never names a missing or
//! partial file once the server is up. A purge's end deletes the entries of the files
//! it removed, so a crash never brings them back.

use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::{params, Transaction};

use super::internal;
use crate::store::{location_upper_bound, ObjectWrite, StoreResult};

/// The journal's table. AUTOINCREMENT: a sequence number is never reused, so a mark
/// stays meaningful after the rows below it are deleted.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE file_journal (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    location TEXT NOT NULL,
    metadata TEXT NOT NULL
);
"#;

/// Where the journal's committed entries end and which of them sync rounds covered.
#[derive(Debug, Default)]
pub struct JournalMarks {
    committed: AtomicI64,
    synced: AtomicI64,
}

impl JournalMarks {
    /// The last entry committed so far (0: none).
    pub fn committed(&self) -> i64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Every entry up to `seq` has its file on disk (a sync round that started after it
    /// committed has ended).
    pub fn mark_synced(&self, seq: i64) {
        self.synced.fetch_max(seq, Ordering::AcqRel);
    }

    /// The last entry a sync round covered (0: none).
    pub fn synced(&self) -> i64 {
        self.synced.load(Ordering::Acquire)
    }

    /// Entries up to `seq` are committed.
    pub fn mark_committed(&self, seq: i64) {
        self.committed.fetch_max(seq, Ordering::AcqRel);
    }
}

/// Keeps the new files of `writes` until they are synced.
pub(super) fn record(tx: &Transaction, writes: &[ObjectWrite]) -> StoreResult<()> {
    let mut insert = tx
        .prepare_cached("INSERT INTO file_journal (location, metadata) VALUES (?1, ?2)")
        .map_err(internal)?;
    for w in writes {
        insert
            .execute(params![w.metadata_location, w.metadata])
            .map_err(internal)?;
    }
    Ok(())
}

/// The last sequence number handed out (0: none yet).
pub(super) fn last(tx: &Transaction) -> StoreResult<i64> {
    tx.prepare_cached(
        "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'file_journal'",
    )
    .and_then(|mut s| s.query_row([], |r| r.get(0)))
    .map_err(internal)
}

/// Forgets the entries whose files are synced.
pub(super) fn trim(tx: &Transaction, through: i64) -> StoreResult<()> {
    tx.prepare_cached("DELETE FROM file_journal WHERE seq <= ?1")
        .and_then(|mut s| s.execute([through]))
        .map_err(internal)?;
    Ok(())
}

/// Forgets the entries of files under the directory `location`: a purge deleted them.
pub(super) fn forget_under(tx: &Transaction, location: &str) -> StoreResult<()> {
    let directory = match location.ends_with('/') {
        true => location.to_string(),
        false => format!("{location}/"),
    };
    tx.prepare_cached("DELETE FROM file_journal WHERE location >= ?1 AND location < ?2")
        .and_then(|mut s| s.execute(params![directory, location_upper_bound(&directory)]))
        .map_err(internal)?;
    Ok(())
}
