//! The catalog (GET /api/v1/catalog, /docs/index.json), the lease docs page (GET /docs/lease/ as
//! HTML, /docs/lease.json as JSON, from one source) and a worked sample (GET
//! /api/v1/samples/lease): invented data, so it is signed as a sample (its own credential type
//! and the sample key), never as an answer of this service.

use super::examples::examples;
use super::openapi::{
    LEASE_DESCRIPTION, PAID_MCP_NOTE, PAYMENT_IDENTIFIER_NOTE, python_client, typescript_client,
};
use super::{Prices, usdc};
use crate::clock::Millis;
use crate::lease::{LeaseAnswer, LeaseState, Op};
use crate::provenance::Issuer;
use crate::provenance::answer::{SAMPLE_TYPE, Subject, sample_provenance};
use crate::provenance::jcs::sha256;
use crate::schema::LEASE_INPUT_JSON;
use serde_json::{Value, json};

fn links(base: &str) -> Value {
    json!({
        "docs": format!("{base}/docs/lease/"),
        "docsJson": format!("{base}/docs/lease.json"),
        "sample": format!("{base}/api/v1/samples/lease"),
        "openapi": format!("{base}/openapi.json"),
        "catalog": format!("{base}/api/v1/catalog"),
        "verifyProvenance": format!("{base}/api/v1/verify-provenance"),
        "didDocument": format!("{base}/.well-known/did.json"),
    })
}

fn price(atomic: Option<u64>, network: Option<&str>) -> Value {
    match atomic {
        Some(a) => {
            json!({"amount": usdc(a), "atomic": a.to_string(), "currency": "USDC", "network": network, "perCall": true, "failedCallsCharged": false})
        }
        None => Value::Null,
    }
}

/// The machine-readable list of capabilities, prices, channels and links.
pub fn catalog(base: &str, prices: &Prices) -> Value {
    let input: Value = serde_json::from_str(LEASE_INPUT_JSON).unwrap_or_default();
    let plans = prices.claims.map(|c| {
        json!({
            "hour": {"seconds": 3_600, "price": usdc(c.hour)},
            "day": {"seconds": 86_400, "price": usdc(c.day)},
            "week": {"seconds": 604_800, "price": usdc(c.week)},
        })
    });
    let channels = |paid: bool| {
        if paid && prices.lease.is_some() {
            json!(["x402", "api-key"])
        } else {
            json!(["api-key"])
        }
    };
    json!({
        "service": "leasekit",
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": [
            {
                "id": "lease",
                "title": "Short lease with fencing tokens: claim a task for N seconds, renew, release",
                "description": LEASE_DESCRIPTION,
                "audience": "agent-infra",
                "channels": channels(true),
                "endpoint": {"method": "POST", "path": "/api/v1/lease", "url": format!("{base}/api/v1/lease"), "contentType": "application/json"},
                "price": price(prices.lease, prices.network.as_deref()),
                "inputSchema": input,
                "signedAnswers": "W3C VC 2.0, eddsa-jcs-2022; verify offline or at /api/v1/verify-provenance",
                "x402Extensions": if prices.lease.is_some() { json!(["payment-identifier"]) } else { json!([]) },
                "mcp": {
                    "url": format!("{base}/mcp"),
                    "tool": "lease",
                    "readOnlyTool": "lease_read",
                    "channels": channels(true),
                    "payment": if prices.lease.is_some() { json!(PAID_MCP_NOTE) } else { Value::Null },
                },
                "clients": [python_client(), typescript_client()],
                "links": links(base),
            },
            {
                "id": "claim",
                "title": "Exclusive hold on a key for an hour, a day or a week",
                "description": "Paid per attempt over x402: 201 when you won the key, 200 held (mine tells you whether the holder is yours: crash-resume). Scoped to the paying wallet.",
                "channels": if prices.claims.is_some() { json!(["x402"]) } else { json!([]) },
                "x402Extensions": if prices.claims.is_some() { json!(["payment-identifier"]) } else { json!([]) },
                "endpoint": {"method": "POST", "path": "/claim", "url": format!("{base}/claim"), "contentType": "application/json"},
                "plans": plans,
                "links": {"openapi": format!("{base}/openapi.json")},
            },
            {
                "id": "claim-free",
                "title": "Free 300 s hold on a key",
                "description": "For an API key's account or a wallet proven with x402 sign-in-with-x; a few per hour.",
                "channels": ["api-key", "sign-in-with-x"],
                "endpoint": {"method": "POST", "path": "/claim/free", "url": format!("{base}/claim/free"), "contentType": "application/json"},
                "price": {"amount": "0", "currency": "USDC"},
                "links": {"openapi": format!("{base}/openapi.json")},
            }
        ],
    })
}

