//! Commits to one table or view queue inside this process, and on the embedded store they
//! pipeline.
//!
//! [`CommitLocks`] serialises commits to the same object, so that concurrent writers queue
//! instead of failing each other's compare-and-swap. Across nodes, the store's
//! compare-and-swap (and a retry) still decides. Striped: a fixed set of mutexes chosen by
//! hash, so memory does not grow with the number of tables.
//!
//! **Pipelining** (only where the store can fix a write's place in the commit order at
//! once: the embedded store, the database's only writer, and PostgreSQL with group commit,
//! whose committer keeps a node's writes to one table in queue order). A commit holds its
//! lock while it reads, checks its requirements, writes its metadata file and puts its
//! batch in the store's queue, and then lets go: the next commit to the same table
//! prepares on top of the one still being made durable (its *tip*), instead of waiting a
//! whole fsync of the store for it. Both still land in commit order, each with its own compare-and-swap, so:
//! - nothing is acknowledged before it is durable (each waits for its own batch);
//! - if the earlier one fails, the later one's compare-and-swap fails too, and it is redone
//!   on the stored state under the lock (requirements checked again), as after any race;
//! - a tip lives only while its write is in flight, and every other writer of the object
//!   (drop, rename, undrop) clears it when it takes the lock, so a tip never outlives
//!   what it describes;
//! - a commit whose requirements fail against a tip waits for that write to settle and
//!   checks again against the stored state: a 409 is never caused by a write that did not
//!   commit;
//! - so does a commit whose requirements pass against a tip on an object it does not
//!   write (a transaction's requirement-only table, a commit without updates): with no
//!   write, no compare-and-swap would fail if the tip's write failed, and the commit
//!   would have relied on a state that was never committed.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use tokio::sync::{Mutex, MutexGuard};

use crate::model::{CatalogId, Ident};
use crate::store::{ObjectWrite, StoredObject};

const COMMIT_LOCK_STRIPES: usize = 1024;

pub(super) struct CommitLocks {
    stripes: Vec<Mutex<()>>,
    /// The state each in-flight pipelined write will leave its object in.
    tips: std::sync::Mutex<HashMap<(CatalogId, Ident), StoredObject>>,
    /// Woken whenever tips are cleared.
    cleared: tokio::sync::Notify,
}

pub(super) type Guards<'a> = Vec<MutexGuard<'a, ()>>;

impl CommitLocks {
    pub(super) fn new() -> Self {
        CommitLocks {
            stripes: (0..COMMIT_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            tips: Default::default(),
            cleared: tokio::sync::Notify::new(),
        }
    }

    fn stripe(catalog: CatalogId, ident: &Ident) -> usize {
        let mut hasher = DefaultHasher::new();
        catalog.hash(&mut hasher);
        ident.hash(&mut hasher);
        (hasher.finish() % COMMIT_LOCK_STRIPES as u64) as usize
    }

    /// Locks the objects for a write other than a pipelined commit, and forgets their tips
    /// (what this write does, no tip describes).
    pub(super) async fn lock<'a>(&'a self, catalog: CatalogId, idents: &[&Ident]) -> Guards<'a> {
        let guards = self.lock_keeping_tips(catalog, idents).await;
        let mut tips = self.tips();
        for ident in idents {
            tips.remove(&(catalog, (*ident).clone()));
        }
        guards
    }

    /// Locks the objects for a commit that may build on their tips. In stripe order, so
    /// that overlapping multi-table transactions cannot deadlock.
    pub(super) async fn lock_keeping_tips<'a>(
        &'a self,
        catalog: CatalogId,
        idents: &[&Ident],
    ) -> Guards<'a> {
        let mut stripes: Vec<usize> = idents.iter().map(|i| Self::stripe(catalog, i)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut guards = Vec::with_capacity(stripes.len());
        for stripe in stripes {
            guards.push(self.stripes[stripe].lock().await);
        }
        guards
    }

    fn tips(&self) -> std::sync::MutexGuard<'_, HashMap<(CatalogId, Ident), StoredObject>> {
        self.tips.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state an in-flight write will leave `ident` in (call with its lock held).
    pub(super) fn tip(&self, catalog: CatalogId, ident: &Ident) -> Option<StoredObject> {
        self.tips().get(&(catalog, ident.clone())).cloned()
    }

    /// Records `writes` as their objects' tips (call with their locks held, once the batch
    /// has its place in the commit order) until the returned value is dropped: when the
    /// write is durable or refused, or its request was cancelled.
    pub(super) fn set_tips<'a>(&'a self, catalog: CatalogId, writes: &[ObjectWrite]) -> Tips<'a> {
        let mut tips = self.tips();
        let mut set = Vec::with_capacity(writes.len());
        for w in writes {
            let tip = StoredObject {
                kind: w.kind,
                metadata_location: w.metadata_location.clone(),
                metadata: w.metadata.as_str().into(),
            };
            tips.insert((catalog, w.ident.clone()), tip);
            set.push(((catalog, w.ident.clone()), w.metadata_location.clone()));
        }
        Tips { locks: self, set }
    }

    /// Waits until no write to `idents` is in flight (call with their locks held, so that
    /// no new one starts).
    pub(super) async fn settled(&self, catalog: CatalogId, idents: &[Ident]) {
        loop {
            let cleared = self.cleared.notified();
            {
                let tips = self.tips();
                if idents
                    .iter()
                    .all(|i| !tips.contains_key(&(catalog, i.clone())))
                {
                    return;
                }
            }
            cleared.await;
        }
    }

    /// Forgets the tips of `idents` (a commit redone on the stored state).
    pub(super) fn forget_tips(&self, catalog: CatalogId, idents: &[Ident]) {
        let mut tips = self.tips();
        for ident in idents {
            tips.remove(&(catalog, ident.clone()));
        }
        self.cleared.notify_waiters();
    }
}

