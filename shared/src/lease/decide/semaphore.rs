//! The rules of a resource with `limit` > 1: up to `limit` permits, one per holder, each with its
//! own token from the one counter. Every write replaces the whole state, guarded on the version
//! it was read at ([`Guard::Version`]); lapsed permits are dropped by the next write.

use super::{Decision, Effect, Guard, Write, exhausted, expired, token_mismatch};
use crate::clock::Millis;
use crate::lease::model::{LeaseState, MAX_TOKEN, Permit};
use crate::lease::request::Command;
use crate::witness::Witness;
use serde_json::json;

/// The write that makes `state` into `permits` under `limit`, with the counter at `last_token`.
fn replace(state: &LeaseState, limit: u32, last_token: u64, mut permits: Vec<Permit>) -> Write {
    permits.sort_by_key(|p| p.token);
    Write {
        guard: Guard::Version {
            last_token: state.last_token,
            version: state.version,
        },
        effect: Effect::Replace(LeaseState {
            last_token,
            limit,
            version: state.version + 1,
            permits,
        }),
    }
}

/// The permits live at `now`, owned, but `holder`'s.
fn others(state: &LeaseState, holder: &str, now: Millis) -> Vec<Permit> {
    state
        .live_permits(now)
        .into_iter()
        .filter(|p| p.holder != holder)
        .cloned()
        .collect()
}

/// An acquire under `limit` (> 1), the limit already checked against the live permits.
pub(super) fn acquire(
    state: &LeaseState,
    holder: &str,
    limit: u32,
    expires_at: Millis,
    now: Millis,
) -> Decision {
    let mut permits = others(state, holder, now);
    // Acquire again by a holder with a live permit: the same token, a new expiry.
    if let Some(mine) = state.live_permit_of(holder, now) {
        permits.push(Permit {
            expires_at,
            ..mine.clone()
        });
        return Decision::Write(replace(state, limit, state.last_token, permits));
    }
    if permits.len() >= limit as usize {
        let held: Vec<_> = permits
            .iter()
            .map(|p| json!({"holder": p.holder, "fencingToken": p.token}))
            .collect();
        return Decision::Deny(vec![
            Witness::new(
                "LEASE_HELD",
                "/resource",
                format!("all {limit} permits are held until one lapses or is released"),
            )
            .expected(format!("fewer than {limit} live permits"))
            .actual(held),
        ]);
    }
    if state.last_token >= MAX_TOKEN {
        return Decision::Deny(vec![exhausted(state)]);
    }
    let token = state.last_token + 1;
    permits.push(Permit {
        holder: holder.to_owned(),
        token,
        expires_at,
    });
    Decision::Write(replace(state, limit, token, permits))
}

/// Why `holder` with `token` does not hold a live permit (`None` when it does).
pub(super) fn mismatches(
    state: &LeaseState,
    holder: &str,
    token: u64,
    now: Millis,
) -> Option<Vec<Witness>> {
    if let Some(mine) = state.live_permit_of(holder, now) {
        return (mine.token != token).then(|| vec![token_mismatch(mine.token, token)]);
    }
    let lapsed = state
        .permits
        .iter()
        .find(|p| p.holder == holder && p.token == token);
    if let Some(lapsed) = lapsed {
        return Some(vec![expired(lapsed)]);
    }
    let theirs = state
        .live_permits(now)
        .into_iter()
        .find(|p| p.token == token);
    Some(vec![match theirs {
        Some(p) => Witness::new(
            "NOT_HOLDER",
            "/holder",
            "another holder has the permit with this token",
        )
        .expected(p.holder.as_str())
        .actual(holder),
        None => Witness::new("NO_HOLD", "/resource", "you hold no live permit here")
            .expected("a live permit"),
    }])
}

/// The write of a renew or release by the holder of a live permit (see [`mismatches`]).
pub(super) fn holder_write(state: &LeaseState, command: &Command, now: Millis) -> Option<Write> {
    let (holder, expires_at) = match command {
        Command::Renew { holder, ttl_ms, .. } => (holder, Some(now + ttl_ms)),
        Command::Release { holder, .. } => (holder, None),
        Command::Acquire { .. } | Command::Get | Command::Check { .. } => return None,
    };
    let mut permits = others(state, holder, now);
    if let Some(expires_at) = expires_at {
        let mine = state.live_permit_of(holder, now)?;
        permits.push(Permit {
            expires_at,
            ..mine.clone()
        });
    }
    Some(replace(state, state.limit, state.last_token, permits))
}
