//! Metadata files on the local file system (`file:` locations).
//!
//! A new file is written to a temporary name, fsynced, then hard-linked to its final name
//! (linking fails if the name is taken, so nothing is ever replaced) and the directory is
//! fsynced: after a crash, a metadata file's name holds either nothing or the complete
//! file. With `--fsync-batch` the two syncs are rounds shared with concurrent writers
//! (`sync_rounds.rs`), in the same order; with `--fsync-journal` neither is done on the
//! commit's path and the file is created under its final name: the embedded store keeps
//! the file's text until a background round has synced it, and a start after a crash
//! rewrites what a name lost (`journal.rs`). File system calls run on tokio's blocking
//! threads, except the existence check of a load, which inotify answers from memory
//! (`present.rs`), and a new file of at most [`INLINE_WRITE_MAX`] bytes that nothing syncs
//! on the commit's path: that is a few page-cache copies, cheaper on the calling thread
//! than the hop to a blocking thread and back (two wake-ups, each a wait for a core when
//! the machine is busy).

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;

use super::journal::Syncer;
use super::sync_rounds::{drop_cached_pages, SyncRounds};
use super::{FileStore, StorageError, StorageResult};

/// The absolute path a `file:` location (or a plain absolute path) names.
pub(super) fn local_path_str(location: &str) -> StorageResult<&str> {
    let invalid = |message: String| Err(StorageError::InvalidLocation(message));
    let path = if let Some(rest) = location.strip_prefix("file://") {
        // `file:///abs` (empty authority) or `file://localhost/abs`.
        rest.strip_prefix("localhost").unwrap_or(rest)
    } else if let Some(rest) = location.strip_prefix("file:") {
        rest
    } else if location.starts_with('/') {
        location
    } else {
        return invalid(format!(
            "Unsupported location {location}: this server stores files on its local file system and accepts only file: locations"
        ));
    };
    if !path.starts_with('/') {
        return invalid(format!("Location {location} must be an absolute path"));
    }
    // This runs on every load. One branch-free pass over the bytes (vectorised) clears
    // the usual location: no byte below 0x20, no DEL, nothing non-ASCII. Only a location
    // with one of those is decoded character by character, where C1 controls are found.
    let suspect = path
        .bytes()
        .fold(false, |any, b| any | !(0x20..0x7f).contains(&b));
    let control = suspect && path.chars().any(char::is_control);
    if control {
        return invalid(format!(
            "Location {location:?} must not contain control characters"
        ));
    }
    Ok(path)
}

fn local_path(location: &str) -> StorageResult<PathBuf> {
    Ok(PathBuf::from(local_path_str(location)?))
}

/// The file system's error as the storage's. Running out of a resource the operator
/// controls is `Unavailable` (503, retryable): a full disk or quota, the process's or
/// the system's open-file limit (`EMFILE`, `ENFILE`: many connections at once, or a
/// low `ulimit -n`), and memory. None is a fault of the request nor a bug, and a new
/// file's failed write changed nothing (its partial file is removed, no pointer names
/// it). A location the file system cannot hold is the request's (400): a name too long
/// (`ENAMETOOLONG`), a file where the location needs a directory (`ENOTDIR`), or a
/// directory where it names a file (`EISDIR`). Everything else stays an internal error
/// (500).
fn io_error(error: std::io::Error, what: impl std::fmt::Display) -> StorageError {
    if let Some(libc::ENAMETOOLONG | libc::ENOTDIR | libc::EISDIR) = error.raw_os_error() {
        return StorageError::InvalidLocation(format!("{what}: {error}"));
    }
    let exhausted = match error.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => Some("the disk is full"),
        ErrorKind::OutOfMemory => Some("the server is out of memory"),
        _ => match error.raw_os_error() {
            Some(libc::EMFILE) => Some("the server has too many open files"),
            Some(libc::ENFILE) => Some("the system has too many open files"),
            _ => None,
        },
    };
    match exhausted {
        Some(why) => StorageError::Unavailable(format!("{what}: {error}: {why}")),
        None => StorageError::Io(anyhow::Error::new(error).context(what.to_string())),
    }
}

/// Runs blocking file system work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> StorageResult<T> + Send + 'static,
) -> StorageResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StorageError::Io(e.into()))?
}

/// Largest new file written on the calling thread when nothing is synced on the commit's
/// path (about 100 µs of copying at most); larger ones go to a blocking thread.
pub const INLINE_WRITE_MAX: usize = 256 * 1024;

