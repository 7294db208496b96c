//! A lease item's attributes, to and from [`LeaseState`] (docs/adr/0006, 0007, 0008); the
//! conditions on them ([`conditions`]) and how each write changes them ([`updates`]).
//!
//! `tok` the counter; a lease's one permit is `holder` and `exp`; a versioned resource's (a
//! semaphore, a resource with a queue, or one with a permit a waiting call has not taken) are
//! `pm` (holder → `{t, e, v?}`) with `lim`, `until` (the latest `e`), `ver`, and `hv` while a
//! permit carries a hand-off `v`; its queue is `wq` (`[{h, u, l, k?, x?}]`) with `wuntil`. Any
//! item may keep `rv`, its revoked permits, and `hd`, its hand-offs that ended untaken. A permit
//! in a session (`s`) is always in `pm`, stored as never lapsing by itself (docs/adr/0010). A
//! finished resource's mark is `dn` (`{h, t, a, r?, u}`: docs/adr/0012), on a versioned item.

pub(crate) mod conditions;
pub(crate) mod updates;

use super::{Item, StoreError, get_n, get_s, n, req_n, req_s, s};
use crate::clock::Millis;
use crate::lease::LeaseState;
use crate::lease::MAX_TOKEN;
use crate::lease::model::{
    Done, EndedHandoff, Handoff, MAX_ENDED_HANDOFFS, MAX_LIMIT, MAX_REVOKED, MAX_WAITERS, Permit,
    Place, Revoked, Ticket, UNTIL_ITS_SESSION_ENDS,
};
use aws_sdk_dynamodb::types::AttributeValue;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

type Map = HashMap<String, AttributeValue>;

/// The index partition of `resource` of `tenant`: `<tenant>#<0..f>`.
pub(crate) fn shard_key(tenant: &str, resource: &str) -> String {
    shard_of(tenant, Sha256::digest(resource.as_bytes())[0] % SHARDS)
}

/// Index partitions per tenant: each takes some 1,000 writes a second, so a tenant's grants and
/// releases together may reach about 16,000 a second before its index throttles them.
pub const SHARDS: u8 = 16;

pub(crate) fn shard_of(tenant: &str, shard: u8) -> String {
    format!("{tenant}#{shard:x}")
}

fn map<const N: usize>(entries: [(&str, AttributeValue); N]) -> AttributeValue {
    AttributeValue::M(entries.map(|(k, v)| (k.to_owned(), v)).into())
}

/// The revoked permits as stored, latest first: `[{h: holder, t: token}]`.
pub(super) fn revoked_list(state: &LeaseState) -> AttributeValue {
    AttributeValue::L(
        state
            .revoked
            .iter()
            .map(|r| map([("h", s(&r.holder)), ("t", n(r.token))]))
            .collect(),
    )
}

/// The hand-offs that ended untaken, latest first: `[{h, t, l, k, x, a, e}]` (holder, token,
/// limit, and the hand-off's fields as in [`handoff_entries`]).
pub(super) fn ended_handoffs_list(state: &LeaseState) -> AttributeValue {
    AttributeValue::L(
        state
            .ended_handoffs
            .iter()
            .map(|h| {
                let mut entry: Map = handoff_entries(&h.handoff).into();
                entry.insert("h".into(), s(&h.holder));
                entry.insert("t".into(), n(h.token));
                entry.insert("l".into(), n(h.limit));
                AttributeValue::M(entry)
            })
            .collect(),
    )
}

/// A hand-off's fields: `k` its ticket's key, `x` when the ticket ends, `a` when it was handed,
/// `e` until when.
fn handoff_entries(h: &Handoff) -> [(String, AttributeValue); 4] {
    [
        ("k".to_owned(), s(&h.ticket.key)),
        ("x".to_owned(), n(h.ticket.until)),
        ("a".to_owned(), n(h.at)),
        ("e".to_owned(), n(h.expires_at)),
    ]
}

