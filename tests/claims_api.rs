//! Claims over HTTP against `leasekit serve`: paid per attempt (201 acquired / 200 held, `mine`,
//! a receipt either way), free with an API key or a sign-in-with-x wallet, the hourly quota,
//! UTF-8 byte limits, and one winner among racing holders.

mod support;

use k256::ecdsa::SigningKey;
use leasekit_core::x402::client::{address_of, header, pay};
use leasekit_core::x402::types::PaymentRequirements;
use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

/// The offer for `plan`, from the 402 an unpaid claim gets.
async fn offer(url: &str, plan: &str) -> PaymentRequirements {
    let a = post(
        url,
        "/claim",
        &json!({"key": "k", "plan": plan, "holder": "h"}),
        &[],
    )
    .await;
    assert_eq!(a.status, 402);
    a.required.unwrap().accepts[0].clone()
}

async fn paid_claim(
    url: &str,
    key: &str,
    plan: &str,
    holder: &str,
    wallet: &SigningKey,
    nonce: [u8; 32],
) -> Answer {
    let offer = offer(url, plan).await;
    let payment = header(&pay(wallet, &offer, now_secs(), nonce).unwrap());
    post(
        url,
        "/claim",
        &json!({"key": key, "plan": plan, "holder": holder}),
        &[("PAYMENT-SIGNATURE", payment)],
    )
    .await
}

#[tokio::test]
async fn each_plan_has_its_price_and_bad_input_comes_first() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    for (plan, amount) in [("hour", "5200"), ("day", "30000"), ("week", "150000")] {
        assert_eq!(offer(&server.url, plan).await.amount, amount, "{plan}");
    }
    for (body, path) in [
        (json!({"key": "k", "plan": "month", "holder": "h"}), "/plan"),
        (json!({"key": "a/b", "plan": "hour", "holder": "h"}), "/key"),
        (json!({"key": "", "plan": "hour", "holder": "h"}), "/key"),
        (json!({"key": "k", "plan": "hour"}), "/holder"),
        (
            json!({"key": "k", "plan": "hour", "holder": "h", "extra": 1}),
            "/extra",
        ),
    ] {
        let a = post(&server.url, "/claim", &body, &[]).await;
        assert_eq!(
            a.status, 400,
            "{body}: no payment is asked before the input is valid"
        );
        assert!(
            a.body["witnesses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["path"] == path),
            "{body}: {}",
            a.body
        );
    }
}

#[tokio::test]
async fn key_and_holder_limits_are_utf8_bytes() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let two_byte = "é"; // 2 UTF-8 bytes, 1 character
    let fits = two_byte.repeat(128); // 256 bytes
    let over = format!("{fits}a"); // 257 bytes, 129 characters
    let free = |key: &str, holder: &str| json!({"key": key, "holder": holder});
    let key = [("x-api-key", ACME_KEY.to_owned())];
    assert_eq!(
        post(&server.url, "/claim/free", &free(&fits, &fits), &key)
            .await
            .status,
        201
    );
    for body in [free(&over, "h"), free("k", &over)] {
        let a = post(&server.url, "/claim/free", &body, &key).await;
        assert_eq!(a.status, 400, "{}", a.body);
        assert_eq!(a.body["witnesses"][0]["ruleId"], "MAX_BYTES");
    }
    // A 4-byte character counts as 4: 64 of them are 256 bytes.
    for (chars, status) in [(64, 201), (65, 400)] {
        let a = post(
            &server.url,
            "/claim/free",
            &free(&"😀".repeat(chars), "h"),
            &key,
        )
        .await;
        assert_eq!(a.status, status, "{chars} four-byte characters: {}", a.body);
    }
}

