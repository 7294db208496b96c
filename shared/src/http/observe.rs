//! One structured log line per request (method, route, status, latency, and what the handler
//! noted: op, outcome, a hash of the tenant; and a failure's cause), plus status-class metrics.
//! Never a key, a signature or a payment: the tenant is hashed, bodies and headers are not logged.
//!
//! Every line a request causes is logged inside its span, `request{id=…}` (see [`span_for`]): the
//! request line, a settlement's, an MCP tool call's (rmcp's tasks take the span they were started
//! in), so an operator can join them by the id.

use super::error::Failure;
use crate::metrics;
use crate::store::usage::measured;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::request::RequestContext;
use sha2::{Digest, Sha256};
use std::time::Instant;

/// What a handler adds to its request's log line (as a response extension).
#[derive(Debug, Clone, Default)]
pub struct Note {
    pub op: Option<&'static str>,
    /// e.g. granted, denied, replayed, acquired, held.
    pub outcome: Option<&'static str>,
    /// The first 8 bytes of SHA-256(tenant), hex: enough to follow one tenant, useless to guess it.
    pub tenant: Option<String>,
}

impl Note {
    pub fn tenant_hash(tenant: &str) -> String {
        hex::encode(&Sha256::digest(tenant.as_bytes())[..8])
    }
}

/// The span of `request`: named by API Gateway's request id where there is one (what its access
/// log and the caller's `x-amzn-RequestId` say), else by a random one.
pub fn span_for(request: &Request) -> tracing::Span {
    let id = match request.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV1(context)) => context.request_id.clone(),
        _ => None,
    };
    let id = id.unwrap_or_else(|| {
        let mut bytes = [0u8; 8];
        // Only a name for log lines: a failed draw leaves zeros, never a failed request.
        let _ = getrandom::fill(&mut bytes);
        hex::encode(bytes)
    });
    tracing::info_span!("request", id)
}

pub async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let (response, usage) = measured(next.run(request)).await;
    let status = response.status().as_u16();
    let note = response
        .extensions()
        .get::<Note>()
        .cloned()
        .unwrap_or_default();
    // A failure's cause is logged here, once, with its request (never in the answer).
    let failure = response.extensions().get::<Failure>().map(|f| f.0.as_str());
    tracing::info!(
        method,
        route = route.as_deref().unwrap_or("-"),
        status,
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        op = note.op.unwrap_or("-"),
        outcome = note.outcome.unwrap_or("-"),
        tenant = note.tenant.as_deref().unwrap_or("-"),
        error = failure.unwrap_or("-"),
        store_round_trips = usage.round_trips,
        store_read_units = usage.read_units,
        store_write_units = usage.billed_write_units(),
        "request"
    );
    // A failure's cause marks a server error even where the HTTP status is 200: an MCP tool
    // call answers its errors inside a JSON-RPC result.
    match status {
        _ if failure.is_some() => metrics::count("ServerErrors"),
        400..=499 => metrics::count("ClientErrors"),
        500..=599 => metrics::count("ServerErrors"),
        _ => {}
    }
    response
}
