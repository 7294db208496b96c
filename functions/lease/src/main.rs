//! The lease function: POST /api/v1/lease behind API Gateway (REST), keys checked by the authorizer.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::bootstrap::serve_http(shared::http::Routes::Lease).await
}
