//! External identity providers over HTTP: the test plays an OpenID Connect issuer (a
//! discovery document and a JWKS served on a loopback port, tokens signed with the
//! fixture keys), and Floe verifies its tokens: principal and roles from claims, every
//! bad token a 401 with nothing changed, principals created on first sight when asked,
//! the issuer's key rotation picked up, the token endpoint closed in `external` mode.

use std::sync::{Arc, Mutex};

use crate::common::*;
use axum::extract::State;
use axum::routing::get;
use axum::Json;
use floe::auth::oidc::{JwksSource, OidcSettings};
use floe::http::auth::AuthMode;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{json, Value};

const AUDIENCE: &str = "floe-tests";

fn key(n: u8) -> EncodingKey {
    let pem = match n {
        1 => include_str!("../fixtures/oidc-test-key.pem"),
        _ => include_str!("../fixtures/oidc-test-key-2.pem"),
    };
    EncodingKey::from_ec_pem(pem.as_bytes()).unwrap()
}

fn jwk(n: u8) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(&key(n), Algorithm::ES256).unwrap();
    jwk.common.key_id = Some(format!("k{n}"));
    jwk
}

/// The issuer: its discovery document and the keys it publishes now.
struct Issuer {
    url: String,
    keys: Arc<Mutex<JwkSet>>,
}

impl Issuer {
    async fn start() -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let keys = Arc::new(Mutex::new(JwkSet { keys: vec![jwk(1)] }));
        let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks"),
                               "token_endpoint": format!("{url}/token")});
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || async move { Json(discovery) }),
            )
            .route(
                "/jwks",
                get(|State(keys): State<Arc<Mutex<JwkSet>>>| async move {
                    Json(keys.lock().unwrap().clone())
                }),
            )
            .with_state(keys.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Issuer { url, keys }
    }

    fn publish(&self, n: u8) {
        self.keys.lock().unwrap().keys.push(jwk(n));
    }

    /// A token for `sub` with `groups`, valid for an hour, signed with key `n`.
    fn token(&self, sub: &str, groups: &[&str]) -> String {
        self.token_with(1, json!({"sub": sub, "groups": groups}))
    }

    fn token_with(&self, n: u8, patch: Value) -> String {
        let now = now_ms() / 1000;
        let mut claims = json!({"iss": self.url, "aud": AUDIENCE, "iat": now, "nbf": now - 1,
                                "exp": now + 3600, "sub": "alice"});
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(format!("k{n}"));
        encode(&header, &claims, &key(n)).unwrap()
    }

    fn settings(&self, create_principals: bool) -> OidcSettings {
        OidcSettings {
            issuer: self.url.clone(),
            audience: Some(AUDIENCE.into()),
            jwks: JwksSource::Discover,
            principal_claim: "sub".into(),
            roles_claim: Some("groups".into()),
            create_principals,
        }
    }
}

async fn server(mode: AuthMode, oidc: OidcSettings) -> Server {
    Server::start_with(|c| {
        c.auth.mode = mode;
        c.auth.oidc = Some(oidc);
        c.bootstrap_credentials = Some((ROOT_ID.into(), ROOT_SECRET.into()));
    })
    .await
}

/// Makes the helpers of `common` (listing, state snapshots) send `token`.
fn authorize(s: &mut Server, token: &str) {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    s.client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
}

async fn call(s: &Server, token: &str, method: Method, path: &str, body: Option<&Value>) -> Resp {
    s.call_with(
        method,
        path,
        body,
        &[("authorization", &format!("Bearer {token}"))],
    )
    .await
}

