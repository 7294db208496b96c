//! The tools: names, descriptions, annotations, and input and output schemas sized for an
//! agent's context window (issue #42: `tools/list` was 70 kB, each lease tool carrying the whole
//! request schema's rules and the 8 kB answer schema). A tool's input schema lists its fields
//! with their types, bounds and a line each; the rules between fields stay the server's, which
//! checks every call against the full published schema and answers a 400 naming the field. The
//! output schema says what the result holds; `/openapi.json` has its every field.

use crate::schema::{CLAIM_ANSWER_JSON, CLAIM_FREE_INPUT_JSON, LeaseTool, lease_tool};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::sync::Arc;

/// One line on each lease request field, for the tools' compact input schemas.
const FIELD_LINES: &[(&str, &str)] = &[
    ("op", "What to do."),
    (
        "tenantId",
        "Your namespace in your account (API key callers).",
    ),
    (
        "resource",
        "The name, e.g. deploy:prod; list and audit do without.",
    ),
    ("holder", "Your worker id; required to change anything."),
    (
        "session",
        "From open. acquire in it, not ttlSeconds: held as long as it lives.",
    ),
    ("session_read", "get: this session, not a resource."),
    (
        "session_revoke",
        "This session and its permits, not a resource.",
    ),
    ("token", "Your fencingToken (renew, release, check)."),
    ("ttlSeconds", "Lease length in seconds (default 30)."),
    (
        "limit",
        "acquire: how many may hold it at once, a token each (default 1).",
    ),
    (
        "waitSeconds",
        "acquire: wait this long in a first-come-first-served queue (default 0).",
    ),
    (
        "requestId",
        "Names this mutation: a retry with it applies once.",
    ),
    (
        "resources",
        "acquire of 2-50 resources at once, all or nothing.",
    ),
    (
        "leases",
        "renew or release of a set: each resource with its token.",
    ),
    ("value", "Your note on the permit (renew: absent keeps it)."),
    (
        "waitSeconds_read",
        "watch: wait up to this long for a change (default 20).",
    ),
    (
        "stateTag",
        "watch: the last stateTag seen; answers when it changes.",
    ),
    ("reason", "Why (kept in the audit)."),
    (
        "holder_revoke",
        "Whose permit to end (all when absent); reopen: the finisher.",
    ),
    ("token_revoke", "Only this permit; reopen: the finisher's."),
    ("candidates", "acquire the first free of these."),
    ("done", "release: finished; acquires get DONE."),
    ("result", "With done: what it produced."),
    ("keepDoneSeconds", "With done: seconds (default a week)."),
    ("prefix", "Only names that start with this."),
    ("cursor", "The nextCursor of the page before."),
    ("pageSize", "Entries per page (default 50)."),
];

/// What a field's compact schema keeps of the published one, besides its one line.
const KEPT: &[&str] = &[
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
];

/// `full` (a published field schema) cut to what an agent needs: its type and bounds, and
/// `line`; arrays keep their items' shape, objects their fields' types.
fn compact_field(full: &Value, line: Option<&str>) -> Value {
    let mut field = serde_json::Map::new();
    for key in KEPT {
        if let Some(value) = full.get(*key) {
            field.insert((*key).to_owned(), value.clone());
        }
    }
    if let Some(items) = full.get("items") {
        field.insert("items".into(), compact_field(items, None));
    }
    if let Some(properties) = full.get("properties").and_then(Value::as_object) {
        let fields: serde_json::Map<String, Value> = properties
            .iter()
            .map(|(name, schema)| (name.clone(), compact_field(schema, None)))
            .collect();
        field.insert("properties".into(), Value::Object(fields));
        for key in ["required", "additionalProperties"] {
            if let Some(value) = full.get(key) {
                field.insert(key.into(), value.clone());
            }
        }
    }
    if let Some(line) = line {
        field.insert("description".into(), line.into());
    }
    Value::Object(field)
}

