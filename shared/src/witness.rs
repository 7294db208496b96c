//! Witnesses: one record per broken rule, shared by validation errors and lease denials.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Witnesses one answer lists, at most (then one that counts the rest): an answer stays small
/// whatever the body (64 KiB of unknown properties once made a 1 MB answer; 2,300 repeated
/// leases a 279 KB one).
pub const MAX_WITNESSES: usize = 16;

/// `witnesses` as an answer lists them: the first [`MAX_WITNESSES`], then one `MORE` that counts
/// the rest.
pub fn capped(witnesses: &[Witness]) -> Vec<Witness> {
    let mut listed: Vec<Witness> = witnesses.iter().take(MAX_WITNESSES).cloned().collect();
    if witnesses.len() > MAX_WITNESSES {
        let more = witnesses.len() - MAX_WITNESSES;
        listed.push(Witness::new(
            "MORE",
            "",
            format!("{more} more violations are not listed"),
        ));
    }
    listed
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_sixteen_are_listed_then_one_counts_the_rest() {
        let many: Vec<Witness> = (0..2_300)
            .map(|i| Witness::new("DUPLICATE", &format!("/leases/{i}/resource"), "again"))
            .collect();
        let listed = capped(&many);
        assert_eq!(listed.len(), MAX_WITNESSES + 1);
        assert_eq!(listed[..MAX_WITNESSES], many[..MAX_WITNESSES]);
        assert_eq!(listed[MAX_WITNESSES].rule_id, "MORE");
        assert_eq!(
            listed[MAX_WITNESSES].detail,
            "2284 more violations are not listed"
        );
        let few = &many[..MAX_WITNESSES];
        assert_eq!(capped(few), few);
    }
}
