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
use sha2::Digest as _;

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

    /// The relay's name in the store (its lease and confirmed position) and in the log.
    /// Nodes share a relay exactly when they publish to the same place, so the name
    /// tells every place apart: broker and stream or topic; a webhook's scheme, host,
    /// port, path and query. Nothing secret is spelled out: a webhook's path and query
    /// may be its token (Slack's and Discord's are), so they appear only hashed, and its
    /// user and password not at all.
    pub fn relay_name(&self) -> String {
        match self {
            SinkUrl::Nats { server, stream, .. } => format!("nats:{server}/{stream}"),
            SinkUrl::Kafka { bootstrap, topic } => format!("kafka:{bootstrap}/{topic}"),
            SinkUrl::Webhook(url) => {
                let address = format!("{}?{}", url.path(), url.query().unwrap_or_default());
                let digest = sha2::Sha256::digest(address.as_bytes());
                let digest: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                format!(
                    "webhook:{}://{}:{}/#{}",
                    url.scheme(),
                    url.host_str().unwrap_or_default(),
                    url.port_or_known_default().unwrap_or_default(),
                    digest
                )
            }
        }
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
    let parsed = SinkUrl::parse(sink)?;
    let name = parsed.relay_name();
    Ok(match parsed {
        SinkUrl::Nats {
            server,
            stream,
            subject,
        } => Arc::new(nats::NatsSink::connect(&server, &stream, &subject, name).await?),
        SinkUrl::Kafka { bootstrap, topic } => {
            Arc::new(kafka::KafkaSink::new(&bootstrap, &topic, name)?)
        }
        SinkUrl::Webhook(url) => {
            let secret = std::env::var("FLOE_EVENTS_WEBHOOK_SECRET").context(
                "a webhook sink needs FLOE_EVENTS_WEBHOOK_SECRET (the key its requests are signed with)",
            )?;
            Arc::new(webhook::WebhookSink::new(url, secret.into_bytes(), name)?)
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

    #[test]
    fn relays_share_a_name_only_when_they_publish_to_the_same_place() {
        let name = |sink: &str| SinkUrl::parse(sink).unwrap().relay_name();
        assert_eq!(name("nats://h?stream=S"), "nats:nats://h:4222/S");
        assert_ne!(name("nats://h?stream=S"), name("nats://other?stream=S"));
        assert_eq!(
            name("kafka://a:9092,b:9092?topic=t"),
            "kafka:a:9092,b:9092/t"
        );
        assert_ne!(
            name("kafka://a:9092?topic=t"),
            name("kafka://c:9092?topic=t")
        );
        // A webhook's path, query and port tell receivers apart; its secrets are not
        // spelled out (they go into the store and the log).
        let hook = name("https://u:secret@h/services/T0/B0/tok3n?token=x");
        assert!(hook.starts_with("webhook:https://h:443/#"), "{hook}");
        for secret in ["secret", "tok3n", "token=x", "services"] {
            assert!(!hook.contains(secret), "{hook}");
        }
        assert_eq!(hook, name("https://h/services/T0/B0/tok3n?token=x"));
        assert_ne!(name("https://h/audit"), name("https://h/search"));
        assert_ne!(name("https://h/f?c=a"), name("https://h/f?c=b"));
        assert_ne!(name("http://h:8080/f"), name("http://h:8081/f"));
        assert_eq!(name("http://h/f"), name("http://h:80/f"));
    }
}
