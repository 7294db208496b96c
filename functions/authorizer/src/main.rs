//! The API-key authorizer: API Gateway REST `REQUEST` authorizer on the X-API-KEY header.

use lambda_http::lambda_runtime::{Error, LambdaEvent, run, service_fn};
use leasekit_core::auth::authorizer::{AuthorizerError, AuthorizerRequest, authorize};
use leasekit_core::store::KeyStore;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let boot = leasekit_core::bootstrap::lambda().await?;
    let keys = &KeyStore::new(boot.dynamodb, boot.config.tables.keys);
    run(service_fn(
        move |event: LambdaEvent<AuthorizerRequest>| async move {
            authorize(keys, &event.payload).await.map_err(|err| {
                if let AuthorizerError::Store(e) = &err {
                    tracing::error!(error = %e, "key store failure");
                }
                // The error's message is what API Gateway reads: exactly "Unauthorized" means 401.
                Error::from(err)
            })
        },
    ))
    .await
}