/// `tool`'s input schema for `tools/list`: its fields (those of its ops: [`lease_tool`]) in
/// compact form, nothing else allowed.
fn compact_input(tool: LeaseTool) -> Arc<JsonObject> {
    let full = lease_tool(tool).0;
    let line = |name: &str| {
        let key = match (tool, name) {
            (LeaseTool::Revoke, "holder") => "holder_revoke",
            (LeaseTool::Revoke, "token") => "token_revoke",
            (LeaseTool::Read, "session") => "session_read",
            (LeaseTool::Read, "waitSeconds") => "waitSeconds_read",
            (LeaseTool::Revoke, "session") => "session_revoke",
            _ => name,
        };
        FIELD_LINES
            .iter()
            .find(|(field, _)| *field == key)
            .map(|(_, line)| *line)
    };
    let properties: serde_json::Map<String, Value> = full["properties"]
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .map(|(name, schema)| (name.clone(), compact_field(schema, line(name))))
                .collect()
        })
        .unwrap_or_default();
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), full["required"].clone());
    schema.insert("additionalProperties".into(), false.into());
    Arc::new(schema)
}

/// The lease tools' output schema: the answer's two parts (every field of `data` is the
/// LeaseAnswer schema's, in `/openapi.json`).
fn lease_output() -> Arc<JsonObject> {
    let schema = serde_json::json!({
        "type": "object",
        "description": "data: the answer (LeaseAnswer in /openapi.json; witnesses name each broken rule). _provenance: its signature, for anyone to check offline.",
        "properties": {"data": {"type": "object"}, "_provenance": {"type": "object"}},
        "required": ["data", "_provenance"],
    });
    Arc::new(schema.as_object().cloned().unwrap_or_default())
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
pub(super) static TOOLS: std::sync::LazyLock<Vec<Tool>> = std::sync::LazyLock::new(tools);

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            LeaseTool::Lease.name(),
            "Leases with fencing tokens: op acquire, renew, release, get or check a named resource for 1-3600 s. \
             Every new acquisition returns a strictly larger fencingToken; pass it to the store you write to. \
             limit (1-64) lets up to that many holders in at once, a token each. \
             Sessions: open one, acquire with session; one keepalive holds them all, its end frees them all. \
             requestId makes a retry safe; the answer is signed (_provenance).",
            compact_input(LeaseTool::Lease),
        )
        .with_raw_output_schema(lease_output())
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
            "Read a lease without changing it: op get shows the resource's live permits (holders, fencingTokens, values, expiry); op check answers whether a fencing token (of a holder, if given) is still a live permit's (current); op watch with the stateTag you saw answers when the holders change (leader election's observe). op get with session shows a session.",
            compact_input(LeaseTool::Read),
        )
        .with_raw_output_schema(lease_output())
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
             (fencingToken, expiresAt) and waiters. send nextCursor \
             back as cursor for the next page (null: the end). Advisory (an index, about 2 s behind): use lease_read to decide.",
            compact_input(LeaseTool::List),
        )
        .with_raw_output_schema(lease_output())
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
             resource, the permits it ended and the reason. \
             Only for API keys with the admin role and paying wallets (others: 403 FORBIDDEN).",
            compact_input(LeaseTool::Audit),
        )
        .with_raw_output_schema(lease_output())
        .with_annotations(
            ToolAnnotations::with_title("Read the revoke audit")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        Tool::new(
            LeaseTool::Revoke.name(),
            "Force-release: end a holder's permit of a resource (holder), every permit of it, or a session and its permits, \
             at once, with a reason kept in the audit. Waiters are served; the revoked holder's next renew \
             or release fails with REVOKED. Only for API keys with the admin role and paying wallets in their own tenant \
             (others: 403 FORBIDDEN). reopen: end a finished mark (finisher or admin). \
             requestId makes a retry safe.",
            compact_input(LeaseTool::Revoke),
        )
        .with_raw_output_schema(lease_output())
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
