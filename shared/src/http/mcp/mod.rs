//! POST /mcp: the lease tool (and free claims) over MCP, streamable HTTP, stateless, JSON
//! answers: fits Lambda, where no session outlives a request. The tools take the same input
//! schemas as the HTTP routes and answer the same `data` and `_provenance`. Callers bring an API
//! key, or (with payments on) a wallet that pays per `lease` call over the x402 MCP binding: the
//! offer comes back as the tool result, the payment goes in the call's `_meta["x402/payment"]`,
//! and the settlement in the result's `_meta["x402/payment-response"]`.

//!
//! The parts, in the order a request meets them: `guard` (the contract's checks before rmcp
//! reads anything), `outcome` (who is calling, and what the call leaves for the log line),
//! `dispatch` (the tools' calls), `catalogue` (the tools' names, texts and schemas) and
//! `shaping` (rmcp's own refusals in the shape of every other route's).

mod catalogue;
mod dispatch;
mod guard;
mod outcome;
mod shaping;

use super::AppState;
use axum::Router;
use axum::middleware;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// The /mcp route: stateless (no sessions), JSON answers. rmcp's own Host check is off: `guard`
/// checks Host and Origin against the configured public URL and answers in the shape of `shared/schemas/error.json`.
pub fn router(state: AppState) -> Router {
    let tools = dispatch::LeaseTools {
        state: state.clone(),
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            outcome::require_key,
        ))
        .layer(middleware::from_fn_with_state(state, guard::guard))
}
