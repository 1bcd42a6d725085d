//! Signing in to a test server: the root principal's credentials, a server with
//! authentication on, tokens from its token endpoint, a client acting with one token, and
//! a principal holding given grants through a catalog role of its own.

use reqwest::Method;
use serde_json::{json, Value};

use super::{Resp, Server};

pub const ROOT_ID: &str = "root-id";
pub const ROOT_SECRET: &str = "root-secret-0123456789";

pub async fn secure_server() -> Server {
    secure_server_with(|_| {}).await
}

pub async fn secure_server_with(configure: impl FnOnce(&mut floe::server::ServerConfig)) -> Server {
    Server::start_with(|c| {
        c.auth.mode = floe::http::auth::AuthMode::Internal;
        c.bootstrap_credentials = Some((ROOT_ID.into(), ROOT_SECRET.into()));
        configure(c);
    })
    .await
}

pub async fn token_response(s: &Server, form: &[(&str, &str)]) -> Resp {
    let request = s.client.post(s.url("/v1/oauth/tokens")).form(form);
    s.send(format!("POST /v1/oauth/tokens {form:?}"), request)
        .await
}

/// A token exchange (Iceberg Java's refresh) of `subject` for a token of scope `catalog`.
pub async fn exchange(s: &Server, subject: &str) -> Resp {
    let form = [
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        ("subject_token", subject),
        (
            "subject_token_type",
            "urn:ietf:params:oauth:token-type:access_token",
        ),
        ("scope", "catalog"),
    ];
    token_response(s, &form).await
}

pub async fn token(s: &Server, id: &str, secret: &str, scope: &str) -> String {
    let r = token_response(
        s,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", id),
            ("client_secret", secret),
            ("scope", scope),
        ],
    )
    .await
    .ok(200);
    let body = r.json();
    assert_eq!(body["token_type"], "bearer");
    assert!(body["expires_in"].as_i64().unwrap() > 0);
    body["access_token"].as_str().unwrap().to_string()
}

/// A client acting with one token.
pub struct As<'a> {
    pub s: &'a Server,
    pub bearer: String,
}

impl<'a> As<'a> {
    pub fn new(s: &'a Server, token: &str) -> Self {
        As {
            s,
            bearer: format!("Bearer {token}"),
        }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        self.s
            .call_with(method, path, body, &[("authorization", &self.bearer)])
            .await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Method::DELETE, path, None).await
    }

    /// POST with an `Idempotency-Key`.
    pub async fn post_keyed(&self, path: &str, body: &Value, key: &str) -> Resp {
        let headers = [
            ("authorization", self.bearer.as_str()),
            ("idempotency-key", key),
        ];
        self.s
            .call_with(Method::POST, path, Some(body), &headers)
            .await
    }
}

pub const MGMT: &str = "/api/management/v1";

/// Creates a principal holding a new principal role that holds a new catalog role of
/// `catalog` with `grants`; returns its client id and secret.
pub async fn principal_with(
    root: &As<'_>,
    name: &str,
    catalog: &str,
    grants: &[Value],
) -> (String, String) {
    let created = root
        .post(
            &format!("{MGMT}/principals"),
            &json!({"principal": {"name": name}}),
        )
        .await
        .ok(201)
        .json();
    let credentials = &created["credentials"];
    let (id, secret) = (
        credentials["clientId"].as_str().unwrap().to_string(),
        credentials["clientSecret"].as_str().unwrap().to_string(),
    );
    let role = format!("{name}_role");
    root.post(
        &format!("{MGMT}/principal-roles"),
        &json!({"principalRole": {"name": role}}),
    )
    .await
    .ok(201);
    root.put(
        &format!("{MGMT}/principals/{name}/principal-roles"),
        &json!({"principalRole": {"name": role}}),
    )
    .await
    .ok(201);
    root.post(
        &format!("{MGMT}/catalogs/{catalog}/catalog-roles"),
        &json!({"catalogRole": {"name": role}}),
    )
    .await
    .ok(201);
    root.put(
        &format!("{MGMT}/principal-roles/{role}/catalog-roles/{catalog}"),
        &json!({"catalogRole": {"name": role}}),
    )
    .await
    .ok(201);
    for grant in grants {
        root.put(
            &format!("{MGMT}/catalogs/{catalog}/catalog-roles/{role}/grants"),
            &json!({ "grant": grant }),
        )
        .await
        .ok(201);
    }
    (id, secret)
}
