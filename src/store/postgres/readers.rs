//! Read connections shared by concurrent requests.
//!
//! A pooled connection serves one request at a time, so under load each backend
//! process wakes for one statement, answers it and sleeps again: on a small machine
//! that wake-up (epoll, a context switch, a receive) costs about as much as the
//! statement. A single-statement read needs no connection of its own, though:
//! tokio-postgres pipelines the statements of concurrent callers on one connection,
//! each with its own Sync (so its own implicit transaction, error and snapshot), and
//! the backend then finds the next statement already waiting. So reads go round-robin
//! over a few pooled connections held here, which several requests use at once.
//!
//! Linearizability is unchanged: each statement still runs after its request arrived
//! and before its answer is sent, on its own snapshot. A slot whose connection closed
//! (the database restarted, the network broke) is refilled from the pool by the next
//! read that lands on it; writes keep taking connections of their own from the pool.
//! Behind a pooler in transaction mode (statements sent unnamed, `queries.rs`) nothing is
//! shared: PgBouncer before 1.21 cannot follow pipelined transactions on one client
//! connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use deadpool_postgres::{Object, Pool};

use super::pooled;
use crate::store::StoreResult;

pub(super) struct Readers {
    slots: Vec<Mutex<Option<Arc<Object>>>>,
    next: AtomicUsize,
}

impl Readers {
    /// `count` shared connections, opened on first use; 0 gives each read a pooled
    /// connection of its own.
    pub(super) fn new(count: usize) -> Readers {
        Readers {
            slots: (0..count).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// A connection for one read: the next shared one, or from `pool` if none are kept.
    pub(super) async fn get(&self, pool: &Pool) -> StoreResult<Arc<Object>> {
        if self.slots.is_empty() || !super::queries::prepared() {
            return Ok(Arc::new(pooled(pool).await?));
        }
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        if let Some(shared) = live(&slot.lock().expect("reader slot")) {
            return Ok(shared);
        }
        // Opened outside the lock; if another read filled the slot meanwhile, that one
        // is used and this connection goes back to the pool when dropped.
        let fresh = Arc::new(pooled(pool).await?);
        let mut held = slot.lock().expect("reader slot");
        if let Some(shared) = live(&held) {
            return Ok(shared);
        }
        *held = Some(fresh.clone());
        Ok(fresh)
    }
}

fn live(slot: &Option<Arc<Object>>) -> Option<Arc<Object>> {
    slot.as_ref().filter(|c| !c.is_closed()).cloned()
}
