//! Applies a validated lease request for a tenant: the rules from `decide`, the writes through the
//! store, and idempotency for requests that carry a requestId.
//!
//! Without requestId, a mutation is one optimistic guarded write; if the guard fails, the old item
//! that comes back is decided on, which either denies or names the one write that can still grant
//! (re-acquire by the holder). With requestId, the answer is committed with its record in one
//! transaction, its write guarded by the state it was decided on: first with no read, when the
//! write's outcome is known before it commits (renew, release; an acquire on a current view),
//! then on the lease a cancelled transaction hands back, and only when none came back on a read.
//! A concurrent change sends it round again. Both loops are bounded.
//!
//! The view is this process's last sight of each lease: a guess that picks the first write, never
//! a source of an answer. Every write is guarded, so a stale view costs one more try.
//!
//! `now` is read once per request, before any store call, and every condition and answer uses it.
//! If the request stalls, `now` is earlier than the real time: a lease judged lapsed then is lapsed
//! now too, so a stale `now` can only deny or grant a shorter lease, never grant one still held.

use super::cursor::{Cursors, Paged};
use crate::clock::Millis;
use crate::lease::decide::{
    Decision, Foreseen, Write, decide, foresee, hand_on, optimistic, planned, settled,
};
use crate::lease::request::MissingField;
use crate::lease::{Command, Guard, LeaseAnswer, LeaseRequest, LeaseState};
use crate::provenance::Issuer;
use crate::provenance::answer::{Subject, provenance};
use crate::store::audit_log::AuditPosition;
use crate::store::{
    Applied, Committed, LeaseKey, LeaseStore, RecordKey, SetCommitted, StoreError, StoredRecord,
};
use crate::tenant::Tenant;
use crate::witness::Witness;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The route every lease answer is signed for.
pub const ROUTE: &str = "POST /api/v1/lease";

pub use crate::lease::REPLAY_WINDOW_MS;

/// Who carries out a request: its tenant, and who acts in it (a revoke's audit names them): an
/// API key as `key:<key id>`, a paying wallet as its tenant.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub tenant: &'a Tenant,
    pub id: &'a str,
}

/// Rounds before giving up on a lease that keeps changing under us. Each round past the first
/// two means another writer committed in between: on a semaphore, where every permit's write
/// goes through the one version, that is many clients at once, so lost rounds back off (see
/// [`back_off`]) and there are enough of them for some 60 writers arriving together.
const MAX_ROUNDS: usize = 64;

/// The largest answer a request record keeps: DynamoDB's 400 KB item limit, less room for the
/// record's other attributes.
pub const MAX_KEPT_ANSWER_BYTES: usize = 380 * 1024;

