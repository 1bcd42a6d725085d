//! External identity providers (OpenID Connect): bearer tokens that an issuer such as
//! Keycloak, Entra ID, Okta, Dex or Auth0 signed, verified against the issuer's published
//! keys (JWKS).
//!
//! - Keys come from the issuer's discovery document
//!   (`<issuer>/.well-known/openid-configuration` → `jwks_uri`), from a JWKS URL, or from a
//!   JWKS file. They are loaded at start (a wrong issuer fails the start, not the first
//!   request), re-read when a token names a key not seen yet (the issuer rotated; at most
//!   once per [`MIN_NEW_KEY_REFETCH`], and once per [`MIN_REFETCH`] for a key id the last
//!   re-read did not find), and at least every [`MAX_KEY_AGE`] so that a key the issuer
//!   withdrew stops being trusted.
//! - A token must be signed with an asymmetric algorithm by one of those keys, name the
//!   issuer in `iss`, be within `exp`/`nbf` (with [`LEEWAY_S`] of clock skew), and, when an
//!   audience is configured, list it in `aud`.
//! - One claim (a dotted path, `sub` by default) names the principal; another, optional,
//!   lists principal roles (an array, or a space- or comma-separated string; e.g.
//!   `groups` or Keycloak's `realm_access.roles`).
//!
//! `verify_with` is the pure check; `IdentityProvider` adds fetching and caching.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, AlgorithmFamily, DecodingKey, Validation};
use serde_json::Value;

/// Clock skew tolerated on `exp` and `nbf` of an external token.
pub const LEEWAY_S: i64 = 30;
/// Keys are re-read at least this often.
pub const MAX_KEY_AGE: Duration = Duration::from_secs(600);
/// A token naming a key that the last re-read did not find re-reads the keys at most
/// this often: an attacker sending made-up key ids must not turn Floe into a load
/// generator for the issuer.
pub const MIN_REFETCH: Duration = Duration::from_secs(30);
/// A key id the last re-read was not asked about may re-read the keys sooner, after
/// this long. So made-up key ids cannot hold off a key the issuer has just rotated in
/// for more than this, and still cost the issuer at most one read per interval.
pub const MIN_NEW_KEY_REFETCH: Duration = Duration::from_secs(5);
/// Key ids remembered as missing from the last re-read (beyond that, all are treated
/// as remembered: the longer wait applies).
const MAX_MISSED_KEYS: usize = 64;
/// Longest principal name taken from a token.
const MAX_PRINCIPAL_BYTES: usize = 256;
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the issuer's keys are.
#[derive(Debug, Clone, PartialEq)]
pub enum JwksSource {
    /// From the issuer's discovery document.
    Discover,
    Url(String),
    File(PathBuf),
}

impl JwksSource {
    /// `http(s)://…` is a URL, anything else a file; absent means discovery.
    pub fn parse(raw: Option<&str>) -> JwksSource {
        match raw {
            None => JwksSource::Discover,
            Some(s) if s.starts_with("http://") || s.starts_with("https://") => {
                JwksSource::Url(s.to_string())
            }
            Some(s) => JwksSource::File(PathBuf::from(s)),
        }
    }
}

#[derive(Debug, Clone)]
pub struct OidcSettings {
    /// The issuer, exactly as its tokens' `iss` says it.
    pub issuer: String,
    /// When set, tokens must list it in `aud`.
    pub audience: Option<String>,
    pub jwks: JwksSource,
    /// Dotted path of the claim naming the principal.
    pub principal_claim: String,
    /// Dotted path of the claim listing principal roles.
    pub roles_claim: Option<String>,
    /// Create a principal the first time a valid token names one Floe does not know
    /// (Lakekeeper's behaviour); otherwise such a token is refused (Polaris's).
    pub create_principals: bool,
}

/// What a verified external token says.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityToken {
    pub principal: String,
    /// Principal roles the token names (they still have to exist in Floe).
    pub roles: Vec<String>,
    pub exp: i64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OidcError {
    #[error("the token is malformed")]
    Malformed,
    #[error("the token is not signed by a key of the identity provider")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by another issuer")]
    WrongIssuer,
    #[error("the token is not meant for this server (audience)")]
    WrongAudience,
    #[error("the token has no usable claim {0}")]
    MissingClaim(String),
}

