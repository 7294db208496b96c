//! Deployment settings, read once at start from the environment into a typed struct. Handlers
//! never read the environment.

use crate::store::Tables;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub tables: Tables,
    /// Secrets Manager secret (name or ARN) holding the signing key's 32-byte seed in hex.
    /// Required by the functions that sign or publish the key.
    pub signing_key_secret: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("missing or empty environment variable {0}")]
pub struct ConfigError(pub &'static str);

impl Config {
    /// `LEASES_TABLE`, `REQUESTS_TABLE`, `KEYS_TABLE`, `SIGNING_KEY_SECRET` (as the SAM template
    /// sets them).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let optional = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let var = |name: &'static str| optional(name).ok_or(ConfigError(name));
        Ok(Self {
            tables: Tables {
                leases: var("LEASES_TABLE")?,
                requests: var("REQUESTS_TABLE")?,
                keys: var("KEYS_TABLE")?,
            },
            signing_key_secret: optional("SIGNING_KEY_SECRET"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_signing_secret_is_optional_here() {
        let config =
            Config::from_lookup(|n| (n != "SIGNING_KEY_SECRET").then(|| format!("{n}-value")))
                .unwrap();
        assert_eq!(config.tables.keys, "KEYS_TABLE-value");
        assert_eq!(config.signing_key_secret, None);
    }
}
