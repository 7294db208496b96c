//! Applies a validated lease request for a tenant: the rules from `lease::decide`, the writes
//! through the store, and idempotency for requests that carry a requestId (docs/adr/0009).
//!
//! Every op that writes runs on one engine ([`rounds`]): get the state (a guess from this
//! process's view, the lease a failed guard returned, or a read), plan on it, commit, and go
//! round again when the lease changed under it. Each op family plans in a file of its own:
//! [`acquire`] (one resource, and waiting), [`holder`] (renew and release), [`read`] (get and
//! check), [`set`] (all or nothing), [`revoke`] (audited), [`page`] (list and audit).
//!
//! `now` is read once per request, before any store call, and every condition and answer uses it.
//! If the request stalls, `now` is earlier than the real time: a lease judged lapsed then is lapsed
//! now too, so a stale `now` can only deny or grant a shorter lease, never grant one still held.

mod acquire;
mod answers;
mod candidates;
#[cfg(test)]
mod fake;
mod holder;
mod mutation;
mod page;
mod read;
mod reopen;
mod revoke;
mod rounds;
mod sessions;
mod set;
mod views;

pub use crate::lease::REPLAY_WINDOW_MS;
pub use answers::MAX_KEPT_ANSWER_BYTES;
pub use page::LIST_PAGE_BYTES;

use super::cursor::Cursors;
use super::waiting::Waits;
use crate::clock::Millis;
use crate::lease::decide::Asked;
use crate::lease::request::{DEFAULT_TTL_SECONDS, MissingField};
use crate::lease::{Command, LeaseAnswer, LeaseRequest};
use crate::provenance::Issuer;
use crate::store::session_store::SessionKey;
use crate::store::{LeaseKey, LeaseStore, RecordKey, StoreError};
use crate::tenant::Tenant;
use answers::Signing;
use mutation::Mutation;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use views::Views;

/// The route every lease answer is signed for.
pub const ROUTE: &str = "POST /api/v1/lease";

/// Who carries out a request: its tenant, and who acts in it (a revoke's audit names them): an
/// API key as `key:<key id>`, a paying wallet as its tenant.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub tenant: &'a Tenant,
    pub id: &'a str,
    /// An admin of its tenant: an API key with the admin role, or a paying wallet (or the
    /// tenant itself). The edge refuses an admin op to anyone else; reopen asks the service,
    /// since its finisher may too (docs/adr/0012).
    pub admin: bool,
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
    /// A waiting call whose payer already has its share of this server's waits in progress
    /// (this many): refused before anything was read or written.
    #[error("this account already has {0} waiting calls in progress here, its share")]
    TooManyWaits(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Not this caller's to do, decided on what the store holds (a reopen by someone who neither
    /// finished the resource nor is an admin): nothing was written.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// Our own failure (an answer that would not serialize): the details are for the log.
    #[error("internal error: {0}")]
    Internal(String),
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
    waits: Waits,
    /// Each payer's share of this process's concurrent waits; `None`: unbounded (on Lambda,
    /// where each call has an execution of its own and reserved concurrency bounds them).
    wait_shares: Option<std::sync::Arc<crate::service::wait_shares::WaitShares>>,
    /// The same for watches, counted apart: a payer's watchers must not use up the waits its
    /// campaigns need (the attack of 2026-12-06: an observer made its own campaign fail).
    watch_shares: Option<std::sync::Arc<crate::service::wait_shares::WaitShares>>,
}

/// One request as the op files see it: who asks, what, and how its answer is signed.
struct Call<'a> {
    actor: &'a Actor<'a>,
    request: &'a LeaseRequest,
    signing: Signing<'a>,
}

