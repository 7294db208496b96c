//! x402 on a route: accept the caller's payment before the work (or answer 402 with the offer),
//! and settle it after, adding `PAYMENT-RESPONSE` to the answer.

use super::{ApiError, AppState};
use crate::clock::Millis;
use crate::x402::payments::{Paid, PaymentError};
use crate::x402::types::{ResourceInfo, SettlementResponse};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

pub const PAYMENT_SIGNATURE_HEADER: &str = "payment-signature";
pub const PAYMENT_RESPONSE_HEADER: &str = "payment-response";

/// What a route sells.
pub struct Offer<'a> {
    /// `METHOD /path`, recorded in the ledger.
    pub route: &'a str,
    pub description: &'a str,
    /// Atomic units.
    pub price: u64,
}

/// Accept the payment for `offer`, or the 402 (or 502) to answer instead. Without payments
/// configured, a caller with neither key nor payment is answered 401.
pub async fn accept(
    state: &AppState,
    parts: &Parts,
    offer: &Offer<'_>,
    now: Millis,
) -> Result<Paid, ApiError> {
    let Some(payments) = &state.payments else {
        return Err(ApiError::Unauthorized("an API key (X-API-KEY) is required"));
    };
    let header = parts
        .headers
        .get(PAYMENT_SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok());
    payments
        .accept(header, offer.price, offer.route, now)
        .await
        .map_err(|err| {
            let required = |error: Option<String>| {
                Box::new(payments.required(resource(state, parts, offer), offer.price, error))
            };
            match err {
                PaymentError::Required => ApiError::Payment {
                    required: required(None),
                    code: "PAYMENT_REQUIRED",
                },
                PaymentError::Refused(refusal) => ApiError::Payment {
                    required: required(Some(refusal.to_string())),
                    code: "PAYMENT_INVALID",
                },
                PaymentError::Store(e) => e.into(),
                PaymentError::Facilitator(e) => {
                    tracing::error!(error = %e, "facilitator unavailable");
                    ApiError::FacilitatorUnavailable
                }
            }
        })
}

/// Put the settlement response on `response` (base64 JSON in `PAYMENT-RESPONSE`).
pub fn attach(response: &mut Response, settlement: &SettlementResponse) {
    let encoded = BASE64.encode(serde_json::to_vec(settlement).unwrap_or_default());
    if let Ok(value) = HeaderValue::from_str(&encoded) {
        response
            .headers_mut()
            .insert(PAYMENT_RESPONSE_HEADER, value);
    }
}

/// The URL being paid for: the configured public URL of the route, whatever `Host` or
/// `X-Forwarded-Proto` the caller sent.
fn resource(state: &AppState, parts: &Parts, offer: &Offer<'_>) -> ResourceInfo {
    ResourceInfo {
        url: state.public.url(parts.uri.path()),
        description: Some(offer.description.to_owned()),
        mime_type: Some("application/json".into()),
    }
}
