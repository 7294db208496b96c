//! The one storage implementation: DynamoDB through aws-sdk-dynamodb. The same code runs against
//! AWS, the embedded dynoxide emulator (`leasekit serve`) and moto (CI).
//!
//! Tables (names are deployment settings, see [`Tables`]); every table's partition key is `pk` (S):
//!
//! | table    | pk                      | attributes                                                   |
//! |----------|-------------------------|--------------------------------------------------------------|
//! | leases   | `<tenant>\|<resource>`  | `tok` N last token issued; `holder` S; `exp` N expiry (ms); a semaphore's or queue's `lim`, `pm`, `until`, `ver`, `wq`, `wuntil`; revoked permits `rv`; the list index's `lt`, `lr`, `lu` (`lease_index`) |
//! | requests | `<tenant>\|<requestId>`; `<tenant>\|audit\|<id>` | records: `fp` S input hash; `answer` S (kept data, see `service::lease`); `exp` N (ms); `ttl` N (s); audit entries: `at`, `atm`, `ar`, `entry`, `ttl` (`audit_log`) |
//! | keys     | key id (16 hex)         | `account` S; `hash` B SHA-256 of the key; `created`, `revoked` N |
//! | claims   | `<scope>\|<key>`; `quota\|free\|<scope>` | holds: `holder`, `plan` S, `acquired`, `exp`, `tok` N; quota: `q0`..`q<limit-1>` N one slot per claim allowed (ms × 1000 + a random 0..999), `ttl` N (s) |
//! | payments | `auth\|<network>\|<payer>\|<nonce>`; `payid\|<network>\|<payer>\|<id>`; `siwx\|<address>\|<nonce>` | authorizations: `status` S (accepted, settled, settlement_failed, void, expired); `call` S; `route`, `amount`, `payTo`, `transaction`, `payment` S; `accepted`, `settledAt`, `validBefore` N; evidence (see `payment_store::evidence`); identifiers: `authorization`, `fp` S, kept `answer`; sign-ins: `accepted` N, `call` S |
//!
//! Every conditional single-item write goes through [`guarded`], which tells a retry refused by its
//! own committed first attempt from a real refusal; items a retry could not otherwise recognise carry
//! the writing call's random id (`call`; the quota's slot values).
//!
//! Lease items are never deleted: `tok` is the fencing counter. Request records carry a TTL
//! attribute for clean-up only; whether a record is live is decided by comparing `exp` with now.
//!
//! Round trips per lease op (see `lease_store`):
//! - without requestId: acquire, renew, release: one conditional UpdateItem (re-acquire by the live
//!   holder: two); get: one consistent GetItem.
//! - with requestId: one TransactGetItems (lease + record), then one TransactWriteItems (the
//!   guarded lease update and the record, atomically) or, for a denied op, one conditional PutItem
//!   of the record. A replay: the read only.

pub mod audit_log;
pub mod claim_store;
pub mod client;
mod expr;
pub mod key_store;
pub mod lease_index;
mod lease_item;
pub mod lease_store;
pub mod payment_store;
pub mod rounds;
pub mod session_store;
pub mod tables;
pub mod usage;

pub use claim_store::ClaimStore;
pub use key_store::KeyStore;
pub use lease_store::{Applied, LeaseKey, LeaseStore, RecordKey, StoredRecord};
pub use payment_store::PaymentLedger;
pub use rounds::{Commit, Outcome, RecordPut, Rounds, Snapshot};
pub use session_store::{KeptAlive, SessionStore, SessionWritten};
pub use tables::{Tables, ensure_tables};

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// A client for a DynamoDB endpoint that ignores credentials (the embedded emulator, moto, tests):
/// fixed region and placeholder credentials, so nothing is looked up in the environment.
pub fn local_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let credentials =
        aws_sdk_dynamodb::config::Credentials::new("local", "local", None, None, "leasekit-local");
    aws_sdk_dynamodb::Client::from_conf(
        local_config(endpoint)
            .credentials_provider(credentials)
            .build(),
    )
}

/// What every local client shares: the service's client settings, a fixed region and
/// `endpoint`, and no credentials yet (so nothing is looked up in the environment).
pub fn local_config(endpoint: &str) -> aws_sdk_dynamodb::config::Builder {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Region};
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint);
    client::configure(config)
}

/// A DynamoDB item.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// The item `pk` of `table`, read consistently (`None` if there is none): every single-item read.
/// A conditional `UpdateItem` of the item `pk` in `table`, with `update` and `condition` (their
/// placeholders in `e`), answering the item as it stands after it, or, refused, as its condition
/// found it: what every guarded write of one item sends (see [`guarded`]).
pub(crate) fn conditional_update(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    (update, condition, e): (String, String, expr::Expr),
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
    client
        .update_item()
        .table_name(table)
        .key("pk", s(pk))
        .update_expression(update)
        .condition_expression(condition)
        .set_expression_attribute_names(e.names())
        .set_expression_attribute_values(e.values())
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
}

