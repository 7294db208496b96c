//! Data Integrity proofs with the `eddsa-jcs-2022` cryptosuite (W3C vc-di-eddsa), over any JSON
//! object:
//!
//! hashData = SHA-256(JCS(proof config)) || SHA-256(JCS(document without proof)); the proof value
//! is `z` + base58btc(Ed25519 signature of hashData). The proof config is the proof without
//! `proofValue`, carrying the document's `@context`.

use super::did;
use super::jcs::{Canonical, Without, sha256};
use aws_lc_rs::signature::Ed25519KeyPair;
use ed25519_dalek::{Signature, SigningKey, VerifyingKey};
use serde_json::{Map, Value, json};
use std::sync::Arc;

pub const PROOF_TYPE: &str = "DataIntegrityProof";
pub const CRYPTOSUITE: &str = "eddsa-jcs-2022";
pub const PURPOSE: &str = "assertionMethod";

/// The longest proofValue: `z` + base58btc of a 64-byte Ed25519 signature, which is at most 88
/// characters (58^88 > 2^512), the buffer [`proof_value`] encodes into. Base58 decoding is
/// quadratic in the length, so nothing longer is decoded.
pub const MAX_PROOF_VALUE_LEN: usize = 1 + five8::BASE58_ENCODED_64_MAX_LEN;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("the document has no proof object")]
    Missing,
    #[error("the proof's {0} is not as eddsa-jcs-2022 requires")]
    Malformed(&'static str),
    #[error("the proof's {0} is longer than any valid one ({1} characters at most)")]
    TooLong(&'static str, usize),
    #[error("the verification method is not an Ed25519 did:key")]
    UnknownKey,
    #[error("the proof's @context does not match the document's")]
    ContextMismatch,
    #[error("the signature does not verify")]
    BadSignature,
}

/// An Ed25519 key that signs proofs.
///
/// It signs with AWS-LC rather than ed25519-dalek: AWS-LC's assembly signs in about half the
/// time (9 against 19 µs on the benchmark machine), and with dalek the signature of every answer
/// was 6% of the local server's CPU at 128 clients (BENCHMARKS.md, issue #47). Ed25519
/// signatures are deterministic (RFC 8032), so the bytes are the same either way: a test holds
/// the two to each other, and dalek still derives the public key and verifies.
#[derive(Clone)]
pub struct ProofKey {
    pair: Arc<Ed25519KeyPair>,
    public: VerifyingKey,
}

impl ProofKey {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self {
            // Any 32 bytes are an Ed25519 seed: AWS-LC refuses only other lengths.
            pair: Arc::new(
                Ed25519KeyPair::from_seed_unchecked(seed).expect("a 32-byte Ed25519 seed"),
            ),
            public: SigningKey::from_bytes(seed).verifying_key(),
        }
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.public
    }

    /// The Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> Signature {
        let signature = self.pair.sign(message);
        let bytes: [u8; 64] = signature
            .as_ref()
            .try_into()
            .expect("an Ed25519 signature is 64 bytes");
        Signature::from_bytes(&bytes)
    }
}

impl std::fmt::Debug for ProofKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProofKey({})", did::did(&self.public))
    }
}

/// `document` secured with a proof by `key`, whose verification method is `method` (a did:key
/// URL), created at `created` (an XML Schema dateTime). Any proof already in `document` is
/// replaced.
pub fn sign(
    mut document: Map<String, Value>,
    key: &ProofKey,
    method: &str,
    created: &str,
) -> Map<String, Value> {
    document.remove("proof");
    let mut config = json!({
        "type": PROOF_TYPE,
        "cryptosuite": CRYPTOSUITE,
        "created": created,
        "verificationMethod": method,
        "proofPurpose": PURPOSE,
    });
    if let Some(context) = document.get("@context") {
        config["@context"] = context.clone();
    }
    let signature = key.sign(&hash_data(&config, &document));
    config["proofValue"] = Value::String(proof_value(&signature));
    document.insert("proof".into(), config);
    document
}

