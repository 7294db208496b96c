//! The tools: names, descriptions, annotations and the published schemas as their input and
//! output schemas.

use crate::schema::{
    CLAIM_ANSWER_JSON, CLAIM_FREE_INPUT_JSON, LEASE_ANSWER_JSON, LeaseTool, lease_tool,
};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::sync::Arc;

/// A published schema as an MCP tool's input or output schema (without `$schema`).
fn tool_schema(text: &str) -> Arc<JsonObject> {
    let mut value: Value = serde_json::from_str(text).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

/// The tools, built once: their schemas are parsed from the published JSON at the first list.
pub(super) static TOOLS: std::sync::LazyLock<Vec<Tool>> = std::sync::LazyLock::new(tools);

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            LeaseTool::Lease.name(),
            "Leases with fencing tokens: op acquire, renew, release, get or check a named resource for 1-3600 s. \
             Every new acquisition returns a strictly larger fencingToken; pass it to the store you write to. \
             limit (1-64) lets up to that many holders in at once, a token each. \
             tenantId is required with an API key (a paying wallet is its own tenant); requestId makes a retry safe. The answer is signed (_provenance).",
            tool_schema(&lease_tool(LeaseTool::Lease).0.to_string()),
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
            LeaseTool::Read.name(),
            "Read a lease without changing it: op get shows the resource's live permits (holders, fencingTokens, expiry); \
             op check answers whether a fencing token (of a holder, if given) is still a live permit's: current true or false. \
             tenantId is required with an API key. The answer is signed (_provenance).",
            tool_schema(&lease_tool(LeaseTool::Read).0.to_string()),
        )
        .with_raw_output_schema(tool_schema(LEASE_ANSWER_JSON))
        // It only reads: nothing changes, and the same call answers the same while nothing else
        // writes.
        .with_annotations(
            ToolAnnotations::with_title("Read a lease or check a fencing token")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        Tool::new(
            LeaseTool::List.name(),
            "List your tenant's resources that have a live permit or a waiter, by name: each with its limit, holders \
             (fencingToken, expiresAt) and waiters. prefix filters by name; pageSize 1-100 (default 50); send nextCursor \
             back as cursor for the next page (null: the end). Advisory (an index, about 2 s behind): use lease_read to decide. \
             tenantId is required with an API key. The answer is signed (_provenance).",
            tool_schema(&lease_tool(LeaseTool::List).0.to_string()),
        )
        .with_raw_output_schema(tool_schema(LEASE_ANSWER_JSON))
        .with_annotations(
            ToolAnnotations::with_title("List live leases")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        Tool::new(
            LeaseTool::Audit.name(),
            "The revoke audit of your tenant, newest first (kept 90 days): each entry's time, actor (key:<id> or the wallet), \
             resource, the permits it ended and the reason. resource filters; cursor and pageSize page. \
             Only for API keys with the admin role and paying wallets (others: 403 FORBIDDEN). The answer is signed (_provenance).",
            tool_schema(&lease_tool(LeaseTool::Audit).0.to_string()),
        )
        .with_raw_output_schema(tool_schema(LEASE_ANSWER_JSON))
        .with_annotations(
            ToolAnnotations::with_title("Read the revoke audit")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        Tool::new(
            LeaseTool::Revoke.name(),
            "Force-release: end a holder's permit of a resource (holder), or every permit of it, at once, with a reason \
             (1-200 characters) kept in the audit. Waiters are served as after a release; the revoked holder's next renew \
             or release fails with REVOKED. Only for API keys with the admin role and paying wallets in their own tenant \
             (others: 403 FORBIDDEN, nothing changes). requestId makes a retry safe. The answer is signed (_provenance).",
            tool_schema(&lease_tool(LeaseTool::Revoke).0.to_string()),
        )
        .with_raw_output_schema(tool_schema(LEASE_ANSWER_JSON))
        // It ends another holder's permit: destructive; a second revoke of the same permit
        // finds nothing to end (NO_HOLD), but a repeated call without requestId may end a newer
        // one, so not idempotent.
        .with_annotations(
            ToolAnnotations::with_title("Revoke a lease (audited force-release)")
                .read_only(false)
                .destructive(true)
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
