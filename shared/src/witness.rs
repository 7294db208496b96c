//! Witnesses: one record per broken rule, shared by validation errors and lease denials.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a rule did not hold, pointing into the caller's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Witness {
    /// Machine-readable rule name, e.g. `LEASE_HELD` or `SCHEMA_PATTERN`.
    pub rule_id: String,
    /// JSON pointer into the request body (`""` is the whole body).
    pub path: String,
    /// A sentence for a person.
    pub detail: String,
    /// What the rule required (`null` when there is nothing to say).
    #[serde(default)]
    pub expected: Option<Value>,
    /// What the input or the stored lease had (`null` when absent).
    #[serde(default)]
    pub actual: Option<Value>,
}

impl Witness {
    pub fn new(rule_id: &str, path: &str, detail: impl Into<String>) -> Self {
        Self {
            rule_id: rule_id.to_owned(),
            path: path.to_owned(),
            detail: detail.into(),
            expected: None,
            actual: None,
        }
    }

    pub fn expected(mut self, value: impl Into<Value>) -> Self {
        self.expected = Some(value.into());
        self
    }

    pub fn actual(mut self, value: impl Into<Value>) -> Self {
        self.actual = Some(value.into());
        self
    }
}