/// Before round `round` of a write that lost races: nothing for the first two rounds (the
/// guessed write, then the one decided on the item it handed back), then a random pause of up
/// to 1, 2, 4 ... 32 ms, so that writers who collided spread out instead of colliding again.
/// Without it, 30 clients acquiring one semaphore at once ran out of rounds (found by the
/// attack of 2026-12-02).
async fn back_off(round: usize) {
    if round < 2 {
        return;
    }
    let ceiling_ms = 1u64 << (round - 2).min(5);
    let mut random = [0u8; 2];
    // Without randomness, the full pause: still spreads writers that took different rounds.
    let fraction = match getrandom::fill(&mut random) {
        Ok(()) => u64::from(u16::from_le_bytes(random)),
        Err(_) => u64::from(u16::MAX),
    };
    let micros = ceiling_ms * 1000 * fraction / u64::from(u16::MAX);
    tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("requestId was used before with different input")]
    IdempotencyConflict,
    #[error("{0} is required for this op")]
    Missing(&'static str),
    #[error("the lease kept changing; retry with the same requestId")]
    Contention,
    /// A list or audit cursor this service did not seal for this tenant and op.
    #[error("cursor is not one this service gave this tenant for this op")]
    BadCursor,
    /// The answer is too large to keep for its requestId (in bytes): nothing was written.
    #[error("an answer of {0} bytes is too large to keep for a requestId")]
    TooLargeToKeep(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Our own failure (an answer that would not serialize): the details are for the log.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Our own answer would not serialize.
fn unserializable(err: serde_json::Error) -> LeaseError {
    LeaseError::Internal(format!("a lease answer would not serialize: {err}"))
}

impl From<MissingField> for LeaseError {
    fn from(m: MissingField) -> Self {
        Self::Missing(m.0)
    }
}

/// An answer as sent: `{"data": ..., "_provenance": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedAnswer {
    pub data: LeaseAnswer,
    #[serde(rename = "_provenance")]
    pub provenance: Value,
}

#[derive(Clone)]
pub struct LeaseService {
    store: LeaseStore,
    issuer: Issuer,
    cursors: Cursors,
    views: Views,
    waits: super::waiting::Waits,
}

/// What one try of a request with requestId commits: its answer, and the write (with the state
/// it leaves) if it has one. A queued caller's write (its place) is committed without the
/// record: a retry resumes the place, and only a grant or a denial is kept for replays.
struct Plan {
    answer: LeaseAnswer,
    /// The write, if any; the state the answer shows (the one the write leaves).
    write: Option<Write>,
    shown: LeaseState,
    queued: bool,
    /// When the answer is signed as of, if not now: a grant handed to the call earlier.
    signed_at: Option<Millis>,
    /// Whether it was decided on the store's state (a read, or the item a failed guard handed
    /// back), not on this process's view: only then may it answer a waiting call's place.
    on_store: bool,
    /// A denial decided on this process's view: the guard that the lease is still as the view
    /// shows it, committed with the record instead of a read before it.
    unchanged: Option<Guard>,
}

impl Plan {
    /// The plan `decide` makes on `state`, the lease as the store last showed it.
    fn decided(state: &LeaseState, command: &Command, request: &LeaseRequest, now: Millis) -> Self {
        let (op, holder) = (request.op, caller(request));
        // What the answer shows: the state the write leaves, or the state as read.
        let (write, waits, witnesses) = match decide(state, command, now) {
            Decision::Write(write) => (Some(write), false, None),
            Decision::Deny(witnesses) => (None, false, Some(witnesses)),
            Decision::Queue { write, witnesses } => (write, true, Some(witnesses)),
            Decision::Refuse { write, witnesses } => (Some(write), false, Some(witnesses)),
            Decision::Observe => {
                return Self {
                    answer: observation(state, command, request, now),
                    write: None,
                    shown: state.clone(),
                    queued: false,
                    signed_at: None,
                    on_store: true,
                    unchanged: None,
                };
            }
            Decision::Handed(handed) => {
                return Self {
                    answer: LeaseAnswer::handed(op, &handed),
                    write: None,
                    shown: state.clone(),
                    queued: false,
                    signed_at: Some(handed.handoff.at),
                    on_store: true,
                    unchanged: None,
                };
            }
        };
        let shown = write
            .as_ref()
            .map_or_else(|| state.clone(), |w| w.effect.apply(state));
        let queued = waits && holder.is_some_and(|h| shown.queue_position(h, now).is_some());
        let answer = match witnesses {
            None => LeaseAnswer::granted(op, &shown, holder, now),
            Some(witnesses) => LeaseAnswer::denied(op, &shown, holder, now, witnesses),
        };
        Self {
            answer,
            write,
            shown,
            queued,
            signed_at: None,
            on_store: true,
            unchanged: None,
        }
    }
}

/// A write to try, and what it answers once committed: a grant, or (`queued`) a denial with
/// why, the caller's place when it `waits`.
struct Pending {
    write: Write,
    queued: Option<Vec<Witness>>,
    waits: bool,
}

impl Pending {
    fn answer(
        self,
        op: crate::lease::Op,
        after: &LeaseState,
        caller: Option<&str>,
        now: Millis,
    ) -> LeaseAnswer {
        match self.queued {
            None => LeaseAnswer::granted(op, after, caller, now),
            Some(witnesses) => LeaseAnswer::denied(op, after, caller, now, witnesses),
        }
    }
}

/// The holder a request speaks for: whose permit its answer shows first.
fn caller(request: &LeaseRequest) -> Option<&str> {
    request.holder.as_deref()
}

/// The answer of a read for `request`: `get` shows the resource (the caller's permit first),
/// `check` whether a token is current.
fn observation(
    state: &LeaseState,
    command: &Command,
    request: &LeaseRequest,
    now: Millis,
) -> LeaseAnswer {
    let state = &settled(state, now);
    match command {
        Command::Check { token, holder } => {
            LeaseAnswer::checked(state, *token, holder.as_deref(), now)
        }
        _ => LeaseAnswer::observed(state, caller(request), now),
    }
}

/// The last sight of each lease this process has had, to plan a write with no read. Only a
/// guess: a write planned on it is guarded, so a stale view (another Lambda container wrote
/// since) costs one cancelled try, whose item comes back, and never a wrong answer. Bounded:
/// forgotten all at once when full.
#[derive(Clone, Default)]
struct Views(Arc<Mutex<HashMap<LeaseKey, LeaseState>>>);

/// Leases a process keeps a view of, at most (each some 200 bytes).
const MAX_VIEWS: usize = 16_384;

impl Views {
    fn get(&self, key: &LeaseKey) -> Option<LeaseState> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: &LeaseKey, state: &LeaseState) {
        if let Ok(mut views) = self.0.lock() {
            if views.len() >= MAX_VIEWS && !views.contains_key(key) {
                views.clear();
            }
            views.insert(key.clone(), state.clone());
        }
    }
}

/// What a request is, for signing: its op and the SHA-256 of its canonical body.
#[derive(Clone, Copy)]
struct Signing<'a> {
    op: &'a str,
    request_sha256: [u8; 32],
    now: Millis,
    /// The payment authorization that pays for this answer, kept on its record.
    paid_by: Option<&'a str>,
    /// When the request's record stops being replayed: the replay window from the request's
    /// start, whichever round of a wait writes it (a paid call's evidence names this time).
    record_expires: Millis,
}

