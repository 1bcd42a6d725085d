//! The relay: publishes the outbox to one broker, at least once, in position order.
//!
//! Any number of nodes may run a relay for the same sink; one holds the lease (a row in
//! the store, renewed while it works) and publishes, the others wait to take over when
//! the lease lapses. The relay publishes a batch, waits until the broker acknowledged all
//! of it, then records the batch's last position as confirmed. After a crash the next
//! holder resumes from the last confirmed position, so a batch may be published twice
//! (every event carries its id as the broker's dedupe id) but never skipped. A broker
//! that is down only stops the relay — retried with backoff — and never a commit: the
//! outbox keeps growing until the broker is back, then drains.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::StoredEvent;
use crate::model::now_ms;
use crate::store::{EventRead, Store};

/// Where events go: a broker or a webhook.
#[async_trait]
pub trait Sink: Send + Sync {
    /// The relay's name in the store (its lease and confirmed position).
    fn name(&self) -> &str;
    /// Publishes every event, in order; `Ok` only once the broker acknowledged all.
    async fn publish(&self, events: &[StoredEvent]) -> anyhow::Result<()>;
}

#[derive(Debug, Clone)]
pub struct RelaySettings {
    /// Most events per publish.
    pub batch: usize,
    /// How often an idle relay looks for events written by other nodes (its own node's
    /// wake it at once).
    pub poll: Duration,
    /// How long a lease lasts without renewal: a crashed holder's successor takes over
    /// after at most this long.
    pub lease: Duration,
}

impl Default for RelaySettings {
    fn default() -> Self {
        RelaySettings {
            batch: 500,
            poll: Duration::from_millis(100),
            lease: Duration::from_secs(10),
        }
    }
}

pub struct Relay {
    store: Arc<dyn Store>,
    sink: Arc<dyn Sink>,
    /// This node's identity for the lease.
    holder: String,
    wake: Arc<Notify>,
    settings: RelaySettings,
}

/// Longest wait between attempts while the broker fails.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Relay {
    pub fn new(
        store: Arc<dyn Store>,
        sink: Arc<dyn Sink>,
        wake: Arc<Notify>,
        settings: RelaySettings,
    ) -> Self {
        Relay {
            store,
            sink,
            holder: uuid::Uuid::now_v7().to_string(),
            wake,
            settings,
        }
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        let lease_ms = self.settings.lease.as_millis() as i64;
        let name = self.sink.name().to_string();
        // Some(position) while this node holds the lease.
        let mut held: Option<i64> = None;
        let mut renewed_ms = 0;
        // A batch the broker refused: sent again exactly as it was (not re-read, which
        // could add events), so a receiver that deduplicates whole deliveries by their
        // id (webhooks) loses nothing.
        let mut pending: Option<Vec<StoredEvent>> = None;
        let mut backoff = Duration::from_millis(100);
        loop {
            let now = now_ms();
            if held.is_none() || now - renewed_ms > lease_ms / 3 {
                match self
                    .store
                    .claim_relay(&name, &self.holder, now, now + lease_ms)
                    .await
                {
                    Ok(Some(position)) => {
                        if held.is_none() {
                            tracing::info!(relay = %name, position, "event relay holds the lease");
                        }
                        held = Some(position);
                        renewed_ms = now;
                    }
                    Ok(None) => {
                        held = None;
                        pending = None;
                        tokio::time::sleep(self.settings.lease / 3).await;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(relay = %name, error = %e, "event relay cannot reach the store");
                        held = None;
                        pending = None;
                        tokio::time::sleep(backoff).await;
                        continue;
                    }
                }
            }
            let after = held.expect("held above");
            let read = EventRead {
                after,
                catalog: None,
                limit: self.settings.batch,
            };
            let read = match pending.take() {
                Some(batch) => Ok(batch),
                None => self.store.read_events(&read).await,
            };
            let events = match read {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(relay = %name, error = %e, "event relay cannot read the outbox");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            let Some(last) = events.last().map(|e| e.position) else {
                crate::metrics::metrics().relay_lag.set(0);
                let _ = tokio::time::timeout(self.settings.poll, self.wake.notified()).await;
                continue;
            };
            if let Err(e) = self.sink.publish(&events).await {
                tracing::warn!(relay = %name, error = %e, backlog_from = after + 1, "event broker refused a batch; retrying");
                pending = Some(events);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            backoff = Duration::from_millis(100);
            let now = now_ms();
            match self
                .store
                .confirm_relay(&name, &self.holder, last, now + lease_ms)
                .await
            {
                Ok(true) => {
                    held = Some(last);
                    renewed_ms = now;
                    let m = crate::metrics::metrics();
                    m.events_relayed.inc_by(events.len() as u64);
                    if let Ok((_, written)) = self.store.event_bounds().await {
                        m.relay_lag.set(written.saturating_sub(last));
                    }
                }
                Ok(false) => {
                    tracing::warn!(relay = %name, "event relay lost its lease to another node");
                    held = None;
                }
                // Published but not recorded: the next holder publishes the batch again
                // (brokers drop the duplicates by event id).
                Err(e) => {
                    tracing::warn!(relay = %name, error = %e, "event relay could not record its position");
                    held = None;
                }
            }
        }
    }
}

/// Deletes events past retention every `every` (the outbox's only other writer).
pub async fn expire_events(store: Arc<dyn Store>, retention: Duration, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let before = now_ms() - retention.as_millis() as i64;
        match store.purge_events(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "expired change events past retention"),
            Err(e) => tracing::warn!(error = %e, "could not expire change events"),
        }
    }
}
