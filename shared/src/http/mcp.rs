//! POST /mcp: the lease tool (and free claims) over MCP, streamable HTTP, stateless, JSON
//! answers: fits Lambda, where no session outlives a request. The tools take the same input
//! schemas as the HTTP routes and answer the same `data` and `_provenance`. Callers bring an API
//! key, or (with payments on) a wallet that pays per `lease` call over the x402 MCP binding: the
//! offer comes back as the tool result, the payment goes in the call's `_meta["x402/payment"]`,
//! and the settlement in the result's `_meta["x402/payment-response"]`.

use super::body::read_limited;
use super::caller::malformed_account;
use super::claims::note as claim_note;
use super::claims::{FreeClaim, answer_body, check, free_claim};
use super::error::Failure;
use super::observe::Note;
use super::{ApiError, AppState, Caller, lease};
use crate::claims::Plan;
use crate::clock::now_ms;
use crate::config::{authority_host, default_port};
use crate::schema::{
    CLAIM_ANSWER_JSON, CLAIM_FREE_INPUT_JSON, LEASE_ANSWER_JSON, LEASE_INPUT_JSON, claim_free_input,
};
use crate::store::usage::{Usage, measured};
use crate::tenant::Tenant;
use crate::x402::check::Refusal;
use crate::x402::types::{PaymentPayload, SettlementResponse};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The account of the API key that authenticated the MCP request.
#[derive(Clone)]
struct Account(String);

/// What a tool call leaves for its request's log line: its note, the cause of a failure, and its
/// store usage (rmcp runs the call in a task of its own, out of the request's measured scope).
#[derive(Default)]
struct Outcome {
    note: Option<Note>,
    failure: Option<Failure>,
    usage: Usage,
}

/// rmcp answers the HTTP request itself, so the outcome goes through the request's extensions
/// (shared) and [`require_key`] puts it on the response, as a route's handler would.
#[derive(Clone, Default)]
struct OutcomeSlot(Arc<std::sync::Mutex<Outcome>>);

impl OutcomeSlot {
    fn put(&self, outcome: Outcome) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = outcome;
        }
    }

    fn take(&self) -> Outcome {
        self.0
            .lock()
            .map(|mut slot| std::mem::take(&mut *slot))
            .unwrap_or_default()
    }
}

#[derive(Clone)]
struct LeaseTools {
    state: AppState,
}

/// A published schema as an MCP tool's input or output schema (without `$schema`).
fn tool_schema(text: &str) -> Arc<JsonObject> {
    let mut value: Value = serde_json::from_str(text).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

/// The tools, built once: their schemas are parsed from the published JSON at the first list.
static TOOLS: std::sync::LazyLock<Vec<Tool>> = std::sync::LazyLock::new(tools);

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "lease",
            "Leases with fencing tokens: op acquire, renew, release or get a named resource for 1-3600 s. \
             Every new acquisition returns a strictly larger fencingToken; pass it to the store you write to. \
             tenantId is required with an API key (a paying wallet is its own tenant); requestId makes a retry safe. The answer is signed (_provenance).",
            tool_schema(LEASE_INPUT_JSON),
        )
        .with_raw_output_schema(tool_schema(LEASE_ANSWER_JSON))
        // acquire and renew change the lease, so not read-only; nothing is destroyed (a release
        // ends only the caller's own hold, by its token); repeated calls are not without effect
        // (a repeated acquire by the holder extends it) unless they carry the same requestId,
        // which a per-tool hint cannot say; and only this service is touched.
        .with_annotations(
            ToolAnnotations::with_title("Lease with fencing tokens")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        Tool::new(
            "claim_free",
            "A free 300 s exclusive hold on a key for your account: outcome acquired, or held with mine \
             (true when the holder is the one you sent: resume your work).",
            tool_schema(CLAIM_FREE_INPUT_JSON),
        )
        .with_raw_output_schema(tool_schema(CLAIM_ANSWER_JSON))
        // A claim takes a hold and uses up the free quota: neither read-only nor idempotent;
        // it never takes a live hold away from anyone.
        .with_annotations(
            ToolAnnotations::with_title("Free short hold on a key")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
    ]
}

/// An error the caller (the model) can read; its cause goes to the request's log line (through
/// the [`OutcomeSlot`]), never here.
fn tool_error(err: ApiError) -> CallToolResult {
    if let Some(offer) = err.payment_body() {
        // The x402 MCP binding: the offer itself is the result (with our code, as over HTTP),
        // as structured content and as its JSON text, for the client to pay and call again with
        // the payment in `_meta`.
        return CallToolResult::structured_error(offer);
    }
    let status = err.status().as_u16();
    let mut body = json!({"error": err.to_string(), "code": err.code(), "status": status});
    if let ApiError::InvalidInput(witnesses) = &err {
        body["witnesses"] = json!(witnesses);
    }
    CallToolResult::structured_error(body)
}

