//! `floe bench events`: change events end to end, the way streaming systems are
//! measured — events per second and delivery latency from *commit acknowledged* to
//! *consumer received*, with ~1 KiB events, over NATS JetStream or Kafka, on one hot
//! table or spread over many.
//!
//! The server under test must relay to the broker the bench consumes from
//! (`floe serve --events-sink <same URL>`). Committers make blind commits (a
//! `set-properties` update of `--payload-bytes` bytes, no requirements, so none is
//! refused); the consumer matches each event to its commit by the new metadata location,
//! which every acknowledged commit returns and exactly one event carries. With
//! `--sink none` only the commits are measured (for commit latency with and without the
//! outbox).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use hyper::Method;
use rand::Rng;
use serde_json::{json, Value};

use super::client::{uri, Req};
use super::fixtures::table_body;
use super::report::Report;
use super::stats::{histogram, put, Outcome};
use super::target::{Paths, Target};
use crate::events::sinks::SinkUrl;

#[derive(Debug, Clone)]
pub struct EventsBenchSettings {
    /// `nats://host:port`, `kafka://host:port`, or `none`.
    pub sink: String,
    pub catalog: String,
    /// 1: every commit goes to one hot table.
    pub tables: u64,
    pub users: usize,
    pub duration: Duration,
    pub payload_bytes: usize,
}

/// When each side saw each commit, by its new metadata location.
#[derive(Default)]
struct Seen {
    acked: HashMap<String, Instant>,
    received: HashMap<String, Instant>,
    /// Events received more than once (by event id).
    duplicates: u64,
    ids: std::collections::HashSet<String>,
}

const NAMESPACE: &str = "bench_events";

pub async fn events(target: &Target, s: &EventsBenchSettings) -> anyhow::Result<Report> {
    let paths = target.catalog(&s.catalog).await?;
    let levels = vec![NAMESPACE.to_string()];
    let created = target
        .call_json(
            Method::POST,
            &paths.namespaces(),
            &json!({ "namespace": levels }),
        )
        .await?;
    anyhow::ensure!(
        matches!(created.status, 200 | 409),
        "creating the namespace answered {}",
        created.status
    );
    for t in 0..s.tables {
        let req = Req::with_body(
            Method::POST,
            uri(paths.tables(&levels))?,
            table_body(&format!("t{t}")),
        );
        let response = target.call(&req).await?;
        anyhow::ensure!(
            matches!(response.status, 200 | 409),
            "creating table t{t} answered {}",
            response.status
        );
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let consumer = match s.sink.as_str() {
        "none" => None,
        sink => Some(start_consumer(sink, seen.clone()).await?),
    };
    // Let the consumer settle at the log's end before the measured window.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let started = Instant::now();
    let deadline = started + s.duration;
    let payload: String = {
        let mut rng = rand::rng();
        (0..s.payload_bytes)
            .map(|_| rng.random_range(b'a'..=b'z') as char)
            .collect()
    };
    let mut users = Vec::new();
    for user in 0..s.users {
        let (paths, seen, payload, tables) =
            (paths.clone(), seen.clone(), payload.clone(), s.tables);
        let client = target.client.clone();
        users.push(tokio::spawn(async move {
            let mut latency = histogram(3);
            // Failures by what they were, labelled as the load workloads label them
            // (`Outcome::label`: the status, or connect/io/timeout): a run with refusals
            // or 5xx must say which, not only how many.
            let mut failed: BTreeMap<String, u64> = BTreeMap::new();
            let mut n = 0u64;
            let mut conn = None;
            while Instant::now() < deadline {
                let t = if tables == 1 { 0 } else { rand::rng().random_range(0..tables) };
                let body = json!({
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {"bench.payload": payload, "bench.n": format!("{user}-{n}")}}],
                });
                n += 1;
                let req = match commit_req(&paths, t, &body) {
                    Ok(req) => req,
                    Err(_) => break,
                };
                let sent = Instant::now();
                match client.send(&mut conn, &req).await {
                    Ok(r) if r.status == 200 => {
                        let acked = Instant::now();
                        put(&mut latency, (acked - sent).as_micros() as u64);
                        let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                        if let Some(loc) = v["metadata-location"].as_str() {
                            seen.lock().expect("poisoned").acked.insert(loc.to_string(), acked);
                        }
                    }
                    Ok(r) => *failed.entry(Outcome::Status(r.status).label()).or_default() += 1,
                    Err(f) => *failed.entry(Outcome::Failure(f).label()).or_default() += 1,
                }
            }
            (latency, failed)
        }));
    }
    let mut commit_latency = histogram(3);
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    for user in users {
        let (latency, f) = user.await?;
        commit_latency.add(&latency).expect("auto-resize");
        for (what, count) in f {
            *failed.entry(what).or_default() += count;
        }
    }
    let window = started.elapsed();
    let acked = seen.lock().expect("poisoned").acked.len();

    let mut report = Report::new("events");
    report.meta("sink", &s.sink);
    report.meta(
        "load",
        format!(
            "closed, {} committers, {} table(s), {:.0} s, payload {} B",
            s.users,
            s.tables,
            window.as_secs_f64(),
            s.payload_bytes
        ),
    );
    report.meta(
        "commits acknowledged",
        format!(
            "{acked} ({:.0}/s), {}",
            acked as f64 / window.as_secs_f64(),
            failures(&failed)
        ),
    );
    report.meta(
        "commit latency ms",
        format!(
            "p50 {:.2}, p99 {:.2}",
            commit_latency.value_at_quantile(0.5) as f64 / 1000.0,
            commit_latency.value_at_quantile(0.99) as f64 / 1000.0
        ),
    );
    if let Some(consumer) = consumer {
        // Wait for the stragglers (the relay drains its backlog), then stop listening.
        let drain_until = Instant::now() + Duration::from_secs(30);
        loop {
            let done = {
                let seen = seen.lock().expect("poisoned");
                seen.acked.keys().all(|k| seen.received.contains_key(k))
            };
            if done || Instant::now() > drain_until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        consumer.abort();
        let seen = seen.lock().expect("poisoned");
        let mut delivery = histogram(3);
        let mut last = started;
        let mut delivered = 0u64;
        for (loc, acked) in &seen.acked {
            if let Some(received) = seen.received.get(loc) {
                delivered += 1;
                last = last.max(*received);
                // An event may arrive before its commit's response does: that is 0.
                put(
                    &mut delivery,
                    received.saturating_duration_since(*acked).as_micros() as u64,
                );
            }
        }
        let span = (last - started).as_secs_f64().max(window.as_secs_f64());
        report.meta(
            "events delivered",
            format!(
                "{delivered} of {acked} ({:.0} events/s), {} missing, {} duplicates",
                delivered as f64 / span,
                acked as u64 - delivered,
                seen.duplicates
            ),
        );
        report.meta(
            "delivery latency ms (ack -> received)",
            format!(
                "p50 {:.2}, p99 {:.2}, max {:.2}",
                delivery.value_at_quantile(0.5) as f64 / 1000.0,
                delivery.value_at_quantile(0.99) as f64 / 1000.0,
                delivery.max() as f64 / 1000.0
            ),
        );
        report.expect("events missing", 0, acked as u64 - delivered);
    }
    Ok(report)
}

