//! The rules of a versioned resource: a semaphore (`limit` > 1: up to `limit` permits, one per
//! holder, each with its own token from the one counter) or any resource with a queue. Every
//! write replaces the whole state, guarded on the version it was read at ([`Guard::Version`]),
//! and brings it up to now first ([`queue::as_of`]): lapsed permits and places are dropped, and free
//! permits go to the earliest waiters.

use super::queue::{self, Asked};
use super::{
    Acquired, Effect, HolderOp, Refusal, Revocation, Write, exhausted, expired, limit_mismatch,
    token_mismatch, unchanged,
};
use crate::clock::Millis;
use crate::lease::model::{
    Done, EndedHandoff, LeaseState, MAX_ENDED_HANDOFFS, MAX_REVOKED, MAX_TOKEN, Permit, Revoked,
};
use crate::witness::Witness;
use serde_json::json;

/// The write that makes the stored `state` into `after`, as of `now`, at the next version.
/// A permit handed to a waiting call that ends in it, before the call took it, is remembered
/// (docs/adr/0008).
pub(super) fn replace(state: &LeaseState, after: LeaseState, now: Millis) -> Write {
    let mut after = queue::as_of(&after, now);
    after.version = state.version + 1;
    // The permits handed to waiting calls before this write: those stored, and those a lapse
    // hands on in it (a revoke may end one of these at once).
    let before = queue::as_of(state, now);
    let handed_before = state
        .permits
        .iter()
        .chain(before.permits.iter().filter(|p| p.token > state.last_token));
    // A session's is not: it ended with its place's session or while it lived, and the call's
    // retry is decided in its session as it stands (the attack of 2026-12-05: the retry after a
    // close was answered the ended grant, as live, outside any session).
    let ended = handed_before.filter(|p| {
        p.handoff.is_some()
            && p.session.is_none()
            && !after.permits.iter().any(|kept| kept.token == p.token)
    });
    let ended: Vec<EndedHandoff> = ended
        .filter_map(|p| {
            Some(EndedHandoff {
                holder: p.holder.clone(),
                token: p.token,
                limit: state.limit,
                handoff: p.handoff.clone()?,
            })
        })
        .collect();
    after.ended_handoffs.extend(ended);
    after
        .ended_handoffs
        .retain(|h| now < h.handoff.ticket.until);
    // The latest, by token, as with revoked permits.
    after
        .ended_handoffs
        .sort_by_key(|h| std::cmp::Reverse(h.token));
    after.ended_handoffs.truncate(MAX_ENDED_HANDOFFS);
    Write {
        guard: unchanged(state),
        effect: Effect::Replace(after),
    }
}

/// The write that hands on the permits freed since `state` was written (a lapse nobody wrote
/// yet) to its earliest waiters, if there are any to hand on: what a refusal writes, so that
/// what it cites is what the store holds.
pub(crate) fn handoffs_due(state: &LeaseState, now: Millis) -> Option<Write> {
    let current = queue::as_of(state, now);
    (state.is_versioned() && current.last_token != state.last_token)
        .then(|| replace(state, current, now))
}

/// `holder` gives up waiting on `state` at `now`: its place leaves the queue, and a permit
/// handed to it that it has not taken goes on to the next place (the call that would take it
/// is refused: its session ended while it waited, docs/adr/0010). `None`: it had neither.
pub(crate) fn withdraw(state: &LeaseState, holder: &str, now: Millis) -> Option<Write> {
    let current = queue::as_of(state, now);
    let mut after = current.clone();
    after.waiters.retain(|w| w.holder != holder);
    after
        .permits
        .retain(|p| p.holder != holder || (p.handoff.is_none() && p.untaken.is_none()));
    if after == current {
        return handoffs_due(state, now);
    }
    Some(replace(state, queue::as_of(&after, now), now))
}

/// A refusal of a call on `state` for `witnesses`, writing the hand-off its read noticed.
pub(super) fn refusal(state: &LeaseState, witnesses: Vec<Witness>, now: Millis) -> Refusal {
    Refusal {
        write: handoffs_due(state, now),
        witnesses,
    }
}

/// An acquire on a versioned resource, or one that waits: on the state as of now first, so that
/// earlier waiters are served before the caller.
pub(super) fn acquire(state: &LeaseState, asked: &Asked<'_>, now: Millis) -> Acquired {
    let current = queue::as_of(state, now);
    // A refusal whose read found a permit to hand on (a lapse nobody wrote yet) writes the
    // hand-off, so that its answer, its witness and the store agree on who holds the permit
    // (found by the attack of 2026-12-03: a LEASE_HELD citing a token no read could see).
    let refuse = |witnesses: Vec<Witness>| Acquired::from(refusal(state, witnesses, now));
    if let Some(mismatch) = limit_mismatch(&current, asked.limit, now) {
        return refuse(vec![mismatch]);
    }
    let mut after = current.clone();
    after.waiters.retain(|w| w.holder != asked.holder);
    let expires_at = now + asked.ttl_ms;
    // Acquire again by a holder with a live permit (one handed to it from the queue, too): the
    // same token, a new expiry. Taken by the call it was handed to, it is that call's answer.
    if let Some(mine) = after.permits.iter_mut().find(|p| p.holder == asked.holder) {
        mine.expires_at = expires_at;
        mine.untaken = None;
        let taker = asked.ticket.map(|t| &t.key);
        if mine.handoff.as_ref().map(|h| &h.ticket.key) == taker {
            mine.handoff = None;
        }
        after.limit = asked.limit;
        return Acquired::Write(replace(state, after, now));
    }
    let ahead = queue::ahead(&current, asked.holder, now);
    let full = current.permits.len() >= asked.limit as usize;
    if ahead == 0 && !full && current.last_token < MAX_TOKEN {
        after.last_token += 1;
        after.limit = asked.limit;
        after
            .permits
            .push(Permit::new(asked.holder, after.last_token, expires_at));
        return Acquired::Write(replace(state, after, now));
    }
    let why = if ahead > 0 {
        queue::waiters_ahead(ahead)
    } else if full {
        held(&current, asked.limit)
    } else {
        return refuse(vec![exhausted(state)]);
    };
    if !queue::waits(&current, asked, now) {
        return refuse(vec![why]);
    }
    let Some(queued) = queue::keep_place(&current, asked, now) else {
        return refuse(vec![why, queue::queue_full()]);
    };
    // Written when it takes or lengthens the place, or hands on a permit freed since the last
    // write; otherwise the stored state says it all already.
    let unchanged = queued.last_token == state.last_token && queued.waiters == state.waiters;
    Acquired::Queue {
        write: (!unchanged).then(|| replace(state, queued, now)),
        witnesses: vec![why],
    }
}

