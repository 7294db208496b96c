//! `did:key` for Ed25519 keys: `did:key:z` + base58btc(0xed 0x01 || public key), and the DID
//! document that publishes it as a Multikey.

use ed25519_dalek::VerifyingKey;
use serde_json::{Value, json};

/// Multicodec prefix of an Ed25519 public key.
const ED25519_PUB: [u8; 2] = [0xed, 0x01];

/// The key's multibase form, `z6Mk...`.
pub fn multikey(key: &VerifyingKey) -> String {
    let mut bytes = ED25519_PUB.to_vec();
    bytes.extend_from_slice(key.as_bytes());
    format!("z{}", bs58::encode(bytes).into_string())
}

/// `did:key:z6Mk...`.
pub fn did(key: &VerifyingKey) -> String {
    format!("did:key:{}", multikey(key))
}

/// `did:key:z6Mk...#z6Mk...`: the verification method that signs.
pub fn verification_method(key: &VerifyingKey) -> String {
    format!("{}#{}", did(key), multikey(key))
}

/// The public key a `did:key` verification method (or DID) names, if it is an Ed25519 did:key.
pub fn resolve(method: &str) -> Option<VerifyingKey> {
    let did = method.split('#').next()?;
    let encoded = did.strip_prefix("did:key:z")?;
    let bytes = bs58::decode(encoded).into_vec().ok()?;
    let raw: [u8; 32] = bytes.strip_prefix(&ED25519_PUB)?.try_into().ok()?;
    let key = VerifyingKey::from_bytes(&raw).ok()?;
    // The fragment, if any, must name the same key.
    match method.split_once('#') {
        Some((_, fragment)) if fragment != multikey(&key) => None,
        _ => Some(key),
    }
}

/// The DID document of `key`, with the key under `assertionMethod`.
pub fn document(key: &VerifyingKey) -> Value {
    let (id, method) = (did(key), verification_method(key));
    json!({
        "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
        "id": id,
        "verificationMethod": [{
            "id": method,
            "type": "Multikey",
            "controller": id,
            "publicKeyMultibase": multikey(key),
        }],
        "assertionMethod": [method],
        "authentication": [method],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    /// The key of the W3C vc-di-eddsa test vectors.
    const SEED: &str = "c96ef9ea10c5e414c471723aff9de72c35fa5b70fae97e8832ecac7d2e2b8ed6";
    const PUBLIC: &str = "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2";

    fn key() -> VerifyingKey {
        let seed: [u8; 32] = hex::decode(SEED).unwrap().try_into().unwrap();
        SigningKey::from_bytes(&seed).verifying_key()
    }

    #[test]
    fn encodes_the_w3c_vector_key() {
        assert_eq!(multikey(&key()), PUBLIC);
        assert_eq!(
            verification_method(&key()),
            format!("did:key:{PUBLIC}#{PUBLIC}")
        );
    }

    #[test]
    fn resolves_only_well_formed_ed25519_did_keys() {
        assert_eq!(resolve(&verification_method(&key())), Some(key()));
        assert_eq!(resolve(&did(&key())), Some(key()));
        assert_eq!(resolve(&format!("did:key:{PUBLIC}#z6Mkother")), None);
        assert_eq!(resolve("did:web:example.com"), None);
        assert_eq!(
            resolve("did:key:zDnaepBuvsQ8cpsWrVKw8fbpGpvPeNSjVPTWoq6cRqaYzBKVP"),
            None
        );
    }
}
