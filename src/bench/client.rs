//! The load generator's HTTP/1.1 client.
//!
//! Each virtual user owns one keep-alive connection, like wrk's connections, so a closed
//! loop pays no pool lock and no connection hand-off per request. The open model borrows
//! connections from a small pool because its in-flight count varies.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context};
use bytes::Bytes;
use hyper::header::HeaderValue;
use hyper::{Method, Uri};
use tokio::net::TcpStream;

use super::auth::TokenSource;
use super::wire::{Wire, WireError};

pub const JSON: &str = "application/json";
pub const FORM: &str = "application/x-www-form-urlencoded";

/// One keep-alive connection, and the `Host` header of the node it goes to.
pub struct Conn(Wire, HeaderValue);

/// A response read in full.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: Bytes,
}

/// Why a request got no HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Io,
    Timeout,
}

impl Failure {
    pub fn label(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Io => "io",
            Failure::Timeout => "timeout",
        }
    }
}

/// What one request asks for; `uri` is origin-form (`/path?query`).
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub uri: Uri,
    pub body: Option<Bytes>,
    pub content_type: &'static str,
}

impl Req {
    pub fn get(uri: Uri) -> Req {
        Req {
            method: Method::GET,
            uri,
            body: None,
            content_type: JSON,
        }
    }

    pub fn with_body(method: Method, uri: Uri, body: Bytes) -> Req {
        Req {
            method,
            uri,
            body: Some(body),
            content_type: JSON,
        }
    }
}

/// Makes an origin-form URI from a path that is already percent-encoded.
pub fn uri(path: impl Into<String>) -> anyhow::Result<Uri> {
    let path: String = path.into();
    Uri::from_maybe_shared(Bytes::from(path.clone())).with_context(|| format!("bad path {path:?}"))
}

/// One request on `conn`, with its node's `Host` and the bearer token if any.
async fn send_on(
    conn: &mut Conn,
    req: &Req,
    token: Option<&[u8]>,
) -> Result<crate::bench::wire::Answer, WireError> {
    let all = [
        ("Host", conn.1.as_bytes()),
        ("Authorization", token.unwrap_or_default()),
    ];
    let headers = if token.is_some() { &all[..] } else { &all[..1] };
    conn.0.exchange(req, headers).await
}

async fn resolve(origin: &url::Url) -> anyhow::Result<(SocketAddr, HeaderValue)> {
    if origin.scheme() != "http" {
        anyhow::bail!("only http:// targets are supported, not {origin}");
    }
    let host = origin
        .host_str()
        .ok_or_else(|| anyhow!("{origin} has no host"))?;
    let port = origin.port_or_known_default().unwrap_or(80);
    let address = tokio::net::lookup_host((host, port))
        .await
        .with_context(|| format!("resolving {host}"))?
        .next()
        .ok_or_else(|| anyhow!("{host} resolves to no address"))?;
    Ok((address, HeaderValue::from_str(&format!("{host}:{port}"))?))
}

/// The connection details of one target, shared by every virtual user.
pub struct Client {
    /// Every node's address; new connections take them in turn.
    addresses: Vec<(SocketAddr, HeaderValue)>,
    next_address: std::sync::atomic::AtomicUsize,
    timeout: Duration,
    auth: Option<Arc<TokenSource>>,
    pool: Mutex<Vec<Conn>>,
}

impl Client {
    /// `origin` is `http://host:port`; only plain HTTP is supported. Connections are
    /// spread round-robin over `origin` and the extra `nodes`.
    pub async fn connect_to(
        origin: &url::Url,
        nodes: &[url::Url],
        timeout: Duration,
        auth: Option<Arc<TokenSource>>,
    ) -> anyhow::Result<Client> {
        let mut addresses = Vec::with_capacity(1 + nodes.len());
        for node in std::iter::once(origin).chain(nodes) {
            addresses.push(resolve(node).await?);
        }
        Ok(Client {
            addresses,
            next_address: std::sync::atomic::AtomicUsize::new(0),
            timeout,
            auth,
            pool: Mutex::new(Vec::new()),
        })
    }

    /// The address for a new connection and its `Host` header.
    fn pick(&self) -> &(SocketAddr, HeaderValue) {
        let i = self
            .next_address
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.addresses[i % self.addresses.len()]
    }

    async fn open(&self) -> Result<Conn, Failure> {
        let (address, host) = self.pick();
        let stream = TcpStream::connect(address)
            .await
            .map_err(|_| Failure::Connect)?;
        // Small request/response pairs: Nagle would add up to 40 ms per round trip.
        let _ = stream.set_nodelay(true);
        Ok(Conn(Wire::new(stream), host.clone()))
    }

    /// Sends on the user's own connection, opening (or reopening) it when needed.
    pub async fn send(&self, conn: &mut Option<Conn>, req: &Req) -> Result<Response, Failure> {
        let token = self.auth.as_ref().and_then(|a| a.header());
        let token = token.as_ref().map(|t| t.as_bytes());
        let exchange = async {
            let (mut wire, reused) = match conn.take() {
                Some(c) => (c, true),
                None => (self.open().await?, false),
            };
            let answer = match send_on(&mut wire, req, token).await {
                // A kept-alive connection the server closed while idle: the request was
                // not processed, so it is sent again on a fresh one, even a POST.
                Err(WireError::ClosedBeforeAnswer) if reused => {
                    wire = self.open().await?;
                    send_on(&mut wire, req, token).await
                }
                other => other,
            }
            .map_err(|_| Failure::Io)?;
            if answer.reusable {
                *conn = Some(wire);
            }
            Ok::<_, Failure>(Response {
                status: answer.status,
                body: answer.body,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Failure::Timeout)?
    }

    /// Sends on a pooled connection (for the open model's varying concurrency).
    pub async fn send_pooled(&self, req: &Req) -> Result<Response, Failure> {
        let mut conn = self.pool.lock().expect("pool lock").pop();
        let result = self.send(&mut conn, req).await;
        if let Some(conn) = conn {
            self.pool.lock().expect("pool lock").push(conn);
        }
        result
    }
}
