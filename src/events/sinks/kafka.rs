//! Kafka: each event is a record keyed by its entity (a table's or view's uuid, a
//! namespace's or catalog's key), so one entity's events land in one partition in
//! order. The producer is idempotent (`enable.idempotence`): its retries never
//! duplicate or reorder records within a partition. A batch counts as published when
//! every record was acknowledged by all in-sync replicas (`acks=all`). A relay that
//! publishes a batch again after a crash makes duplicates across producer sessions;
//! consumers drop them by the `ce_id` header (the event id).

use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::events::relay::Sink;
use crate::events::StoredEvent;

pub struct KafkaSink {
    producer: FutureProducer,
    topic: String,
    name: String,
}

/// How long one record may take to be acknowledged before the batch fails (and is
/// retried by the relay).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

impl KafkaSink {
    pub fn new(bootstrap: &str, topic: &str, name: String) -> anyhow::Result<Self> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "1")
            .set(
                "message.timeout.ms",
                DELIVERY_TIMEOUT.as_millis().to_string(),
            )
            .create()
            .context("creating the Kafka producer")?;
        Ok(KafkaSink {
            producer,
            topic: topic.to_string(),
            name,
        })
    }
}

#[async_trait]
impl Sink for KafkaSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, events: &[StoredEvent]) -> anyhow::Result<()> {
        let bodies: Vec<String> = events.iter().map(StoredEvent::render).collect();
        let mut deliveries = Vec::with_capacity(events.len());
        for (event, body) in events.iter().zip(&bodies) {
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "ce_id",
                    value: Some(event.id.as_str()),
                })
                .insert(Header {
                    key: "content-type",
                    value: Some("application/cloudevents+json"),
                });
            let record = FutureRecord::to(&self.topic)
                .key(event.entity.as_str())
                .payload(body.as_str())
                .headers(headers);
            // Enqueue everything first: librdkafka batches and pipelines the records.
            let delivery = self
                .producer
                .send_result(record)
                .map_err(|(e, _)| anyhow::anyhow!("enqueueing an event for Kafka: {e}"))?;
            deliveries.push(delivery);
        }
        for delivery in deliveries {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => anyhow::bail!("Kafka refused an event: {e}"),
                Err(_) => anyhow::bail!("the Kafka producer dropped an event"),
            }
        }
        Ok(())
    }
}
