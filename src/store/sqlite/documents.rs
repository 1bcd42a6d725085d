//! How the embedded store keeps metadata documents and namespace properties: large ones
//! compressed.
//!
//! A commit's document goes into the WAL, is fsynced, and is copied again by the next
//! checkpoint; the one it replaces is read back to free its pages. Uncompressed, a table
//! with a full metadata log (about 30 KB) took eight overflow pages, and pages were what
//! the commit thread spent its time on. Compressed, it takes two, on the caller's thread
//! before the batch is queued ([`pack_batch`]), never on the commit thread.
//!
//! The column's type says which form a value has: TEXT is the document itself (every
//! document written before packing began, and small ones), a BLOB a packed one. A BLOB is
//! either an lz4 block behind a header of Floe's own ([`LZ4_MAGIC`] and the text's
//! length: what is written now) or a zstd frame (written before; its magic number tells
//! it apart). Readers take any form through [`Document`]; SQL that copies a value (the
//! file journal's triggers) copies the form with it. Nothing is migrated.

use std::cell::RefCell;
use std::sync::Arc;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};

use crate::store::{Mutation, WriteBatch};

/// Documents up to this many bytes are kept as text. SQLite keeps a record of up to about
/// 4 KB (its default 4 KiB page, less the page's header) on its leaf page, and the WAL takes
/// whole pages: below this, packing saves no page a write puts into the WAL, and costs a
/// compression on the request (two for namespace properties whose expected value came
/// without its packed form, for [`holds`]). 3 KiB leaves room for the row's other columns.
const PACK_FROM: usize = 3072;

/// The header of an lz4-packed value: these four bytes, then the text's length (u32,
/// little-endian), then one lz4 block. A zstd frame starts with `28 b5 2f fd`, so the two
/// never read as each other. Why lz4 and not zstd: on a 54 KB table document (2.5 GHz
/// Xeon), zstd at its fast level -3 packed to 11.8 KB in 47-63 µs, lz4 to 13.4 KB in
/// 28-33 µs (a 72 KB view: 14.2 KB in 77-84 µs against 17.0 KB in 37-42 µs), and packing
/// was 7.5% of the server's CPU in the 50/50 mix; lz4 took about 4% off the CPU per
/// request there (BENCHMARKS.md).
const LZ4_MAGIC: [u8; 4] = *b"FLZ4";

/// The largest text an lz4 header may declare: a length beyond it is damage, not a
/// document (the request body limit keeps documents far smaller).
const LZ4_MAX_TEXT: usize = 1 << 30;

/// A document as bound for the `metadata` column: the text, or its packed form.
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

/// The packed forms of the batch's new documents, in the order its mutation lists them
/// (`None`: kept as text). A namespace update's new properties get theirs attached
/// ([`StoredProperties::keep_packed`]), so that the cache keeps it with them once they
/// commit and the next update's swap expects those bytes without packing them again; its
/// one entry here is the expected properties' form, packed only if the request read them
/// without one (a [`holds`] comparison needs it).
///
/// [`StoredProperties::keep_packed`]: crate::store::StoredProperties::keep_packed
pub(super) fn pack_batch(batch: &WriteBatch) -> Vec<Option<Vec<u8>>> {
    match &batch.mutation {
        Mutation::CommitObjects { writes, .. } => {
            writes.iter().map(|w| pack(&w.metadata)).collect()
        }
        Mutation::Undrop { write, .. } => vec![pack(&write.metadata)],
        Mutation::UpdateNamespace {
            properties,
            expected,
            ..
        } => {
            if properties.packed().is_none() {
                if let Some(packed) = pack_into(properties.json(), |b| Arc::<[u8]>::from(b)) {
                    properties.keep_packed(packed);
                }
            }
            match expected.packed {
                Some(_) => vec![None],
                None => vec![pack(&expected.json)],
            }
        }
        _ => Vec::new(),
    }
}

/// Largest worst-case lz4 output kept in a thread's scratch buffer between packs: a
/// table document with a full metadata log needs about 35 KB; a rare larger one gets a
/// buffer of its own rather than holding megabytes on a thread for good.
const SCRATCH_MAX: usize = 1 << 20;

/// `text` packed (header and lz4 block), if it is worth packing.
fn pack(text: &str) -> Option<Vec<u8>> {
    pack_into(text, <[u8]>::to_vec)
}

