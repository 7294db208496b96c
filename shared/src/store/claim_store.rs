//! Claims and the free-claim quota, in the claims table.
//!
//! A hold is one item, `pk = <scope>|<key>` (the scope has no `|`; the key may), never deleted:
//! `tok` is its fencing counter. Acquiring is one conditional UpdateItem (`exp` absent or past),
//! which also adds 1 to `tok`; a failed condition returns the live hold (ALL_OLD).
//! The free quota is a counter per scope and clock hour, `pk = quota|free|<scope>|<hour>`, raised
//! by a conditional ADD that fails at the limit, so concurrent instances cannot exceed it; it
//! carries a TTL attribute (clean-up only).

use super::expr::Expr;
use super::usage::{add as add_usage, measured};
use super::{Item, StoreError, conditional, n, req_n, req_s, s};
use crate::claims::{Claim, Outcome, Plan};
use crate::clock::Millis;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};

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
        let mut e = Expr::default();
        let exp = e.name("exp");
        let now_value = e.value("now", n(now));
        let update = format!(
            "SET {h} = {holder}, {p} = {plan}, {a} = {now_value}, {exp} = {until} ADD {tok} {one}",
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
        // Measured apart to learn whether the SDK retried (see `LeaseStore::apply`).
        let (result, usage) = measured(send).await;
        add_usage(usage);
        Ok(match conditional(result)? {
            Ok(out) => Outcome::Acquired(claim_from_item(key, out.attributes())?),
            Err(old) => {
                let claim = claim_from_item(key, old.as_ref())?;
                // A retry that finds this very claim (this holder, acquired at this `now`):
                // the first attempt committed and its answer was lost. The caller won it.
                let ours = claim.holder == holder && claim.acquired_at == now && claim.plan == plan;
                if usage.unsure_retries() > 0 && ours {
                    Outcome::Acquired(claim)
                } else {
                    Outcome::held(claim, holder)
                }
            }
        })
    }

    /// Count one free claim for `scope` in the clock hour of `now`, unless `limit` were exceeded.
    /// `Ok(None)` counted; `Ok(Some(seconds))` at the limit, retry after that many seconds.
    pub async fn count_free(
        &self,
        scope: &str,
        limit: u32,
        now: Millis,
    ) -> Result<Option<u64>, StoreError> {
        let hour = now.div_euclid(3_600_000);
        let mut e = Expr::default();
        let count = e.name("n");
        let update = format!(
            "ADD {count} {one} SET {ttl} = {expiry}",
            one = e.value("one", n(1)),
            ttl = e.name("ttl"),
            expiry = e.value("expiry", n((hour + 2) * 3600)),
        );
        let condition = format!(
            "attribute_not_exists({count}) OR {count} < {limit}",
            limit = e.value("limit", n(limit))
        );
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(format!("quota|free|{scope}|{hour}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send()
            .await;
        Ok(match conditional(result)? {
            Ok(_) => None,
            Err(_) => Some(
                u64::try_from((hour + 1) * 3_600_000 - now)
                    .unwrap_or(0)
                    .div_ceil(1000),
            ),
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
