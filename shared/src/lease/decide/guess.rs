//! What is known of an op before anything is read: the guess a write is first tried on (this
//! process's view of the lease, or nothing), which the store's guard confirms or refuses.

use super::{
    Acquired, Asked, Guard, HolderOp, Write, acquire, ended_handoff, holder_write, single, take,
};
use crate::clock::Millis;
use crate::lease::model::LeaseState;
use crate::lease::request::Command;
use crate::witness::Witness;

/// The write to try first, without reading: the one that succeeds in the common case (acquire of a
/// free resource, renew or release by the holder). If its guard fails, the store returns the old
/// item and `decide` on it says what to do instead. A semaphore's acquire has none: its write is
/// guarded on the state it read.
pub fn guess_unseen(command: &Command, now: Millis) -> Option<Write> {
    match (Asked::of(command), HolderOp::of(command)) {
        (Some(asked), _) => guess_unseen_acquire(&asked, now),
        (None, Some(op)) => holder_write(op, now),
        (None, None) => None,
    }
}

/// [`guess_unseen`] for an acquire: a single permit's take, guarded on a vacant lease.
pub fn guess_unseen_acquire(asked: &Asked<'_>, now: Millis) -> Option<Write> {
    (asked.limit == 1).then(|| take(Guard::Vacant, asked.holder, now + asked.ttl_ms))
}

/// What `decide` would do on `view`, the last sight of the lease this process has (the empty
/// lease when it has none), known before anything is sent: a write whose outcome is known
/// before it commits ([`Write::outcome`]), or an acquire's denial. A wrong view costs a failed
/// guard, never a wrong write or answer: the store confirms it.
#[derive(Debug, Clone, PartialEq)]
pub enum Guess {
    /// A renew or release (its guard pins holder and token, so it needs no view), or the
    /// single-permit write an acquire would make. A versioned write (a queue's, a semaphore's)
    /// is decided on a read: it replaces every permit.
    Write(Write),
    /// An acquire's denial, with the guard that the lease is still as the view shows it:
    /// committed together with the denial's record, the guard is the store's confirmation, so
    /// the denial needs no read first (one round trip, not two). A view that is stale fails the
    /// guard, and the acquire is decided on what the store hands back.
    Denial {
        unchanged: Guard,
        witnesses: Vec<Witness>,
    },
}

/// What `command` would do on `view` (see [`Guess`]), if that is known without a read.
pub fn guess(view: &LeaseState, command: &Command, now: Millis) -> Option<Guess> {
    match (Asked::of(command), HolderOp::of(command)) {
        (Some(asked), _) => guess_acquire(view, &asked, now),
        (None, Some(op)) => holder_write(op, now).map(Guess::Write),
        (None, None) => None,
    }
}

/// [`guess`] for an acquire.
pub fn guess_acquire(view: &LeaseState, asked: &Asked<'_>, now: Millis) -> Option<Guess> {
    if ended_handoff(view, asked, now).is_some() {
        return None;
    }
    match acquire(view, asked, now) {
        Acquired::Write(write)
            if asked.limit == 1 && !matches!(write.guard, Guard::Version { .. }) =>
        {
            Some(Guess::Write(write))
        }
        Acquired::Deny(witnesses) => Some(Guess::Denial {
            unchanged: unchanged(view),
            witnesses,
        }),
        Acquired::Write(_) | Acquired::Queue { .. } | Acquired::Refuse { .. } => None,
    }
}

/// The write to try first (see [`Guess::Write`]), planned on `view`.
pub fn guessed_write(view: &LeaseState, command: &Command, now: Millis) -> Option<Write> {
    match guess(view, command, now)? {
        Guess::Write(write) => Some(write),
        Guess::Denial { .. } => None,
    }
}

/// The guard that `state` is unchanged: its counter, its version and a single permit's expiry
/// pin it (each write changes one of them).
pub fn unchanged(state: &LeaseState) -> Guard {
    Guard::Version {
        last_token: state.last_token,
        version: state.version,
        single_expiry: single(state),
    }
}
