//! What every Lambda function does once at init: logging, configuration, the DynamoDB client.

use crate::config::{Config, ConfigError};

/// Initialise logging and read the configuration and AWS settings (from the Lambda environment:
/// region and role credentials; no IMDS on Lambda). Call once, before the first request.
pub async fn lambda() -> Result<(Config, aws_sdk_dynamodb::Client), ConfigError> {
    tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        .init();
    let config = Config::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    Ok((config, aws_sdk_dynamodb::Client::new(&aws)))
}
