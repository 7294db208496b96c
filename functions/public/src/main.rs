//! The free public routes: POST /api/v1/verify-provenance and GET /.well-known/did.json.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::bootstrap::serve_http(shared::http::Routes::Public).await
}
