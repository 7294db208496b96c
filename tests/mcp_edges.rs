//! POST /mcp keeps the contract at its edges, over raw HTTP: 64 KiB at most (413), invalid JSON
//! (400 INVALID_JSON), batches (400 BATCH_NOT_SUPPORTED), other methods (405), other content
//! types (415), a foreign Host or Origin (403: DNS rebinding); every refusal `{error, code}` JSON.

mod support;

use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;

/// Send `method` to /mcp with the API key, JSON accept headers and `headers`; (status, headers,
/// body text).
async fn mcp(
    server: &Server,
    method: reqwest::Method,
    body: impl Into<reqwest::Body>,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut all = HeaderMap::new();
    for (name, value) in [
        ("x-api-key", ACME_KEY),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2025-06-18"),
    ]
    .iter()
    .chain(headers)
    {
        // Later ones replace the defaults.
        all.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let request = reqwest::Client::new()
        .request(method, format!("{}/mcp", server.url))
        .headers(all)
        .body(body);
    let response = request.send().await.expect("HTTP round trip");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// The refusal's code, after checking it is the contract's `{error, code}` JSON.
fn code_of(status: u16, headers: &reqwest::header::HeaderMap, text: &str) -> String {
    let content_type = headers["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("application/json"),
        "{status} {content_type}: {text}"
    );
    let body: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{status}: {text}"));
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{text}"
    );
    body["code"].as_str().expect("a code").to_owned()
}

/// Method, body, extra headers, the status and the code expected.
type Case = (
    reqwest::Method,
    String,
    Vec<(&'static str, &'static str)>,
    u16,
    &'static str,
);

#[tokio::test]
async fn mcp_refusals_are_contract_json() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let post = reqwest::Method::POST;
    // The route works.
    let (status, _, text) = mcp(&server, post.clone(), LIST, &[]).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"lease\""), "{text}");

    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x".repeat(200 * 1024)}});
    let cases: Vec<Case> = vec![
        (
            post.clone(),
            big.to_string(),
            vec![],
            413,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            post.clone(),
            "{not json".into(),
            vec![],
            400,
            "INVALID_JSON",
        ),
        (
            post.clone(),
            format!("[{LIST}]"),
            vec![],
            400,
            "BATCH_NOT_SUPPORTED",
        ),
        (
            post.clone(),
            LIST.into(),
            vec![("content-type", "text/plain")],
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            reqwest::Method::GET,
            String::new(),
            vec![],
            405,
            "METHOD_NOT_ALLOWED",
        ),
        (
            reqwest::Method::DELETE,
            String::new(),
            vec![],
            405,
            "METHOD_NOT_ALLOWED",
        ),
        (
            reqwest::Method::PUT,
            LIST.into(),
            vec![],
            405,
            "METHOD_NOT_ALLOWED",
        ),
        (
            post.clone(),
            LIST.into(),
            vec![("accept", "text/html")],
            406,
            "NOT_ACCEPTABLE",
        ),
    ];
    for (method, body, headers, want, want_code) in cases {
        let (status, got_headers, text) = mcp(&server, method.clone(), body, &headers).await;
        assert_eq!(
            status,
            want,
            "{method} {headers:?}: {}",
            &text[..text.len().min(200)]
        );
        assert_eq!(code_of(status, &got_headers, &text), want_code);
        if want == 405 {
            assert_eq!(got_headers["allow"], "POST");
        }
    }
}

#[tokio::test]
async fn mcp_checks_host_and_origin_against_the_configured_url() {
    let dir = TempDir::new().unwrap();
    let post = reqwest::Method::POST;
    // A local run: a page on another site, or a name rebound to 127.0.0.1, is refused.
    let server = Server::start(dir.path());
    for headers in [
        vec![("host", "evil.example")],
        vec![("origin", "https://evil.example")],
    ] {
        let (status, got, text) = mcp(&server, post.clone(), LIST, &headers).await;
        assert_eq!(status, 403, "{headers:?}: {text}");
        assert_eq!(code_of(status, &got, &text), "FORBIDDEN");
    }
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    // At its default (loopback) URL, another loopback name for the same port is the same service;
    // another port or scheme is another site.
    let same = format!("http://localhost:{port}");
    let other_port = format!("http://localhost:{}", port.parse::<u16>().unwrap() ^ 1);
    let other_scheme = format!("https://127.0.0.1:{port}");
    for (origin, want) in [
        (server.url.as_str(), 200),
        (same.as_str(), 200),
        (other_port.as_str(), 403),
        (other_scheme.as_str(), 403),
    ] {
        let (status, _, text) = mcp(&server, post.clone(), LIST, &[("origin", origin)]).await;
        assert_eq!(status, want, "{origin}: {text}");
    }
    server.stop();
    let server = Server::start_with(dir.path(), &["--public-url", "https://lease.example.com"]);
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    let localhost = format!("localhost:{port}");
    let local_origin = format!("http://localhost:{port}");
    // Allowed: the public host and origin, and a loopback Host on a local run.
    for headers in [
        vec![("host", "lease.example.com")],
        vec![
            ("host", "lease.example.com:443"),
            ("origin", "https://lease.example.com"),
        ],
        vec![("host", localhost.as_str())],
        vec![],
    ] {
        let (status, _, text) = mcp(&server, post.clone(), LIST, &headers).await;
        assert_eq!(status, 200, "{headers:?}: {text}");
    }
    // Refused: a rebinding attacker's Host, and a page of another origin.
    for headers in [
        vec![("host", "evil.example")],
        vec![("host", "lease.example.com:8443")],
        vec![("origin", "https://evil.example")],
        vec![("origin", "http://lease.example.com")],
        vec![("origin", "null")],
        // With a public URL, a loopback page is another site (it used to be let through).
        vec![("origin", local_origin.as_str())],
        vec![
            ("host", localhost.as_str()),
            ("origin", local_origin.as_str()),
        ],
    ] {
        let (status, got, text) = mcp(&server, post.clone(), LIST, &headers).await;
        assert_eq!(status, 403, "{headers:?}: {text}");
        assert_eq!(code_of(status, &got, &text), "FORBIDDEN");
    }
}

