//! What each request costs in DynamoDB: round trips and capacity units. An SDK interceptor counts
//! every attempt it transmits (retries included), asks each lease-path request (list's queries
//! and batch reads too) for its consumed
//! capacity (`ReturnConsumedCapacity=TOTAL`), and adds it all to a counter scoped to the current
//! request's task. The request log reports it, and a test pins it for every lease path.
//!
//! A write whose condition fails reports no capacity, yet DynamoDB bills it by the size of the
//! item it was checked against (at least one write unit). Those are counted apart, as
//! `failed_conditions`, so that [`Usage::billed_write_units`] can add them; a transaction that a
//! condition cancelled counts one per item (its prepare phase), an upper bound.

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut,
    BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemError, PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    transact_get_items::{TransactGetItemsInput, TransactGetItemsOutput},
    transact_write_items::{
        TransactWriteItemsError, TransactWriteItemsInput, TransactWriteItemsOutput,
    },
    update_item::{UpdateItemError, UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static USAGE: Cell<Usage>;
}

/// DynamoDB usage of one scope (an HTTP request, a test's call).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Requests transmitted, retries included.
    pub round_trips: u32,
    /// Read capacity units the responses reported.
    pub read_units: f64,
    /// Write capacity units the responses reported.
    pub write_units: f64,
    /// Conditional writes refused by their condition (they report no capacity).
    pub failed_conditions: u32,
    /// Attempts refused as throttled: certainly not applied, so not a lost commit.
    pub throttled: u32,
}

/// DynamoDB's error codes for a request refused before it was applied, for capacity.
const THROTTLES: [&str; 3] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];

impl Usage {
    /// Attempts after the first whose predecessor's outcome is unknown (not a throttle): where
    /// a write may have committed before its answer was lost.
    pub fn unsure_retries(&self) -> u32 {
        self.round_trips.saturating_sub(1 + self.throttled)
    }

    /// Write units as billed: the reported ones plus one per failed condition. Exact while every
    /// item checked is under 1 KB, as every lease item and record is.
    pub fn billed_write_units(&self) -> f64 {
        self.write_units + f64::from(self.failed_conditions)
    }

    /// Single-item operations report only `CapacityUnits` under `TOTAL`: the operation says
    /// whether they were read or write units.
    fn add<'a>(&mut self, kind: Kind, consumed: impl IntoIterator<Item = &'a ConsumedCapacity>) {
        let units: f64 = consumed
            .into_iter()
            .filter_map(ConsumedCapacity::capacity_units)
            .sum();
        match kind {
            Kind::Read => self.read_units += units,
            Kind::Write => self.write_units += units,
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Read,
    Write,
}

/// Add `other` (measured in another task: a spawned handler's) to the current scope.
pub fn add(other: Usage) {
    update(|u| {
        u.round_trips += other.round_trips;
        u.read_units += other.read_units;
        u.write_units += other.write_units;
        u.failed_conditions += other.failed_conditions;
        u.throttled += other.throttled;
    });
}

fn update(f: impl FnOnce(&mut Usage)) {
    // Outside a measured scope (start-up, table creation) there is nothing to count.
    let _ = USAGE.try_with(|cell| {
        let mut usage = cell.get();
        f(&mut usage);
        cell.set(usage);
    });
}

/// The interceptor to attach to every DynamoDB client.
#[derive(Debug, Clone, Copy, Default)]
pub struct MeasureUsage;

impl Intercept for MeasureUsage {
    fn name(&self) -> &'static str {
        "MeasureUsage"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if USAGE.try_with(|_| ()).is_err() {
            return Ok(());
        }
        let total = Some(ReturnConsumedCapacity::Total);
        let input = context.input_mut();
        if let Some(i) = input.downcast_mut::<UpdateItemInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<PutItemInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<GetItemInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<TransactWriteItemsInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<TransactGetItemsInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<QueryInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<BatchGetItemInput>() {
            i.return_consumed_capacity = total;
        }
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        update(|u| u.round_trips += 1);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        match context.output_or_error() {
            Ok(output) => update(|u| {
                if let Some(o) = output.downcast_ref::<UpdateItemOutput>() {
                    u.add(Kind::Write, o.consumed_capacity());
                } else if let Some(o) = output.downcast_ref::<PutItemOutput>() {
                    u.add(Kind::Write, o.consumed_capacity());
                } else if let Some(o) = output.downcast_ref::<GetItemOutput>() {
                    u.add(Kind::Read, o.consumed_capacity());
                } else if let Some(o) = output.downcast_ref::<TransactWriteItemsOutput>() {
                    u.add(Kind::Write, o.consumed_capacity());
                } else if let Some(o) = output.downcast_ref::<TransactGetItemsOutput>() {
                    u.add(Kind::Read, o.consumed_capacity());
                } else if let Some(o) = output.downcast_ref::<QueryOutput>() {
                    u.add(Kind::Read, o.consumed_capacity());
                } else if let Some(o) = output.downcast_ref::<BatchGetItemOutput>() {
                    u.add(Kind::Read, o.consumed_capacity());
                }
            }),
            Err(err) => {
                let Some(e) = err.as_operation_error() else {
                    return Ok(());
                };
                let single = e
                    .downcast_ref::<UpdateItemError>()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception)
                    || e.downcast_ref::<PutItemError>()
                        .is_some_and(PutItemError::is_conditional_check_failed_exception);
                // A transaction cancelled by a condition is counted as billed for its prepare
                // phase, one unit per item: an upper bound, as neither emulator reports it.
                let cancelled = match e.downcast_ref::<TransactWriteItemsError>() {
                    Some(TransactWriteItemsError::TransactionCanceledException(c))
                        if c.cancellation_reasons()
                            .iter()
                            .any(|r| r.code() == Some("ConditionalCheckFailed")) =>
                    {
                        u32::try_from(c.cancellation_reasons().len()).unwrap_or(u32::MAX)
                    }
                    _ => 0,
                };
                use aws_sdk_dynamodb::error::ProvideErrorMetadata;
                let code = e
                    .downcast_ref::<UpdateItemError>()
                    .and_then(ProvideErrorMetadata::code)
                    .or_else(|| e.downcast_ref::<PutItemError>().and_then(|e| e.code()))
                    .or_else(|| {
                        e.downcast_ref::<TransactWriteItemsError>()
                            .and_then(|e| e.code())
                    });
                let throttled = code.is_some_and(|c| THROTTLES.contains(&c));
                update(|u| {
                    u.failed_conditions += u32::from(single) + cancelled;
                    u.throttled += u32::from(throttled);
                });
            }
        }
        Ok(())
    }
}

/// Run `future`, measuring the DynamoDB usage it causes.
pub async fn measured<F: Future>(future: F) -> (F::Output, Usage) {
    USAGE
        .scope(Cell::new(Usage::default()), async {
            let output = future.await;
            (output, USAGE.with(Cell::get))
        })
        .await
}