/// One section of the docs page: its anchor, title, paragraphs (a paragraph that is a command or
/// JSON is set as code) and, for reference sections, a table.
struct Section {
    id: String,
    title: String,
    paragraphs: Vec<String>,
    table: Option<Table>,
}

struct Table {
    columns: &'static [&'static str],
    rows: Vec<Vec<String>>,
}

impl Section {
    fn new(id: &str, title: &str, paragraphs: Vec<String>) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            paragraphs,
            table: None,
        }
    }

    fn with_table(mut self, columns: &'static [&'static str], rows: &[&[&str]]) -> Self {
        let rows = rows
            .iter()
            .map(|row| row.iter().map(|cell| (*cell).to_owned()).collect())
            .collect();
        self.table = Some(Table { columns, rows });
        self
    }
}

/// The docs page, in order: one source for the HTML and the JSON.
fn sections(prices: &Prices) -> Vec<Section> {
    let price = prices.lease.map_or_else(
        || "API keys only on this deployment".to_owned(),
        |p| format!("{} USDC per call over x402", usdc(p)),
    );
    let mut sections = vec![
        Section::new("what", "What a lease is", vec![
            "A lease says which one of many workers may act on a named resource, for a while. Acquire it for 1 to 3600 seconds, renew it while you work, release it when you are done. If you stop renewing, it lapses and someone else can take it.".into(),
            "The server's clock decides: a lease is held while now < expiresAt. Your clock may differ, so renew well before expiresAt (say at a third of the ttl).".into(),
        ]),
        Section::new("fencing", "Fencing tokens", vec![
            "Every new acquisition returns a fencingToken strictly larger than any issued before for that resource, across release, expiry and restarts. Pass it to whatever you write to, and have that store refuse a write carrying a smaller token than the largest it has seen.".into(),
            "That is what protects you from the paused holder: a worker that stalled (GC pause, sleep, network partition) past its lease still believes it holds it; its writes carry the old token and are refused, while its successor's larger token is accepted.".into(),
            "Re-acquiring while you hold the lease keeps the token and moves expiresAt. A renew that fails (LEASE_EXPIRED, NOT_HOLDER, TOKEN_MISMATCH) is how you learn you lost the lease: stop working.".into(),
        ]),
        Section::new("calling", "Calling it", vec![
            "Every call is POST $URL/api/v1/lease with a JSON body naming its op: acquire, renew (with token), release (with token), get, check (with token), list, revoke (with reason), audit. As in the README, $URL is the base URL (http://127.0.0.1:3000 locally), $KEY an API key and $ADMIN_KEY one with the admin role (leasekit keys create --account A --admin).".into(),
            "With an API key: send X-API-KEY and a tenantId; your account and tenantId are the namespace.".into(),
            format!("With x402 ({price}): call without a key; the 402 answer offers a payment (scheme exact, USDC, EIP-3009); sign it and send it in PAYMENT-SIGNATURE. Your wallet is the namespace. Every 200 answer is charged, granted or not; errors never are."),
            format!("Over MCP (POST /mcp, tool lease): with an API key, or with a wallet: {PAID_MCP_NOTE}"),
            "An answer is {\"data\": ..., \"_provenance\": ...}: what happened, then its signature. Add ?signed=false to the URL for data alone, without _provenance, versions and limits, as the examples below show it; signed is the default.".into(),
        ]),
    ];
    for example in examples() {
        let id = format!("op-{}", example.title.replace(", ", "-").replace(' ', "-"));
        let answer = serde_json::to_string_pretty(&example.answer).unwrap_or_default();
        sections.push(Section::new(
            &id,
            example.title,
            vec![example.says.into(), example.curl(), answer],
        ));
    }
    sections.extend([
        Section::new("fields", "Answer fields", vec![
            "The fields of data, top down. A page (list, audit) is about no one resource: it has none of granted to holders.".into(),
        ])
        .with_table(&["field", "meaning"], FIELDS),
        Section::new("errors", "Errors", vec![
            "A refusal by a rule is an answer (200, status fail, witnesses). Anything else is an error: {\"error\": sentence, \"code\": CODE}, with nothing written and nothing charged.".into(),
        ])
        .with_table(&["status", "code", "when"], ERRORS),
        Section::new("coordination", "Semaphores, sets and check", vec![
            "A semaphore: acquire with limit (1 to 64, default 1) lets up to that many holders in at once, each with a permit and its own fencingToken from the resource's one counter, so no two permits ever share a token. While any permit is live, every acquire must state the same limit (else LIMIT_MISMATCH, expected: the live limit); once none is live, the next acquire sets it. All permits held: LEASE_HELD. Renew and release work on your own permit (holder and token), as for a lease.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"acquire\",\"tenantId\":\"team-a\",\"resource\":\"gpu-pool\",\"holder\":\"worker-7\",\"limit\":4}'".into(),
            "A set, all or nothing: acquire with resources (2 to 50 distinct names, instead of resource) takes every one or none, in one DynamoDB transaction; each blocking resource has a witness at /resources/<i>. The answer's leases lists each resource with its token; renew and release the set with leases: [{resource, token}].".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"acquire\",\"tenantId\":\"team-a\",\"resources\":[\"account:alice\",\"account:bob\"],\"holder\":\"transfer-17\"}'".into(),
            "check: {op: check, resource, token, holder?} answers current: true when a live permit of the resource has that token (and that holder, if given), else fail with TOKEN_NOT_CURRENT. Use it where the store you write to cannot keep the highest token it has seen, and always for a semaphore: its live permits' tokens are not ordered by who holds now, so only check fences them.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"check\",\"tenantId\":\"team-a\",\"resource\":\"gpu-pool\",\"token\":3,\"holder\":\"worker-7\"}'".into(),
            "Every answer carries limit and holders (the live permits by token); the top-level holder, fencingToken and expiresAt are your own permit when you hold one, else the live permit with the largest token (null for a set). Over MCP, the read-only tool lease_read offers get and check and nothing that writes.".into(),
        ]),
        Section::new("waiting", "Waiting fairly", vec![
            "An acquire of one resource may wait for it: waitSeconds (0 to 20, default 0). Not granted at once, you take a place in the resource's queue and the call answers as soon as a permit is yours, or when the wait ends with granted: false and queuePosition (1 = next). First come, first served: a freed permit goes to the earliest waiter in the very write that frees it, and while anyone waits nobody else is granted ahead of them (witness WAITERS_AHEAD). Semaphores queue the same way; sets do not wait.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"acquire\",\"tenantId\":\"team-a\",\"resource\":\"deploy:prod\",\"holder\":\"worker-7\",\"waitSeconds\":20}'".into(),
            "Your place is kept while you wait and 30 s after each wait ends: call again with the same holder to keep waiting (a lease handed to you meanwhile is kept for you until then). waitSeconds is not part of a requestId's identity: a retry resumes your place, or replays the grant you already won, including a lease handed to your place between calls that has ended since (granted: true, replayed: true, as of the hand-off; acquire with a new requestId for a new lease). A queue holds 64 places (QUEUE_FULL beyond). The clients wait this way: with client.lease(r, holder=h, wait=60) (Python), guard_waiting (Rust), leasekit run --wait 60.".into(),
        ]),
        Section::new("watch", "Values, watch and leader election", vec![
            "acquire and renew take value (0 to 1024 bytes of UTF-8): the holder's note kept with its permit, a leader's address say. Every permit shown carries it (null when none): holders, the top-level permit, list entries; it is signed with the answer. An acquire sets it (the holder's acquire again without one keeps it, as a renew does); a renew changes it when it sends one and keeps it otherwise; a waiting acquire's value is the permit's from the moment it is granted.".into(),
            "Every answer about one resource carries stateTag, which changes exactly when its live permits (holder, token, value) change; a renew that only moves expiresAt leaves it. {op: watch, resource, stateTag, waitSeconds?} answers at once (changed: true) when the resource is no longer in that state, else as soon as it changes (on the local server within 100 ms of the write or lapse), or with changed: false when waitSeconds (0 to 20, default 20) have passed. It is a read: nothing is written; over MCP it is in the read-only lease_read tool. On leasekit serve, a watch sent with Accept: text/event-stream (without application/json; and an API key) is a stream of server-sent events: one change event per change, its id the stateTag (reconnect with it as stateTag and nothing is missed), a comment every 15 s; an error event ends it. On Lambda a stream is refused (406): chain watch calls.".into(),
            "Leader election is these ops: campaign is an acquire with waitSeconds and your value, proclaim a renew with a new value (refused once your token is no longer current), resign a release, observe a chain of watches on stateTag. From Python: with client.campaign(r, holder=h, value=addr) as lead (lead.proclaim(v); leaving resigns), client.leader(r), for leader in client.observe(r). TypeScript: client.campaign(r, {holder, value}, async (lead) => ...), for await (const leader of client.observe(r)). Rust: client.campaign(r, h, addr, ttl, None) gives a Guard (guard.proclaim(v)), client.observe(r).next(). From scripts: leasekit watch --resource R prints one JSON line per change; leasekit elect --resource R --value ADDR -- CMD runs CMD while leader.".into(),
        ]),
        Section::new("work", "Finished work and claim-next", vec![
            "release with done: true ends your permit and marks the resource finished for keepDoneSeconds (1 to 7776000, default 604800: a week), with result (0 to 1024 bytes). While the mark stands every acquire (plain, semaphore, set, waiting, candidates) fails at once with witness DONE, whose actual is {holder, fencingToken, doneAt, result}; the places of those waiting end with that answer; get, watch and list show done: {holder, fencingToken, doneAt, result, until} (null when not finished). A semaphore's other permits stay until released or lapsed. Nothing sweeps the mark: every decision compares the time with until, and the next write after it drops it.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"release\",\"tenantId\":\"team-a\",\"resource\":\"issue:42\",\"holder\":\"agent-1\",\"token\":1,\"done\":true,\"result\":\"PR #97\"}'".into(),
            "{op: reopen, resource, reason, holder?, token?} ends the mark early: the finisher with the token it finished with, an admin key, or the paying wallet in its own tenant (anyone else: 403 FORBIDDEN); audited like revoke (the entry's reopened names the mark). Tokens continue from the counter. Over MCP it is in the lease_revoke tool.".into(),
            "acquire with candidates (2 to 50 distinct names, instead of resource) grants one permit of the first that can be granted now (not held to its limit, not finished, nobody waiting ahead), in the order given; the answer's resource names it. None: fail, a witness per candidate at /candidates/<i> (LEASE_HELD, DONE, WAITERS_AHEAD, LIMIT_MISMATCH) and each one's state in leases. It works with limit and session, not with waitSeconds; a requestId retry gets the same resource. Two DynamoDB round trips when nothing races: the candidates read in one snapshot, the winner written guarded on what was read.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"acquire\",\"tenantId\":\"team-a\",\"candidates\":[\"issue:41\",\"issue:42\",\"issue:43\"],\"holder\":\"agent-1\",\"ttlSeconds\":300}'".into(),
            "The clients: Python with client.claim_next(tasks, holder=h) as task: task.finish(result) (Finished, a NotAcquired, carries the mark); TypeScript client.claimNext(tasks, {holder}, async (task) => task.finish(result)); Rust client.claim_next(&tasks, h, ttl) gives Claim::Won {resource, guard}, guard.done(Some(result), None). Scripts: leasekit run --candidates a,b,c --done -- CMD runs CMD on the first free one and marks it finished when CMD exits 0 (exit 77 when it is finished already).".into(),
        ]),
        Section::new("fencing", "Fencing at the store", vec![
            "A fencing token protects only a store that refuses a smaller one. The clients make each write one atomic operation of the store that refuses a token below the fence it keeps beside the data, raising a typed error that names both tokens (Python FenceRefused, TypeScript FenceRefused, Rust FenceError::Refused) with nothing written: DynamoDB (one conditional PutItem; Python, TypeScript, Rust), PostgreSQL (one INSERT ... ON CONFLICT DO UPDATE ... WHERE fence <= token; Python, TypeScript), S3 (the fence in the object's metadata, the write conditional on the ETag read; Python, TypeScript, Rust), Redis (one script; Python). S3's ETag is the MD5 of the bytes: put the token in the body, so that no newer write can leave the bytes a stale writer read. A semaphore's permit is checked with the service instead: two live permits have two tokens, neither stale.".into(),
            "Python: with client.lease(\"invoice:INV-1009\", holder=\"worker-1\") as held: fencing.dynamodb_put(dynamodb, \"invoices\", {\"id\": {\"S\": \"INV-1009\"}}, held); fencing.postgres_upsert(conn, \"invoices\", {\"id\": \"INV-1009\"}, {\"status\": \"sent\"}, held); fencing.s3_put(s3, \"invoices\", \"INV-1009.json\", body_with_token, held); fencing.redis_set(redis, \"invoice:INV-1009\", \"sent\", held)".into(),
            "TypeScript: await client.withLease(\"invoice:INV-1009\", { holder: \"worker-1\" }, (lease) => dynamodbPut(dynamodb, \"invoices\", { id: { S: \"INV-1009\" } }, lease)); likewise postgresUpsert(pool, \"invoices\", { id: \"INV-1009\" }, { status: \"sent\" }, lease) and s3Put(s3, \"invoices\", \"INV-1009.json\", bodyWithToken, lease).".into(),
            "Rust (leasekit-client, features dynamodb and s3): let guard = client.guard(\"invoice:INV-1009\", \"worker-1\", ttl).await?; fencing::dynamodb_put(&ddb, \"invoices\", item, &guard).await?; fencing::s3_put(&s3, \"invoices\", \"INV-1009.json\", body_with_token, &guard).await?;".into(),
        ]),
        Section::new("seeing", "Seeing and ending leases", vec![
            "list: {op: list, prefix?, cursor?, pageSize?} pages through your tenant's resources that have a live permit or a waiter, by name (pageSize 1 to 100, default 50): leases lists each with its limit, holders and waiters, and nextCursor continues (null at the end; a cursor works only for the tenant it was given to). It reads an index, so it is advisory: a grant shows within about 2 s; get and check are authoritative.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $KEY\" -d '{\"op\":\"list\",\"tenantId\":\"team-a\",\"prefix\":\"deploy:\"}'".into(),
            "revoke: {op: revoke, resource, holder?, reason} ends that holder's permit, or every permit of the resource, at once: waiters are served as after a release, later tokens stay larger, and the revoked holder's next renew or release fails with REVOKED. Only an API key created with the admin role (leasekit keys create --account A --admin) or a paying wallet in its own tenant may: anyone else gets 403 FORBIDDEN and nothing changes. Each revoke writes an audit entry in the same transaction (who, when, what it ended, why), kept 90 days; audit: {op: audit, resource?, cursor?, pageSize?} lists them newest first.".into(),
            "curl -s $URL/api/v1/lease -H \"X-API-KEY: $ADMIN_KEY\" -d '{\"op\":\"revoke\",\"tenantId\":\"team-a\",\"resource\":\"deploy:prod\",\"holder\":\"worker-7\",\"reason\":\"wedged since 03:00\"}'".into(),
            "The console, GET /console/, shows the same for people: your live leases counting down, their waiters, revoke with a reason for an admin key, and the audit. It asks for an API key and tenant and keeps them in the tab's session storage only. From scripts: leasekit list, leasekit revoke --resource R --reason WHY, leasekit audit; over MCP: lease_list and lease_audit (read-only) and lease_revoke (destructive).".into(),
        ]),
        Section::new("retries", "Retries and crash-resume", vec![
            "Send a requestId with every mutation you may retry. The same request again within 24 hours returns the stored answer with replayed: true and changes nothing (and is not charged again); the same requestId with different input is a 409.".into(),
            PAYMENT_IDENTIFIER_NOTE.into(),
            "For claims (POST /claim, /claim/free), retry with the same key and holder: held with mine: true means the hold is already yours, resume your work. A paid claim is billed per attempt; the same payment resent under its payment identifier gets the first attempt's kept answer and is not billed again.".into(),
        ]),
        Section::new("signed", "Signed answers", vec![
            "Every lease answer carries _provenance: a W3C Verifiable Credential 2.0 secured with an eddsa-jcs-2022 proof by this service's did:key (published at /.well-known/did.json), binding the SHA-256 of the canonical request, of data exactly as sent (replayed included) and of a C2PA-aligned manifest. Verify offline, or POST the answer to /api/v1/verify-provenance.".into(),
            format!("The sample at /api/v1/samples/lease is invented data: its credential is typed {SAMPLE_TYPE} and signed with a sample key of its own, so every verifier reports it as a sample, never as an answer."),
        ]),
        Section::new("python", "From Python", vec![
            "pip install './clients/python[x402]' from the leasekit repository; import leasekit. Client(url, api_key=..., tenant=...) or Client(url, account=eth_account_account) to pay per call; AsyncClient for asyncio.".into(),
            "with client.lease(\"deploy:prod\", holder=\"worker-7\", ttl=30, wait=10) as lease: renews in the background, gives lease.token for your writes, and turns lease.lost true (lease.check() raises) once it cannot be sure it still holds the lease; it releases on exit, and raises NotAcquired when the lease was not free within wait.".into(),
            "client.acquire(r, holder=h, limit=4) takes a permit of a semaphore; client.acquire_all([r1, r2], holder=h) a set; client.check(r, token, holder=h).current says whether a token is still a live permit's. with client.lease(r, holder=h, limit=4) holds a permit, and with client.lease_all([r1, r2], holder=h) holds a whole set with one background renewal and one lost signal (lease.tokens has each token).".into(),
            "with client.session(holder=\"agent-7\", ttl=30) as session: opens a session and keeps it alive in the background; token = session.acquire(\"invoice:INV-1009\") (limit=, wait=; session.acquire_all([r1, r2]) for a set) takes holds in it, each living as long as the session, so session.lost (session.check(), session.wait_lost()) is one loss for all of them; leaving the block closes it and frees every hold at once. async with client.session(...) on AsyncClient.".into(),
        ]),
        Section::new("typescript", "From TypeScript", vec![
            "npm install ./clients/typescript from the leasekit repository (ESM, types included, Node 20+ and browsers); import { LeaseClient } from \"leasekit\". new LeaseClient({ url, apiKey, tenant }), or { url, wallet } with a viem account to pay per call (add @x402/core @x402/evm @x402/extensions viem).".into(),
            "await client.withLease(\"deploy:prod\", { holder: \"worker-7\", ttl: 30, wait: 10 }, async (lease) => { ... }) renews in the background, gives lease.token for your writes, and aborts lease.signal (pass it to fetch and child processes) once it cannot be sure it still holds the lease; it releases when the function returns or throws, and throws NotAcquired when the lease was not free within wait.".into(),
            "client.acquire(r, { holder, limit: 4 }) takes a permit of a semaphore, client.acquireAll([r1, r2], { holder }) a set, client.check(r, token, { holder }) says whether a token is current; list, revoke and audit as over HTTP. Refusals are answers (granted: false, rules); errors are typed (InvalidInput, Unauthorized, Forbidden, ... all LeasekitError).".into(),
            "await client.withSession({ holder: \"agent-7\", ttl: 30 }, async (session) => { const token = await session.acquire(\"invoice:INV-1009\"); ... }) opens a session kept alive in the background; session.acquire (limit, wait) and session.acquireAll take holds in it, each living as long as the session, so session.signal is one AbortSignal for all of them; the session closes when the function returns or throws, freeing every hold at once. From Rust: client.session(holder, ttl) gives a Session whose acquire, signal() and close() do the same.".into(),
        ]),
    ]);
    sections
}

