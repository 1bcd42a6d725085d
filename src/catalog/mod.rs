//! The catalog: every use case of the Iceberg REST and Polaris management APIs, in plain
//! Rust that knows nothing of HTTP. Handlers in `http` parse a request, call one method
//! here and map the result.
//!
//! Every entry point takes the [`RequestContext`] first: who asks, the request id, the
//! access delegation asked for and the idempotency key. Authorization belongs at those
//! entry points, after the resources are resolved (a multi-table transaction sees every
//! table of its body there), not in an HTTP middleware that only sees a URL.
//!
//! - `context`: the request context; `outcome`: results as values (rendered by HTTP,
//!   kept by idempotency keys).
//! - `catalogs`: catalogs (Polaris's management API).
//! - `namespaces`, `tables`, `views`: the Iceberg REST resources; `objects`: what
//!   tables and views share (create, register, list, rename, drop, the commit loop);
//!   `generic`: Polaris's generic tables (non-Iceberg tables by name and format);
//!   `policies`: Polaris's policies, their attachments and what applies where.
//! - `commit`: pure commit rules over iceberg-rust's metadata builders; `locks`: commits
//!   to one object queue (and, on the embedded store, pipeline).
//! - `locations`: where tables and views live, and which locations are allowed.
//! - `events`: the REST events query over the change-event outbox.
//! - `dropped`: soft-deleted tables and views: list, undrop, purge, expire.
//! - `scan`: server-side scan planning: which data and delete files a scan reads.
//! - `delegation`: storage settings, vended credentials and remote signing for a
//!   table's files, scoped by the caller's privileges.
//! - `error`: the catalog's errors, and the one translation of store and file errors.
//!
//! Every change reaches the store as one `WriteBatch` built by [`Catalog::batch`], which
//! attaches the request's idempotency record and the change's events (sealed by
//! [`Catalog::events`]), so both commit with the change or not at all.

pub mod access;
pub mod catalogs;
pub mod commit;
pub mod commit_checks;
pub mod context;
pub mod delegation;
mod dropped;
pub mod error;
mod events;
pub mod generic;
pub mod locations;
mod locks;
pub mod namespaces;
pub mod notifications;
mod objects;
pub mod outcome;
pub mod pagination;
mod parsed;
pub mod policies;
pub mod scan;
pub mod schemas;
pub use parsed::set_self_check;
pub mod security;
mod staged;
pub mod tables;
pub mod temporal;
pub mod views;

use std::sync::Arc;
use std::time::Duration;

use crate::events::{ChangeEvent, Draft, Origin};
use crate::model::{now_ms, CatalogId};
use crate::storage::vending::Vendor;
use crate::storage::FileStores;
use crate::store::{Applied, IdempotencyRecord, Mutation, Store, WriteBatch};
pub use context::RequestContext;
use error::CatalogResult;
use locks::CommitLocks;
pub use outcome::Outcome;

/// Settings of the catalog service, passed in explicitly by `floe serve`.
#[derive(Debug, Clone)]
pub struct CatalogSettings {
    /// Root under which a catalog created without `default-base-location` keeps its files.
    pub warehouse_root: String,
    /// fsync metadata files before swapping pointers (durable against power loss).
    pub fsync: bool,
    /// Make them durable in `syncfs` rounds shared by concurrent commits
    /// (`--fsync-batch`).
    pub fsync_batch: bool,
    /// Make local ones durable by this syncer's rounds, off the commit's path, the
    /// embedded store's journal keeping their text meanwhile (`--fsync-journal`).
    pub file_journal: Option<Arc<crate::storage::journal::Syncer>>,
    /// Attempts of one commit; after the first lost race it waits for a lock instead of
    /// racing, so more than two are rare (e.g. a deadlock between multi-table commits).
    pub max_commit_attempts: u32,
    /// Largest metadata file accepted by register.
    pub max_metadata_file_bytes: u64,
    /// How long a client may retry with one `Idempotency-Key` (advertised in
    /// `/v1/config` as `idempotency-key-lifetime`); outcomes are kept a grace period
    /// longer.
    pub idempotency_lifetime: Duration,
    /// The `storageConfigInfo` of catalogs created without one (and of the bootstrap
    /// catalog).
    pub default_storage: serde_json::Value,
    /// How long vended storage credentials live.
    pub credential_lifetime: Duration,
    /// Whether changes write events to the outbox (`--events off` turns it off).
    pub events: bool,
    /// How long a dropped table or view stays recoverable (undrop); zero: drops are
    /// final at once.
    pub drop_retention: Duration,
    /// Most files one round of a purge deletes (at least 1): a large table is purged
    /// over several rounds, none of which holds a request or the expirer for long.
    pub purge_batch_files: usize,
    /// Bytes of memory (estimated: `parsed::model_bytes`) the parsed models this node
    /// keeps for the next commit of the same table or view may take (0: off).
    pub commit_cache_bytes: usize,
}

