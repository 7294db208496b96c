//! EIP-712 for EIP-3009 `TransferWithAuthorization`, and recovery of the EOA that signed it.
//!
//! digest = keccak256(0x19 0x01 || domainSeparator || structHash), with the token's domain
//! `{name, version, chainId, verifyingContract = asset}`.

use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use sha3::{Digest, Keccak256};

pub fn keccak(bytes: &[u8]) -> [u8; 32] {
    Keccak256::digest(bytes).into()
}

/// A 20-byte address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Address(pub [u8; 20]);

impl Address {
    /// `0x` + 40 hex digits, any case (the checksum is not required).
    pub fn parse(text: &str) -> Option<Self> {
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))?;
        (digits.len() == 40).then_some(())?;
        Some(Self(hex::decode(digits).ok()?.try_into().ok()?))
    }

    /// Lowercase `0x...`.
    pub fn lower(&self) -> String {
        format!("0x{}", hex::encode(self.0))
    }

    fn word(&self) -> [u8; 32] {
        let mut w = [0u8; 32];
        w[12..].copy_from_slice(&self.0);
        w
    }
}

/// A uint256 written as `0x` hex or decimal (the x402 encoding rules), as 32 big-endian bytes.
pub fn uint256(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if let Some(digits) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        if digits.is_empty() || digits.len() > 64 {
            return None;
        }
        let padded = format!("{digits:0>64}");
        out.copy_from_slice(&hex::decode(padded).ok()?);
        return Some(out);
    }
    if text.is_empty() || text.len() > 78 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    for digit in text.bytes().map(|b| u32::from(b - b'0')) {
        // out = out * 10 + digit, big-endian, failing on overflow.
        let mut carry = digit;
        for byte in out.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
        if carry != 0 {
            return None;
        }
    }
    Some(out)
}

/// A uint256 that fits in a u64 (timestamps), else `None`.
pub fn uint64(text: &str) -> Option<u64> {
    let word = uint256(text)?;
    word[..24]
        .iter()
        .all(|b| *b == 0)
        .then(|| u64::from_be_bytes(word[24..].try_into().unwrap_or_default()))
}

/// The token's EIP-712 domain.
pub struct Domain<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub chain_id: u64,
    pub verifying_contract: Address,
}

/// The signed fields of a `transferWithAuthorization`.
pub struct Transfer {
    pub from: Address,
    pub to: Address,
    pub value: [u8; 32],
    pub valid_after: [u8; 32],
    pub valid_before: [u8; 32],
    pub nonce: [u8; 32],
}

const DOMAIN_TYPE: &str =
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)";
const TRANSFER_TYPE: &str = "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)";

impl Domain<'_> {
    pub fn separator(&self) -> [u8; 32] {
        let mut chain = [0u8; 32];
        chain[24..].copy_from_slice(&self.chain_id.to_be_bytes());
        let words = [
            keccak(DOMAIN_TYPE.as_bytes()),
            keccak(self.name.as_bytes()),
            keccak(self.version.as_bytes()),
            chain,
            self.verifying_contract.word(),
        ];
        keccak(&words.concat())
    }
}

impl Transfer {
    pub fn struct_hash(&self) -> [u8; 32] {
        let words = [
            keccak(TRANSFER_TYPE.as_bytes()),
            self.from.word(),
            self.to.word(),
            self.value,
            self.valid_after,
            self.valid_before,
            self.nonce,
        ];
        keccak(&words.concat())
    }

    /// The EIP-712 digest the payer signed.
    pub fn digest(&self, domain: &Domain<'_>) -> [u8; 32] {
        let mut message = vec![0x19, 0x01];
        message.extend_from_slice(&domain.separator());
        message.extend_from_slice(&self.struct_hash());
        keccak(&message)
    }
}

/// The address whose key made the 65-byte signature `r || s || v` over `digest` (`v` 27/28 or
/// 0/1). High-`s` signatures are refused (EIP-2), so a signature has one valid form.
pub fn recover(digest: &[u8; 32], signature: &[u8]) -> Option<Address> {
    let (rs, v) = (signature.get(..64)?, *signature.get(64)?);
    if signature.len() != 65 {
        return None;
    }
    let recovery = RecoveryId::from_byte(match v {
        27 | 28 => v - 27,
        0 | 1 => v,
        _ => return None,
    })?;
    let signature = Signature::from_slice(rs).ok()?;
    if signature.normalize_s().is_some() {
        return None;
    }
    let key = VerifyingKey::recover_from_prehash(digest, &signature, recovery).ok()?;
    let point = key.to_encoded_point(false);
    let hash = keccak(&point.as_bytes()[1..]);
    Some(Address(hash[12..].try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example authorization of the x402 `exact` EVM scheme specification, signed for Base
    /// Sepolia USDC (name "USDC", version "2", chain 84532).
    #[test]
    fn the_x402_spec_example_recovers_to_its_from() {
        let transfer = Transfer {
            from: Address::parse("0x857b06519E91e3A54538791bDbb0E22373e36b66").unwrap(),
            to: Address::parse("0x209693Bc6afc0C5328bA36FaF03C514EF312287C").unwrap(),
            value: uint256("10000").unwrap(),
            valid_after: uint256("1740672089").unwrap(),
            valid_before: uint256("1740672154").unwrap(),
            nonce: uint256("0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480")
                .unwrap(),
        };
        let domain = Domain {
            name: "USDC",
            version: "2",
            chain_id: 84532,
            verifying_contract: Address::parse("0x036CbD53842c5426634e7929541eC2318f3dCF7e")
                .unwrap(),
        };
        let signature = hex::decode("2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf5836e9bd15092f9ecab05ded3d6293af148b571c").unwrap();
        assert_eq!(
            recover(&transfer.digest(&domain), &signature),
            Some(transfer.from)
        );
        // Any other field, and it is someone else's signature.
        let other = Transfer {
            value: uint256("10001").unwrap(),
            ..transfer
        };
        assert_ne!(
            recover(&other.digest(&domain), &signature),
            Some(other.from)
        );
    }

    #[test]
    fn uint256_reads_decimal_and_hex() {
        assert_eq!(uint64("5000"), Some(5000));
        assert_eq!(uint64("0x1388"), Some(5000));
        assert_eq!(uint64("0"), Some(0));
        assert_eq!(uint64("18446744073709551616"), None, "above u64");
        assert!(
            uint256(
                "115792089237316195423570985008687907853269984665640564039457584007913129639935"
            )
            .is_some()
        );
        assert!(
            uint256(
                "115792089237316195423570985008687907853269984665640564039457584007913129639936"
            )
            .is_none()
        );
        assert!(
            uint256("-1").is_none()
                && uint256("").is_none()
                && uint256("0x").is_none()
                && uint256("1e3").is_none()
        );
    }

    #[test]
    fn addresses_need_forty_hex_digits() {
        assert!(Address::parse("0x857b06519e91e3a54538791bdbb0e22373e36b66").is_some());
        assert!(Address::parse("857b06519e91e3a54538791bdbb0e22373e36b66").is_none());
        assert!(Address::parse("0x857b06519e91e3a54538791bdbb0e22373e36b6").is_none());
    }
}
