//! Paid claims: POST /claim (x402 only; hour, day or week).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::bootstrap::serve_http(shared::http::Routes::Claim).await
}
