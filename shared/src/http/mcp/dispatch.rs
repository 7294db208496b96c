//! The tools' calls: the MCP server handler, each tool on the same code as its HTTP route, and
//! a tool's error as a result the caller (the model) can read.

use super::catalogue::TOOLS;
use super::outcome::{Account, Outcome, OutcomeSlot};
use crate::auth::KeyHolder;
use crate::claims::Plan;
use crate::clock::now_ms;
use crate::http::caller::malformed_account;
use crate::http::claims::note as claim_note;
use crate::http::claims::{FreeClaim, answer_body, check, free_claim};
use crate::http::error::Failure;
use crate::http::observe::Note;
use crate::http::{ApiError, AppState, lease};
use crate::schema::{LeaseTool, claim_free_input, lease_tool};
use crate::store::usage::measured;
use crate::tenant::Tenant;
use crate::x402::check::Refusal;
use crate::x402::types::{PaymentPayload, SettlementResponse};
use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams,
    ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

#[derive(Clone)]
pub(super) struct LeaseTools {
    pub(super) state: AppState,
}

/// An error the caller (the model) can read; its cause goes to the request's log line (through
/// the [`OutcomeSlot`]), never here.
fn tool_error(err: ApiError) -> CallToolResult {
    // A 402's body is the x402 MCP binding's offer itself (with our code, as over HTTP), for
    // the client to pay and call again with the payment in `_meta`.
    let mut body = err.body();
    if err.payment_body().is_none() {
        body["status"] = json!(err.status().as_u16());
    }
    CallToolResult::structured_error(body)
}

/// Who is calling a tool: an API key's account, or a wallet paying per call (the x402 MCP
/// binding: the payment in the request's `_meta`).
enum ToolCaller<'a> {
    Account(&'a KeyHolder),
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
            // Each lease tool takes only its ops' input: a read-only tool can change nothing, and
            // only the destructive one revokes.
            _ if let Some(tool) = LeaseTool::named(name) => {
                let schema = lease_tool(tool).1;
                let (request, request_sha256) = lease::validated(arguments, schema)?;
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
                let scope = Tenant::for_account(&account.account).ok_or_else(malformed_account)?;
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
                "Use `lease` to make sure only one agent (or at most N, with limit) works on a task at a time, `lease_read` to see who holds a resource or whether a fencing token is still current, and `claim_free` for a short hold on a key.",
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
        let call = self.call(&request.name, arguments, caller);
        let hang_up = parts.extensions.get::<super::HangUpOf>().cloned();
        let (called, usage) = match hang_up {
            Some(super::HangUpOf(watch)) => {
                measured(Box::pin(crate::service::watching_hang_up(watch, call))).await
            }
            None => measured(Box::pin(call)).await,
        };
        let mut outcome = Outcome {
            usage,
            ..Outcome::default()
        };
        let result = match called {
            Ok(answered) => {
                outcome.note = Some(answered.note);
                let mut result = CallToolResult::structured(answered.content);
                // The text is the answer's `data` alone: the signed document is in
                // structuredContent, and repeating it as text doubled every result (about
                // 5 kB of an agent's context; issue #42).
                if let Some(data) = result
                    .structured_content
                    .as_ref()
                    .and_then(|v| v.get("data"))
                {
                    result.content = vec![ContentBlock::text(data.to_string())];
                }
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
