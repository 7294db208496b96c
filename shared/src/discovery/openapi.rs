//! GET /openapi.json: OpenAPI 3.1 of every route, its request and answer schemas taken from
//! `shared/schemas/` (the files the handlers validate with), with the x402 prices of this
//! deployment per operation (and per plan for /claim).

use super::{Prices, schema, usdc};
use crate::schema::{
    CLAIM_ANSWER_JSON as CLAIM_ANSWER, CLAIM_FREE_INPUT_JSON, CLAIM_INPUT_JSON,
    LEASE_ANSWER_JSON as LEASE_ANSWER, LEASE_INPUT_JSON, VERIFY_INPUT_JSON,
};
use crate::x402::payment_identifier::KEY as PAYMENT_IDENTIFIER;
use serde_json::{Map, Value, json};

const VERIFY_ANSWER: &str = include_str!("../../schemas/verify-provenance-answer.json");
const ERROR: &str = include_str!("../../schemas/error.json");

/// How a paid lease call may be retried, said wherever the price is.
pub const PAYMENT_IDENTIFIER_NOTE: &str = "x402 payment-identifier (declared in every 402 of the lease route, the MCP lease tool and /claim): name your payment with an id of 16-128 characters [A-Za-z0-9_-] in PaymentPayload.extensions; the same payment sent again gets the answer it bought, charged once, for 24 h (a lease mutation's stored answer, a claim's kept answer, a get read afresh); the same id with another payment or request is a 409.";

/// The x402 MCP binding, as the MCP route and the catalog say it.
pub const PAID_MCP_NOTE: &str = "With no API key, pay per tool call (the x402 MCP binding): a lease call without payment is answered with the x402 PaymentRequired offer as the tool result (isError, structuredContent and its JSON text); call again with the PaymentPayload in params._meta[\"x402/payment\"]; the settlement comes back in the result's _meta[\"x402/payment-response\"]. The wallet is the tenant. claim_free needs an API key.";

/// The Python client, as the discovery documents name it.
pub fn python_client() -> Value {
    json!({"language": "python", "package": "leasekit", "install": "pip install './clients/python[x402]' (from the leasekit repository)", "import": "leasekit", "features": ["sync and asyncio", "held lease with auto-renew and a lost signal", "sessions: one keepalive for many holds, one loss for all of them", "API key or x402 payments from an eth_account account, with payment-identifier"]})
}

/// The TypeScript client, as the discovery documents name it.
pub fn typescript_client() -> Value {
    json!({"language": "typescript", "package": "leasekit", "install": "npm install ./clients/typescript (from the leasekit repository; add @x402/core @x402/evm @x402/extensions viem to pay)", "import": "leasekit", "runtimes": ["Node 20+", "browsers"], "features": ["typed answers and a typed error per code", "withLease: auto-renew and an AbortSignal that fires when the lease is lost", "withSession: one keepalive for many holds, one AbortSignal for all of them", "API key or x402 payments from a viem account, with payment-identifier"]})
}

/// The lease description, as the product states it.
pub const LEASE_DESCRIPTION: &str = "Lets many agents agree which one works on a task: acquire a named resource for 1-3600 s, renew it while working, release it when done. Every new acquisition returns a strictly larger fencing token; pass it to the downstream store and reject writes carrying a smaller one, so a paused holder whose lease expired cannot clobber its successor. Re-acquiring as the current holder extends the lease with the same token. Beyond one holder: limit (1-64) makes a semaphore with a token per permit, resources (2-50) takes a set all or nothing, waitSeconds (0-20) waits in a first-come-first-served queue, and check answers whether a token is still current. Sessions: open one, acquire with session instead of ttlSeconds, and one keepalive holds every permit in it; when it is closed or lapses, all its permits end at once. A work queue: acquire with candidates (2-50) takes the first free one, release with done (and a result) finishes it so every later acquire fails with DONE naming who did it, reopen ends that early (audited). list pages through your live leases (advisory); revoke force-releases a permit with a reason, audited, and audit lists the revokes (both for API keys with the admin role and paying wallets). Scoped to the paying wallet (or to the API key's account and tenantId).";

