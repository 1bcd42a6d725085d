//! Which local metadata files are known to exist, without a `stat` per table load.
//!
//! A load checks that the table's current metadata file still exists (a file deleted
//! behind the catalog's back must make the load fail, as the REST Compatibility Kit
//! checks). A `stat` walks the whole path in the kernel: ~10% of the server's CPU in a
//! loadTable benchmark. Instead, once a file has been seen, its directory is watched with
//! inotify for names leaving it (deleted, or renamed away) and for the directory itself
//! going; later checks of that file cost one non-blocking `read` of the inotify queue.
//!
//! Why this stays exact (a load that starts after a deletion returned sees it): the
//! kernel queues the event inside the `unlink`/`rename` call, before it returns. A check
//! first asks the kernel how many bytes are queued (`FIONREAD`, which consumes nothing):
//! with none, it answers under a shared lock; otherwise it takes the exclusive lock,
//! drains and applies the queue, then answers. A drain holds the exclusive lock from
//! before its `read` until its events are applied, so a check that found the queue empty
//! because a drain had just taken the events waits for that drain on its shared lock.
//! The watch is added *before* the `stat` that admits a file, so a deletion between the
//! two is in the queue for the next check. (A single mutex held across the `read` made
//! the two runtime threads queue on each other: as costly as the `stat` it replaced.)
//!
//! Not seen: a *parent* of the watched directory renamed or replaced (the path then names
//! something else while the watched directory lives on); Floe never does that, and a file
//! missing that way is still found on the next cache-cold check. Watches are bounded
//! (`MAX_DIRS`, oldest dropped first) and so are the names remembered per directory (the
//! current metadata file is the one loads ask about); past either bound, checks `stat`.
//!
//! Admission: a directory is watched only when it is asked about a second time within a
//! window (`Doorkeeper`); the first time, the check is a plain `stat` under no lock. When
//! loads spread over far more tables than `MAX_DIRS` (10⁵ tables, Zipfian keys), watching
//! every directory asked about once made each miss add one watch and drop another under
//! the exclusive lock: costlier than the `stat` it saves, and it evicted the hot
//! directories. (Dropping the oldest watch also scanned the whole order list: 20% of the
//! server's CPU; now it is O(1), see `State::order`.)

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::hash::BuildHasher;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

use foldhash::{HashMap, HashMapExt};
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

/// Directories watched at most (each watch pins an inode in the kernel).
const MAX_DIRS: usize = 4096;
/// Names remembered per directory: the newest files checked there.
const NAMES_PER_DIR: usize = 4;
/// Bits of the doorkeeper (a directory sets one; a second ask finding it set admits).
const DOORKEEPER_BITS: usize = 16 * MAX_DIRS;

/// Files known to exist, kept exact by inotify (see the module doc).
pub struct KnownFiles {
    /// The inotify descriptor (owned by `state`, which lives as long as this).
    fd: RawFd,
    state: RwLock<State>,
    doorkeeper: Doorkeeper,
}

/// Which directories were asked about once lately: a one-hash Bloom filter, cleared after
/// `DOORKEEPER_BITS / 4` first asks, so it stays sparse and forgets old asks. Lock-free;
/// a race (a lost bit, a clear during a check) only makes one check `stat` or watch where
/// it need not, both of which answer exactly.
struct Doorkeeper {
    hasher: foldhash::fast::RandomState,
    bits: Box<[AtomicU64]>,
    first_asks: AtomicUsize,
}

impl Doorkeeper {
    fn new() -> Self {
        Doorkeeper {
            hasher: foldhash::fast::RandomState::default(),
            bits: (0..DOORKEEPER_BITS / 64)
                .map(|_| AtomicU64::new(0))
                .collect(),
            first_asks: AtomicUsize::new(0),
        }
    }

    /// Whether `dir` was asked about before (since the last clear); records this ask.
    /// Hashed as text, like `State::by_path`: a `Path` hashes component by component.
    fn seen_again(&self, dir: &str) -> bool {
        let hash = self.hasher.hash_one(dir) as usize % DOORKEEPER_BITS;
        let (word, bit) = (&self.bits[hash / 64], 1u64 << (hash % 64));
        if word.load(Ordering::Relaxed) & bit != 0 {
            return true;
        }
        word.fetch_or(bit, Ordering::Relaxed);
        if self.first_asks.fetch_add(1, Ordering::Relaxed) + 1 >= DOORKEEPER_BITS / 4 {
            self.first_asks.store(0, Ordering::Relaxed);
            for word in self.bits.iter() {
                word.store(0, Ordering::Relaxed);
            }
        }
        false
    }
}