/// The answer fields table.
const FIELDS: &[&[&str]] = &[
    &[
        "status",
        "pass: the op did what was asked (get always passes); fail: a rule stopped it (see witnesses).",
    ],
    &["op", "The op answered."],
    &[
        "granted",
        "acquire, renew: you hold it now. release: it was released. get: someone holds it. check: the token is current. revoke: it ended a permit. A set: every resource of it.",
    ],
    &[
        "holder, fencingToken, expiresAt",
        "Your own permit when you hold one after the op, else the live permit with the largest token; null when nobody holds it (and for a set: see leases). expiresAt is ISO 8601 UTC with milliseconds; the server clock decides: held while now < expiresAt.",
    ],
    &[
        "limit, holders",
        "How many may hold the resource at once (1: a lease), and the live permits [{holder, fencingToken, expiresAt}] by token.",
    ],
    &[
        "queuePosition",
        "An acquire whose wait ended ungranted: your place in the queue (1 = next).",
    ],
    &["current", "check: whether the token is a live permit's."],
    &[
        "leases",
        "A set: each resource {resource, granted, holder, fencingToken, expiresAt, limit, holders} in request order. list: the page of resources, each with its waiters.",
    ],
    &["revoked", "revoke: the permits it ended."],
    &[
        "entries",
        "audit: the page of entries {id, at, actor, resource, ended, reason}, newest first.",
    ],
    &[
        "nextCursor",
        "list, audit: send it back as cursor for the next page; null at the end.",
    ],
    &[
        "replayed",
        "true only for the stored answer to a repeated requestId (nothing changed, nothing charged).",
    ],
    &[
        "witnesses",
        "One per broken rule {ruleId, path, detail, expected, actual}: LEASE_HELD, NOT_HOLDER, TOKEN_MISMATCH, LEASE_EXPIRED, NO_HOLD, REVOKED, TOKEN_EXHAUSTED, LIMIT_MISMATCH, WAITERS_AHEAD, QUEUE_FULL, TOKEN_NOT_CURRENT.",
    ],
    &[
        "versions, limits",
        "What the answer depends on (engine, input schema, clock, store) and what it does not promise. Left out with ?signed=false.",
    ],
    &["deterministic", "Always true: pure rules, no model."],
];

