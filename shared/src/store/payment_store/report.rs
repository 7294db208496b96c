//! The operators' listing of every authorization (`leasekit payments`).

use super::{PaymentLedger, status_of};
use crate::clock::Millis;
use crate::payment::Status;
use crate::store::{Item, StoreError, get_s, req_n, req_s};

impl PaymentLedger {
    /// Every payment authorization in the ledger, for operators' reconciliation (`leasekit
    /// payments`): a full scan, not for a request path.
    pub async fn all(&self) -> Result<Vec<LedgerRow>, StoreError> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(StoreError::sdk)?;
            for item in out.items() {
                if req_s(item, "pk")?.starts_with("auth|") {
                    rows.push(row_from_item(item)?);
                }
            }
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(rows),
            }
        }
    }
}

/// One ledger item as operators see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerRow {
    pub authorization: String,
    pub status: Status,
    pub route: String,
    pub amount: String,
    pub accepted: Millis,
    pub transaction: Option<String>,
    pub error_reason: Option<String>,
}

fn row_from_item(item: &Item) -> Result<LedgerRow, StoreError> {
    let text = |name: &str| -> Result<Option<String>, StoreError> {
        Ok(get_s(item, name)?
            .filter(|v| !v.is_empty())
            .map(str::to_owned))
    };
    Ok(LedgerRow {
        authorization: req_s(item, "pk")?.to_owned(),
        status: status_of(item)?,
        route: req_s(item, "route")?.to_owned(),
        amount: req_s(item, "amount")?.to_owned(),
        accepted: req_n(item, "accepted")?,
        transaction: text("transaction")?,
        error_reason: text("errorReason")?,
    })
}