struct State {
    inotify: Inotify,
    buffer: Vec<u8>,
    /// What each watch covers.
    dirs: HashMap<WatchDescriptor, Dir>,
    /// A directory's path to its watch (several paths may share one).
    /// Keyed by the text: hashing a `Path` walks its components.
    by_path: HashMap<String, WatchDescriptor>,
    /// Watches in the order they were added, each with its `Dir::added` stamp: the oldest
    /// goes first past `MAX_DIRS`. Entries of watches already gone stay until they reach
    /// the front (a stamp that no longer matches skips them) or the list is compacted,
    /// so forgetting a watch never scans the list.
    order: VecDeque<(WatchDescriptor, u64)>,
    /// The next `Dir::added` stamp.
    stamp: u64,
    /// Most watches held (`MAX_DIRS`; smaller in tests).
    max_dirs: usize,
}

struct Dir {
    /// When the watch was added (unique; ties `order`'s entries to this watch).
    added: u64,
    paths: Vec<String>,
    /// Names seen to exist since the watch began, newest last.
    names: VecDeque<String>,
}

impl KnownFiles {
    /// `None` where inotify cannot be had (e.g. the per-user instance limit): the caller
    /// then simply `stat`s.
    pub fn new() -> Option<Self> {
        Self::with_max_dirs(MAX_DIRS)
    }

    fn with_max_dirs(max_dirs: usize) -> Option<Self> {
        match Inotify::init() {
            Ok(inotify) => Some(KnownFiles {
                fd: inotify.as_raw_fd(),
                state: RwLock::new(State {
                    inotify,
                    buffer: vec![0; 16 * 1024],
                    dirs: HashMap::new(),
                    by_path: HashMap::new(),
                    order: VecDeque::new(),
                    stamp: 0,
                    max_dirs,
                }),
                doorkeeper: Doorkeeper::new(),
            }),
            Err(e) => {
                tracing::warn!(error = %e, "inotify is unavailable: every table load will stat its metadata file");
                None
            }
        }
    }

    /// Whether the file at `path` exists (following links, like `Path::exists`).
    pub fn exists(&self, path: &Path) -> bool {
        // Split as text: `Path::parent` and `file_name` parse the components from the end,
        // which cost more than the rest of the check on a cached load.
        let Some((dir, name)) = path.to_str().and_then(split_dir_name) else {
            return path.exists();
        };
        let nothing_queued = self.nothing_queued();
        let watched = {
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            if nothing_queued && state.knows(dir, name) {
                return true;
            }
            state.by_path.contains_key(dir)
        };
        // Not watched and asked about for the first time lately: a `stat` answers exactly,
        // with no lock held and no watch spent.
        if !watched && !self.doorkeeper.seen_again(dir) {
            return path.exists();
        }
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        state.drain();
        if state.knows(dir, name) {
            return true;
        }
        // Watch first, then look: a deletion in between is queued for the next check.
        let wd = state.watch(dir);
        let exists = path.exists();
        if let (true, Some(wd)) = (exists, wd) {
            if let Some(d) = state.dirs.get_mut(&wd) {
                if d.names.len() == NAMES_PER_DIR {
                    d.names.pop_front();
                }
                d.names.push_back(name.to_owned());
            }
        }
        exists
    }
}

impl KnownFiles {
    /// Whether the kernel holds no events for us (an error counts as "some").
    fn nothing_queued(&self) -> bool {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer, which outlives the call;
        // the descriptor stays open as long as `self`.
        let r = unsafe { libc::ioctl(self.fd, libc::FIONREAD, &mut queued as *mut libc::c_int) };
        r == 0 && queued == 0
    }
}

/// A path's directory and file name, split at its last `/`; `None` for a path with no
/// directory part or no plain file name (those are simply `stat`ed).
fn split_dir_name(path: &str) -> Option<(&str, &str)> {
    let (dir, name) = path.rsplit_once('/')?;
    (!dir.is_empty() && !matches!(name, "" | "." | "..")).then_some((dir, name))
}

impl State {
    fn knows(&self, dir: &str, name: &str) -> bool {
        self.by_path
            .get(dir)
            .and_then(|wd| self.dirs.get(wd))
            .is_some_and(|d| d.names.iter().any(|n| n == name))
    }