/// How new files are made durable.
#[derive(Clone)]
enum Durability {
    /// Not at all (throwaway data).
    Off,
    /// `fdatasync` of the file, then `fsync` of its directory.
    PerFile,
    /// The same two steps as rounds shared with concurrent writers.
    Batched(Arc<SyncRounds>),
    /// Later, by the syncer's rounds; the store's journal keeps the text meanwhile.
    Journal(Arc<Syncer>),
}

/// The local file system.
pub struct LocalFiles {
    durability: Durability,
    /// Files known to exist without a `stat` (where inotify is available).
    #[cfg(target_os = "linux")]
    known: Option<super::present::KnownFiles>,
}

impl LocalFiles {
    /// `fsync`: make new files durable (off only for throwaway data); `batched`: in
    /// rounds shared by concurrent writers; `journal`: by this syncer's rounds, the
    /// store's journal keeping their text meanwhile (wins over `batched`).
    pub fn new(fsync: bool, batched: bool, journal: Option<Arc<Syncer>>) -> Self {
        let durability = match (fsync, batched, journal) {
            (false, _, _) => Durability::Off,
            (true, _, Some(syncer)) => Durability::Journal(syncer),
            (true, false, None) => Durability::PerFile,
            (true, true, None) => Durability::Batched(Arc::default()),
        };
        LocalFiles {
            durability,
            #[cfg(target_os = "linux")]
            known: super::present::KnownFiles::new(),
        }
    }
}

#[async_trait]
impl FileStore for LocalFiles {
    async fn write_new(&self, location: &str, contents: &[u8]) -> StorageResult<()> {
        let path = local_path(location)?;
        let unsynced = matches!(self.durability, Durability::Off | Durability::Journal(_));
        if unsynced && contents.len() <= INLINE_WRITE_MAX {
            return write_new_file(location, &path, contents, &self.durability);
        }
        let (location, durability) = (location.to_string(), self.durability.clone());
        let contents = contents.to_vec();
        blocking(move || write_new_file(&location, &path, &contents, &durability)).await
    }

    async fn read(&self, location: &str, max_bytes: u64) -> StorageResult<Vec<u8>> {
        let path = local_path(location)?;
        let location = location.to_string();
        blocking(move || {
            let not_found_or_io = |e: std::io::Error| match e.kind() {
                ErrorKind::NotFound => StorageError::NotFound(location.clone()),
                _ => io_error(e, format!("reading {location}")),
            };
            let meta = fs::metadata(&path).map_err(not_found_or_io)?;
            if !meta.is_file() {
                return Err(StorageError::NotFound(location));
            }
            if meta.len() > max_bytes {
                return Err(StorageError::TooLarge {
                    location,
                    max_bytes,
                });
            }
            fs::read(&path).map_err(not_found_or_io)
        })
        .await
    }

    async fn exists(&self, location: &str) -> StorageResult<bool> {
        let path = Path::new(local_path_str(location)?);
        #[cfg(target_os = "linux")]
        if let Some(known) = &self.known {
            return Ok(known.exists(path));
        }
        // A stat takes microseconds: cheaper inline than a hop to a blocking thread.
        Ok(path.exists())
    }

    async fn delete(&self, location: &str) -> StorageResult<()> {
        let path = local_path(location)?;
        blocking(move || match fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                Err(io_error(e, format!("removing {}", path.display())))
            }
            _ => Ok(()),
        })
        .await
    }

    async fn delete_prefix(&self, location: &str, max_files: usize) -> StorageResult<bool> {
        let path = local_path(location)?;
        blocking(move || {
            delete_tree(&path, max_files)
                .map_err(|e| io_error(e, format!("removing {}", path.display())))
        })
        .await
    }

    fn cheap_exists(&self) -> bool {
        true
    }

    fn journals(&self) -> bool {
        matches!(self.durability, Durability::Journal(_))
    }
}

