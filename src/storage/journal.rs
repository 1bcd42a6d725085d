//! Local metadata files made durable through the embedded store's journal
//! (`--fsync-journal`) instead of two syncs per commit.
//!
//! A commit writes its new file as always (a temporary name, then a hard link that never
//! replaces a file) but syncs neither the file nor its directory. Its text goes into the
//! store's journal in the same transaction as the pointer (`store/sqlite/journal.rs`), so
//! what the commit acknowledges is on disk when the COMMIT is. The [`Syncer`] thread
//! then syncs every file system files went to (`syncfs`) once per interval, off every
//! commit's path, and marks the journal entries committed before the round as covered;
//! the store deletes those with its next group. After a crash, [`restore`] rewrites
//! the files of the entries left before the server serves. A round also drops the
//! synced files' pages from the page cache (`sync_rounds::drop_cached_pages` says why).
//!
//! So a power cut loses nothing acknowledged, and a disk shared with other writers slows
//! the syncer's rounds, not the commits (unlike `--fsync-batch`, whose commits wait for a
//! round).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::Context;

use super::local::local_path_str;
use super::sync_rounds::{drop_cached_pages, syncfs};
use crate::store::sqlite::JournalMarks;

/// Syncs the file systems that journaled files went to, once per interval.
#[derive(Debug)]
pub struct Syncer {
    marks: Arc<JournalMarks>,
    noted: Mutex<Noted>,
    /// Most files held open in [`Noted::written`]: a quarter of the process's open-file
    /// limit, at most 4,096, so that sockets never run short. Beyond it a file is closed
    /// at once and its pages are left to the kernel.
    max_held: usize,
    /// Whether a round's sync has failed: no later round covers anything (see `round`).
    failed: std::sync::atomic::AtomicBool,
}

/// What the request threads tell the syncer.
#[derive(Debug, Default)]
struct Noted {
    /// One open file per file system (device) written to: `syncfs` needs a descriptor.
    file_systems: HashMap<u64, Arc<File>>,
    /// The files written since the last round began, kept open (closing them is the
    /// syncer's work now, not the request's) so that the next round drops their pages
    /// once it has synced them (`sync_rounds::drop_cached_pages`).
    written: Vec<File>,
}

impl Syncer {
    /// Starts the syncer's thread, which ends once the returned syncer is dropped.
    pub fn start(marks: Arc<JournalMarks>, interval: Duration) -> io::Result<Arc<Syncer>> {
        let syncer = Arc::new(Syncer {
            marks,
            noted: Mutex::default(),
            max_held: max_held(),
            failed: Default::default(),
        });
        let weak = Arc::downgrade(&syncer);
        std::thread::Builder::new()
            .name("floe-file-sync".into())
            .spawn(move || run(weak, interval))?;
        Ok(syncer)
    }

    /// Notes a file just written in `dir` (before its journal entry commits): its file
    /// system, whose directory then stays open for that file system's rounds, and the
    /// file itself, for the next round to drop its pages.
    pub(super) fn note(&self, file: File, dir: &Path) -> io::Result<()> {
        let device = file.metadata()?.dev();
        let mut noted = self.noted.lock().expect("syncer poisoned");
        if let std::collections::hash_map::Entry::Vacant(new) = noted.file_systems.entry(device) {
            new.insert(Arc::new(File::open(dir)?));
        }
        if noted.written.len() < self.max_held {
            noted.written.push(file);
        }
        Ok(())
    }

    /// One round: every entry committed before it starts is covered once it ends well.
    fn round(&self) {
        use std::sync::atomic::Ordering;
        if self.failed.load(Ordering::Relaxed) {
            // The files held are closed with their pages kept; the journal keeps them.
            self.noted.lock().expect("syncer poisoned").written.clear();
            return;
        }
        let through = self.marks.committed();
        if through <= self.marks.synced() {
            return;
        }
        // Taken before the syncs, so every file held was written before them. A file
        // whose commit has not landed yet is synced (and dropped) all the same.
        let (file_systems, written) = {
            let mut noted = self.noted.lock().expect("syncer poisoned");
            let file_systems: Vec<Arc<File>> = noted.file_systems.values().cloned().collect();
            (file_systems, std::mem::take(&mut noted.written))
        };
        for file in file_systems {
            if let Err(e) = syncfs(&file) {
                // The entries stay, and no later round covers any: the kernel reports a
                // writeback error once per descriptor, so the next round's sync would
                // succeed without the pages this one lost (any file's since the last good
                // round). The journal keeps every entry from now on (it grows), and the
                // next start restores their files from it. The files held are closed
                // with their pages kept.
                self.failed.store(true, Ordering::Relaxed);
                tracing::error!(error = %e, "syncing metadata files failed: the journal now keeps every file written until the next start restores them");
                return;
            }
        }
        self.marks.mark_synced(through);
        for file in &written {
            drop_cached_pages(file);
        }
    }
}

