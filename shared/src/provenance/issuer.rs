//! The service's signing identity: one Ed25519 key, published as a `did:key`.

use super::{did, proof};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde_json::{Map, Value};
use std::fmt;

/// The key that signs every answer. Its Debug form shows only the public DID.
#[derive(Clone)]
pub struct Issuer {
    key: SigningKey,
    did: String,
    /// `did#fragment`, computed once: encoding it costs more than hashing an answer.
    verification_method: String,
}

impl fmt::Debug for Issuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Issuer({})", self.did)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("a signing key seed is 64 hex characters (32 bytes)")]
pub struct BadSeed;

impl Issuer {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = SigningKey::from_bytes(seed);
        let did = did::did(&key.verifying_key());
        let verification_method = did::verification_method(&key.verifying_key());
        Self {
            key,
            did,
            verification_method,
        }
    }

    /// From a seed written as 64 hex characters (surrounding white space ignored).
    pub fn from_hex(text: &str) -> Result<Self, BadSeed> {
        let bytes = hex::decode(text.trim()).map_err(|_| BadSeed)?;
        let seed: [u8; 32] = bytes.try_into().map_err(|_| BadSeed)?;
        Ok(Self::from_seed(&seed))
    }

    /// A new key from the operating system's generator; its seed in hex, to keep.
    pub fn generate() -> Result<(Self, String), getrandom::Error> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)?;
        Ok((Self::from_seed(&seed), hex::encode(seed)))
    }

    pub fn did(&self) -> &str {
        &self.did
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// Sign `document` with an eddsa-jcs-2022 proof created at `created`.
    pub fn secure(&self, document: Map<String, Value>, created: &str) -> Map<String, Value> {
        proof::sign(document, &self.key, &self.verification_method, created)
    }
}
