//! The paying side: sign an `exact` payment for offered requirements with an EOA key. Used by the
//! tests and by clients of this service; the service itself never signs payments.

use super::eip712::{Address, Domain, Transfer, keccak, uint256};
use super::siwx::{self, Payload};
use super::types::{
    Authorization, ExactPayload, PaymentPayload, PaymentRequirements, X402_VERSION,
};
use base64::Engine;
use k256::ecdsa::SigningKey;

/// The address of `key`.
pub fn address_of(key: &SigningKey) -> Address {
    let point = key.verifying_key().to_encoded_point(false);
    let hash = keccak(&point.as_bytes()[1..]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    Address(address)
}

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("the requirements' {0} is not usable")]
    Requirements(&'static str),
    #[error("signing failed: {0}")]
    Signing(String),
}

/// A payment for `requirements`, valid from 10 minutes before `now` until `now` plus the offered
/// timeout (Unix seconds), with `nonce` (32 random bytes: never reuse one).
pub fn pay(
    key: &SigningKey,
    requirements: &PaymentRequirements,
    now: u64,
    nonce: [u8; 32],
) -> Result<PaymentPayload, SignError> {
    let name = requirements
        .extra
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or(SignError::Requirements("extra.name"))?;
    let version = requirements
        .extra
        .get("version")
        .and_then(|v| v.as_str())
        .ok_or(SignError::Requirements("extra.version"))?;
    let chain_id = requirements
        .network
        .strip_prefix("eip155:")
        .and_then(|c| c.parse().ok())
        .ok_or(SignError::Requirements("network"))?;
    let domain = Domain {
        name,
        version,
        chain_id,
        verifying_contract: Address::parse(&requirements.asset)
            .ok_or(SignError::Requirements("asset"))?,
    };
    let authorization = Authorization {
        from: address_of(key).lower(),
        to: requirements.pay_to.clone(),
        value: requirements.amount.clone(),
        valid_after: now.saturating_sub(600).to_string(),
        valid_before: (now + requirements.max_timeout_seconds).to_string(),
        nonce: format!("0x{}", hex::encode(nonce)),
    };
    let field = |name| SignError::Requirements(name);
    let transfer = Transfer {
        from: address_of(key),
        to: Address::parse(&authorization.to).ok_or(field("payTo"))?,
        value: uint256(&authorization.value).ok_or(field("amount"))?,
        valid_after: uint256(&authorization.valid_after).ok_or(field("validAfter"))?,
        valid_before: uint256(&authorization.valid_before).ok_or(field("validBefore"))?,
        nonce,
    };
    Ok(PaymentPayload {
        x402_version: X402_VERSION,
        resource: None,
        accepted: requirements.clone(),
        payload: ExactPayload {
            signature: recoverable(key, &transfer.digest(&domain))?,
            authorization,
        },
        extensions: None,
    })
}

/// Sign a sign-in-with-x `payload` as `key`'s wallet, in place: the EIP-4361 message of its
/// fields, signed with EIP-191 as a wallet's `personal_sign` does.
pub fn sign_in(key: &SigningKey, payload: &mut Payload) -> Result<(), SignError> {
    let message = siwx::message(payload).map_err(|e| SignError::Signing(e.to_string()))?;
    payload.signature = recoverable(key, &siwx::personal_digest(&message))?;
    Ok(())
}

/// The 65-byte recoverable signature of `digest` (r, s, v = 27 + recovery id), `0x` hex.
fn recoverable(key: &SigningKey, digest: &[u8; 32]) -> Result<String, SignError> {
    let (signature, recovery) = key
        .sign_prehash_recoverable(digest)
        .map_err(|e| SignError::Signing(e.to_string()))?;
    let mut bytes = signature.to_bytes().to_vec();
    bytes.push(27 + recovery.to_byte());
    Ok(format!("0x{}", hex::encode(bytes)))
}

/// The `PAYMENT-SIGNATURE` header value of `payload`.
pub fn header(payload: &PaymentPayload) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(serde_json::to_vec(payload).unwrap_or_default())
}