/// A quarter of the soft limit on open files, at most 4,096 (256 if it cannot be read).
fn max_held() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => usize::try_from(limit.rlim_cur / 4).map_or(4096, |n| n.min(4096)),
        _ => 256,
    }
}

fn run(syncer: Weak<Syncer>, interval: Duration) {
    loop {
        std::thread::sleep(interval);
        match syncer.upgrade() {
            Some(syncer) => syncer.round(),
            None => return,
        }
    }
}

/// Makes the file of each journal entry `(location, text)` hold that text durably:
/// a file already holding it is synced, any other (missing, partial, or lost with the
/// page cache) is written again. Returns how many were rewritten.
pub fn restore(entries: &[(String, String)]) -> anyhow::Result<usize> {
    let mut rewritten = 0;
    let mut file_systems: HashMap<u64, File> = HashMap::new();
    for (location, text) in entries {
        let path = Path::new(local_path_str(location).map_err(|e| anyhow::anyhow!("{e}"))?);
        let dir = path
            .parent()
            .with_context(|| format!("{location} has no directory"))?;
        if fs::read(path).ok().as_deref() != Some(text.as_bytes()) {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            // Replacing is right here: nothing else writes while the server starts, and
            // the name holds nothing valid.
            let temporary = dir.join(format!(
                ".{}.restore.tmp",
                path.file_name().unwrap_or_default().to_string_lossy()
            ));
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&temporary)
                .with_context(|| format!("writing {}", temporary.display()))?;
            file.write_all(text.as_bytes())?;
            fs::rename(&temporary, path).with_context(|| format!("restoring {location}"))?;
            rewritten += 1;
        }
        let dir = File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
        file_systems.entry(dir.metadata()?.dev()).or_insert(dir);
    }
    for file in file_systems.values() {
        syncfs(file).context("syncing restored metadata files")?;
    }
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_rewrites_missing_and_partial_files_and_keeps_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| format!("file://{}/t/metadata/{name}", dir.path().display());
        let entries = vec![
            (at("1.json"), "{\"v\":1}".to_string()),
            (at("2.json"), "{\"v\":2}".to_string()),
            (at("3.json"), "{\"v\":3}".to_string()),
        ];
        fs::create_dir_all(dir.path().join("t/metadata")).unwrap();
        fs::write(dir.path().join("t/metadata/1.json"), "{\"v\":1}").unwrap();
        fs::write(dir.path().join("t/metadata/2.json"), "{\"v").unwrap();
        assert_eq!(restore(&entries).unwrap(), 2);
        for (i, (_, text)) in entries.iter().enumerate() {
            let path = dir.path().join(format!("t/metadata/{}.json", i + 1));
            assert_eq!(&fs::read_to_string(path).unwrap(), text);
        }
        // Nothing but the files: no temporaries left.
        assert_eq!(
            fs::read_dir(dir.path().join("t/metadata")).unwrap().count(),
            3
        );
        assert_eq!(restore(&entries).unwrap(), 0);
    }

    #[test]
    fn a_round_covers_what_was_committed_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let marks = Arc::new(JournalMarks::default());
        let syncer = Syncer::start(marks.clone(), Duration::from_secs(3600)).unwrap();
        let path = dir.path().join("f");
        let mut file = File::create(&path).unwrap();
        file.write_all(&[b'x'; 64 * 1024]).unwrap();
        syncer.note(file, dir.path()).unwrap();
        let cached = || super::super::sync_rounds::cached_pages(&path);
        let before = cached();
        syncer.round();
        assert_eq!(marks.synced(), 0, "nothing committed yet");
        assert_eq!(cached(), before, "no round ran: the pages stay");
        marks.mark_committed(7);
        syncer.round();
        assert_eq!(marks.synced(), 7);
        // Synced, so its pages went; the file is whole.
        if let Some((cached_before, pages)) = before {
            assert_eq!(
                cached_before, pages,
                "written pages are cached until a round"
            );
            assert_eq!(cached(), Some((0, pages)));
        }
        assert_eq!(fs::read(&path).unwrap().len(), 64 * 1024);
    }
}
