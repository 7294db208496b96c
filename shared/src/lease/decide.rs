//! The lease rules as one pure function: `decide(state, command, now)`.
//!
//! A granted mutation is expressed as a [`Write`]: a [`Guard`] (what must still be true of the
//! stored lease) and an [`Effect`] (what to change). The store turns the guard into a DynamoDB
//! condition expression, so a write commits only if the state it was decided on still stands.
//! Invariant, tested below over every small state: whenever `decide` returns a write, its guard
//! holds on the state it was decided from, and the guard of [`guess_unseen`] holds on a state exactly
//! when `decide` grants that state the same effect. That is what lets the common path skip the read.

use super::model::{Done, EndedHandoff, LeaseState, MAX_TOKEN, Permit};
use super::request::Command;
use crate::clock::Millis;
use crate::witness::Witness;
use serde_json::json;

/// What must hold of the stored lease, at `now`, for a write to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// Nobody holds a live permit, nobody waits, and the token space is not exhausted. Used
    /// without a prior read.
    Vacant,
    /// Nobody holds a live permit, nobody waits, and the counter is exactly `last_token` (the
    /// state that was read), below the ceiling: no guard lets a take issue a token past it.
    VacantAt { last_token: u64 },
    /// `holder` holds a live lease with `token`.
    HeldBy { holder: String, token: u64 },
    /// The resource is exactly as read: its counter at `last_token`, its version at `version`,
    /// and its single permit (a lease's, whose writes need no read and bump no version) expiring
    /// at `single_expiry`, or absent (`None`). A read-modify-write of a semaphore or a queue:
    /// DynamoDB cannot count a map's live entries in a condition, so the write is guarded on the
    /// state it was decided on. Every write of a single permit changes its expiry or the counter
    /// (or removes it), so pinning both pins the lease.
    Version {
        last_token: u64,
        version: u64,
        single_expiry: Option<Millis>,
    },
}

/// The change a granted write makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Issue the next token to `holder`, held until `expires_at`.
    Take { holder: String, expires_at: Millis },
    /// Same holder and token, new expiry.
    Extend { expires_at: Millis },
    /// Nobody holds it afterwards; the counter stays.
    Clear,
    /// The semaphore becomes exactly this state (its permits, limit, counter and version).
    Replace(LeaseState),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub guard: Guard,
    pub effect: Effect,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Granted, provided `Write` commits with its guard still holding.
    Write(Write),
    /// A rule stopped it: one witness per broken rule.
    Deny(Vec<Witness>),
    /// Not granted yet (why, in `witnesses`): the caller waits in the queue. With a write when
    /// the stored state needs one: it takes or keeps the caller's place, and hands on permits
    /// freed since the last write. The answer is the state it leaves.
    Queue {
        write: Option<Write>,
        witnesses: Vec<Witness>,
    },
    /// A rule stopped it, as `Deny`, and the stored state needs a write all the same: the
    /// hand-off of permits freed since the last write (a lapse nobody wrote yet), so that what
    /// the refusal cites is what the store holds (docs/adr/0008). The caller does not wait.
    Refuse {
        write: Write,
        witnesses: Vec<Witness>,
    },
    /// Nothing to change (get): answer with the state as it is.
    Observe,
    /// The acquire's call was handed this grant between its calls, and it ended before the call
    /// came back: the retry is answered that grant (replayed), nothing written.
    EndedHandoff(EndedHandoff),
}

impl Guard {
    /// Whether the guard holds of `state` at `now`: the same predicate the store's condition
    /// expression evaluates inside DynamoDB.
    pub fn holds(&self, state: &LeaseState, now: Millis) -> bool {
        match self {
            Guard::Vacant => state.is_free(now) && state.last_token < MAX_TOKEN,
            Guard::VacantAt { last_token } => {
                state.is_free(now) && state.last_token == *last_token && *last_token < MAX_TOKEN
            }
            // A single permit: a semaphore's or a queue's permits are not where this guard looks.
            Guard::HeldBy { holder, token } => {
                !state.is_versioned()
                    && state
                        .live(now)
                        .is_some_and(|l| l.holder == holder && l.token == *token)
            }
            Guard::Version {
                last_token,
                version,
                single_expiry,
            } => {
                state.last_token == *last_token
                    && state.version == *version
                    && single(state) == *single_expiry
            }
        }
    }
}