/// What a request record keeps of its answer: the data without its fixed sentences, and what the
/// proof was made from. A replay signs the same data, marked `replayed: true`, for the same
/// request at the same time: its proof covers exactly the data it carries (no field is left out
/// of the hash), and as Ed25519 signatures are deterministic (RFC 8032), every replay of a record
/// carries the same proof. Keeping the whole signed answer instead would make a record about
/// 2.4 KB: three write units where this takes one (two in a transaction).
#[derive(Serialize, Deserialize)]
struct Kept {
    data: Value,
    /// When the answer was signed (ms).
    at: Millis,
    /// SHA-256 of the request body it answered, hex.
    request: String,
}

impl LeaseService {
    pub fn new(store: LeaseStore, issuer: Issuer) -> Self {
        Self {
            store,
            cursors: Cursors::new(issuer.cursor_key()),
            issuer,
            views: Views::default(),
            waits: super::waiting::Waits::default(),
        }
    }

    /// Waiters also read the store every `interval` (jittered): for a process that is not the
    /// only writer of its store (a Lambda function, or a server on a shared DynamoDB), whose
    /// waiters cannot count on being woken by the write that frees their permit.
    pub fn polling(mut self, interval: std::time::Duration) -> Self {
        self.waits = self.waits.polling(interval);
        self
    }

    /// A write of `key` committed, leaving `after`: remembered, and this process's waiters for it
    /// woken.
    fn committed(&self, key: &LeaseKey, after: &LeaseState) {
        self.views.put(key, after);
        self.waits.wake(key);
    }

    fn sign(&self, answer: LeaseAnswer, signing: &Signing<'_>) -> Result<SignedAnswer, LeaseError> {
        let data = serde_json::to_value(&answer).map_err(unserializable)?;
        let subject = Subject {
            route: ROUTE,
            op: signing.op,
            request_sha256: signing.request_sha256,
        };
        let provenance = provenance(&self.issuer, &subject, &data, signing.now);
        Ok(SignedAnswer {
            data: answer,
            provenance,
        })
    }

    /// Carry out `request` for `tenant` at server time `now`, and sign the answer.
    /// `request_sha256` is the SHA-256 of the request body's canonical JSON (RFC 8785). The
    /// caller acts as the tenant itself (what a revoke's audit entry names).
    pub async fn execute(
        &self,
        tenant: &Tenant,
        request: &LeaseRequest,
        request_sha256: [u8; 32],
        now: Millis,
    ) -> Result<SignedAnswer, LeaseError> {
        let actor = Actor {
            tenant,
            id: tenant.as_str(),
        };
        self.execute_paid(&actor, request, request_sha256, now, None)
            .await
    }

