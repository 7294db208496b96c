//! The lease function: POST /api/v1/lease behind API Gateway (REST), keys checked by the authorizer.

use lambda_http::{Error, run};
use shared::config::Config;
use shared::http::{AppState, lambda};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        .init();
    let config = Config::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::new(&aws);
    run(lambda::service(AppState::new(
        client,
        &config.tables,
        false,
    )))
    .await
}
