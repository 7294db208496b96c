//! How every DynamoDB client of the service is set up: bounded time and retries (so a slow or
//! silent store becomes a 502 well within a Lambda's timeout, never a hung function), and the
//! usage meter (round trips, capacity units).
//!
//! Budget: an attempt gets 2 s (connecting 1 s of it), at most 3 attempts (the SDK's standard
//! retry with jittered backoff, for throttling, 5xx and dropped connections), and the whole call
//! gives up at 5 s. A lease op makes at most a few calls, inside the functions' 10 s timeout.

use super::usage::MeasureUsage;
use aws_sdk_dynamodb::config::Builder;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use std::time::Duration;

pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
pub const MAX_ATTEMPTS: u32 = 3;

/// `config` with the service's timeouts, retries and usage meter (round trips, capacity units).
pub fn configure(config: Builder) -> Builder {
    config
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(CALL_TIMEOUT)
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS))
        .interceptor(MeasureUsage)
}
