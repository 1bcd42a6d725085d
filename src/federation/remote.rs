//! The client of a remote Iceberg REST catalog: one [`Remote`] per federated catalog,
//! holding its HTTP connections, its configuration (asked once from the remote's
//! `/v1/config`: path prefix, endpoints, idempotency) and, with OAuth, its bearer token
//! (fetched on first use, renewed a minute before it expires, and once when the remote
//! refuses it: by the first request refused, the others then use the new one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use bytes::Bytes;

use super::{Connection, RemoteAuth};

/// Longest a remote may take to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a forwarded request may take, answer included (a commit that writes metadata
/// on object storage takes a few seconds at worst).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer taken from a remote (a table's metadata, inline, can be large).
pub const MAX_ANSWER_BYTES: usize = 64 << 20;
/// A token is renewed this long before the expiry its remote gave.
const RENEW_BEFORE: Duration = Duration::from_secs(60);
/// Lifetime assumed for a token whose answer gave none.
const DEFAULT_TOKEN_LIFE: Duration = Duration::from_secs(300);

/// Why a forwarded request got no answer from the remote.
#[derive(Debug)]
pub enum RemoteError {
    /// Nothing was sent: the remote could not be reached (or its prefix or token not
    /// fetched). A retry is safe.
    Unreachable(String),
    /// The request went out but no usable answer came back (a timeout, a reset, an
    /// answer over the limit): whether a change was applied there is unknown.
    Failed(String),
    /// The remote refused Floe's own credentials (401 after a fresh token).
    Refused(String),
}

/// A request to forward: what follows the remote's prefix, and what goes with it.
pub struct Outgoing<'a> {
    pub method: Method,
    /// The path after the catalog's prefix (starts with `/`), each segment encoded by
    /// Floe from its decoded text, so the remote gets exactly the path that was checked.
    pub tail: &'a str,
    pub query: Option<&'a str>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The remote's answer.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The remotes of this node's federated catalogs, by catalog name.
pub struct Remotes {
    http: reqwest::Client,
    by_catalog: Mutex<HashMap<String, Arc<Remote>>>,
}

impl Default for Remotes {
    fn default() -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            // A redirect would carry Floe's token to wherever the remote points.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("floe/", env!("CARGO_PKG_VERSION"), " (federation)"))
            .build()
            .unwrap_or_default();
        Remotes {
            http,
            by_catalog: Mutex::new(HashMap::new()),
        }
    }
}

impl Remotes {
    /// The remote of `catalog` for `connection`: the one in use, unless the catalog was
    /// made again with another connection since.
    pub fn get(&self, catalog: &str, connection: &Connection) -> Arc<Remote> {
        let mut by_catalog = self.by_catalog.lock().expect("poisoned");
        match by_catalog.get(catalog) {
            Some(remote) if remote.connection == *connection => remote.clone(),
            _ => {
                let remote = Arc::new(Remote {
                    connection: connection.clone(),
                    http: self.http.clone(),
                    config: tokio::sync::OnceCell::new(),
                    token: tokio::sync::Mutex::new(None),
                });
                by_catalog.insert(catalog.to_string(), remote.clone());
                remote
            }
        }
    }

    /// Forgets a dropped catalog's remote (its token and connections).
    pub fn forget(&self, catalog: &str) {
        self.by_catalog.lock().expect("poisoned").remove(catalog);
    }
}

/// One remote catalog.
pub struct Remote {
    connection: Connection,
    http: reqwest::Client,
    /// What the remote's `/v1/config` said, asked once.
    config: tokio::sync::OnceCell<RemoteConfig>,
    token: tokio::sync::Mutex<Option<(String, Instant)>>,
}

/// The parts of a remote's `/v1/config` that Floe uses.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteConfig {
    /// `/{prefix}` of the remote catalog's paths, or empty for none.
    pub prefix: String,
    /// The endpoints it serves, if it lists them (clients assume a default set if not).
    pub endpoints: Option<Vec<String>>,
    /// How long it keeps idempotency keys, if it does.
    pub idempotency_key_lifetime: Option<String>,
}