fn ticket_from(entry: &Map) -> Result<Ticket, StoreError> {
    let key = req_s(entry, "k")?;
    if key.is_empty() {
        return Err(StoreError::Corrupt("a ticket with an empty key".into()));
    }
    Ok(Ticket {
        key: key.to_owned(),
        until: req_n(entry, "x")?,
    })
}

fn handoff_from(entry: &Map) -> Result<Handoff, StoreError> {
    Ok(Handoff {
        ticket: ticket_from(entry)?,
        at: req_n(entry, "a")?,
        expires_at: req_n(entry, "e")?,
    })
}

/// The entries of list attribute `name` of `item`, each a map, at most `max` (none when absent).
fn maps<'a>(item: &'a Item, name: &str, max: usize) -> Result<Vec<&'a Map>, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("{name} with {what}"));
    let list = match item.get(name) {
        None => return Ok(Vec::new()),
        Some(AttributeValue::L(list)) => list,
        Some(_) => return Err(corrupt("a value that is not a list")),
    };
    if list.len() > max {
        return Err(corrupt("too many entries"));
    }
    list.iter()
        .map(|entry| match entry {
            AttributeValue::M(entry) => Ok(entry),
            _ => Err(corrupt("an entry that is not a map")),
        })
        .collect()
}

/// A token of a permit kept beside the counter: issued, so at most the counter.
fn issued(entry: &Map, last_token: u64, what: &str) -> Result<u64, StoreError> {
    let token: u64 = req_n(entry, "t")?;
    if token == 0 || token > last_token {
        return Err(StoreError::Corrupt(format!(
            "{what} with a token past its counter"
        )));
    }
    Ok(token)
}

fn revoked_from_item(item: &Item, last_token: u64) -> Result<Vec<Revoked>, StoreError> {
    maps(item, "rv", MAX_REVOKED)?
        .into_iter()
        .map(|entry| {
            Ok(Revoked {
                holder: req_s(entry, "h")?.to_owned(),
                token: issued(entry, last_token, "a revoked permit")?,
            })
        })
        .collect()
}

fn ended_handoffs_from_item(item: &Item, last_token: u64) -> Result<Vec<EndedHandoff>, StoreError> {
    maps(item, "hd", MAX_ENDED_HANDOFFS)?
        .into_iter()
        .map(|entry| {
            Ok(EndedHandoff {
                holder: req_s(entry, "h")?.to_owned(),
                token: issued(entry, last_token, "a hand-off")?,
                limit: req_n(entry, "l")?,
                handoff: handoff_from(entry)?,
            })
        })
        .collect()
}

/// A finished mark as stored: `{h: holder, t: token, a: done at, r: result, u: until}`.
pub(super) fn done_map(done: &Done) -> AttributeValue {
    let mut entry: Map = [
        ("h".to_owned(), s(&done.holder)),
        ("t".to_owned(), n(done.token)),
        ("a".to_owned(), n(done.at)),
        ("u".to_owned(), n(done.until)),
    ]
    .into();
    if let Some(result) = &done.result {
        entry.insert("r".into(), s(result));
    }
    AttributeValue::M(entry)
}

fn done_from_item(item: &Item, last_token: u64) -> Result<Option<Box<Done>>, StoreError> {
    let entry = match item.get("dn") {
        None => return Ok(None),
        Some(AttributeValue::M(entry)) => entry,
        Some(_) => {
            return Err(StoreError::Corrupt(
                "a finished mark that is not a map".into(),
            ));
        }
    };
    let holder = req_s(entry, "h")?;
    if holder.is_empty() {
        return Err(StoreError::Corrupt("a finished mark with no holder".into()));
    }
    Ok(Some(Box::new(Done {
        holder: holder.to_owned(),
        token: issued(entry, last_token, "a finished mark")?,
        at: req_n(entry, "a")?,
        result: get_s(entry, "r")?.map(str::to_owned),
        until: req_n(entry, "u")?,
    })))
}

