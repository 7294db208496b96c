//! What the lease service's round engine asks of the store: two calls, each with its contract
//! (docs/adr/0009). [`LeaseStore`] is the one implementation that talks to a database; the
//! engine's unit tests script a fake of these two calls.
//!
//! On DynamoDB a call is exactly one request: a read of one lease is a consistent `GetItem`, of
//! more (or with a record) one `TransactGetItems`; a lone write is one conditional `UpdateItem`,
//! a record alone one conditional `PutItem`, anything else one `TransactWriteItems`.
//! `shared/tests/usage.rs` pins each path's round trips and units.

use super::lease_store::{lease_from_item, record_from_item};
use super::session_store::{
    SessionChange, SessionKey, SessionWritten, change_item, from_item as session_from_item,
};
use super::usage::{add as add_usage, measured};
use super::{
    Applied, Cancelled, FirstAttempt, Item, LeaseKey, LeaseStore, RecordKey, StoreError,
    StoredRecord, Written, guarded, read_item, transaction,
};
use crate::clock::Millis;
use crate::lease::answer::AuditEntry;
use crate::lease::session::Session;
use crate::lease::{Guard, LeaseState, Write};
use crate::tenant::Tenant;
use aws_sdk_dynamodb::types::{Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use std::future::Future;

/// The leases asked for, in the order asked (their session permits judged through their
/// sessions), the live record and the session, if asked for (`None`: there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub leases: Vec<LeaseState>,
    pub record: Option<StoredRecord>,
    pub session: Option<Session>,
}

/// A request record to put: its key, what it keeps, and whether it may replace a waiting call's
/// place of the same input (only an answer decided on the store's own state may: that state says
/// what was handed to the call meanwhile, docs/adr/0008).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPut {
    pub key: RecordKey,
    pub record: StoredRecord,
    pub over_place: bool,
}

/// What one round commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commit {
    /// One guarded write, alone: it comes back with the lease it left, or the lease its guard
    /// was checked against.
    Lone { key: LeaseKey, write: Write },
    /// All of it or none of it: the writes, a check that a lease is unchanged (a denial the store
    /// confirms), audit entries (a revoke's), the changes to sessions (docs/adr/0010), and the
    /// record.
    Together {
        writes: Vec<(LeaseKey, Write)>,
        unchanged: Option<(LeaseKey, Guard)>,
        audit: Vec<(Tenant, AuditEntry)>,
        sessions: Vec<(SessionKey, SessionChange)>,
        record: Option<RecordPut>,
    },
}

/// How a commit ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// All of it committed; with the lease a lone write left.
    Committed(Option<LeaseState>),
    /// A guard or the check did not hold, or another writer was in the transaction: nothing was
    /// written. With the first lease written (or checked) as its guard saw it, when the store
    /// handed it back; else a read tells.
    Changed(Option<LeaseState>),
    /// A live record holds the requestId already: nothing was written, and the answer is its.
    RecordExists(StoredRecord),
}

/// The store as the round engine uses it.
pub trait Rounds {
    /// The leases of `keys` (a lease never written is the empty lease), the live record of
    /// `record` when asked (one whose replay window has passed at `now` is none), and the
    /// session of `session` when asked, in one consistent snapshot: strongly consistent, all as
    /// of one moment. The leases' session permits are judged through their sessions as of then.
    fn read(
        &self,
        keys: &[LeaseKey],
        record: Option<&RecordKey>,
        session: Option<&SessionKey>,
        now: Millis,
    ) -> impl Future<Output = Result<Snapshot, StoreError>> + Send;

    /// `commit`, with every guard judged at `now`: all of it or nothing (see [`Outcome`]). A
    /// retry the store client made after a lost answer is recognised: an attempt refused by its
    /// own first attempt's write is `Committed`, never `Changed` or `RecordExists`. An outcome
    /// that cannot be known (the first attempt may have committed and been overtaken) is an
    /// error, never a guess.
    fn commit(
        &self,
        commit: &Commit,
        now: Millis,
    ) -> impl Future<Output = Result<Outcome, StoreError>> + Send;
}

