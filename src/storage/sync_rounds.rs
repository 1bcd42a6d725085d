//! Shared sync rounds (`--fsync-batch`): concurrent metadata-file writes on one file
//! system share one `syncfs` instead of paying an `fdatasync` and a directory `fsync`
//! each.
//!
//! A writer asks for a round that *starts after* its call (a round already running may
//! have begun before its data was written): if none is running it leads one, else it
//! waits for the running one to end and then for the next, which one of the waiters
//! leads. So every writer that returns `Ok` had its data, and everything it did before
//! the call, made durable by a round that began afterwards; a failed round fails every
//! writer that depended on it.
//!
//! A failed round fails every writer after it too, for the life of the process: the
//! kernel reports a writeback error once per open file, and the pages it lost may be
//! any writer's since the last good round, so a later `syncfs` that returns 0 proves
//! nothing about them. And a round syncs through one descriptor per file system kept
//! open from its first writer on (a writeback error is reported only to descriptors
//! opened before it), not the leader's newest file.
//!
//! The cost of `syncfs` is that it flushes everything dirty on the file system, other
//! programs' data included: on a disk shared with heavy writers a round takes as long as
//! their flush. That is why it is an option and not the default.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Condvar, Mutex};

/// Sync rounds per file system (device), so a round's `syncfs` covers its writers.
#[derive(Default)]
pub struct SyncRounds {
    devices: Mutex<HashMap<u64, Arc<Rounds>>>,
}

impl SyncRounds {
    /// Returns once a round that started after this call has made `file`'s file system
    /// durable (its data, and every name created or removed before the call).
    pub fn sync(&self, file: &File) -> io::Result<()> {
        let device = file.metadata()?.dev();
        let rounds = self
            .devices
            .lock()
            .expect("sync rounds poisoned")
            .entry(device)
            .or_default()
            .clone();
        if rounds.anchor.get().is_none() {
            // The first writer's file, shared (a duplicate descriptor of the same open
            // file, opened before its data was written): errors from then on are
            // reported to it. Kept open for good: one file's inode per file system stays
            // allocated after its table is purged.
            let _ = rounds.anchor.set(file.try_clone()?);
        }
        let anchor = rounds.anchor.get().unwrap_or(file);
        rounds.sync(|| syncfs(anchor))
    }
}

