//! The checks made on a `PAYMENT-SIGNATURE` before any work, without a chain or a facilitator:
//! version, the offer echoed back, receiver, amount, time window, and the EIP-712 signature.
//! Pure: time is passed in. Whether the nonce was used before is the ledger's job.

use super::eip712::{Address, Transfer, recover, uint64, uint256};
use super::settings::PaymentSettings;
use super::types::{PaymentPayload, PaymentRequirements, X402_VERSION};
use base64::Engine;

/// An authorization that passed every local check.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub payer: Address,
    /// The authorization's nonce as 32 bytes (its identity, with the payer).
    pub nonce: [u8; 32],
    /// When the authorization starts and stops being valid (Unix seconds).
    pub valid_after: u64,
    pub valid_before: u64,
    pub payload: PaymentPayload,
    pub requirements: PaymentRequirements,
}

/// Why a payment was refused; the message says which check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a well-formed PaymentPayload; the message names where (the header, `_meta`) or the
    /// field.
    #[error("the payment is not a well-formed x402 PaymentPayload: {0}")]
    Malformed(String),
    #[error("the payment is larger than {0} bytes")]
    TooLarge(usize),
    #[error(
        "the authorization is valid for too long (validBefore at most maxTimeoutSeconds, {0} s, from now)"
    )]
    TooLong(u64),
    #[error("x402Version must be 2")]
    Version,
    #[error("accepted is not one of the payment requirements offered for this route")]
    NotOffered,
    #[error("authorization.to is not the pay-to address")]
    PayTo,
    #[error("authorization.value must be exactly the price")]
    Amount,
    #[error("the authorization is not valid yet (validAfter is in the future)")]
    NotYetValid,
    #[error("the authorization expires too soon (validBefore must be more than 6 s away)")]
    Expired,
    #[error("the signature does not recover to authorization.from")]
    Signature,
    #[error("this payment authorization (from, nonce) was used before")]
    Replayed,
    #[error("the facilitator refused the payment: {0}")]
    Facilitator(String),
    #[error("{0}")]
    Identifier(String),
    #[error(
        "this payment was not charged: its first call did not complete, so it bought nothing; pay again"
    )]
    Voided,
    #[error("this payment was answered more than 24 h ago; its answer is no longer kept")]
    RetryTooLate,
}

/// How far past `maxTimeoutSeconds` from now a payer's clock may put `validBefore`.
pub const CLOCK_SLACK_SECONDS: u64 = 60;

/// Seconds an authorization must still be valid for, so it cannot lapse before settlement.
pub const MIN_VALIDITY_SECONDS: u64 = 6;

