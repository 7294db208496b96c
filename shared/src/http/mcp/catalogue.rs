//! The tools: names, descriptions, annotations and the published schemas as their input and
//! output schemas.

use crate::schema::{
    CLAIM_ANSWER_JSON, CLAIM_FREE_INPUT_JSON, LEASE_ANSWER_JSON, LEASE_INPUT_JSON, lease_read_input,
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
            "lease",
            "Leases with fencing tokens: op acquire, renew, release, get or check a named resource for 1-3600 s. \
             Every new acquisition returns a strictly larger fencingToken; pass it to the store you write to. \
             limit (1-64) lets up to that many holders in at once, a token each. \
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
            "lease_read",
            "Read a lease without changing it: op get shows the resource's live permits (holders, fencingTokens, expiry); \
             op check answers whether a fencing token (of a holder, if given) is still a live permit's: current true or false. \
             tenantId is required with an API key. The answer is signed (_provenance).",
            tool_schema(&lease_read_input().0.to_string()),
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
