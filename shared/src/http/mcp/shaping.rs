//! rmcp's own answers, reshaped: its plain-text refusals as every other route's JSON errors, and
//! its answer to a mistyped tool call as JSON-RPC's invalid params.

use crate::http::ApiError;
use crate::http::body::MAX_BODY_BYTES;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// rmcp answers a known method with unreadable params as an unknown one (-32601, "method not
/// found"); for a mistyped `tools/call` that answer becomes JSON-RPC's invalid params (-32602).
/// Only rmcp's own answer is changed, so every check before it (the key, the id, the version,
/// Accept) still stands.
pub(super) async fn invalid_params(response: Response, reason: String) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if response.status() != StatusCode::OK || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let mut answer: Value = match serde_json::from_slice(&bytes) {
        Ok(answer) => answer,
        Err(_) => return Response::from_parts(parts, axum::body::Body::from(bytes)),
    };
    if answer["error"]["code"] == -32601 {
        answer["error"] = json!({"code": -32602, "message": reason});
    }
    let body = answer.to_string();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// rmcp's own refusals, plain text or a bare JSON-RPC error (a 400 to a JSON-RPC response sent
/// to the server, say): give them the error shape of every other route
/// (`shared/schemas/error.json`). Our own refusals (the key check's) already have it.
pub(super) async fn as_json_error(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Whole: our own refusals pass here too, and one cut short would lose its shape.
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .unwrap_or_default();
    let json: Option<Value> = serde_json::from_slice(&bytes).ok();
    if json.as_ref().is_some_and(|b| b["code"].is_string()) {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    }
    let text = match json.as_ref().and_then(|b| b["error"]["message"].as_str()) {
        Some(message) => message.to_owned(),
        None => String::from_utf8_lossy(&bytes).into_owned(),
    };
    let err = match status {
        // The guard let only JSON bodies through, so a 415 from rmcp is a message it could not
        // read as JSON-RPC (a `_meta` or an `id` of the wrong type): the caller's bad request.
        StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::InvalidRequest(text)
        }
        StatusCode::FORBIDDEN => ApiError::Forbidden("the MCP transport refused this request"),
        StatusCode::NOT_FOUND => ApiError::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        StatusCode::NOT_ACCEPTABLE => ApiError::NotAcceptable(text),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(MAX_BODY_BYTES),
        // Our own failure: its text goes to the log line, never to the caller (it was answered
        // as code INTERNAL, unlike every other route's INTERNAL_ERROR).
        s if s.is_server_error() => ApiError::Internal(format!("MCP service failure {s}: {text}")),
        s => ApiError::Refused(s, text),
    };
    // The error's own answer, with what rmcp put on its response for the log line (a tool
    // call's note, a failure's cause) and its other headers.
    let mut answer = err.into_response();
    answer.extensions_mut().extend(parts.extensions);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    for (name, value) in &parts.headers {
        if !answer.headers().contains_key(name) {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    answer
}