/// The commit cache's default budget, in MiB (`--commit-cache-mib`). 128, not 64: the
/// warmed-up 50/50 mix, run for 120 s, outgrew 64 MiB (each write adds a property) and
/// its misses cost 12% of the server's CPU per request; 32 had done so within 40 s. The
/// worst case, 60,000 small tables with one commit each, then holds ~58 MiB more than at
/// 64 (236 MiB RSS in all; BENCHMARKS.md, "The commit cache at 128 MiB").
pub const DEFAULT_COMMIT_CACHE_MIB: usize = 128;

/// Kept beyond the advertised lifetime, for clock skew and slow retries.
pub const IDEMPOTENCY_GRACE: Duration = Duration::from_secs(5 * 60);

impl Default for CatalogSettings {
    fn default() -> Self {
        CatalogSettings {
            warehouse_root: "file:///tmp/floe-warehouse".into(),
            fsync: true,
            fsync_batch: false,
            file_journal: None,
            max_commit_attempts: 10,
            max_metadata_file_bytes: 64 * 1024 * 1024,
            idempotency_lifetime: Duration::from_secs(30 * 60),
            default_storage: serde_json::json!({ "storageType": "FILE" }),
            credential_lifetime: Duration::from_secs(3600),
            events: true,
            drop_retention: Duration::from_secs(7 * 86_400),
            purge_batch_files: 10_000,
            commit_cache_bytes: DEFAULT_COMMIT_CACHE_MIB << 20,
        }
    }
}

pub struct Catalog {
    store: Arc<dyn Store>,
    files: FileStores,
    vendor: Vendor,
    catalog_cache: delegation::CatalogCache,
    settings: CatalogSettings,
    commit_locks: CommitLocks,
    security: security::SecurityCache,
    /// The clients of the federated catalogs' remotes.
    remotes: crate::federation::remote::Remotes,
    /// The models of the documents this node's commits wrote, for the next commit.
    parsed: parsed::ParsedCache<parsed::Model>,
    /// Woken after every write that added events: this node's relay publishes them
    /// without waiting for its next poll.
    events_written: Arc<tokio::sync::Notify>,
}

