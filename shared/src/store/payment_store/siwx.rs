//! Sign-in-with-x nonces (`siwx|<address>|<nonce>`): each used once.

use super::{PaymentLedger, written_by};
use crate::clock::Millis;
use crate::store::{StoreError, Written, call_id, guarded, n, s};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

impl PaymentLedger {
    /// Record a sign-in-with-x nonce of `address` as used. `false` if it was used before.
    pub async fn consume_siwx(
        &self,
        address: &str,
        nonce: &str,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let call = call_id()?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(format!("siwx|{}|{nonce}", address.to_lowercase())))
            .item("accepted", n(now))
            .item("call", s(&call))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by its own first attempt's nonce: the sign-in is this call's.
        let written = guarded(put, |old| Ok(written_by(old, &call))).await?;
        Ok(!matches!(written, Written::Refused(_)))
    }
}
