//! POST /mcp: the lease tool (and free claims) over MCP, streamable HTTP, stateless, JSON
//! answers: fits Lambda, where no session outlives a request. An API key is required; the tools
//! take the same input schemas as the HTTP routes and answer the same `data` and `_provenance`.

use super::claims::{FreeClaim, answer_body, check, free_claim};
use super::{ApiError, AppState, Caller, lease};
use crate::claims::Plan;
use crate::clock::now_ms;
use crate::schema::{CLAIM_FREE_INPUT_JSON, LEASE_INPUT_JSON, claim_free_input};
use crate::tenant::Tenant;
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::sync::Arc;

/// The account of the API key that authenticated the MCP request.
#[derive(Clone)]
struct Account(String);

#[derive(Clone)]
struct LeaseTools {
    state: AppState,
}

fn input_schema(text: &str) -> Arc<JsonObject> {
    let mut value: Value = serde_json::from_str(text).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "lease",
            "Leases with fencing tokens: op acquire, renew, release or get a named resource for 1-3600 s. \
             Every new acquisition returns a strictly larger fencingToken; pass it to the store you write to. \
             tenantId is required; requestId makes a retry safe. The answer is signed (_provenance).",
            input_schema(LEASE_INPUT_JSON),
        ),
        Tool::new(
            "claim_free",
            "A free 300 s exclusive hold on a key for your account: outcome acquired, or held with mine \
             (true when the holder is the one you sent: resume your work).",
            input_schema(CLAIM_FREE_INPUT_JSON),
        ),
    ]
}

/// An error the caller (the model) can read: the API error's body as structured content.
fn tool_error(err: ApiError) -> CallToolResult {
    let status = err.status().as_u16();
    let mut body = json!({"error": err.to_string(), "code": err.code(), "status": status});
    if let ApiError::InvalidInput(witnesses) = &err {
        body["witnesses"] = json!(witnesses);
    }
    CallToolResult::structured_error(body)
}

impl LeaseTools {
    async fn call(&self, name: &str, arguments: Value, account: &str) -> Result<Value, ApiError> {
        match name {
            "lease" => {
                let answer = lease::for_account(&self.state, account, arguments).await?;
                serde_json::to_value(answer).map_err(|e| ApiError::InvalidJson(e.to_string()))
            }
            "claim_free" => {
                let claim: FreeClaim = check(arguments, claim_free_input())?;
                let scope = Tenant::for_account(account)
                    .ok_or(ApiError::Unauthorized("malformed account"))?;
                let outcome = free_claim(&self.state, &scope, &claim, now_ms()).await?;
                Ok(answer_body(outcome, Plan::Free, None).1)
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
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(Account(account)) = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Account>())
            .cloned()
        else {
            return Ok(
                tool_error(ApiError::Unauthorized("an API key (X-API-KEY) is required")).into(),
            );
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.call(&request.name, arguments, &account).await {
            Ok(answer) => CallToolResult::structured(answer),
            Err(ApiError::NotFound) => {
                return Err(McpError::invalid_params(
                    format!("no tool named {}", request.name),
                    None,
                ));
            }
            Err(err) => tool_error(err),
        };
        Ok(result.into())
    }
}

/// Only callers with a valid API key reach the MCP service; their account rides along.
async fn require_key(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match state.auth.caller(&parts).await {
        Ok(Caller::Account(account)) => {
            request = Request::from_parts(parts, body);
            request.extensions_mut().insert(Account(account));
            next.run(request).await
        }
        Ok(Caller::Anonymous) => {
            ApiError::Unauthorized("an API key (X-API-KEY) is required").into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// The /mcp route: stateless (no sessions), JSON answers, any Host (API Gateway's or a custom
/// domain; the API key is the access control).
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
        .layer(middleware::from_fn_with_state(state, require_key))
}