impl Call<'_> {
    /// What this request's rounds read and write: the leases of `resources` (in its tenant),
    /// and its record.
    fn target<'r>(&self, resources: impl IntoIterator<Item = &'r str>) -> rounds::Target {
        let tenant = self.actor.tenant;
        let record = self
            .request
            .request_id
            .as_deref()
            .map(|id| RecordKey::new(tenant, id));
        // Only a record is compared with the input: a call without a requestId is spared
        // hashing it (as it was before the engine).
        let fingerprint = match record {
            Some(_) => self.request.fingerprint(),
            None => String::new(),
        };
        rounds::Target {
            keys: resources
                .into_iter()
                .map(|resource| LeaseKey::new(tenant, resource))
                .collect(),
            record,
            fingerprint,
            session: self
                .request
                .session
                .as_deref()
                .map(|id| SessionKey::new(tenant, id)),
        }
    }

    /// The holder it speaks for: whose permit its answer shows first.
    fn caller(&self) -> Option<&str> {
        self.request.holder.as_deref()
    }
}

/// What `request` asks of a session itself, if it is a session's op (docs/adr/0010).
fn session_asked(request: &LeaseRequest) -> Result<Option<sessions::Asked<'_>>, LeaseError> {
    use crate::lease::Op;
    let holder = || {
        request
            .holder
            .as_deref()
            .ok_or(LeaseError::Missing("holder"))
    };
    let ttl_ms = request.ttl_seconds.map(|s| Millis::from(s) * 1000);
    // get and revoke take a session instead of a resource.
    let of_session = matches!(request.op, Op::Get | Op::Revoke) && request.session.is_some();
    if !request.op.is_sessions() && !of_session {
        return Ok(None);
    }
    Ok(Some(match request.op {
        Op::Open => sessions::Asked::Open {
            holder: holder()?,
            ttl_ms: ttl_ms.unwrap_or(Millis::from(DEFAULT_TTL_SECONDS) * 1000),
        },
        Op::Keepalive => sessions::Asked::Keepalive {
            holder: holder()?,
            ttl_ms,
        },
        Op::Close => sessions::Asked::Close { holder: holder()? },
        Op::Revoke => sessions::Asked::Revoke {
            reason: request
                .reason
                .as_deref()
                .ok_or(LeaseError::Missing("reason"))?,
        },
        _ => sessions::Asked::Get,
    }))
}

impl LeaseService {
    pub fn new(store: LeaseStore, issuer: Issuer) -> Self {
        Self {
            store,
            cursors: Cursors::new(issuer.cursor_key()),
            issuer,
            views: Views::default(),
            waits: Waits::default(),
            wait_shares: None,
            watch_shares: None,
        }
    }

    /// At most `each` waiting calls of one payer (an API key's account, or a wallet) in
    /// progress at once in this process, and apart from them `each` watches; more are refused
    /// ([`LeaseError::TooManyWaits`]).
    pub fn waits_per_payer(mut self, each: std::num::NonZeroUsize) -> Self {
        self.wait_shares = Some(crate::service::wait_shares::WaitShares::new(each));
        self.watch_shares = Some(crate::service::wait_shares::WaitShares::new(each));
        self
    }

