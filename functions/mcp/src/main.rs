//! MCP: POST /mcp, the lease tool and free claims over streamable HTTP (stateless), API keys only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::bootstrap::serve_http(shared::http::Routes::Mcp).await
}
