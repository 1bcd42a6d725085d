//! NATS JetStream: each event is a message on `<subject>.<object type>.<operation>`,
//! with its event id as `Nats-Msg-Id`, so the stream drops a re-published duplicate
//! (within the stream's duplicate window). A batch is sent pipelined and counts as
//! published when JetStream acknowledged every message (stored, not just received).

use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{self, message::PublishMessage, stream};
use async_trait::async_trait;

use crate::events::relay::Sink;
use crate::events::{Operation, StoredEvent};

pub struct NatsSink {
    jetstream: jetstream::Context,
    subject: String,
    name: String,
}

/// Long enough to cover a relay's crash and its successor's lease wait.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

impl NatsSink {
    /// Connects, and creates the stream (capturing `<subject>.>`) if it does not exist.
    pub async fn connect(server: &str, stream_name: &str, subject: &str) -> anyhow::Result<Self> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect(server)
            .await
            .with_context(|| format!("connecting to NATS at {server}"))?;
        let jetstream = jetstream::new(client);
        let config = stream::Config {
            name: stream_name.to_string(),
            subjects: vec![format!("{subject}.>")],
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        };
        let js = jetstream.clone();
        // The server may not be up yet: the relay must start anyway and create the
        // stream once it is.
        tokio::spawn(async move {
            loop {
                match js.get_or_create_stream(config.clone()).await {
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot create the JetStream stream yet");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(NatsSink {
            jetstream,
            subject: subject.to_string(),
            name: format!("nats:{stream_name}"),
        })
    }
}

#[async_trait]
impl Sink for NatsSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, events: &[StoredEvent]) -> anyhow::Result<()> {
        let mut acks = Vec::with_capacity(events.len());
        for event in events {
            let kind = Operation::parse(&event.operation).map_or("other", |o| o.object_type());
            let subject = format!("{}.{kind}.{}", self.subject, event.operation);
            let message = PublishMessage::build()
                .message_id(&event.id)
                .payload(event.render().into());
            acks.push(self.jetstream.send_publish(subject, message).await?);
        }
        for ack in acks {
            ack.await?;
        }
        Ok(())
    }
}