/// Tips set by one pipelined write; dropping it forgets those still its own (a later
/// commit may have replaced them with its own).
pub(super) struct Tips<'a> {
    locks: &'a CommitLocks,
    set: Vec<((CatalogId, Ident), String)>,
}

impl Drop for Tips<'_> {
    fn drop(&mut self) {
        let mut tips = self.locks.tips();
        for (key, location) in &self.set {
            if tips
                .get(key)
                .is_some_and(|t| &t.metadata_location == location)
            {
                tips.remove(key);
            }
        }
        drop(tips);
        self.locks.cleared.notify_waiters();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::{Namespace, ObjectKind};

    pub(in crate::catalog) fn ident(name: &str) -> Ident {
        Ident::new(Namespace::root().child("ns"), name.into()).unwrap()
    }

    pub(in crate::catalog) fn write(name: &str, location: &str) -> ObjectWrite {
        ObjectWrite {
            ident: ident(name),
            kind: ObjectKind::Table,
            expected_metadata_location: None,
            metadata_location: location.into(),
            metadata: "{}".into(),
            location: "file:///t/".into(),
            check_location: false,
        }
    }

    #[tokio::test]
    async fn a_tip_lives_while_its_write_is_in_flight() {
        let locks = std::sync::Arc::new(CommitLocks::new());
        let c = CatalogId(1);
        let t = ident("t");
        let first = locks.set_tips(c, &[write("t", "v1")]);
        assert_eq!(locks.tip(c, &t).unwrap().metadata_location, "v1");
        // A later commit replaced it: the earlier one's end leaves the later tip alone.
        let second = locks.set_tips(c, &[write("t", "v2")]);
        drop(first);
        assert_eq!(locks.tip(c, &t).unwrap().metadata_location, "v2");
        let waiter = locks.clone();
        let waiting = tokio::spawn(async move { waiter.settled(c, &[ident("t")]).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(second);
        waiting.await.unwrap();
        assert!(locks.tip(c, &t).is_none());
    }

    #[tokio::test]
    async fn other_writers_clear_the_tips_of_what_they_lock() {
        let locks = CommitLocks::new();
        let c = CatalogId(1);
        let tips = locks.set_tips(c, &[write("a", "v1"), write("b", "v1")]);
        drop(locks.lock_keeping_tips(c, &[&ident("a")]).await);
        assert!(locks.tip(c, &ident("a")).is_some());
        drop(locks.lock(c, &[&ident("a")]).await);
        assert!(locks.tip(c, &ident("a")).is_none());
        assert!(locks.tip(c, &ident("b")).is_some());
        drop(tips);
        assert!(locks.tip(c, &ident("b")).is_none());
    }
}
