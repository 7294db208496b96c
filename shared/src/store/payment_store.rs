//! The payment ledger: one item per payment authorization, `pk = auth|<network>|<payer>|<nonce>`.
//! Its conditional creation is what consumes an authorization at most once, across instances and
//! retries; settlement outcomes are written onto the same item, so failed settlements can be
//! found and reconciled. Ledger items are never deleted.

use super::expr::Expr;
use super::{StoreError, conditional, n, s};
use crate::clock::Millis;
use crate::x402::types::SettlementResponse;
use aws_sdk_dynamodb::Client;

#[derive(Clone)]
pub struct PaymentLedger {
    client: Client,
    table: String,
}

/// The ledger key of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationKey(String);

impl AuthorizationKey {
    pub fn new(network: &str, payer: &str, nonce: &[u8; 32]) -> Self {
        Self(format!(
            "auth|{network}|{}|0x{}",
            payer.to_lowercase(),
            hex::encode(nonce)
        ))
    }
}

/// What the ledger keeps about an accepted authorization.
pub struct Accepted<'a> {
    pub route: &'a str,
    pub amount: &'a str,
    pub pay_to: &'a str,
    pub now: Millis,
}

impl PaymentLedger {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Record the authorization as used. `false` if it was used before.
    pub async fn consume(
        &self,
        key: &AuthorizationKey,
        accepted: &Accepted<'_>,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(&key.0))
            .item("status", s("accepted"))
            .item("route", s(accepted.route))
            .item("amount", s(accepted.amount))
            .item("payTo", s(accepted.pay_to))
            .item("accepted", n(accepted.now))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        Ok(conditional(result)?.is_ok())
    }

    /// Write the settlement outcome onto the authorization's item.
    pub async fn settled(
        &self,
        key: &AuthorizationKey,
        outcome: &SettlementResponse,
        now: Millis,
    ) -> Result<(), StoreError> {
        let mut e = Expr::default();
        let update = format!(
            "SET {status} = {s}, {tx} = {t}, {at} = {now}, {reason} = {r}",
            status = e.name("status"),
            s = e.value(
                "s",
                s(if outcome.success {
                    "settled"
                } else {
                    "settlement_failed"
                })
            ),
            tx = e.name("transaction"),
            t = e.value("t", s(&outcome.transaction)),
            at = e.name("settledAt"),
            now = e.value("now", n(now)),
            reason = e.name("errorReason"),
            r = e.value("r", s(outcome.error_reason.as_deref().unwrap_or(""))),
        );
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&key.0))
            .update_expression(update)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send()
            .await
            .map_err(StoreError::sdk)?;
        Ok(())
    }
}

impl PaymentLedger {
    /// Record a sign-in-with-x nonce of `address` as used. `false` if it was used before.
    pub async fn consume_siwx(
        &self,
        address: &str,
        nonce: &str,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(format!("siwx|{}|{nonce}", address.to_lowercase())))
            .item("accepted", n(now))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        Ok(conditional(result)?.is_ok())
    }
}
