//! The API error: every non-200 answer of every route goes through this one `IntoResponse`, as
//! `{"error": <sentence>, "code": <UPPER_SNAKE>}` plus `witnesses` for invalid input.

use crate::service::lease::LeaseError;
use crate::store::StoreError;
use crate::witness::Witness;
use crate::x402::types::PaymentRequired;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

/// The x402 v2 header carrying the base64 PaymentRequired.
pub const PAYMENT_REQUIRED_HEADER: &str = "PAYMENT-REQUIRED";
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("{}", invalid_input_sentence(.0))]
    InvalidInput(Vec<Witness>),
    #[error("the body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("the body did not arrive within {0} s")]
    RequestTimeout(u64),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error(
        "requestId was used before with different input; use a new requestId for a new request"
    )]
    IdempotencyConflict,
    #[error(
        "this payment identifier was used with another payment or another request; use a new one for a new payment"
    )]
    PaymentIdentifierConflict,
    #[error("the first call with this payment has not finished; retry shortly")]
    PaymentInProgress,
    #[error(
        "this payment was charged but its answer was not kept; call again with a new payment (a claim with the same key and holder: mine says whether the hold is yours)"
    )]
    PaymentAnswerUnknown,
    /// The store failed or its answer is unknown (the cause is for the log).
    #[error(
        "the store is unavailable or its answer is unknown; retry (with the same requestId, if the call had one)"
    )]
    StoreUnavailable(String),
    #[error("{}", .required.error.as_deref().unwrap_or("payment required: pay with x402 (see accepts), or send an API key in the X-API-KEY header"))]
    Payment {
        required: Box<PaymentRequired>,
        code: &'static str,
    },
    /// No usable answer from the facilitator (the cause is for the log).
    #[error("the payment facilitator is unavailable; nothing was charged, retry")]
    FacilitatorUnavailable(String),
    /// Over a bound of the caller's own: answered 429 with `Retry-After` (seconds).
    #[error("{reason}")]
    RateLimited { retry_after: u64, reason: String },
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    UnsupportedMediaType(&'static str),
    #[error("JSON-RPC batches are not accepted: send one message per request")]
    BatchNotSupported,
    /// A request the MCP transport could not read as a JSON-RPC message (its reason).
    #[error("{0}")]
    InvalidRequest(String),
    /// The caller does not accept what the route answers (its reason).
    #[error("{0}")]
    NotAcceptable(String),
    /// The MCP transport refused the request with a status this vocabulary has no other name
    /// for (its reason).
    #[error("{1}")]
    Refused(StatusCode, String),
    #[error("no such route")]
    NotFound,
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    /// Our own failure: a 500 with a generic body; the cause is for the log, never the answer.
    #[error("internal error")]
    Internal(String),
}

fn invalid_input_sentence(witnesses: &[Witness]) -> String {
    match witnesses.first() {
        Some(w) if witnesses.len() == 1 => {
            format!("invalid input at {}: {}", pointer(&w.path), w.detail)
        }
        Some(w) => format!(
            "invalid input at {} and {} more: {}",
            pointer(&w.path),
            witnesses.len() - 1,
            w.detail
        ),
        None => "invalid input".to_owned(),
    }
}

