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
        .layer(middleware::from_fn(carry_hang_up))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            outcome::require_key,
        ))
        .layer(middleware::from_fn_with_state(state, guard::guard))
}

/// The request's hang-up watch, where its server has one ([`crate::service::watching_hang_up`]),
/// carried in its extensions to the tool call: rmcp runs a call in a task of its own, which
/// does not inherit it (found by the attack of 2026-12-03, round 5: a waiting `lease` tool call
/// whose caller hung up went on waiting, and took the permit for its whole ttl).
#[derive(Clone)]
pub(crate) struct HangUpOf(pub(crate) crate::service::HangUpWatch);

async fn carry_hang_up(
    mut request: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    if let Some(watch) = crate::service::this_hang_up() {
        request.extensions_mut().insert(HangUpOf(watch));
    }
    next.run(request).await
}
