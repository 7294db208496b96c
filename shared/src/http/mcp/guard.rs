//! The contract's checks on /mcp before rmcp reads anything: method, Host and Origin (against
//! DNS rebinding), content type, size, JSON, one message.

use super::shaping::{as_json_error, invalid_params};
use crate::config::{authority_host, default_port};
use crate::http::body::read_limited;
use crate::http::{ApiError, AppState};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::CallToolRequestParams;
use serde::Deserialize;
use serde_json::Value;

/// The contract's checks, before rmcp sees the request, and its error shape on whatever rmcp
/// still refuses: POST only (405), a `Host` and `Origin` of this service (403: the MCP
/// specification asks HTTP servers to validate both against DNS rebinding), JSON content (415),
/// at most 64 KiB (413), valid JSON (400 INVALID_JSON), one message, not a batch (400
/// BATCH_NOT_SUPPORTED). Every refusal is `{error, code}` JSON.
pub(super) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let checked = check_request(&state, &parts);
    let bytes = match checked {
        Ok(()) => {
            read_limited(body)
                .await
                .and_then(|bytes| match crate::strict_json::parse(&bytes) {
                    Ok(Value::Object(mut message)) => {
                        let mistyped = mistyped_call(&message);
                        let unreadable = message.get("params").is_some_and(|p| !p.is_object());
                        let bytes = if mistyped.is_some() && unreadable {
                            // rmcp cannot read a message whose params are no object at all (its
                            // 400 has no id): it gets empty params instead, whose missing name it
                            // answers as any mistyped call, after every check of its own.
                            message.insert("params".into(), Value::Object(Default::default()));
                            Value::Object(message).to_string().into()
                        } else {
                            bytes
                        };
                        Ok((bytes, mistyped))
                    }
                    Ok(Value::Array(_)) => Err(ApiError::BatchNotSupported),
                    Ok(_) => Err(ApiError::InvalidJson(
                        "a JSON-RPC message is a JSON object".into(),
                    )),
                    Err(e) => Err(ApiError::InvalidJson(e.to_string())),
                })
        }
        Err(err) => Err(err),
    };
    let (bytes, mistyped) = match bytes {
        Ok(read) => read,
        Err(ApiError::MethodNotAllowed) => {
            let mut response = ApiError::MethodNotAllowed.into_response();
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        Err(err) => return err.into_response(),
    };
    let response = next
        .run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await;
    let response = as_json_error(response).await;
    match mistyped {
        Some(reason) => invalid_params(response, reason).await,
        None => response,
    }
}

/// Why a `tools/call`'s params are not a tool call's (a name that is not a string, arguments
/// that are not an object), if they are not. A `_meta` of the wrong type is left out: rmcp
/// cannot read that message at all, and its refusal is a 400.
fn mistyped_call(message: &serde_json::Map<String, Value>) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let params = message.get("params").unwrap_or(&Value::Null);
    if params.get("_meta").is_some_and(|meta| !meta.is_object()) {
        return None;
    }
    // Read in place, not cloned: a tool call's arguments may be most of 64 KiB.
    let error = CallToolRequestParams::deserialize(params).err()?;
    Some(format!("invalid tools/call params: {error}"))
}

/// Method, Host, Origin and content type, in that order.
fn check_request(state: &AppState, parts: &Parts) -> Result<(), ApiError> {
    if parts.method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let text = |name| {
        parts
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{0}"))
    };
    if !text(header::HOST).is_some_and(|host| host_allowed(state, host)) {
        return Err(ApiError::Forbidden(
            "the Host header is not this service's host",
        ));
    }
    // Every Origin header, not the first only: a second one must not ride along unchecked.
    let origins = parts.headers.get_all(header::ORIGIN).iter();
    if origins
        .map(|v| v.to_str().unwrap_or("\u{0}"))
        .any(|origin| !origin_allowed(state, origin))
    {
        return Err(ApiError::Forbidden(
            "requests from this Origin are not allowed",
        ));
    }
    let json = text(header::CONTENT_TYPE).is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or_default().trim();
        essence.eq_ignore_ascii_case("application/json")
    });
    if !json {
        return Err(ApiError::UnsupportedMediaType(
            "Content-Type must be application/json",
        ));
    }
    Ok(())
}

/// Loopback host names, accepted for local runs on any port.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// `host[:port]` of `scheme`, lowercase, without the scheme's default port; `None` if malformed.
fn normalized(authority: &str, scheme: &str) -> Option<String> {
    let parsed = authority.parse::<axum::http::uri::Authority>().ok()?;
    if authority.contains('@') || parsed.host().is_empty() {
        return None;
    }
    let host = parsed.host().to_ascii_lowercase();
    Some(match parsed.port_u16() {
        Some(port) if Some(port) != default_port(scheme) => format!("{host}:{port}"),
        _ => host,
    })
}

fn loopback(state: &AppState, authority: &str) -> bool {
    state.loopback_hosts && LOOPBACK.contains(&authority_host(authority))
}

/// The Host header names this service: its public host, or loopback on a local run.
fn host_allowed(state: &AppState, host: &str) -> bool {
    let scheme = if state.public.origin().starts_with("https:") {
        "https"
    } else {
        "http"
    };
    normalized(host, scheme).is_some_and(|h| h == state.public.authority() || loopback(state, &h))
}

/// A browser's Origin is this service's public origin. Where that origin is itself loopback (a
/// local run at its default URL), another loopback name for it is the same service
/// (`localhost` for `127.0.0.1`), on its scheme and port only: a page on another local port is
/// another site. A loopback Origin used to pass on any port or scheme, even with a public
/// `--public-url`.
fn origin_allowed(state: &AppState, origin: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false; // "null", or not an origin at all
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return false;
    }
    let Some(authority) = normalized(authority, &scheme) else {
        return false;
    };
    if format!("{scheme}://{authority}") == state.public.origin() {
        return true;
    }
    let port = |a: &str| a.strip_prefix(authority_host(a)).unwrap_or("").to_owned();
    let public = state.public.authority();
    state.public.origin().starts_with(&format!("{scheme}://"))
        && loopback(state, public)
        && loopback(state, &authority)
        && port(&authority) == port(public)
}
