//! Webhooks: each batch is one POST of a CloudEvents batch
//! (`application/cloudevents-batch+json`), signed as the Standard Webhooks
//! specification says: `webhook-id` (`<first event id>_<last event id>`: a retry of a
//! batch is the same batch with the same id), `webhook-timestamp`
//! (seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`,
//! so a receiver can check origin and freshness with any Standard Webhooks library. A
//! 2xx answer confirms the batch; anything else (or no answer within the timeout) is
//! retried by the relay with backoff, as are the events after it.

use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::events::relay::Sink;
use crate::events::StoredEvent;

pub struct WebhookSink {
    client: reqwest::Client,
    url: url::Url,
    secret: Vec<u8>,
    name: String,
}

const TIMEOUT: Duration = Duration::from_secs(10);

impl WebhookSink {
    pub fn new(url: url::Url, secret: Vec<u8>) -> anyhow::Result<Self> {
        if secret.len() < 16 {
            anyhow::bail!("FLOE_EVENTS_WEBHOOK_SECRET must be at least 16 bytes");
        }
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .context("building the webhook client")?;
        Ok(WebhookSink {
            name: format!("webhook:{}", url.host_str().unwrap_or_default()),
            client,
            url,
            secret,
        })
    }
}

/// The Standard Webhooks signature of one delivery.
pub fn signature(secret: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[async_trait]
impl Sink for WebhookSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, events: &[StoredEvent]) -> anyhow::Result<()> {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(());
        };
        let id = format!("{}_{}", first.id, last.id);
        let body = format!(
            "[{}]",
            events
                .iter()
                .map(StoredEvent::render)
                .collect::<Vec<_>>()
                .join(",")
        );
        let timestamp = chrono::Utc::now().timestamp();
        let response = self
            .client
            .post(self.url.clone())
            .header("content-type", "application/cloudevents-batch+json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                signature(&self.secret, &id, timestamp, &body),
            )
            .body(body)
            .send()
            .await
            .context("delivering events to the webhook")?;
        if !response.status().is_success() {
            anyhow::bail!("the webhook answered {}", response.status());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_follows_standard_webhooks() {
        // The Standard Webhooks reference vector (secret given base64-encoded there).
        let secret = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = signature(
            &secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