/// A versioned resource's permits as stored: holder → `{t: token, e: expiry ms, v: hand-off,
/// s: session, vl: value}`; a session's permit is stored to live until its session ends (its `e` is
/// [`crate::lease::model::UNTIL_ITS_SESSION_ENDS`]), but for one handed to a session's place
/// and not taken, which keeps the place's end.
pub(super) fn permits_map(state: &LeaseState) -> AttributeValue {
    AttributeValue::M(
        state
            .permits
            .iter()
            .map(|p| {
                let mut permit: Map = [
                    ("t".to_owned(), n(p.token)),
                    ("e".to_owned(), n(p.stored_expiry())),
                ]
                .into();
                if let Some(session) = &p.session {
                    permit.insert("s".into(), s(session));
                }
                if let Some(value) = &p.value {
                    permit.insert("vl".into(), s(value));
                }
                if let Some(handoff) = &p.handoff {
                    permit.insert(
                        "v".into(),
                        AttributeValue::M(handoff_entries(handoff).into()),
                    );
                }
                (p.holder.clone(), AttributeValue::M(permit))
            })
            .collect(),
    )
}

/// A queue as stored, in order: `[{h: holder, u: lapses at, l: limit, k, x: its ticket, s: its
/// session, vl: the value asked}]`.
pub(super) fn places_list(state: &LeaseState) -> AttributeValue {
    AttributeValue::L(
        state
            .waiters
            .iter()
            .map(|w| {
                let mut place: Map = [
                    ("h".to_owned(), s(&w.holder)),
                    ("u".to_owned(), n(w.until)),
                    ("l".to_owned(), n(w.limit)),
                ]
                .into();
                if let Some(ticket) = &w.ticket {
                    place.insert("k".into(), s(&ticket.key));
                    place.insert("x".into(), n(ticket.until));
                }
                if let Some(session) = &w.session {
                    place.insert("s".into(), s(session));
                }
                if let Some(value) = &w.value {
                    place.insert("vl".into(), s(value));
                }
                AttributeValue::M(place)
            })
            .collect(),
    )
}

pub(super) fn lease_from_item(item: Option<&Item>) -> Result<LeaseState, StoreError> {
    let Some(item) = item.filter(|i| !i.is_empty()) else {
        return Ok(LeaseState::default());
    };
    let last_token = req_n(item, "tok")?;
    // No write takes the counter past the ceiling: a larger one would be served as a token no
    // JSON reader takes exactly.
    if last_token > MAX_TOKEN {
        return Err(StoreError::Corrupt(format!(
            "a lease counter {last_token} past 2^53 - 1"
        )));
    }
    let version = get_n(item, "ver")?.unwrap_or(0);
    let revoked = revoked_from_item(item, last_token)?;
    let ended_handoffs = ended_handoffs_from_item(item, last_token)?;
    let done = done_from_item(item, last_token)?;
    if let Some(limit) = get_n::<u32>(item, "lim")? {
        let state = versioned_from_item(item, last_token, limit, version, done)?;
        return Ok(LeaseState {
            revoked,
            ended_handoffs,
            ..state
        });
    }
    if done.is_some() {
        return Err(StoreError::Corrupt(
            "a finished mark on a lease item".into(),
        ));
    }
    if item.contains_key("wq") || item.contains_key("hv") {
        return Err(StoreError::Corrupt(
            "a lease item with a queue or a hand-off".into(),
        ));
    }
    // A lease's one permit is `holder` and `exp`, its token the counter; the store writes both
    // or neither (a take sets them, a release removes them), and a holder is never empty.
    let state = match (get_s(item, "holder")?, get_n(item, "exp")?) {
        (Some(""), _) => {
            return Err(StoreError::Corrupt(
                "a lease item with an empty holder".into(),
            ));
        }
        (Some(holder), Some(expires_at)) => LeaseState::granted(last_token, holder, expires_at),
        (None, None) => LeaseState::vacant(last_token),
        _ => {
            return Err(StoreError::Corrupt(
                "a lease item with only one of holder and exp".into(),
            ));
        }
    };
    Ok(LeaseState {
        version,
        revoked,
        ended_handoffs,
        ..state
    })
}