#[cfg(target_os = "linux")]
pub(super) fn syncfs(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: syncfs only reads the descriptor, which `file` keeps open for the call.
    match unsafe { libc::syncfs(file.as_raw_fd()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn syncfs(file: &File) -> io::Result<()> {
    file.sync_all()
}

/// Drops `file`'s pages from the page cache, once a sync has made them clean.
///
/// Why: a metadata file is written once and the catalog never reads it back (loads come
/// from the store), so its pages only crowd out the database's. And new page-cache
/// pages are the dearest part of writing a file where the hypervisor backs guest memory
/// on first touch (as on Firecracker VMs with free page reporting, where writing a
/// 31 KB file into fresh pages took 2–10× as long as into recycled ones): pages handed
/// back soon are the next file's, still backed. A hint only: a page still dirty stays,
/// and an error changes nothing.
#[cfg(target_os = "linux")]
pub(super) fn drop_cached_pages(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise only reads the descriptor, which `file` keeps open for the call.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

#[cfg(not(target_os = "linux"))]
pub(super) fn drop_cached_pages(_file: &File) {}

/// How many of the file at `path`'s pages are in the page cache, and how many pages it
/// has; `None` where that cannot be told (not Linux, or tmpfs, whose pages are the file
/// and never drop).
#[cfg(all(test, target_os = "linux"))]
pub(super) fn cached_pages(path: &std::path::Path) -> Option<(usize, usize)> {
    use std::os::fd::AsRawFd;
    const TMPFS_MAGIC: libc::c_long = 0x0102_1994;
    let file = File::open(path).unwrap();
    // SAFETY: the structs and the mapping are this function's own, and the mapping is
    // only read by mincore before it is unmapped.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        assert_eq!(libc::fstatfs(file.as_raw_fd(), &mut fs), 0);
        if fs.f_type as libc::c_long == TMPFS_MAGIC {
            return None;
        }
        let len = file.metadata().unwrap().len() as usize;
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        let mut resident = vec![0u8; len.div_ceil(page)];
        assert_eq!(libc::mincore(map, len, resident.as_mut_ptr()), 0);
        libc::munmap(map, len);
        let cached = resident.iter().filter(|&&r| r & 1 == 1).count();
        Some((cached, resident.len()))
    }
}

#[cfg(all(test, not(target_os = "linux")))]
pub(super) fn cached_pages(_path: &std::path::Path) -> Option<(usize, usize)> {
    None
}

/// The rounds of one file system.
#[derive(Default)]
struct Rounds {
    state: Mutex<State>,
    ended: Condvar,
    /// The descriptor rounds sync through (see the module doc).
    anchor: std::sync::OnceLock<File>,
}

#[derive(Default)]
struct State {
    /// Rounds started and ended so far (numbered from 1); at most one runs at a time.
    started: u64,
    ended: u64,
    running: bool,
    /// Whether any round has failed: every writer fails from then on.
    failed: bool,
}

impl Rounds {
    /// Waits for a round that starts after this call, leading it if no round is running;
    /// `run` is the round's work.
    fn sync(&self, run: impl Fn() -> io::Result<()>) -> io::Result<()> {
        let mut state = self.state.lock().expect("sync rounds poisoned");
        let needed = state.started + 1;
        loop {
            if state.ended >= needed {
                // A failure of any round, before or after the needed one.
                return match state.failed {
                    true => Err(io::Error::other(
                        "syncing the file system failed; the file may not be durable",
                    )),
                    false => Ok(()),
                };
            }
            if !state.running {
                state.running = true;
                state.started += 1;
                let round = state.started;
                drop(state);
                let result = run();
                state = self.state.lock().expect("sync rounds poisoned");
                state.running = false;
                state.ended = round;
                if result.is_err() {
                    state.failed = true;
                }
                self.ended.notify_all();
                if round >= needed {
                    return match (result, state.failed) {
                        (Ok(()), true) => Err(io::Error::other(
                            "an earlier sync of the file system failed; the file may not be durable",
                        )),
                        (result, _) => result,
                    };
                }
                continue;
            }
            state = self.ended.wait(state).expect("sync rounds poisoned");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    #[test]
    fn every_caller_waits_for_a_round_that_started_after_it_and_rounds_are_shared() {
        let rounds = Arc::new(Rounds::default());
        // Round n's start and end, as a sequence of events.
        let clock = Arc::new(AtomicU64::new(0));
        let log = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
        let callers: Vec<_> = (0..16)
            .map(|i| {
                let (rounds, clock, log) = (rounds.clone(), clock.clone(), log.clone());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(i % 4));
                    let called = clock.fetch_add(1, Ordering::SeqCst);
                    rounds
                        .sync(|| {
                            let start = clock.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(5));
                            let end = clock.fetch_add(1, Ordering::SeqCst);
                            log.lock().unwrap().push((start, end));
                            Ok(())
                        })
                        .unwrap();
                    let returned = clock.fetch_add(1, Ordering::SeqCst);
                    (called, returned)
                })
            })
            .collect();
        let calls: Vec<_> = callers.into_iter().map(|t| t.join().unwrap()).collect();
        let log = log.lock().unwrap();
        for (called, returned) in calls {
            assert!(
                log.iter()
                    .any(|&(start, end)| start > called && end < returned),
                "no whole round between {called} and {returned}: {log:?}"
            );
        }
        assert!(log.len() < 16, "rounds were not shared: {}", log.len());
    }

    #[test]
    fn a_failed_round_fails_its_callers_and_every_later_one() {
        let rounds = Rounds::default();
        assert!(rounds.sync(|| Ok(())).is_ok());
        assert!(rounds.sync(|| Err(io::Error::other("disk"))).is_err());
        // The kernel has reported the error once: a round that now succeeds cannot
        // vouch for the pages it lost.
        assert!(rounds.sync(|| Ok(())).is_err());
    }

    #[test]
    fn a_real_file_system_round() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let rounds = SyncRounds::default();
        rounds.sync(&file).unwrap();
        rounds.sync(&file).unwrap();
    }
}
