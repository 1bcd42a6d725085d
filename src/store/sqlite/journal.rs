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
//! An entry does not copy the text the pointer's own row holds: it names the row (its
//! text is `NULL`), and a trigger copies the row's text into the entry when the row
//! moves on (a later commit, a rename, a drop) before a round covered the file. So a
//! commit puts its document into the WAL once, not twice; only a table committed again
//! within one interval pays for the second copy.
//!
//! After a crash, [`super::SqliteStore::restore_file_journal`] rewrites the file of
//! every entry left before the server serves, so a pointer never names a missing or
//! partial file once the server is up. A purge's end deletes the entries of the files
//! it removed, so a crash never brings them back.

use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::{params, Connection, Transaction};

use super::documents::Document;
use super::internal;
use crate::model::CatalogId;
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

/// The triggers on `objects` that keep the journal's entries whole (see below): a
/// macro, so that a migration which rebuilds `objects` (and so drops them) can create
/// them again with the same text.
macro_rules! object_triggers {
    () => {
        r#"
CREATE TRIGGER file_journal_row_updated
    AFTER UPDATE OF metadata_location, namespace, name, catalog_id ON objects
BEGIN
    UPDATE file_journal SET metadata = old.metadata
        WHERE location = old.metadata_location AND metadata IS NULL;
END;
CREATE TRIGGER file_journal_row_deleted AFTER DELETE ON objects
BEGIN
    UPDATE file_journal SET metadata = old.metadata
        WHERE location = old.metadata_location AND metadata IS NULL;
END;
"#
    };
}
pub(super) use object_triggers;

/// Entries that name the object row holding their text (`metadata` `NULL`), and the
/// triggers that copy a row's text into its entry before the row stops holding it. A
/// trigger fires on every path that moves a row on (commit, rename, drop), present or
/// future. The rebuild keeps any entry a crash left.
pub(super) const BY_REFERENCE_MIGRATION: &str = concat!(
    r#"
CREATE TABLE file_journal_new (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    location   TEXT NOT NULL,
    metadata   TEXT,
    catalog_id INTEGER,
    namespace  TEXT,
    name       TEXT,
    CHECK (metadata IS NOT NULL OR name IS NOT NULL)
);
INSERT INTO file_journal_new (seq, location, metadata)
    SELECT seq, location, metadata FROM file_journal;
DROP TABLE file_journal;
ALTER TABLE file_journal_new RENAME TO file_journal;
CREATE INDEX file_journal_by_location ON file_journal (location);
"#,
    object_triggers!()
);

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

/// Keeps the new files of `writes` (committed to catalog `catalog`) until they are
/// synced: by reference to the rows that now hold their text.
pub(super) fn record(
    tx: &Transaction,
    catalog: CatalogId,
    writes: &[ObjectWrite],
) -> StoreResult<()> {
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO file_journal (location, catalog_id, namespace, name) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(internal)?;
    for w in writes {
        insert
            .execute(params![
                w.metadata_location,
                catalog.0,
                w.ident.namespace.key(),
                w.ident.name
            ])
            .map_err(internal)?;
    }
    Ok(())
}

/// Every entry, oldest first, with its text (copied or still in its row), and the last
/// sequence number read.
pub(super) fn entries(conn: &Connection) -> anyhow::Result<(i64, Vec<(String, String)>)> {
    let rows: Vec<(i64, String, Option<Document>)> = conn
        .prepare(
            "SELECT j.seq, j.location, coalesce(j.metadata, o.metadata)
             FROM file_journal j LEFT JOIN objects o
               ON o.catalog_id = j.catalog_id AND o.namespace = j.namespace
              AND o.name = j.name AND o.metadata_location = j.location
             ORDER BY j.seq",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let last = rows.last().map_or(0, |r| r.0);
    let entries = rows
        .into_iter()
        .map(|(seq, location, text)| match text {
            Some(text) => Ok((location, text.0)),
            // The triggers make this impossible; refuse to serve rather than name a file
            // that may be torn.
            None => Err(anyhow::anyhow!(
                "file journal entry {seq} ({location}) has lost its text: its row moved on without the trigger copying it"
            )),
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((last, entries))
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
