//! Client secrets: generated from the OS's random source (128 bits), stored only as
//! salted SHA-256 hashes (the secrets are random, so a fast hash is enough; slow
//! password hashes exist for guessable passwords), compared in constant time. A rotated
//! secret keeps the previous one valid as the secondary.

use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A fresh random value: `bytes` random bytes, hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new client id (64 bits, hex) and secret (128 bits, hex), as Polaris shapes them.
pub fn new_credentials() -> (String, String) {
    (random_hex(8), random_hex(16))
}

/// A new HMAC signing key (256 bits), base64.
pub fn new_signing_key() -> String {
    let mut buf = [0u8; 32];
    rand::rng().fill_bytes(&mut buf);
    base64::engine::general_purpose::STANDARD.encode(buf)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretHashes {
    pub salt: String,
    pub main: String,
    /// The previous secret after a rotation, still accepted.
    pub secondary: Option<String>,
}

fn hash(secret: &str, salt: &str) -> String {
    let digest = Sha256::new()
        .chain_update(secret.as_bytes())
        .chain_update(b":")
        .chain_update(salt.as_bytes())
        .finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A secret's tag in tokens: 64 bits of a digest of its stored hash.
fn tag(stored_hash: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"floe-token-tag:")
        .chain_update(stored_hash.as_bytes())
        .finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

impl SecretHashes {
    pub fn new(secret: &str) -> Self {
        let salt = random_hex(16);
        SecretHashes {
            main: hash(secret, &salt),
            salt,
            secondary: None,
        }
    }

    /// Whether `secret` is the main or the secondary secret (compared in constant time),
    /// and if so its tag for the tokens issued with it: a short digest of its stored
    /// hash, so a token names its secret without carrying anything a secret could be
    /// found from.
    pub fn tag_for(&self, secret: &str) -> Option<String> {
        let candidate = hash(secret, &self.salt);
        let main: bool = candidate.as_bytes().ct_eq(self.main.as_bytes()).into();
        let secondary = self
            .secondary
            .as_ref()
            .is_some_and(|s| bool::from(candidate.as_bytes().ct_eq(s.as_bytes())));
        (main | secondary).then(|| tag(&candidate))
    }

    /// Whether `tag` names the main or the secondary secret: a token issued with a
    /// secret stays valid while the secret does (until a reset, or a second rotation).
    pub fn holds_tag(&self, tag_of_token: &str) -> bool {
        let held = std::iter::once(&self.main).chain(&self.secondary);
        held.map(|h| tag(h))
            .any(|t| bool::from(t.as_bytes().ct_eq(tag_of_token.as_bytes())))
    }

    /// A new main secret; the current main becomes the secondary.
    pub fn rotate(&self, secret: &str) -> Self {
        SecretHashes {
            main: hash(secret, &self.salt),
            salt: self.salt.clone(),
            secondary: Some(self.main.clone()),
        }
    }

    /// A new main secret; no secondary (the old one stops working at once).
    pub fn reset(secret: &str) -> Self {
        SecretHashes::new(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_verify_and_rotate() {
        let (id, secret) = new_credentials();
        assert_eq!(id.len(), 16);
        assert_eq!(secret.len(), 32);
        let matches = |hashes: &SecretHashes, secret: &str| hashes.tag_for(secret).is_some();
        let hashes = SecretHashes::new(&secret);
        assert!(matches(&hashes, &secret));
        assert!(!matches(&hashes, "wrong"));
        assert!(!hashes.main.contains(&secret));
        let rotated = hashes.rotate("new");
        assert!(matches(&rotated, "new") && matches(&rotated, &secret));
        let reset = SecretHashes::reset("newer");
        assert!(matches(&reset, "newer") && !matches(&reset, "new"));
        // Tokens name their secret: valid through one rotation, not through a reset.
        let first = hashes.tag_for(&secret).unwrap();
        assert_eq!(hashes.tag_for("wrong"), None);
        assert!(hashes.holds_tag(&first));
        assert!(rotated.holds_tag(&first));
        let second = rotated.tag_for("new").unwrap();
        assert_ne!(first, second);
        assert!(!rotated.rotate("third").holds_tag(&first));
        assert!(rotated.rotate("third").holds_tag(&second));
        assert!(!reset.holds_tag(&first) && !reset.holds_tag(&second));
        assert!(!hashes.holds_tag(""));
    }
}