    /// Waiters also read the store every `interval` (jittered): for a process that is not the
    /// only writer of its store (a Lambda function, or a server on a shared DynamoDB), whose
    /// waiters cannot count on being woken by the write that frees their permit.
    pub fn polling(mut self, interval: std::time::Duration) -> Self {
        self.waits = self.waits.polling(interval);
        self
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
            admin: true,
        };
        self.execute_as(&actor, request, request_sha256, now, None)
            .await
    }

    /// [`Self::execute`] for `actor`: `paid_by` (a payment authorization's mark, for a paid
    /// call) is kept on the request record a mutation writes, so that the sweeper can tell this
    /// call's committed answer from a replay of it made in the same millisecond under another
    /// payment. Whether the actor may call an admin op is the edge's to decide, before this.
    pub async fn execute_as(
        &self,
        actor: &Actor<'_>,
        request: &LeaseRequest,
        request_sha256: [u8; 32],
        now: Millis,
        paid_by: Option<&str>,
    ) -> Result<SignedAnswer, LeaseError> {
        let scope = request
            .resource
            .as_ref()
            .map(|resource| format!("{}|{resource}", actor.tenant.as_str()));
        let call = Call {
            actor,
            request,
            signing: Signing {
                op: request.op.as_str(),
                request_sha256,
                now,
                paid_by,
                record_expires: now + REPLAY_WINDOW_MS,
                scope: scope.as_deref(),
            },
        };
        if request.op.spec().pages {
            return self.page(&call).await;
        }
        if request.is_set() {
            return self.set(&call).await;
        }
        if let Some(candidates) = &request.candidates {
            let command = request.command()?;
            return match Mutation::of(&command) {
                Some(Mutation::Acquire(asked)) => self.candidates(&call, candidates, asked).await,
                // The shape check takes candidates only with acquire: a miss is ours.
                _ => Err(LeaseError::Internal(format!(
                    "{} with candidates",
                    request.op.as_str()
                ))),
            };
        }
        if let Some(asked) = session_asked(request)? {
            return self.session_op(&call, asked).await;
        }
        let ticket = request.ticket(call.signing.record_expires);
        let command = request.command()?;
        let resource = request
            .resource
            .as_deref()
            .ok_or(LeaseError::Missing("resource"))?;
        match &command {
            Command::Acquire { .. } | Command::Renew { .. } | Command::Release { .. } => {
                match Mutation::of(&command) {
                    Some(Mutation::Acquire(asked)) => {
                        // Only a call with a requestId has a ticket: a place of its own, to
                        // which a freed permit can be handed between its calls. (Its session
                        // is set when it is decided in it, as read.)
                        let asked = Asked {
                            ticket: ticket.as_ref(),
                            ..asked
                        };
                        self.acquire(&call, resource, asked).await
                    }
                    Some(Mutation::Hold(op)) => self.hold(&call, resource, op).await,
                    // Mutation::of takes each of the three: a miss is ours, not the caller's.
                    None => Err(LeaseError::Internal(format!(
                        "{} is not a mutation",
                        request.op.as_str()
                    ))),
                }
            }
            Command::Get => self.read(&call, resource, read::Asked::Get).await,
            Command::Watch { tag, wait_ms } => {
                self.watch(&call, resource, tag.as_deref(), *wait_ms).await
            }
            Command::Check { token, holder } => {
                let asked = read::Asked::Check {
                    token: *token,
                    holder: holder.as_deref(),
                };
                self.read(&call, resource, asked).await
            }
            Command::Revoke { holder, token } => {
                let revoked = revoke::Revoked {
                    holder: holder.as_deref(),
                    token: *token,
                };
                self.revoke(&call, resource, revoked).await
            }
            Command::Reopen { holder, token } => {
                let finisher = crate::lease::decide::finisher(holder, *token);
                self.reopen(&call, resource, finisher).await
            }
        }
    }

    fn sign(&self, answer: LeaseAnswer, signing: &Signing<'_>) -> Result<SignedAnswer, LeaseError> {
        answers::sign(&self.issuer, answer, signing)
    }

    /// The engine for one request's rounds, on this service's store at `now`.
    fn engine(&self, now: Millis) -> rounds::Engine<'_, LeaseStore> {
        rounds::Engine {
            store: &self.store,
            views: &self.views,
            waits: &self.waits,
            now,
        }
    }

    /// `planner`'s rounds on `target`, for an op whose decision is its signed answer: that
    /// answer, or the record's replayed.
    async fn answered<P>(
        &self,
        call: &Call<'_>,
        target: &rounds::Target,
        planner: &mut P,
    ) -> Result<SignedAnswer, LeaseError>
    where
        P: rounds::Planner<Decision = SignedAnswer>,
    {
        match self.engine(call.signing.now).run(target, planner).await? {
            rounds::Ended::Done { decision, .. } => Ok(decision),
            rounds::Ended::Replay(record) => self.replayed(&record, &target.fingerprint),
        }
    }

    /// The answer a request's record keeps, replayed; or a conflict if its input differs.
    fn replayed(
        &self,
        record: &crate::store::StoredRecord,
        fingerprint: &str,
    ) -> Result<SignedAnswer, LeaseError> {
        answers::replay(&self.issuer, record, fingerprint)
    }
}