    /// [`Self::execute`] for `actor`, paid or not: `paid_by` (the payment authorization's mark)
    /// is kept on the request record a mutation writes, so that the sweeper can tell this call's
    /// committed answer from a replay of it made in the same millisecond under another payment.
    /// Whether the actor may call an admin op is the edge's to decide, before this.
    pub async fn execute_paid(
        &self,
        actor: &Actor<'_>,
        request: &LeaseRequest,
        request_sha256: [u8; 32],
        now: Millis,
        paid_by: Option<&str>,
    ) -> Result<SignedAnswer, LeaseError> {
        let tenant = actor.tenant;
        let signing = Signing {
            op: request.op.as_str(),
            request_sha256,
            now,
            paid_by,
            record_expires: now + REPLAY_WINDOW_MS,
        };
        if request.op.spec().pages {
            let page = self.page(tenant, request, now).await?;
            return self.sign(page, &signing);
        }
        if request.is_set() {
            return self.execute_set(tenant, request, &signing).await;
        }
        let command = match request.ticket(signing.record_expires) {
            Some(ticket) => request.command()?.with_ticket(ticket),
            None => request.command()?,
        };
        let resource = request
            .resource
            .as_deref()
            .ok_or(LeaseError::Missing("resource"))?;
        let key = LeaseKey::new(tenant, resource);
        if let Command::Revoke { .. } = command {
            return self
                .revoke(actor, &key, resource, &command, request, &signing)
                .await;
        }
        if !request.op.writes() {
            let state = self.store.get(&key).await?;
            self.views.put(&key, &state);
            return self.sign(observation(&state, &command, request, now), &signing);
        }
        let record = request
            .request_id
            .as_deref()
            .map(|id| RecordKey::new(tenant, id));
        let Command::Acquire { wait_ms, .. } = command else {
            let _turn = self.waits.turn(&key).await;
            return Ok(self
                .mutate(&key, record.as_ref(), &command, request, &signing, true)
                .await?
                .0);
        };
        // A caller who waits: each round tries the acquire at its own time (the clock of the
        // request, moved on by the time waited), then sleeps until the resource changes or a
        // permit or place ahead of it lapses. The place it takes lasts until the whole wait ends
        // and 30 s after, so every round asks for the same place.
        let started = tokio::time::Instant::now();
        let deadline = now + wait_ms;
        let mut round = 0;
        // A caller who hangs up ends its wait: it takes no permit it can no longer learn of
        // (it used to, for the whole ttl it asked, while the waiters behind it waited: the
        // attack of 2026-12-03, round 4). Its place lasts as any wait's, 30 s past the wait's
        // end; a permit freed meanwhile is kept for it until then, then goes on.
        let mut hung_up = super::waiting::hung_up();
        loop {
            let round_now = now + Millis::try_from(started.elapsed().as_millis()).unwrap_or(0);
            let round_now = round_now.min(deadline);
            let waiting = command.with_wait(deadline - round_now);
            let signing = Signing {
                now: round_now,
                ..signing
            };
            // After the first round the caller knows the resource is held or queued: it reads
            // (one read unit) instead of the blind take, a write that would fail (one write unit).
            let guess = round == 0;
            round += 1;
            let turn = match command {
                // A plain acquire of a single-permit lease races its rivals guarded, as writers
                // in other processes do, and takes no turn: its write only takes a permit, or
                // writes a hand-off that a lapse made, which the waiter's own timer is due at
                // anyway, so no waiter misses a wake-up it needs. On one contended lease the
                // turns had made every refusal wait for the one before it to reach the store
                // (half the contended throughput: BENCHMARKS.md, issue #28). A semaphore's
                // acquire, a version-guarded write, still takes turns: its rivals would lose
                // the version race and back off.
                Command::Acquire {
                    limit: 1,
                    wait_ms: 0,
                    ..
                } => None,
                _ => Some(self.waits.turn(&key).await),
            };
            let (answer, state) = self
                .mutate(&key, record.as_ref(), &waiting, request, &signing, guess)
                .await?;
            // Armed before the turn is given up, so every later write of the resource in this
            // process wakes it, and its own write does not.
            let woken = self.waits.subscribe(&key);
            drop(turn);
            // Waiting on, as the decision says: a refusal answers the caller's place too, and
            // is no wait (found by the attack of 2026-12-03, round 3: a LIMIT_MISMATCH waited
            // out the whole wait, and then answered its own record's replay).
            let Some(state) = state.filter(|_| round_now < deadline) else {
                return Ok(answer);
            };
            let next = super::waiting::next_change(&state, round_now, deadline);
            tokio::select! {
                () = woken.until(next - round_now) => {}
                () = &mut hung_up => return Ok(answer),
            }
        }
    }

    /// A mutation: with a requestId its answer is recorded, without one it is not. Also, when
    /// the caller waits in the queue (an acquire with a place, not granted yet), the state it
    /// waits on. `guess`: try the write planned without a read first (see
    /// [`Self::mutate_optimistically`]).
    async fn mutate(
        &self,
        key: &LeaseKey,
        record: Option<&RecordKey>,
        command: &Command,
        request: &LeaseRequest,
        signing: &Signing<'_>,
        guess: bool,
    ) -> Result<(SignedAnswer, Option<LeaseState>), LeaseError> {
        match record {
            None => {
                let (answer, waits_on) = self
                    .mutate_optimistically(key, command, request, signing.now, guess)
                    .await?;
                Ok((self.sign(answer, signing)?, waits_on))
            }
            Some(record) => {
                self.mutate_with_record(key, record, command, request, signing)
                    .await
            }
        }
    }

