//! Claims and the free-claim quota, in the claims table.
//!
//! A hold is one item, `pk = <scope>|<key>` (the scope has no `|`; the key may), never deleted:
//! `tok` is its fencing counter. Acquiring is one conditional UpdateItem (`exp` absent or past),
//! which also adds 1 to `tok`; a failed condition returns the live hold (ALL_OLD).
//! The free quota is one item per scope, `pk = quota|free|<scope>`: the times of the last claims
//! counted in a rolling hour (see [`ClaimStore::count_free`]), written under a guard on the count
//! it read, so concurrent instances cannot exceed it; it carries a TTL attribute (clean-up only).

use super::expr::Expr;
use super::{FirstAttempt, Item, StoreError, Written, call_id, get_s, guarded, n, req_n, req_s, s};
use crate::claims::{Claim, Outcome, Plan};
use crate::clock::Millis;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};

#[derive(Clone)]
pub struct ClaimStore {
    client: Client,
    table: String,
}

impl ClaimStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Claim `key` in `scope` for `holder` on `plan`, at server time `now`.
    pub async fn claim(
        &self,
        scope: &str,
        key: &str,
        holder: &str,
        plan: Plan,
        now: Millis,
    ) -> Result<Outcome, StoreError> {
        self.claim_paid(scope, key, holder, plan, now, None).await
    }

    /// [`Self::claim`] paid for by the authorization whose mark is `paid_by`: a hold won
    /// keeps it (`paidBy`), so that the sweeper tells this call's win from another payment's
    /// attempt in the same millisecond.
    pub async fn claim_paid(
        &self,
        scope: &str,
        key: &str,
        holder: &str,
        plan: Plan,
        now: Millis,
        paid_by: Option<&str>,
    ) -> Result<Outcome, StoreError> {
        let mut e = Expr::default();
        let exp = e.name("exp");
        let now_value = e.value("now", n(now));
        let paid = e.name("paidBy");
        // A hold won without payment must not keep an earlier winner's.
        let (paid_by, unpaid) = match paid_by {
            Some(by) => (
                format!(", {paid} = {}", e.value("paidBy", s(by))),
                String::new(),
            ),
            None => (String::new(), format!(" REMOVE {paid}")),
        };
        let update = format!(
            "SET {h} = {holder}, {p} = {plan}, {a} = {now_value}, {exp} = {until}{paid_by} ADD {tok} {one}{unpaid}",
            h = e.name("holder"),
            holder = e.value("holder", s(holder)),
            p = e.name("plan"),
            plan = e.value("plan", s(plan.as_str())),
            a = e.name("acquired"),
            until = e.value("until", n(now + plan.seconds() * 1000)),
            tok = e.name("tok"),
            one = e.value("one", n(1)),
        );
        let condition = format!("attribute_not_exists({exp}) OR {exp} <= {now_value}");
        let send = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(claim_pk(scope, key)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by this very claim (this holder, acquired at this `now`): the first
        // attempt won it and its answer was lost. The caller won it.
        let ours = |old: Option<&Item>| {
            let claim = claim_from_item(key, old)?;
            let ours = claim.holder == holder && claim.acquired_at == now && claim.plan == plan;
            Ok(match ours {
                true => FirstAttempt::Committed,
                false => FirstAttempt::NotCommitted,
            })
        };
        Ok(match guarded(send, ours).await? {
            Written::Now(out) => Outcome::Acquired(claim_from_item(key, out.attributes())?),
            Written::Before(old) => Outcome::Acquired(claim_from_item(key, old.as_ref())?),
            Written::Refused(old) => Outcome::held(claim_from_item(key, old.as_ref())?, holder),
        })
    }

    /// Count one free claim for `scope` at `now`, unless `limit` claims were counted in the hour
    /// before it (a rolling hour, not a clock hour: a clock hour let twice the limit through
    /// around its turn). `Ok(None)` counted; `Ok(Some(seconds))` at the limit, retry after that
    /// many seconds.
    ///
    /// The item keeps the times of the last `limit` counted claims in a ring (`t`, indexed by the
    /// count `c` modulo `limit`): the slot the next claim would take holds the claim `limit`
    /// before it, and the next is allowed only if that one is an hour old. A read, then a write
    /// guarded by the count it read (DynamoDB cannot compare against the oldest of a list): one
    /// more round trip than a counter, on a path that is free; a write refused by a concurrent
    /// count brings the ring back with it, so contention costs no further reads. `last` names the call that wrote,
    /// so a retry refused by its own first attempt is a count, not a loss (it used to count
    /// twice).
    pub async fn count_free(
        &self,
        scope: &str,
        limit: u32,
        now: Millis,
    ) -> Result<Option<u64>, StoreError> {
        const HOUR_MS: Millis = 3_600_000;
        if limit == 0 {
            return Ok(Some(3600));
        }
        let pk = format!("quota|free|{scope}");
        let call = call_id()?;
        // The ring a refused write came back with: decided on without another read.
        let mut seen = None;
        for _ in 0..QUOTA_ROUNDS {
            let ring = match seen.take() {
                Some(ring) => ring,
                None => Ring::from_item(self.quota_item(&pk).await?.as_ref())?,
            };
            let slot = ring.count % u64::from(limit);
            let slot = usize::try_from(slot).unwrap_or(usize::MAX);
            if let Some(&oldest) = ring.times.get(slot)
                && oldest > now - HOUR_MS
            {
                // A concurrent call's `now` may be a little later than this one's: never more
                // than the hour.
                let wait = u64::try_from(oldest + HOUR_MS - now).unwrap_or(0);
                return Ok(Some(wait.div_ceil(1000).clamp(1, 3600)));
            }
            let mut e = Expr::default();
            let (c, times, last) = (e.name("c"), e.name("t"), e.name("last"));
            let set_time = if slot < ring.times.len() {
                format!("{times}[{slot}] = {}", e.value("now", n(now)))
            } else {
                let empty = e.value("empty", AttributeValue::L(Vec::new()));
                let one = e.value("at", AttributeValue::L(vec![n(now)]));
                format!("{times} = list_append(if_not_exists({times}, {empty}), {one})")
            };
            let update = format!(
                "SET {c} = {next}, {set_time}, {last} = {call}, {ttl} = {expiry}",
                next = e.value("next", n(ring.count + 1)),
                call = e.value("call", s(&call)),
                ttl = e.name("ttl"),
                // Clean-up only: an item idle for an hour holds nothing that still counts.
                expiry = e.value("expiry", n(now.div_euclid(1000) + 2 * 3600)),
            );
            let condition = match ring.count {
                0 => format!("attribute_not_exists({c})"),
                count => format!("{c} = {}", e.value("count", n(count))),
            };
            let send = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .update_expression(update)
                .condition_expression(condition)
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send();
            let ours = |old: Option<&Item>| {
                Ok(match old.map(|i| get_s(i, "last")).transpose()?.flatten() {
                    Some(last) if last == call => FirstAttempt::Committed,
                    _ => FirstAttempt::NotCommitted,
                })
            };
            match guarded(send, ours).await? {
                Written::Now(_) | Written::Before(_) => return Ok(None),
                // Another claim was counted meanwhile: decide again on the ring as it came back
                // (none back: the item was cleaned up, or an emulator omitted it; read it).
                Written::Refused(old) => {
                    seen = old.map(|i| Ring::from_item(Some(&i))).transpose()?
                }
            }
        }
        Err(StoreError::Unavailable(
            "the free quota kept changing under concurrent claims".into(),
        ))
    }
}