fn write_new_file(
    location: &str,
    path: &Path,
    contents: &[u8],
    durability: &Durability,
) -> StorageResult<()> {
    let dir = path
        .parent()
        .ok_or_else(|| StorageError::InvalidLocation(format!("{location} has no directory")))?;
    // The directory usually exists (a table's metadata directory gets a file per commit):
    // try first, and create it only when the file's creation finds it missing. That saves
    // `create_dir_all`'s `mkdir` and `stat` on every other commit.
    // The directories created, deepest first: each one's entry in its parent must be
    // synced too (`Durability::PerFile`), or a crash could lose the path to the file.
    let created = std::cell::RefCell::new(Vec::new());
    let in_dir = |write: &dyn Fn() -> std::io::Result<File>| match write() {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let mut missing = created.borrow_mut();
            missing.extend(
                dir.ancestors()
                    .take_while(|d| !d.exists())
                    .map(Path::to_path_buf),
            );
            fs::create_dir_all(dir).map_err(|e| {
                // Not `AlreadyExists` (a file where the directory belongs): that would
                // read as the metadata file's name being taken. Other kinds are kept
                // (a full disk says so, `io_error`).
                let kind = match e.kind() {
                    ErrorKind::AlreadyExists => ErrorKind::Other,
                    kind => kind,
                };
                std::io::Error::new(kind, format!("creating {}: {e}", dir.display()))
            })?;
            write()
        }
        written => written,
    };
    let result = match durability {
        Durability::Off | Durability::Journal(_) => in_dir(&|| write_in_place(path, contents)),
        Durability::PerFile | Durability::Batched(_) => {
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let temporary = dir.join(format!(
                ".{file_name}.{}.tmp",
                uuid::Uuid::new_v4().simple()
            ));
            let result = in_dir(&|| write_and_link(&temporary, path, contents, durability));
            let _ = fs::remove_file(&temporary);
            result
        }
    };
    let file = match result {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(StorageError::AlreadyExists(location.to_string()))
        }
        Err(e) => return Err(io_error(e, format!("writing {}", path.display()))),
    };
    // The new name (and the temporary's removal) made durable.
    match durability {
        Durability::Off => {}
        Durability::Journal(syncer) => syncer
            .note(file, dir)
            .map_err(|e| io_error(e, format!("noting {}", path.display())))?,
        Durability::PerFile => {
            sync_dir(dir).map_err(StorageError::Io)?;
            // Each new directory's entry in its parent, up to the first that was there.
            // (Another writer creating the same directories at the same moment may leave
            // this one none to sync, and answer before its own syncs are done: the first
            // file of a new table, written twice at once, by two creates of one name.)
            for new in created.borrow().iter() {
                if let Some(parent) = new.parent() {
                    sync_dir(parent).map_err(StorageError::Io)?;
                }
            }
        }
        Durability::Batched(rounds) => rounds
            .sync(&file)
            .map_err(|e| io_error(e, format!("syncing {}", path.display())))?,
    }
    Ok(())
}

/// Writes the file under its final name (creating it: an existing name is never
/// replaced). Only where nothing is synced on the commit's path: a crash may leave the
/// name partial, but nothing names the file unless its commit landed, and then the
/// journal rewrites it at the next start (without the journal and fsync there is no
/// promise after a crash). Saves the link and unlink of a temporary, and the deletion
/// event the unlink costs `present.rs`.
fn write_in_place(path: &Path, contents: &[u8]) -> std::io::Result<File> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    if let Err(e) = file.write_all(contents) {
        // Not ours to keep: no commit will name it.
        let _ = fs::remove_file(path);
        return Err(e);
    }
    Ok(file)
}

/// Writes the temporary, makes its contents durable, links it to its final name; returns
/// the open file (its file system is the one to sync next).
fn write_and_link(
    temporary: &Path,
    path: &Path,
    contents: &[u8],
    durability: &Durability,
) -> std::io::Result<File> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temporary)?;
    file.write_all(contents)?;
    // Once synced, the pages are clean and can go.
    match durability {
        Durability::Off | Durability::Journal(_) => {}
        Durability::PerFile => {
            file.sync_data()?;
            drop_cached_pages(&file);
        }
        Durability::Batched(rounds) => {
            rounds.sync(&file)?;
            drop_cached_pages(&file);
        }
    }
    fs::hard_link(temporary, path)?;
    Ok(file)
}