/// `z` + base58btc of the signature. five8 encodes a 64-byte array in limbs of 58^n, where
/// bs58's general encoder works a digit at a time: bs58 took 2% of the local server's CPU at 64
/// clients (BENCHMARKS.md, issue #28). Decoding stays with bs58: it takes any input, and a
/// verifier's speed is not the server's.
fn proof_value(signature: &Signature) -> String {
    let mut digits = [0u8; MAX_PROOF_VALUE_LEN - 1];
    let len = five8::encode_64(&signature.to_bytes(), &mut digits);
    let mut value = String::with_capacity(MAX_PROOF_VALUE_LEN);
    value.push('z');
    // The base58 alphabet is ASCII.
    value.extend(digits[..usize::from(len)].iter().map(|&b| char::from(b)));
    value
}

/// Verify `secured`'s proof; the key that signed it on success.
pub fn verify(secured: &Map<String, Value>) -> Result<VerifyingKey, ProofError> {
    let proof = secured
        .get("proof")
        .and_then(Value::as_object)
        .ok_or(ProofError::Missing)?;
    let field = |name: &'static str, expected: &str| {
        (proof.get(name).and_then(Value::as_str) == Some(expected))
            .then_some(())
            .ok_or(ProofError::Malformed(name))
    };
    field("type", PROOF_TYPE)?;
    field("cryptosuite", CRYPTOSUITE)?;
    field("proofPurpose", PURPOSE)?;
    proof
        .get("created")
        .and_then(Value::as_str)
        .ok_or(ProofError::Malformed("created"))?;
    let method = proof
        .get("verificationMethod")
        .and_then(Value::as_str)
        .ok_or(ProofError::Malformed("verificationMethod"))?;
    if method.len() > did::MAX_METHOD_LEN {
        return Err(ProofError::TooLong(
            "verificationMethod",
            did::MAX_METHOD_LEN,
        ));
    }
    let key = did::resolve(method).ok_or(ProofError::UnknownKey)?;
    let value = proof
        .get("proofValue")
        .ok_or(ProofError::Malformed("proofValue"))?;
    let value = value.as_str().ok_or(ProofError::Malformed("proofValue"))?;
    if value.len() > MAX_PROOF_VALUE_LEN {
        return Err(ProofError::TooLong("proofValue", MAX_PROOF_VALUE_LEN));
    }
    let signature = value
        .strip_prefix('z')
        .and_then(|v| bs58::decode(v).into_vec().ok())
        .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok())
        .map(|bytes| Signature::from_bytes(&bytes))
        .ok_or(ProofError::Malformed("proofValue"))?;
    // The proof's @context, if any, must be a prefix of the document's, in order.
    if let Some(context) = proof.get("@context") {
        fn as_list(v: &Value) -> &[Value] {
            match v {
                Value::Array(items) => items,
                other => std::slice::from_ref(other),
            }
        }
        let document_context = secured.get("@context").map_or(&[][..], as_list);
        if !document_context.starts_with(as_list(context)) {
            return Err(ProofError::ContextMismatch);
        }
    }
    let config = Without {
        map: proof,
        left_out: "proofValue",
    };
    let unsecured = Without {
        map: secured,
        left_out: "proof",
    };
    key.verify_strict(&hash_data(&config, &unsecured), &signature)
        .map_err(|_| ProofError::BadSignature)?;
    Ok(key)
}

