//! Free claims: POST /claim/free (an API key, or a wallet proven with sign-in-with-x).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::bootstrap::serve_http(shared::http::Routes::ClaimFree).await
}
