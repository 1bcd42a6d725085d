//! NATS JetStream: each event is a message on `<subject>.<object type>.<operation>`,
//! with its event id as `Nats-Msg-Id`, so the stream drops a re-published duplicate
//! (within the stream's duplicate window). A batch is sent pipelined and counts as
//! published when JetStream acknowledged every message (stored, not just received).
//! Each message after a batch's first names the one before it
//! (`Nats-Expected-Last-Msg-Id`), so that a failure inside a batch never stores a later
//! event before an earlier one. The stream is meant to be this relay's alone: another
//! publisher's message between two of a batch fails the rest of the batch, which the
//! relay then sends again.

use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{self, message::PublishMessage, stream};
use async_trait::async_trait;

use crate::events::relay::{Sink, MAX_EVENT_BYTES};
use crate::events::{Operation, StoredEvent};

pub struct NatsSink {
    jetstream: jetstream::Context,
    subject: String,
    name: String,
}

/// Bytes of a message's limit left for its subject and headers (`Nats-Msg-Id`).
const HEADER_ROOM: usize = 4096;

/// Long enough to cover a relay's crash and its successor's lease wait.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

impl NatsSink {
    /// Connects, and creates the stream (capturing `<subject>.>`) if it does not exist.
    pub async fn connect(
        server: &str,
        stream_name: &str,
        subject: &str,
        name: String,
    ) -> anyhow::Result<Self> {
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
            name,
        })
    }
}

#[async_trait]
impl Sink for NatsSink {
    fn name(&self) -> &str {
        &self.name
    }

    /// The server's `max_payload` (1 MiB by default, lower where configured so), less
    /// room for the headers; the relay's default until the server said (not connected).
    fn max_event_bytes(&self) -> usize {
        match self.jetstream.client().server_info().max_payload {
            0 => MAX_EVENT_BYTES,
            limit => limit.saturating_sub(HEADER_ROOM).clamp(1, MAX_EVENT_BYTES),
        }
    }

    async fn publish(&self, events: &[StoredEvent]) -> anyhow::Result<()> {
        let mut acks = Vec::with_capacity(events.len());
        let mut previous: Option<&str> = None;
        for event in events {
            let kind = Operation::parse(&event.operation).map_or("other", |o| o.object_type());
            let subject = format!("{}.{kind}.{}", self.subject, event.operation);
            let mut message = PublishMessage::build()
                .message_id(&event.id)
                .payload(event.render().into());
            // Pipelined, a message lost on the way (a reconnect) would let the ones after
            // it be stored, and the retry would store it after them. Chained, JetStream
            // stores each only right after the one before it; the retry's duplicates are
            // acknowledged (the duplicate check comes first) and the chain resumes.
            if let Some(previous) = previous {
                message = message.expected_last_message_id(previous);
            }
            previous = Some(&event.id);
            acks.push(self.jetstream.send_publish(subject, message).await?);
        }
        for ack in acks {
            ack.await?;
        }
        Ok(())
    }
}