/// `text` packed, as `make` copies the packed value out of the scratch buffer.
///
/// The block is compressed into a per-thread scratch buffer, then copied into a value of
/// its own size. lz4_flex wants an initialised output of the worst-case size (110% of the
/// text): a fresh one per pack is zeroed first, which cost more than copying the packed
/// result (about a quarter of a metadata document) out of a buffer zeroed once.
fn pack_into<T>(text: &str, make: impl FnOnce(&[u8]) -> T) -> Option<T> {
    thread_local! {
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    if text.len() <= PACK_FROM || text.len() > LZ4_MAX_TEXT {
        return None;
    }
    // The header, then the block, in one buffer: the value is copied out of it once.
    let header = LZ4_MAGIC.len() + 4;
    let worst = header + lz4_flex::block::get_maximum_output_size(text.len());
    let with_block = |buffer: &mut [u8]| -> Option<T> {
        // Any failure (none is expected: the buffer holds the worst case) keeps the text:
        // both forms are valid.
        let len = lz4_flex::block::compress_into(text.as_bytes(), &mut buffer[header..]).ok()?;
        if header + len >= text.len() {
            return None;
        }
        let (magic, len_bytes) = buffer[..header].split_at_mut(LZ4_MAGIC.len());
        magic.copy_from_slice(&LZ4_MAGIC);
        len_bytes.copy_from_slice(&(text.len() as u32).to_le_bytes());
        Some(make(&buffer[..header + len]))
    };
    if worst > SCRATCH_MAX {
        return with_block(&mut vec![0; worst]);
    }
    SCRATCH.with_borrow_mut(|scratch| {
        if scratch.len() < worst {
            scratch.resize(worst, 0);
        }
        with_block(&mut scratch[..worst])
    })
}

/// `packed` (an lz4 value or a zstd frame) unpacked.
fn unpack(packed: &[u8]) -> std::io::Result<Vec<u8>> {
    match packed.split_first_chunk::<4>() {
        Some((magic, rest)) if *magic == LZ4_MAGIC => unpack_lz4(rest),
        _ => unpack_zstd(packed),
    }
}

fn unpack_lz4(rest: &[u8]) -> std::io::Result<Vec<u8>> {
    let damaged =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let (len, block) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| damaged("lz4 value cut short"))?;
    let len = u32::from_le_bytes(*len) as usize;
    if len > LZ4_MAX_TEXT {
        return Err(damaged("lz4 value declares an impossible length"));
    }
    let mut out = vec![0; len];
    let written = lz4_flex::block::decompress_into(block, &mut out)
        .map_err(|e| damaged(&format!("lz4 value damaged: {e}")))?;
    if written != len {
        return Err(damaged("lz4 value shorter than it declares"));
    }
    Ok(out)
}

/// The most bytes a frame is unpacked into at once (a buffer of its recorded size).
/// Floe's own frames record their size and are far smaller; a frame recording more, or
/// nothing, goes through the streaming decoder, which grows its buffer as it reads.
const UNPACK_AT_ONCE: u64 = 16 << 20;

