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
    /// The largest event, rendered, that the broker takes (see `fit`).
    fn max_event_bytes(&self) -> usize {
        MAX_EVENT_BYTES
    }
    /// Publishes every event, in order; `Ok` only once the broker acknowledged all.
    async fn publish(&self, events: &[StoredEvent]) -> anyhow::Result<()>;
}

/// The largest event relayed whole: below the 1 MB that NATS (`max_payload`) and Kafka
/// (`message.max.bytes`) take by default, with room for a record's key and headers.
pub const MAX_EVENT_BYTES: usize = 900 * 1024;

/// A relay's read of the outbox stops past this many bytes of events (at least one is
/// read), whatever its batch size: a commit's event may be megabytes before it is fitted.
const MAX_BATCH_BYTES: usize = 16 << 20;

/// The event as the sink can take it. A commit's updates may be megabytes (request
/// bodies go up to `--max-body-bytes`), and a broker refuses a message over its limit
/// every time: sent as it is, one such event would stop the relay for good, and every
/// event after it. So an event larger than `max` goes without the largest members of its
/// `data` (its updates and requirements, typically), largest first until it fits, and
/// names them in `data["x-floe-omitted"]`; the pull endpoint still serves it whole.
pub fn fit(event: &StoredEvent, max: usize) -> Option<StoredEvent> {
    /// Kept whatever the size (`docs/events.schema.json` requires them; all are small).
    const REQUIRED: [&str; 4] = [
        "operation-type",
        "principal",
        "request-id",
        "request-event-count",
    ];
    // `render` adds the two store numbers; counted with room to spare.
    const NUMBERS: usize = 64;
    if event.body.len() + NUMBERS <= max {
        return None;
    }
    let mut body: serde_json::Value = serde_json::from_str(&event.body).ok()?;
    let data = body.get_mut("data")?.as_object_mut()?;
    let mut sizes: Vec<(String, usize)> = data
        .iter()
        .filter(|(k, _)| !REQUIRED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.to_string().len() + k.len()))
        .collect();
    // Largest first; ties by name, so a retry sends the same bytes.
    sizes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    // With `,"x-floe-omitted":[]` and, below, each name it lists.
    let mut size = event.body.len() + NUMBERS + 20;
    let mut omitted = Vec::new();
    for (key, bytes) in sizes {
        if size <= max {
            break;
        }
        data.remove(&key);
        size = size.saturating_sub(bytes) + key.len() + 3;
        omitted.push(key);
    }
    omitted.sort();
    data.insert("x-floe-omitted".into(), omitted.into());
    Some(StoredEvent {
        body: body.to_string(),
        ..event.clone()
    })
}

/// The batch with every event made to fit the sink (`fit`), logged where one did not.
fn fit_all(events: Vec<StoredEvent>, max: usize, relay: &str) -> Vec<StoredEvent> {
    events
        .into_iter()
        .map(|event| match fit(&event, max) {
            None => event,
            Some(fitted) => {
                tracing::warn!(relay, event = %event.id, position = event.position, bytes = event.body.len(), max,
                    "event larger than the sink takes: relayed without its largest data members (the pull endpoint has it whole)");
                fitted
            }
        })
        .collect()
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
                max_bytes: MAX_BATCH_BYTES,
            };
            let read = match pending.take() {
                Some(batch) => Ok(batch),
                None => self
                    .store
                    .read_events(&read)
                    .await
                    .map(|events| fit_all(events, self.sink.max_event_bytes(), &name)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CatalogId;

    fn event(body: serde_json::Value) -> StoredEvent {
        StoredEvent {
            position: 7,
            sequence: 2,
            catalog_id: CatalogId(1),
            entity: "object:u".into(),
            operation: "update-table".into(),
            time_ms: 0,
            id: "e".into(),
            body: body.to_string(),
        }
    }

    #[test]
    fn an_event_too_large_for_the_sink_goes_without_its_largest_data() {
        let big = "x".repeat(5_000);
        let e = event(serde_json::json!({
            "data": {"operation-type": "update-table", "table-uuid": "u",
                     "updates": [{"action": "set-properties", "updates": {"k": big}}],
                     "requirements": [{"type": "assert-table-uuid", "uuid": "u"}]},
            "id": "e", "specversion": "1.0"
        }));
        // Small enough: untouched.
        assert_eq!(fit(&e, 10_000), None);
        let fitted = fit(&e, 1_000).expect("shrunk");
        assert!(fitted.render().len() <= 1_000, "{}", fitted.render());
        let v: serde_json::Value = serde_json::from_str(&fitted.render()).unwrap();
        assert_eq!(v["data"]["x-floe-omitted"], serde_json::json!(["updates"]));
        assert_eq!(v["data"]["table-uuid"], "u");
        assert_eq!(v["data"]["requirements"][0]["uuid"], "u");
        assert_eq!(
            (v["position"].as_i64(), v["id"].as_str()),
            (Some(7), Some("e"))
        );
        // The same bytes every time (a refused batch is sent again as it was).
        assert_eq!(fit(&e, 1_000), Some(fitted));
        // Tighter: the next largest go too, each named; what the schema requires stays.
        let tight = fit(&e, 200).expect("shrunk");
        assert!(tight.render().len() <= 200, "{}", tight.render());
        let v: serde_json::Value = serde_json::from_str(&tight.body).unwrap();
        let data = v["data"].as_object().unwrap();
        let omitted = data["x-floe-omitted"].as_array().unwrap();
        assert!(omitted.contains(&"requirements".into()), "{omitted:?}");
        assert_eq!(data["operation-type"], "update-table");
        for key in ["operation-type", "table-uuid", "updates", "requirements"] {
            assert!(
                data.contains_key(key) != omitted.contains(&key.into()),
                "{key}: {v}"
            );
        }
    }
}
