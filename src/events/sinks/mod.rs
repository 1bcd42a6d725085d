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

/// What an `--events-sink` URL names, parsed once: for the relay, and for
/// `floe bench events`, which consumes from the same stream or topic.
#[derive(Debug, Clone, PartialEq)]
pub enum SinkUrl {
    Nats {
        server: String,
        stream: String,
        subject: String,
    },
    Kafka {
        bootstrap: String,
        topic: String,
    },
    Webhook(url::Url),
}

impl SinkUrl {
    pub fn parse(sink: &str) -> anyhow::Result<SinkUrl> {
        // A Kafka bootstrap list (`a:9092,b:9092`) is no URL authority: only its query is
        // read as one.
        if let Some(rest) = sink.strip_prefix("kafka://") {
            let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
            let options = options("kafka", query, &["topic"])?;
            let bootstrap = authority.split('/').next().unwrap_or_default();
            if bootstrap.is_empty() {
                bail!("--events-sink: no Kafka bootstrap servers");
            }
            return Ok(SinkUrl::Kafka {
                bootstrap: bootstrap.to_string(),
                topic: option(&options, "topic", "floe-events"),
            });
        }
        let url = url::Url::parse(sink).with_context(|| format!("--events-sink {sink:?}"))?;
        Ok(match url.scheme() {
            "nats" => {
                let options = options("nats", url.query().unwrap_or(""), &["stream", "subject"])?;
                SinkUrl::Nats {
                    server: format!(
                        "nats://{}:{}",
                        url.host_str().context("--events-sink: no host")?,
                        url.port().unwrap_or(4222)
                    ),
                    stream: option(&options, "stream", "FLOE_EVENTS"),
                    subject: option(&options, "subject", "floe.events"),
                }
            }
            // A webhook's query string is part of its address.
            "http" | "https" => SinkUrl::Webhook(url),
            other => bail!("--events-sink: unknown sink '{other}' (nats, kafka, http or https)"),
        })
    }
}

/// A sink's options from its query string; one it does not know is an error.
fn options(scheme: &str, query: &str, known: &[&str]) -> anyhow::Result<HashMap<String, String>> {
    let options: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    if let Some(key) = options.keys().find(|k| !known.contains(&k.as_str())) {
        bail!("--events-sink: unknown option '{key}' for {scheme}");
    }
    Ok(options)
}

fn option(options: &HashMap<String, String>, key: &str, default: &str) -> String {
    options
        .get(key)
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

/// Builds the sink a `--events-sink` URL names (connecting where the broker needs it).
pub async fn from_url(sink: &str) -> anyhow::Result<Arc<dyn Sink>> {
    Ok(match SinkUrl::parse(sink)? {
        SinkUrl::Nats {
            server,
            stream,
            subject,
        } => Arc::new(nats::NatsSink::connect(&server, &stream, &subject).await?),
        SinkUrl::Kafka { bootstrap, topic } => Arc::new(kafka::KafkaSink::new(&bootstrap, &topic)?),
        SinkUrl::Webhook(url) => {
            let secret = std::env::var("FLOE_EVENTS_WEBHOOK_SECRET").context(
                "a webhook sink needs FLOE_EVENTS_WEBHOOK_SECRET (the key its requests are signed with)",
            )?;
            Arc::new(webhook::WebhookSink::new(url, secret.into_bytes())?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_urls_name_their_broker_and_options() {
        assert_eq!(
            SinkUrl::parse("nats://127.0.0.1?stream=S").unwrap(),
            SinkUrl::Nats {
                server: "nats://127.0.0.1:4222".into(),
                stream: "S".into(),
                subject: "floe.events".into()
            }
        );
        assert_eq!(
            SinkUrl::parse("kafka://a:9092,b:9092?topic=t").unwrap(),
            SinkUrl::Kafka {
                bootstrap: "a:9092,b:9092".into(),
                topic: "t".into()
            }
        );
        assert!(matches!(
            SinkUrl::parse("https://hooks.example.com/f?token=x").unwrap(),
            SinkUrl::Webhook(_)
        ));
        assert!(SinkUrl::parse("nats://h?topic=t").is_err());
        assert!(SinkUrl::parse("kafka://").is_err());
        assert!(SinkUrl::parse("kafka://a:9092?partitions=3").is_err());
        assert_eq!(
            SinkUrl::parse("kafka://a:9092").unwrap(),
            SinkUrl::Kafka {
                bootstrap: "a:9092".into(),
                topic: "floe-events".into()
            }
        );
        assert!(SinkUrl::parse("amqp://h").is_err());
    }
}
