//! Lease items and request (idempotency) records.
//!
//! Guards become condition expressions here and nowhere else; a failed condition comes back as
//! the old item (`ReturnValuesOnConditionCheckFailure`), so the caller learns why without a read.

use super::expr::Expr;
use super::lease_item::conditions;
pub(super) use super::lease_item::lease_from_item;
use super::lease_item::updates::write_expressions;
use super::session_store::{SessionKey, from_item as session_from_item};
use super::{
    FirstAttempt, Item, StoreError, Written, conditional_update, get_s, guarded, n, read_item,
    req_n, req_s, s,
};
use crate::clock::Millis;
use crate::lease::session::{Session, SessionEnds, end_of, named, resolve};
use crate::lease::{Guard, LeaseState, Write};
use crate::tenant::Tenant;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Get, Put, ReturnValuesOnConditionCheckFailure, TransactGetItem,
    Update,
};
use std::collections::{BTreeSet, HashMap};

/// The partition key of a lease: `<tenant>|<resource>`. Neither part can contain `|`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey(pub(super) String);

impl LeaseKey {
    pub fn new(tenant: &Tenant, resource: &str) -> Self {
        Self(format!("{tenant}|{resource}"))
    }

    /// The resource's name.
    pub fn resource(&self) -> &str {
        self.0.split_once('|').map_or("", |(_, resource)| resource)
    }

    /// The session `id` of this lease's tenant: where its permits in that session point.
    pub fn session(&self, id: &str) -> SessionKey {
        SessionKey::in_tenant(self.tenant(), id)
    }

    /// Whether it is a resource of `tenant`.
    pub fn is_of(&self, tenant: &Tenant) -> bool {
        self.tenant() == LeaseKey::new(tenant, "").tenant()
    }

    fn tenant(&self) -> &str {
        self.0.split_once('|').map_or("", |(tenant, _)| tenant)
    }
}

/// The partition key of a request record: `<tenant>|<requestId>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordKey(pub(super) String);

