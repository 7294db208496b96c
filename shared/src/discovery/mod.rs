//! What an agent needs to find and call the service from its base URL alone: the OpenAPI
//! document, the catalog, the docs pages and a worked sample. Built from the same schema files the
//! handlers validate with (no copy that can drift) and from the deployment's prices.

pub mod docs;
pub mod examples;
pub mod home;
pub mod openapi;

use crate::config::ClaimPrices;
use serde_json::Value;

/// What this deployment charges, in USDC atomic units (`None`: x402 is off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prices {
    pub lease: Option<u64>,
    pub claims: Option<ClaimPrices>,
    pub network: Option<String>,
}

/// `5000` -> `"0.005"`: USDC has 6 decimals.
pub fn usdc(atomic: u64) -> String {
    let whole = atomic / 1_000_000;
    let fraction = format!("{:06}", atomic % 1_000_000);
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        whole.to_string()
    } else {
        format!("{whole}.{fraction}")
    }
}

/// A schema file as a JSON value, without its `$schema` line (OpenAPI 3.1 sets the dialect).
pub(crate) fn schema(text: &str) -> Value {
    let mut value: Value = serde_json::from_str(text).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.shift_remove("$schema");
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usdc_amounts_print_as_people_write_them() {
        assert_eq!(usdc(5_000), "0.005");
        assert_eq!(usdc(5_200), "0.0052");
        assert_eq!(usdc(150_000), "0.15");
        assert_eq!(usdc(2_000_000), "2");
        assert_eq!(usdc(1), "0.000001");
    }
}