/// A lease granted over MCP is logged like one over HTTP: its request line names the op, the
/// outcome and the tenant's hash (the MCP channel used to log none of them).
#[tokio::test]
async fn an_mcp_tool_call_is_logged_like_the_http_route() {
    let dir = TempDir::new().unwrap();
    let log_path = dir.path().join("server.log");
    let server = Server::start_logged(dir.path(), std::fs::File::create(&log_path).unwrap());
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "lease",
        "arguments": {"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "ttlSeconds": 30},
    }});
    let (status, _, text) = mcp(&server, reqwest::Method::POST, call.to_string(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["data"]["granted"], true,
        "{text}"
    );
    server.stop();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("route=\"/mcp\""))
        .unwrap_or_else(|| panic!("no /mcp request line: {log}"));
    assert!(
        line.contains("op=\"acquire\"") && line.contains("outcome=\"granted\""),
        "{line}"
    );
    assert!(!line.contains("tenant=\"-\""), "{line}");
    // What the tool call cost the store is on the line too (it runs in a task of its own): the
    // key lookup and the lease write, not the lookup alone.
    let trips: u32 = line
        .split_once("store_round_trips=")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(trips >= 2, "{line}");
    assert!(!line.contains("store_write_units=0.0"), "{line}");
}

/// A message rmcp cannot read as JSON-RPC (a `_meta` or an `id` of the wrong type) is the
/// caller's bad request: 400, not the 415 rmcp says (the body is JSON). And a wallet's unpaid
/// tool call gets the x402 offer as its result, with the code a 402 carries over HTTP.
#[tokio::test]
async fn unreadable_messages_are_400_and_an_unpaid_tool_call_gets_the_offer_with_its_code() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let call = |meta: Value, id: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "lease", "arguments": {"op": "get", "resource": "r"}, "_meta": meta}})
        .to_string()
    };
    for (meta, id) in [
        (json!("a string"), json!(1)),
        (json!([1, 2]), json!(2)),
        (json!({}), json!(null)),
        (json!({}), json!({"an": "object"})),
    ] {
        let (status, headers, text) =
            mcp(&server, reqwest::Method::POST, call(meta.clone(), id), &[]).await;
        let code = code_of(status, &headers, &text);
        assert_eq!(
            (status, code.as_str()),
            (400, "INVALID_REQUEST"),
            "{meta}: {text}"
        );
    }
    // No key (the header is removed): a wallet. Unpaid, the result is the offer.
    let (status, _, text) = mcp_without_key(&server, call(json!({}), json!(3))).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{text}");
    assert_eq!(result["structuredContent"]["code"], "PAYMENT_REQUIRED");
    assert_eq!(result["structuredContent"]["x402Version"], 2);
    assert!(result["structuredContent"]["extensions"]["payment-identifier"].is_object());
    // A payment in `_meta` that is no PaymentPayload: refused, naming where it was.
    let (_, _, text) = mcp_without_key(
        &server,
        call(json!({"x402/payment": {"x402Version": 2}}), json!(4)),
    )
    .await;
    let answer: Value = serde_json::from_str(&text).unwrap();
    let offer = &answer["result"]["structuredContent"];
    assert_eq!(offer["code"], "PAYMENT_INVALID", "{text}");
    assert!(
        offer["error"]
            .as_str()
            .unwrap()
            .contains("_meta[\"x402/payment\"]"),
        "{text}"
    );
}

/// POST a JSON-RPC message to /mcp with no API key at all.
async fn mcp_without_key(
    server: &Server,
    body: String,
) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body)
        .send()
        .await
        .expect("HTTP round trip");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// A tools/call whose params are not a tool call's is JSON-RPC's invalid params (-32602), with its