fn commit_req(paths: &Paths, t: u64, body: &Value) -> anyhow::Result<Req> {
    Ok(Req::with_body(
        Method::POST,
        uri(paths.table(&[NAMESPACE.to_string()], &format!("t{t}")))?,
        body.to_string().into(),
    ))
}

/// Records one received event (by the metadata location it announces).
fn receive(seen: &Mutex<Seen>, payload: &[u8]) {
    let now = Instant::now();
    let Ok(event) = serde_json::from_slice::<Value>(payload) else {
        return;
    };
    let mut seen = seen.lock().expect("poisoned");
    if let Some(id) = event["id"].as_str() {
        if !seen.ids.insert(id.to_string()) {
            seen.duplicates += 1;
            return;
        }
    }
    if let Some(loc) = event["data"]["metadata-location"].as_str() {
        seen.received.entry(loc.to_string()).or_insert(now);
    }
}

/// Subscribes at the end of the log (the stream or topic the sink URL names, as the
/// relay reads it) and records what arrives, until aborted.
async fn start_consumer(
    sink: &str,
    seen: Arc<Mutex<Seen>>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    match SinkUrl::parse(sink)? {
        SinkUrl::Nats {
            server,
            stream,
            subject,
        } => {
            use async_nats::jetstream::{self, consumer};
            let client = async_nats::connect(server).await?;
            let js = jetstream::new(client);
            let stream = js.get_stream(&stream).await.with_context(|| {
                format!("the {stream} stream (is the server relaying to this NATS?)")
            })?;
            let consumer = stream
                .create_consumer(consumer::pull::Config {
                    deliver_policy: consumer::DeliverPolicy::New,
                    ack_policy: consumer::AckPolicy::None,
                    filter_subject: format!("{subject}.table.>"),
                    ..Default::default()
                })
                .await?;
            let mut messages = consumer.messages().await?;
            Ok(tokio::spawn(async move {
                while let Some(Ok(message)) = messages.next().await {
                    receive(&seen, &message.payload);
                }
            }))
        }
        SinkUrl::Kafka { bootstrap, topic } => {
            use rdkafka::consumer::{Consumer, StreamConsumer};
            use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
            let consumer: StreamConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", format!("floe-bench-{}", uuid::Uuid::now_v7()))
                .set("enable.auto.commit", "false")
                .create()?;
            let metadata = consumer
                .fetch_metadata(Some(&topic), Duration::from_secs(10))
                .context("Kafka metadata (is the server relaying to this broker?)")?;
            let mut partitions = TopicPartitionList::new();
            for t in metadata.topics() {
                for p in t.partitions() {
                    partitions.add_partition_offset(&topic, p.id(), Offset::End)?;
                }
            }
            anyhow::ensure!(
                partitions.count() > 0,
                "topic {topic} has no partitions yet"
            );
            consumer.assign(&partitions)?;
            Ok(tokio::spawn(async move {
                loop {
                    match consumer.recv().await {
                        Ok(message) => receive(&seen, message.payload().unwrap_or_default()),
                        Err(e) => tracing::warn!(error = %e, "Kafka consumer"),
                    }
                }
            }))
        }
        SinkUrl::Webhook(_) => {
            anyhow::bail!("--sink: nats://, kafka:// or none (a webhook cannot be consumed)")
        }
    }
}

/// "N failed", then how many of each kind when there were any, written as the load
/// report writes its errors: "3 failed (409 ×2, timeout ×1)".
fn failures(failed: &BTreeMap<String, u64>) -> String {
    let total: u64 = failed.values().sum();
    if total == 0 {
        return "0 failed".into();
    }
    let kinds: Vec<String> = failed
        .iter()
        .map(|(what, n)| format!("{what} ×{n}"))
        .collect();
    format!("{total} failed ({})", kinds.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::client::Failure;
    use super::*;

    #[test]
    fn failures_say_how_many_of_each_kind() {
        let mut failed = BTreeMap::new();
        assert_eq!(failures(&failed), "0 failed");
        failed.insert(Outcome::Status(409).label(), 2);
        failed.insert(Outcome::Failure(Failure::Timeout).label(), 1);
        assert_eq!(failures(&failed), "3 failed (409 ×2, timeout ×1)");
    }
}
