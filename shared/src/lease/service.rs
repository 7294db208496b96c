//! Applies a validated lease request for a tenant: the rules from `decide`, the writes through the
//! store, and idempotency for requests that carry a requestId.
//!
//! Without requestId, a mutation is one optimistic guarded write; if the guard fails, the old item
//! that comes back is decided on, which either denies or names the one write that can still grant
//! (re-acquire by the holder). With requestId, the lease and the record are read together, the
//! decision is committed with its record in one transaction guarded by the state that was read,
//! and a concurrent change sends it round again. Both loops are bounded.
//!
//! `now` is read once per request, before any store call, and every condition and answer uses it.
//! If the request stalls, `now` is earlier than the real time: a lease judged lapsed then is lapsed
//! now too, so a stale `now` can only deny or grant a shorter lease, never grant one still held.

use super::answer::LeaseAnswer;
use super::decide::{Decision, decide, optimistic};
use super::model::LeaseState;
use super::request::{Command, LeaseRequest, MissingField};
use crate::clock::Millis;
use crate::store::{Applied, Committed, LeaseKey, LeaseStore, RecordKey, StoreError, StoredRecord};
use crate::tenant::Tenant;

/// How long a requestId's answer is replayed.
pub const REPLAY_WINDOW_MS: Millis = 24 * 3600 * 1000;

/// Rounds before giving up on a lease that keeps changing under us. Each round means another
/// writer committed, so this is only reached under pathological contention.
const MAX_ROUNDS: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("requestId was used before with different input")]
    IdempotencyConflict,
    #[error("{0} is required for this op")]
    Missing(&'static str),
    #[error("the lease kept changing; retry with the same requestId")]
    Contention,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<MissingField> for LeaseError {
    fn from(m: MissingField) -> Self {
        Self::Missing(m.0)
    }
}

#[derive(Clone)]
pub struct LeaseService {
    store: LeaseStore,
}

impl LeaseService {
    pub fn new(store: LeaseStore) -> Self {
        Self { store }
    }

    /// Carry out `request` for `tenant` at server time `now`.
    pub async fn execute(
        &self,
        tenant: &Tenant,
        request: &LeaseRequest,
        now: Millis,
    ) -> Result<LeaseAnswer, LeaseError> {
        let command = request.command()?;
        let key = LeaseKey::new(tenant, &request.resource);
        match (&command, &request.request_id) {
            (Command::Get, _) => Ok(LeaseAnswer::observed(&self.store.get(&key).await?, now)),
            (_, None) => self.mutate(&key, &command, request, now).await,
            (_, Some(id)) => {
                self.mutate_once(&key, &RecordKey::new(tenant, id), &command, request, now)
                    .await
            }
        }
    }

    async fn mutate(
        &self,
        key: &LeaseKey,
        command: &Command,
        request: &LeaseRequest,
        now: Millis,
    ) -> Result<LeaseAnswer, LeaseError> {
        let Some(mut write) = optimistic(command, now) else {
            return Ok(LeaseAnswer::observed(&self.store.get(key).await?, now));
        };
        for _ in 0..MAX_ROUNDS {
            let old = match self.store.apply(key, &write, now).await? {
                Applied::Committed(after) => {
                    return Ok(LeaseAnswer::granted(request.op, &after, now));
                }
                Applied::GuardFailed(old) => old,
            };
            match decide(&old, command, now) {
                Decision::Write(next) => write = next,
                Decision::Deny(witnesses) => {
                    return Ok(LeaseAnswer::denied(request.op, &old, now, witnesses));
                }
                Decision::Observe => return Ok(LeaseAnswer::observed(&old, now)),
            }
        }
        Err(LeaseError::Contention)
    }

    async fn mutate_once(
        &self,
        key: &LeaseKey,
        record_key: &RecordKey,
        command: &Command,
        request: &LeaseRequest,
        now: Millis,
    ) -> Result<LeaseAnswer, LeaseError> {
        let fingerprint = request.fingerprint();
        for _ in 0..MAX_ROUNDS {
            let (state, record) = self.store.read_with_record(key, record_key, now).await?;
            if let Some(record) = record {
                return replay(&record, &fingerprint);
            }
            let (write, answer) = match decide(&state, command, now) {
                Decision::Write(w) => {
                    let after: LeaseState = w.effect.apply(&state);
                    (Some(w), LeaseAnswer::granted(request.op, &after, now))
                }
                Decision::Deny(witnesses) => (
                    None,
                    LeaseAnswer::denied(request.op, &state, now, witnesses),
                ),
                Decision::Observe => (None, LeaseAnswer::observed(&state, now)),
            };
            let stored = StoredRecord {
                fingerprint: fingerprint.clone(),
                answer: serde_json::to_string(&answer)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                expires_at: now + REPLAY_WINDOW_MS,
            };
            match self
                .store
                .commit(key, write.as_ref(), record_key, &stored, now)
                .await?
            {
                Committed::Yes => return Ok(answer),
                Committed::RecordExists(existing) => return replay(&existing, &fingerprint),
                Committed::LeaseChanged => continue,
            }
        }
        Err(LeaseError::Contention)
    }
}

/// The stored answer, marked as replayed, or a conflict if the input differs.
fn replay(record: &StoredRecord, fingerprint: &str) -> Result<LeaseAnswer, LeaseError> {
    if record.fingerprint != fingerprint {
        return Err(LeaseError::IdempotencyConflict);
    }
    let mut answer: LeaseAnswer = serde_json::from_str(&record.answer)
        .map_err(|e| StoreError::Corrupt(format!("stored answer: {e}")))?;
    answer.replayed = true;
    Ok(answer)
}