/// The expiry of a lease's single permit, as the store keeps it (`None`: no single permit, or
/// the resource is versioned and keeps its permits in a map).
pub(crate) fn single(state: &LeaseState) -> Option<Millis> {
    match state.is_versioned() {
        true => None,
        false => state.permits.first().map(|p| p.expires_at),
    }
}

impl Effect {
    /// The state after this effect is applied to `state` (a lease: its one permit).
    pub fn apply(&self, state: &LeaseState) -> LeaseState {
        // A lease's writes leave the version as it is (it counts a semaphore's writes), and
        // the revoked and handed permits (the store's take, extend and clear leave them).
        let keep_version = |after: LeaseState| LeaseState {
            version: state.version,
            revoked: state.revoked.clone(),
            ended_handoffs: state.ended_handoffs.clone(),
            ..after
        };
        match self {
            Effect::Take { holder, expires_at } => keep_version(LeaseState::granted(
                state.last_token + 1,
                holder,
                *expires_at,
            )),
            Effect::Extend { expires_at } => {
                let mut after = state.clone();
                if let Some(permit) = after.permits.iter_mut().max_by_key(|p| p.token) {
                    permit.expires_at = *expires_at;
                }
                after
            }
            Effect::Clear => keep_version(LeaseState::vacant(state.last_token)),
            Effect::Replace(after) => after.clone(),
        }
    }
}

impl Effect {
    /// Whether the holder keeps its token (a renew, or a re-acquire by the live holder).
    pub fn keeps_token(&self) -> bool {
        matches!(self, Effect::Extend { .. })
    }
}

impl Write {
    /// Whether `state` is one this write leaves: how a retried write tells its own earlier
    /// attempt, committed with its answer lost, from another writer's change. Each effect leaves
    /// a mark no other holder's write can: a take or extend sets this holder and this exact
    /// expiry (ms); a release clears the lease at the very token it held; a replace leaves its
    /// version, which only it can have written (versions grow by one a write).
    pub fn shows_in(&self, state: &LeaseState) -> bool {
        let latest = state.latest();
        match (&self.effect, &self.guard) {
            (Effect::Take { holder, expires_at }, _) => {
                latest.is_some_and(|p| &p.holder == holder && p.expires_at == *expires_at)
            }
            (Effect::Extend { expires_at }, Guard::HeldBy { holder, token }) => {
                latest.is_some_and(|p| {
                    &p.holder == holder && p.token == *token && p.expires_at == *expires_at
                }) && state.last_token == *token
            }
            (Effect::Clear, Guard::HeldBy { token, .. }) => {
                state.permits.is_empty() && state.last_token == *token
            }
            (Effect::Replace(after), _) => state == after,
            // No write extends or clears a lease without naming its holder.
            (Effect::Extend { .. } | Effect::Clear, _) => false,
        }
    }

    /// The state this write leaves, known from its guard alone when the guard pins the counter
    /// (every guard but `Vacant`): what lets an answer and its record commit in the same
    /// transaction as the write, with no read before it.
    pub fn outcome(&self) -> Option<LeaseState> {
        let pinned = match &self.guard {
            Guard::Vacant => return None,
            Guard::VacantAt { last_token } => LeaseState::vacant(*last_token),
            // Its expiry is what the effect sets (extend) or drops (clear).
            Guard::HeldBy { holder, token } => LeaseState::granted(*token, holder, 0),
            // A replace says the whole state; a version guard is paired with nothing else.
            Guard::Version { .. } => match &self.effect {
                Effect::Replace(after) => return Some(after.clone()),
                _ => return None,
            },
        };
        Some(self.effect.apply(&pinned))
    }
}

