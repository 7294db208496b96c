//! What a payment must be: network, asset and its EIP-712 domain, receiver, price. Deployment
//! settings, read once.

use super::eip712::{Address, Domain};
use super::types::PaymentRequirements;
use serde_json::{Map, Value};

/// Base Sepolia USDC: the development network (README, "Paying per call").
pub const BASE_SEPOLIA: &str = "eip155:84532";
pub const BASE_SEPOLIA_USDC: &str = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentSettings {
    /// CAIP-2, e.g. `eip155:8453` (Base) or `eip155:84532` (Base Sepolia).
    pub network: String,
    pub chain_id: u64,
    /// The token contract (USDC).
    pub asset: Address,
    /// The token's EIP-712 domain name and version ("USD Coin"/"2" on Base, "USDC"/"2" on Base Sepolia).
    pub token_name: String,
    pub token_version: String,
    pub pay_to: Address,
    /// How long a client may take to pay, offered in the requirements.
    pub max_timeout_seconds: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("the network must be eip155:<chain id>, got {0:?}")]
    Network(String),
    #[error("{0} must be a 0x-prefixed 20-byte address")]
    Address(&'static str),
}

impl PaymentSettings {
    pub fn new(
        network: &str,
        asset: &str,
        token_name: &str,
        token_version: &str,
        pay_to: &str,
    ) -> Result<Self, SettingsError> {
        let chain_id = network
            .strip_prefix("eip155:")
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| SettingsError::Network(network.to_owned()))?;
        Ok(Self {
            network: network.to_owned(),
            chain_id,
            asset: Address::parse(asset).ok_or(SettingsError::Address("the asset"))?,
            token_name: token_name.to_owned(),
            token_version: token_version.to_owned(),
            pay_to: Address::parse(pay_to).ok_or(SettingsError::Address("pay-to"))?,
            max_timeout_seconds: 300,
        })
    }

    pub fn domain(&self) -> Domain<'_> {
        Domain {
            name: &self.token_name,
            version: &self.token_version,
            chain_id: self.chain_id,
            verifying_contract: self.asset,
        }
    }

    /// The requirements for a price of `amount` atomic units.
    pub fn requirements(&self, amount: u64) -> PaymentRequirements {
        let mut extra = Map::new();
        extra.insert("name".into(), Value::String(self.token_name.clone()));
        extra.insert("version".into(), Value::String(self.token_version.clone()));
        PaymentRequirements {
            scheme: "exact".into(),
            network: self.network.clone(),
            asset: self.asset.lower(),
            amount: amount.to_string(),
            pay_to: self.pay_to.lower(),
            max_timeout_seconds: self.max_timeout_seconds,
            extra,
        }
    }
}

/// A price in USDC (6 decimals) as atomic units: "0.005" -> 5000. At most 6 decimals.
pub fn usdc_atomic(price: &str) -> Option<u64> {
    let (whole, fraction) = price.split_once('.').unwrap_or((price, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.len() > 6 {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction: u64 = format!("{fraction:0<6}").parse().ok()?;
    whole.checked_mul(1_000_000)?.checked_add(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_convert_to_atomic_units() {
        assert_eq!(usdc_atomic("0.005"), Some(5000));
        assert_eq!(usdc_atomic("0.0052"), Some(5200));
        assert_eq!(usdc_atomic("0.15"), Some(150_000));
        assert_eq!(usdc_atomic("2"), Some(2_000_000));
        assert_eq!(usdc_atomic("0.0000001"), None);
        assert_eq!(usdc_atomic("-1"), None);
        assert_eq!(usdc_atomic("."), None);
    }

    #[test]
    fn settings_name_what_is_wrong() {
        assert!(
            PaymentSettings::new("base", BASE_SEPOLIA_USDC, "USDC", "2", BASE_SEPOLIA_USDC)
                .is_err()
        );
        let s = PaymentSettings::new(
            BASE_SEPOLIA,
            BASE_SEPOLIA_USDC,
            "USDC",
            "2",
            "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
        )
        .unwrap();
        assert_eq!(s.chain_id, 84532);
        assert_eq!(s.requirements(5000).amount, "5000");
    }
}