fn pointer(path: &str) -> &str {
    if path.is_empty() { "the body" } else { path }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson(_)
            | Self::InvalidInput(_)
            | Self::InvalidRequest(_)
            | Self::BatchNotSupported => StatusCode::BAD_REQUEST,
            Self::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::Refused(status, _) => *status,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::IdempotencyConflict
            | Self::PaymentIdentifierConflict
            | Self::PaymentInProgress
            | Self::PaymentAnswerUnknown => StatusCode::CONFLICT,
            Self::StoreUnavailable(_) | Self::FacilitatorUnavailable(_) => StatusCode::BAD_GATEWAY,
            Self::Payment { .. } => StatusCode::PAYMENT_REQUIRED,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson(_) => "INVALID_JSON",
            Self::InvalidInput(_) => "INVALID_INPUT",
            Self::PayloadTooLarge(_) => "PAYLOAD_TOO_LARGE",
            Self::RequestTimeout(_) => "REQUEST_TIMEOUT",
            Self::Unauthorized(_) => "UNAUTHORIZED",
            Self::IdempotencyConflict => "IDEMPOTENCY_CONFLICT",
            Self::PaymentIdentifierConflict => "PAYMENT_IDENTIFIER_CONFLICT",
            Self::PaymentInProgress => "PAYMENT_IN_PROGRESS",
            Self::PaymentAnswerUnknown => "PAYMENT_ANSWER_UNKNOWN",
            Self::StoreUnavailable(_) => "STORE_UNAVAILABLE",
            Self::FacilitatorUnavailable(_) => "FACILITATOR_UNAVAILABLE",
            Self::Payment { code, .. } => code,
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::Forbidden(_) => "FORBIDDEN",
            Self::UnsupportedMediaType(_) => "UNSUPPORTED_MEDIA_TYPE",
            Self::BatchNotSupported => "BATCH_NOT_SUPPORTED",
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::NotAcceptable(_) => "NOT_ACCEPTABLE",
            Self::Refused(..) => "MCP_REQUEST_REFUSED",
            Self::NotFound => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::Internal(_) => "INTERNAL_ERROR",
        }
    }

    /// A 402's body: the x402 PaymentRequired with our `code` (and an `error` sentence when the
    /// offer has none); `None` for other errors. Over HTTP and as an MCP tool result alike.
    pub fn payment_body(&self) -> Option<serde_json::Value> {
        let Self::Payment { required, code } = self else {
            return None;
        };
        let mut body = serde_json::to_value(required.as_ref()).unwrap_or_default();
        body["code"] = json!(code);
        if body.get("error").is_none() {
            body["error"] = json!(self.to_string());
        }
        Some(body)
    }

    /// The JSON body of this error, the same over HTTP and as an MCP tool result: `{error, code}`,
    /// with `witnesses` for invalid input; a 402's is [`Self::payment_body`].
    pub fn body(&self) -> serde_json::Value {
        if let Some(offer) = self.payment_body() {
            return offer;
        }
        let mut body = json!({"error": self.to_string(), "code": self.code()});
        // Every 400's witnesses are capped alike, whichever check made them (a body of 2,300
        // repeated leases made 2,299 DUPLICATE witnesses: the attack of 2026-12-05).
        if let Self::InvalidInput(witnesses) = self {
            body["witnesses"] = json!(crate::witness::capped(witnesses));
        }
        body
    }

    /// What went wrong on our side or the store's, for the request's log line; `None` for the
    /// caller's own errors.
    pub fn cause(&self) -> Option<&str> {
        match self {
            Self::StoreUnavailable(cause)
            | Self::FacilitatorUnavailable(cause)
            | Self::Internal(cause) => Some(cause),
            _ => None,
        }
    }
}

/// The cause of a failure answer, put on the response for the request's one log line
/// ([`super::observe::log_request`]): logged there, once, and never sent.
#[derive(Debug, Clone)]
pub struct Failure(pub String);

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(_) => Self::StoreUnavailable(err.to_string()),
            // Stored data this code cannot read is ours to fix, not the store's to retry: a 500
            // (it used to be a 502, which tells the caller to try again).
            StoreError::Corrupt(_) | StoreError::Internal(_) => Self::Internal(err.to_string()),
        }
    }
}