pub(crate) async fn read_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Result<Option<Item>, StoreError> {
    let out = client
        .get_item()
        .table_name(table)
        .key("pk", s(pk))
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::sdk)?;
    Ok(out.item)
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The request failed or its outcome is unknown (network, throttling, service error).
    #[error("{0}")]
    Unavailable(String),
    /// A stored item does not have the shape this code writes.
    #[error("stored item is malformed: {0}")]
    Corrupt(String),
    /// Our own failure: this code could not build its request (a required field left out).
    #[error("a DynamoDB request could not be built: {0}")]
    Internal(String),
}

impl StoreError {
    pub(crate) fn built(err: aws_sdk_dynamodb::error::BuildError) -> Self {
        Self::Internal(err.to_string())
    }

    /// A failed request, described for the log by what went wrong and never by what came back:
    /// a service error by its code and message only (its full form carries the items that came
    /// back with it, holder names and wallet addresses among them).
    pub(crate) fn sdk<E, R>(err: aws_sdk_dynamodb::error::SdkError<E, R>) -> Self
    where
        E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        Self::Unavailable(match err.as_service_error() {
            Some(service) => format!(
                "DynamoDB answered {}: {}",
                service.code().unwrap_or("an error without a code"),
                service.message().unwrap_or("no message")
            ),
            None => format!(
                "DynamoDB request failed: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(&err)
            ),
        })
    }
}

/// An operation error that may be a failed condition, carrying the item it was checked against
/// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`; `None` where the item did not exist or was not
/// asked for).
pub(crate) trait ConditionFailure {
    fn condition_failed(&self) -> Option<Option<&Item>>;
}

impl ConditionFailure for aws_sdk_dynamodb::operation::put_item::PutItemError {
    fn condition_failed(&self) -> Option<Option<&Item>> {
        match self {
            Self::ConditionalCheckFailedException(e) => Some(e.item()),
            _ => None,
        }
    }
}

impl ConditionFailure for aws_sdk_dynamodb::operation::update_item::UpdateItemError {
    fn condition_failed(&self) -> Option<Option<&Item>> {
        match self {
            Self::ConditionalCheckFailedException(e) => Some(e.item()),
            _ => None,
        }
    }
}

/// Why one item of a cancelled transaction did not commit.
#[derive(Debug)]
pub(crate) enum Cancelled {
    /// Not this item (`None`).
    NotThis,
    /// Its condition did not hold; the item it was checked against, if it came back
    /// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`).
    Condition(Option<Item>),
    /// Another request was writing it at the same moment.
    Conflict,
}

/// The one place a cancelled transaction becomes outcomes, beside [`guarded`] for single
/// writes: `Ok(Ok(output))` committed, `Ok(Err(reasons))` cancelled by conditions or conflicts
/// (one reason per item, in order), `Err` the store failed or cancelled it for another reason
/// (throttling, validation, capacity).
pub(crate) fn transaction<T, R>(
    result: Result<T, aws_sdk_dynamodb::error::SdkError<TransactWriteItemsError, R>>,
) -> Result<Result<T, Vec<Cancelled>>, StoreError>
where
    R: std::fmt::Debug,
{
    let err = match result {
        Ok(output) => return Ok(Ok(output)),
        Err(err) => err,
    };
    let Some(TransactWriteItemsError::TransactionCanceledException(cancel)) =
        err.as_service_error()
    else {
        return Err(StoreError::sdk(err));
    };
    let mut reasons = Vec::new();
    for reason in cancel.cancellation_reasons() {
        reasons.push(match reason.code().unwrap_or("None") {
            "None" => Cancelled::NotThis,
            "ConditionalCheckFailed" => Cancelled::Condition(reason.item().cloned()),
            "TransactionConflict" => Cancelled::Conflict,
            _ => return Err(StoreError::sdk(err)),
        });
    }
    Ok(Err(reasons))
}

/// What the item that refused a retried conditional write says of the write's first attempt,
/// whose answer was lost (see [`guarded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstAttempt {
    /// The item shows this very write: the first attempt committed.
    Committed,
    /// The item shows another writer's work: the first attempt did not commit (or it did and
    /// was overtaken, which the caller cannot tell from a refusal and need not).
    NotCommitted,
    /// The item cannot say: the outcome is unknown, a store failure (502), never a denial the
    /// caller would take as final.
    Unknown,
}

/// The outcome of one conditional write, retries included.
#[derive(Debug)]
pub(crate) enum Written<T> {
    /// Committed by this attempt: its output.
    Now(T),
    /// Committed by an earlier attempt whose answer was lost; the item as it stands.
    Before(Option<Item>),
    /// The condition did not hold; the item it was checked against, if it came back.
    Refused(Option<Item>),
}

