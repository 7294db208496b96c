//! Deployment settings, read once at start from the environment into a typed struct. Handlers
//! never read the environment.

use crate::store::Tables;
use crate::x402::settings::{PaymentSettings, usdc_atomic};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub tables: Tables,
    /// Secrets Manager secret (name or ARN) holding the signing key's 32-byte seed in hex.
    /// Required by the functions that sign or publish the key.
    pub signing_key_secret: Option<String>,
    /// x402 payments; `None` when `X402_PAY_TO` is unset (then only API keys are accepted).
    pub payments: Option<PaymentConfig>,
    /// Free claims per wallet or account per clock hour.
    pub free_claims_per_hour: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentConfig {
    pub settings: PaymentSettings,
    /// Price of one lease call, in USDC atomic units (6 decimals).
    pub lease_price: u64,
    /// Prices of the paid claim plans, atomic units.
    pub claim_prices: ClaimPrices,
    pub facilitator: FacilitatorConfig,
}

/// Atomic USDC units per claim plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimPrices {
    pub hour: u64,
    pub day: u64,
    pub week: u64,
}

impl Default for ClaimPrices {
    /// The contract's defaults: 0.0052, 0.03 and 0.15 USDC.
    fn default() -> Self {
        Self {
            hour: 5_200,
            day: 30_000,
            week: 150_000,
        }
    }
}

impl ClaimPrices {
    /// The price of `plan`; `None` for the free plan.
    pub fn of(&self, plan: crate::claims::Plan) -> Option<u64> {
        use crate::claims::Plan;
        match plan {
            Plan::Hour => Some(self.hour),
            Plan::Day => Some(self.day),
            Plan::Week => Some(self.week),
            Plan::Free => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FacilitatorConfig {
    /// Development only: local checks, settlements recorded in the ledger, no chain.
    Local,
    Remote {
        url: String,
        timeout: Duration,
        authorization: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("missing or empty environment variable {0}")]
    Missing(&'static str),
    #[error("environment variable {0}: {1}")]
    Invalid(&'static str, String),
}

/// Base mainnet USDC, the production default.
pub const BASE_USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

impl Config {
    /// `LEASES_TABLE`, `REQUESTS_TABLE`, `KEYS_TABLE`, `PAYMENTS_TABLE`, `SIGNING_KEY_SECRET`,
    /// and the `X402_*` payment settings (as the SAM template sets them).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let optional = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let var = |name: &'static str| optional(name).ok_or(ConfigError::Missing(name));
        let tables = Tables {
            leases: var("LEASES_TABLE")?,
            requests: var("REQUESTS_TABLE")?,
            keys: var("KEYS_TABLE")?,
            payments: var("PAYMENTS_TABLE")?,
            claims: var("CLAIMS_TABLE")?,
        };
        let usdc = |name: &'static str, default: &str| {
            let text = optional(name).unwrap_or_else(|| default.to_owned());
            usdc_atomic(&text)
                .ok_or_else(|| ConfigError::Invalid(name, format!("not a USDC amount: {text}")))
        };
        let payments = match optional("X402_PAY_TO") {
            None => None,
            Some(pay_to) => {
                let or = |name: &str, default: &str| {
                    optional(name).unwrap_or_else(|| default.to_owned())
                };
                let settings = PaymentSettings::new(
                    &or("X402_NETWORK", "eip155:8453"),
                    &or("X402_ASSET", BASE_USDC),
                    &or("X402_TOKEN_NAME", "USD Coin"),
                    &or("X402_TOKEN_VERSION", "2"),
                    &pay_to,
                )
                .map_err(|e| ConfigError::Invalid("X402_*", e.to_string()))?;
                let lease_price = usdc("LEASE_PRICE_USDC", "0.005")?;
                let claim_prices = ClaimPrices {
                    hour: usdc("CLAIM_PRICE_HOUR_USDC", "0.0052")?,
                    day: usdc("CLAIM_PRICE_DAY_USDC", "0.03")?,
                    week: usdc("CLAIM_PRICE_WEEK_USDC", "0.15")?,
                };
                let facilitator = match (
                    optional("X402_FACILITATOR_URL"),
                    optional("X402_LOCAL_FACILITATOR"),
                ) {
                    (Some(url), _) => {
                        let ms = or("X402_FACILITATOR_TIMEOUT_MS", "5000");
                        let ms: u64 = ms.parse().map_err(|_| {
                            ConfigError::Invalid(
                                "X402_FACILITATOR_TIMEOUT_MS",
                                format!("not milliseconds: {ms}"),
                            )
                        })?;
                        FacilitatorConfig::Remote {
                            url,
                            timeout: Duration::from_millis(ms),
                            authorization: optional("X402_FACILITATOR_AUTHORIZATION"),
                        }
                    }
                    (None, Some(flag)) if flag == "true" => FacilitatorConfig::Local,
                    (None, _) => return Err(ConfigError::Missing("X402_FACILITATOR_URL")),
                };
                Some(PaymentConfig {
                    settings,
                    lease_price,
                    claim_prices,
                    facilitator,
                })
            }
        };
        let quota = optional("FREE_CLAIMS_PER_HOUR").unwrap_or_else(|| "60".into());
        let free_claims_per_hour = quota.parse().map_err(|_| {
            ConfigError::Invalid("FREE_CLAIMS_PER_HOUR", format!("not a count: {quota}"))
        })?;
        Ok(Self {
            tables,
            signing_key_secret: optional("SIGNING_KEY_SECRET"),
            payments,
            free_claims_per_hour,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(name: &str) -> Option<String> {
        name.ends_with("_TABLE").then(|| format!("{name}-value"))
    }

    #[test]
    fn names_the_missing_variable() {
        let err =
            Config::from_lookup(|n| (n == "LEASES_TABLE").then(|| "l".to_owned())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "missing or empty environment variable REQUESTS_TABLE"
        );
    }

    #[test]
    fn payments_are_off_without_a_pay_to_address() {
        let config = Config::from_lookup(tables).unwrap();
        assert_eq!(config.tables.payments, "PAYMENTS_TABLE-value");
        assert_eq!((config.signing_key_secret, config.payments), (None, None));
    }

    #[test]
    fn payments_need_a_facilitator_unless_local_is_explicit() {
        let pay_to = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
        let with = |extra: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                if name == "X402_PAY_TO" {
                    return Some(pay_to.to_owned());
                }
                extra
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
                    .or_else(|| tables(name))
            }
        };
        assert!(matches!(
            Config::from_lookup(with(&[])),
            Err(ConfigError::Missing("X402_FACILITATOR_URL"))
        ));
        let local = Config::from_lookup(with(&[("X402_LOCAL_FACILITATOR", "true")]))
            .unwrap()
            .payments
            .unwrap();
        assert_eq!(local.facilitator, FacilitatorConfig::Local);
        assert_eq!(local.lease_price, 5000);
        assert_eq!(local.settings.chain_id, 8453);
        let remote = Config::from_lookup(with(&[
            ("X402_FACILITATOR_URL", "https://f.example"),
            ("LEASE_PRICE_USDC", "0.01"),
        ]))
        .unwrap()
        .payments
        .unwrap();
        assert_eq!(remote.lease_price, 10_000);
        assert!(matches!(
            remote.facilitator,
            FacilitatorConfig::Remote { .. }
        ));
        assert!(
            Config::from_lookup(with(&[
                ("X402_LOCAL_FACILITATOR", "true"),
                ("LEASE_PRICE_USDC", "cheap")
            ]))
            .is_err()
        );
    }
}