/// The errors table: every error the lease route answers.
const ERRORS: &[&[&str]] = &[
    &[
        "400",
        "INVALID_JSON",
        "The body is not JSON (or has a duplicate key).",
    ],
    &[
        "400",
        "INVALID_INPUT",
        "The body breaks the input schema: witnesses name each field by JSON pointer.",
    ],
    &[
        "400",
        "INVALID_REQUEST",
        "?signed is neither true nor false.",
    ],
    &[
        "401",
        "UNAUTHORIZED",
        "A malformed, unknown or revoked X-API-KEY.",
    ],
    &[
        "402",
        "PAYMENT_REQUIRED, PAYMENT_INVALID, ...",
        "No key and no valid x402 payment: the body (and PAYMENT-REQUIRED) offers one.",
    ],
    &[
        "403",
        "FORBIDDEN",
        "revoke or audit with a key without the admin role.",
    ],
    &[
        "408",
        "REQUEST_TIMEOUT",
        "The body did not arrive in time (local server).",
    ],
    &[
        "409",
        "IDEMPOTENCY_CONFLICT",
        "The requestId was used with different input.",
    ],
    &[
        "409",
        "PAYMENT_IDENTIFIER_CONFLICT, PAYMENT_IN_PROGRESS, PAYMENT_ANSWER_UNKNOWN",
        "An x402 payment identifier reused with another payment or request, its first call not finished, or its answer lost: send it again shortly.",
    ],
    &["413", "PAYLOAD_TOO_LARGE", "The body is over 64 KiB."],
    &["405", "METHOD_NOT_ALLOWED", "A method other than POST."],
    &[
        "429",
        "RATE_LIMITED",
        "A waiting call over its account's share of the local server's waits: retry after Retry-After seconds.",
    ],
    &[
        "500",
        "INTERNAL_ERROR",
        "Our own failure; details only in our log.",
    ],
    &[
        "502",
        "STORE_UNAVAILABLE, FACILITATOR_UNAVAILABLE",
        "The store or the payment facilitator failed or its answer is unknown: retry with the same requestId.",
    ],
];