impl From<LeaseError> for ApiError {
    fn from(err: LeaseError) -> Self {
        match err {
            LeaseError::IdempotencyConflict => Self::IdempotencyConflict,
            LeaseError::Missing(field) => Self::InvalidInput(vec![Witness::new(
                "REQUIRED",
                &format!("/{field}"),
                format!("{field} is required for this op"),
            )]),
            LeaseError::Contention => {
                Self::StoreUnavailable("lease contention exhausted the retry rounds".into())
            }
            LeaseError::TooLargeToKeep(bytes) => Self::InvalidInput(vec![Witness::new(
                "ANSWER_TOO_LARGE",
                "/requestId",
                format!(
                    "this answer ({} KB) is larger than a requestId's record can keep (at most {} KB); \
                     send the call without requestId, or the set in smaller parts. Nothing was written",
                    bytes / 1024,
                    crate::service::lease::MAX_KEPT_ANSWER_BYTES / 1024
                ),
            )]),
            LeaseError::BadCursor => Self::InvalidInput(vec![Witness::new(
                "CURSOR",
                "/cursor",
                "cursor is not one this service gave your tenant for this op: send the nextCursor of your previous page, unchanged",
            )]),
            LeaseError::TooManyWaits(waiting) => Self::RateLimited {
                retry_after: 1,
                reason: format!(
                    "this account already has {waiting} waiting calls in progress on this server, \
                     its share of the server's waits; nothing was done: retry after a second, or \
                     without waitSeconds"
                ),
            },
            LeaseError::Forbidden(why) => Self::Forbidden(why),
            LeaseError::Store(e) => e.into(),
            LeaseError::Internal(cause) => Self::Internal(cause),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let failure = self.cause().map(|cause| Failure(cause.to_owned()));
        let mut response = self.answer();
        if let Some(failure) = failure {
            response.extensions_mut().insert(failure);
        }
        response
    }
}

impl ApiError {
    fn answer(self) -> Response {
        let body = self.body();
        match &self {
            Self::RateLimited { retry_after, .. } => {
                let retry_after = [("retry-after", retry_after.to_string())];
                return (self.status(), retry_after, Json(body)).into_response();
            }
            Self::Payment { required, .. } => {
                // The x402 PaymentRequired, in the body (with our code) and base64 in the header.
                let required_json = serde_json::to_value(required.as_ref()).unwrap_or_default();
                let header = BASE64.encode(required_json.to_string());
                return (
                    self.status(),
                    [(PAYMENT_REQUIRED_HEADER, header)],
                    Json(body),
                )
                    .into_response();
            }
            _ => {}
        }
        (self.status(), Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parts(err: ApiError) -> (StatusCode, serde_json::Value) {
        let response = err.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    /// What each variant answers, as an exhaustive `match` (no `_` arm): a new variant does not
    /// compile until it is given its status and code here, and a sample in [`samples`].
    fn expected(err: &ApiError) -> (u16, &'static str) {
        match err {
            ApiError::InvalidJson(_) => (400, "INVALID_JSON"),
            ApiError::InvalidInput(_) => (400, "INVALID_INPUT"),
            ApiError::InvalidRequest(_) => (400, "INVALID_REQUEST"),
            ApiError::BatchNotSupported => (400, "BATCH_NOT_SUPPORTED"),
            ApiError::Unauthorized(_) => (401, "UNAUTHORIZED"),
            ApiError::Payment { .. } => (402, "PAYMENT_INVALID"),
            ApiError::Forbidden(_) => (403, "FORBIDDEN"),
            ApiError::NotFound => (404, "NOT_FOUND"),
            ApiError::MethodNotAllowed => (405, "METHOD_NOT_ALLOWED"),
            ApiError::NotAcceptable(_) => (406, "NOT_ACCEPTABLE"),
            ApiError::RequestTimeout(_) => (408, "REQUEST_TIMEOUT"),
            ApiError::IdempotencyConflict => (409, "IDEMPOTENCY_CONFLICT"),
            ApiError::PaymentIdentifierConflict => (409, "PAYMENT_IDENTIFIER_CONFLICT"),
            ApiError::PaymentInProgress => (409, "PAYMENT_IN_PROGRESS"),
            ApiError::PaymentAnswerUnknown => (409, "PAYMENT_ANSWER_UNKNOWN"),
            ApiError::PayloadTooLarge(_) => (413, "PAYLOAD_TOO_LARGE"),
            ApiError::UnsupportedMediaType(_) => (415, "UNSUPPORTED_MEDIA_TYPE"),
            ApiError::Refused(..) => (409, "MCP_REQUEST_REFUSED"),
            ApiError::RateLimited { .. } => (429, "RATE_LIMITED"),
            ApiError::Internal(_) => (500, "INTERNAL_ERROR"),
            ApiError::StoreUnavailable(_) => (502, "STORE_UNAVAILABLE"),
            ApiError::FacilitatorUnavailable(_) => (502, "FACILITATOR_UNAVAILABLE"),
        }
    }

    /// One value of every variant.
    fn samples() -> Vec<ApiError> {
        let required = crate::x402::types::PaymentRequired {
            x402_version: 2,
            error: None,
            resource: crate::x402::types::ResourceInfo {
                url: "http://h/api/v1/lease".into(),
                description: None,
                mime_type: None,
            },
            accepts: vec![],
            extensions: None,
        };
        vec![
            ApiError::InvalidJson("x".into()),
            ApiError::InvalidInput(vec![Witness::new(
                "REQUIRED",
                "/holder",
                "holder is required",
            )]),
            ApiError::InvalidRequest("x".into()),
            ApiError::BatchNotSupported,
            ApiError::Unauthorized("unknown API key"),
            ApiError::Payment {
                required: Box::new(required),
                code: "PAYMENT_INVALID",
            },
            ApiError::Forbidden("no"),
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::NotAcceptable("x".into()),
            ApiError::RequestTimeout(10),
            ApiError::IdempotencyConflict,
            ApiError::PaymentIdentifierConflict,
            ApiError::PaymentInProgress,
            ApiError::PaymentAnswerUnknown,
            ApiError::PayloadTooLarge(65536),
            ApiError::UnsupportedMediaType("json"),
            ApiError::Refused(StatusCode::CONFLICT, "x".into()),
            ApiError::RateLimited {
                retry_after: 30,
                reason: "x".into(),
            },
            ApiError::Internal("x".into()),
            ApiError::StoreUnavailable("x".into()),
            ApiError::FacilitatorUnavailable("x".into()),
        ]
    }

    #[tokio::test]
    async fn every_variant_has_its_status_and_code() {
        let samples = samples();
        let kinds: std::collections::HashSet<_> =
            samples.iter().map(std::mem::discriminant).collect();
        assert_eq!(kinds.len(), samples.len(), "one sample per variant");
        for err in samples {
            let (status, code) = expected(&err);
            assert_eq!((err.status().as_u16(), err.code()), (status, code));
            let (s, body) = parts(err).await;
            assert_eq!(s.as_u16(), status);
            assert_eq!(body["code"], code);
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
        }
    }

    #[tokio::test]
    async fn invalid_input_names_the_field() {
        let (_, body) = parts(ApiError::InvalidInput(vec![Witness::new(
            "REQUIRED",
            "/holder",
            "holder is required",
        )]))
        .await;
        assert_eq!(body["witnesses"][0]["path"], "/holder");
        assert!(body["error"].as_str().unwrap().contains("/holder"));
    }

    #[tokio::test]
    async fn a_402_carries_payment_required_in_body_and_header() {
        use crate::x402::types::{PaymentRequired, ResourceInfo};
        let required = PaymentRequired {
            x402_version: 2,
            error: Some("authorization.value must be exactly the price".into()),
            resource: ResourceInfo {
                url: "http://h/api/v1/lease".into(),
                description: None,
                mime_type: None,
            },
            accepts: vec![],
            extensions: None,
        };
        let response = ApiError::Payment {
            required: Box::new(required.clone()),
            code: "PAYMENT_INVALID",
        }
        .into_response();
        assert_eq!(response.status().as_u16(), 402);
        let header = response.headers()["PAYMENT-REQUIRED"]
            .to_str()
            .unwrap()
            .to_owned();
        let decoded: PaymentRequired =
            serde_json::from_slice(&BASE64.decode(header).unwrap()).unwrap();
        assert_eq!(decoded, required);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["code"], "PAYMENT_INVALID");
        assert_eq!(body["x402Version"], 2);
        assert_eq!(
            body["error"],
            "authorization.value must be exactly the price"
        );
    }

    #[tokio::test]
    async fn failure_details_go_to_the_log_line_never_to_the_caller() {
        let cases: [(ApiError, u16); 4] = [
            (StoreError::Unavailable("secret detail".into()).into(), 502),
            // Stored data we cannot read is ours too: a retry would find the same.
            (StoreError::Corrupt("secret detail".into()).into(), 500),
            // A request we could not build is our failure, not the store's: no retry advice.
            (StoreError::Internal("secret detail".into()).into(), 500),
            (LeaseError::Internal("secret detail".into()).into(), 500),
        ];
        for (err, status) in cases {
            let response = err.into_response();
            assert_eq!(response.status().as_u16(), status);
            let failure = response.extensions().get::<Failure>().cloned();
            assert!(failure.is_some_and(|f| f.0.contains("secret detail")));
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            let body = String::from_utf8(bytes.to_vec()).unwrap();
            assert!(!body.contains("secret detail"), "{body}");
        }
        // The caller's own errors carry no failure.
        let response = ApiError::NotFound.into_response();
        assert!(response.extensions().get::<Failure>().is_none());
    }
}
