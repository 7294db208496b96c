//! The stored state of one resource, as the domain sees it: its counter and its permits.

use crate::clock::Millis;

/// Fencing tokens stay at or below 2^53 - 1 so that every JSON reader takes them exactly.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// One grant of the resource: `holder` holds it with `token` while `now < expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    pub holder: String,
    pub token: u64,
    pub expires_at: Millis,
}

/// One (tenant, resource) as stored. `last_token` is the counter: the last token ever issued
/// (0 = never acquired). `permits` are the grants kept, by token: a lease (limit 1) keeps at most
/// one, its latest grant, which stays after it lapses and is cleared by release. Semaphores
/// (docs/adr/0006) keep one per holder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseState {
    pub last_token: u64,
    pub permits: Vec<Permit>,
}

/// A permit that is held right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveLease<'a> {
    pub holder: &'a str,
    pub token: u64,
    pub expires_at: Millis,
}

impl LeaseState {
    /// A resource whose counter is at `last_token` and that nobody holds.
    pub fn vacant(last_token: u64) -> Self {
        Self {
            last_token,
            permits: Vec::new(),
        }
    }

    /// A lease whose latest grant, to `holder` with the token `last_token`, lasts until
    /// `expires_at`.
    pub fn granted(last_token: u64, holder: &str, expires_at: Millis) -> Self {
        Self {
            last_token,
            permits: vec![Permit {
                holder: holder.to_owned(),
                token: last_token,
                expires_at,
            }],
        }
    }

    /// The latest grant kept, live or lapsed.
    pub fn latest(&self) -> Option<&Permit> {
        self.permits.iter().max_by_key(|p| p.token)
    }

    /// The live permit with the largest token, if someone holds the resource at `now` (held
    /// while `now < expires_at`).
    pub fn live(&self, now: Millis) -> Option<LiveLease<'_>> {
        self.permits
            .iter()
            .filter(|p| now < p.expires_at)
            .max_by_key(|p| p.token)
            .map(|p| LiveLease {
                holder: &p.holder,
                token: p.token,
                expires_at: p.expires_at,
            })
    }
}