/// /docs/lease.json.
pub fn page_json(base: &str, prices: &Prices) -> Value {
    let sections: Vec<Value> = sections(prices)
        .into_iter()
        .map(|section| {
            let mut json =
                json!({"id": section.id, "title": section.title, "paragraphs": section.paragraphs});
            if let Some(table) = section.table {
                json["table"] = json!({"columns": table.columns, "rows": table.rows});
            }
            json
        })
        .collect();
    json!({"title": "Leases with fencing tokens", "sections": sections, "links": links(base)})
}

/// Whether a paragraph is code (a command or a JSON body), set as a block on the page.
fn is_code(paragraph: &str) -> bool {
    ["curl ", "leasekit ", "{\"", "{\n"]
        .iter()
        .any(|start| paragraph.starts_with(start))
}

/// The start of a page for people, to its `<body>`: what every page of ours looks like.
pub(crate) fn page_head(title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{PAGE_STYLE}</style></head><body>\n",
        escape(title)
    )
}

const PAGE_STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}\
    h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem}code{background:#f3f3f3;padding:0 .2rem}\
    pre{background:#f3f3f3;border:1px solid #ddd;border-radius:4px;padding:.6rem .8rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\
    pre code{padding:0;font:14px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace}\
    table{border-collapse:collapse;font-size:14px;margin:1rem 0}th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}\
    th{background:#f3f3f3}nav ol{columns:2;padding-left:1.2rem}nav h2{margin-top:1rem}";

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// /docs/lease/: the same content, as a page for people, with its contents first.
pub fn page_html(base: &str, prices: &Prices) -> String {
    let sections = sections(prices);
    let mut html = page_head("Leases with fencing tokens - leasekit");
    html.push_str(
        "<h1>Leases with fencing tokens</h1>\n<nav aria-label=\"Contents\"><h2>Contents</h2><ol>\n",
    );
    for section in &sections {
        html.push_str(&format!(
            "<li><a href=\"#{}\">{}</a></li>\n",
            escape(&section.id),
            escape(&section.title)
        ));
    }
    html.push_str("</ol></nav>\n");
    for section in &sections {
        html.push_str(&format!(
            "<h2 id=\"{}\">{}</h2>\n",
            escape(&section.id),
            escape(&section.title)
        ));
        for p in &section.paragraphs {
            if is_code(p) {
                html.push_str(&format!("<pre><code>{}</code></pre>\n", escape(p)));
            } else {
                html.push_str(&format!("<p>{}</p>\n", escape(p)));
            }
        }
        if let Some(table) = &section.table {
            html.push_str(&table_html(table));
        }
    }
    html.push_str(&format!(
        "<p><a href=\"{0}/openapi.json\">OpenAPI</a> · <a href=\"{0}/api/v1/catalog\">catalog</a> · <a href=\"{0}/api/v1/samples/lease\">sample</a> · <a href=\"{0}/.well-known/did.json\">signing key</a></p>\n</body></html>\n",
        escape(base)
    ));
    html
}

fn table_html(table: &Table) -> String {
    let row = |cells: &mut dyn Iterator<Item = &str>, tag: &str| {
        let cells: String = cells
            .map(|cell| format!("<{tag}>{}</{tag}>", escape(cell)))
            .collect();
        format!("<tr>{cells}</tr>\n")
    };
    let mut html = String::from("<table>\n<thead>");
    html.push_str(&row(&mut table.columns.iter().copied(), "th"));
    html.push_str("</thead>\n<tbody>\n");
    for cells in &table.rows {
        html.push_str(&row(&mut cells.iter().map(String::as_str), "td"));
    }
    html.push_str("</tbody>\n</table>\n");
    html
}

/// A worked acquire and an answer to it, invented and signed now as a sample: the credential is
/// typed `LeasekitSampleAnswer` (not `LeaseAnswerCredential`) and signed with the sample key, so
/// no verifier takes it for an answer of this service. It validates against the OpenAPI schemas.
/// Nothing of it comes from the caller.
pub fn sample(issuer: &Issuer, now: Millis) -> Value {
    let request = json!({"op": "acquire", "resource": "invoice:INV-1009", "holder": "worker-7", "ttlSeconds": 60, "tenantId": "team-a", "requestId": "w7-claim-INV-1009"});
    let after = LeaseState::granted(42, "worker-7", now + 60_000);
    let data = serde_json::to_value(LeaseAnswer::granted(
        Op::Acquire,
        &after,
        Some("worker-7"),
        now,
    ))
    .unwrap_or_default();
    let subject = Subject {
        route: crate::service::lease::ROUTE,
        op: "acquire",
        request_sha256: sha256(&request),
    };
    let answer =
        json!({"data": data, "_provenance": sample_provenance(issuer, &subject, &data, now)});
    json!({
        "description": format!("Acquire invoice:INV-1009 for 60 s as worker-7 (API key, tenant team-a). The resource had issued 41 tokens before, so this acquisition gets 42. The answer is invented: its credential is typed {SAMPLE_TYPE} and signed with the sample key (sampleKey), not the service's key, so /api/v1/verify-provenance reports it as a sample (sample: true, verified: false). A real answer has the same shape."),
        "sampleKey": issuer.sample_did(),
        "request": {"method": "POST", "path": "/api/v1/lease", "headers": {"content-type": "application/json", "x-api-key": "<your key>"}, "body": request},
        "response": {"status": 200, "body": answer},
    })
}