    /// Without requestId: one guarded write on the optimistic guess, then decide on the item a
    /// failed guard hands back. A re-acquire that this process's view foresees (the caller holds
    /// the lease) goes straight to its own write instead of the vacant-lease guess. Without
    /// `guess` (a waiter's later rounds, which know the guess would fail) it reads first.
    async fn mutate_optimistically(
        &self,
        key: &LeaseKey,
        command: &Command,
        request: &LeaseRequest,
        now: Millis,
        guess: bool,
    ) -> Result<(LeaseAnswer, Option<LeaseState>), LeaseError> {
        let view = self.views.get(key).unwrap_or_default();
        let foreseen = planned(&view, command, now)
            .filter(|w| matches!(command, Command::Acquire { .. }) && w.effect.keeps_token());
        // No write to try blind (a semaphore's acquire): read, and decide on what was read.
        let grants = |write| Pending {
            write,
            queued: None,
            waits: false,
        };
        // The state a caller with a place in it waits on.
        let waits_on = |state: &LeaseState| {
            let holder = caller(request);
            holder
                .is_some_and(|h| state.queue_position(h, now).is_some())
                .then(|| state.clone())
        };
        let mut next = foreseen
            .or_else(|| optimistic(command, now))
            .map(grants)
            .filter(|_| guess);
        for round in 0..MAX_ROUNDS {
            back_off(round).await;
            let old = match next.take() {
                None => self.store.get(key).await?,
                Some(pending) => match self.store.apply(key, &pending.write, now).await? {
                    Applied::Committed(after) => {
                        self.committed(key, &after);
                        let waits = pending.waits;
                        let answer = pending.answer(request.op, &after, caller(request), now);
                        return Ok((answer, waits.then(|| waits_on(&after)).flatten()));
                    }
                    Applied::GuardFailed(old) => old,
                },
            };
            self.views.put(key, &old);
            let answer = |witnesses, waits: bool| {
                let denied = LeaseAnswer::denied(request.op, &old, caller(request), now, witnesses);
                Ok((denied, waits.then(|| waits_on(&old)).flatten()))
            };
            match decide(&old, command, now) {
                Decision::Write(write) => next = Some(grants(write)),
                Decision::Queue {
                    write: Some(write),
                    witnesses,
                } => {
                    next = Some(Pending {
                        write,
                        queued: Some(witnesses),
                        waits: true,
                    })
                }
                Decision::Refuse { write, witnesses } => {
                    next = Some(Pending {
                        write,
                        queued: Some(witnesses),
                        waits: false,
                    })
                }
                Decision::Queue { witnesses, .. } => return answer(witnesses, true),
                Decision::Deny(witnesses) => return answer(witnesses, false),
                Decision::Observe => {
                    return Ok((observation(&old, command, request, now), None));
                }
                // Only a call with a requestId has a ticket, and it is recorded.
                Decision::Handed(_) => {
                    return Err(LeaseError::Internal("a hand-off met with no record".into()));
                }
            }
        }
        Err(LeaseError::Contention)
    }

    /// With requestId: the answer is committed with its record in one transaction, its write
    /// guarded by the state it was decided on. The first try needs no read when the write's
    /// outcome is known before it commits ([`planned`] on this process's view of the lease): a
    /// renew or release always, an acquire when the view is current. A cancelled transaction
    /// hands back the lease as its guard saw it (and any record), which is decided on as a read
    /// would be; only when nothing came back is the lease read.
    async fn mutate_with_record(
        &self,
        key: &LeaseKey,
        record_key: &RecordKey,
        command: &Command,
        request: &LeaseRequest,
        signing: &Signing<'_>,
    ) -> Result<(SignedAnswer, Option<LeaseState>), LeaseError> {
        let now = signing.now;
        let fingerprint = request.fingerprint();
        let seen = self.views.get(key);
        let known = seen.is_some();
        let view = seen.unwrap_or_default();
        let mut plan = match foresee(&view, command, now) {
            // A denial this process's view foresees: its record, with a check that the lease
            // is as the view shows it, in one transaction (no read first). Only on a view of
            // the lease: the empty one stands for a lease never seen.
            Some(Foreseen::Denial {
                unchanged,
                witnesses,
            }) if known => Some(Plan {
                answer: LeaseAnswer::denied(request.op, &view, caller(request), now, witnesses),
                write: None,
                shown: view.clone(),
                queued: false,
                signed_at: None,
                on_store: false,
                unchanged: Some(unchanged),
            }),
            Some(Foreseen::Write(write)) => write.outcome().map(|after| Plan {
                answer: LeaseAnswer::granted(request.op, &after, caller(request), now),
                write: Some(write),
                shown: after,
                queued: false,
                signed_at: None,
                // A view does not show what was handed to a waiting call since it was seen
                // (found by the attack of 2026-12-03, round 3): a retry of a waiting call whose
                // place was recorded is sent to the store's state instead.
                on_store: false,
                unchanged: None,
            }),
            _ => None,
        };
        // Whether this request's place is recorded already (a waiting acquire's earlier round,
        // or the call it retries).
        let mut place_recorded = false;
        for round in 0..MAX_ROUNDS {
            back_off(round).await;
            let this = match plan.take() {
                Some(this) => this,
                None => {
                    let (state, record) = self.store.read_with_record(key, record_key, now).await?;
                    if let Some(record) = record {
                        if !record.queued || record.fingerprint != fingerprint {
                            return Ok((self.replay(&record, &fingerprint)?, None));
                        }
                        // This input's place: resumed, not replayed.
                        place_recorded = true;
                    }
                    self.views.put(key, &state);
                    Plan::decided(&state, command, request, now)
                }
            };
            if this.queued {
                // The place is committed with a record of the request (no answer in it), so
                // that the requestId is this input's from now on: another input under it is a
                // conflict, and a retry resumes the place. The grant replaces it.
                let placed = record_of(&fingerprint, None, signing)?;
                if this.write.is_none() && place_recorded {
                    return Ok((self.sign(this.answer, signing)?, Some(this.shown)));
                }
                let write = this.write.as_ref();
                match self
                    .store
                    .commit(key, write, record_key, &placed, this.on_store, now)
                    .await?
                {
                    Committed::Yes => {
                        if write.is_some() {
                            self.committed(key, &this.shown);
                        }
                        return Ok((self.sign(this.answer, signing)?, Some(this.shown)));
                    }
                    Committed::RecordExists(existing) => {
                        return Ok((self.replay(&existing, &fingerprint)?, None));
                    }
                    Committed::LeaseChanged(Some(current)) => {
                        self.views.put(key, &current);
                        plan = Some(Plan::decided(&current, command, request, now));
                        continue;
                    }
                    Committed::LeaseChanged(None) => continue,
                }
            }
            let signing = &Signing {
                now: this.signed_at.unwrap_or(now),
                ..*signing
            };
            let answer = self.sign(this.answer, signing)?;
            let stored = record_of(&fingerprint, Some(&answer), signing)?;
            let write = this.write.as_ref();
            let committed = match &this.unchanged {
                Some(unchanged) => {
                    self.store
                        .commit_unchanged(key, unchanged, record_key, &stored, now)
                        .await?
                }
                None => {
                    self.store
                        .commit(key, write, record_key, &stored, this.on_store, now)
                        .await?
                }
            };
            match committed {
                Committed::Yes => {
                    if this.write.is_some() {
                        self.committed(key, &this.shown);
                    }
                    return Ok((answer, None));
                }
                // This input's place, met by a write planned on the view: decided again on the
                // store's state, which says what was handed to it.
                Committed::RecordExists(existing)
                    if !this.on_store && existing.queued && existing.fingerprint == fingerprint => {
                }
                Committed::RecordExists(existing) => {
                    return Ok((self.replay(&existing, &fingerprint)?, None));
                }
                Committed::LeaseChanged(Some(current)) => {
                    self.views.put(key, &current);
                    plan = Some(Plan::decided(&current, command, request, now));
                }
                Committed::LeaseChanged(None) => {}
            }
        }
        Err(LeaseError::Contention)
    }