/// A zstd `frame` (as written before lz4) unpacked. One decompression context per
/// thread, and a buffer of the size the frame records: making a context and growing a
/// buffer cost as much as the unpacking.
fn unpack_zstd(frame: &[u8]) -> std::io::Result<Vec<u8>> {
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

/// Whether a stored `value` (of a `metadata` or `properties` column) holds `text`;
/// `packed` is `text` packed, if known: as [`pack_batch`] packed it, or the value the
/// text was read from ([`PackedText`]). Anything else given there is a bug: bytes equal
/// to the stored value are taken to hold `text` without unpacking it.
///
/// The packer is deterministic, so a value written from the same text by this build is
/// those very bytes: the usual case is one comparison of a few KB, with nothing unpacked
/// on the commit thread (which unpacked and compared ~11 KB of namespace properties per
/// update, a tenth of its time in the 50/50 mix). A value the packer would not have
/// written (kept as text, a zstd frame, another build's lz4) is compared as text, after a
/// check of the length an lz4 header declares.
pub(super) fn holds(value: ValueRef<'_>, text: &str, packed: Option<&[u8]>) -> FromSqlResult<bool> {
    match value {
        ValueRef::Text(stored) => Ok(stored == text.as_bytes()),
        ValueRef::Blob(stored) => {
            if packed == Some(stored) {
                return Ok(true);
            }
            if let Some(len) = lz4_declared_len(stored) {
                if len != text.len() {
                    return Ok(false);
                }
            }
            let bytes = unpack(stored).map_err(|e| FromSqlError::Other(Box::new(e)))?;
            Ok(bytes == text.as_bytes())
        }
        _ => Err(FromSqlError::InvalidType),
    }
}

/// The text length an lz4 value's header declares (`None`: not an lz4 value).
fn lz4_declared_len(stored: &[u8]) -> Option<usize> {
    let (magic, rest) = stored.split_first_chunk::<4>()?;
    let (len, _) = rest.split_first_chunk::<4>()?;
    (*magic == LZ4_MAGIC).then(|| u32::from_le_bytes(*len) as usize)
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

/// A value of a `properties` column: the text, and the packed value it was read from
/// (`None` for one kept as text).
#[derive(Debug)]
pub(super) struct PackedText(pub String, pub Option<Arc<[u8]>>);

impl FromSql for PackedText {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let packed = match value {
            ValueRef::Blob(bytes) => Some(Arc::from(bytes)),
            _ => None,
        };
        Document::column_result(value).map(|text| PackedText(text.0, packed))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{holds, pack, pack_batch, unpack, Document, PackedText, PACK_FROM, SCRATCH_MAX};
    use crate::model::{CatalogId, Namespace, Properties};
    use crate::store::{Mutation, StoredProperties, WriteBatch};
    use rusqlite::types::ValueRef;
    use rusqlite::Connection;

    /// A namespace update packs its new properties once, attached to them (for the cache,
    /// and so the next update's swap), and its expected ones only when they came without
    /// their packed form.
    #[test]
    fn a_namespace_update_packs_each_text_once() {
        let big = |v: &str| Properties::from([("k".to_string(), v.repeat(PACK_FROM))]);
        let read = StoredProperties::new(big("a"));
        let update = |expected: &StoredProperties| {
            let batch = WriteBatch::new(
                Mutation::update_namespace(
                    CatalogId(1),
                    Namespace::from_key("db"),
                    expected,
                    big("b"),
                ),
                0,
            );
            let packed = pack_batch(&batch);
            let Mutation::UpdateNamespace { properties, .. } = batch.mutation else {
                unreachable!()
            };
            (packed, properties)
        };
        // Read without a packed form: the request packs the expected text.
        let (packed, new) = update(&read);
        assert_eq!(packed, vec![pack(read.json())]);
        assert_eq!(new.packed().map(|p| p.to_vec()), pack(new.json()));
        // With one (as the cache keeps the committed properties): nothing more to pack.
        let (packed, _) = update(&new);
        assert_eq!(packed, vec![None]);
        // Small properties stay text: nothing packed, nothing attached.
        let small = StoredProperties::new(Properties::from([("k".into(), "v".into())]));
        let batch = WriteBatch::new(
            Mutation::update_namespace(
                CatalogId(1),
                Namespace::from_key("db"),
                &small,
                Properties::new(),
            ),
            0,
        );
        assert_eq!(pack_batch(&batch), vec![None]);
        let Mutation::UpdateNamespace { properties, .. } = &batch.mutation else {
            unreachable!()
        };
        assert!(properties.packed().is_none());
    }

    /// A `properties` value reads as its text, with the packed bytes it was read from.
    #[test]
    fn a_packed_value_reads_with_its_bytes() {
        let text = format!("{{\"k\":\"{}\"}}", "v".repeat(PACK_FROM));
        let lz4 = pack(&text).unwrap();
        let conn = Connection::open_in_memory().unwrap();
        let read = |v: &dyn rusqlite::ToSql| -> PackedText {
            conn.query_row("SELECT ?1", [v], |r| r.get(0)).unwrap()
        };
        let PackedText(from_blob, bytes) = read(&lz4);
        assert_eq!(
            (from_blob, bytes),
            (text.clone(), Some(Arc::from(&lz4[..])))
        );
        let PackedText(from_text, bytes) = read(&text);
        assert_eq!((from_text, bytes), (text, None));
    }

    /// Every form a stored value may have is compared as the text it holds: the packed
    /// bytes of the same text at once, anything else (text, another text of the same
    /// length, another length, a zstd frame, no packed form given) by its text.
    #[test]
    fn a_stored_value_holds_exactly_its_own_text() {
        let text = format!("{{\"k\":\"{}\"}}", "v".repeat(PACK_FROM));
        let same_len = format!("{{\"k\":\"{}\"}}", "w".repeat(PACK_FROM));
        let longer = format!("{{\"k\":\"{}\"}}", "v".repeat(PACK_FROM + 1));
        let lz4 = pack(&text).expect("large enough to pack");
        let zstd = zstd::bulk::compress(text.as_bytes(), 1).unwrap();
        let blob = |b: &[u8]| holds(ValueRef::Blob(b), &text, None).unwrap();
        assert!(holds(ValueRef::Blob(&lz4), &text, Some(&lz4)).unwrap());
        assert!(blob(&lz4), "unpacked when no packed form is given");
        assert!(blob(&zstd));
        assert!(holds(ValueRef::Text(text.as_bytes()), &text, Some(&lz4)).unwrap());
        for other in [&same_len, &longer] {
            let packed = pack(other).unwrap();
            assert!(!holds(ValueRef::Blob(&lz4), other, Some(&packed)).unwrap());
            assert!(!holds(ValueRef::Blob(&lz4), other, None).unwrap());
            assert!(!holds(ValueRef::Text(text.as_bytes()), other, Some(&packed)).unwrap());
        }
        // Another lz4 packing of the same text (all literals: a block this build's packer
        // does not write) still holds it, through the comparison as text.
        let mut literals = b"FLZ4".to_vec();
        literals.extend_from_slice(&(text.len() as u32).to_le_bytes());
        literals.push(0xF0);
        let mut rest = text.len() - 15;
        while rest >= 255 {
            literals.push(255);
            rest -= 255;
        }
        literals.push(rest as u8);
        literals.extend_from_slice(text.as_bytes());
        assert_ne!(literals, lz4);
        assert_eq!(unpack(&literals).unwrap(), text.as_bytes());
        assert!(holds(ValueRef::Blob(&literals), &text, Some(&lz4)).unwrap());
        assert!(holds(ValueRef::Null, &text, None).is_err());
    }

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
        assert_eq!(&frame[..4], b"FLZ4");
        // zstd frames, as written before lz4, read back: one that records its size (as
        // Floe's were) and one that does not (a streaming encoder's).
        let zstd_frame = zstd::bulk::compress(large.as_bytes(), -3).unwrap();
        conn.execute("INSERT INTO t VALUES (3, ?1)", [&zstd_frame])
            .unwrap();
        let unsized_frame = zstd::stream::encode_all(large.as_bytes(), 1).unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&unsized_frame),
            Ok(None)
        ));
        conn.execute("INSERT INTO t VALUES (4, ?1)", [&unsized_frame])
            .unwrap();
        assert_eq!(read(1), small);
        assert_eq!(read(2), large);
        assert_eq!(read(3), large);
        assert_eq!(read(4), large);
        // The declared TEXT affinity leaves a BLOB a BLOB.
        let kind: String = conn
            .query_row("SELECT typeof(metadata) FROM t WHERE k = 2", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kind, "blob");
        assert!(large.len() > PACK_FROM);
    }

    /// One thread's scratch buffer serves every pack: a smaller document packed after a
    /// larger one (the buffer still holding the larger one's block) reads back as itself,
    /// and so does one too large for the scratch buffer.
    #[test]
    fn packs_on_one_thread_do_not_leak_into_each_other() {
        let doc = |n: usize, tag: &str| {
            let entries: Vec<String> = (0..n)
                .map(|i| format!("{{\"{tag}-{i}\":\"file:///wh/t/metadata/{i:05}-{tag}.json\"}}"))
                .collect();
            format!("[{}]", entries.join(","))
        };
        let large = doc(2_000, "large");
        let small = doc(80, "small");
        let huge = doc(25_000, "huge");
        assert!(small.len() > PACK_FROM);
        assert!(lz4_flex::block::get_maximum_output_size(huge.len()) > SCRATCH_MAX);
        for text in [&large, &small, &huge, &small, &large] {
            let packed = pack(text).expect("packed");
            assert!(packed.len() < text.len());
            let back = unpack(&packed).expect("unpacked");
            assert_eq!(std::str::from_utf8(&back).unwrap(), text.as_str());
        }
    }

    #[test]
    fn a_damaged_frame_is_an_error_not_a_document() {
        let conn = Connection::open_in_memory().unwrap();
        let read = conn.query_row("SELECT x'28b52ffd00'", [], |r| r.get::<_, Document>(0));
        assert!(read.is_err());
        // A value cut short still records the whole length: the unpacking notices.
        let frame = pack(&"{\"k\":\"abcdefgh\"}".repeat(400)).unwrap();
        let read_blob =
            |blob: &[u8]| conn.query_row("SELECT ?1", [blob], |r| r.get::<_, Document>(0));
        assert!(read_blob(&frame).is_ok());
        assert!(read_blob(&frame[..frame.len() - 4]).is_err());
        // A header alone, a header cut short, an impossible length, a block that makes
        // fewer bytes than declared, or a different text length.
        assert!(read_blob(b"FLZ4").is_err());
        assert!(read_blob(b"FLZ4\x01\x00").is_err());
        assert!(read_blob(b"FLZ4\xff\xff\xff\xff\x10a").is_err());
        let mut longer = frame.clone();
        longer[4..8].copy_from_slice(&(6400u32 + 1).to_le_bytes());
        assert!(read_blob(&longer).is_err());
        let mut shorter = frame.clone();
        shorter[4..8].copy_from_slice(&(6400u32 - 1).to_le_bytes());
        assert!(read_blob(&shorter).is_err());
    }
}
