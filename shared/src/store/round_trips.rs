//! Counting DynamoDB round trips per request: an SDK interceptor adds one for every attempt it
//! transmits (retries included) to a counter scoped to the current request's task. The request
//! log reports it, and a test pins the number of round trips of every lease path.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static TRIPS: Cell<u32>;
}

/// The interceptor to attach to every DynamoDB client.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountRoundTrips;

impl Intercept for CountRoundTrips {
    fn name(&self) -> &'static str {
        "CountRoundTrips"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Outside a counted scope (start-up, table creation) there is nothing to count.
        let _ = TRIPS.try_with(|trips| trips.set(trips.get() + 1));
        Ok(())
    }
}

/// Run `future`, counting the DynamoDB round trips it makes.
pub async fn counted<F: Future>(future: F) -> (F::Output, u32) {
    TRIPS
        .scope(Cell::new(0), async {
            let output = future.await;
            (output, TRIPS.with(Cell::get))
        })
        .await
}