impl RecordKey {
    pub fn new(tenant: &Tenant, request_id: &str) -> Self {
        Self(format!("{tenant}|{request_id}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a request with a requestId answered, kept for replays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Hash of the request's canonical input.
    pub fingerprint: String,
    /// The answer's `data`, as JSON.
    pub answer: String,
    /// Replays stop at this time (ms); the TTL attribute only cleans up afterwards.
    pub expires_at: Millis,
    /// The mark of the payment authorization that paid for the answer, if one did: what
    /// tells the call that committed from a replay of it in the same millisecond.
    pub paid_by: Option<String>,
    /// A waiting acquire's place, not an answer (`answer` is empty): the requestId is taken for
    /// this input (another input is a conflict), and a retry resumes the place instead of
    /// replaying; the grant or final denial replaces it.
    pub queued: bool,
}

/// The outcome of a single guarded write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The guard held; the state after the write.
    Committed(LeaseState),
    /// The guard did not hold; the state it was checked against.
    GuardFailed(LeaseState),
}

#[derive(Clone)]
pub struct LeaseStore {
    pub(super) client: Client,
    pub(super) leases: String,
    pub(super) requests: String,
}

/// Seconds of slack between a record's expiry and its TTL, so that DynamoDB's clean-up never
/// races a record that is still replayable.
const TTL_SLACK_SECONDS: i64 = 3600;

impl LeaseStore {
    pub fn new(
        client: Client,
        leases_table: impl Into<String>,
        requests_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            leases: leases_table.into(),
            requests: requests_table.into(),
        }
    }

    /// The sessions, in the same table.
    pub fn sessions(&self) -> super::SessionStore {
        super::SessionStore::new(self.client.clone(), self.leases.clone())
    }

    /// The lease as stored (strongly consistent), its session permits unresolved: what the
    /// item says, for tests that look at it. What rules are given is [`Self::read_one`]'s.
    pub async fn get(&self, key: &LeaseKey) -> Result<LeaseState, StoreError> {
        let item = read_item(&self.client, &self.leases, &key.0).await?;
        lease_from_item(item.as_ref())
    }

    /// The lease of `key` as of `now`, its session permits judged through their sessions.
    pub async fn read_one(&self, key: &LeaseKey, now: Millis) -> Result<LeaseState, StoreError> {
        let lease = self.get(key).await?;
        if !lease.names_a_session() {
            return Ok(lease);
        }
        let mut resolved = self
            .through_sessions(std::slice::from_ref(key), vec![lease], None, now)
            .await?;
        Ok(resolved.remove(0))
    }

    /// The items `(table, pk)` of `wanted` (at most 100), in order, read in one
    /// `TransactGetItems`: strongly consistent, all as of one moment; `None` where there is none.
    pub(super) async fn read_together(
        &self,
        wanted: &[(&str, &str)],
    ) -> Result<Vec<Option<Item>>, StoreError> {
        let mut gets = Vec::with_capacity(wanted.len());
        for (table, pk) in wanted {
            let get = Get::builder()
                .table_name(*table)
                .key("pk", s(*pk))
                .build()
                .map_err(StoreError::built)?;
            gets.push(TransactGetItem::builder().get(get).build());
        }
        let out = self
            .client
            .transact_get_items()
            .set_transact_items(Some(gets))
            .send()
            .await
            .map_err(StoreError::sdk)?;
        let mut responses = out.responses.unwrap_or_default().into_iter();
        Ok(wanted
            .iter()
            .map(|_| responses.next().and_then(|r| r.item))
            .collect())
    }

    /// `leases` (of `keys`, as stored) with each session permit's expiry, and each place's in a
    /// session, made its session's end, read now (docs/adr/0010): one read of the sessions they
    /// name (a consistent GetItem for
    /// one, a TransactGetItems of up to 100), none when no permit is in a session, which is every
    /// lease but a session's. `known`: a session read already with the leases (its key, and what
    /// was there), not read again.
    pub async fn through_sessions(
        &self,
        keys: &[LeaseKey],
        leases: Vec<LeaseState>,
        known: Option<(&SessionKey, Option<&Session>)>,
        now: Millis,
    ) -> Result<Vec<LeaseState>, StoreError> {
        let mut ends: HashMap<SessionKey, Millis> = HashMap::new();
        if let Some((key, session)) = known {
            ends.insert(key.clone(), end_of(session, now));
        }
        let wanted: BTreeSet<SessionKey> = keys
            .iter()
            .zip(&leases)
            .flat_map(|(key, lease)| named(lease).map(|id| key.session(id)))
            .filter(|session| !ends.contains_key(session))
            .collect();
        let wanted: Vec<SessionKey> = wanted.into_iter().collect();
        for chunk in wanted.chunks(100) {
            let wanted: Vec<(&str, &str)> = chunk
                .iter()
                .map(|key| (self.leases.as_str(), key.pk()))
                .collect();
            // One session: a consistent GetItem, half a transaction's units. More: one
            // consistent snapshot of them (a session never comes back, so a read of each at
            // its own moment would do as well; one round trip is what counts).
            let items = match wanted.as_slice() {
                [(table, pk)] => vec![read_item(&self.client, table, pk).await?],
                _ => self.read_together(&wanted).await?,
            };
            for (key, item) in chunk.iter().zip(items) {
                let session = item
                    .map(|item| session_from_item(key.id(), &item))
                    .transpose()?;
                ends.insert(key.clone(), end_of(session.as_ref(), now));
            }
        }
        Ok(keys
            .iter()
            .zip(leases)
            .map(|(key, lease)| {
                let of_lease: SessionEnds = named(&lease)
                    .filter_map(|id| Some((id.to_owned(), *ends.get(&key.session(id))?)))
                    .collect();
                resolve(&lease, &of_lease, now)
            })
            .collect())
    }

    /// One conditional UpdateItem: commit `write` if its guard holds at `now`. A retry refused
    /// by its own first attempt is a commit: the item that came back shows the write
    /// ([`Write::shows_in`]); if it does not, the outcome is unknown (see [`guarded`]).
    pub async fn apply(
        &self,
        key: &LeaseKey,
        write: &Write,
        now: Millis,
    ) -> Result<Applied, StoreError> {
        let expressions = write_expressions(&key.0, write, now);
        let send = conditional_update(&self.client, &self.leases, &key.0, expressions).send();
        // A retry refused by the item its first attempt wrote: the item shows the write. If it
        // does not, the first attempt may still have committed and been overtaken (a short lease
        // lapsed and taken): unknown.
        let shows = |old: Option<&Item>| {
            Ok(match write.shows_in(&lease_from_item(old)?) {
                true => FirstAttempt::Committed,
                false => FirstAttempt::Unknown,
            })
        };
        Ok(match guarded(send, shows).await? {
            Written::Now(out) => Applied::Committed(lease_from_item(out.attributes())?),
            Written::Before(old) => Applied::Committed(lease_from_item(old.as_ref())?),
            Written::Refused(old) => Applied::GuardFailed(lease_from_item(old.as_ref())?),
        })
    }

    /// The check that the lease of `key` is as `unchanged` pins it (the state a denial was decided
    /// on, in this process's view), as one item of a transaction: a denial and its record in one
    /// round trip, confirmed by the store.
    pub(super) fn unchanged_check(
        &self,
        key: &LeaseKey,
        unchanged: &Guard,
        now: Millis,
    ) -> Result<ConditionCheck, StoreError> {
        let mut e = Expr::default();
        let now = e.value("now", n(now));
        let condition = conditions::guard(&mut e, unchanged, &now);
        let e = e.used_in(&[&condition]);
        ConditionCheck::builder()
            .table_name(&self.leases)
            .key("pk", s(&key.0))
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(StoreError::built)
    }

    /// `write` on `key` as one item of a transaction.
    pub(super) fn update(
        &self,
        key: &LeaseKey,
        write: &Write,
        now: Millis,
    ) -> Result<Update, StoreError> {
        let (update, condition, expr) = write_expressions(&key.0, write, now);
        Update::builder()
            .table_name(&self.leases)
            .key("pk", s(&key.0))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(StoreError::built)
    }

    pub(super) fn record_put(
        &self,
        key: &RecordKey,
        record: &StoredRecord,
        over_place: bool,
        now: Millis,
    ) -> Result<Put, StoreError> {
        let mut expr = Expr::default();
        let free = format!(
            "attribute_not_exists(pk) OR {exp} <= {now}",
            exp = expr.name("exp"),
            now = expr.value("now", n(now)),
        );
        // A waiting acquire's record of this very input gives way to its answer.
        let condition = match over_place {
            false => free,
            true => format!(
                "{free} OR ({queued} = {yes} AND {fp} = {mine})",
                queued = expr.name("queued"),
                yes = expr.value("yes", AttributeValue::Bool(true)),
                fp = expr.name("fp"),
                mine = expr.value("fp", s(&record.fingerprint)),
            ),
        };
        let mut put = Put::builder()
            .table_name(&self.requests)
            .item("pk", s(&key.0))
            .item("fp", s(&record.fingerprint))
            .item("answer", s(&record.answer))
            .item("exp", n(record.expires_at))
            .item(
                "ttl",
                n(record.expires_at.div_euclid(1000) + TTL_SLACK_SECONDS),
            );
        if let Some(paid_by) = &record.paid_by {
            put = put.item("paidBy", s(paid_by));
        }
        if record.queued {
            put = put.item("queued", AttributeValue::Bool(true));
        }
        put.condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(StoreError::built)
    }
}

pub(super) fn record_from_item(item: &Item) -> Result<StoredRecord, StoreError> {
    Ok(StoredRecord {
        fingerprint: req_s(item, "fp")?.to_owned(),
        answer: req_s(item, "answer")?.to_owned(),
        expires_at: req_n(item, "exp")?,
        paid_by: get_s(item, "paidBy")?.map(str::to_owned),
        queued: matches!(item.get("queued"), Some(AttributeValue::Bool(true))),
    })
}
