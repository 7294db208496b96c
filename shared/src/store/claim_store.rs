//! Claims and the free-claim quota, in the claims table.
//!
//! A hold is one item, `pk = <scope>|<key>` (the scope has no `|`; the key may), never deleted:
//! `tok` is its fencing counter. Acquiring is one conditional UpdateItem (`exp` absent or past),
//! which also adds 1 to `tok`; a failed condition returns the live hold (ALL_OLD).
//! The free quota is one item per scope, `pk = quota|free|<scope>`: one slot per claim allowed in
//! a rolling hour, each written under a guard on its own value (see [`ClaimStore::count_free`]),
//! so concurrent instances cannot exceed it; it carries a TTL attribute (clean-up only).

use super::expr::Expr;
use super::{
    FirstAttempt, Item, StoreError, Written, conditional_update, get_n, guarded, n, read_item,
    req_n, req_s, s,
};
use crate::claims::{Claim, Outcome, Plan};
use crate::clock::Millis;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

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

    /// Claim `key` in `scope` for `holder` on `plan`, at server time `now`; a paid claim names the
    /// authorization that paid (`paid_by`, its mark): a hold won keeps it (`paidBy`), so that the
    /// sweeper tells this call's win from another payment's attempt in the same millisecond.
    pub async fn claim(
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
        let pk = claim_pk(scope, key);
        let send =
            conditional_update(&self.client, &self.table, &pk, (update, condition, e)).send();
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
    /// The item has `limit` slots (`q0`, `q1`, ...), each holding the time of the last claim
    /// counted in it. A claim takes a slot that is free (empty, or an hour old) under a guard on
    /// that slot's value alone, so each slot's claims are at least an hour apart and no hour
    /// holds more than `limit`; and while fewer than `limit` were counted in the last hour, some
    /// slot is free. Claims racing each other pick free slots at random and so rarely meet; a
    /// write refused by a racer brings the slots back with it (no further read). A read, then
    /// the write: one more round trip than a counter, on a path that is free.
    ///
    /// A slot's value is the time in ms times 1000 plus a random 0..999, so that a retry
    /// refused by its own first attempt's write knows it (it used to count twice).
    pub async fn count_free(
        &self,
        scope: &str,
        limit: u32,
        now: Millis,
    ) -> Result<Option<u64>, StoreError> {
        if limit == 0 {
            return Ok(Some(3600));
        }
        let pk = format!("quota|free|{scope}");
        let mine = now * 1000 + Millis::from(random_u16()? % 1000);
        let mut item = None;
        for _ in 0..QUOTA_ROUNDS {
            let slots = match item.take() {
                Some(back) => Some(back),
                None => self.quota_item(&pk).await?,
            };
            let slots = Slots::read(slots.as_ref(), limit)?;
            let free = slots.free(now);
            if free.is_empty() {
                return Ok(Some(slots.retry_after(now)));
            }
            let slot = free[usize::from(random_u16()?) % free.len()];
            let mut e = Expr::default();
            let q = e.name(&format!("q{slot}"));
            let condition = match slots.at(slot) {
                None => format!("attribute_not_exists({q})"),
                Some(seen) => format!("{q} = {}", e.value("seen", n(seen))),
            };
            let update = format!(
                "SET {q} = {mine}, {ttl} = {expiry}",
                mine = e.value("mine", n(mine)),
                ttl = e.name("ttl"),
                // Clean-up only: an item idle for an hour holds nothing that still counts.
                expiry = e.value("expiry", n(now.div_euclid(1000) + 2 * 3600)),
            );
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
                let at = old.map(|i| get_n::<Millis>(i, &format!("q{slot}")));
                Ok(match at.transpose()?.flatten() == Some(mine) {
                    true => FirstAttempt::Committed,
                    false => FirstAttempt::NotCommitted,
                })
            };
            match guarded(send, ours).await? {
                Written::Now(_) | Written::Before(_) => return Ok(None),
                // Another claim took that slot: decide again on the slots as they came back.
                Written::Refused(old) => item = old,
            }
        }
        Err(StoreError::Unavailable(
            "the free quota kept changing under concurrent claims".into(),
        ))
    }

    /// The free quota's item `pk`, read consistently.
    async fn quota_item(&self, pk: &str) -> Result<Option<Item>, StoreError> {
        read_item(&self.client, &self.table, pk).await
    }
}

/// Rounds of read and guarded write before the quota gives up. Each lost round is another claim
/// counted in the slot this one picked at random among the free ones, so losing many is unlikely
/// unless the quota is nearly full, where the next round finds it full.
const QUOTA_ROUNDS: usize = 64;

const HOUR_MS: Millis = 3_600_000;

/// The free quota's slots: for each, the time (ms) of the last claim counted in it, if any.
struct Slots(Vec<Option<Millis>>);

impl Slots {
    fn read(item: Option<&Item>, limit: u32) -> Result<Self, StoreError> {
        let mut slots = Vec::new();
        for slot in 0..limit {
            let value = match item {
                Some(item) => get_n::<Millis>(item, &format!("q{slot}"))?,
                None => None,
            };
            slots.push(value);
        }
        Ok(Self(slots))
    }

    /// The exact stored value of `slot` (what its guard compares).
    fn at(&self, slot: usize) -> Option<Millis> {
        self.0.get(slot).copied().flatten()
    }

    /// When `value`'s claim was counted (ms).
    fn time(value: Millis) -> Millis {
        value.div_euclid(1000)
    }

    /// The slots a claim at `now` may take: empty, or last counted an hour ago or more.
    fn free(&self, now: Millis) -> Vec<usize> {
        (0..self.0.len())
            .filter(|&i| self.at(i).is_none_or(|v| Self::time(v) <= now - HOUR_MS))
            .collect()
    }

    /// Seconds until the first slot frees (1..=3600: a racing call's `now` may be a little
    /// later than this one's).
    fn retry_after(&self, now: Millis) -> u64 {
        let first = self.0.iter().flatten().map(|&v| Self::time(v)).min();
        let wait = first.map_or(0, |t| t + HOUR_MS - now);
        u64::try_from(wait)
            .unwrap_or(0)
            .div_ceil(1000)
            .clamp(1, 3600)
    }
}

/// A random number, for the quota's slot choice and values.
fn random_u16() -> Result<u16, StoreError> {
    let mut bytes = [0u8; 2];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Internal(format!("no randomness for the free quota: {e}")))?;
    Ok(u16::from_le_bytes(bytes))
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
