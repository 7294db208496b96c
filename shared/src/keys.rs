//! API keys: generation, parsing, hashing and checking. Pure: no I/O.
//!
//! A key is any printable-ASCII string of 16 to 256 characters; generated keys are `lk_` followed
//! by 32 random bytes in base64url. Only SHA-256(key) is stored. The key's id, used to find the
//! record, is the first 8 bytes of that hash in hex: it reveals nothing usable about the key, and
//! lets `--api-key ACCOUNT:KEY` register any key a developer picks. The stored hash is compared in
//! constant time.

use crate::clock::Millis;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::fmt;
use subtle::ConstantTimeEq;

pub const MIN_KEY_LENGTH: usize = 16;
pub const MAX_KEY_LENGTH: usize = 256;

/// A well-formed API key as presented by a caller. Its Debug form never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({})", self.id().as_str())
    }
}

impl ApiKey {
    /// `None` when `presented` cannot be a key (wrong length or a character outside `!`..`~`).
    pub fn parse(presented: &str) -> Option<Self> {
        let ok = (MIN_KEY_LENGTH..=MAX_KEY_LENGTH).contains(&presented.len())
            && presented.bytes().all(|b| b.is_ascii_graphic());
        ok.then(|| Self(presented.to_owned()))
    }

    /// A new random key from the operating system's generator.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Self(format!(
            "lk_{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        )))
    }

    /// The plain key, to show once at creation.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> [u8; 32] {
        Sha256::digest(self.0.as_bytes()).into()
    }

    pub fn id(&self) -> KeyId {
        KeyId(hex::encode(&self.hash()[..8]))
    }
}

/// The public identifier of a key: 16 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyId(String);

impl KeyId {
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A stored key: its id, owner and hash, never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub id: KeyId,
    pub account: String,
    pub hash: [u8; 32],
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
    /// Created with the admin role: it may revoke and read the audit (docs/adr/0008).
    pub admin: bool,
}

impl KeyRecord {
    pub fn new(key: &ApiKey, account: &str, now: Millis) -> Self {
        Self {
            id: key.id(),
            account: account.to_owned(),
            hash: key.hash(),
            created_at: now,
            revoked_at: None,
            admin: false,
        }
    }

    /// This record with the admin role, or without it.
    pub fn with_admin(self, admin: bool) -> Self {
        Self { admin, ..self }
    }

    /// Whether `key` is this record's key and the record is not revoked.
    pub fn accepts(&self, key: &ApiKey) -> bool {
        let matches: bool = self.hash.ct_eq(&key.hash()).into();
        matches && self.revoked_at.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = ApiKey::generate().unwrap();
        let b = ApiKey::generate().unwrap();
        assert!(a.expose().starts_with("lk_") && a.expose().len() == 46);
        assert_eq!(ApiKey::parse(a.expose()), Some(a.clone()));
        assert_ne!(a, b);
        assert_ne!(a.id(), b.id());
    }

    #[test]
    fn malformed_keys_are_refused() {
        assert!(ApiKey::parse("short").is_none());
        assert!(ApiKey::parse(&"k".repeat(257)).is_none());
        assert!(
            ApiKey::parse("sixteen chars ok").is_none(),
            "spaces are not allowed"
        );
        assert!(ApiKey::parse("ключ-ключ-ключ-ключ").is_none());
        assert!(ApiKey::parse(&"k".repeat(16)).is_some());
    }

    #[test]
    fn records_accept_only_their_key_until_revoked() {
        let key = ApiKey::parse("dev-key-0123456789").unwrap();
        let other = ApiKey::parse("dev-key-0123456788").unwrap();
        let mut record = KeyRecord::new(&key, "acme", 1);
        assert!(record.accepts(&key));
        assert!(!record.accepts(&other));
        record.revoked_at = Some(2);
        assert!(!record.accepts(&key));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = ApiKey::parse("secret-secret-secret").unwrap();
        assert!(!format!("{key:?}").contains("secret"));
    }
}
