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
    /// Free claims per wallet or account in any rolling hour.
    pub free_claims_per_hour: u32,
    /// `LEASEKIT_PUBLIC_URL`: the URL callers reach the service at. Required by the HTTP
    /// functions (advertised URLs and sign-in-with-x are built from it, never from the request).
    pub public_url: Option<PublicUrl>,
}

/// The URL the service is reached at (`scheme://host[:port][/base]`, http or https, no query,
/// fragment or user info): the origin that sign-in-with-x proofs must name and the base of every
/// URL the service advertises. Configured, because the `Host` and `X-Forwarded-Proto` headers
/// are whatever the caller sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    scheme: String,
    /// `host[:port]`, lowercase, without the scheme's default port.
    authority: String,
    /// A path prefix without a trailing slash (API Gateway's stage, say), or empty.
    base_path: String,
}

impl Default for PublicUrl {
    /// `http://localhost`: for states built without configuration (tests).
    fn default() -> Self {
        Self {
            scheme: "http".into(),
            authority: "localhost".into(),
            base_path: String::new(),
        }
    }
}

impl PublicUrl {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("{text:?} is not an absolute http(s) URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!("{text:?}: only http and https are served"));
        }
        if rest.contains(['?', '#']) {
            return Err(format!("{text:?}: no query or fragment"));
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') {
            return Err(format!("{text:?}: no user info"));
        }
        let parsed = authority
            .parse::<axum::http::uri::Authority>()
            .ok()
            .filter(|a| !a.host().is_empty())
            .ok_or_else(|| format!("{text:?}: not a valid host[:port]"))?;
        let host = parsed.host().to_ascii_lowercase();
        let authority = match parsed.port_u16() {
            Some(port) if Some(port) != default_port(&scheme) => format!("{host}:{port}"),
            _ => host,
        };
        let base_path = path.trim_end_matches('/');
        let path_ok = base_path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b));
        if !path_ok || base_path.contains("//") {
            return Err(format!(
                "{text:?}: the path may only be a plain prefix such as /prod"
            ));
        }
        Ok(Self {
            scheme,
            authority,
            base_path: base_path.to_owned(),
        })
    }

    /// `host[:port]`: the EIP-4361 domain.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The host alone.
    pub fn host(&self) -> &str {
        authority_host(&self.authority)
    }

    /// `scheme://host[:port]`.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// The base URL, without a trailing slash: what advertised paths are appended to.
    pub fn base(&self) -> String {
        format!("{}{}", self.origin(), self.base_path)
    }

    /// The public URL of a route path (`/claim/free`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }
}

/// The port a scheme implies.
pub fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// The host of `host[:port]` (brackets kept for IPv6).
pub fn authority_host(authority: &str) -> &str {
    match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => &authority[..i],
        _ => authority,
    }
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
        let free_claims_per_hour = quota
            .parse()
            .ok()
            .filter(|q| *q <= crate::claims::MAX_FREE_CLAIMS_PER_HOUR)
            .ok_or_else(|| {
                ConfigError::Invalid(
                    "FREE_CLAIMS_PER_HOUR",
                    format!(
                        "not a count from 0 to {}: {quota}",
                        crate::claims::MAX_FREE_CLAIMS_PER_HOUR
                    ),
                )
            })?;
        let public_url = optional("LEASEKIT_PUBLIC_URL")
            .map(|url| PublicUrl::parse(&url))
            .transpose()
            .map_err(|e| ConfigError::Invalid("LEASEKIT_PUBLIC_URL", e))?;
        Ok(Self {
            tables,
            signing_key_secret: optional("SIGNING_KEY_SECRET"),
            payments,
            free_claims_per_hour,
            public_url,
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

    /// The quota keeps a slot per claim in one item: past the cap it would outgrow what one
    /// DynamoDB item holds, so a deployment cannot set it.
    #[test]
    fn the_free_quota_is_capped() {
        let quota = |value: &'static str| {
            Config::from_lookup(move |n| match n {
                "FREE_CLAIMS_PER_HOUR" => Some(value.to_owned()),
                other => tables(other),
            })
        };
        assert_eq!(quota("0").unwrap().free_claims_per_hour, 0);
        assert_eq!(quota("1000").unwrap().free_claims_per_hour, 1000);
        for bad in ["1001", "100000", "-1", "sixty"] {
            let err = quota(bad).unwrap_err().to_string();
            assert!(err.contains("FREE_CLAIMS_PER_HOUR"), "{bad}: {err}");
        }
    }

    #[test]
    fn payments_are_off_without_a_pay_to_address() {
        let config = Config::from_lookup(tables).unwrap();
        assert_eq!(config.tables.payments, "PAYMENTS_TABLE-value");
        assert_eq!((config.signing_key_secret, config.payments), (None, None));
    }

    #[test]
    fn the_public_url_is_an_http_origin_with_at_most_a_path_prefix() {
        let url = PublicUrl::parse("HTTPS://Lease.Example.COM:443/prod/").unwrap();
        assert_eq!(url.authority(), "lease.example.com");
        assert_eq!(url.origin(), "https://lease.example.com");
        assert_eq!(
            url.url("/claim/free"),
            "https://lease.example.com/prod/claim/free"
        );
        let local = PublicUrl::parse("http://127.0.0.1:3000").unwrap();
        assert_eq!(
            (local.authority(), local.host()),
            ("127.0.0.1:3000", "127.0.0.1")
        );
        assert_eq!(local.base(), "http://127.0.0.1:3000");
        assert_eq!(
            PublicUrl::parse("http://[::1]:8080").unwrap().host(),
            "[::1]"
        );
        for bad in [
            "javascript:alert(1)",
            "ftp://example.com",
            "https-evil://example.com",
            "https://example.com/?q=1",
            "https://example.com/#f",
            "https://user@example.com",
            "https://",
            "https://exa mple.com",
            "https://example.com/a b",
            "example.com",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad} was accepted");
        }
        let config = Config::from_lookup(|n| {
            (n == "LEASEKIT_PUBLIC_URL")
                .then(|| "javascript:x".to_owned())
                .or_else(|| tables(n))
        });
        assert!(matches!(
            config,
            Err(ConfigError::Invalid("LEASEKIT_PUBLIC_URL", _))
        ));
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