/// `write`, decided on `before`, with `change` made to each permit of `holder`'s that it leaves
/// (given the permit `before` had with the same token, if any). Unchanged if that changes
/// nothing; else a version-guarded replace of the whole item (a lease's take or extend becomes
/// one): how a permit carries what a lease's own attributes cannot, a session (docs/adr/0010) or
/// a value (docs/adr/0011).
pub fn with_holders_permits(
    before: &LeaseState,
    write: Write,
    holder: &str,
    mut change: impl FnMut(Option<&Permit>, &mut Permit),
) -> Write {
    let decided = write.effect.apply(before);
    let mut after = decided.clone();
    for permit in after.permits.iter_mut().filter(|p| p.holder == holder) {
        let had = before.permits.iter().find(|p| p.token == permit.token);
        change(had, permit);
    }
    if after == decided {
        return write;
    }
    match write.effect {
        Effect::Replace(_) => Write {
            guard: write.guard,
            effect: Effect::Replace(after),
        },
        _ => {
            after.version = before.version + 1;
            Write {
                guard: Guard::Version {
                    last_token: before.last_token,
                    version: before.version,
                    single_expiry: single(before),
                },
                effect: Effect::Replace(after),
            }
        }
    }
}

/// Issue the next token to `holder` if `guard` holds.
fn take(guard: Guard, holder: &str, expires_at: Millis) -> Write {
    Write {
        guard,
        effect: Effect::Take {
            holder: holder.to_owned(),
            expires_at,
        },
    }
}

/// The write of a renew or release by the live holder of a lease: the same whether decided on a
/// read state or guessed unseen. None for a done release: it carries the mark, which only a
/// replace of the state as read can (docs/adr/0012).
pub fn holder_write(op: HolderOp<'_>, now: Millis) -> Option<Write> {
    let guard = Guard::HeldBy {
        holder: op.holder().to_owned(),
        token: op.token(),
    };
    let effect = match op {
        HolderOp::Renew { ttl_ms, .. } => Effect::Extend {
            expires_at: now + ttl_ms,
        },
        HolderOp::Release { done: None, .. } => Effect::Clear,
        HolderOp::Release { done: Some(_), .. } => return None,
    };
    Some(Write { guard, effect })
}

/// The stored `state` as the next write will see it at `now`: lapsed permits gone, and the
/// permits they freed handed to the earliest live places. What a read answers, so that `get`,
/// `check` and `list` say what the next acquire finds (before, they said nobody held a permit
/// that was kept for a waiter between its calls: the attack of 2026-12-03, round 4).
pub fn as_of(state: &LeaseState, now: Millis) -> LeaseState {
    queue::as_of(state, now)
}

/// Decide `command` against the stored `state` at server time `now`: every rule, for every op.
/// The service asks the function of the op's family instead ([`acquire`] after [`ended_handoff`],
/// [`hold`], [`revoke`]), whose decision has only the outcomes that family can have.
pub fn decide(state: &LeaseState, command: &Command, now: Millis) -> Decision {
    if let Some(asked) = Asked::of(command) {
        return match ended_handoff(state, &asked, now) {
            Some(handed) => Decision::EndedHandoff(handed),
            None => acquire(state, &asked, now).into(),
        };
    }
    if let Some(op) = HolderOp::of(command) {
        return hold(state, op, now).into();
    }
    match command {
        Command::Revoke { holder, token } => revoke(state, holder.as_deref(), *token, now).into(),
        Command::Reopen { holder, token } => match reopen(state, finisher(holder, *token), now) {
            Reopening::End(write, _) => Decision::Write(write),
            Reopening::Deny(witnesses) => Decision::Deny(witnesses),
        },
        _ => Decision::Observe,
    }
}

/// The retry of a call that was handed a grant which has ended since: that grant, once
/// (docs/adr/0008), before anything the resource says now. Only a call with a requestId has a
/// ticket to be handed anything.
pub fn ended_handoff(state: &LeaseState, asked: &Asked<'_>, now: Millis) -> Option<EndedHandoff> {
    handed_to_call(state, asked, now).filter(|h| !state.was_revoked(&h.holder, h.token))
}

