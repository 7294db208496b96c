//! `did:key` for Ed25519 keys: `did:key:z` + base58btc(0xed 0x01 || public key), and the DID
//! document that publishes it as a Multikey.

use ed25519_dalek::VerifyingKey;
use serde_json::{Value, json};

/// Multicodec prefix of an Ed25519 public key.
const ED25519_PUB: [u8; 2] = [0xed, 0x01];

/// Characters of an Ed25519 key's multibase form: `z` + 47 base58 characters. Every 34-byte
/// `0xed 0x01 || key` lies between 0xed01 * 2^256 and 0xed02 * 2^256, so its base58 form has the
/// same length for every key.
pub const MULTIKEY_LEN: usize = 48;

/// The longest verification method [`resolve`] reads: `did:key:` + multikey + `#` + multikey.
/// Base58 decoding is quadratic in the length, so nothing longer is decoded.
pub const MAX_METHOD_LEN: usize = "did:key:".len() + MULTIKEY_LEN + 1 + MULTIKEY_LEN;

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
    if method.len() > MAX_METHOD_LEN {
        return None;
    }
    let did = method.split('#').next()?;
    let encoded = did.strip_prefix("did:key:z")?;
    if encoded.len() != MULTIKEY_LEN - 1 {
        return None;
    }
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
    fn every_ed25519_multikey_has_the_same_length() {
        for seed in [
            [0u8; 32],
            [0xff; 32],
            [7; 32],
            hex::decode(SEED).unwrap().try_into().unwrap(),
        ] {
            let key = SigningKey::from_bytes(&seed).verifying_key();
            assert_eq!(multikey(&key).len(), MULTIKEY_LEN);
            assert_eq!(verification_method(&key).len(), MAX_METHOD_LEN);
        }
        // The extremes of 0xed 0x01 || 32 bytes, whatever the key.
        for fill in [0x00, 0xff] {
            let mut bytes = ED25519_PUB.to_vec();
            bytes.extend_from_slice(&[fill; 32]);
            assert_eq!(bs58::encode(bytes).into_string().len(), MULTIKEY_LEN - 1);
        }
    }

    #[test]
    fn over_long_methods_are_not_decoded() {
        let long = format!("did:key:z{}", "z".repeat(60_000));
        let start = std::time::Instant::now();
        assert_eq!(resolve(&long), None);
        assert_eq!(
            resolve(&format!("did:key:{PUBLIC}#{}", "z".repeat(60_000))),
            None
        );
        assert_eq!(
            resolve(&format!("did:key:z{}", "z".repeat(MULTIKEY_LEN))),
            None
        );
        assert!(
            start.elapsed() < std::time::Duration::from_millis(200),
            "not decoded"
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
