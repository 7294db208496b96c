//! The service's signing identity: one Ed25519 key that signs answers, published as a `did:key`,
//! and a second key, derived from it, that signs samples only (see docs/adr/0004).

use super::{did, proof};
use ed25519_dalek::VerifyingKey;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;

/// Domain separation for the sample key's seed: SHA-256(this || answer seed).
const SAMPLE_KEY_LABEL: &[u8] = b"leasekit sample key v1\0";

/// Domain separation for the key that MACs list and audit cursors: SHA-256(this || answer seed).
const CURSOR_KEY_LABEL: &[u8] = b"leasekit cursor key v1\0";
const TAG_KEY_LABEL: &[u8] = b"leasekit state tag key v1\0";

/// One key and its did:key names.
#[derive(Clone)]
struct Signer {
    key: proof::ProofKey,
    did: String,
    /// `did#fragment`, computed once: encoding it costs more than hashing an answer.
    verification_method: String,
}

impl Signer {
    fn from_seed(seed: &[u8; 32]) -> Self {
        let key = proof::ProofKey::from_seed(seed);
        Self {
            did: did::did(&key.verifying_key()),
            verification_method: did::verification_method(&key.verifying_key()),
            key,
        }
    }

    fn secure(&self, document: Map<String, Value>, created: &str) -> Map<String, Value> {
        proof::sign(document, &self.key, &self.verification_method, created)
    }
}

/// The keys that sign answers and samples. Its Debug form shows only the public DIDs.
#[derive(Clone)]
pub struct Issuer {
    answers: Signer,
    /// Signs invented examples, so that no verifier can take one for an answer: a verifier that
    /// checks the issuer against the service's DID refuses it even if it ignores the credential
    /// type. Derived one-way from the answer seed: stable across restarts and instances, and
    /// knowing it tells nothing of the answer key.
    samples: Signer,
    /// MACs the cursors of list and audit pages (bound to the tenant): the same on every
    /// instance, so a page begun on one container continues on another.
    cursor_key: [u8; 32],
    /// MACs the state tags of watch (bound to the tenant and resource): the same on every
    /// instance, so a tag from one continues a watch on another.
    tag_key: [u8; 32],
}

/// The public halves, for checking: what the verify route trusts as answers, and recognises as
/// samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trusted {
    pub answers: VerifyingKey,
    pub samples: VerifyingKey,
}

impl fmt::Debug for Issuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Issuer({}, samples {})",
            self.answers.did, self.samples.did
        )
    }
}

#[derive(Debug, thiserror::Error)]
#[error("a signing key seed is 64 hex characters (32 bytes)")]
pub struct BadSeed;

impl Issuer {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let sample_seed: [u8; 32] = Sha256::new()
            .chain_update(SAMPLE_KEY_LABEL)
            .chain_update(seed)
            .finalize()
            .into();
        Self {
            answers: Signer::from_seed(seed),
            samples: Signer::from_seed(&sample_seed),
            cursor_key: Sha256::new()
                .chain_update(CURSOR_KEY_LABEL)
                .chain_update(seed)
                .finalize()
                .into(),
            tag_key: Sha256::new()
                .chain_update(TAG_KEY_LABEL)
                .chain_update(seed)
                .finalize()
                .into(),
        }
    }

    /// The key of state tags' MACs.
    pub fn tag_key(&self) -> &[u8; 32] {
        &self.tag_key
    }

    /// The key of list and audit cursors' MACs.
    pub fn cursor_key(&self) -> &[u8; 32] {
        &self.cursor_key
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

    /// The DID that issues answers.
    pub fn did(&self) -> &str {
        &self.answers.did
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.answers.key.verifying_key()
    }

    /// The DID that issues samples (never answers).
    pub fn sample_did(&self) -> &str {
        &self.samples.did
    }

    pub fn trusted(&self) -> Trusted {
        Trusted {
            answers: self.answers.key.verifying_key(),
            samples: self.samples.key.verifying_key(),
        }
    }

    /// Sign an answer's `document` with an eddsa-jcs-2022 proof created at `created`.
    pub fn secure(&self, document: Map<String, Value>, created: &str) -> Map<String, Value> {
        self.answers.secure(document, created)
    }

    /// Sign a sample's `document` with the sample key.
    pub fn secure_sample(&self, document: Map<String, Value>, created: &str) -> Map<String, Value> {
        self.samples.secure(document, created)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_key_is_stable_and_not_the_answer_key() {
        let issuer = Issuer::from_seed(&[3; 32]);
        assert_ne!(issuer.did(), issuer.sample_did());
        assert_eq!(
            Issuer::from_seed(&[3; 32]).sample_did(),
            issuer.sample_did(),
            "the same for every instance and restart"
        );
        assert_ne!(
            Issuer::from_seed(&[4; 32]).sample_did(),
            issuer.sample_did()
        );
        assert!(issuer.sample_did().starts_with("did:key:z6Mk"));
    }
}