/// Who is calling a tool: an API key's account, or a wallet paying per call (the x402 MCP
/// binding: the payment in the request's `_meta`).
enum ToolCaller<'a> {
    Account(&'a str),
    Wallet {
        parts: &'a Parts,
        payment: Option<Result<Box<PaymentPayload>, Refusal>>,
    },
}

/// The request `_meta` key of an x402 payment, and the result `_meta` key of its settlement.
const PAYMENT_META: &str = "x402/payment";
const PAYMENT_RESPONSE_META: &str = "x402/payment-response";

/// The payment in a tool call's `_meta`, if it has one (rmcp moves the request's `_meta` into
/// the call's context; the params' own copy is looked at too).
fn payment_in(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<Result<Box<PaymentPayload>, Refusal>> {
    let value = context
        .meta
        .0
        .get(PAYMENT_META)
        .or_else(|| request.meta.as_ref()?.0.get(PAYMENT_META))?;
    Some(
        serde_json::from_value(value.clone())
            .map_err(|e| Refusal::Malformed(format!("_meta[\"{PAYMENT_META}\"]: {e}"))),
    )
}

/// What a tool call answers: its structured content, its log note, and the settlement of a paid
/// call.
struct Answered {
    content: Value,
    note: Note,
    settlement: Option<SettlementResponse>,
}

impl LeaseTools {
    /// Carry out tool `name` for `caller`.
    async fn call(
        &self,
        name: &str,
        arguments: Value,
        caller: ToolCaller<'_>,
    ) -> Result<Answered, ApiError> {
        match name {
            "lease" => {
                let (request, request_sha256) = lease::validated(arguments)?;
                let replied = match caller {
                    ToolCaller::Account(account) => {
                        lease::for_account(&self.state, account, &request, request_sha256).await?
                    }
                    ToolCaller::Wallet { parts, payment } => {
                        Box::pin(lease::paid_for(
                            &self.state,
                            parts,
                            payment.map(|p| p.map(|boxed| *boxed)),
                            request,
                            request_sha256,
                            now_ms(),
                        ))
                        .await?
                    }
                };
                Ok(Answered {
                    content: replied.body,
                    note: replied.note,
                    settlement: replied.settlement,
                })
            }
            "claim_free" => {
                let ToolCaller::Account(account) = caller else {
                    return Err(ApiError::Unauthorized(
                        "claim_free over MCP needs an API key; a wallet proves itself to POST /claim/free with sign-in-with-x",
                    ));
                };
                let claim: FreeClaim = check(arguments, claim_free_input())?;
                let scope = Tenant::for_account(account).ok_or_else(malformed_account)?;
                let outcome = free_claim(&self.state, &scope, &claim, now_ms()).await?;
                let (status, body) = answer_body(outcome, Plan::Free, None);
                Ok(Answered {
                    content: body,
                    note: claim_note("claim_free", status, &scope),
                    settlement: None,
                })
            }
            _ => Err(ApiError::NotFound),
        }
    }
}

impl ServerHandler for LeaseTools {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("leasekit", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Use `lease` to make sure only one agent works on a task at a time, and `claim_free` for a short hold on a key.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(TOOLS.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(parts) = context.extensions.get::<Parts>() else {
            return Ok(tool_error(ApiError::Internal(
                "a tool call without its HTTP request".into(),
            ))
            .into());
        };
        let slot = parts.extensions.get::<OutcomeSlot>();
        let caller = match parts.extensions.get::<Account>() {
            Some(Account(account)) => ToolCaller::Account(account),
            None => ToolCaller::Wallet {
                parts,
                payment: payment_in(&request, &context),
            },
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        // Boxed: a tool call's future is large (the paid path most), and rmcp polls it deep in
        // its own stack.
        let (called, usage) = measured(Box::pin(self.call(&request.name, arguments, caller))).await;
        let mut outcome = Outcome {
            usage,
            ..Outcome::default()
        };
        let result = match called {
            Ok(answered) => {
                outcome.note = Some(answered.note);
                let mut result = CallToolResult::structured(answered.content);
                if let Some(settlement) = answered.settlement {
                    let mut meta = JsonObject::new();
                    meta.insert(PAYMENT_RESPONSE_META.into(), json!(settlement));
                    result.meta = Some(MetaObject(meta));
                }
                result
            }
            Err(ApiError::NotFound) => {
                return Err(McpError::invalid_params(
                    format!("no tool named {}", request.name),
                    None,
                ));
            }
            Err(err) => {
                outcome.failure = err.cause().map(|cause| Failure(cause.to_owned()));
                tool_error(err)
            }
        };
        if let Some(slot) = slot {
            slot.put(outcome);
        }
        Ok(result.into())
    }
}

/// The tool call's outcome onto its HTTP response, for the request's log line.
fn answer_with_outcome(mut response: Response, slot: &OutcomeSlot) -> Response {
    let outcome = slot.take();
    crate::store::usage::add(outcome.usage);
    if let Some(note) = outcome.note {
        response.extensions_mut().insert(note);
    }
    if let Some(failure) = outcome.failure {
        response.extensions_mut().insert(failure);
    }
    response
}

/// Callers with a valid API key reach the MCP service with their account; without a key, only
/// where payments are on (a wallet pays per call). A bad key is refused here.
async fn require_key(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match state.auth.caller(&parts).await {
        Ok(Caller::Account(account)) => {
            request = Request::from_parts(parts, body);
            request.extensions_mut().insert(Account(account));
            let slot = OutcomeSlot::default();
            request.extensions_mut().insert(slot.clone());
            answer_with_outcome(next.run(request).await, &slot)
        }
        // A wallet pays per tool call, inside MCP: listing the tools is free, and a call
        // without its payment is answered with the offer as a tool result.
        Ok(Caller::Anonymous) if state.payments.is_some() => {
            request = Request::from_parts(parts, body);
            let slot = OutcomeSlot::default();
            request.extensions_mut().insert(slot.clone());
            answer_with_outcome(next.run(request).await, &slot)
        }
        Ok(Caller::Anonymous) => {
            ApiError::Unauthorized("an API key (X-API-KEY) is required").into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// The contract's checks, before rmcp sees the request, and its error shape on whatever rmcp
/// still refuses: POST only (405), a `Host` and `Origin` of this service (403: the MCP
/// specification asks HTTP servers to validate both against DNS rebinding), JSON content (415),
/// at most 64 KiB (413), valid JSON (400 INVALID_JSON), one message, not a batch (400
/// BATCH_NOT_SUPPORTED). Every refusal is `{error, code}` JSON.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let checked = check_request(&state, &parts);
    let bytes = match checked {
        Ok(()) => {
            read_limited(body)
                .await
                .and_then(|bytes| match crate::strict_json::parse(&bytes) {
                    Ok(Value::Object(message)) => {
                        let mistyped = mistyped_call(&message);
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

/// rmcp answers a known method with unreadable params as an unknown one (-32601, "method not
/// found"); for a mistyped `tools/call` that answer becomes JSON-RPC's invalid params (-32602).
/// Only rmcp's own answer is changed, so every check before it (the key, the id, the version,
/// Accept) still stands.
async fn invalid_params(response: Response, reason: String) -> Response {
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
    if text(header::ORIGIN).is_some_and(|origin| !origin_allowed(state, origin)) {
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

/// rmcp's own refusals are plain text: give them the error shape of every other route (`shared/schemas/error.json`).
async fn as_json_error(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    // [`guard`] let only JSON bodies through, so a 415 from rmcp is a message it could not read
    // as JSON-RPC (a `_meta` or an `id` of the wrong type): the caller's bad request, a 400.
    let status = if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        parts.status = StatusCode::BAD_REQUEST;
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    let code = match status {
        StatusCode::BAD_REQUEST => "INVALID_REQUEST",
        StatusCode::FORBIDDEN => "FORBIDDEN",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::METHOD_NOT_ALLOWED => "METHOD_NOT_ALLOWED",
        StatusCode::NOT_ACCEPTABLE => "NOT_ACCEPTABLE",
        StatusCode::PAYLOAD_TOO_LARGE => "PAYLOAD_TOO_LARGE",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "UNSUPPORTED_MEDIA_TYPE",
        s if s.is_server_error() => "INTERNAL",
        _ => "MCP_REQUEST_REFUSED",
    };
    let error = if status.is_server_error() {
        // Our own failure: nothing of it goes to the caller.
        tracing::error!(status = status.as_u16(), body = %String::from_utf8_lossy(&text), "MCP service failure");
        "internal error".to_owned()
    } else {
        String::from_utf8_lossy(&text).into_owned()
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = json!({"error": error, "code": code}).to_string();
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// The /mcp route: stateless (no sessions), JSON answers. rmcp's own Host check is off: [`guard`]
/// checks Host and Origin against the configured public URL and answers in the shape of `shared/schemas/error.json`.
pub fn router(state: AppState) -> Router {
    let tools = LeaseTools {
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
        .layer(middleware::from_fn_with_state(state.clone(), require_key))
        .layer(middleware::from_fn_with_state(state, guard))
}
