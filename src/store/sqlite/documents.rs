//! How the embedded store keeps metadata documents and namespace properties: large ones
//! compressed.
//!
//! A commit's document goes into the WAL, is fsynced, and is copied again by the next
//! checkpoint; the one it replaces is read back to free its pages. Uncompressed, a table
//! with a full metadata log (about 30 KB) took eight overflow pages, and pages were what
//! the commit thread spent its time on. zstd at its fast level -3 makes such a document
//! about a fifth of that (about 30 µs of work on 30 KB on a 2.5 GHz Xeon), on the caller's
//! thread before the batch is queued ([`pack_batch`]), never on the commit thread.
//!
//! The column's type says which form a value has: TEXT is the document itself (every
//! document written before this, and small ones), a BLOB a zstd frame of it. Readers take
//! either through [`Document`]; SQL that copies a value (the file journal's triggers)
//! copies the form with it.

use std::cell::RefCell;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};

use crate::store::{Mutation, WriteBatch};

/// Documents up to this many bytes are kept as text. SQLite keeps a record of up to about
/// 4 KB (its default 4 KiB page, less the page's header) on its leaf page, and the WAL takes
/// whole pages: below this, packing saves no page a write puts into the WAL, and costs a
/// compression on the request and, for namespace properties, a decompression on the
/// commit thread, which compares the stored value with the expected one. 3 KiB leaves
/// room for the row's other columns.
const PACK_FROM: usize = 3072;

/// One of zstd's fast (negative) levels. On a table with a full metadata log (31 KB) in
/// the 50/50 mix, on a 2.5 GHz Xeon: level 1 packs to 3.8 KB at 540 MB/s (57 µs, a tenth
/// of the server's CPU in that mix), -3 to 6.7 KB at 990 MB/s, -5 to 7.9 KB barely
/// faster. -3 costs one more overflow page per table row (two, not one) and served 2.4%
/// more requests with 4.6% less CPU each (`bench/ab-together.sh`, 4 runs; BENCHMARKS.md).
/// Frames of any level read alike, so rows packed at level 1 stay readable.
const LEVEL: i32 = -3;

/// A document as bound for the `metadata` column: the text, or its zstd frame.
#[derive(Debug)]
pub(super) enum Stored<'a> {
    Text(&'a str),
    Packed(&'a [u8]),
}

impl rusqlite::ToSql for Stored<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Stored::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Stored::Packed(frame) => ToSqlOutput::Borrowed(ValueRef::Blob(frame)),
        })
    }
}

/// The packed forms of the batch's new documents (or a namespace's new properties), in
/// the order its mutation lists them (`None`: kept as text).
pub(super) fn pack_batch(batch: &WriteBatch) -> Vec<Option<Vec<u8>>> {
    match &batch.mutation {
        Mutation::CommitObjects { writes, .. } => {
            writes.iter().map(|w| pack(&w.metadata)).collect()
        }
        Mutation::Undrop { write, .. } => vec![pack(&write.metadata)],
        Mutation::UpdateNamespace { properties, .. } => vec![pack(properties.json())],
        _ => Vec::new(),
    }
}

/// `text`'s zstd frame, if it is worth packing.
fn pack(text: &str) -> Option<Vec<u8>> {
    thread_local! {
        // A context per thread: making one costs more than packing a small document.
        static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { RefCell::new(None) };
    }
    if text.len() <= PACK_FROM {
        return None;
    }
    COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        // Any failure (none is expected) keeps the text: both forms are valid.
        let frame = cell.as_mut()?.compress(text.as_bytes()).ok()?;
        (frame.len() < text.len()).then_some(frame)
    })
}

/// The most bytes a frame is unpacked into at once (a buffer of its recorded size).
/// Floe's own frames record their size and are far smaller; a frame recording more, or
/// nothing, goes through the streaming decoder, which grows its buffer as it reads.
const UNPACK_AT_ONCE: u64 = 16 << 20;

/// `frame` unpacked. One decompression context per thread, and a buffer of the size the
/// frame records: making a context and growing a buffer cost as much as the unpacking
/// (the commit thread unpacks a namespace's properties on every update of them).
fn unpack(frame: &[u8]) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { RefCell::new(None) };
    }
    match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) if size <= UNPACK_AT_ONCE => DECOMPRESSOR.with(|cell| {
            let mut cell = cell.borrow_mut();
            let decompressor = match cell.as_mut() {
                Some(d) => d,
                None => cell.insert(zstd::bulk::Decompressor::new()?),
            };
            // zstd checks the result against the recorded size.
            decompressor.decompress(frame, size as usize)
        }),
        _ => zstd::stream::decode_all(frame),
    }
}

/// A document read from a `metadata` column, in whichever form it was kept.
#[derive(Debug)]
pub(super) struct Document(pub String);

impl FromSql for Document {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(_) => String::column_result(value).map(Document),
            ValueRef::Blob(frame) => {
                let bytes = unpack(frame).map_err(|e| FromSqlError::Other(Box::new(e)))?;
                String::from_utf8(bytes)
                    .map(Document)
                    .map_err(|e| FromSqlError::Other(Box::new(e)))
            }
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{pack, Document, PACK_FROM};
    use rusqlite::Connection;

    #[test]
    fn both_forms_read_back_as_the_document() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, metadata TEXT NOT NULL)")
            .unwrap();
        let small = "{\"a\":1}".to_string();
        let large = format!(
            "{{\"log\":[{}]}}",
            vec!["\"file:///wh/t/metadata/x.json\""; 500].join(",")
        );
        assert!(pack(&small).is_none(), "a small document is kept as text");
        let frame = pack(&large).expect("a large one is packed");
        assert!(
            frame.len() * 8 < large.len(),
            "{} of {}",
            frame.len(),
            large.len()
        );
        conn.execute("INSERT INTO t VALUES (1, ?1)", [&small])
            .unwrap();
        conn.execute("INSERT INTO t VALUES (2, ?1)", [&frame])
            .unwrap();
        let read = |k: i64| -> String {
            conn.query_row("SELECT metadata FROM t WHERE k = ?1", [k], |r| {
                r.get::<_, Document>(0)
            })
            .unwrap()
            .0
        };
        // A frame that does not record its size (a streaming encoder's) reads back too.
        let unsized_frame = zstd::stream::encode_all(large.as_bytes(), 1).unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&unsized_frame),
            Ok(None)
        ));
        conn.execute("INSERT INTO t VALUES (3, ?1)", [&unsized_frame])
            .unwrap();
        assert_eq!(read(1), small);
        assert_eq!(read(2), large);
        assert_eq!(read(3), large);
        // The declared TEXT affinity leaves a BLOB a BLOB.
        let kind: String = conn
            .query_row("SELECT typeof(metadata) FROM t WHERE k = 2", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kind, "blob");
        assert!(large.len() > PACK_FROM);
    }

    #[test]
    fn a_damaged_frame_is_an_error_not_a_document() {
        let conn = Connection::open_in_memory().unwrap();
        let read = conn.query_row("SELECT x'28b52ffd00'", [], |r| r.get::<_, Document>(0));
        assert!(read.is_err());
        // A frame cut short still records the whole size: the unpacking notices.
        let frame = pack(&"{\"k\":\"abcdefgh\"}".repeat(400)).unwrap();
        let cut = &frame[..frame.len() - 4];
        let read = conn.query_row("SELECT ?1", [cut], |r| r.get::<_, Document>(0));
        assert!(read.is_err());
    }
}
