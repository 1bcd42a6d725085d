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
    pub fn new(url: url::Url, secret: Vec<u8>, name: String) -> anyhow::Result<Self> {
        if secret.len() < 16 {
            anyhow::bail!("FLOE_EVENTS_WEBHOOK_SECRET must be at least 16 bytes");
        }
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            // A redirect is an answer, not a delivery: followed, a 301/302/303 turns the
            // POST into a bodiless GET, whose 2xx would confirm events nobody received.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("building the webhook client")?;
        Ok(WebhookSink {
            name,
            client,
            url,
            secret,
        })
    }

    /// One POST of events; `Ok` on a 2xx.
    async fn deliver(&self, events: Vec<(&str, String)>) -> anyhow::Result<()> {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(());
        };
        let id = format!("{}_{}", first.0, last.0);
        let events: Vec<String> = events.into_iter().map(|(_, text)| text).collect();
        let body = format!("[{}]", events.join(","));
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
        for delivery in deliveries(events) {
            self.deliver(delivery).await?;
        }
        Ok(())
    }
}

/// Most bytes of one POST's events (one event larger than this goes alone): a relay
/// batch of 500 events, each up to the relay's limit, would otherwise be hundreds of
/// megabytes, past what receivers take.
const MAX_DELIVERY_BYTES: usize = 4 * 1024 * 1024;

/// The batch cut into deliveries of at most `MAX_DELIVERY_BYTES`, in order, each event
/// as its id and rendered text: the same cuts every time, so a retried batch has the
/// same `webhook-id`s.
fn deliveries(events: &[StoredEvent]) -> Vec<Vec<(&str, String)>> {
    let mut out: Vec<Vec<(&str, String)>> = Vec::new();
    let mut size = 0;
    for event in events {
        let rendered = event.render();
        match out.last_mut() {
            Some(last) if size + rendered.len() <= MAX_DELIVERY_BYTES => {
                size += rendered.len();
                last.push((&event.id, rendered));
            }
            _ => {
                size = rendered.len();
                out.push(vec![(&event.id, rendered)]);
            }
        }
    }
    out
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

    fn event(id: &str, bytes: usize) -> StoredEvent {
        StoredEvent {
            position: 1,
            sequence: 1,
            catalog_id: crate::model::CatalogId(1),
            entity: "object:u".into(),
            operation: "update-table".into(),
            time_ms: 0,
            id: id.into(),
            body: format!(
                r#"{{"data":{{"pad":"{}"}},"id":"{id}"}}"#,
                "x".repeat(bytes)
            ),
        }
    }

    #[test]
    fn a_batch_goes_in_deliveries_of_bounded_size_in_order() {
        let mb = 1024 * 1024;
        let events = [
            event("a", 10),
            event("b", 3 * mb),
            event("c", 2 * mb),
            event("d", 10),
        ];
        let cuts: Vec<Vec<&str>> = deliveries(&events)
            .iter()
            .map(|d| d.iter().map(|(id, _)| *id).collect())
            .collect();
        assert_eq!(cuts, vec![vec!["a", "b"], vec!["c", "d"]]);
        // One event past the bound goes alone.
        let events = [event("a", 5 * mb), event("b", 10)];
        assert_eq!(deliveries(&events).len(), 2);
    }

    /// A webhook that redirects has not received the events: following the redirect
    /// would turn the POST into a bodiless GET, whose 200 would confirm them.
    #[tokio::test]
    async fn a_redirect_is_not_a_delivery() {
        use axum::routing::{get, post};
        let app = axum::Router::new()
            .route(
                "/hook",
                post(|| async {
                    let location = [(axum::http::header::LOCATION, "/landing")];
                    (axum::http::StatusCode::MOVED_PERMANENTLY, location)
                }),
            )
            .route("/landing", get(|| async { "ok" }))
            .route("/receiver", post(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let sink = |path: &str| {
            let url = url::Url::parse(&format!("http://127.0.0.1:{port}{path}")).unwrap();
            WebhookSink::new(url, vec![7; 32], "webhook:test".into()).unwrap()
        };
        let events = [event("a", 10)];
        let refused = sink("/hook").publish(&events).await.unwrap_err();
        assert!(refused.to_string().contains("301"), "{refused}");
        sink("/receiver").publish(&events).await.unwrap();
    }
}
