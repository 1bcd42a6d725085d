//! The brokers the relay publishes to, one file each, chosen by one `--events-sink` URL:
//!
//! - `nats://host:port[?stream=S&subject=P]`: NATS JetStream (`nats.rs`);
//! - `kafka://host:port[,host:port…][?topic=T]`: Kafka (`kafka.rs`);
//! - `http://…` or `https://…`: a webhook (`webhook.rs`), signed with the secret in
//!   `FLOE_EVENTS_WEBHOOK_SECRET`.

pub mod kafka;
pub mod nats;
pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{bail, Context};

use super::relay::Sink;

/// Builds the sink a `--events-sink` URL names (connecting where the broker needs it).
pub async fn from_url(sink: &str) -> anyhow::Result<Arc<dyn Sink>> {
    let url = url::Url::parse(sink).with_context(|| format!("--events-sink {sink:?}"))?;
    let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
    let option = |key: &str, default: &str| query.get(key).cloned().unwrap_or(default.into());
    for key in query.keys() {
        let known: &[&str] = match url.scheme() {
            "nats" => &["stream", "subject"],
            "kafka" => &["topic"],
            _ => &[],
        };
        if !known.contains(&key.as_str()) && url.scheme() != "http" && url.scheme() != "https" {
            bail!("--events-sink: unknown option '{key}' for {}", url.scheme());
        }
    }
    Ok(match url.scheme() {
        "nats" => {
            let server = format!(
                "nats://{}:{}",
                url.host_str().context("--events-sink: no host")?,
                url.port().unwrap_or(4222)
            );
            Arc::new(
                nats::NatsSink::connect(
                    &server,
                    &option("stream", "FLOE_EVENTS"),
                    &option("subject", "floe.events"),
                )
                .await?,
            )
        }
        "kafka" => {
            let authority = sink
                .trim_start_matches("kafka://")
                .split(['?', '/'])
                .next()
                .unwrap_or_default();
            if authority.is_empty() {
                bail!("--events-sink: no Kafka bootstrap servers");
            }
            Arc::new(kafka::KafkaSink::new(
                authority,
                &option("topic", "floe-events"),
            )?)
        }
        "http" | "https" => {
            let secret = std::env::var("FLOE_EVENTS_WEBHOOK_SECRET").context(
                "a webhook sink needs FLOE_EVENTS_WEBHOOK_SECRET (the key its requests are signed with)",
            )?;
            Arc::new(webhook::WebhookSink::new(url, secret.into_bytes())?)
        }
        other => bail!("--events-sink: unknown sink '{other}' (nats, kafka, http or https)"),
    })
}
