//! The stored state of one lease, as the domain sees it.

use crate::clock::Millis;

/// Fencing tokens stay at or below 2^53 - 1 so that every JSON reader takes them exactly.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// One (tenant, resource) as stored. `last_token` is the counter: the last token ever issued
/// (0 = never acquired). `holder` and `expires_at` describe the latest grant; they stay after the
/// lease lapses, and are cleared by release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseState {
    pub last_token: u64,
    pub holder: Option<String>,
    pub expires_at: Option<Millis>,
}

/// A lease that is held right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveLease<'a> {
    pub holder: &'a str,
    pub token: u64,
    pub expires_at: Millis,
}

impl LeaseState {
    /// The lease if someone holds it at `now` (held while `now < expires_at`).
    pub fn live(&self, now: Millis) -> Option<LiveLease<'_>> {
        match (&self.holder, self.expires_at) {
            (Some(holder), Some(expires_at)) if now < expires_at => Some(LiveLease {
                holder,
                token: self.last_token,
                expires_at,
            }),
            _ => None,
        }
    }
}
