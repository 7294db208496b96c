//! MCP: POST /mcp, the lease tool and free claims over streamable HTTP (stateless), with an API
//! key or paid per tool call over x402.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    leasekit_core::bootstrap::serve_http(leasekit_core::http::Routes::Mcp).await
}
