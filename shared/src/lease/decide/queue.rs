//! The queue of waiters (docs/adr/0007): first come, first served. A freed permit goes to the
//! earliest live place in the write that frees it, and while anyone waits nobody is granted
//! ahead of them. Every write of a versioned resource brings it up to now first ([`as_of`]), so that
//! the permits a release, or a lapse noticed by the next writer, freed are handed on at once.

use crate::clock::Millis;
use crate::lease::model::{
    Handoff, LeaseState, MAX_TOKEN, MAX_WAITERS, PLACE_KEPT_MS, Permit, Place, Ticket,
};
use crate::witness::Witness;

/// What an acquire asks for.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub holder: &'a str,
    pub ttl_ms: i64,
    pub limit: u32,
    /// How long the caller waits in this call from now (0: it does not, unless it has a place;
    /// negative: a wait's round that ran after the wait ended, that long ago).
    pub wait_ms: Millis,
    /// The call, when it has a requestId.
    pub ticket: Option<&'a Ticket>,
    /// The session it acquires in (docs/adr/0010): its place waits in it.
    pub session: Option<&'a str>,
    /// The value of the permit it asks for (docs/adr/0011), also when handed to its place.
    pub value: Option<&'a str>,
}

/// `state` at `now` with its lapsed permits and places dropped and each free permit handed to
/// the earliest live place, in order, under that place's limit: what the next write stores.
/// A handed permit lasts as long as the place would have: its holder, if it is waiting, takes
/// it for its own ttl at once (an acquire by the live holder); if it is between calls, the
/// permit is kept for it until its place's 30 s run out, and no longer (a caller who went away
/// does not hold it for the hour it asked for: found by the attack of 2026-12-03). A permit
/// handed to a place with a ticket carries it until that call takes the permit (docs/adr/0008).
///
/// In time order: a permit that lapsed before `now` goes to the place that was first and live
/// at that moment, and lapses in turn at the place's end, each at its own time. A read between
/// two such moments shows what the write after them stores (they used to be judged all at
/// `now`, so a place that ended in between, as a session's place may at any time, was skipped
/// after a read had shown it handed the token, and the next place was handed the same token:
/// the attack of 2026-12-05).
pub(crate) fn as_of(state: &LeaseState, now: Millis) -> LeaseState {
    let mut after = state.clone();
    // A finished mark past its end is dropped by the first write after it (docs/adr/0012).
    if after.finished(now).is_none() {
        after.done = None;
    }
    loop {
        let next = after
            .permits
            .iter()
            .map(|p| p.expires_at)
            .chain(after.waiters.iter().map(Place::lapses_at))
            .filter(|t| *t <= now)
            .min();
        let at = next.unwrap_or(now);
        after.permits.retain(|p| at < p.expires_at);
        after.waiters.retain(|w| at < w.lapses_at());
        hand_on(&mut after, at);
        if next.is_none() {
            break;
        }
    }
    after.permits.sort_by_key(|p| p.token);
    after
}

/// Hand each free permit of `after` to its earliest place, in order, at `at` (every permit and
/// place in it live then).
fn hand_on(after: &mut LeaseState, at: Millis) {
    while let Some(head) = after.waiters.first() {
        if after.permits.is_empty() {
            after.limit = head.limit;
        }
        let full = after.permits.len() >= after.limit as usize;
        if head.limit != after.limit || full || after.last_token >= MAX_TOKEN {
            break;
        }
        let head = after.waiters.remove(0);
        // A holder with a permit does not wait for another.
        if after.permits.iter().any(|p| p.holder == head.holder) {
            continue;
        }
        after.last_token += 1;
        let ends = head.lapses_at();
        let handoff = head.ticket.map(|ticket| Handoff {
            ticket,
            at,
            expires_at: ends,
        });
        // A place in a session is handed a permit of that session: it ends with the session
        // even if its holder never comes back for it (it used to be a plain permit for 30 s:
        // the attack of 2026-12-05), and lasts as a keepalive moves the session, up to the
        // place's own end.
        after.permits.push(Permit {
            handoff,
            untaken: head.session.is_some().then_some(head.until),
            session: head.session,
            value: head.value,
            ..Permit::new(&head.holder, after.last_token, ends)
        });
    }
}

/// Whether the caller waits in the queue: it asked to, or it has a place already (calling again
/// keeps it, whatever the wait asked for this time).
pub(super) fn waits(current: &LeaseState, asked: &Asked<'_>, now: Millis) -> bool {
    asked.wait_ms > 0 || current.queue_position(asked.holder, now).is_some()
}

/// The live places ahead of the caller's (all of them if it has none).
pub(super) fn ahead(current: &LeaseState, holder: &str, now: Millis) -> usize {
    current
        .live_waiters(now)
        .take_while(|w| w.holder != holder)
        .count()
}

/// The caller's place taken or kept in `current`: lasting until its wait ends and
/// [`PLACE_KEPT_MS`] after, never shortened, and naming the call with a requestId that kept it
/// last (a retry of the same call keeps its ticket as it is). `None` when the queue is full and it has none.
pub(super) fn keep_place(
    current: &LeaseState,
    asked: &Asked<'_>,
    now: Millis,
) -> Option<LeaseState> {
    let mut after = current.clone();
    let until = now + asked.wait_ms + PLACE_KEPT_MS;
    let full = after.waiters.len() >= MAX_WAITERS;
    match after.waiters.iter_mut().find(|w| w.holder == asked.holder) {
        Some(place) => {
            place.until = place.until.max(until);
            place.session = asked.session.map(str::to_owned);
            place.value = asked.value.map(str::to_owned);
            // A call without a requestId cannot be answered twice, so it leaves the ticket of
            // the call before it (found by the attack of 2026-12-03, round 3).
            if let Some(ticket) = asked.ticket
                && place.ticket.as_ref().map(|t| &t.key) != Some(&ticket.key)
            {
                place.ticket = Some(ticket.clone());
            }
        }
        None if full => return None,
        None => after.waiters.push(Place {
            holder: asked.holder.to_owned(),
            limit: asked.limit,
            until,
            ticket: asked.ticket.cloned(),
            session: asked.session.map(str::to_owned),
            session_ends: None,
            value: asked.value.map(str::to_owned),
        }),
    }
    Some(after)
}

/// Live places are ahead of the caller.
pub(super) fn waiters_ahead(ahead: usize) -> Witness {
    Witness::new(
        "WAITERS_AHEAD",
        "/resource",
        "callers waiting before you are served first; wait with waitSeconds to keep a place",
    )
    .expected("no live waiters ahead")
    .actual(ahead)
}

/// The queue has no room for another place.
pub(super) fn queue_full() -> Witness {
    Witness::new(
        "QUEUE_FULL",
        "/waitSeconds",
        format!("{MAX_WAITERS} callers wait for this resource already; try again later"),
    )
    .expected(format!("fewer than {MAX_WAITERS} waiters"))
}