/// Checks `token` against `keys` and `settings` at `now_s` (seconds since the epoch).
pub fn verify_with(
    keys: &JwkSet,
    settings: &OidcSettings,
    token: &str,
    now_s: i64,
) -> Result<IdentityToken, OidcError> {
    let header = decode_header(token).map_err(|_| OidcError::Malformed)?;
    // Only asymmetric algorithms: an issuer's public keys must not double as HMAC
    // secrets, and `none` is never acceptable.
    if header.alg.family() == AlgorithmFamily::Hmac {
        return Err(OidcError::BadSignature);
    }
    let jwk = match &header.kid {
        Some(kid) => keys.find(kid),
        // Without a key id, only an issuer with a single key is unambiguous.
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
    .ok_or(OidcError::BadSignature)?;
    if let Some(alg) = jwk.common.key_algorithm {
        if jsonwebtoken::Algorithm::try_from(alg).ok() != Some(header.alg) {
            return Err(OidcError::BadSignature);
        }
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|_| OidcError::BadSignature)?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&settings.issuer]);
    // Time is checked below against the caller's clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    match &settings.audience {
        // A token without `aud` is not for us either.
        Some(aud) => {
            validation.set_audience(&[aud]);
            validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        }
        None => {
            validation.validate_aud = false;
            validation.set_required_spec_claims(&["exp", "iss"]);
        }
    }
    let claims = decode::<Value>(token, &key, &validation)
        .map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            match e.kind() {
                K::InvalidIssuer => OidcError::WrongIssuer,
                K::InvalidAudience => OidcError::WrongAudience,
                K::InvalidSignature | K::InvalidAlgorithm | K::InvalidKeyFormat => {
                    OidcError::BadSignature
                }
                K::MissingRequiredClaim(c) if c == "aud" => OidcError::WrongAudience,
                _ => OidcError::Malformed,
            }
        })?
        .claims;
    let exp = claims
        .get("exp")
        .and_then(Value::as_i64)
        .ok_or(OidcError::Malformed)?;
    if exp + LEEWAY_S <= now_s {
        return Err(OidcError::Expired);
    }
    if let Some(nbf) = claims.get("nbf") {
        let nbf = nbf.as_i64().ok_or(OidcError::Malformed)?;
        if nbf > now_s + LEEWAY_S {
            return Err(OidcError::NotYetValid);
        }
    }
    let principal = claim(&claims, &settings.principal_claim)
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty() && p.len() <= MAX_PRINCIPAL_BYTES)
        .filter(|p| !p.chars().any(char::is_control))
        .ok_or_else(|| OidcError::MissingClaim(settings.principal_claim.clone()))?;
    let roles = settings
        .roles_claim
        .as_deref()
        .and_then(|path| claim(&claims, path))
        .map(role_names)
        .unwrap_or_default();
    Ok(IdentityToken {
        principal: principal.to_string(),
        roles,
        exp: exp + LEEWAY_S,
    })
}

/// A claim by dotted path (`realm_access.roles`); a claim whose own name has a dot is
/// found too (`https://example.com/roles` style names are tried whole first).
fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    if let Some(v) = claims.get(path) {
        return Some(v);
    }
    path.split('.').try_fold(claims, |v, part| v.get(part))
}