    /// A set: read every resource (and the record) in one snapshot, decide each, then either
    /// commit every write in one transaction or answer what blocked it, from that snapshot.
    /// A change between the read and the write sends it round again.
    async fn execute_set(
        &self,
        tenant: &Tenant,
        request: &LeaseRequest,
        signing: &Signing<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let now = signing.now;
        let members = request.members()?;
        let holder = request
            .holder
            .as_deref()
            .ok_or(LeaseError::Missing("holder"))?;
        let keys: Vec<LeaseKey> = members
            .iter()
            .map(|(resource, _)| LeaseKey::new(tenant, resource))
            .collect();
        let record_key = request
            .request_id
            .as_deref()
            .map(|id| RecordKey::new(tenant, id));
        let fingerprint = request.fingerprint();
        // Where a blocking member's witnesses point: the field that named it.
        let field = if request.leases.is_some() {
            "leases"
        } else {
            "resources"
        };
        // Each resource's turn, in key order (so that two sets cannot wait on each other), held
        // for the whole set: its writes wake waiters as a single resource's do.
        let mut ordered: Vec<&LeaseKey> = keys.iter().collect();
        ordered.sort();
        let mut turns = Vec::with_capacity(ordered.len());
        for key in ordered {
            turns.push(self.waits.turn(key).await);
        }
        for round in 0..MAX_ROUNDS {
            // A set's first round reads before it writes: a second means it lost a race.
            back_off(round + 1).await;
            let (states, record) = self.store.read_set(&keys, record_key.as_ref(), now).await?;
            if let Some(record) = record {
                return self.replay(&record, &fingerprint);
            }
            let mut writes = Vec::new();
            let mut witnesses = Vec::new();
            for (i, ((_, command), state)) in members.iter().zip(&states).enumerate() {
                let denied = match decide(state, command, now) {
                    Decision::Write(write) => {
                        writes.push((keys[i].clone(), write));
                        continue;
                    }
                    // A set does not wait: a member whose holder has a place in its queue is
                    // refused like any other (its place left as it is).
                    Decision::Deny(denied)
                    | Decision::Queue {
                        witnesses: denied, ..
                    }
                    | Decision::Refuse {
                        witnesses: denied, ..
                    } => denied,
                    Decision::Observe => continue,
                    Decision::Handed(_) => {
                        return Err(LeaseError::Internal("a hand-off in a set".into()));
                    }
                };
                witnesses.extend(denied.into_iter().map(|mut w| {
                    w.path = format!("/{field}/{i}");
                    w
                }));
            }
            let granted = witnesses.is_empty();
            if !granted {
                // Refused whole: nothing of it is written but the hand-offs its read noticed,
                // so that the permits its witnesses cite are the store's (as a single
                // resource's refusal writes them).
                writes = states
                    .iter()
                    .zip(&keys)
                    .filter_map(|(state, key)| Some((key.clone(), hand_on(state, now)?)))
                    .collect();
            }
            let after: Vec<LeaseState> = states
                .iter()
                .enumerate()
                .map(
                    |(i, state)| match writes.iter().find(|(key, _)| *key == keys[i]) {
                        Some((_, write)) => write.effect.apply(state),
                        None => state.clone(),
                    },
                )
                .collect();
            let shown: Vec<(&str, &LeaseState)> = members
                .iter()
                .map(|(resource, _)| resource.as_str())
                .zip(&after)
                .collect();
            let answer = LeaseAnswer::for_set(request.op, granted, &shown, holder, now, witnesses);
            let answer = self.sign(answer, signing)?;
            let stored = record_of(&fingerprint, Some(&answer), signing)?;
            // A DynamoDB item holds at most 400 KB. A set's answer lists every member's permits
            // and can outgrow that (50 wide semaphores with long holder names); such a write
            // could never commit with its record, and a 502 would send the caller round for
            // ever (found by the attack of 2026-12-02). Refused before anything is written.
            if record_key.is_some() && stored.answer.len() > MAX_KEPT_ANSWER_BYTES {
                return Err(LeaseError::TooLargeToKeep(stored.answer.len()));
            }
            let record = record_key.as_ref().map(|key| (key, &stored));
            match self
                .store
                .commit_set(&writes, Vec::new(), record, now)
                .await?
            {
                SetCommitted::Yes => {
                    for (key, state) in keys.iter().zip(&after) {
                        self.committed(key, state);
                    }
                    return Ok(answer);
                }
                SetCommitted::RecordExists(existing) => {
                    return self.replay(&existing, &fingerprint);
                }
                SetCommitted::Changed => {}
            }
        }
        Err(LeaseError::Contention)
    }

