//! The lease function: POST /api/v1/lease behind API Gateway (REST), keys checked by the authorizer.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    leasekit_core::bootstrap::serve_http(leasekit_core::http::Routes::Lease).await
}