async fn root_token(s: &Server) -> String {
    let request = s.client.post(s.url("/v1/oauth/tokens")).form(&[
        ("grant_type", "client_credentials"),
        ("client_id", ROOT_ID),
        ("client_secret", ROOT_SECRET),
        ("scope", "PRINCIPAL_ROLE:ALL"),
    ]);
    s.send("root token".into(), request).await.ok(200).json()["access_token"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn principals(s: &Server, token: &str) -> Vec<String> {
    let list = call(s, token, Method::GET, &format!("{MGMT}/principals"), None)
        .await
        .ok(200)
        .json();
    let mut names: Vec<String> = list["principals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn external_tokens_act_as_known_principals_with_the_roles_they_name() {
    let idp = Issuer::start().await;
    let mut s = server(AuthMode::Both, idp.settings(false)).await;
    let root = root_token(&s).await;
    authorize(&mut s, &root);
    let create = |name: &str| json!({ "namespace": [name] });
    let namespaces = format!("{V1}/namespaces");

    // Unknown principal, and creation on first sight off: refused, nothing created.
    let alice = idp.token("alice", &["service_admin"]);
    let refused = call(&s, &alice, Method::POST, &namespaces, Some(&create("a")))
        .await
        .error(401, "NotAuthorizedException");
    assert!(refused.contains("not known"), "{refused}");
    assert_eq!(principals(&s, &root).await, ["root"]);

    call(
        &s,
        &root,
        Method::POST,
        &format!("{MGMT}/principals"),
        Some(&json!({"principal": {"name": "alice"}})),
    )
    .await
    .ok(201);
    // Known now, but with no roles of its own and none (that exist) in the token.
    let plain = idp.token("alice", &["no_such_role"]);
    call(&s, &plain, Method::POST, &namespaces, Some(&create("a")))
        .await
        .error(403, "ForbiddenException");
    assert!(s.list_namespaces(None).await.is_empty());
    // The groups claim names service_admin: the token acts with it.
    call(&s, &alice, Method::POST, &namespaces, Some(&create("a")))
        .await
        .ok(200);
    assert_eq!(s.list_namespaces(None).await, [vec!["a".to_string()]]);
    // Floe's own tokens still work in `both` mode.
    call(&s, &root, Method::GET, &namespaces, None)
        .await
        .ok(200);

    // A deleted principal's tokens stop working at once.
    call(
        &s,
        &root,
        Method::DELETE,
        &format!("{MGMT}/principals/alice"),
        None,
    )
    .await
    .ok(204);
    call(&s, &alice, Method::GET, &namespaces, None)
        .await
        .error(401, "NotAuthorizedException");
}

#[tokio::test]
async fn bad_external_tokens_are_401_and_change_nothing() {
    let idp = Issuer::start().await;
    let mut s = server(AuthMode::External, idp.settings(true)).await;
    authorize(&mut s, &idp.token("root", &[]));
    let now = now_ms() / 1000;
    let path = format!("{V1}/namespaces");
    let body = json!({"namespace": ["x"]});
    let before = s.state().await;
    let admin = ["service_admin"];
    let cases: Vec<(&str, String)> = vec![
        (
            "expired",
            idp.token_with(1, json!({"groups": admin, "exp": now - 120})),
        ),
        (
            "not yet valid",
            idp.token_with(1, json!({"groups": admin, "nbf": now + 600})),
        ),
        (
            "another audience",
            idp.token_with(1, json!({"groups": admin, "aud": "other"})),
        ),
        (
            "no audience",
            idp.token_with(1, json!({"groups": admin, "aud": null})),
        ),
        (
            "another issuer",
            idp.token_with(1, json!({"groups": admin, "iss": "https://evil"})),
        ),
        (
            "no subject",
            idp.token_with(1, json!({"groups": admin, "sub": null})),
        ),
        // Signed with a key the issuer does not publish (a re-read does not find it).
        (
            "unpublished key",
            idp.token_with(2, json!({"groups": admin})),
        ),
        ("garbage", "a.b.c".into()),
    ];
    for (what, token) in &cases {
        let r = call(&s, token, Method::POST, &path, Some(&body)).await;
        assert_eq!(r.status, 401, "{what}: {}", r.body);
        r.error(401, "NotAuthorizedException");
    }
    // Tampered: a valid token's payload swapped for one naming root.
    let good = idp.token("alice", &[]);
    let evil = idp.token("root", &admin);
    let parts: Vec<&str> = good.split('.').collect();
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        evil.split('.').nth(1).unwrap(),
        parts[2]
    );
    call(&s, &forged, Method::POST, &path, Some(&body))
        .await
        .error(401, "NotAuthorizedException");
    s.assert_unchanged(&before, "bad external tokens").await;
    // And the good one works (alice is created on first sight, without roles: 403).
    call(&s, &good, Method::POST, &path, Some(&body))
        .await
        .error(403, "ForbiddenException");
}

#[tokio::test]
async fn external_mode_creates_principals_on_first_sight_and_closes_the_token_endpoint() {
    let idp = Issuer::start().await;
    let s = server(AuthMode::External, idp.settings(true)).await;
    // The token endpoint is closed, even to the bootstrap credentials.
    let request = s.client.post(s.url("/v1/oauth/tokens")).form(&[
        ("grant_type", "client_credentials"),
        ("client_id", ROOT_ID),
        ("client_secret", ROOT_SECRET),
    ]);
    let body = s.send("token".into(), request).await.json();
    assert_eq!(body["error"], "unsupported_grant_type", "{body}");

    let bob = idp.token("bob", &[]);
    call(&s, &bob, Method::GET, &format!("{V1}/namespaces"), None)
        .await
        .error(403, "ForbiddenException");
    // The issuer's `root` is Floe's root (service_admin): it sees bob, marked as external.
    let root = idp.token("root", &[]);
    assert_eq!(principals(&s, &root).await, ["bob", "root"]);
    let record = call(
        &s,
        &root,
        Method::GET,
        &format!("{MGMT}/principals/bob"),
        None,
    )
    .await
    .ok(200)
    .json();
    assert_eq!(
        record["properties"]["floe.identity-provider"],
        idp.url.as_str()
    );
}

#[tokio::test]
async fn a_key_the_issuer_rotates_in_is_picked_up() {
    let idp = Issuer::start().await;
    let s = server(AuthMode::External, idp.settings(false)).await;
    let path = format!("{V1}/namespaces");
    let rotated = idp.token_with(2, json!({"sub": "root"}));
    idp.publish(2);
    call(&s, &rotated, Method::GET, &path, None).await.ok(200);
    // The old key still works while the issuer publishes it.
    call(&s, &idp.token("root", &[]), Method::GET, &path, None)
        .await
        .ok(200);
}

#[tokio::test]
async fn keys_from_a_jwks_file_and_a_wrong_issuer_fails_the_start() {
    let idp = Issuer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jwks.json");
    std::fs::write(
        &file,
        serde_json::to_string(&JwkSet { keys: vec![jwk(1)] }).unwrap(),
    )
    .unwrap();
    let mut settings = idp.settings(false);
    settings.jwks = JwksSource::File(file);
    let s = server(AuthMode::External, settings).await;
    call(
        &s,
        &idp.token("root", &[]),
        Method::GET,
        &format!("{V1}/namespaces"),
        None,
    )
    .await
    .ok(200);

    // Discovery that names another issuer: the server does not start.
    let mut wrong = idp.settings(false);
    wrong.issuer = format!("{}/", idp.url);
    let mut config = floe::server::ServerConfig::new(dir.path().join("data"));
    config.auth.mode = AuthMode::External;
    config.auth.oidc = Some(wrong);
    let Err(err) = floe::server::build(&config).await else {
        panic!("a discovery document naming another issuer must fail the start");
    };
    assert!(format!("{err:#}").contains("names issuer"), "{err:#}");
}