    /// A page of `list` or `audit` for `tenant` (docs/adr/0008): read from an index, so
    /// advisory; its cursor names where it ended, sealed for the tenant and the op.
    async fn page(
        &self,
        tenant: &Tenant,
        request: &LeaseRequest,
        now: Millis,
    ) -> Result<LeaseAnswer, LeaseError> {
        let page_size = request
            .page_size
            .unwrap_or(crate::lease::request::DEFAULT_PAGE_SIZE) as usize;
        let paged = match request.op {
            crate::lease::Op::Audit => Paged::Audit,
            _ => Paged::List,
        };
        let after = match &request.cursor {
            Some(cursor) => Some(
                self.cursors
                    .open(tenant, paged, cursor)
                    .ok_or(LeaseError::BadCursor)?,
            ),
            None => None,
        };
        match paged {
            Paged::List => {
                let prefix = request.prefix.as_deref().unwrap_or("");
                let page = self
                    .store
                    .list(tenant, prefix, after.as_deref(), page_size, now)
                    .await?;
                let next = page
                    .next_after
                    .map(|after| self.cursors.seal(tenant, paged, &after));
                let leases: Vec<_> = page
                    .leases
                    .iter()
                    .map(|(name, state)| (name.clone(), settled(state, now)))
                    .collect();
                Ok(LeaseAnswer::listed(&leases, next, now))
            }
            Paged::Audit => {
                // A position is `<ms>:<id>`, as this service sealed it.
                let before = match after.as_deref().map(|a| a.split_once(':')) {
                    None => None,
                    Some(Some((at, id))) => Some(AuditPosition {
                        at: at.parse().map_err(|_| LeaseError::BadCursor)?,
                        id: id.to_owned(),
                    }),
                    Some(None) => return Err(LeaseError::BadCursor),
                };
                let resource = request.resource.as_deref();
                let page = self
                    .store
                    .audit(tenant, resource, before.as_ref(), page_size, now)
                    .await?;
                let next = match (page.more, page.entries.last()) {
                    (true, Some((_, at))) => Some(self.cursors.seal(
                        tenant,
                        paged,
                        &format!("{}:{}", at.at, at.id),
                    )),
                    _ => None,
                };
                let entries = page.entries.into_iter().map(|(entry, _)| entry).collect();
                Ok(LeaseAnswer::audited(entries, next, now))
            }
        }
    }

