//! Lease items and request (idempotency) records.
//!
//! Guards become condition expressions here and nowhere else; a failed condition comes back as
//! the old item (`ReturnValuesOnConditionCheckFailure`), so the caller learns why without a read.

use super::expr::Expr;
pub(super) use super::lease_item::lease_from_item;
use super::lease_item::{handed_list, permits_map, places_list, revoked_list};
use super::rounds::Outcome;
use super::{
    FirstAttempt, Item, StoreError, Written, get_s, guarded, n, read_item, req_n, req_s, s,
};
use crate::clock::Millis;
use crate::lease::{Effect, Guard, LeaseState, MAX_TOKEN, Write};
use crate::tenant::Tenant;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, Update,
};

/// The partition key of a lease: `<tenant>|<resource>`. Neither part can contain `|`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey(pub(super) String);

impl LeaseKey {
    pub fn new(tenant: &Tenant, resource: &str) -> Self {
        Self(format!("{tenant}|{resource}"))
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

    /// The lease as stored (strongly consistent).
    pub async fn get(&self, key: &LeaseKey) -> Result<LeaseState, StoreError> {
        let item = read_item(&self.client, &self.leases, &key.0).await?;
        lease_from_item(item.as_ref())
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
        let (update, condition, expr) = write_expressions(key, write, now);
        let send = self
            .client
            .update_item()
            .table_name(&self.leases)
            .key("pk", s(&key.0))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
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
        let condition = guard_condition(&mut e, unchanged, &now);
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
        let (update, condition, expr) = write_expressions(key, write, now);
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

    /// The record's conditional put, alone (an answer with no write).
    pub(super) async fn put_record_alone(
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

/// The update and condition expressions of a guarded write: the only translation of the domain's
/// guards into DynamoDB conditions. Each condition is `Guard::holds` spelled for DynamoDB.
///
/// The update and condition of `write` on the item (its attributes: see `lease_item`).
fn write_expressions(key: &LeaseKey, write: &Write, now_ms: Millis) -> (String, String, Expr) {
    let mut e = Expr::default();
    let (holder, tok, exp) = (e.name("holder"), e.name("tok"), e.name("exp"));
    let (lim, pm, until, ver) = (e.name("lim"), e.name("pm"), e.name("until"), e.name("ver"));
    let (wq, wuntil, hv) = (e.name("wq"), e.name("wuntil"), e.name("hv"));
    let now = e.value("now", n(now_ms));
    let condition = guard_condition(&mut e, &write.guard, &now);
    let mut update = Clauses::default();
    match &write.effect {
        // A take on a lapsed semaphore makes it a lease again: its permits go, and the places
        // its guard found lapsed.
        Effect::Take {
            holder: h,
            expires_at,
        } => {
            update.set(&holder, e.value("holder", s(h)));
            update.set(&exp, e.value("exp", n(expires_at)));
            update.add(&tok, e.value("one", n(1)));
            update.remove(&[&pm, &lim, &until, &wq, &wuntil, &hv]);
        }
        Effect::Extend { expires_at } => update.set(&exp, e.value("exp", n(expires_at))),
        Effect::Clear => update.remove(&[&holder, &exp]),
        // A versioned resource, whole; a single permit it replaces goes.
        Effect::Replace(after) if after.is_versioned() => {
            let latest = after.permits.iter().map(|p| p.expires_at).max();
            update.set(&lim, e.value("lim", n(after.limit)));
            update.set(&pm, e.value("pm", permits_map(after)));
            update.set(&until, e.value("until", n(latest.unwrap_or(0))));
            update.set(&ver, e.value("ver", n(after.version)));
            update.set(&tok, e.value("tok", n(after.last_token)));
            update.remove(&[&holder, &exp]);
            match after.waiters.iter().map(|w| w.until).max() {
                Some(last) => {
                    update.set(&wq, e.value("wq", places_list(after)));
                    update.set(&wuntil, e.value("wuntil", n(last)));
                }
                None => update.remove(&[&wq, &wuntil]),
            }
            // A blind take is guarded on its absence, so that a permit a waiting call has not
            // taken ends in a write that remembers it (docs/adr/0008).
            match after.awaits_taking() {
                true => update.set(&hv, e.value("hv", AttributeValue::Bool(true))),
                false => update.remove(&[&hv]),
            }
        }
        // A lease again (its last waiter served): its permit as a lease keeps it, the version
        // carried on so that no earlier read's guard can match it.
        Effect::Replace(after) => {
            update.set(&ver, e.value("ver", n(after.version)));
            update.set(&tok, e.value("tok", n(after.last_token)));
            match after.permits.first() {
                Some(p) => {
                    update.set(&holder, e.value("holder", s(&p.holder)));
                    update.set(&exp, e.value("exp", n(p.expires_at)));
                }
                None => update.remove(&[&holder, &exp]),
            }
            update.remove(&[&pm, &lim, &until, &wq, &wuntil, &hv]);
        }
    }
    // The revoked permits and the hand-offs that ended untaken (docs/adr/0008): only a replace
    // changes them; other writes keep them.
    if let Effect::Replace(after) = &write.effect {
        let (rv, hd) = (e.name("rv"), e.name("hd"));
        match after.revoked.is_empty() {
            true => update.remove(&[&rv]),
            false => update.set(&rv, e.value("rv", revoked_list(after))),
        }
        match after.handed.is_empty() {
            true => update.remove(&[&hd]),
            false => update.set(&hd, e.value("hd", handed_list(after))),
        }
    }
    super::lease_index::index_entry(&mut update, &mut e, key, &write.effect, now_ms);
    let update = update.render();
    // Not every update and condition mentions every name declared.
    let e = e.used_in(&[&update, &condition]);
    (update, condition, e)
}

/// `guard` as a condition expression on the lease item, at `now` (a placeholder): the only
/// spelling of the domain's guards for DynamoDB, each `Guard::holds`.
fn guard_condition(e: &mut Expr, guard: &Guard, now: &str) -> String {
    let (holder, tok, exp, ver) = (
        e.name("holder"),
        e.name("tok"),
        e.name("exp"),
        e.name("ver"),
    );
    let vacant = free(e, now);
    let is = |e: &mut Expr, name: &str, key: &str, value: u64| match value {
        0 => format!("attribute_not_exists({name})"),
        v => format!("{name} = {}", e.value(key, n(v))),
    };
    match guard {
        Guard::Vacant => format!(
            "{vacant} AND (attribute_not_exists({tok}) OR {tok} < {max})",
            max = e.value("max", n(MAX_TOKEN)),
        ),
        Guard::VacantAt { last_token: 0 } => {
            format!("{vacant} AND attribute_not_exists({tok})")
        }
        Guard::VacantAt { last_token } => {
            format!(
                "{vacant} AND {tok} = {t} AND {tok} < {max}",
                t = e.value("last", n(last_token)),
                max = e.value("max", n(MAX_TOKEN)),
            )
        }
        Guard::HeldBy { holder: h, token } => format!(
            "{holder} = {h} AND {tok} = {t} AND {exp} > {now}",
            h = e.value("guardHolder", s(h)),
            t = e.value("guardToken", n(token)),
        ),
        Guard::Version {
            last_token,
            version,
            single_expiry,
        } => format!(
            "{} AND {} AND {}",
            is(e, &tok, "last", *last_token),
            is(e, &ver, "version", *version),
            match single_expiry {
                Some(x) => format!("{exp} = {}", e.value("singleExp", n(x))),
                None => format!("attribute_not_exists({exp})"),
            },
        ),
    }
}

/// The condition that the resource is free at `now` (a placeholder): no live permit of either
/// kind, nobody waiting, and no permit a waiting call has not taken ([`LeaseState::is_free`]).
pub(super) fn free(e: &mut Expr, now: &str) -> String {
    let (holder, exp) = (e.name("holder"), e.name("exp"));
    let (until, wuntil, hv) = (e.name("until"), e.name("wuntil"), e.name("hv"));
    format!(
        "(attribute_not_exists({holder}) OR attribute_not_exists({exp}) OR {exp} <= {now}) \
         AND (attribute_not_exists({until}) OR {until} <= {now}) \
         AND (attribute_not_exists({wuntil}) OR {wuntil} <= {now}) \
         AND attribute_not_exists({hv})"
    )
}

/// The clauses of an update expression, gathered so that each kind appears once.
#[derive(Default)]
pub(super) struct Clauses {
    set: Vec<String>,
    add: Vec<String>,
    remove: Vec<String>,
}

impl Clauses {
    pub(super) fn set(&mut self, name: &str, value: String) {
        self.set.push(format!("{name} = {value}"));
    }

    fn add(&mut self, name: &str, value: String) {
        self.add.push(format!("{name} {value}"));
    }

    pub(super) fn remove(&mut self, names: &[&str]) {
        self.remove.extend(names.iter().map(|n| (*n).to_owned()));
    }

    fn render(&self) -> String {
        [
            ("SET", &self.set),
            ("ADD", &self.add),
            ("REMOVE", &self.remove),
        ]
        .iter()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|(kind, parts)| format!("{kind} {}", parts.join(", ")))
        .collect::<Vec<_>>()
        .join(" ")
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