fn hash_data(config: &impl Canonical, unsecured: &impl Canonical) -> [u8; 64] {
    let mut out = [0u8; 64];
    out[..32].copy_from_slice(&sha256(config));
    out[32..].copy_from_slice(&sha256(unsecured));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::jcs::canonical;

    // W3C vc-di-eddsa, test vectors for eddsa-jcs-2022 (the Alumni credential).
    const SEED: &str = "c96ef9ea10c5e414c471723aff9de72c35fa5b70fae97e8832ecac7d2e2b8ed6";
    const CREATED: &str = "2023-02-24T23:36:38Z";
    const PROOF_CONFIG_JCS: &str = r#"{"@context":["https://www.w3.org/ns/credentials/v2","https://www.w3.org/ns/credentials/examples/v2"],"created":"2023-02-24T23:36:38Z","cryptosuite":"eddsa-jcs-2022","proofPurpose":"assertionMethod","type":"DataIntegrityProof","verificationMethod":"did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2#z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2"}"#;
    const HASH_DATA: &str = "66ab154f5c2890a140cb8388a22a160454f80575f6eae09e5a097cabe539a1db59b7cb6251b8991add1ce0bc83107e3db9dbbab5bd2c28f687db1a03abc92f19";
    const PROOF_VALUE: &str =
        "z2HnFSSPPBzR36zdDgK8PbEHeXbR56YF24jwMpt3R1eHXQzJDMWS93FCzpvJpwTWd3GAVFuUfjoJdcnTMuVor51aX";

    fn method(key: &ProofKey) -> String {
        did::verification_method(&key.verifying_key())
    }

    fn seed() -> [u8; 32] {
        hex::decode(SEED).unwrap().try_into().unwrap()
    }

    fn key() -> ProofKey {
        ProofKey::from_seed(&seed())
    }

    /// AWS-LC signs what ed25519-dalek signs, byte for byte, and derives the same public key:
    /// seeds from all zeros to all ones and many others, messages of every length up to two
    /// SHA-512 blocks and past them.
    #[test]
    fn proof_keys_sign_exactly_as_ed25519_dalek() {
        use ed25519_dalek::Signer;
        use sha2::Digest;
        let mut seeds = vec![[0u8; 32], [0xff; 32], seed()];
        seeds.extend((0..9u8).map(|i| {
            let mut s = [0u8; 32];
            s.copy_from_slice(&sha2::Sha256::digest([i]));
            s
        }));
        for seed in seeds {
            let ours = ProofKey::from_seed(&seed);
            let dalek = SigningKey::from_bytes(&seed);
            assert_eq!(ours.verifying_key(), dalek.verifying_key());
            for len in (0..=300).step_by(23).chain([64, 127, 128, 1000]) {
                let message: Vec<u8> = (0..len)
                    .map(|i| (i * 31 + usize::from(seed[0])) as u8)
                    .collect();
                let signature = ours.sign(&message);
                assert_eq!(
                    signature,
                    dalek.sign(&message),
                    "seed {seed:02x?}, {len} bytes"
                );
                assert!(
                    dalek
                        .verifying_key()
                        .verify_strict(&message, &signature)
                        .is_ok()
                );
            }
        }
    }

    fn alumni() -> Map<String, Value> {
        let doc = json!({
            "@context": ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"],
            "id": "urn:uuid:58172aac-d8ba-11ed-83dd-0b3aef56cc33",
            "type": ["VerifiableCredential", "AlumniCredential"],
            "name": "Alumni Credential",
            "description": "A minimum viable example of an Alumni Credential.",
            "issuer": "https://vc.example/issuers/5678",
            "validFrom": "2023-01-01T00:00:00Z",
            "credentialSubject": {"id": "did:example:abcdefgh", "alumniOf": "The School of Examples"}
        });
        doc.as_object().unwrap().clone()
    }

    #[test]
    fn reproduces_the_w3c_test_vector_byte_for_byte() {
        let secured = sign(alumni(), &key(), &method(&key()), CREATED);
        let mut config = secured["proof"].clone();
        config.as_object_mut().unwrap().remove("proofValue");
        assert_eq!(
            String::from_utf8(canonical(&config)).unwrap(),
            PROOF_CONFIG_JCS
        );
        assert_eq!(hex::encode(hash_data(&config, &alumni())), HASH_DATA);
        assert_eq!(secured["proof"]["proofValue"], PROOF_VALUE);
        assert_eq!(verify(&secured), Ok(key().verifying_key()));
    }

    #[test]
    fn any_change_breaks_the_proof() {
        let secured = sign(alumni(), &key(), &method(&key()), CREATED);
        let mut tampered = secured.clone();
        tampered["credentialSubject"]["alumniOf"] = json!("The School of Examplez");
        assert_eq!(verify(&tampered), Err(ProofError::BadSignature));
        let mut tampered = secured.clone();
        tampered["proof"]["created"] = json!("2023-02-24T23:36:39Z");
        assert_eq!(verify(&tampered), Err(ProofError::BadSignature));
        let mut tampered = secured.clone();
        tampered["proof"]["cryptosuite"] = json!("eddsa-rdfc-2022");
        assert_eq!(verify(&tampered), Err(ProofError::Malformed("cryptosuite")));
        let mut tampered = secured.clone();
        tampered["proof"]["@context"] = json!(["https://example.com/other"]);
        assert_eq!(verify(&tampered), Err(ProofError::ContextMismatch));
        let mut tampered = secured.clone();
        tampered["proof"]["proofValue"] = json!("z111");
        assert_eq!(verify(&tampered), Err(ProofError::Malformed("proofValue")));
        let mut unsigned = secured;
        unsigned.remove("proof");
        assert_eq!(verify(&unsigned), Err(ProofError::Missing));
    }

    /// The proof value is bs58's encoding of the signature exactly: leading zero bytes (one `1`
    /// each), the largest value, and real signatures over many messages.
    #[test]
    fn proof_values_are_base58btc_as_bs58_writes_it() {
        let mut edges = vec![[0u8; 64], [0xff; 64], [1; 64]];
        for zeros in [1, 2, 31, 63] {
            let mut bytes = [0xa5u8; 64];
            bytes[..zeros].fill(0);
            edges.push(bytes);
        }
        let signatures = (0..500u32).map(|i| key().sign(&i.to_le_bytes()).to_bytes());
        for bytes in edges.into_iter().chain(signatures) {
            let expected = format!("z{}", bs58::encode(bytes).into_string());
            assert_eq!(proof_value(&Signature::from_bytes(&bytes)), expected);
        }
    }

    /// The longest base58 form of 64 bytes is 88 characters, whatever the bytes (leading zero
    /// bytes are one `1` each); one more is refused before any decoding.
    #[test]
    fn proof_values_are_bounded_before_decoding() {
        for bytes in [[0xffu8; 64], [0; 64], [1; 64]] {
            let encoded = bs58::encode(bytes).into_string();
            assert!(encoded.len() < MAX_PROOF_VALUE_LEN, "{encoded}");
        }
        assert_eq!(
            1 + bs58::encode([0xff; 64]).into_string().len(),
            MAX_PROOF_VALUE_LEN
        );
        let secured = sign(alumni(), &key(), &method(&key()), CREATED);
        let mut longest = secured.clone();
        longest["proof"]["proofValue"] = json!(format!("z{}", "z".repeat(88)));
        assert_eq!(verify(&longest), Err(ProofError::Malformed("proofValue")));
        for (field, value, max) in [
            (
                "proofValue",
                format!("z{}", "z".repeat(60_000)),
                MAX_PROOF_VALUE_LEN,
            ),
            (
                "verificationMethod",
                format!("did:key:z{}", "z".repeat(60_000)),
                did::MAX_METHOD_LEN,
            ),
        ] {
            let mut hostile = secured.clone();
            hostile["proof"][field] = json!(value);
            assert_eq!(verify(&hostile), Err(ProofError::TooLong(field, max)));
        }
    }

    #[test]
    fn another_key_cannot_pass_as_the_signer() {
        let other = ProofKey::from_seed(&[7; 32]);
        let mut forged = sign(alumni(), &other, &method(&other), CREATED);
        forged["proof"]["verificationMethod"] =
            json!(did::verification_method(&key().verifying_key()));
        assert_eq!(verify(&forged), Err(ProofError::BadSignature));
    }
}