#[tokio::test]
async fn a_paid_attempt_is_billed_on_both_outcomes_and_says_whose_hold_it_is() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let alice = wallet(1);
    let a = paid_claim(
        &server.url,
        "pipeline/ingest",
        "hour",
        "worker-7",
        &alice,
        [1; 32],
    )
    .await;
    assert_eq!(a.status, 400, "'/' is refused before payment");
    let a = paid_claim(
        &server.url,
        "jobs:render:batch-99",
        "day",
        "renderer-alpha",
        &alice,
        [1; 32],
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(
        (a.body["outcome"].as_str(), a.body["plan"].as_str()),
        (Some("acquired"), Some("day"))
    );
    let claim = &a.body["claim"];
    assert_eq!(
        (claim["key"].as_str(), claim["holder"].as_str()),
        (Some("jobs:render:batch-99"), Some("renderer-alpha"))
    );
    assert_eq!(
        claim["expiresAt"].as_i64().unwrap() - claim["acquiredAt"].as_i64().unwrap(),
        86_400_000
    );
    assert_eq!(claim["fencingToken"], 1);
    assert!(a.body.get("mine").is_none());
    let payment = &a.body["payment"];
    assert_eq!(payment["payer"], address_of(&alice).lower());
    assert_eq!(
        (payment["amount"].as_str(), payment["network"].as_str()),
        (Some("30000"), Some("eip155:84532"))
    );
    assert_eq!(
        payment["asset"],
        "0x036cbd53842c5426634e7929541ec2318f3dcf7e"
    );
    assert!(
        payment["transaction"]
            .as_str()
            .unwrap()
            .starts_with("local-settlement:")
    );

    // Crash-resume: the same holder retries and learns the hold is its own; billed again.
    let again = paid_claim(
        &server.url,
        "jobs:render:batch-99",
        "hour",
        "renderer-alpha",
        &alice,
        [2; 32],
    )
    .await;
    assert_eq!(
        (
            again.status,
            again.body["outcome"].as_str(),
            again.body["mine"].as_bool()
        ),
        (200, Some("held"), Some(true))
    );
    assert_eq!(again.body["claim"], a.body["claim"], "the existing hold");
    assert_eq!(again.body["payment"]["amount"], "5200");
    // Another of the wallet's holders: held, not mine, billed.
    let other = paid_claim(
        &server.url,
        "jobs:render:batch-99",
        "hour",
        "renderer-beta",
        &alice,
        [3; 32],
    )
    .await;
    assert_eq!(
        (other.status, other.body["mine"].as_bool()),
        (200, Some(false))
    );
    assert!(other.body["payment"]["transaction"].is_string());
    // Another wallet has its own namespace.
    let bob = paid_claim(
        &server.url,
        "jobs:render:batch-99",
        "week",
        "renderer-alpha",
        &wallet(2),
        [1; 32],
    )
    .await;
    assert_eq!(bob.status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_holders_racing_for_one_key_one_acquires() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url, "hour").await;
    let alice = wallet(1);
    let tasks: Vec<_> = (0..50u8)
        .map(|i| {
            let payment = header(&pay(&alice, &offer, now_secs(), [i + 1; 32]).unwrap());
            let url = server.url.clone();
            tokio::spawn(async move {
                let body = json!({"key": "the-one", "plan": "hour", "holder": format!("h{i}")});
                post(&url, "/claim", &body, &[("PAYMENT-SIGNATURE", payment)]).await
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        let a = t.await.unwrap();
        assert!(
            a.body["payment"]["transaction"].is_string(),
            "every attempt is billed: {}",
            a.body
        );
        statuses.push(a.status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 49);
}

#[tokio::test]
async fn free_claims_need_a_key_or_a_wallet_and_never_a_payment() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let body = json!({"key": "cron:nightly", "holder": "host-1"});
    let keyed = async |key: &str| {
        let headers = [("x-api-key", key.to_owned())];
        post(&server.url, "/claim/free", &body, &headers).await
    };
    let a = keyed(ACME_KEY).await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.body["plan"], "free");
    assert_eq!(
        a.body["claim"]["expiresAt"].as_i64().unwrap()
            - a.body["claim"]["acquiredAt"].as_i64().unwrap(),
        300_000
    );
    assert!(a.body.get("payment").is_none());
    let a = keyed(ACME_KEY).await;
    assert_eq!((a.status, a.body["mine"].as_bool()), (200, Some(true)));
    // Another account: its own namespace.
    assert_eq!(keyed(GLOBEX_KEY).await.status, 201);
    // Neither key nor wallet proof: a 402 that advertises sign-in-with-x and asks no payment.
    let a = post(&server.url, "/claim/free", &body, &[]).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (402, Some("IDENTITY_REQUIRED"))
    );
    let required = a.required.unwrap();
    assert!(required.accepts.is_empty());
    let ext = &required.extensions.unwrap()["sign-in-with-x"];
    assert_eq!(ext["supportedChains"][0]["type"], "eip191");
    assert!(
        ext["info"]["uri"]
            .as_str()
            .unwrap()
            .ends_with("/claim/free")
    );
    // A bad key is a 401.
    let a = post(
        &server.url,
        "/claim/free",
        &body,
        &[("x-api-key", "not-a-real-key-0123".to_owned())],
    )
    .await;
    assert_eq!(a.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_hourly_free_quota_holds_under_concurrency() {
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(dir.path(), &["--free-claims-per-hour", "5"]);
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let url = server.url.clone();
            tokio::spawn(async move {
                let body = json!({"key": format!("k{i}"), "holder": "h"});
                post(
                    &url,
                    "/claim/free",
                    &body,
                    &[("x-api-key", ACME_KEY.to_owned())],
                )
                .await
            })
        })
        .collect();
    let mut limited = 0;
    for t in tasks {
        let a = t.await.unwrap();
        if a.status == 429 {
            limited += 1;
            assert_eq!(a.body["code"], "RATE_LIMITED");
            let retry: u64 = a.retry_after.expect("Retry-After").parse().unwrap();
            assert!((1..=3600).contains(&retry));
        } else {
            assert_eq!(a.status, 201);
        }
    }
    assert_eq!(limited, 15, "exactly 5 of 20 got through");
    // The limit is per account: another account is not affected.
    let a = post(
        &server.url,
        "/claim/free",
        &json!({"key": "k", "holder": "h"}),
        &[("x-api-key", GLOBEX_KEY.to_owned())],
    )
    .await;
    assert_eq!(a.status, 201);
}

/// POST /claim/free with `body` and a `SIGN-IN-WITH-X` header.
async fn siwx_claim(server: &Server, body: &Value, header: String) -> Answer {
    post(
        &server.url,
        "/claim/free",
        body,
        &[("SIGN-IN-WITH-X", header)],
    )
    .await
}

/// A `SIGN-IN-WITH-X` header for `wallet`, signed over the challenge fields with `edit` applied:
/// the EIP-4361 message and EIP-191 signature as a wallet makes them.
fn siwx_header(
    wallet: &SigningKey,
    domain: &str,
    uri: &str,
    edit: impl Fn(&mut leasekit_core::x402::siwx::Payload),
) -> String {
    use base64::Engine;
    use leasekit_core::x402::siwx::Payload;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).unwrap();
    let mut p = Payload {
        domain: domain.into(),
        address: address_of(wallet).lower(),
        uri: uri.into(),
        version: "1".into(),
        chain_id: "eip155:84532".into(),
        kind: "eip191".into(),
        nonce: hex::encode(nonce),
        issued_at: leasekit_core::clock::iso8601(i64::try_from(now).unwrap() - 1000),
        statement: Some("Sign in to claim a key for free.".into()),
        expiration_time: None,
        not_before: None,
        request_id: None,
        resources: None,
        signature: String::new(),
    };
    edit(&mut p);
    leasekit_core::x402::client::sign_in(wallet, &mut p).unwrap();
    base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&p).unwrap())
}

