//! Free claims: POST /claim/free (an API key, or a wallet proven with sign-in-with-x).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    leasekit_core::bootstrap::serve_http(leasekit_core::http::Routes::ClaimFree).await
}