impl RemoteConfig {
    /// From the remote's `/v1/config` answer; its overrides win over its defaults.
    pub fn from_answer(config: &serde_json::Value) -> RemoteConfig {
        let prefix = ["overrides", "defaults"]
            .iter()
            .find_map(|part| config[part]["prefix"].as_str())
            .unwrap_or_default();
        RemoteConfig {
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("/{prefix}")
            },
            endpoints: serde_json::from_value(config["endpoints"].clone()).ok(),
            idempotency_key_lifetime: config["idempotency-key-lifetime"]
                .as_str()
                .map(str::to_string),
        }
    }
}

/// An error's text with its causes (reqwest's top level says little: "error sending
/// request").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The headers of a remote's answer that go back to the caller.
const ANSWER_HEADERS: [HeaderName; 3] = [
    axum::http::header::CONTENT_TYPE,
    axum::http::header::ETAG,
    HeaderName::from_static("idempotency-replayed"),
];

impl Remote {
    /// Sends `out` to the remote and returns its answer, whatever its status.
    pub async fn send(&self, out: Outgoing<'_>) -> Result<Answer, RemoteError> {
        let prefix = &self.config().await?.prefix;
        let mut url = format!("{}/v1{prefix}{}", self.connection.uri, out.tail);
        if let Some(query) = out.query {
            url.push('?');
            url.push_str(query);
        }
        let mut refused: Option<String> = None;
        loop {
            let mut request = self
                .http
                .request(out.method.clone(), &url)
                .headers(out.headers.clone())
                .body(out.body.clone());
            let token = self.bearer(refused.as_deref()).await?;
            if let Some(token) = &token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.map_err(|e| sent_error(&e))?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED {
                // Once with a fresh token (an OAuth token may have been revoked early).
                let oauth = matches!(self.connection.auth, RemoteAuth::Oauth { .. });
                if refused.is_none() && oauth {
                    refused = token.or_else(|| Some(String::new()));
                    continue;
                }
                return Err(RemoteError::Refused(format!(
                    "the remote catalog at {} refused Floe's credentials (401)",
                    self.connection.uri
                )));
            }
            let mut headers = HeaderMap::new();
            for name in &ANSWER_HEADERS {
                if let Some(value) = response.headers().get(name) {
                    headers.insert(name.clone(), value.clone());
                }
            }
            let body = read_limited(response).await?;
            return Ok(Answer {
                status,
                headers,
                body,
            });
        }
    }

    /// What the remote's `/v1/config` says (asked on first use, then kept).
    pub async fn config(&self) -> Result<&RemoteConfig, RemoteError> {
        self.config.get_or_try_init(|| self.read_config()).await
    }

