//! Credentials for the target: none, a fixed bearer token, or OAuth2 client credentials
//! fetched from a token endpoint and refreshed in the background before they expire.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use anyhow::{anyhow, Context};
use bytes::Bytes;
use hyper::header::HeaderValue;
use hyper::Method;

use super::client::{self, Client, Req, FORM};

/// How the tool authenticates.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    #[default]
    None,
    Bearer(String),
    ClientCredentials(ClientCredentials),
}

#[derive(Debug, Clone)]
pub struct ClientCredentials {
    /// Polaris serves it at `/api/catalog/v1/oauth/tokens`.
    pub token_url: url::Url,
    pub client_id: String,
    pub client_secret: String,
    pub scope: String,
    /// Polaris's benchmark refreshes every 60 s whatever the token's lifetime.
    pub refresh_every: Duration,
}

/// Token requests are retried on these statuses, as the Polaris suite does.
const TOKEN_RETRY_STATUSES: &[u16] = &[500];
const TOKEN_ATTEMPTS: u32 = 10;
/// A token is refreshed once this share of its lifetime has passed.
const REFRESH_AT_SHARE_OF_LIFETIME: f64 = 0.8;

/// The current `Authorization` value, swapped by the refresher.
#[derive(Default)]
pub struct TokenSource {
    header: RwLock<Option<HeaderValue>>,
    fetched: AtomicU64,
}

impl TokenSource {
    pub fn header(&self) -> Option<HeaderValue> {
        self.header.read().expect("token lock").clone()
    }

    /// How many tokens were fetched from the token endpoint.
    pub fn tokens_fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    fn set_token(&self, token: &str) -> anyhow::Result<()> {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .context("the token is not a valid header value")?;
        *self.header.write().expect("token lock") = Some(value);
        Ok(())
    }

    /// Builds the source for `auth`; for client credentials, fetches the first token now
    /// and keeps refreshing it until the source is dropped.
    pub async fn start(auth: &Auth) -> anyhow::Result<Option<Arc<TokenSource>>> {
        match auth {
            Auth::None => Ok(None),
            Auth::Bearer(token) => {
                let source = TokenSource::default();
                source.set_token(token)?;
                Ok(Some(Arc::new(source)))
            }
            Auth::ClientCredentials(credentials) => {
                let source = Arc::new(TokenSource::default());
                let lifetime = fetch_into(&source, credentials).await?;
                let next = next_refresh(credentials.refresh_every, lifetime);
                tokio::spawn(refresh_loop(
                    Arc::downgrade(&source),
                    credentials.clone(),
                    next,
                ));
                Ok(Some(source))
            }
        }
    }
}

fn next_refresh(every: Duration, lifetime: Option<Duration>) -> Duration {
    let before_expiry = lifetime.map(|l| l.mul_f64(REFRESH_AT_SHARE_OF_LIFETIME));
    before_expiry
        .map_or(every, |b| b.min(every))
        .max(Duration::from_millis(50))
}

async fn refresh_loop(source: Weak<TokenSource>, credentials: ClientCredentials, first: Duration) {
    let mut wait = first;
    loop {
        tokio::time::sleep(wait).await;
        let Some(source) = source.upgrade() else {
            return;
        };
        wait = match fetch_into(&source, &credentials).await {
            Ok(lifetime) => next_refresh(credentials.refresh_every, lifetime),
            Err(e) => {
                // Keep the old token: it may still be valid, and the next try may succeed.
                tracing::warn!("token refresh failed: {e:#}");
                Duration::from_secs(1)
            }
        };
    }
}

/// Fetches a token into `source`; returns its lifetime when the server gives one.
async fn fetch_into(
    source: &TokenSource,
    credentials: &ClientCredentials,
) -> anyhow::Result<Option<Duration>> {
    let (token, lifetime) = fetch_token(credentials).await?;
    source.set_token(&token)?;
    source.fetched.fetch_add(1, Ordering::Relaxed);
    Ok(lifetime)
}

/// One `client_credentials` grant, retried on 500 like the Polaris suite.
pub async fn fetch_token(
    credentials: &ClientCredentials,
) -> anyhow::Result<(String, Option<Duration>)> {
    let client =
        Client::connect_to(&credentials.token_url, &[], Duration::from_secs(30), None).await?;
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("client_id", &credentials.client_id)
        .append_pair("client_secret", &credentials.client_secret)
        .append_pair("scope", &credentials.scope)
        .finish();
    let mut path = credentials.token_url.path().to_string();
    if let Some(query) = credentials.token_url.query() {
        path = format!("{path}?{query}");
    }
    let mut req = Req::with_body(Method::POST, client::uri(path)?, Bytes::from(form));
    req.content_type = FORM;
    let mut conn = None;
    let mut last = None;
    for _ in 0..TOKEN_ATTEMPTS {
        let response = client
            .send(&mut conn, &req)
            .await
            .map_err(|f| anyhow!("token endpoint: {}", f.label()))?;
        if TOKEN_RETRY_STATUSES.contains(&response.status) {
            last = Some(response.status);
            continue;
        }
        if response.status != 200 {
            anyhow::bail!(
                "token endpoint answered {}: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            );
        }
        let body: serde_json::Value =
            serde_json::from_slice(&response.body).context("token response is not JSON")?;
        let token = body["access_token"]
            .as_str()
            .ok_or_else(|| anyhow!("token response has no access_token"))?
            .to_string();
        let lifetime = body["expires_in"].as_f64().map(Duration::from_secs_f64);
        return Ok((token, lifetime));
    }
    anyhow::bail!("token endpoint kept answering {last:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refreshes_before_expiry_and_at_least_every_interval() {
        let every = Duration::from_secs(60);
        assert_eq!(next_refresh(every, None), every);
        assert_eq!(
            next_refresh(every, Some(Duration::from_secs(10))),
            Duration::from_secs(8)
        );
        assert_eq!(next_refresh(every, Some(Duration::from_secs(3600))), every);
    }
}
