//! The lease function: POST /api/v1/lease behind API Gateway (REST), keys checked by the authorizer.

use lambda_http::{Error, run};
use shared::http::{AppState, lambda};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let boot = shared::bootstrap::lambda().await?;
    let issuer = boot.issuer().await?;
    run(lambda::service(AppState::new(
        boot.dynamodb,
        &boot.config.tables,
        issuer,
        false,
    )))
    .await
}