impl ClaimStore {
    /// The free quota's item `pk`, read consistently.
    async fn quota_item(&self, pk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::sdk)?;
        Ok(out.item)
    }
}

/// Rounds of read and guarded write before the quota gives up: each lost round is another
/// claim counted, so more than `limit` losses end in the limit anyway.
const QUOTA_ROUNDS: usize = 32;

/// The free quota's item: how many claims were ever counted, and the times of the last ones.
struct Ring {
    count: u64,
    times: Vec<Millis>,
}

impl Ring {
    fn from_item(item: Option<&Item>) -> Result<Self, StoreError> {
        let Some(item) = item.filter(|i| !i.is_empty()) else {
            return Ok(Self {
                count: 0,
                times: Vec::new(),
            });
        };
        let times = match item.get("t") {
            None => Vec::new(),
            Some(AttributeValue::L(list)) => list
                .iter()
                .map(|v| match v {
                    AttributeValue::N(n) => n
                        .parse()
                        .map_err(|_| StoreError::Corrupt(format!("quota time {n}"))),
                    other => Err(StoreError::Corrupt(format!("quota time {other:?}"))),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(StoreError::Corrupt(format!("quota times {other:?}"))),
        };
        Ok(Self {
            count: req_n(item, "c")?,
            times,
        })
    }
}

/// The claims table's key of `key` in `scope`.
pub fn claim_pk(scope: &str, key: &str) -> String {
    format!("{scope}|{key}")
}

fn claim_from_item(key: &str, item: Option<&Item>) -> Result<Claim, StoreError> {
    let item = item.ok_or_else(|| StoreError::Corrupt("claim item missing".into()))?;
    let plan = req_s(item, "plan")?;
    Ok(Claim {
        key: key.to_owned(),
        holder: req_s(item, "holder")?.to_owned(),
        plan: Plan::parse(plan).ok_or_else(|| StoreError::Corrupt(format!("plan {plan}")))?,
        acquired_at: req_n(item, "acquired")?,
        expires_at: req_n(item, "exp")?,
        fencing_token: req_n(item, "tok")?,
    })
}