/// id; it used to be -32601, "method not found", for a method that exists. A well-typed call to a
/// tool that does not exist stays what it was.
#[tokio::test]
async fn a_mistyped_tool_call_is_invalid_params() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let post = reqwest::Method::POST;
    // Params that are not even an object too (rmcp alone answers those 400, without the id).
    for params in [
        json!({"name": 5}),
        json!({"name": "lease", "arguments": "not an object"}),
        json!({}),
        json!("x"),
        json!(5),
        json!([1]),
        json!(null),
    ] {
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let (status, _, text) = mcp(&server, post.clone(), call.to_string(), &[]).await;
        assert_eq!(status, 200, "{params}: {text}");
        let answer: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"));
        assert_eq!(answer["error"]["code"], -32602, "{params}: {text}");
        assert_eq!(answer["id"], 7, "{text}");
    }
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "nope", "arguments": {}}});
    let (status, _, text) = mcp(&server, post.clone(), call.to_string(), &[]).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("no tool named nope"), "{text}");
    // Every check before the params still stands: a mistyped call is refused as a well-typed
    // one is, for an id JSON-RPC does not allow, another version, a bad key or an Accept that
    // takes no JSON (the attack found each answered 200 -32602).
    let message = |id: Value, version: &str, params: Value| {
        json!({"jsonrpc": version, "id": id, "method": "tools/call", "params": params}).to_string()
    };
    let good =
        json!({"name": "lease", "arguments": {"op": "get", "tenantId": "t", "resource": "r"}});
    for bad in [json!({"name": 5}), json!("x")] {
        let bad_key = [("x-api-key", "not-a-real-key-0123")];
        let html = [("accept", "text/html")];
        for (label, id, version, headers) in [
            ("fractional id", json!(1.5), "2.0", &[][..]),
            ("huge id", json!(18446744073709551616.0), "2.0", &[][..]),
            ("version 1.0", json!(1), "1.0", &[][..]),
            ("bad key", json!(1), "2.0", &bad_key[..]),
            ("accept html", json!(1), "2.0", &html[..]),
        ] {
            let (want, _, _) = mcp(
                &server,
                post.clone(),
                message(id.clone(), version, good.clone()),
                headers,
            )
            .await;
            let (got, _, text) = mcp(
                &server,
                post.clone(),
                message(id, version, bad.clone()),
                headers,
            )
            .await;
            assert_ne!(want, 200, "{label}: a well-typed call is refused");
            assert_eq!(got, want, "{label} {bad}: {text}");
        }
    }
}

/// What rmcp refuses with a bare JSON-RPC error (a JSON-RPC response sent to the server) is the
/// contract's `{error, code}` too; and every Origin header is checked, not the first alone.
#[tokio::test]
async fn json_rpc_refusals_are_contract_json_and_every_origin_is_checked() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    for message in [
        json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "x"}}),
    ] {
        let (status, headers, text) =
            mcp(&server, reqwest::Method::POST, message.to_string(), &[]).await;
        assert_eq!(
            (status, code_of(status, &headers, &text).as_str()),
            (400, "INVALID_REQUEST"),
            "{message}: {text}"
        );
    }
    let response = reqwest::Client::new()
        .post(format!("{}/mcp", server.url))
        .header("x-api-key", ACME_KEY)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("origin", &server.url)
        .header("origin", "http://evil.example")
        .body(LIST)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    assert_eq!(
        (status, code_of(status, &headers, &text).as_str()),
        (403, "FORBIDDEN"),
        "{text}"
    );
}

/// A paid tool call's settlement is logged from inside rmcp's task, yet in its request's span:
/// the settlement's line and the request's carry the same `request{id=…}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_calls_settlement_is_logged_in_its_requests_span() {
    use leasekit_core::x402::client::pay;
    use leasekit_core::x402::types::PaymentRequirements;
    let (server, _dir, log_path) =
        logged_with_facilitator(support::facilitator::Mode::FailsSettle).await;
    let call = |meta: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "lease", "arguments": {"op": "acquire", "resource": "r", "holder": "w"},
            "_meta": meta}})
        .to_string()
    };
    let (_, _, text) = mcp_without_key(&server, call(json!({}))).await;
    let answer: Value = serde_json::from_str(&text).unwrap();
    let offer: PaymentRequirements =
        serde_json::from_value(answer["result"]["structuredContent"]["accepts"][0].clone())
            .unwrap_or_else(|e| panic!("{e}: {text}"));
    let payment = pay(&wallet(3), &offer, now_secs(), [3; 32]).unwrap();
    let (status, _, text) = mcp_without_key(&server, call(json!({"x402/payment": payment}))).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"granted\":true"), "{text}");
    server.stop();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let settled = span_ids(&log, "settlement refused");
    assert_eq!(settled.len(), 1, "{log}");
    let requests = span_ids(&log, "route=\"/mcp\"");
    assert_eq!(requests.len(), 2, "{log}");
    assert_eq!(requests[1], settled[0], "{log}");
    assert_ne!(requests[0], settled[0], "{log}");
}