impl Catalog {
    pub fn new(store: Arc<dyn Store>, settings: CatalogSettings) -> Self {
        Catalog {
            store,
            files: FileStores::new(
                settings.fsync,
                settings.fsync_batch,
                settings.file_journal.clone(),
            ),
            vendor: Vendor::new(settings.credential_lifetime),
            parsed: parsed::ParsedCache::new(settings.commit_cache_bytes),
            catalog_cache: Default::default(),
            settings,
            commit_locks: CommitLocks::new(),
            security: security::SecurityCache::default(),
            remotes: Default::default(),
            events_written: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// What the event relay waits on between polls.
    pub fn events_written(&self) -> Arc<tokio::sync::Notify> {
        self.events_written.clone()
    }

    /// The store, for the server's background tasks (the event relay).
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Writes a batch, directly or inside the lock of a commit that lost a race, and
    /// wakes the relay if it carried events.
    async fn apply(
        &self,
        batch: WriteBatch,
        locked: Option<Box<dyn crate::store::LockedObjects>>,
    ) -> Result<Applied, crate::store::StoreError> {
        let has_events = !batch.events.is_empty();
        let wrote_security = batch.security.is_some();
        let read_security = wrote_security || batch.security_seen.is_some();
        let started = std::time::Instant::now();
        let applied = match locked {
            Some(locked) => locked.write(batch).await,
            None => self.store.write(batch).await,
        };
        // This node's model must show a change it made, and be fresh for the retry of a
        // write that lost a race on it (another node may have changed it unseen).
        let stale = match &applied {
            Ok(_) => wrote_security,
            Err(crate::store::StoreError::Conflict) => read_security,
            Err(_) => false,
        };
        if stale {
            if let Err(e) = self.reload_security().await {
                tracing::warn!(error = %e, "could not re-read the security model");
            }
        }
        self.written(has_events, started, applied)
    }

    /// What follows every write: its duration in the metrics, and the relay woken if it
    /// carried events.
    fn written(
        &self,
        has_events: bool,
        started: std::time::Instant,
        applied: Result<Applied, crate::store::StoreError>,
    ) -> Result<Applied, crate::store::StoreError> {
        if crate::metrics::enabled() {
            crate::metrics::metrics()
                .store_write_duration
                .observe(started.elapsed().as_secs_f64());
        }
        if has_events && applied.is_ok() {
            self.events_written.notify_one();
        }
        applied
    }

    pub fn idempotency_lifetime(&self) -> Duration {
        self.settings.idempotency_lifetime
    }

    /// Whether the store can serve requests now (reachable, schema up to date).
    pub async fn is_ready(&self) -> Result<(), String> {
        self.store.ready().await.map_err(|e| e.to_string())
    }

    /// The store's kind and its connection pool, for `/metrics`.
    pub fn store_state(&self) -> (&'static str, Option<crate::metrics::PoolState>) {
        (self.store.kind(), self.store.pool_state())
    }

    /// The one way a change is made: the mutation, plus the request's idempotency
    /// record carrying the outcome the client will get and the change's events, in one
    /// store transaction.
    fn batch(
        &self,
        ctx: &RequestContext,
        mutation: Mutation,
        outcome: &Outcome,
        events: Vec<ChangeEvent>,
    ) -> WriteBatch {
        self.batch_with(ctx, mutation, || outcome.to_json(), events)
    }

    /// As [`Self::batch`], writing the outcome's JSON only for a request that has an
    /// idempotency key: a commit's outcome holds a copy of its new document (tens of KB),
    /// which every commit made and dropped though only keyed requests keep it.
    fn batch_with(
        &self,
        ctx: &RequestContext,
        mutation: Mutation,
        outcome_json: impl FnOnce() -> String,
        events: Vec<ChangeEvent>,
    ) -> WriteBatch {
        let mut batch = WriteBatch::new(mutation, now_ms());
        batch.idempotency = ctx.idempotency.as_ref().map(|key| IdempotencyRecord {
            key: key.key.clone(),
            fingerprint: key.fingerprint.clone(),
            outcome: outcome_json(),
            expires_ms: key.expires_ms,
        });
        batch.events = events;
        batch
    }

    async fn write(
        &self,
        ctx: &RequestContext,
        mutation: Mutation,
        outcome: &Outcome,
        events: Vec<ChangeEvent>,
    ) -> CatalogResult<Applied> {
        Ok(self
            .apply(self.batch(ctx, mutation, outcome, events), None)
            .await?)
    }

    /// Seals a change's event drafts with who made it and when (none when the outbox is
    /// off). `catalog`: the catalog they belong to; `None` for service-wide changes.
    fn events(
        &self,
        ctx: &RequestContext,
        catalog: Option<(CatalogId, &str)>,
        drafts: Vec<Draft>,
    ) -> Vec<ChangeEvent> {
        if !self.settings.events || drafts.is_empty() {
            return Vec::new();
        }
        let origin = Origin {
            principal: ctx.principal.name.clone(),
            request_id: ctx.request_id.clone(),
            time_ms: now_ms(),
        };
        crate::events::seal(&origin, catalog, drafts)
    }

    /// Keeps the outcome of a request that changed nothing (a commit without updates, a
    /// final rejection) under its idempotency key, if it has one.
    pub async fn record_outcome(
        &self,
        ctx: &RequestContext,
        outcome: &Outcome,
    ) -> CatalogResult<()> {
        if ctx.idempotency.is_some() {
            self.write(ctx, Mutation::None, outcome, Vec::new()).await?;
        }
        Ok(())
    }

    /// The live record of an idempotency key.
    pub async fn idempotency_record(&self, key: &str) -> CatalogResult<Option<IdempotencyRecord>> {
        Ok(self.store.idempotency_record(key, now_ms()).await?)
    }

    /// Deletes expired idempotency records (`floe serve` runs this periodically).
    pub async fn purge_expired_idempotency(&self) -> CatalogResult<u64> {
        Ok(self.store.purge_expired_idempotency(now_ms()).await?)
    }
}

/// A fresh random id for a new catalog.
fn new_catalog_id() -> CatalogId {
    use rand::Rng;
    CatalogId(rand::rng().random_range(1..i64::MAX))
}
