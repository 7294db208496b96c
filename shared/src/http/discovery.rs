//! The discovery routes: GET /openapi.json, /api/v1/catalog, /docs/index.json, /docs/lease/,
//! /docs/lease.json, /api/v1/samples/lease. Free, no key; built for the URL the caller used.

use super::AppState;
use super::paid::origin;
use crate::clock::now_ms;
use crate::discovery::{Prices, docs, openapi};
use axum::Json;
use axum::extract::State;
use axum::http::request::Parts;
use axum::response::Html;
use serde_json::Value;

fn prices(state: &AppState) -> Prices {
    Prices {
        lease: state.payments.as_ref().map(|p| p.lease_price),
        claims: state.payments.as_ref().map(|p| p.claim_prices),
        network: state.payments.as_ref().map(|p| p.settings.network.clone()),
    }
}

fn base(parts: &Parts) -> String {
    origin(parts).1
}

pub async fn openapi(State(state): State<AppState>, parts: Parts) -> Json<Value> {
    Json(openapi::document(&base(&parts), &prices(&state)))
}

pub async fn catalog(State(state): State<AppState>, parts: Parts) -> Json<Value> {
    Json(docs::catalog(&base(&parts), &prices(&state)))
}

pub async fn lease_page(State(state): State<AppState>, parts: Parts) -> Html<String> {
    Html(docs::page_html(&base(&parts), &prices(&state)))
}

pub async fn lease_page_json(State(state): State<AppState>, parts: Parts) -> Json<Value> {
    Json(docs::page_json(&base(&parts), &prices(&state)))
}

pub async fn lease_sample(State(state): State<AppState>) -> Json<Value> {
    Json(docs::sample(&state.issuer, now_ms()))
}