    async fn read_config(&self) -> Result<RemoteConfig, RemoteError> {
        let mut url = format!("{}/v1/config", self.connection.uri);
        if let Some(warehouse) = &self.connection.remote_catalog_name {
            url.push_str("?warehouse=");
            url.extend(url::form_urlencoded::byte_serialize(warehouse.as_bytes()));
        }
        let mut request = self.http.get(&url);
        if let Some(token) = self.bearer(None).await? {
            request = request.bearer_auth(token);
        }
        let unreachable = |why: String| {
            RemoteError::Unreachable(format!(
                "the remote catalog's configuration ({url}) could not be read: {why}"
            ))
        };
        let response = request.send().await.map_err(|e| unreachable(chain(&e)))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            return Err(RemoteError::Refused(format!(
                "the remote catalog at {} refused Floe's credentials (401)",
                self.connection.uri
            )));
        }
        if !status.is_success() {
            return Err(unreachable(format!("HTTP {status}")));
        }
        let config: serde_json::Value =
            response.json().await.map_err(|e| unreachable(chain(&e)))?;
        Ok(RemoteConfig::from_answer(&config))
    }

    /// The bearer token to send, if the connection uses one. With `refused` (the token
    /// the remote just refused), a fresh one, unless another request renewed it already.
    async fn bearer(&self, refused: Option<&str>) -> Result<Option<String>, RemoteError> {
        let (token_uri, client_id, client_secret, scopes) = match &self.connection.auth {
            RemoteAuth::Implicit => return Ok(None),
            RemoteAuth::Bearer { token } => return Ok(Some(token.clone())),
            RemoteAuth::Oauth {
                token_uri,
                client_id,
                client_secret,
                scopes,
            } => (token_uri, client_id, client_secret, scopes),
        };
        let mut cached = self.token.lock().await;
        if let Some((token, renew_at)) = cached.as_ref() {
            if refused != Some(token.as_str()) && Instant::now() < *renew_at {
                return Ok(Some(token.clone()));
            }
        }
        let endpoint = token_uri
            .clone()
            .unwrap_or_else(|| format!("{}/v1/oauth/tokens", self.connection.uri));
        // Built in a block: the serializer holds a closure that is not `Send`.
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials")
                .append_pair("client_id", client_id)
                .append_pair("client_secret", client_secret);
            if !scopes.is_empty() {
                form.append_pair("scope", &scopes.join(" "));
            }
            form.finish()
        };
        let refused = |why: String| {
            RemoteError::Unreachable(format!(
                "no token from the remote catalog's token endpoint {endpoint}: {why}"
            ))
        };
        let response = self
            .http
            .post(&endpoint)
            .header(
                axum::http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(form)
            .send()
            .await
            .map_err(|e| refused(chain(&e)))?;
        let status = response.status();
        if status.is_client_error() {
            // The endpoint's error body can echo what was sent: not repeated.
            return Err(RemoteError::Refused(format!(
                "the remote catalog's token endpoint {endpoint} refused Floe's client credentials (HTTP {status})"
            )));
        }
        if !status.is_success() {
            return Err(refused(format!("HTTP {status}")));
        }
        let answer: serde_json::Value = response.json().await.map_err(|e| refused(chain(&e)))?;
        let token = answer["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| refused("its answer has no access_token".into()))?
            .to_string();
        let life = answer["expires_in"]
            .as_u64()
            .map_or(DEFAULT_TOKEN_LIFE, Duration::from_secs);
        let renew_at = Instant::now() + life.saturating_sub(RENEW_BEFORE.min(life / 2));
        *cached = Some((token.clone(), renew_at));
        Ok(Some(token))
    }
}

/// A send's error: nothing went out if the connection was never made.
fn sent_error(error: &reqwest::Error) -> RemoteError {
    if error.is_connect() {
        RemoteError::Unreachable(chain(error))
    } else {
        RemoteError::Failed(chain(error))
    }
}

/// The answer's body, refused past [`MAX_ANSWER_BYTES`].
async fn read_limited(mut response: reqwest::Response) -> Result<Bytes, RemoteError> {
    let too_large = || {
        RemoteError::Failed(format!(
            "the remote's answer is larger than {MAX_ANSWER_BYTES} bytes"
        ))
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| sent_error(&e))? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

/// Headers of the caller's request that go to the remote: what the body is, what the
/// caller already has, and its idempotency key (the remote replays retries). Not its
/// `Authorization` (Floe signs in as itself) nor `X-Iceberg-Access-Delegation` (nothing
/// is vended through a federated catalog).
pub fn forwarded_headers(from: &HeaderMap, request_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for name in [
        axum::http::header::CONTENT_TYPE,
        axum::http::header::ACCEPT,
        axum::http::header::IF_NONE_MATCH,
        HeaderName::from_static("idempotency-key"),
    ] {
        for value in from.get_all(&name) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert(HeaderName::from_static("x-request-id"), id);
    }
    headers
}
