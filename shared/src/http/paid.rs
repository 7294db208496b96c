//! x402 on a route: accept the caller's payment before the work (or answer 402 with the offer),
//! run the work and settle it after in a task that outlives the request, and add
//! `PAYMENT-RESPONSE` to the answer.

use super::{ApiError, AppState};
use crate::clock::Millis;
use crate::payment::lifecycle::{self, AfterWork, Kept, Work};
use crate::service::payments::{Paid, PaymentError, Sale, resettled};
use crate::store::payment_store::Evidence;
use crate::store::payment_store::FirstUse;
use crate::x402::check::{Refusal, Verified, decode};
use crate::x402::types::{PaymentPayload, ResourceInfo, SettlementResponse};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
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
    /// The request's hash: a payment identifier's retry must be for the same request.
    pub request_sha256: [u8; 32],
}

/// The payment in the request's `PAYMENT-SIGNATURE` header, if it has one.
pub fn from_header(parts: &Parts) -> Option<Result<PaymentPayload, Refusal>> {
    let header = parts.headers.get(PAYMENT_SIGNATURE_HEADER)?;
    Some(
        header
            .to_str()
            .map_err(|_| Refusal::Malformed("PAYMENT-SIGNATURE is not ASCII".into()))
            .and_then(decode),
    )
}

/// Accept `payment` for `offer` (from the header, [`from_header`], or from MCP `_meta`), or the
/// 402 (409, 502) to answer instead. Without payments configured, a caller with neither key nor
/// payment is answered 401. `evidence` says where the answer will be once committed (see
/// [`Evidence`]).
pub async fn accept(
    state: &AppState,
    parts: &Parts,
    payment: Option<Result<PaymentPayload, Refusal>>,
    offer: &Offer<'_>,
    now: Millis,
    evidence: impl FnOnce(&Verified) -> Evidence,
) -> Result<Paid, ApiError> {
    let Some(payments) = &state.payments else {
        return Err(ApiError::Unauthorized("an API key (X-API-KEY) is required"));
    };
    let sale = Sale {
        route: offer.route,
        price: offer.price,
        request_sha256: offer.request_sha256,
    };
    payments
        .accept(payment, &sale, now, evidence)
        .await
        .map_err(|err| {
            let required = |error: Option<String>| {
                Box::new(payments.required(resource(state, parts, offer), offer.price, error))
            };
            match err {
                PaymentError::Required => ApiError::Payment {
                    required: required(bearer_hint(parts)),
                    code: "PAYMENT_REQUIRED",
                },
                PaymentError::Refused(refusal) => ApiError::Payment {
                    required: required(Some(refusal.to_string())),
                    code: "PAYMENT_INVALID",
                },
                PaymentError::IdentifierTaken => ApiError::PaymentIdentifierConflict,
                PaymentError::InProgress => ApiError::PaymentInProgress,
                PaymentError::Store(e) => e.into(),
                PaymentError::Facilitator(e) => ApiError::FacilitatorUnavailable(e.to_string()),
                PaymentError::Internal(cause) => ApiError::Internal(cause),
            }
        })
}

/// For a caller that sent its key as `Authorization: Bearer` (as many APIs take one): what to do
/// instead, in the 402's sentence. Nothing for anyone else.
fn bearer_hint(parts: &Parts) -> Option<String> {
    let authorization = parts.headers.get(axum::http::header::AUTHORIZATION)?;
    let bearer = authorization
        .as_bytes()
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"bearer "));
    bearer.then(|| {
        "payment required: an Authorization: Bearer header is not read here; send the API key \
         in the X-API-KEY header, or pay with x402 (see accepts)"
            .to_owned()
    })
}

/// What paid work answers: charged, or not charged because it replays an answer that was paid
/// for the first time it was given.
pub enum Charge<T> {
    Yes(T),
    Replay(T),
}

/// Run `work` for the accepted payment `paid`, then settle it, void it or leave it open, as
/// [`lifecycle::after_work`] decides. A caller that hangs up stops neither: the router runs every
/// request in a task of its own (see [`super::detached`]). If the work outlasts
/// [`lifecycle::WORK_LIMIT`], the caller gets a 502 and the payment stays open for the sweeper.
pub async fn settle_after<T>(
    state: &AppState,
    paid: Paid,
    now: Millis,
    work: impl Future<Output = Result<Charge<T>, ApiError>>,
) -> Result<(T, Option<SettlementResponse>), ApiError> {
    let Some(payments) = &state.payments else {
        return Err(ApiError::Internal(
            "paid work without payments configured".into(),
        ));
    };
    let ended = tokio::time::timeout(lifecycle::WORK_LIMIT, work).await;
    if let Some(first) = &paid.retry {
        // Resent under its payment identifier: the work answers again (a lease mutation replays
        // its record), settled by the first call; nothing is settled or voided now.
        let settlement = resettled(&paid, first);
        return match ended {
            Ok(Ok(Charge::Yes(answer) | Charge::Replay(answer))) => Ok((answer, Some(settlement))),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(ApiError::StoreUnavailable(
                "a paid call's retry outlasted its limit".into(),
            )),
        };
    }
    let (result, work) = match ended {
        Ok(Ok(Charge::Yes(answer))) => (Ok(answer), Work::Answered),
        Ok(Ok(Charge::Replay(answer))) => (Ok(answer), Work::Replayed),
        Ok(Err(err)) => (Err(err), Work::Failed),
        Err(_) => (
            Err(ApiError::StoreUnavailable(
                "paid work outlasted its limit; its payment is left to the sweeper".into(),
            )),
            Work::TimedOut,
        ),
    };
    let settlement = match lifecycle::after_work(work) {
        AfterWork::Settle => Some(payments.settle(&paid, now).await),
        AfterWork::Void(reason) => {
            // A failed call's own code says more than the rule's general reason.
            let reason = result.as_ref().err().map_or(reason, ApiError::code);
            payments.void(&paid, reason, now).await;
            None
        }
        AfterWork::LeaveOpen => None,
    };
    result.map(|answer| (answer, settlement))
}

/// The answer kept for a paid call resent under its payment identifier (on routes that keep one:
/// claims, lease reads), with the first call's settlement; or, as [`lifecycle::kept_answer`]
/// decides, in progress or unknown.
pub fn kept(
    state: &AppState,
    paid: &Paid,
    first: &FirstUse,
    now: Millis,
) -> Result<(StatusCode, serde_json::Value, SettlementResponse), ApiError> {
    let grace = state
        .payments
        .as_ref()
        .map_or(lifecycle::SWEEP_GRACE, |p| p.sweep_grace());
    let (status, body) = match (
        lifecycle::kept_answer(first.answer.is_some(), first.accepted, now, grace),
        &first.answer,
    ) {
        (Kept::Give, Some(answer)) => answer,
        (Kept::Wait, _) => return Err(ApiError::PaymentInProgress),
        (Kept::Unknown | Kept::Give, _) => return Err(ApiError::PaymentAnswerUnknown),
    };
    let status = StatusCode::from_u16(*status)
        .map_err(|_| ApiError::Internal("a kept answer has no valid status".into()))?;
    let body = serde_json::from_str(body)
        .map_err(|e| ApiError::Internal(format!("a kept answer is not JSON: {e}")))?;
    Ok((status, body, resettled(paid, first)))
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