/// The one conditional single-item write: send it, and if it was refused, decide whether the
/// refusal is real. When the SDK retried (an attempt failed or went unanswered, not a throttle),
/// the first attempt may have committed and the retry then fails on the item the first attempt
/// wrote: `first` reads the refusing item and says which ([`FirstAttempt`]). Every conditional
/// PutItem and UpdateItem of the store goes through here; ask for the old item on failure
/// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) so that `first` has something to read.
pub(crate) async fn guarded<T, E, R>(
    send: impl std::future::Future<Output = Result<T, aws_sdk_dynamodb::error::SdkError<E, R>>>,
    first: impl FnOnce(Option<&Item>) -> Result<FirstAttempt, StoreError>,
) -> Result<Written<T>, StoreError>
where
    E: ConditionFailure
        + aws_sdk_dynamodb::error::ProvideErrorMetadata
        + std::error::Error
        + 'static,
    R: std::fmt::Debug,
{
    // Measured apart to learn whether the SDK retried; the outer scope still gets it all. Boxed:
    // an SDK send is a large future, and every store write nests one here.
    let (result, usage) = usage::measured(Box::pin(send)).await;
    usage::add(usage);
    // The one place a failed condition becomes an outcome (with the item it was checked
    // against); any other error is the store's.
    let old = match result {
        Ok(output) => return Ok(Written::Now(output)),
        Err(err) => match err
            .as_service_error()
            .and_then(ConditionFailure::condition_failed)
        {
            Some(item) => item.cloned(),
            None => return Err(StoreError::sdk(err)),
        },
    };
    if usage.unsure_retries() == 0 {
        return Ok(Written::Refused(old));
    }
    match first(old.as_ref())? {
        FirstAttempt::Committed => Ok(Written::Before(old)),
        FirstAttempt::NotCommitted => Ok(Written::Refused(old)),
        FirstAttempt::Unknown => Err(StoreError::Unavailable(
            "a retried write's guard failed and its first attempt's outcome is unknown".into(),
        )),
    }
}

/// A random id for one call's write, stored on the item so that a retry of that write can tell
/// its own committed first attempt from anyone else's (see [`guarded`]).
pub(crate) fn call_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Internal(format!("no randomness for a call id: {e}")))?;
    Ok(hex::encode(bytes))
}

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A string attribute, if present.
pub(crate) fn get_s<'a>(item: &'a Item, name: &str) -> Result<Option<&'a str>, StoreError> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v)),
        Some(other) => Err(StoreError::Corrupt(format!(
            "{name} is not a string: {other:?}"
        ))),
    }
}

/// A number attribute, if present, parsed as `T`.
pub(crate) fn get_n<T: std::str::FromStr>(
    item: &Item,
    name: &str,
) -> Result<Option<T>, StoreError> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::N(v)) => v
            .parse()
            .map(Some)
            .map_err(|_| StoreError::Corrupt(format!("{name} is not a valid number: {v}"))),
        Some(other) => Err(StoreError::Corrupt(format!(
            "{name} is not a number: {other:?}"
        ))),
    }
}

/// A required string attribute.
pub(crate) fn req_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, StoreError> {
    get_s(item, name)?.ok_or_else(|| StoreError::Corrupt(format!("{name} is missing")))
}

/// A required number attribute.
pub(crate) fn req_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, StoreError> {
    get_n(item, name)?.ok_or_else(|| StoreError::Corrupt(format!("{name} is missing")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::SdkError;
    use aws_sdk_dynamodb::types::CancellationReason;
    use aws_sdk_dynamodb::types::error::TransactionCanceledException;

    /// A store error is logged: what came back with it (items, holder names, wallets) must not
    /// be in it. A transaction cancelled by a throttle beside a failed condition used to log the
    /// old item in full.
    #[test]
    fn a_store_error_never_carries_the_items_that_came_back() {
        let item = HashMap::from([(
            "pk".to_owned(),
            AttributeValue::S("wallet:0x1111111111111111111111111111111111111111|job".into()),
        )]);
        let cancelled = TransactionCanceledException::builder()
            .message("Transaction cancelled [ConditionalCheckFailed, ThrottlingError]")
            .cancellation_reasons(
                CancellationReason::builder()
                    .code("ConditionalCheckFailed")
                    .set_item(Some(item))
                    .build(),
            )
            .cancellation_reasons(
                CancellationReason::builder()
                    .code("ThrottlingError")
                    .build(),
            )
            .meta(
                aws_sdk_dynamodb::error::ErrorMetadata::builder()
                    .code("TransactionCanceledException")
                    .message("Transaction cancelled [ConditionalCheckFailed, ThrottlingError]")
                    .build(),
            )
            .build();
        let result: Result<(), _> = Err(SdkError::service_error(
            TransactWriteItemsError::TransactionCanceledException(cancelled),
            (),
        ));
        let err = transaction(result).expect_err("a throttle is a store failure");
        let text = err.to_string();
        assert!(text.contains("TransactionCanceledException"), "{text}");
        assert!(!text.contains("0x1111"), "{text}");
    }
}
