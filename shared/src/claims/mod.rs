//! Claims: an exclusive hold on a key for a plan's duration (hour, day, week paid; 5 minutes
//! free). Scoped to a wallet or an API key's account. A claim of a free (or lapsed) key is
//! acquired with a new fencing token; a live hold is reported as held, with `mine` telling the
//! caller whether the holder is itself (the crash-resume signal).

use crate::clock::Millis;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    Hour,
    Day,
    Week,
    Free,
}

impl Plan {
    pub fn seconds(self) -> i64 {
        match self {
            Plan::Hour => 3_600,
            Plan::Day => 86_400,
            Plan::Week => 604_800,
            Plan::Free => 300,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Hour => "hour",
            Plan::Day => "day",
            Plan::Week => "week",
            Plan::Free => "free",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Plan::Hour, Plan::Day, Plan::Week, Plan::Free]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// A hold as stored and as answered (Unix ms from the server clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub key: String,
    pub holder: String,
    pub plan: Plan,
    pub acquired_at: Millis,
    pub expires_at: Millis,
    /// Strictly increasing per key: fence downstream writes with it, as with leases.
    pub fencing_token: u64,
}

/// What a claim attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The caller won the key.
    Acquired(Claim),
    /// A live hold exists; `mine` when its holder is the caller's holder.
    Held { claim: Claim, mine: bool },
}

impl Outcome {
    /// The outcome when the acquire's condition failed on `existing` (a live hold).
    pub fn held(existing: Claim, holder: &str) -> Self {
        let mine = existing.holder == holder;
        Outcome::Held {
            claim: existing,
            mine,
        }
    }
}

/// Byte limits of key and holder (UTF-8 bytes, not characters).
pub const MAX_BYTES: usize = 256;

/// The largest free-claim quota a deployment may set (claims per wallet or account in any
/// rolling hour). The quota keeps one slot per claim in one item, and a write is billed by the
/// item's size: at this limit some 12 KB, 12 write units a claim; far above it the item would
/// pass DynamoDB's 400 KB.
pub const MAX_FREE_CLAIMS_PER_HOUR: u32 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(holder: &str) -> Claim {
        Claim {
            key: "k".into(),
            holder: holder.into(),
            plan: Plan::Hour,
            acquired_at: 1,
            expires_at: 2,
            fencing_token: 3,
        }
    }

    #[test]
    fn plans_last_as_the_contract_says() {
        assert_eq!(
            [Plan::Hour, Plan::Day, Plan::Week, Plan::Free].map(Plan::seconds),
            [3600, 86_400, 604_800, 300]
        );
        assert_eq!(Plan::parse("day"), Some(Plan::Day));
        assert_eq!(Plan::parse("month"), None);
    }

    #[test]
    fn held_is_mine_only_for_the_same_holder() {
        assert_eq!(
            Outcome::held(claim("a"), "a"),
            Outcome::Held {
                claim: claim("a"),
                mine: true
            }
        );
        assert_eq!(
            Outcome::held(claim("a"), "b"),
            Outcome::Held {
                claim: claim("a"),
                mine: false
            }
        );
    }
}