/// The grant handed to this call (by its ticket) that has ended since, however it ended.
fn handed_to_call(state: &LeaseState, asked: &Asked<'_>, now: Millis) -> Option<EndedHandoff> {
    asked
        .ticket
        .and_then(|t| state.ended_handoff_of(t, asked.holder, now))
}

/// A renew or a release on the stored `state`.
pub fn hold(state: &LeaseState, op: HolderOp<'_>, now: Millis) -> Held {
    let (holder, token) = (op.holder(), op.token());
    // Before any other reason: an operator ended this very permit. A refusal writes the
    // hand-off its read noticed, as an acquire's does (found by the attack of 2026-12-03,
    // round 3: a late renew or release left a lapsed permit unhanded).
    if state.was_revoked(holder, token) {
        return semaphore::refusal(
            state,
            vec![
                Witness::new(
                    "REVOKED",
                    "/token",
                    "an operator revoked this permit (see op audit); acquire again for a new token",
                )
                .expected("a live permit")
                .actual(token),
            ],
            now,
        )
        .into();
    }
    // A finished resource stays as its finisher marked it: another holder's done release (a
    // semaphore's other permit) must not replace the mark, shorten it or take its reopen from
    // its finisher (the attack of 2026-12-06). Refused, nothing changed: a plain release ends
    // that permit.
    if let (HolderOp::Release { done: Some(_), .. }, Some(done)) = (op, state.finished(now)) {
        return semaphore::refusal(state, vec![finished(done)], now).into();
    }
    // The caller's live permit, and its write; or why it has none.
    // A lease's renew or release is its holder's guarded write; a versioned resource's, and a
    // done release (whose mark makes it versioned, docs/adr/0012), a replace of it as read.
    let unseen = holder_write(op, now).filter(|_| !state.is_versioned());
    let witnesses = match unseen {
        Some(write) => match holder_mismatches(state, holder, token, now) {
            None => return Held::Write(write),
            Some(witnesses) => witnesses,
        },
        None => match semaphore::mismatches(state, holder, token, now) {
            Ok(mine) => return Held::Write(semaphore::holder_write(state, op, mine, now)),
            Err(witnesses) => witnesses,
        },
    };
    let witnesses = match op {
        // Release reports every failure as NO_HOLD, with the reason in the detail.
        HolderOp::Release { .. } => vec![Witness::new(
            "NO_HOLD",
            "/token",
            format!(
                "you hold no live lease with this token: {}",
                witnesses
                    .iter()
                    .map(|w| w.detail.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )],
        HolderOp::Renew { .. } => witnesses,
    };
    semaphore::refusal(state, witnesses, now).into()
}

/// A revoke (docs/adr/0008) on the stored `state`: `holder`'s live permit (the one with `token`,
/// when given), or every live permit when neither is named.
pub fn revoke(
    state: &LeaseState,
    holder: Option<&str>,
    token: Option<u64>,
    now: Millis,
) -> Revocation {
    semaphore::revoke(state, holder, token, now)
}

/// The finisher a reopen names: its holder with its token, both or neither (a holder without
/// a token names no mark: the schema lets an admin send either alone, and a mark is only ever
/// named by both).
pub fn finisher(holder: &Option<String>, token: Option<u64>) -> Option<(&str, u64)> {
    holder.as_deref().zip(token)
}

/// A reopen's decision (docs/adr/0012).
#[derive(Debug, Clone, PartialEq)]
pub enum Reopening {
    /// The mark ends in this write; the one it ended.
    End(Write, Box<Done>),
    /// Nothing to reopen, or not the mark named.
    Deny(Vec<Witness>),
}

/// Whether the caller that names itself `finisher` (holder, and the token it finished with)
/// finished the resource whose stored state is `state`: who may reopen it without being an
/// admin. No one may while it is not finished (there is nothing of theirs to reopen).
pub fn finished_by(state: &LeaseState, finisher: Option<(&str, u64)>, now: Millis) -> bool {
    state
        .finished(now)
        .zip(finisher)
        .is_some_and(|(done, (holder, token))| done.holder == holder && done.token == token)
}

/// A reopen of the stored `state` (docs/adr/0012), by a caller allowed to (its finisher, see
/// [`finished_by`], or an admin): its live mark ends now, when it is the one `finisher` names
/// (any, when none is named); the counter stays, so the next grant's token is larger than every
/// one before.
pub fn reopen(state: &LeaseState, finisher: Option<(&str, u64)>, now: Millis) -> Reopening {
    let Some(done) = state.finished(now) else {
        return Reopening::Deny(vec![
            Witness::new(
                "NOT_DONE",
                "/resource",
                "the resource is not finished: nothing to reopen",
            )
            .expected("a finished resource"),
        ]);
    };
    if finisher.is_some() && !finished_by(state, finisher, now) {
        return Reopening::Deny(vec![
            Witness::new(
                "NOT_DONE",
                "/token",
                "the resource was not finished by this holder with this token",
            )
            .expected(json!({"holder": done.holder, "fencingToken": done.token}))
            .actual(json!({
                "holder": finisher.map(|f| f.0),
                "fencingToken": finisher.map(|f| f.1),
            })),
        ]);
    }
    let mut after = state.clone();
    after.done = None;
    Reopening::End(
        semaphore::replace(state, after, now),
        Box::new(done.clone()),
    )
}

/// An acquire on the stored `state` (after [`ended_handoff`], for a call with a ticket). A lease (limit
/// 1, nobody waiting) is decided here, with writes that need no read; a semaphore, a resource
/// with a queue, and a caller who would wait for a held lease, by the read-modify-write rules of
/// [`semaphore`] and [`queue`].
pub fn acquire(state: &LeaseState, asked: &Asked<'_>, now: Millis) -> Acquired {
    // The retry of a call whose handed permit an operator revoked before it came back: told
    // so, not that it holds the lease (a replay must not claim what is no longer true of the
    // permit it describes: the attack of 2026-12-05). Its record keeps this answer, so every
    // retry of the call is told the same.
    if let Some(revoked) =
        handed_to_call(state, asked, now).filter(|h| state.was_revoked(&h.holder, h.token))
    {
        let witness = Witness::new(
            "REVOKED",
            "/requestId",
            "an operator revoked the permit handed to this call before it came back for it (see op audit); acquire with a new requestId for a new lease",
        )
        .expected("a live permit")
        .actual(revoked.token);
        return semaphore::refusal(state, vec![witness], now).into();
    }
    // Finished work stays finished (docs/adr/0012): every acquire is refused at once, a waiting
    // one too (there is nothing to wait for until someone reopens it).
    if let Some(done) = state.finished(now) {
        return semaphore::refusal(state, vec![finished(done)], now).into();
    }
    // A versioned resource that nobody holds or waits for is taken as a lease is: one write,
    // which stores it as a lease again (not one whose hand-off must be remembered first). Not
    // one with a session's permit, even lapsed: its item says it lives until its session ends
    // (docs/adr/0010), so only a write guarded on its version, as read, can take it.
    let versioned_in_use =
        state.is_versioned() && (!state.is_free(now) || state.has_session_permit());
    if asked.limit > 1 || versioned_in_use {
        return semaphore::acquire(state, asked, now);
    }
    match decide_lease_acquire(state, asked, now) {
        Acquired::Deny(_) if asked.wait_ms > 0 => semaphore::acquire(state, asked, now),
        lease => lease,
    }
}

/// The caller's limit differs from that of the live permits `live` were granted under.
fn limit_mismatch(state: &LeaseState, limit: u32, now: Millis) -> Option<Witness> {
    let live = state.live_permits(now);
    (!live.is_empty() && state.limit != limit).then(|| {
        Witness::new(
            "LIMIT_MISMATCH",
            "/limit",
            "the resource's live permits were granted under another limit; state the same one",
        )
        .expected(state.limit)
        .actual(limit)
    })
}

/// An acquire of a lease that nobody waits for.
fn decide_lease_acquire(state: &LeaseState, asked: &Asked<'_>, now: Millis) -> Acquired {
    if let Some(mismatch) = limit_mismatch(state, asked.limit, now) {
        return Acquired::Deny(vec![mismatch]);
    }
    let (holder, expires_at) = (asked.holder, now + asked.ttl_ms);
    match state.live(now) {
        // Re-acquire by the live holder: same token, expiry moves to now + ttl.
        Some(l) if l.holder == holder => Acquired::Write(Write {
            guard: Guard::HeldBy {
                holder: holder.to_owned(),
                token: l.token,
            },
            effect: Effect::Extend { expires_at },
        }),
        // A lease (not versioned) keeps only the permit that is live here.
        Some(_) => Acquired::Deny(vec![semaphore::held(state, 1)]),
        None if state.last_token >= MAX_TOKEN => Acquired::Deny(vec![exhausted(state)]),
        None => Acquired::Write(take(
            Guard::VacantAt {
                last_token: state.last_token,
            },
            holder,
            expires_at,
        )),
    }
}

/// The resource is finished (docs/adr/0012): who finished it, with which token, when, and its
/// result.
pub fn finished(done: &Done) -> Witness {
    Witness::new(
        "DONE",
        "/resource",
        "this resource is finished: its work is done; it is not granted again until the mark ends or someone reopens it",
    )
    .expected("an unfinished resource")
    .actual(json!({
        "holder": done.holder,
        "fencingToken": done.token,
        "doneAt": crate::clock::iso8601(done.at),
        "result": done.result,
    }))
}

/// Every token below the ceiling has been issued.
fn exhausted(state: &LeaseState) -> Witness {
    Witness::new(
        "TOKEN_EXHAUSTED",
        "/resource",
        "this resource has issued every fencing token below 2^53; use another name",
    )
    .actual(state.last_token)
}

/// Why `holder` with `token` does not hold the live lease (`None` when it does).
fn holder_mismatches(
    state: &LeaseState,
    holder: &str,
    token: u64,
    now: Millis,
) -> Option<Vec<Witness>> {
    let Some(l) = state.live(now) else {
        let lapsed = state
            .latest()
            .filter(|p| p.holder == holder && p.token == token && state.last_token == token);
        return Some(vec![match lapsed {
            Some(lapsed) => expired(lapsed),
            None => Witness::new("NO_HOLD", "/resource", "nobody holds this lease")
                .expected("a live lease"),
        }]);
    };
    let mut witnesses = Vec::new();
    if l.holder != holder {
        witnesses.push(
            Witness::new("NOT_HOLDER", "/holder", "another holder has this lease")
                .expected(l.holder)
                .actual(holder),
        );
    }
    if l.token != token {
        witnesses.push(token_mismatch(l.token, token));
    }
    (!witnesses.is_empty()).then_some(witnesses)
}

/// The caller's permit lapsed.
fn expired(lapsed: &super::model::Permit) -> Witness {
    Witness::new(
        "LEASE_EXPIRED",
        "/token",
        "your lease lapsed; acquire it again for a new token",
    )
    .expected("a live lease")
    .actual(json!({"expiredAt": crate::clock::iso8601(lapsed.expires_at)}))
}

/// The caller's live permit has another token.
fn token_mismatch(live: u64, token: u64) -> Witness {
    Witness::new(
        "TOKEN_MISMATCH",
        "/token",
        "the token is not the live lease's token",
    )
    .expected(live)
    .actual(token)
}

mod families;
mod guess;
mod queue;
mod semaphore;

use families::Refusal;
pub use families::{Acquired, Finish, Held, HolderOp, Revocation};
pub use guess::{
    Guess, guess, guess_acquire, guess_unseen, guess_unseen_acquire, guessed_write, unchanged,
};
pub use queue::Asked;
pub(crate) use semaphore::handoffs_due;
pub(crate) use semaphore::withdraw;

#[cfg(test)]
mod tests;
