//! The free public routes: POST /api/v1/verify-provenance and GET /.well-known/did.json.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    leasekit_core::bootstrap::serve_http(leasekit_core::http::Routes::Public).await
}