/// A versioned item: `lim` 1..=64 (1 only with a queue or a hand-off), `pm` of at most `lim`
/// permits, each token at most the counter, `hv` exactly when a permit carries a hand-off, and
/// its queue, if any.
fn versioned_from_item(
    item: &Item,
    last_token: u64,
    limit: u32,
    version: u64,
    done: Option<Box<Done>>,
) -> Result<LeaseState, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("a semaphore item with {what}"));
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(corrupt(&format!("limit {limit}")));
    }
    let waiters = places_from_item(item)?;
    if item.contains_key("holder") || item.contains_key("exp") {
        return Err(corrupt("a single permit too"));
    }
    let map = match item.get("pm") {
        Some(AttributeValue::M(map)) => map,
        _ => return Err(corrupt("no permit map")),
    };
    let mut permits = Vec::with_capacity(map.len());
    for (holder, permit) in map {
        let AttributeValue::M(permit) = permit else {
            return Err(corrupt("a permit that is not a map"));
        };
        let handoff = match permit.get("v") {
            None => None,
            Some(AttributeValue::M(v)) => Some(handoff_from(v)?),
            Some(_) => return Err(corrupt("a hand-off that is not a map")),
        };
        if holder.is_empty() {
            return Err(corrupt("an empty holder"));
        }
        let session = get_s(permit, "s")?.map(str::to_owned);
        let expires_at: Millis = req_n(permit, "e")?;
        permits.push(Permit {
            handoff,
            value: get_s(permit, "vl")?.map(str::to_owned),
            untaken: (session.is_some() && expires_at != UNTIL_ITS_SESSION_ENDS)
                .then_some(expires_at),
            session,
            ..Permit::new(holder, issued(permit, last_token, "a permit")?, expires_at)
        });
    }
    if permits.len() > limit as usize {
        return Err(corrupt("more permits than its limit"));
    }
    permits.sort_by_key(|p| p.token);
    if permits.windows(2).any(|w| w[0].token == w[1].token) {
        return Err(corrupt("two permits with one token"));
    }
    let state = LeaseState {
        last_token,
        limit,
        version,
        permits,
        waiters,
        done,
        ..LeaseState::default()
    };
    if limit == 1 && !state.is_versioned() {
        return Err(corrupt("limit 1, no queue, no hand-off and no mark"));
    }
    if item.contains_key("hv") != state.has_live_handoff() {
        return Err(corrupt("a hand-off mark that its permits disagree with"));
    }
    Ok(state)
}

/// The queue of a versioned item: at most [`MAX_WAITERS`] places, one per holder.
fn places_from_item(item: &Item) -> Result<Vec<Place>, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("a queue with {what}"));
    let mut waiters: Vec<Place> = Vec::new();
    for place in maps(item, "wq", MAX_WAITERS)? {
        let holder = req_s(place, "h")?;
        let limit: u32 = req_n(place, "l")?;
        if holder.is_empty() || waiters.iter().any(|w| w.holder == holder) {
            return Err(corrupt("an empty or repeated holder"));
        }
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(corrupt("a limit out of range"));
        }
        let ticket = match place.contains_key("k") {
            true => Some(ticket_from(place)?),
            false => None,
        };
        waiters.push(Place {
            holder: holder.to_owned(),
            limit,
            until: req_n::<Millis>(place, "u")?,
            ticket,
            session: get_s(place, "s")?.map(str::to_owned),
            session_ends: None,
            value: get_s(place, "vl")?.map(str::to_owned),
        });
    }
    Ok(waiters)
}
