//! Paid claims: POST /claim (x402 only; hour, day or week).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    leasekit_core::bootstrap::serve_http(leasekit_core::http::Routes::Claim).await
}
