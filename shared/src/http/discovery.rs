//! The discovery routes: GET / and /healthz, /openapi.json, /api/v1/catalog, /docs/index.json, /docs/lease/,
//! /docs/lease.json, /api/v1/samples/lease. Free, no key; every link starts with the configured
//! public URL (never the caller's `Host` or `X-Forwarded-Proto`: links would point wherever a
//! caller or a cache-poisoning header said).

use super::{ApiError, AppState};
use crate::clock::now_ms;
use crate::discovery::{Prices, docs, home, openapi};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;

fn prices(state: &AppState) -> Prices {
    Prices {
        lease: state.payments.as_ref().map(|p| p.lease_price),
        claims: state.payments.as_ref().map(|p| p.claim_prices),
        network: state.payments.as_ref().map(|p| p.settings.network.clone()),
    }
}

pub async fn openapi(State(state): State<AppState>) -> Json<Value> {
    Json(openapi::document(&state.public.base(), &prices(&state)))
}

pub async fn catalog(State(state): State<AppState>) -> Json<Value> {
    Json(docs::catalog(&state.public.base(), &prices(&state)))
}

pub async fn lease_page(State(state): State<AppState>) -> Html<String> {
    Html(docs::page_html(&state.public.base(), &prices(&state)))
}

pub async fn lease_page_json(State(state): State<AppState>) -> Json<Value> {
    Json(docs::page_json(&state.public.base(), &prices(&state)))
}

pub async fn lease_sample(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(docs::sample(state.issuer()?, now_ms())))
}

/// GET /: the page, or its JSON for a caller that asks for JSON first.
pub async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let base = state.public.base();
    // Every Accept header counts, as if joined with commas (RFC 9110).
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let wants_json = home::prefers_json(&accept.join(","));
    match wants_json {
        true => Json(home::index_json(&base)).into_response(),
        false => Html(home::index_html(&base)).into_response(),
    }
}

/// GET /healthz: no store call (see [`home::health`]); never cached.
pub async fn health() -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Json(home::health())).into_response()
}