impl Rounds for LeaseStore {
    async fn read(
        &self,
        keys: &[LeaseKey],
        record: Option<&RecordKey>,
        session: Option<&SessionKey>,
        now: Millis,
    ) -> Result<Snapshot, StoreError> {
        let session_key = session;
        if let ([key], None, None) = (keys, record, session) {
            return Ok(Snapshot {
                leases: vec![self.read_one(key, now).await?],
                record: None,
                session: None,
            });
        }
        // TransactGetItems takes at most 100 items; a set has at most 50.
        let mut wanted: Vec<(&str, &str)> = keys
            .iter()
            .map(|key| (self.leases.as_str(), key.0.as_str()))
            .collect();
        if let Some(record) = record {
            wanted.push((self.requests.as_str(), record.0.as_str()));
        }
        if let Some(session) = session {
            wanted.push((self.leases.as_str(), session.pk()));
        }
        let mut items = match wanted.as_slice() {
            // One item alone: a consistent GetItem, at half a transaction's price.
            [(table, pk)] => vec![read_item(&self.client, table, pk).await?],
            _ => self.read_together(&wanted).await?,
        }
        .into_iter();
        let leases = keys
            .iter()
            .map(|_| lease_from_item(items.next().flatten().as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let record = match record {
            Some(_) => items
                .next()
                .flatten()
                .map(|item| record_from_item(&item))
                .transpose()?
                .filter(|r| r.expires_at > now),
            None => None,
        };
        let session = match session {
            Some(key) => items
                .next()
                .flatten()
                .map(|item| session_from_item(key.id(), &item))
                .transpose()?,
            None => None,
        };
        // The request's own session, read with the leases, is not read again for them.
        let known = session_key.map(|key| (key, session.as_ref()));
        let leases = self.through_sessions(keys, leases, known, now).await?;
        Ok(Snapshot {
            leases,
            record,
            session,
        })
    }

    async fn commit(&self, commit: &Commit, now: Millis) -> Result<Outcome, StoreError> {
        match commit {
            // A lease that comes back with session permits is as stored, their expiries
            // unresolved: never planned on or remembered (docs/adr/0010). The engine reads
            // again, or keeps what it planned.
            Commit::Lone { key, write } => Ok(match self.apply(key, write, now).await? {
                Applied::Committed(after) => Outcome::Committed(plannable(after)),
                Applied::GuardFailed(old) => Outcome::Changed(plannable(old)),
            }),
            Commit::Together {
                writes,
                unchanged,
                audit,
                sessions,
                record,
            } => {
                let parts = Parts {
                    writes,
                    unchanged: unchanged.as_ref(),
                    audit,
                    sessions,
                    record: record.as_ref(),
                };
                self.together(parts, now).await
            }
        }
    }
}

impl LeaseStore {
    /// The record's conditional put, alone (an answer with no write).
    async fn put_record_alone(
        &self,
        put: Put,
        record: &StoredRecord,
    ) -> Result<Outcome, StoreError> {
        let send = self
            .client
            .put_item()
            .table_name(put.table_name())
            .set_item(Some(put.item().clone()))
            .set_condition_expression(put.condition_expression().map(str::to_owned))
            .set_expression_attribute_names(put.expression_attribute_names().cloned())
            .set_expression_attribute_values(put.expression_attribute_values().cloned())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by this very record: the first attempt put it, and this answer is
        // the first, not a replay.
        let ours = |old: Option<&Item>| {
            Ok(match old.map(record_from_item).transpose()? {
                Some(found) if found == *record => FirstAttempt::Committed,
                _ => FirstAttempt::NotCommitted,
            })
        };
        Ok(match guarded(send, ours).await? {
            Written::Now(_) | Written::Before(_) => Outcome::Committed(None),
            Written::Refused(Some(existing)) => Outcome::RecordExists(record_from_item(&existing)?),
            // An emulator that omits the old item: read it again.
            Written::Refused(None) => Outcome::Changed(None),
        })
    }

    /// A [`Commit::Together`]: one `TransactWriteItems` (the record alone: one conditional
    /// `PutItem`; nothing at all: nothing sent).
    async fn together(&self, parts: Parts<'_>, now: Millis) -> Result<Outcome, StoreError> {
        let Parts {
            writes,
            unchanged,
            audit,
            sessions,
            record,
        } = parts;
        if let ([], None, [], [(key, change)], None) = (writes, unchanged, audit, sessions, record)
        {
            return self.session_alone(key, change, now).await;
        }
        let put = record
            .map(|r| self.record_put(&r.key, &r.record, r.over_place, now))
            .transpose()?;
        let mut items = Vec::with_capacity(writes.len() + audit.len() + sessions.len() + 2);
        for (key, write) in writes {
            let update = self.update(key, write, now)?;
            items.push(TransactWriteItem::builder().update(update).build());
        }
        if let Some((key, guard)) = unchanged {
            let check = self.unchanged_check(key, guard, now)?;
            items.push(TransactWriteItem::builder().condition_check(check).build());
        }
        for (tenant, entry) in audit {
            let put = self.audit_put(tenant, entry, now)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        for (key, change) in sessions {
            items.push(change_item(&self.leases, key, change, now)?);
        }
        let record_at = items.len();
        match (put, record) {
            (Some(put), Some(record)) if record_at == 0 => {
                return self.put_record_alone(put, &record.record).await;
            }
            (None, _) if record_at == 0 => return Ok(Outcome::Committed(None)),
            (Some(put), _) => items.push(TransactWriteItem::builder().put(put).build()),
            (None, _) => {}
        }
        let send = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send();
        // Measured apart to learn whether the SDK retried (see `guarded`).
        let (result, usage) = measured(Box::pin(send)).await;
        add_usage(usage);
        let reasons = match transaction(result)? {
            Ok(_) => return Ok(Outcome::Committed(None)),
            Err(reasons) => reasons,
        };
        // The record first: if it exists, its answer stands whatever the leases did since. If the
        // SDK retried and it is this very record (its answer signed at this call's time, for this
        // payment), the retry was cancelled by its own first attempt: committed. DynamoDB takes
        // the retry's client token as the same request; an emulator may not.
        if let (Some(record), Some(Cancelled::Condition(Some(item)))) =
            (record, reasons.get(record_at))
        {
            return Ok(match record_from_item(item)? {
                found if usage.unsure_retries() > 0 && found == record.record => {
                    Outcome::Committed(None)
                }
                found => Outcome::RecordExists(found),
            });
        }
        // The first lease as its guard was checked, when it came back. No item: the lease does
        // not exist, or an emulator omitted it; a conflict: it was being written. Read it again.
        Ok(Outcome::Changed(match reasons.first() {
            Some(Cancelled::Condition(Some(item))) => plannable(lease_from_item(Some(item))?),
            _ => None,
        }))
    }
}

/// The parts of a [`Commit::Together`].
struct Parts<'a> {
    writes: &'a [(LeaseKey, Write)],
    unchanged: Option<&'a (LeaseKey, Guard)>,
    audit: &'a [(Tenant, AuditEntry)],
    sessions: &'a [(SessionKey, SessionChange)],
    record: Option<&'a RecordPut>,
}

impl LeaseStore {
    /// A session's open, keepalive, close or revoke with nothing beside it: one conditional
    /// `PutItem` or `UpdateItem`, not a transaction (half the units). A refusal is `Changed`:
    /// the next round reads the session and says why.
    async fn session_alone(
        &self,
        key: &SessionKey,
        change: &SessionChange,
        now: Millis,
    ) -> Result<Outcome, StoreError> {
        let sessions = self.sessions();
        let written = match change {
            SessionChange::Open(session) => {
                sessions.open_at(key, session).await?;
                return Ok(Outcome::Committed(None));
            }
            SessionChange::End { holder, write } => {
                sessions
                    .write_at(key, holder.as_deref(), write, now)
                    .await?
            }
            SessionChange::Permits { .. } => {
                return Err(StoreError::Internal(
                    "a session's permit changes only with its resource".into(),
                ));
            }
        };
        Ok(match written {
            SessionWritten::Done(_) => Outcome::Committed(None),
            SessionWritten::Refused(_) => Outcome::Changed(None),
        })
    }
}

/// A lease that came back from a write, if a round may plan on it: not one with session
/// permits or places, whose ends only a read through their sessions tells.
fn plannable(lease: LeaseState) -> Option<LeaseState> {
    (!lease.names_a_session()).then_some(lease)
}