#[tokio::test]
async fn an_out_of_bounds_siwx_field_is_a_400_naming_it_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let domain = server.url.strip_prefix("http://").unwrap().to_owned();
    let uri = format!("{}/claim/free", server.url);
    let wallet = wallet(41);
    let body = json!({"key": "cron:bounded", "holder": "h"});
    // A validly signed proof whose nonce is 3,000 characters long.
    let long = siwx_header(&wallet, &domain, &uri, |p| p.nonce = "a".repeat(3000));
    let a = siwx_claim(&server, &body, long).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (400, Some("INVALID_INPUT")),
        "{}",
        a.body
    );
    assert_eq!(a.body["witnesses"][0]["path"], "SIGN-IN-WITH-X.nonce");
    assert!(a.body["error"].as_str().unwrap().contains("nonce"));
    // Other fields too, each named.
    for (field, header) in [
        (
            "SIGN-IN-WITH-X.statement",
            siwx_header(&wallet, &domain, &uri, |p| {
                p.statement = Some("s".repeat(5000))
            }),
        ),
        (
            "SIGN-IN-WITH-X.version",
            siwx_header(&wallet, &domain, &uri, |p| p.version = "1".repeat(300)),
        ),
        (
            "SIGN-IN-WITH-X.resources",
            siwx_header(&wallet, &domain, &uri, |p| {
                p.resources = Some(vec![uri.clone(); 100])
            }),
        ),
    ] {
        let a = siwx_claim(&server, &body, header).await;
        assert_eq!(
            (a.status, a.body["witnesses"][0]["path"].as_str()),
            (400, Some(field)),
            "{}",
            a.body
        );
    }
    // Nothing was written: the same wallet's first good proof acquires the key.
    let good = siwx_header(&wallet, &domain, &uri, |_| {});
    let a = siwx_claim(&server, &body, good).await;
    assert_eq!(
        (a.status, a.body["outcome"].as_str()),
        (201, Some("acquired")),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn siwx_proofs_must_name_the_configured_origin_not_the_callers_host() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let body = json!({"key": "cron:origin", "holder": "h"});
    // Signed for evil.example, sent with Host and X-Forwarded-Proto saying the same.
    let forged = siwx_header(
        &wallet(42),
        "evil.example",
        "https://evil.example/claim/free",
        |_| {},
    );
    let headers = [
        ("SIGN-IN-WITH-X", forged),
        ("host", "evil.example".to_owned()),
        ("x-forwarded-proto", "https".to_owned()),
    ];
    let a = post(&server.url, "/claim/free", &body, &headers).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (402, Some("IDENTITY_INVALID")),
        "{}",
        a.body
    );
    // The challenge names the configured origin, whatever the request's headers say.
    let required = a.required.unwrap();
    let info = &required.extensions.unwrap()["sign-in-with-x"]["info"];
    let domain = server.url.strip_prefix("http://").unwrap();
    assert_eq!(info["domain"], domain);
    assert_eq!(info["uri"], format!("{}/claim/free", server.url));
    assert_eq!(required.resource.url, format!("{}/claim/free", server.url));
    // The right origin with the right scheme is accepted; the right host on https is not.
    let wrong_scheme = siwx_header(
        &wallet(42),
        domain,
        &format!("https://{domain}/claim/free"),
        |_| {},
    );
    let a = siwx_claim(&server, &body, wrong_scheme).await;
    assert_eq!(a.status, 402, "{}", a.body);
    let good = siwx_header(
        &wallet(42),
        domain,
        &format!("{}/claim/free", server.url),
        |_| {},
    );
    let a = siwx_claim(&server, &body, good).await;
    assert_eq!(a.status, 201, "{}", a.body);
    server.stop();

    // Behind a proxy: --public-url is the origin proofs name, though requests arrive on loopback.
    let server = Server::start_with(dir.path(), &["--public-url", "https://lease.example.com"]);
    let proxied = siwx_header(
        &wallet(43),
        "lease.example.com",
        "https://lease.example.com/claim/free",
        |_| {},
    );
    let a = siwx_claim(&server, &body, proxied).await;
    assert_eq!(a.status, 201, "{}", a.body);
}