/// The lease route's request examples: a lease, a semaphore's permit, a set and a check, each
/// with its curl line.
fn lease_examples(lease: Value) -> Value {
    let curl =
        |body: &Value| format!("curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{body}'");
    let examples = [
        ("lease", "Acquire a lease (one holder)", lease),
        (
            "semaphore",
            "Acquire one of 4 permits (a token each)",
            json!({"op": "acquire", "resource": "gpu-pool", "holder": "worker-7", "limit": 4, "tenantId": "team-a"}),
        ),
        (
            "set",
            "Acquire two resources, all or nothing",
            json!({"op": "acquire", "resources": ["account:alice", "account:bob"], "holder": "transfer-17", "tenantId": "team-a"}),
        ),
        (
            "releaseSet",
            "Release a set whole",
            json!({"op": "release", "leases": [{"resource": "account:alice", "token": 7}, {"resource": "account:bob", "token": 3}], "holder": "transfer-17", "tenantId": "team-a"}),
        ),
        (
            "wait",
            "Wait up to 20 s in the queue for a lease, first come first served",
            json!({"op": "acquire", "resource": "deploy:prod", "holder": "worker-7", "waitSeconds": 20, "tenantId": "team-a"}),
        ),
        (
            "campaign",
            "Campaign for leadership: wait in line, then lead with your address as the value",
            json!({"op": "acquire", "resource": "leader:billing", "holder": "node-1", "ttlSeconds": 15, "waitSeconds": 20, "value": "10.0.0.7:8080", "tenantId": "team-a"}),
        ),
        (
            "proclaim",
            "Proclaim a new value while leading (refused once the token is no longer current)",
            json!({"op": "renew", "resource": "leader:billing", "holder": "node-1", "token": 12, "ttlSeconds": 15, "value": "10.0.0.7:9090", "tenantId": "team-a"}),
        ),
        (
            "watch",
            "Observe: answered as soon as the state is no longer the one stateTag names, or after 20 s (with Accept: text/event-stream, leasekit serve streams every change)",
            json!({"op": "watch", "resource": "leader:billing", "stateTag": "9f2c41d07a3be8c5d6e1f0a2", "waitSeconds": 20, "tenantId": "team-a"}),
        ),
        (
            "claimNext",
            "Take the first free task of a list (not held, not finished, nobody waiting ahead): the answer's resource names it",
            json!({"op": "acquire", "candidates": ["issue:41", "issue:42", "issue:43"], "holder": "agent-1", "ttlSeconds": 300, "tenantId": "team-a"}),
        ),
        (
            "done",
            "Release as finished, with the result: every acquire fails with DONE (who finished it, its result) for a week, unless reopened",
            json!({"op": "release", "resource": "issue:42", "holder": "agent-1", "token": 1, "done": true, "result": "PR #97", "tenantId": "team-a"}),
        ),
        (
            "reopen",
            "Reopen a finished resource: its finisher with the token it finished with, or an admin (audited)",
            json!({"op": "reopen", "resource": "issue:42", "holder": "agent-1", "token": 1, "reason": "the PR was reverted", "tenantId": "team-a"}),
        ),
        (
            "openSession",
            "Open a session: one keepalive for every hold acquired in it",
            json!({"op": "open", "holder": "agent-3", "ttlSeconds": 60, "tenantId": "team-a"}),
        ),
        (
            "acquireInSession",
            "Acquire in a session: held exactly as long as the session lives",
            json!({"op": "acquire", "resource": "invoice:INV-1009", "holder": "agent-3", "session": crate::discovery::examples::SESSION_ID, "tenantId": "team-a"}),
        ),
        (
            "keepalive",
            "Keep a session, and every permit in it, alive for its ttl from now",
            json!({"op": "keepalive", "session": crate::discovery::examples::SESSION_ID, "holder": "agent-3", "tenantId": "team-a"}),
        ),
        (
            "closeSession",
            "Close a session: every permit in it ends now",
            json!({"op": "close", "session": crate::discovery::examples::SESSION_ID, "holder": "agent-3", "tenantId": "team-a"}),
        ),
        (
            "check",
            "Is token 3 still a live permit of worker-7?",
            json!({"op": "check", "resource": "gpu-pool", "token": 3, "holder": "worker-7", "tenantId": "team-a"}),
        ),
        (
            "list",
            "Your live leases whose names start with deploy:, 20 a page",
            json!({"op": "list", "prefix": "deploy:", "pageSize": 20, "tenantId": "team-a"}),
        ),
        (
            "revoke",
            "Force-release worker-7's permit, with a reason (an admin key)",
            json!({"op": "revoke", "resource": "deploy:prod", "holder": "worker-7", "reason": "worker-7 is wedged; paged on-call", "tenantId": "team-a"}),
        ),
        (
            "audit",
            "The revokes of deploy:prod, newest first (an admin key)",
            json!({"op": "audit", "resource": "deploy:prod", "tenantId": "team-a"}),
        ),
    ];
    let mut out = serde_json::Map::new();
    for (name, summary, value) in examples {
        out.insert(
            name.to_owned(),
            json!({"summary": summary, "description": curl(&value), "value": value}),
        );
    }
    Value::Object(out)
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn json_body(schema_name: &str, description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": reference(schema_name)}}})
}

fn error(description: &str) -> Value {
    json_body("Error", description)
}

/// The x402 extensions of a fixed-price operation.
fn x402_price(atomic: u64, network: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("x-x402-price-usdc".into(), json!(usdc(atomic)));
    m.insert("x-x402-amount".into(), json!(atomic.to_string()));
    m.insert("x-x402-network".into(), json!(network));
    m.insert(
        "x-payment-info".into(),
        json!({"protocols": ["x402"], "price": {"mode": "fixed", "currency": "USD", "amount": usdc(atomic)}}),
    );
    m
}

fn operation(base: Value, extensions: Map<String, Value>) -> Value {
    let mut op = base;
    if let Some(object) = op.as_object_mut() {
        object.extend(extensions);
    }
    op
}

/// The document for a deployment reachable at `base_url`.
pub fn document(base_url: &str, prices: &Prices) -> Value {
    let network = prices.network.as_deref().unwrap_or("eip155:8453");
    let lease_example = json!({"op": "acquire", "resource": "invoice:INV-1009", "holder": "worker-7", "ttlSeconds": 60, "tenantId": "team-a", "requestId": "w7-claim-INV-1009"});
    let paid_security = json!([{"x402": []}, {"apiKey": []}]);
    // The MCP route takes an API key, or (with x402 on) no credential at all: the payment rides
    // in each tool call's `_meta`, not in a header.
    let mcp_security = if prices.lease.is_some() {
        json!([{"apiKey": []}, {}])
    } else {
        json!([{"apiKey": []}])
    };
    let mcp_description = format!(
        "JSON-RPC 2.0 messages of the Model Context Protocol (2026-07-28 with server/discover, or the initialize handshake of earlier versions). Tools: lease, lease_read, lease_list, lease_audit (read-only), lease_revoke (destructive), claim_free; same input schemas and answers as the HTTP routes.{}",
        if prices.lease.is_some() {
            format!(" {PAID_MCP_NOTE} {PAYMENT_IDENTIFIER_NOTE}")
        } else {
            String::new()
        }
    );

    let lease = operation(
        json!({
            "operationId": "lease",
            "summary": "Leases with fencing tokens: acquire, renew, release, get, check; list, revoke, audit",
            "description": LEASE_DESCRIPTION,
            "security": paid_security,
            "parameters": [{"name": "signed", "in": "query", "required": false, "schema": {"type": "boolean", "default": true},
                "description": "false: the answer's data alone, without _provenance, versions and limits (for people and agents that do not verify). Signed is the default."}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": reference("LeaseRequest"), "examples": lease_examples(lease_example)}}},
            "responses": {
                "200": json_body("LeaseAnswer", "The op's result (granted or not: see status and witnesses), signed unless ?signed=false."),
                "400": error("Invalid input: witnesses name each field (JSON pointer); INVALID_REQUEST: ?signed is neither true nor false. Nothing was written or charged."),
                "401": error("A malformed, unknown or revoked API key."),
                "402": json_body("PaymentRequired", "Payment required or invalid: x402 v2 PaymentRequired, also base64 in PAYMENT-REQUIRED."),
                "403": error("FORBIDDEN: revoke or audit with an API key without the admin role. Nothing was read or changed."),
                "406": error("NOT_ACCEPTABLE: Accept: text/event-stream (without application/json) for another op than watch, without an API key, or where watches are not streamed (Lambda: chain watch calls on stateTag). leasekit serve streams a keyed watch: one `change` event per change, its id the stateTag, a comment every 15 s; an `error` event ends it."),
                "409": error("IDEMPOTENCY_CONFLICT: requestId reused with different input. PAYMENT_IDENTIFIER_CONFLICT: an x402 payment identifier used with another payment or another request. PAYMENT_IN_PROGRESS: the first call with this payment has not finished; send it again shortly."),
                "413": error("Body over 64 KiB."),
                "408": error("The body did not arrive in full in time (the local server's --body-timeout)."),
                "429": {"description": "RATE_LIMITED: a waiting call (waitSeconds) while this account or wallet already has its share of the local server's waits in progress (--max-waits-per-account). Nothing was done or charged; retry after Retry-After seconds.", "headers": {"Retry-After": {"schema": {"type": "integer"}}}, "content": {"application/json": {"schema": reference("Error")}}},
                "500": error("Our own failure (INTERNAL_ERROR); details only in our log. Nothing charged."),
                "502": error("The store or facilitator failed or its answer is unknown; nothing charged; retry with the same requestId."),
            }
        }),
        prices
            .lease
            .map(|p| {
                let mut m = x402_price(p, network);
                m.insert("x-x402-extensions".into(), json!([PAYMENT_IDENTIFIER]));
                m
            })
            .unwrap_or_default(),
    );

    let mut plans = Map::new();
    if let Some(c) = &prices.claims {
        for (plan, atomic, seconds) in [
            ("hour", c.hour, 3_600),
            ("day", c.day, 86_400),
            ("week", c.week, 604_800),
        ] {
            plans.insert(
                plan.into(),
                json!({"seconds": seconds, "amount": atomic.to_string(), "usdc": usdc(atomic)}),
            );
        }
    }
    let mut claim_extensions = Map::new();
    if !plans.is_empty() {
        claim_extensions.insert("x-x402-network".into(), json!(network));
        claim_extensions.insert("x-x402-extensions".into(), json!([PAYMENT_IDENTIFIER]));
        claim_extensions.insert(
            "x-payment-info".into(),
            json!({"protocols": ["x402"], "price": {"mode": "per-plan", "currency": "USD", "plans": plans}}),
        );
    }
    let claim = operation(
        json!({
            "operationId": "claim",
            "summary": "Buy an exclusive hold on a key for an hour, a day or a week (billed per attempt)",
            "description": "One paid attempt: 201 when you won the key, 200 when a live hold exists (mine: the holder is the one you sent; the crash-resume signal). Both outcomes are billed and carry a payment receipt. Scoped to the paying wallet.",
            "security": [{"x402": []}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": reference("ClaimRequest"), "example": {"key": "pipeline:ingest:job-42", "plan": "hour", "holder": "worker-node-7"}}}},
            "responses": {
                "201": json_body("ClaimAnswer", "You won the key."),
                "200": json_body("ClaimAnswer", "A live hold exists; see mine."),
                "400": error("Invalid input (key and holder are 1..256 UTF-8 bytes, key without '/'). Nothing charged."),
                "402": json_body("PaymentRequired", "Payment required or invalid; the offer is the price of the plan asked for."),
                "409": error("PAYMENT_IDENTIFIER_CONFLICT: a payment identifier used with another payment or another request. PAYMENT_IN_PROGRESS: the first call with this payment has not finished. PAYMENT_ANSWER_UNKNOWN: it was charged but its answer was not kept; claim again with the same key and holder and read mine."),
                "413": error("Body over 64 KiB."),
                "500": error("Our own failure (INTERNAL_ERROR); nothing charged."),
                "502": error("The store or facilitator failed; nothing charged."),
            }
        }),
        claim_extensions,
    );

    let free = json!({
        "operationId": "claimFree",
        "summary": "A free 300 s hold on a key",
        "description": "For an API key's account or a wallet proven with x402 sign-in-with-x (the 402 advertises the challenge). At most N per wallet or account per hour.",
        "security": [{"apiKey": []}, {"signInWithX": []}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": reference("ClaimFreeRequest"), "example": {"key": "cron:nightly", "holder": "host-1"}}}},
        "responses": {
            "201": json_body("ClaimAnswer", "You won the key."),
            "200": json_body("ClaimAnswer", "A live hold exists; see mine."),
            "400": error("Invalid input, in the body or in a SIGN-IN-WITH-X header field (witness path SIGN-IN-WITH-X.<field>). Nothing written."),
            "401": error("A malformed, unknown or revoked API key."),
            "402": json_body("PaymentRequired", "Prove a wallet: the sign-in-with-x challenge is in extensions (no payment is asked)."),
            "413": error("Body over 64 KiB."),
            "429": {"description": "Too many free claims this hour.", "headers": {"Retry-After": {"schema": {"type": "integer"}}}, "content": {"application/json": {"schema": reference("Error")}}},
            "502": error("The store failed."),
        }
    });

    let verify = json!({
        "operationId": "verifyProvenance",
        "summary": "Check a signed answer ({data, _provenance}) of this service",
        "description": "Free, no key. verified is true only for an intact answer of this service. A sample (GET /api/v1/samples/lease: invented data, typed LeasekitSampleAnswer and signed with the sample key) is reported with sample: true and verified: false. Fields longer than any valid one (a proofValue over 89 characters, a verification method over 105) fail the proof check without being decoded.",
        "security": [],
        "requestBody": {"required": true, "content": {"application/json": {"schema": reference("VerifyRequest")}}},
        "responses": {
            "200": json_body("VerifyReport", "Each check, with witnesses naming what failed."),
            "400": error("Not a {data, _provenance} document, or more than 262144 JSON values (no answer has a third of that)."),
            "413": error("Body over 6 MiB (6291456 bytes), the most a deployed answer can be. Only a local server's answers can be larger (a set of crowded semaphores with long values): verify those offline, with the key of /.well-known/did.json."),
        }
    });

    let mcp_operation = operation(
        json!({
                "operationId": "mcp",
                "summary": "The lease tool (and free claims) over MCP: streamable HTTP, stateless, JSON answers",
                "description": mcp_description,
                "security": mcp_security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["jsonrpc", "method"], "properties": {"jsonrpc": {"const": "2.0"}, "id": {"type": ["integer", "string"]}, "method": {"type": "string"}, "params": {"type": "object"}}}, "example": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}}},
                "responses": {
                    "200": {"description": "A JSON-RPC answer.", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "202": {"description": "A notification was accepted."},
                    "400": error("Not JSON (INVALID_JSON), a batch (BATCH_NOT_SUPPORTED), or not a JSON-RPC message the server can take."),
                    "403": error("The Host is not the service's public host, or an Origin header is not its public origin (FORBIDDEN)."),
                    "401": error("A malformed, unknown or revoked API key, or none where payments are off."),
                    "404": {"description": "Unknown session.", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "405": error("Only POST (METHOD_NOT_ALLOWED)."),
                    "406": error("The Accept header must list both application/json and text/event-stream."),
                    "413": error("Body over 64 KiB."),
                    "415": error("The content type is not application/json (UNSUPPORTED_MEDIA_TYPE)."),
                    "422": {"description": "Unsupported protocol version.", "content": {"application/json": {"schema": {"type": "object"}}}},
                },
        }),
        prices
            .lease
            .map(|p| x402_price(p, network))
            .unwrap_or_default(),
    );

    let get_json = |id: &str, summary: &str| json!({"get": {"operationId": id, "summary": summary, "security": [], "responses": {"200": {"description": summary, "content": {"application/json": {"schema": {"type": "object"}}}}}}});
    let mut schemas = Map::new();
    for (name, text) in [
        ("LeaseRequest", LEASE_INPUT_JSON),
        ("LeaseAnswer", LEASE_ANSWER),
        ("ClaimRequest", CLAIM_INPUT_JSON),
        ("ClaimFreeRequest", CLAIM_FREE_INPUT_JSON),
        ("ClaimAnswer", CLAIM_ANSWER),
        ("VerifyRequest", VERIFY_INPUT_JSON),
        ("VerifyReport", VERIFY_ANSWER),
        ("Error", ERROR),
    ] {
        schemas.insert(name.into(), schema(text));
    }
    schemas.insert("PaymentRequired".into(), payment_required_schema());

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "leasekit",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Leases with fencing tokens and claims on keys, for software agents. Pay per call over x402 (USDC; the payment-identifier extension makes a paid retry safe), over HTTP or MCP, or use an API key. Every lease answer is signed (W3C VC 2.0, eddsa-jcs-2022). Clients: the leasekit package for Python (clients/python) and for TypeScript (clients/typescript).",
            "x-clients": [python_client(), typescript_client()]
        },
        "servers": [{"url": base_url}],
        "paths": {
            "/api/v1/lease": {"post": lease},
            "/claim": {"post": claim},
            "/claim/free": {"post": free},
            "/api/v1/verify-provenance": {"post": verify},
            "/mcp": {"post": mcp_operation},
            "/.well-known/did.json": get_json("didDocument", "The DID document of the key that signs answers"),
            "/openapi.json": get_json("openapi", "This document"),
            "/api/v1/catalog": get_json("catalog", "The capabilities, prices and links"),
            "/docs/index.json": get_json("docsIndex", "The capabilities, prices and links"),
            "/docs/lease.json": get_json("leaseDocsJson", "The lease docs page as JSON"),
            "/api/v1/samples/lease": get_json("leaseSample", "A worked lease request and an invented answer, signed as a sample (never verifies as an answer)"),
            "/docs/lease/": {"get": {"operationId": "leaseDocs", "summary": "The lease docs page", "security": [], "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}}}},
            "/": {"get": {"operationId": "index", "summary": "Where everything is: a page linking every route, or the same as JSON (links, routes) with Accept: application/json", "security": [], "responses": {"200": {"description": "HTML, or JSON when asked for first", "content": {"text/html": {"schema": {"type": "string"}}, "application/json": {"schema": {"type": "object", "required": ["links", "routes"]}}}}}}},
            "/healthz": get_json("health", "Liveness of the process: {\"status\": \"ok\"}, never cached, no store call"),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-KEY", "description": "An API key of your account (leasekit keys create)."},
                "x402": {"type": "apiKey", "in": "header", "name": "PAYMENT-SIGNATURE", "description": "x402 v2: base64 PaymentPayload for one of the offers of the 402 answer (scheme exact, EIP-3009 USDC)."},
                "signInWithX": {"type": "apiKey", "in": "header", "name": "SIGN-IN-WITH-X", "description": "x402 sign-in-with-x: base64 of the EIP-4361 message fields and EIP-191 signature answering the 402's challenge."},
            }
        }
    })
}

/// x402 v2 PaymentRequired, as the 402 answers carry it (plus our error `code`).
fn payment_required_schema() -> Value {
    json!({
        "type": "object",
        "required": ["x402Version", "resource", "accepts", "error", "code"],
        "properties": {
            "x402Version": {"const": 2},
            "error": {"type": "string"},
            "code": {"type": "string"},
            "resource": {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}, "description": {"type": "string"}, "mimeType": {"type": "string"}}},
            "accepts": {"type": "array", "items": {"type": "object", "required": ["scheme", "network", "asset", "amount", "payTo", "maxTimeoutSeconds", "extra"], "properties": {
                "scheme": {"const": "exact"}, "network": {"type": "string"}, "asset": {"type": "string"}, "amount": {"type": "string"},
                "payTo": {"type": "string"}, "maxTimeoutSeconds": {"type": "integer"}, "extra": {"type": "object"}}}},
            "extensions": {"type": "object"}
        }
    })
}
