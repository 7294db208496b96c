//! Reading a request body: size limit, JSON, then the route's schema. Nothing else in a handler
//! runs before this passes.

use super::error::ApiError;
use crate::schema::{Schema, normalize_integers};
use axum::body::Body;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Bodies above this many bytes are answered 413.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Read at most [`MAX_BODY_BYTES`] of `body`.
pub async fn read_limited(body: Body) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|err| {
            let too_large = std::error::Error::source(&err)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            if too_large {
                ApiError::PayloadTooLarge(MAX_BODY_BYTES)
            } else {
                ApiError::InvalidJson(format!("the body could not be read: {err}"))
            }
        })
}

/// Parse `bytes` as JSON, validate it against `schema`, read the integral numbers in `whole` as
/// integers, then deserialize it as `T`. Also returns the JSON as sent, for hashing.
pub fn parse_valid<T: DeserializeOwned>(
    bytes: &[u8],
    schema: &Schema,
    whole: &[&str],
) -> Result<(T, Value), ApiError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    validate_value(value, schema, whole)
}

/// Validate an already parsed JSON `value` as [`parse_valid`] does.
pub fn validate_value<T: DeserializeOwned>(
    mut value: Value,
    schema: &Schema,
    whole: &[&str],
) -> Result<(T, Value), ApiError> {
    schema.check(&value).map_err(ApiError::InvalidInput)?;
    normalize_integers(&mut value, whole);
    // The schema admitted it, so this only fails if the schema and the type disagree: say so.
    let typed = serde_json::from_value(value.clone()).map_err(|e| {
        ApiError::InvalidInput(vec![crate::witness::Witness::new(
            "SCHEMA",
            "",
            e.to_string(),
        )])
    })?;
    Ok((typed, value))
}
