//! The lease function: POST /api/v1/lease behind API Gateway (REST), keys checked by the authorizer.

use lambda_http::{Error, run};
use shared::http::{AppState, lambda};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (config, client) = shared::bootstrap::lambda().await?;
    run(lambda::service(AppState::new(
        client,
        &config.tables,
        false,
    )))
    .await
}