/// Every permit of `current` (all of them live) is held, under `limit`.
pub(super) fn held(current: &LeaseState, limit: u32) -> Witness {
    let held: Vec<_> = current
        .permits
        .iter()
        .map(|p| json!({"holder": p.holder, "fencingToken": p.token}))
        .collect();
    let (detail, expected) = match limit {
        1 => (
            "another holder has this lease until it lapses or is released".to_owned(),
            "a free or lapsed lease".to_owned(),
        ),
        _ => (
            format!("all {limit} permits are held until one lapses or is released"),
            format!("fewer than {limit} live permits"),
        ),
    };
    let actual = match limit {
        1 => held.into_iter().next().unwrap_or_default(),
        _ => json!(held),
    };
    Witness::new("LEASE_HELD", "/resource", detail)
        .expected(expected)
        .actual(actual)
}

/// `holder`'s live permit with `token`, or why it has none.
pub(super) fn mismatches<'s>(
    state: &'s LeaseState,
    holder: &str,
    token: u64,
    now: Millis,
) -> Result<&'s Permit, Vec<Witness>> {
    if let Some(mine) = state.live_permit_of(holder, now) {
        return match mine.token == token {
            true => Ok(mine),
            false => Err(vec![token_mismatch(mine.token, token)]),
        };
    }
    let lapsed = state
        .permits
        .iter()
        .find(|p| p.holder == holder && p.token == token);
    if let Some(lapsed) = lapsed {
        return Err(vec![expired(lapsed)]);
    }
    let theirs = state
        .live_permits(now)
        .into_iter()
        .find(|p| p.token == token);
    Err(vec![match theirs {
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

/// The write of a renew or release by the holder of `mine`, a live permit of `state` (see
/// [`mismatches`]).
pub(super) fn holder_write(
    state: &LeaseState,
    op: HolderOp<'_>,
    mine: &Permit,
    now: Millis,
) -> Write {
    let mut after = state.clone();
    after.permits.retain(|p| p.holder != mine.holder);
    match op {
        HolderOp::Renew { ttl_ms, .. } => after.permits.push(Permit {
            expires_at: now + ttl_ms,
            ..mine.clone()
        }),
        // Finished (docs/adr/0012): the mark, and the places of those who waited for it end
        // (their next call is told DONE). Permits handed to places already, and the other
        // permits of a semaphore, stay until released or lapsed.
        HolderOp::Release {
            done: Some(finish), ..
        } => {
            after.waiters.clear();
            after.done = Some(Box::new(Done {
                holder: mine.holder.clone(),
                token: mine.token,
                at: now,
                result: finish.result.map(str::to_owned),
                until: now + finish.keep_ms,
            }));
        }
        HolderOp::Release { done: None, .. } => {}
    }
    replace(state, after, now)
}

/// A revoke (docs/adr/0008): `holder`'s live permit (the one with `token`, when given), or
/// every live permit when neither is named, ends now, and is remembered so that its holder
/// learns `REVOKED`. The write is a replace of
/// the whole resource as of now, so that the permits it frees go to the earliest waiters in it,
/// as after a release; the counter stays, so later tokens are larger than every one before.
/// Nothing live to end: denied with `NO_HOLD`, nothing written.
pub(super) fn revoke(
    state: &LeaseState,
    holder: Option<&str>,
    token: Option<u64>,
    now: Millis,
) -> Revocation {
    // On the state as of now: a permit that a lapse freed for a waiter between its calls is
    // that waiter's, and a revoke of every permit ends it too (what a get shows).
    let current = queue::as_of(state, now);
    let ended: Vec<&Permit> = current
        .live_permits(now)
        .into_iter()
        .filter(|p| holder.is_none_or(|h| h == p.holder) && token.is_none_or(|t| t == p.token))
        .collect();
    if ended.is_empty() {
        let detail = match (holder, token) {
            (_, Some(_)) => "no live permit of this resource has this token (and holder) to revoke",
            (Some(_), None) => "this holder has no live permit of this resource to revoke",
            (None, None) => "nobody holds a live permit of this resource to revoke",
        };
        return Revocation::Deny(vec![
            Witness::new("NO_HOLD", "/resource", detail).expected("a live permit"),
        ]);
    }
    let mut after = current.clone();
    after
        .permits
        .retain(|p| !ended.iter().any(|e| e.token == p.token));
    after.revoked.extend(ended.iter().map(|p| Revoked {
        holder: p.holder.clone(),
        token: p.token,
    }));
    // The latest, by token: the oldest revoked are the likeliest to have been told already.
    after.revoked.sort_by_key(|r| std::cmp::Reverse(r.token));
    after.revoked.truncate(MAX_REVOKED);
    Revocation::End(replace(state, after, now))
}