/// Role names from an array of strings or a space- or comma-separated string.
fn role_names(value: &Value) -> Vec<String> {
    let mut names: Vec<String> = match value {
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Value::String(s) => s
            .split([' ', ','])
            .filter(|r| !r.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    names.sort();
    names.dedup();
    names
}

/// The issuer named by a token, read without verifying it (to route a token to the
/// verifier that can check it).
pub fn unverified_issuer(token: &str) -> Option<String> {
    let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(token).ok()?;
    claims.get("iss")?.as_str().map(str::to_string)
}

/// An issuer with its keys, fetched and kept fresh.
pub struct IdentityProvider {
    settings: OidcSettings,
    http: reqwest::Client,
    keys: RwLock<Arc<(JwkSet, Instant)>>,
    /// One re-read at a time.
    refetch: tokio::sync::Mutex<()>,
    /// When a token naming an unknown key last caused a re-read, and which key ids were
    /// still missing after it.
    last_miss: std::sync::Mutex<Misses>,
}

/// The throttle on re-reads caused by unknown key ids (see [`MIN_REFETCH`]).
#[derive(Default)]
struct Misses {
    at: Option<Instant>,
    missing: std::collections::HashSet<String>,
}

impl Misses {
    /// Whether a token naming `kid` may re-read the keys now; if so, it is recorded as
    /// the latest re-read.
    fn may_refetch(&mut self, kid: &str, now: Instant) -> bool {
        if let Some(at) = self.at {
            let since = now.saturating_duration_since(at);
            let asked = self.missing.contains(kid) || self.missing.len() >= MAX_MISSED_KEYS;
            if since < MIN_NEW_KEY_REFETCH || (asked && since < MIN_REFETCH) {
                return false;
            }
        }
        self.at = Some(now);
        self.missing.clear();
        true
    }
}

impl IdentityProvider {
    /// Loads the keys now, so that a misconfigured issuer fails the start.
    pub async fn connect(settings: OidcSettings) -> anyhow::Result<IdentityProvider> {
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .build()
            .map_err(|e| anyhow::anyhow!("HTTP client: {e}"))?;
        let keys = load_keys(&http, &settings).await?;
        if settings.audience.is_none() {
            tracing::warn!(issuer = %settings.issuer, "no --oidc-audience: tokens the issuer signed for any of its clients are accepted; set it to the audience Floe's tokens carry");
        }
        Ok(IdentityProvider {
            settings,
            http,
            keys: RwLock::new(Arc::new((keys, Instant::now()))),
            refetch: tokio::sync::Mutex::new(()),
            last_miss: std::sync::Mutex::new(Misses::default()),
        })
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    /// Whether `token` claims to come from this issuer.
    pub fn issued(&self, token: &str) -> bool {
        unverified_issuer(token).is_some_and(|iss| iss == self.settings.issuer)
    }

    pub async fn verify(&self, token: &str, now_s: i64) -> Result<IdentityToken, OidcError> {
        let current = self.keys.read().expect("poisoned").clone();
        if current.1.elapsed() >= MAX_KEY_AGE {
            self.refresh(current.1).await;
        }
        let current = self.keys.read().expect("poisoned").clone();
        match verify_with(&current.0, &self.settings, token, now_s) {
            Err(OidcError::BadSignature) => {
                let Some(kid) = unknown_key(&current.0, token) else {
                    return Err(OidcError::BadSignature);
                };
                let now = Instant::now();
                if !self
                    .last_miss
                    .lock()
                    .expect("poisoned")
                    .may_refetch(&kid, now)
                {
                    return Err(OidcError::BadSignature);
                }
                self.refresh(current.1).await;
                let fresh = self.keys.read().expect("poisoned").clone();
                if fresh.0.find(&kid).is_none() {
                    let mut misses = self.last_miss.lock().expect("poisoned");
                    if misses.missing.len() < MAX_MISSED_KEYS {
                        misses.missing.insert(kid);
                    }
                }
                verify_with(&fresh.0, &self.settings, token, now_s)
            }
            other => other,
        }
    }

    /// Re-reads the keys unless another request did since `seen`; on failure the keys
    /// held stay in use (the issuer being down must not lock everyone out).
    async fn refresh(&self, seen: Instant) {
        let _one = self.refetch.lock().await;
        if self.keys.read().expect("poisoned").1 != seen {
            return;
        }
        match load_keys(&self.http, &self.settings).await {
            Ok(keys) => *self.keys.write().expect("poisoned") = Arc::new((keys, Instant::now())),
            Err(e) => {
                tracing::warn!(issuer = %self.settings.issuer, error = %e, "could not re-read the identity provider's keys; keeping the ones held");
                // Try again later, not on every request.
                let held = self.keys.read().expect("poisoned").0.clone();
                *self.keys.write().expect("poisoned") = Arc::new((held, Instant::now()));
            }
        }
    }
}

/// The key id `token` names, when `keys` has no such key.
fn unknown_key(keys: &JwkSet, token: &str) -> Option<String> {
    decode_header(token)
        .ok()
        .and_then(|h| h.kid)
        .filter(|kid| keys.find(kid).is_none())
}

async fn load_keys(http: &reqwest::Client, settings: &OidcSettings) -> anyhow::Result<JwkSet> {
    let text = match &settings.jwks {
        JwksSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading JWKS file {}: {e}", path.display()))?,
        JwksSource::Url(url) => get(http, url).await?,
        JwksSource::Discover => {
            let doc = discovery(http, &settings.issuer).await?;
            get(http, doc.url("jwks_uri")?).await?
        }
    };
    let keys: JwkSet =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("reading the JWKS: {e}"))?;
    if keys.keys.is_empty() {
        anyhow::bail!("the identity provider's JWKS has no keys");
    }
    Ok(keys)
}

/// An issuer's discovery document (`<issuer>/.well-known/openid-configuration`).
struct Discovery {
    url: String,
    doc: Value,
}

impl Discovery {
    /// One of the document's endpoint URLs.
    fn url(&self, field: &str) -> anyhow::Result<&str> {
        self.doc
            .get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("discovery document {} has no {field}", self.url))
    }
}

async fn discovery(http: &reqwest::Client, issuer: &str) -> anyhow::Result<Discovery> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let doc: Value = serde_json::from_str(&get(http, &url).await?)
        .map_err(|e| anyhow::anyhow!("discovery document {url}: {e}"))?;
    // OpenID Connect Discovery 1.0 §4.3: the document must name the same issuer.
    if doc.get("issuer").and_then(Value::as_str) != Some(issuer) {
        anyhow::bail!(
            "discovery document {url} names issuer {}, not {issuer}",
            doc.get("issuer").unwrap_or(&Value::Null),
        );
    }
    Ok(Discovery { url, doc })
}