    /// A revoke (docs/adr/0008): decided on a read, and committed in one transaction with its
    /// audit entry (and its record, with a requestId), so that no permit is ever ended without
    /// its entry. The write settles the resource, so its waiters are served in it.
    async fn revoke(
        &self,
        actor: &Actor<'_>,
        key: &LeaseKey,
        resource: &str,
        command: &Command,
        request: &LeaseRequest,
        signing: &Signing<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let now = signing.now;
        let reason = request
            .reason
            .as_deref()
            .ok_or(LeaseError::Missing("reason"))?;
        let record_key = request
            .request_id
            .as_deref()
            .map(|id| RecordKey::new(actor.tenant, id));
        let fingerprint = request.fingerprint();
        let _turn = self.waits.turn(key).await;
        for round in 0..MAX_ROUNDS {
            back_off(round + 1).await;
            let state = match &record_key {
                Some(record_key) => {
                    let (state, record) = self.store.read_with_record(key, record_key, now).await?;
                    if let Some(record) = record {
                        return self.replay(&record, &fingerprint);
                    }
                    state
                }
                None => self.store.get(key).await?,
            };
            let (answer, write, entry) = match decide(&state, command, now) {
                Decision::Write(write) => {
                    let after = write.effect.apply(&state);
                    // As the revoke decided: on the state as of now (a permit a lapse hands to
                    // a waiter between its calls is the waiter's, and may be ended).
                    let ended: Vec<crate::lease::answer::Holder> = settled(&state, now)
                        .live_permits(now)
                        .into_iter()
                        .filter(|p| after.was_revoked(&p.holder, p.token))
                        .map(|p| crate::lease::answer::Holder {
                            holder: p.holder.clone(),
                            fencing_token: p.token,
                            expires_at: crate::clock::iso8601(p.expires_at),
                        })
                        .collect();
                    let entry = crate::lease::answer::AuditEntry {
                        id: crate::store::call_id()?,
                        at: crate::clock::iso8601(now),
                        actor: actor.id.to_owned(),
                        resource: resource.to_owned(),
                        ended: ended.clone(),
                        reason: reason.to_owned(),
                    };
                    let answer = LeaseAnswer::revoked(&after, ended, now);
                    (answer, Some((write, after)), Some(entry))
                }
                Decision::Deny(witnesses) => {
                    let answer = LeaseAnswer::denied(request.op, &state, None, now, witnesses);
                    (answer, None, None)
                }
                Decision::Queue { .. }
                | Decision::Refuse { .. }
                | Decision::Observe
                | Decision::Handed(_) => {
                    return Err(LeaseError::Internal("a revoke decided as no revoke".into()));
                }
            };
            let answer = self.sign(answer, signing)?;
            let stored = record_of(&fingerprint, Some(&answer), signing)?;
            let audit = entry
                .map(|entry| self.store.audit_put(actor.tenant, &entry, now))
                .transpose()?;
            let writes: Vec<(LeaseKey, Write)> = write
                .iter()
                .map(|(write, _)| (key.clone(), write.clone()))
                .collect();
            let record = record_key.as_ref().map(|k| (k, &stored));
            match self
                .store
                .commit_set(&writes, audit.into_iter().collect(), record, now)
                .await?
            {
                SetCommitted::Yes => {
                    if let Some((_, after)) = &write {
                        self.committed(key, after);
                    }
                    return Ok(answer);
                }
                SetCommitted::RecordExists(existing) => {
                    return self.replay(&existing, &fingerprint);
                }
                SetCommitted::Changed => {}
            }
        }
        Err(LeaseError::Contention)
    }

    /// The stored answer, marked as replayed and signed as of when it was first answered; or a
    /// conflict if the input differs.
    fn replay(&self, record: &StoredRecord, fingerprint: &str) -> Result<SignedAnswer, LeaseError> {
        if record.fingerprint != fingerprint {
            return Err(LeaseError::IdempotencyConflict);
        }
        // A waiting acquire's place under this very input, met where no wait resumes it (its
        // commit lost a race to another writer of the record): answered as contention.
        if record.queued {
            return Err(LeaseError::Contention);
        }
        let corrupt =
            |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("stored answer: {e}"));
        let kept: Kept = serde_json::from_str(&record.answer).map_err(|e| corrupt(&e))?;
        let mut data: LeaseAnswer = serde_json::from_value(kept.data).map_err(|e| corrupt(&e))?;
        data.replayed = true;
        let mut request_sha256 = [0; 32];
        hex::decode_to_slice(&kept.request, &mut request_sha256).map_err(|e| corrupt(&e))?;
        let signing = Signing {
            op: data.op.as_str(),
            request_sha256,
            now: kept.at,
            paid_by: None,
            record_expires: kept.at + REPLAY_WINDOW_MS,
        };
        self.sign(data, &signing)
    }
}

/// The request record a request with a requestId commits: its `answer` kept (see [`keep`]), or,
/// with none, a waiting acquire's `queued` place (docs/adr/0007), which takes the requestId for
/// this input without an answer to replay.
fn record_of(
    fingerprint: &str,
    answer: Option<&SignedAnswer>,
    signing: &Signing<'_>,
) -> Result<StoredRecord, LeaseError> {
    Ok(StoredRecord {
        fingerprint: fingerprint.to_owned(),
        answer: answer
            .map(|a| keep(a, signing))
            .transpose()?
            .unwrap_or_default(),
        expires_at: signing.record_expires,
        paid_by: signing.paid_by.map(str::to_owned),
        queued: answer.is_none(),
    })
}

/// The record of `answer` (see [`Kept`]).
fn keep(answer: &SignedAnswer, signing: &Signing<'_>) -> Result<String, LeaseError> {
    let mut data = serde_json::to_value(&answer.data).map_err(unserializable)?;
    if let Some(fields) = data.as_object_mut() {
        fields.remove("limits");
    }
    let kept = Kept {
        data,
        at: signing.now,
        request: hex::encode(signing.request_sha256),
    };
    serde_json::to_string(&kept).map_err(unserializable)
}