/// Deletes up to `max_files` files below `root`, then, if none is left, the emptied
/// directories (children first); returns whether the tree is gone. Symbolic links are
/// removed, never followed.
fn delete_tree(root: &Path, max_files: usize) -> std::io::Result<bool> {
    let mut deleted = 0;
    let mut pending = vec![root.to_path_buf()];
    let mut dirs = Vec::new();
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            entries => entries?,
        };
        for entry in entries {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                pending.push(entry.path());
                continue;
            }
            if deleted == max_files {
                return Ok(false);
            }
            match fs::remove_file(entry.path()) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
                _ => deleted += 1,
            }
        }
        dirs.push(dir);
    }
    for dir in dirs.iter().rev() {
        match fs::remove_dir(dir) {
            // A file written meanwhile: the next round takes it.
            Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => return Ok(false),
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(true)
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk is a 503 that names the file, not a 500: `/dev/full` answers every
    /// write with the kernel's `ENOSPC`.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_is_unavailable_not_a_fault() {
        let error = OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .and_then(|mut file| file.write_all(b"{}").and_then(|()| file.sync_data()))
            .unwrap_err();
        match io_error(error, "writing /w/t/metadata/1.json") {
            StorageError::Unavailable(message) => assert!(
                message.starts_with("writing /w/t/metadata/1.json: ")
                    && message.ends_with("the disk is full"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        let other = std::io::Error::from(ErrorKind::PermissionDenied);
        assert!(matches!(io_error(other, "writing"), StorageError::Io(_)));
    }

    /// A location the file system cannot hold is the request's: the kernel's own errors,
    /// from real calls, become `InvalidLocation` (400) naming what was done.
    #[test]
    fn locations_the_file_system_cannot_hold_are_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, b"{}").unwrap();
        for error in [
            fs::write(dir.path().join("a".repeat(300)), b"{}").unwrap_err(),
            fs::write(file.join("below-a-file.json"), b"{}").unwrap_err(),
            fs::read(dir.path()).unwrap_err(),
        ] {
            match io_error(error, "reading or writing") {
                StorageError::InvalidLocation(message) => {
                    assert!(message.starts_with("reading or writing: "), "{message}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// The open-file limits and memory are resources too: 503 with the reason, like a
    /// full disk. The errors are the kernel's own codes, as a failed `open` returns them
    /// (lowering the limit for real would starve every other test in this process).
    #[test]
    fn open_file_limits_and_memory_are_unavailable_not_a_fault() {
        for (code, why) in [
            (libc::EMFILE, "the server has too many open files"),
            (libc::ENFILE, "the system has too many open files"),
            (libc::ENOMEM, "the server is out of memory"),
            (libc::EDQUOT, "the disk is full"),
        ] {
            let error = std::io::Error::from_raw_os_error(code);
            match io_error(error, "creating /w/t/metadata/1.json") {
                StorageError::Unavailable(message) => assert!(
                    message.starts_with("creating /w/t/metadata/1.json: ")
                        && message.ends_with(why),
                    "{message}"
                ),
                other => panic!("{code}: {other:?}"),
            }
        }
        for code in [libc::EACCES, libc::EIO, libc::ENOENT] {
            let error = std::io::Error::from_raw_os_error(code);
            assert!(
                matches!(io_error(error, "x"), StorageError::Io(_)),
                "{code}"
            );
        }
    }

    #[test]
    fn locations_with_control_characters_are_refused() {
        assert_eq!(local_path_str("file:///t/m/1.json").unwrap(), "/t/m/1.json");
        assert_eq!(local_path_str("/t/é/1.json").unwrap(), "/t/é/1.json");
        for bad in [
            "/t/\n/1.json",
            "file:///t/\x7f",
            "/t/é\u{85}/1.json",
            "/t/\u{9f}",
        ] {
            assert!(local_path_str(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn new_files_are_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let files = LocalFiles::new(true, false, None);
        let loc = format!("file://{}/m/00001.json", dir.path().display());
        files.write_new(&loc, b"{}").await.unwrap();
        assert!(matches!(
            files.write_new(&loc, b"[]").await,
            Err(StorageError::AlreadyExists(_))
        ));
        assert_eq!(files.read(&loc, 10).await.unwrap(), b"{}");
        assert!(matches!(
            files.read(&loc, 1).await,
            Err(StorageError::TooLarge { .. })
        ));
        let missing = format!("file://{}/m/none.json", dir.path().display());
        assert!(matches!(
            files.read(&missing, 10).await,
            Err(StorageError::NotFound(_))
        ));
        assert!(files.exists(&loc).await.unwrap());
        let m = format!("file://{}/m", dir.path().display());
        assert!(files.delete_prefix(&m, 10).await.unwrap());
        assert!(!files.exists(&loc).await.unwrap());
        files.delete(&loc).await.unwrap();
        // A missing directory is already purged.
        assert!(files.delete_prefix(&m, 10).await.unwrap());
    }

    #[tokio::test]
    async fn a_new_file_makes_its_directories_and_a_file_in_their_way_is_no_name_clash() {
        let dir = tempfile::tempdir().unwrap();
        // Unsynced (written on the calling thread, or on a blocking one past the inline
        // bound) and synced per file (through a temporary).
        for (fsync, size) in [(false, 10), (false, INLINE_WRITE_MAX + 1), (true, 10)] {
            let files = LocalFiles::new(fsync, false, None);
            let root = dir.path().join(format!("{fsync}-{size}"));
            let loc = format!("file://{}/a/b/00001.json", root.display());
            files.write_new(&loc, &vec![b'x'; size]).await.unwrap();
            assert_eq!(files.read(&loc, 1 << 20).await.unwrap().len(), size);
            // A plain file where the next file's directory belongs.
            std::fs::write(root.join("a/c"), b"").unwrap();
            let blocked = format!("file://{}/a/c/00001.json", root.display());
            let refused = files.write_new(&blocked, b"{}").await;
            // Not a name taken (409): a location the file system cannot hold (400).
            assert!(
                matches!(refused, Err(StorageError::InvalidLocation(_))),
                "{refused:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_file_synced_on_the_commits_path_leaves_no_pages_cached() {
        let dir = tempfile::tempdir().unwrap();
        for (batched, unsynced) in [(false, false), (true, false), (false, true)] {
            let files = LocalFiles::new(!unsynced, batched, None);
            let path = dir.path().join(format!("{batched}-{unsynced}/00001.json"));
            let loc = format!("file://{}", path.display());
            files.write_new(&loc, &[b'x'; 64 * 1024]).await.unwrap();
            // Unsynced files keep theirs: dropping dirty pages would start their writeback.
            if let Some((cached, pages)) = super::super::sync_rounds::cached_pages(&path) {
                let expected = if unsynced { pages } else { 0 };
                assert_eq!(cached, expected, "{batched} {unsynced}: of {pages}");
            }
            assert_eq!(files.read(&loc, 1 << 20).await.unwrap().len(), 64 * 1024);
        }
    }

    #[tokio::test]
    async fn batched_syncs_write_the_same_files_and_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let files = std::sync::Arc::new(LocalFiles::new(true, true, None));
        let writes: Vec<_> = (0..8)
            .map(|i| {
                let (files, loc) = (
                    files.clone(),
                    format!("file://{}/m/{i:05}.json", dir.path().display()),
                );
                tokio::spawn(async move { files.write_new(&loc, &vec![b'x'; 1000 + i]).await })
            })
            .collect();
        for w in writes {
            w.await.unwrap().unwrap();
        }
        for i in 0..8 {
            let loc = format!("file://{}/m/{i:05}.json", dir.path().display());
            assert_eq!(files.read(&loc, 1 << 20).await.unwrap().len(), 1000 + i);
            assert!(matches!(
                files.write_new(&loc, b"[]").await,
                Err(StorageError::AlreadyExists(_))
            ));
        }
        // Only the files: no temporaries left behind.
        assert_eq!(std::fs::read_dir(dir.path().join("m")).unwrap().count(), 8);
    }

    #[tokio::test]
    async fn a_purge_deletes_at_most_its_bound_per_call_and_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let files = LocalFiles::new(false, false, None);
        let root = dir.path().display();
        for f in [
            "t/metadata/1.json",
            "t/metadata/2.json",
            "t/data/a/1.parquet",
            "t/data/2.parquet",
            "t2/keep.json",
        ] {
            files
                .write_new(&format!("file://{root}/{f}"), b"x")
                .await
                .unwrap();
        }
        // A link inside the table is removed, never followed.
        std::os::unix::fs::symlink(dir.path().join("t2"), dir.path().join("t/link")).unwrap();
        let t = format!("file://{root}/t");
        let mut rounds = 0;
        while !files.delete_prefix(&t, 2).await.unwrap() {
            rounds += 1;
            assert!(rounds < 10, "a bounded purge must finish");
        }
        // 5 entries to delete, 2 a round: the last round finds none left.
        assert_eq!(rounds, 2);
        assert!(!dir.path().join("t").exists());
        assert!(files
            .exists(&format!("file://{root}/t2/keep.json"))
            .await
            .unwrap());
    }
}