/// Where a browser signs in at an issuer (authorization code flow).
#[derive(Debug, Clone, PartialEq)]
pub struct LoginEndpoints {
    pub authorization: String,
    pub token: String,
}

/// The issuer's authorization and token endpoints, from its discovery document; for
/// the console's sign-in. Read at start, so a wrong issuer fails the start.
pub async fn login_endpoints(issuer: &str) -> anyhow::Result<LoginEndpoints> {
    let http = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(|e| anyhow::anyhow!("HTTP client: {e}"))?;
    let doc = discovery(&http, issuer).await?;
    let endpoint = |field: &str| -> anyhow::Result<String> {
        let url = doc.url(field)?;
        match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(url.to_string()),
            _ => anyhow::bail!("discovery document {} has a bad {field}: {url}", doc.url),
        }
    };
    // The console always sends an S256 challenge; a provider that says it takes only
    // `plain` (or nothing) would refuse every sign-in, so say so at the start. A document
    // that does not list its methods is taken at its word that PKCE works.
    if let Some(methods) = doc.doc.get("code_challenge_methods_supported") {
        let s256 = methods
            .as_array()
            .is_some_and(|m| m.iter().any(|v| v.as_str() == Some("S256")));
        if !s256 {
            anyhow::bail!(
                "discovery document {} does not list S256 in code_challenge_methods_supported ({methods}); the console signs in with PKCE S256",
                doc.url
            );
        }
    }
    Ok(LoginEndpoints {
        authorization: endpoint("authorization_endpoint")?,
        token: endpoint("token_endpoint")?,
    })
}

