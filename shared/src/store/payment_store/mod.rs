//! The payment ledger: one item per payment authorization, `pk = auth|<network>|<payer>|<nonce>`.
//! Its conditional creation is what consumes an authorization at most once, across instances and
//! retries. Ledger items are never deleted.
//!
//! An item's life is [`crate::payment::lifecycle`]'s (the rules are there; this module only keeps
//! the states): `accepted`, then exactly one final status. Only the first final write wins (each
//! is conditional on `accepted`), so the live path and the sweeper never both record an outcome.
//! While `accepted`, the item carries `pending`, the key of a sparse index (`pending`, ordered by
//! `accepted`), which is how the sweeper finds what a crash, a timeout or a lost connection left
//! open without scanning the whole ledger.
//!
//! An accepted item also says where the answer it paid for would be if it committed (its
//! [`Evidence`]), so a sweeper can tell a committed call (settle it) from one that never got that
//! far (void it) without trusting anything but the store.
//!
//! One module per kind of item or reader: `authorization` (the `auth|` items: consume, note as
//! answered, close), `identifier` (`payid|`: a payment identifier and the answer kept for it),
//! `evidence` (where a paid answer is, and whether it committed), `sweep` (the open items' index),
//! `siwx` (`siwx|` sign-in nonces) and `report` (the operators' listing).

mod authorization;
mod evidence;
mod identifier;
mod report;
mod siwx;
mod sweep;

pub use authorization::{Accepted, AuthorizationKey, Consumed, Final};
pub use evidence::Evidence;
pub use identifier::{FirstUse, Identified, IdentifierKey};
pub use report::LedgerRow;
pub use sweep::{PENDING_INDEX, Pending};

use super::expr::Expr;
use super::{FirstAttempt, Item, StoreError, Tables, Written, get_s, guarded, read_item, req_s, s};
use crate::payment::Status;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

#[derive(Clone)]
pub struct PaymentLedger {
    client: Client,
    table: String,
    requests: String,
    claims: String,
}

/// A stored status; anything else is corrupt data, never a default.
fn status_of(item: &Item) -> Result<Status, StoreError> {
    let stored = req_s(item, "status")?;
    Status::parse(stored).ok_or_else(|| StoreError::Corrupt(format!("payment status {stored}")))
}

impl PaymentLedger {
    /// The ledger in `tables.payments`; the requests and claims tables are where its evidence is.
    pub fn new(client: Client, tables: &Tables) -> Self {
        Self {
            client,
            table: tables.payments.clone(),
            requests: tables.requests.clone(),
            claims: tables.claims.clone(),
        }
    }

    /// One conditional UpdateItem of the ledger item `pk`: `false` if `condition` did not hold
    /// (and, for a retried write, `first` did not find its own first attempt: see [`guarded`]).
    async fn update_if(
        &self,
        pk: &str,
        update: String,
        condition: String,
        e: Expr,
        first: impl FnOnce(Option<&Item>) -> Result<FirstAttempt, StoreError>,
    ) -> Result<bool, StoreError> {
        let send = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        Ok(!matches!(guarded(send, first).await?, Written::Refused(_)))
    }

    /// A ledger item, read consistently.
    async fn get(&self, pk: &str) -> Result<Option<Item>, StoreError> {
        read_item(&self.client, &self.table, pk).await
    }
}

/// Whether `old` is the item written by the call `call` (see [`super::call_id`]).
fn written_by(old: Option<&Item>, call: &str) -> FirstAttempt {
    match old.and_then(|i| get_s(i, "call").ok().flatten()) == Some(call) {
        true => FirstAttempt::Committed,
        false => FirstAttempt::NotCommitted,
    }
}