/// Decode the header value (standard base64 of JSON).
pub fn decode(header: &str) -> Result<PaymentPayload, Refusal> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(header.trim())
        .map_err(|e| Refusal::Malformed(format!("PAYMENT-SIGNATURE is not base64: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Refusal::Malformed(format!("PAYMENT-SIGNATURE is not its JSON: {e}")))
}

/// Every local check of `payload` against the `offered` requirements at `now` (Unix seconds):
/// [`check_signed`], then [`check_window`].
pub fn check(
    payload: PaymentPayload,
    offered: &[PaymentRequirements],
    settings: &PaymentSettings,
    now: u64,
) -> Result<Verified, Refusal> {
    let verified = check_signed(payload, offered, settings)?;
    check_window(&verified, now)?;
    Ok(verified)
}

/// Whether `verified` may be used at `now` (Unix seconds): valid already, and for long enough
/// to be settled. A payment resent under its identifier is answered without this check: it was
/// checked when it was first used, and a resend uses nothing up.
pub fn check_window(verified: &Verified, now: u64) -> Result<(), Refusal> {
    if verified.valid_after > now {
        return Err(Refusal::NotYetValid);
    }
    if verified.valid_before <= now.saturating_add(MIN_VALIDITY_SECONDS) {
        return Err(Refusal::Expired);
    }
    // No longer than offered (with room for the payer's clock): an authorization valid for
    // years would keep its ledger item open, and the sweeper retrying it, as long.
    let longest = now
        .saturating_add(verified.requirements.max_timeout_seconds)
        .saturating_add(CLOCK_SLACK_SECONDS);
    if verified.valid_before > longest {
        return Err(Refusal::TooLong(verified.requirements.max_timeout_seconds));
    }
    Ok(())
}

/// The checks that do not depend on the time: version, the offer echoed back, receiver, amount
/// and the EIP-712 signature over the whole authorization.
pub fn check_signed(
    payload: PaymentPayload,
    offered: &[PaymentRequirements],
    settings: &PaymentSettings,
) -> Result<Verified, Refusal> {
    if payload.x402_version != X402_VERSION {
        return Err(Refusal::Version);
    }
    let requirements = offered
        .iter()
        .find(|o| same_offer(o, &payload.accepted))
        .ok_or(Refusal::NotOffered)?
        .clone();
    let auth = &payload.payload.authorization;
    let field = |name: &str| Refusal::Malformed(format!("authorization.{name}"));
    let to = Address::parse(&auth.to).ok_or_else(|| field("to"))?;
    if to != settings.pay_to {
        return Err(Refusal::PayTo);
    }
    let value = uint256(&auth.value).ok_or_else(|| field("value"))?;
    if Some(value) != uint256(&requirements.amount) {
        return Err(Refusal::Amount);
    }
    let valid_after = uint64(&auth.valid_after).ok_or_else(|| field("validAfter"))?;
    let valid_before = uint64(&auth.valid_before).ok_or_else(|| field("validBefore"))?;
    let from = Address::parse(&auth.from).ok_or_else(|| field("from"))?;
    let nonce = uint256(&auth.nonce).ok_or_else(|| field("nonce"))?;
    let transfer = Transfer {
        from,
        to,
        value,
        valid_after: uint256(&auth.valid_after).ok_or_else(|| field("validAfter"))?,
        valid_before: uint256(&auth.valid_before).ok_or_else(|| field("validBefore"))?,
        nonce,
    };
    let signature = payload.payload.signature.as_str();
    let signature = signature
        .strip_prefix("0x")
        .or_else(|| signature.strip_prefix("0X"))
        .unwrap_or(signature);
    let signature = hex::decode(signature).map_err(|_| field("signature"))?;
    if recover(&transfer.digest(&settings.domain()), &signature) != Some(from) {
        return Err(Refusal::Signature);
    }
    Ok(Verified {
        payer: from,
        nonce,
        valid_after,
        valid_before,
        payload,
        requirements,
    })
}

/// Whether the client's `accepted` is the offer `ours`: same scheme, network, asset, amount,
/// receiver, timeout and token domain. Addresses compare case-insensitively, amounts as numbers.
fn same_offer(ours: &PaymentRequirements, theirs: &PaymentRequirements) -> bool {
    let address =
        |a: &str, b: &str| Address::parse(a).is_some() && Address::parse(a) == Address::parse(b);
    ours.scheme == theirs.scheme
        && ours.network == theirs.network
        && address(&ours.asset, &theirs.asset)
        && uint256(&ours.amount).is_some()
        && uint256(&ours.amount) == uint256(&theirs.amount)
        && address(&ours.pay_to, &theirs.pay_to)
        && ours.max_timeout_seconds == theirs.max_timeout_seconds
        && ["name", "version"]
            .iter()
            .all(|k| ours.extra.get(*k) == theirs.extra.get(*k))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::x402::client::{address_of, pay};
    use crate::x402::settings::{BASE_SEPOLIA, BASE_SEPOLIA_USDC};
    use crate::x402::types::{Authorization, ExactPayload};
    use k256::ecdsa::SigningKey;

    const NOW: u64 = 1_795_946_400;
    pub const PAY_TO: &str = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";

    pub fn settings() -> PaymentSettings {
        PaymentSettings::new(BASE_SEPOLIA, BASE_SEPOLIA_USDC, "USDC", "2", PAY_TO).unwrap()
    }

    /// A payload for `authorization` (as given, even if inconsistent), signed by `key`.
    pub fn signed(
        key: &SigningKey,
        accepted: PaymentRequirements,
        authorization: Authorization,
    ) -> PaymentPayload {
        let s = settings();
        let transfer = Transfer {
            from: Address::parse(&authorization.from).unwrap(),
            to: Address::parse(&authorization.to).unwrap(),
            value: uint256(&authorization.value).unwrap(),
            valid_after: uint256(&authorization.valid_after).unwrap(),
            valid_before: uint256(&authorization.valid_before).unwrap(),
            nonce: uint256(&authorization.nonce).unwrap(),
        };
        let (sig, recovery) = key
            .sign_prehash_recoverable(&transfer.digest(&s.domain()))
            .unwrap();
        let mut bytes = sig.to_bytes().to_vec();
        bytes.push(27 + recovery.to_byte());
        PaymentPayload {
            x402_version: 2,
            resource: None,
            accepted,
            payload: ExactPayload {
                signature: format!("0x{}", hex::encode(bytes)),
                authorization,
            },
            extensions: None,
        }
    }

    fn key() -> SigningKey {
        SigningKey::from_slice(&[0x42; 32]).unwrap()
    }

    fn authorization(key: &SigningKey) -> Authorization {
        Authorization {
            from: address_of(key).lower(),
            to: PAY_TO.into(),
            value: "5000".into(),
            valid_after: (NOW - 600).to_string(),
            valid_before: (NOW + 300).to_string(),
            nonce: format!("0x{}", "ab".repeat(32)),
        }
    }

    fn run(payload: PaymentPayload) -> Result<Verified, Refusal> {
        let s = settings();
        check(payload, &[s.requirements(5000)], &s, NOW)
    }

    #[test]
    fn a_well_formed_payment_passes() {
        let k = key();
        let v = run(signed(&k, settings().requirements(5000), authorization(&k))).unwrap();
        assert_eq!(v.payer, address_of(&k));
        assert_eq!(v.nonce, [0xab; 32]);
    }

    #[test]
    fn each_check_refuses_by_name() {
        let k = key();
        let offer = settings().requirements(5000);
        let with = |f: &dyn Fn(&mut Authorization)| {
            let mut a = authorization(&k);
            f(&mut a);
            signed(&k, offer.clone(), a)
        };
        assert_eq!(
            run(with(&|a| a.value = "4999".into())),
            Err(Refusal::Amount)
        );
        assert_eq!(
            run(with(&|a| a.value = "5001".into())),
            Err(Refusal::Amount)
        );
        assert_eq!(
            run(with(
                &|a| a.to = "0x0000000000000000000000000000000000000001".into()
            )),
            Err(Refusal::PayTo)
        );
        assert_eq!(
            run(with(&|a| a.valid_after = (NOW + 1).to_string())),
            Err(Refusal::NotYetValid)
        );
        assert_eq!(
            run(with(&|a| a.valid_before = (NOW + 6).to_string())),
            Err(Refusal::Expired)
        );
        assert!(run(with(&|a| a.valid_before = (NOW + 7).to_string())).is_ok());
        // At most the offered timeout (300 s) from now, with a minute for the payer's clock.
        assert!(run(with(&|a| a.valid_before = (NOW + 360).to_string())).is_ok());
        assert_eq!(
            run(with(&|a| a.valid_before = (NOW + 361).to_string())),
            Err(Refusal::TooLong(300))
        );
        assert_eq!(
            run(with(&|a| a.valid_before = u64::MAX.to_string())),
            Err(Refusal::TooLong(300))
        );
        // Signed by another key than `from` says.
        let other = SigningKey::from_slice(&[0x43; 32]).unwrap();
        assert_eq!(
            run(signed(&other, offer.clone(), authorization(&k))),
            Err(Refusal::Signature)
        );
        // A signed field changed after signing.
        let mut tampered = signed(&k, offer.clone(), authorization(&k));
        tampered.payload.authorization.nonce = format!("0x{}", "cd".repeat(32));
        assert_eq!(run(tampered), Err(Refusal::Signature));
        // The offer echoed back must be ours: network, asset, amount, receiver.
        for change in [
            &(|o: &mut PaymentRequirements| o.network = "eip155:8453".into())
                as &dyn Fn(&mut PaymentRequirements),
            &|o| o.asset = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".into(),
            &|o| o.amount = "1".into(),
            &|o| o.pay_to = "0x0000000000000000000000000000000000000001".into(),
            &|o| o.scheme = "upto".into(),
        ] {
            let mut o = offer.clone();
            change(&mut o);
            assert_eq!(
                run(signed(&k, o, authorization(&k))),
                Err(Refusal::NotOffered)
            );
        }
        let mut v1 = signed(&k, offer.clone(), authorization(&k));
        v1.x402_version = 1;
        assert_eq!(run(v1), Err(Refusal::Version));
    }

    #[test]
    fn the_client_signer_pays_what_the_checks_accept() {
        let k = key();
        let s = settings();
        let payload = pay(&k, &s.requirements(5000), NOW, [7; 32]).unwrap();
        let header = crate::x402::client::header(&payload);
        let verified = check(decode(&header).unwrap(), &[s.requirements(5000)], &s, NOW).unwrap();
        assert_eq!(verified.payer, address_of(&k));
    }

    #[test]
    fn the_header_is_base64_json() {
        assert!(matches!(decode("not base64!"), Err(Refusal::Malformed(_))));
        let not_json = base64::engine::general_purpose::STANDARD.encode("{");
        assert!(matches!(decode(&not_json), Err(Refusal::Malformed(_))));
        let k = key();
        let payload = signed(&k, settings().requirements(5000), authorization(&k));
        let header =
            base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&payload).unwrap());
        assert_eq!(decode(&header), Ok(payload));
    }
}