    /// Applies every queued event: names that left a directory are forgotten, and so are
    /// directories that went (or everything, if the queue overflowed).
    fn drain(&mut self) {
        loop {
            let events = match self.inotify.read_events(&mut self.buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!(error = %e, "reading inotify events failed: forgetting every known file");
                    self.forget_all_names();
                    return;
                }
            };
            let mut gone = Vec::new();
            let mut overflowed = false;
            for event in events {
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    overflowed = true;
                } else if event.mask.contains(EventMask::MOVE_SELF) {
                    // The kernel keeps watching the directory where it went: stop that.
                    gone.push((event.wd.clone(), true));
                } else if event
                    .mask
                    .intersects(EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::UNMOUNT)
                {
                    gone.push((event.wd.clone(), false));
                } else if let (Some(name), Some(dir)) = (event.name, self.dirs.get_mut(&event.wd)) {
                    dir.names.retain(|n| OsStr::new(n) != name);
                }
            }
            for (wd, remove) in gone {
                if remove && self.dirs.contains_key(&wd) {
                    let _ = self.inotify.watches().remove(wd.clone());
                }
                self.unwatch(&wd);
            }
            if overflowed {
                self.forget_all_names();
            }
        }
    }

    fn forget_all_names(&mut self) {
        for dir in self.dirs.values_mut() {
            dir.names.clear();
        }
    }

    /// The watch on `dir`, added if need be; `None` if it cannot be watched (missing,
    /// not a directory, or the kernel's limit on watches reached).
    fn watch(&mut self, dir: &str) -> Option<WatchDescriptor> {
        if let Some(wd) = self.by_path.get(dir) {
            return Some(wd.clone());
        }
        if self.dirs.len() >= self.max_dirs {
            while let Some((oldest, added)) = self.order.pop_front() {
                if self.dirs.get(&oldest).is_some_and(|d| d.added == added) {
                    let _ = self.inotify.watches().remove(oldest.clone());
                    self.unwatch(&oldest);
                    break;
                }
            }
        }
        if self.order.len() >= 2 * self.max_dirs {
            let dirs = &self.dirs;
            self.order
                .retain(|(wd, added)| dirs.get(wd).is_some_and(|d| d.added == *added));
        }
        let mask = WatchMask::DELETE
            | WatchMask::MOVED_FROM
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR;
        let wd = self.inotify.watches().add(dir, mask).ok()?;
        let entry = self.dirs.entry(wd.clone()).or_insert_with(|| {
            self.stamp += 1;
            self.order.push_back((wd.clone(), self.stamp));
            Dir {
                added: self.stamp,
                paths: Vec::new(),
                names: VecDeque::new(),
            }
        });
        entry.paths.push(dir.to_owned());
        self.by_path.insert(dir.to_owned(), wd.clone());
        Some(wd)
    }

    /// Forgets a watch (the kernel has dropped it, or is about to).
    fn unwatch(&mut self, wd: &WatchDescriptor) {
        if let Some(dir) = self.dirs.remove(wd) {
            for path in dir.paths {
                self.by_path.remove(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("floe-present-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("metadata")).unwrap();
        dir
    }

    #[test]
    fn paths_split_at_the_last_slash() {
        assert_eq!(
            split_dir_name("/t/metadata/1.json"),
            Some(("/t/metadata", "1.json"))
        );
        assert_eq!(split_dir_name("/t//1.json"), Some(("/t/", "1.json")));
        for plain_stat in ["/1.json", "/t/metadata/", "/t/.", "/t/..", "1.json"] {
            assert_eq!(split_dir_name(plain_stat), None, "{plain_stat}");
        }
    }

    #[test]
    fn a_deleted_or_renamed_file_is_seen_at_once() {
        let root = dir();
        let known = KnownFiles::new().unwrap();
        let file = root.join("metadata/00001.json");
        assert!(!known.exists(&file));
        std::fs::write(&file, b"{}").unwrap();
        assert!(known.exists(&file));
        assert!(known.exists(&file), "answered from memory");
        std::fs::remove_file(&file).unwrap();
        assert!(!known.exists(&file), "a deletion is seen by the next check");

        std::fs::write(&file, b"{}").unwrap();
        assert!(known.exists(&file));
        std::fs::rename(&file, root.join("metadata/moved.json")).unwrap();
        assert!(!known.exists(&file), "so is a rename away");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_removed_directory_drops_its_watch_and_a_new_one_is_watched_afresh() {
        let root = dir();
        let known = KnownFiles::new().unwrap();
        let file = root.join("metadata/00001.json");
        std::fs::write(&file, b"{}").unwrap();
        assert!(known.exists(&file));
        std::fs::remove_dir_all(root.join("metadata")).unwrap();
        assert!(!known.exists(&file));
        std::fs::create_dir_all(root.join("metadata")).unwrap();
        std::fs::write(&file, b"{}").unwrap();
        assert!(known.exists(&file));
        std::fs::remove_file(&file).unwrap();
        assert!(!known.exists(&file), "the new directory is watched");
        // The directory renamed away: its watch moves with it, so its names are dropped.
        std::fs::write(&file, b"{}").unwrap();
        assert!(known.exists(&file));
        std::fs::rename(root.join("metadata"), root.join("elsewhere")).unwrap();
        assert!(!known.exists(&file));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn other_names_and_bounds() {
        let root = dir();
        let known = KnownFiles::new().unwrap();
        let files: Vec<PathBuf> = (0..NAMES_PER_DIR + 2)
            .map(|i| root.join(format!("metadata/{i:05}.json")))
            .collect();
        for f in &files {
            std::fs::write(f, b"{}").unwrap();
            assert!(known.exists(f));
        }
        // Deleting one name leaves the others known; the oldest names fell out of memory
        // but are still answered (by a stat).
        std::fs::remove_file(&files[NAMES_PER_DIR + 1]).unwrap();
        assert!(!known.exists(&files[NAMES_PER_DIR + 1]));
        assert!(files[..=NAMES_PER_DIR].iter().all(|f| known.exists(f)));
        let state = known.state.read().unwrap();
        assert!(state.dirs.values().all(|d| d.names.len() <= NAMES_PER_DIR));
        drop(state);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_directory_is_watched_once_asked_about_again() {
        let root = dir();
        let known = KnownFiles::new().unwrap();
        let file = root.join("metadata/00001.json");
        std::fs::write(&file, b"{}").unwrap();
        assert!(known.exists(&file));
        assert!(
            known.state.read().unwrap().dirs.is_empty(),
            "a first ask only stats"
        );
        assert!(known.exists(&file));
        assert_eq!(
            known.state.read().unwrap().dirs.len(),
            1,
            "a second ask watches"
        );
        std::fs::remove_file(&file).unwrap();
        assert!(!known.exists(&file));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn watches_stay_bounded_oldest_first_and_checks_stay_exact() {
        const MAX: usize = 8;
        let root = dir();
        let known = KnownFiles::with_max_dirs(MAX).unwrap();
        let files: Vec<PathBuf> = (0..3 * MAX)
            .map(|i| {
                let dir = root.join(format!("t{i}/metadata"));
                std::fs::create_dir_all(&dir).unwrap();
                let file = dir.join("00001.json");
                std::fs::write(&file, b"{}").unwrap();
                file
            })
            .collect();
        let watched = |f: &PathBuf| {
            let state = known.state.read().unwrap();
            state
                .by_path
                .contains_key(f.parent().unwrap().to_str().unwrap())
        };
        for round in 0..3 {
            for (i, f) in files.iter().enumerate() {
                assert!(known.exists(f) && known.exists(f));
                // Every other directory goes away behind the watch's back: its entry in
                // the order list is left behind, to be skipped or compacted.
                if round == 1 && i % 2 == 0 {
                    std::fs::remove_dir_all(f.parent().unwrap()).unwrap();
                    assert!(!known.exists(f));
                    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                    std::fs::write(f, b"{}").unwrap();
                }
                let state = known.state.read().unwrap();
                assert!(state.dirs.len() <= MAX && state.by_path.len() <= MAX);
                assert!(state.order.len() <= 2 * MAX);
            }
        }
        assert!(
            watched(files.last().unwrap()) && !watched(&files[0]),
            "oldest dropped"
        );
        for f in &files {
            std::fs::remove_file(f).unwrap();
            assert!(!known.exists(f), "exact whether watched or not: {f:?}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn concurrent_checks_see_a_deletion_that_returned_before_they_began() {
        let root = dir();
        let known = std::sync::Arc::new(KnownFiles::new().unwrap());
        for round in 0..200 {
            let file = root.join(format!("metadata/{round:05}.json"));
            std::fs::write(&file, b"{}").unwrap();
            assert!(known.exists(&file));
            std::fs::remove_file(&file).unwrap();
            let checks: Vec<_> = (0..4)
                .map(|_| {
                    let (known, file) = (known.clone(), file.clone());
                    std::thread::spawn(move || known.exists(&file))
                })
                .collect();
            assert!(checks.into_iter().all(|c| !c.join().unwrap()));
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