async fn get(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
    if !response.status().is_success() {
        anyhow::bail!("GET {url}: HTTP {}", response.status());
    }
    response
        .text()
        .await
        .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::jwk::Jwk;
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    use serde_json::json;

    const PEM: &str = include_str!("../../tests/fixtures/oidc-test-key.pem");

    fn key() -> EncodingKey {
        EncodingKey::from_ec_pem(PEM.as_bytes()).unwrap()
    }

    fn jwks(kid: &str) -> JwkSet {
        let mut jwk = Jwk::from_encoding_key(&key(), Algorithm::ES256).unwrap();
        jwk.common.key_id = Some(kid.into());
        JwkSet { keys: vec![jwk] }
    }

    fn settings() -> OidcSettings {
        OidcSettings {
            issuer: "https://idp.example".into(),
            audience: Some("floe".into()),
            jwks: JwksSource::Discover,
            principal_claim: "preferred_username".into(),
            roles_claim: Some("realm_access.roles".into()),
            create_principals: false,
        }
    }

    fn token(kid: &str, claims: Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        encode(&header, &claims, &key()).unwrap()
    }

    fn claims() -> Value {
        json!({"iss": "https://idp.example", "aud": ["floe", "other"], "exp": 1000, "nbf": 100,
               "sub": "8c1f", "preferred_username": "alice",
               "realm_access": {"roles": ["readers", "writers", "readers"]}})
    }

    #[test]
    fn a_good_token_names_principal_and_roles() {
        let t = verify_with(&jwks("k1"), &settings(), &token("k1", claims()), 500).unwrap();
        assert_eq!(t.principal, "alice");
        assert_eq!(t.roles, ["readers", "writers"]);
        assert_eq!(t.exp, 1000 + LEEWAY_S);
    }

    #[test]
    fn time_issuer_audience_and_claims_are_checked() {
        let s = settings();
        let keys = jwks("k1");
        let with = |patch: Value| {
            let mut c = claims();
            for (k, v) in patch.as_object().unwrap() {
                if v.is_null() {
                    c.as_object_mut().unwrap().remove(k);
                } else {
                    c[k] = v.clone();
                }
            }
            verify_with(&keys, &s, &token("k1", c), 500)
        };
        assert_eq!(with(json!({"exp": 400})), Err(OidcError::Expired));
        assert!(with(json!({"exp": 500 - LEEWAY_S + 1})).is_ok(), "leeway");
        assert_eq!(with(json!({"nbf": 600})), Err(OidcError::NotYetValid));
        assert_eq!(
            with(json!({"iss": "https://evil.example"})),
            Err(OidcError::WrongIssuer)
        );
        assert_eq!(with(json!({"aud": "other"})), Err(OidcError::WrongAudience));
        assert_eq!(with(json!({"aud": null})), Err(OidcError::WrongAudience));
        assert_eq!(with(json!({"exp": null})), Err(OidcError::Malformed));
        assert_eq!(
            with(json!({"preferred_username": null})),
            Err(OidcError::MissingClaim("preferred_username".into()))
        );
        assert_eq!(
            with(json!({"preferred_username": 7})),
            Err(OidcError::MissingClaim("preferred_username".into()))
        );
        // No roles claim: no roles, not an error.
        assert_eq!(
            with(json!({"realm_access": null})).unwrap().roles,
            Vec::<String>::new()
        );
        let mut no_aud = s.clone();
        no_aud.audience = None;
        let mut c = claims();
        c.as_object_mut().unwrap().remove("aud");
        assert!(verify_with(&keys, &no_aud, &token("k1", c), 500).is_ok());
    }

    #[test]
    fn foreign_unsigned_and_symmetric_tokens_are_refused() {
        let s = settings();
        // Another key id than the issuer's.
        assert_eq!(
            verify_with(&jwks("k1"), &s, &token("k2", claims()), 500),
            Err(OidcError::BadSignature)
        );
        // alg none.
        use base64::Engine;
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let none = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#),
            b64(&claims().to_string())
        );
        assert!(verify_with(&jwks("k1"), &s, &none, 500).is_err());
        // HS256 keyed with the public key's bytes (the classic algorithm confusion).
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let hs = encode(&header, &claims(), &EncodingKey::from_secret(b"x")).unwrap();
        assert_eq!(
            verify_with(&jwks("k1"), &s, &hs, 500),
            Err(OidcError::BadSignature)
        );
        // A tampered payload.
        let good = token("k1", claims());
        let mut parts: Vec<&str> = good.split('.').collect();
        let mut evil = claims();
        evil["preferred_username"] = json!("root");
        let payload = b64(&evil.to_string());
        parts[1] = &payload;
        assert_eq!(
            verify_with(&jwks("k1"), &s, &parts.join("."), 500),
            Err(OidcError::BadSignature)
        );
        assert_eq!(
            verify_with(&jwks("k1"), &s, "not a token", 500),
            Err(OidcError::Malformed)
        );
    }

    #[test]
    fn claims_and_roles_by_path_and_shape() {
        let c = json!({"a": {"b": "x"}, "https://x.io/roles": "r1 r2,r3", "n": 1});
        assert_eq!(claim(&c, "a.b"), Some(&json!("x")));
        assert_eq!(claim(&c, "a.c"), None);
        assert_eq!(
            role_names(claim(&c, "https://x.io/roles").unwrap()),
            ["r1", "r2", "r3"]
        );
        assert!(role_names(&json!(5)).is_empty());
        assert_eq!(
            JwksSource::parse(Some("https://idp/jwks")),
            JwksSource::Url("https://idp/jwks".into())
        );
        assert_eq!(
            JwksSource::parse(Some("keys.json")),
            JwksSource::File("keys.json".into())
        );
        assert_eq!(JwksSource::parse(None), JwksSource::Discover);
    }

    #[test]
    fn made_up_key_ids_cannot_hold_off_a_new_key_for_long() {
        use super::{Misses, MAX_MISSED_KEYS, MIN_NEW_KEY_REFETCH, MIN_REFETCH};
        let start = Instant::now();
        let at = |d: Duration| start + d;
        let mut misses = Misses::default();
        assert!(
            misses.may_refetch("forged-1", start),
            "the first miss re-reads at once"
        );
        misses.missing.insert("forged-1".into());
        // Nothing re-reads within the short interval, whatever the key id.
        assert!(!misses.may_refetch("rotated-in", at(MIN_NEW_KEY_REFETCH / 2)));
        // A key id the last re-read did not find waits the long interval ...
        assert!(!misses.may_refetch("forged-1", at(MIN_NEW_KEY_REFETCH * 2)));
        // ... one it was not asked about re-reads after the short one.
        assert!(misses.may_refetch("rotated-in", at(MIN_NEW_KEY_REFETCH * 2)));
        assert!(misses.missing.is_empty(), "a re-read starts a new list");
        // Past the long interval, any key id re-reads.
        misses.missing.insert("forged-1".into());
        assert!(misses.may_refetch("forged-1", at(MIN_NEW_KEY_REFETCH * 2 + MIN_REFETCH)));
        // A full list counts every key id as asked about.
        let t = at(MIN_NEW_KEY_REFETCH * 2 + MIN_REFETCH);
        for i in 0..MAX_MISSED_KEYS {
            misses.missing.insert(format!("forged-{i}"));
        }
        assert!(!misses.may_refetch("anything", t + MIN_NEW_KEY_REFETCH * 2));
        assert!(misses.may_refetch("anything", t + MIN_REFETCH));
    }

    /// An issuer serving `extra` in its discovery document, on a loopback port.
    async fn issuer_with(extra: Value) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut doc = json!({"issuer": url, "authorization_endpoint": format!("{url}/auth"),
                             "token_endpoint": format!("{url}/token")});
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        let app = axum::Router::new().route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || async move { axum::Json(doc) }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    #[tokio::test]
    async fn the_console_sign_in_needs_a_provider_that_takes_s256() {
        let unlisted = issuer_with(json!({})).await;
        let endpoints = login_endpoints(&unlisted).await.unwrap();
        assert_eq!(endpoints.token, format!("{unlisted}/token"));
        let listed = issuer_with(json!({"code_challenge_methods_supported": ["plain", "S256"]}));
        assert!(login_endpoints(&listed.await).await.is_ok());
        for methods in [json!(["plain"]), json!([]), json!("S256")] {
            let issuer = issuer_with(json!({ "code_challenge_methods_supported": methods })).await;
            let err = login_endpoints(&issuer).await.unwrap_err().to_string();
            assert!(err.contains("does not list S256"), "{err}");
        }
        let bad = issuer_with(json!({"token_endpoint": "ftp://x/token"})).await;
        let err = login_endpoints(&bad).await.unwrap_err().to_string();
        assert!(err.contains("bad token_endpoint"), "{err}");
    }
}
