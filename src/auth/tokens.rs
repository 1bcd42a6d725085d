//! Access tokens Floe issues: JWTs signed with HS256 under a key kept in the store, so a
//! token stays valid across restarts and on every node (Polaris's default signs with a
//! key pair made at start, so its tokens die with the process). Rotating the key keeps
//! the previous one for verification until its tokens have expired. Only HS256 is
//! accepted for Floe's own tokens: `alg: none` and other algorithms are refused.

use jsonwebtoken::{
    decode, decode_header, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation,
};
use serde::{Deserialize, Serialize};

use super::state::SecurityState;

pub const ISSUER: &str = "floe";
/// What the token endpoint says it issued.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    /// The principal's name.
    pub sub: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    pub client_id: String,
    /// The principal roles this token acts with, space-separated.
    pub scope: String,
    /// Which of the principal's secrets the token was issued with
    /// (`SecretHashes::tag_for`): the token is valid while that secret is, so a reset
    /// ends the tokens of the secrets it replaced. Empty in tokens issued before it
    /// existed, which are taken until they expire but never exchanged for new ones.
    #[serde(default, rename = "sec", skip_serializing_if = "String::is_empty")]
    pub secret_tag: String,
}

impl Claims {
    pub fn roles(&self) -> Vec<String> {
        self.scope.split_whitespace().map(str::to_string).collect()
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenError {
    #[error("the token is malformed")]
    Malformed,
    #[error("the token is not signed by this server")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("no signing key: the server has not been bootstrapped")]
    NoKey,
}

/// Signs claims with the newest key.
pub fn issue(state: &SecurityState, claims: &Claims) -> Result<String, TokenError> {
    let key = state.signing_keys.first().ok_or(TokenError::NoKey)?;
    let secret = key_bytes(&key.secret)?;
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(key.kid.clone());
    encode(&header, claims, &EncodingKey::from_secret(&secret)).map_err(|_| TokenError::NoKey)
}

/// Checks a token's signature (by any key still kept), issuer and expiry.
pub fn verify(state: &SecurityState, token: &str, now_s: i64) -> Result<Claims, TokenError> {
    let header = decode_header(token).map_err(|_| TokenError::Malformed)?;
    if header.alg != Algorithm::HS256 {
        return Err(TokenError::BadSignature);
    }
    let kid = header.kid.ok_or(TokenError::BadSignature)?;
    let key = state
        .signing_keys
        .iter()
        .find(|k| k.kid == kid)
        .ok_or(TokenError::BadSignature)?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "iss", "sub"]);
    // Expiry is checked below against the caller's clock, without leeway.
    validation.validate_exp = false;
    let claims = decode::<Claims>(
        token,
        &DecodingKey::from_secret(&key_bytes(&key.secret)?),
        &validation,
    )
    .map_err(|e| match e.kind() {
        jsonwebtoken::errors::ErrorKind::InvalidSignature
        | jsonwebtoken::errors::ErrorKind::InvalidAlgorithm
        | jsonwebtoken::errors::ErrorKind::InvalidIssuer => TokenError::BadSignature,
        _ => TokenError::Malformed,
    })?
    .claims;
    if claims.exp <= now_s {
        return Err(TokenError::Expired);
    }
    // A replaced key signed nothing that expires after its last rightful token: once
    // that one has expired, so has everything it verifies.
    if (key.retired_after_ms).is_some_and(|retired| claims.exp.saturating_mul(1000) > retired) {
        return Err(TokenError::BadSignature);
    }
    Ok(claims)
}

fn key_bytes(secret: &str) -> Result<Vec<u8>, TokenError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(secret)
        .map_err(|_| TokenError::NoKey)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::secrets::new_signing_key;
    use crate::auth::state::SigningKey;

    fn state(kid: &str) -> SecurityState {
        SecurityState {
            signing_keys: vec![SigningKey {
                kid: kid.into(),
                secret: new_signing_key(),
                created_ms: 0,
                retired_after_ms: None,
            }],
            ..Default::default()
        }
    }

    fn claims(exp: i64) -> Claims {
        Claims {
            iss: ISSUER.into(),
            sub: "alice".into(),
            iat: 0,
            exp,
            jti: "j".into(),
            client_id: "c".into(),
            scope: "readers writers".into(),
            secret_tag: "t".into(),
        }
    }

    #[test]
    fn a_replaced_key_verifies_only_what_it_could_rightly_have_signed() {
        let mut s = state("k1");
        let rightful = issue(&s, &claims(100)).unwrap();
        // A forgery with the same key, claiming a far expiry.
        let forged = issue(&s, &claims(10_000)).unwrap();
        assert!(verify(&s, &forged, 99).is_ok());
        // Replaced at 50 s, tokens living 60 s at most: k1's last rightful token expires
        // at 110 s.
        s.rotate_signing_key(
            SigningKey {
                kid: "k2".into(),
                secret: new_signing_key(),
                created_ms: 50_000,
                retired_after_ms: None,
            },
            60_000,
        );
        assert_eq!(verify(&s, &rightful, 99).unwrap(), claims(100));
        assert_eq!(verify(&s, &forged, 99), Err(TokenError::BadSignature));
    }

    #[test]
    fn tokens_verify_until_they_expire() {
        let s = state("k1");
        let token = issue(&s, &claims(100)).unwrap();
        assert_eq!(verify(&s, &token, 99).unwrap(), claims(100));
        assert_eq!(verify(&s, &token, 100), Err(TokenError::Expired));
        assert_eq!(claims(1).roles(), ["readers", "writers"]);
    }

    #[test]
    fn foreign_forged_and_unsigned_tokens_are_refused() {
        let ours = state("k1");
        let theirs = state("k1"); // same kid, another secret
        let forged = issue(&theirs, &claims(100)).unwrap();
        assert_eq!(verify(&ours, &forged, 1), Err(TokenError::BadSignature));
        // alg: none, with our kid.
        use base64::Engine;
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let none = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#),
            b64(&serde_json::to_string(&claims(100)).unwrap())
        );
        assert!(verify(&ours, &none, 1).is_err());
        assert_eq!(verify(&ours, "garbage", 1), Err(TokenError::Malformed));
        // A token signed by a key that was dropped.
        let token = issue(&ours, &claims(100)).unwrap();
        assert_eq!(
            verify(&state("k2"), &token, 1),
            Err(TokenError::BadSignature)
        );
    }
}
