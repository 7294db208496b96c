//! x402 over HTTP against `leasekit serve` (local facilitator): the 402 offer, a paid lease, the
//! wallet as tenant, one authorization used once, every tampered field refused with nothing
//! written, replays not settled, denials charged, store failures not.

mod support;

use k256::ecdsa::SigningKey;
use leasekit_core::x402::client::{address_of, header, pay};
use leasekit_core::x402::types::{PaymentPayload, PaymentRequirements};
use serde_json::{Value, json};
use support::facilitator;
use support::*;
use tempfile::TempDir;

async fn offer(url: &str) -> PaymentRequirements {
    let a = pay_post(url, &json!({"op": "get", "resource": "r"}), None).await;
    a.required.expect("a 402 with PAYMENT-REQUIRED").accepts[0].clone()
}

/// POST to the lease route, with a payment if given.
async fn pay_post(url: &str, body: &Value, payment: Option<&str>) -> Answer {
    let headers: Vec<(&str, String)> = payment
        .map(|p| ("PAYMENT-SIGNATURE", p.to_owned()))
        .into_iter()
        .collect();
    post(url, "/api/v1/lease", body, &headers).await
}

fn paid(key: &SigningKey, offer: &PaymentRequirements, nonce: u8) -> String {
    header(&pay(key, offer, now_secs(), [nonce; 32]).unwrap())
}

/// An acquire of `r` by holder `w`, paid by wallet 1 with nonce 1.
async fn acquire_paid(url: &str, offer: &PaymentRequirements) -> Answer {
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    pay_post(url, &body, Some(&paid(&wallet(1), offer, 1))).await
}

#[tokio::test]
async fn no_key_and_no_payment_is_a_402_with_the_offer() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let a = pay_post(
        &server.url,
        &json!({"op": "acquire", "resource": "r", "holder": "w"}),
        None,
    )
    .await;
    assert_eq!(a.status, 402);
    assert_eq!(a.body["code"], "PAYMENT_REQUIRED");
    let required = a.required.unwrap();
    assert_eq!(required.x402_version, 2);
    assert!(
        required.resource.url.ends_with("/api/v1/lease"),
        "{}",
        required.resource.url
    );
    let o = &required.accepts[0];
    assert_eq!(
        (o.scheme.as_str(), o.network.as_str(), o.amount.as_str()),
        ("exact", "eip155:84532", "5000")
    );
    assert_eq!(o.asset, "0x036cbd53842c5426634e7929541ec2318f3dcf7e");
    assert_eq!(
        (o.extra["name"].as_str(), o.extra["version"].as_str()),
        (Some("USDC"), Some("2"))
    );
    assert!(o.max_timeout_seconds > 6);
    assert_eq!(
        a.body["accepts"][0]["payTo"],
        o.pay_to.as_str(),
        "the body carries the same offer"
    );
    // Invalid input is still a 400, before any payment is looked at.
    let a = pay_post(
        &server.url,
        &json!({"op": "acquire", "resource": "r"}),
        None,
    )
    .await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (400, Some("INVALID_INPUT"))
    );
}

#[tokio::test]
async fn a_paid_call_is_served_settled_and_scoped_to_the_wallet() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let body =
        json!({"op": "acquire", "resource": "deploy:prod", "holder": "w1", "tenantId": "ignored"});
    let a = pay_post(&server.url, &body, Some(&paid(&alice, &offer, 1))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        (
            a.body["data"]["granted"].clone(),
            a.body["data"]["fencingToken"].clone()
        ),
        (json!(true), json!(1))
    );
    let s = a.settlement.expect("PAYMENT-RESPONSE on a settled answer");
    assert_eq!(s["success"], true);
    assert!(
        s["transaction"]
            .as_str()
            .unwrap()
            .starts_with("local-settlement:"),
        "{s}"
    );
    assert_eq!(s["payer"], address_of(&alice).lower());
    assert_eq!(
        (s["network"].as_str(), s["amount"].as_str()),
        (Some("eip155:84532"), Some("5000"))
    );

    // The wallet is the tenant: another wallet, or an API key with the same tenantId, sees nothing.
    let get = json!({"op": "get", "resource": "deploy:prod", "tenantId": "ignored"});
    assert_eq!(
        pay_post(&server.url, &get, Some(&paid(&alice, &offer, 2)))
            .await
            .body["data"]["holder"],
        "w1"
    );
    assert_eq!(
        pay_post(&server.url, &get, Some(&paid(&wallet(2), &offer, 3)))
            .await
            .body["data"]["granted"],
        false
    );
    assert_eq!(
        server.client(Some(ACME_KEY)).data(get.clone()).await["granted"],
        false
    );

    // A denied acquire is a 200 and is charged too.
    let denied = pay_post(
        &server.url,
        &json!({"op": "acquire", "resource": "deploy:prod", "holder": "w2"}),
        Some(&paid(&alice, &offer, 4)),
    )
    .await;
    assert_eq!(denied.body["data"]["witnesses"][0]["ruleId"], "LEASE_HELD");
    assert_eq!(denied.settlement.unwrap()["success"], true);
}

#[tokio::test]
async fn one_authorization_pays_once() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let payment = paid(&wallet(1), &offer, 9);
    let body = json!({"op": "get", "resource": "r"});
    assert_eq!(
        pay_post(&server.url, &body, Some(&payment)).await.status,
        200
    );
    let again = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(
        (again.status, again.body["code"].as_str()),
        (402, Some("PAYMENT_INVALID"))
    );
    assert!(
        again.body["error"]
            .as_str()
            .unwrap()
            .contains("used before"),
        "{}",
        again.body
    );
    // Concurrent spends of one authorization: exactly one gets through.
    let payment = paid(&wallet(1), &offer, 10);
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (url, payment, body) = (server.url.clone(), payment.clone(), body.clone());
            tokio::spawn(async move { pay_post(&url, &body, Some(&payment)).await.status })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        ok += usize::from(t.await.unwrap() == 200);
    }
    assert_eq!(ok, 1);
}

#[tokio::test]
async fn every_tampered_field_is_refused_and_nothing_is_written() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    let signed = pay(&alice, &offer, now_secs(), [5; 32]).unwrap();
    type Tamper = fn(&mut PaymentPayload);
    let cases: [(&str, Tamper, &str); 6] = [
        (
            "amount",
            |p| p.payload.authorization.value = "4999".into(),
            "exactly the price",
        ),
        (
            "payTo",
            |p| p.payload.authorization.to = "0x0000000000000000000000000000000000000001".into(),
            "pay-to",
        ),
        (
            "network",
            |p| p.accepted.network = "eip155:8453".into(),
            "not one of the payment requirements",
        ),
        // The validity is signed: changed after signing, the signature no longer recovers.
        (
            "validBefore",
            |p| p.payload.authorization.valid_before = (now_secs() + 3).to_string(),
            "does not recover",
        ),
        (
            "signer",
            |p| p.payload.authorization.from = "0x857b06519E91e3A54538791bDbb0E22373e36b66".into(),
            "does not recover",
        ),
        ("version", |p| p.x402_version = 1, "x402Version"),
    ];
    for (name, tamper, message) in cases {
        let mut p = signed.clone();
        tamper(&mut p);
        let a = pay_post(&server.url, &body, Some(&header(&p))).await;
        assert_eq!(a.status, 402, "{name}: {}", a.body);
        assert_eq!(a.body["code"], "PAYMENT_INVALID", "{name}");
        assert!(
            a.body["error"].as_str().unwrap().contains(message),
            "{name}: {}",
            a.body["error"]
        );
        assert!(a.settlement.is_none(), "{name}: nothing settled");
    }
    let a = pay_post(&server.url, &body, Some("bm90IGpzb24=")).await;
    assert_eq!(a.status, 402);
    // Signed as it is, but outside its validity: too late (under 6 s left), or too early.
    let offer_ = offer.clone();
    let signed_at = |at: u64, nonce: u8| header(&pay(&alice, &offer_, at, [nonce; 32]).unwrap());
    for (payment, message) in [
        (
            signed_at(now_secs() + 3 - offer.max_timeout_seconds, 6),
            "expires too soon",
        ),
        (signed_at(now_secs() + 660, 7), "not valid yet"),
    ] {
        let a = pay_post(&server.url, &body, Some(&payment)).await;
        assert_eq!(a.status, 402, "{message}: {}", a.body);
        assert!(
            a.body["error"].as_str().unwrap().contains(message),
            "{}",
            a.body
        );
    }
    // Nothing was consumed or written: the untampered authorization (same nonce) still pays, and
    // the resource was never acquired.
    let a = pay_post(&server.url, &body, Some(&header(&signed))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["data"]["fencingToken"], 1);
}

#[tokio::test]
async fn a_replayed_request_id_is_answered_but_not_settled() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w", "requestId": "buy-1"});
    let first = pay_post(&server.url, &body, Some(&paid(&alice, &offer, 1))).await;
    assert!(first.settlement.is_some());
    let retry = pay_post(&server.url, &body, Some(&paid(&alice, &offer, 2))).await;
    assert_eq!(retry.status, 200);
    assert_eq!(retry.body["data"]["replayed"], true);
    assert!(retry.settlement.is_none(), "a replay is not charged again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_is_a_502_and_nothing_is_settled() {
    let mut endpoint = Endpoint::dynoxide().await;
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(dir.path(), &["--dynamodb-endpoint", &endpoint.url.clone()]);
    let offer = offer(&server.url).await;
    endpoint.stop().await;
    let a = pay_post(
        &server.url,
        &json!({"op": "get", "resource": "r"}),
        Some(&paid(&wallet(1), &offer, 1)),
    )
    .await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (502, Some("STORE_UNAVAILABLE"))
    );
    assert!(a.settlement.is_none());
}

async fn with_facilitator(mode: facilitator::Mode) -> (TempDir, Server, facilitator::Seen) {
    let (url, seen) = facilitator::start(mode).await;
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--facilitator-url",
            &url,
            "--facilitator-authorization",
            "Bearer t0ken",
        ],
    );
    (dir, server, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_facilitator_verifies_before_and_settles_after() {
    let (dir, server, seen) = with_facilitator(facilitator::Mode::Accepts).await;
    let offer = offer(&server.url).await;
    let a = acquire_paid(&server.url, &offer).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.settlement.unwrap()["transaction"],
        format!("0x{}", "ab".repeat(32))
    );
    let seen = seen.0.lock().unwrap().clone();
    let paths: Vec<&str> = seen.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(paths, ["/verify", "/settle"]);
    server.stop();
    let lease_key = format!("wallet:{}|r", address_of(&wallet(1)).lower());
    assert!(
        store_contains(dir.path(), &lease_key),
        "the scan finds a lease that was written"
    );
    for (_, body, auth) in &seen {
        assert_eq!(body["x402Version"], 2);
        assert_eq!(body["paymentRequirements"]["amount"], "5000");
        assert_eq!(
            body["paymentPayload"]["accepted"],
            body["paymentRequirements"]
        );
        assert_eq!(auth.as_deref(), Some("Bearer t0ken"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_facilitator_refusal_is_a_402_and_nothing_is_done() {
    let (dir, server, seen) = with_facilitator(facilitator::Mode::RefusesVerify).await;
    let offer = offer(&server.url).await;
    let a = acquire_paid(&server.url, &offer).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (402, Some("PAYMENT_INVALID"))
    );
    assert!(
        a.body["error"]
            .as_str()
            .unwrap()
            .contains("insufficient_funds")
    );
    assert!(
        seen.0
            .lock()
            .unwrap()
            .iter()
            .all(|(p, _, _)| p == "/verify"),
        "never settled"
    );
    server.stop();
    let lease_key = format!("wallet:{}|r", address_of(&wallet(1)).lower());
    assert!(
        !store_contains(dir.path(), &lease_key),
        "no lease was written"
    );
}

/// Whether the stopped server's store files contain `needle` (every file: WAL included).
fn store_contains(dir: &std::path::Path, needle: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_settlement_still_answers_and_is_recorded() {
    let (dir, server, _seen) = with_facilitator(facilitator::Mode::FailsSettle).await;
    let offer = offer(&server.url).await;
    let a = acquire_paid(&server.url, &offer).await;
    assert_eq!(a.status, 200, "the work is done: the answer is given");
    assert_eq!(a.body["data"]["granted"], true);
    let s = a.settlement.unwrap();
    assert_eq!(
        (s["success"].clone(), s["errorReason"].clone()),
        (json!(false), json!("transaction_reverted"))
    );
    server.stop();
    assert!(
        store_contains(dir.path(), "settlement_failed"),
        "recorded in the ledger for reconciliation"
    );
}

/// Every line a request causes is in its span, `request{id=…}`: the settlement's error and the
/// request's own line carry the same id, and another request's line another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_log_lines_share_its_id() {
    let (server, _dir, log_path) = logged_with_facilitator(facilitator::Mode::FailsSettle).await;
    let offer = offer(&server.url).await;
    assert_eq!(acquire_paid(&server.url, &offer).await.status, 200);
    server.stop();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let settled = span_ids(&log, "settlement refused");
    assert_eq!(settled.len(), 1, "{log}");
    let paid = span_ids(&log, "status=200");
    assert_eq!(
        paid, settled,
        "the settlement's line and its request's: {log}"
    );
    let offered = span_ids(&log, "status=402");
    assert_eq!(offered.len(), 1, "{log}");
    assert_ne!(offered, paid, "each request its own id: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_facilitator_is_a_502_before_any_work() {
    let dir = TempDir::new().unwrap();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = Server::start_with(
        dir.path(),
        &["--facilitator-url", &format!("http://{closed}")],
    );
    let offer = offer(&server.url).await;
    let a = acquire_paid(&server.url, &offer).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (502, Some("FACILITATOR_UNAVAILABLE"))
    );
    assert!(a.settlement.is_none());
}

/// One log line per request, with route, status, op and a hashed tenant; never the API key, the
/// payment signature or the wallet's address.
#[tokio::test]
async fn the_request_log_names_what_happened_and_no_secret() {
    let dir = TempDir::new().unwrap();
    let log_path = dir.path().join("server.log");
    let server = Server::start_logged(dir.path(), std::fs::File::create(&log_path).unwrap());
    let keyed = server.client(Some(ACME_KEY));
    keyed
        .data(json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w"}))
        .await;
    let offer = offer(&server.url).await;
    let alice = wallet(7);
    let payment = paid(&alice, &offer, 1);
    let a = pay_post(
        &server.url,
        &json!({"op": "acquire", "resource": "r", "holder": "w"}),
        Some(&payment),
    )
    .await;
    assert_eq!(a.status, 200);
    server.stop();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("request") && l.contains("/api/v1/lease"))
        .collect();
    assert!(lines.len() >= 3, "a line per request: {log}");
    assert!(
        lines.iter().any(|l| l.contains("status=200")
            && l.contains("op=\"acquire\"")
            && l.contains("outcome=\"granted\"")),
        "{log}"
    );
    assert!(lines.iter().any(|l| l.contains("status=402")), "{log}");
    // What each call cost in DynamoDB (BENCHMARKS.md's cost model): the keyed acquire reads the
    // key and writes the lease. The paid one writes the payment (accepted, with what a sweeper
    // needs to settle it: about 1.5 KB, 2 units), commits the lease and its record in one
    // transaction with no read before it (a paid mutation always keeps a record: it is the
    // evidence a sweeper settles on; a transaction bills twice the units), then closes the
    // payment (2 units). Each take also writes its list index entry (one unit, docs/adr/0008).
    let usage: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("status=200") && l.contains("op=\"acquire\""))
        .filter_map(|l| l.split_once("store_round_trips=").map(|(_, u)| u))
        .collect();
    assert_eq!(
        usage,
        [
            "2 store_read_units=0.5 store_write_units=2.0",
            "3 store_read_units=0.0 store_write_units=13.0"
        ],
        "{log}"
    );
    for secret in [ACME_KEY, payment.as_str(), &address_of(&alice).lower()[2..]] {
        assert!(!log.contains(secret), "the log must not contain {secret}");
    }
}

/// A payment for `offer` by `key` with `nonce`, named `id` with the x402 `payment-identifier`
/// extension (the declaration echoed back with `info.id` added, as the official SDKs send it).
fn identified(key: &SigningKey, offer: &PaymentRequirements, nonce: u8, id: &str) -> String {
    identified_at(key, offer, nonce, id, now_secs())
}

/// `identified`, signed as at `at` (Unix s): valid until `at` plus the offered timeout.
fn identified_at(
    key: &SigningKey,
    offer: &PaymentRequirements,
    nonce: u8,
    id: &str,
    at: u64,
) -> String {
    use leasekit_core::x402::payment_identifier::{KEY, declaration};
    let mut payload = pay(key, offer, at, [nonce; 32]).unwrap();
    let mut extension = declaration();
    extension["info"]["id"] = json!(id);
    payload.extensions = Some(serde_json::Map::from_iter([(KEY.to_owned(), extension)]));
    header(&payload)
}

const PAY_ID: &str = "pay_0123456789abcdef";

#[tokio::test]
async fn the_payment_identifier_is_declared_where_it_is_honoured() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let lease = pay_post(&server.url, &json!({"op": "get", "resource": "r"}), None).await;
    let declared = lease.required.unwrap().extensions.unwrap();
    assert_eq!(declared["payment-identifier"]["info"]["required"], false);
    assert_eq!(
        declared["payment-identifier"]["schema"]["properties"]["id"]["minLength"],
        16
    );
    let claim = post(
        &server.url,
        "/claim",
        &json!({"key": "k", "plan": "hour", "holder": "h"}),
        &[],
    )
    .await;
    assert_eq!(claim.status, 402);
    assert_eq!(
        claim.required.unwrap().extensions.unwrap()["payment-identifier"]["info"]["required"],
        false
    );
}

/// /claim keeps the answer of a call under a payment identifier: a resend gets it (won or held)
/// with its settlement, and never makes a new attempt, which could win a key the first found held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_identified_claim_gets_its_kept_answer_and_is_settled_once() {
    let (_dir, server, seen) = with_facilitator(facilitator::Mode::Accepts).await;
    let claim = |holder: &str| json!({"key": "job-42", "plan": "hour", "holder": holder});
    let unpaid = post(&server.url, "/claim", &claim("h1"), &[]).await;
    let offer = unpaid.required.unwrap().accepts[0].clone();
    let alice = wallet(1);
    let send = |body: Value, payment: String| {
        let url = server.url.clone();
        async move { post(&url, "/claim", &body, &[("PAYMENT-SIGNATURE", payment)]).await }
    };
    let won = identified(&alice, &offer, 1, PAY_ID);
    let first = send(claim("h1"), won.clone()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let again = send(claim("h1"), won).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.body, first.body, "the kept answer, receipt included");
    assert_eq!(
        again.settlement.unwrap()["transaction"],
        first.settlement.unwrap()["transaction"]
    );
    // Another holder's attempt finds it held; resent, it is the same answer, not a new attempt.
    let held = identified(&alice, &offer, 2, "pay_held_0123456789ab");
    let first = send(claim("h2"), held.clone()).await;
    assert_eq!(
        (first.status, first.body["mine"].clone()),
        (200, json!(false))
    );
    let again = send(claim("h2"), held.clone()).await;
    assert_eq!((again.status, &again.body), (200, &first.body));
    assert_eq!(
        seen.settled_nonces().len(),
        2,
        "two attempts paid, each once"
    );
    // The same payment for another claim body: a conflict.
    let other = send(claim("h3"), held).await;
    assert_eq!(
        (other.status, other.body["code"].as_str()),
        (409, Some("PAYMENT_IDENTIFIER_CONFLICT"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_identified_payment_gets_its_answer_and_is_settled_once() {
    let (_dir, server, seen) = with_facilitator(facilitator::Mode::Accepts).await;
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let payment = identified(&alice, &offer, 1, PAY_ID);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    let first = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["data"]["fencingToken"], 1);
    // The answer was lost; the client sends the very same payment again.
    let again = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["data"]["replayed"], true);
    assert_eq!(again.body["data"]["fencingToken"], 1);
    assert_eq!(
        again.settlement.expect("the first settlement, again")["transaction"],
        first.settlement.unwrap()["transaction"]
    );
    assert_eq!(seen.settled_nonces().len(), 1, "settled once");
    // A read resent under its identifier gets the answer kept for it, not a fresh read (that
    // would sell every later read for the price of one).
    let get = json!({"op": "get", "resource": "r"});
    let payment = identified(&alice, &offer, 2, "pay_get_0123456789ab");
    let read = pay_post(&server.url, &get, Some(&payment)).await;
    assert_eq!(read.body["data"]["holder"], "w");
    let release = json!({"op": "release", "resource": "r", "holder": "w", "token": 1});
    let released = pay_post(&server.url, &release, Some(&paid(&alice, &offer, 3))).await;
    assert_eq!(released.body["data"]["granted"], true);
    let again = pay_post(&server.url, &get, Some(&payment)).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body, read.body, "the kept answer, as first sent");
    assert_eq!(seen.settled_nonces().len(), 3);
}

/// A resend is answered for 24 h, not only while the authorization could still be used: it was
/// checked when first used, and a resend uses nothing up. (The SDKs sign for 300 s.)
#[tokio::test]
async fn a_payment_past_its_validity_is_still_answered_when_resent() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    // Valid until 8 s from now: usable now, too late to be used after 2 s (6 s to settle).
    let at = now_secs() + 8 - offer.max_timeout_seconds;
    let payment = identified_at(&alice, &offer, 1, PAY_ID, at);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    let first = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(first.status, 200, "{}", first.body);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let again = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["data"]["replayed"], true);
    // Without its identifier's first use to answer from, an expired payment is refused as ever.
    let late = identified_at(&alice, &offer, 2, "pay_late_0123456789a", at);
    let refused = pay_post(&server.url, &body, Some(&late)).await;
    assert_eq!(refused.status, 402);
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("expires too soon")
    );
}

/// The ledger keeps a payment as sent, and never deletes it: one past 8 KiB (unsigned junk in
/// its extensions) is refused, and its authorization is not used up.
#[tokio::test]
async fn an_oversized_payment_is_refused_and_uses_nothing_up() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let mut payload = pay(&wallet(1), &offer, now_secs(), [1; 32]).unwrap();
    let body = json!({"op": "get", "resource": "r"});
    payload.extensions = Some(serde_json::Map::from_iter([(
        "junk".to_owned(),
        json!("x".repeat(9 * 1024)),
    )]));
    let refused = pay_post(&server.url, &body, Some(&header(&payload))).await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str()),
        (402, Some("PAYMENT_INVALID"))
    );
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("larger than 8192 bytes"),
        "{}",
        refused.body
    );
    payload.extensions = None;
    let ok = pay_post(&server.url, &body, Some(&header(&payload))).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[tokio::test]
async fn an_identifier_used_with_another_payment_or_request_is_refused() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    let first = pay_post(
        &server.url,
        &body,
        Some(&identified(&alice, &offer, 1, PAY_ID)),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    // The same id on another authorization: a conflict, and that authorization is not used up.
    let other = identified(&alice, &offer, 2, PAY_ID);
    let a = pay_post(&server.url, &body, Some(&other)).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (409, Some("PAYMENT_IDENTIFIER_CONFLICT")),
        "{}",
        a.body
    );
    // The same payment for another request: a conflict too, and nothing applied.
    let release = json!({"op": "release", "resource": "r", "holder": "w", "token": 1});
    let a = pay_post(
        &server.url,
        &release,
        Some(&identified(&alice, &offer, 1, PAY_ID)),
    )
    .await;
    assert_eq!(a.status, 409, "{}", a.body);
    let still = pay_post(
        &server.url,
        &json!({"op": "get", "resource": "r"}),
        Some(&paid(&alice, &offer, 7)),
    )
    .await;
    assert_eq!(
        still.body["data"]["holder"], "w",
        "the release was not applied"
    );
    // The other authorization still pays, under a new id.
    let ok = pay_post(
        &server.url,
        &json!({"op": "get", "resource": "r"}),
        Some(&identified(&alice, &offer, 2, "pay_fresh_0123456789")),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    // Another wallet's same id is its own.
    let bob = pay_post(
        &server.url,
        &body,
        Some(&identified(&wallet(2), &offer, 1, PAY_ID)),
    )
    .await;
    assert_eq!(bob.status, 200, "{}", bob.body);
    // A malformed id is refused by name, and the authorization is not used up.
    let bad = pay_post(
        &server.url,
        &json!({"op": "get", "resource": "r"}),
        Some(&identified(&alice, &offer, 3, "too-short")),
    )
    .await;
    assert_eq!(
        (bad.status, bad.body["code"].as_str()),
        (402, Some("PAYMENT_INVALID"))
    );
    assert!(
        bad.body["error"]
            .as_str()
            .unwrap()
            .contains("payment-identifier.info.id"),
        "{}",
        bad.body
    );
    let good = pay_post(
        &server.url,
        &json!({"op": "get", "resource": "r"}),
        Some(&identified(&alice, &offer, 3, "pay_third_0123456789")),
    )
    .await;
    assert_eq!(good.status, 200, "{}", good.body);
}

#[tokio::test]
async fn a_resent_payment_that_bought_nothing_is_refused_as_unpaid() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w", "requestId": "buy-1"});
    assert_eq!(
        pay_post(&server.url, &body, Some(&paid(&alice, &offer, 1)))
            .await
            .status,
        200
    );
    // A replay of buy-1, paid under an identifier: answered, and that payment voided.
    let payment = identified(&alice, &offer, 2, PAY_ID);
    let replay = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(replay.body["data"]["replayed"], true);
    assert!(replay.settlement.is_none());
    // Resent: it bought nothing, so it is refused with the offer (pay again).
    let again = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(
        (again.status, again.body["code"].as_str()),
        (402, Some("PAYMENT_INVALID")),
        "{}",
        again.body
    );
    assert!(
        again.body["error"]
            .as_str()
            .unwrap()
            .contains("not charged")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_resends_of_one_identified_payment_settle_once() {
    let (_dir, server, seen) = with_facilitator(facilitator::Mode::SlowSettle(
        std::time::Duration::from_millis(300),
    ))
    .await;
    let offer = offer(&server.url).await;
    let payment = identified(&wallet(1), &offer, 1, PAY_ID);
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (url, payment, body) = (server.url.clone(), payment.clone(), body.clone());
            tokio::spawn(async move { pay_post(&url, &body, Some(&payment)).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        let a = t.await.unwrap();
        if a.status == 200 {
            assert_eq!(a.body["data"]["fencingToken"], 1);
        } else {
            assert_eq!(a.body["code"], "PAYMENT_IN_PROGRESS", "{}", a.body);
        }
        statuses.push(a.status);
    }
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 409),
        "{statuses:?}"
    );
    // Once the first has finished, a resend is answered.
    let later = pay_post(&server.url, &body, Some(&payment)).await;
    assert_eq!(later.status, 200, "{}", later.body);
    assert_eq!(later.body["data"]["replayed"], true);
    assert_eq!(seen.settled_nonces().len(), 1);
}

/// The coordination ops on the paid channel: a semaphore, a set and a check, each paid and
/// settled, in the paying wallet's tenant; bad set input is a 400 that uses no payment up.
#[tokio::test]
async fn semaphores_sets_and_check_are_paid_per_call() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let calls = [
        json!({"op": "acquire", "resource": "pool", "holder": "a", "limit": 2}),
        json!({"op": "acquire", "resource": "pool", "holder": "b", "limit": 2}),
        json!({"op": "acquire", "resources": ["x", "y"], "holder": "a"}),
        json!({"op": "check", "resource": "pool", "token": 2, "holder": "b"}),
    ];
    let mut answers = Vec::new();
    for (nonce, body) in calls.iter().enumerate() {
        let a = pay_post(
            &server.url,
            body,
            Some(&paid(&alice, &offer, 10 + nonce as u8)),
        )
        .await;
        assert_eq!(a.status, 200, "{body}: {}", a.body);
        assert!(a.settlement.is_some(), "{body}: settled");
        answers.push(a.body["data"].clone());
    }
    assert_eq!(answers[1]["fencingToken"], 2);
    assert_eq!(answers[1]["holders"].as_array().unwrap().len(), 2);
    assert_eq!(answers[2]["granted"], true);
    assert_eq!(answers[2]["leases"].as_array().unwrap().len(), 2);
    assert_eq!(answers[3]["current"], true);
    // A bad set is refused before the payment is looked at: the same payment then buys a call.
    let payment = paid(&alice, &offer, 40);
    let bad = json!({"op": "acquire", "resources": ["x", "x"], "holder": "a"});
    let refused = pay_post(&server.url, &bad, Some(&payment)).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.settlement.is_none());
    let good = json!({"op": "check", "resource": "x", "token": 1, "holder": "a"});
    let a = pay_post(&server.url, &good, Some(&payment)).await;
    assert_eq!(
        (a.status, a.body["data"]["current"].clone()),
        (200, json!(true)),
        "{}",
        a.body
    );
}

/// `?signed=false` on a paid call: the same call, settled, its answer without the signature;
/// a bad `signed` is refused before the payment is looked at, and the payment stays unused.
#[tokio::test]
async fn a_paid_call_may_ask_for_its_answer_unsigned() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let payment = paid(&wallet(1), &offer, 1);
    let headers = [("PAYMENT-SIGNATURE", payment.clone())];
    let body = json!({"op": "acquire", "resource": "r", "holder": "w"});
    let refused = post(&server.url, "/api/v1/lease?signed=maybe", &body, &headers).await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str()),
        (400, Some("INVALID_REQUEST"))
    );
    assert!(refused.settlement.is_none());
    let a = post(&server.url, "/api/v1/lease?signed=false", &body, &headers).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let keys: Vec<&String> = a.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["data"]);
    assert_eq!(
        (
            a.body["data"]["granted"].as_bool(),
            a.body["data"].get("versions")
        ),
        (Some(true), None)
    );
    assert_eq!(a.settlement.expect("settled")["success"], true);
}

/// Sessions on the paid route: a wallet opens one, acquires in it, keeps it alive and closes it,
/// each call paid and settled; the session is the wallet's (another wallet's acquire in it is
/// told it does not exist). A 400 (session with ttlSeconds) consumes no payment.
#[tokio::test]
async fn a_wallet_pays_for_each_session_call_and_the_session_is_its_own() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let call = |body: Value, nonce: u8| {
        let (url, payment) = (server.url.clone(), paid(&alice, &offer, nonce));
        async move { pay_post(&url, &body, Some(&payment)).await }
    };
    let opened = call(
        json!({"op": "open", "holder": "agent-1", "ttlSeconds": 60}),
        1,
    )
    .await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    assert_eq!(opened.settlement.unwrap()["success"], true);
    let session = opened.body["data"]["session"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = json!({"op": "acquire", "resource": "r", "holder": "agent-1", "session": session});
    let held = call(body.clone(), 2).await;
    assert_eq!(held.body["data"]["granted"], true, "{}", held.body);
    assert_eq!(
        held.body["data"]["holders"][0]["session"].as_str(),
        Some(session.as_str())
    );
    assert_eq!(held.settlement.unwrap()["success"], true);

    let bob = pay_post(&server.url, &body, Some(&paid(&wallet(2), &offer, 3))).await;
    assert_eq!(
        bob.body["data"]["witnesses"][0]["ruleId"],
        "SESSION_EXPIRED"
    );

    let both = json!({"op": "acquire", "resource": "r2", "holder": "agent-1", "session": session, "ttlSeconds": 5});
    let refused = call(both, 4).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.settlement.is_none(), "a 400 is not settled");
    // The authorization the 400 was sent with is still good: nothing consumed it.
    let kept = call(
        json!({"op": "keepalive", "session": session, "holder": "agent-1"}),
        4,
    )
    .await;
    assert_eq!(kept.body["data"]["granted"], true, "{}", kept.body);
    let closed = call(
        json!({"op": "close", "session": session, "holder": "agent-1"}),
        5,
    )
    .await;
    assert_eq!(closed.body["data"]["granted"], true);
    assert_eq!(closed.settlement.unwrap()["success"], true);
    let get = call(json!({"op": "get", "resource": "r"}), 6).await;
    assert_eq!(get.body["data"]["granted"], false, "free once closed");
}

/// A paid watch is one call at the lease price, however long it waits and whether or not the
/// state changed; a stream, which would hold a connection for many answers, is not sold (406,
/// nothing settled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paid_watch_is_one_call_at_the_lease_price() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let offer = offer(&server.url).await;
    let alice = wallet(1);
    let watch = |tag: Option<&str>, wait: u32| {
        let mut body = json!({"op": "watch", "resource": "leader", "waitSeconds": wait});
        if let Some(tag) = tag {
            body["stateTag"] = json!(tag);
        }
        body
    };
    let charged = |a: &Answer| {
        let s = a.settlement.clone().expect("settled");
        (s["success"].clone(), s["amount"].clone())
    };
    let first = pay_post(
        &server.url,
        &watch(None, 20),
        Some(&paid(&alice, &offer, 1)),
    )
    .await;
    assert_eq!(first.body["data"]["changed"], true, "{}", first.body);
    assert_eq!(charged(&first), (json!(true), json!("5000")));
    let tag = first.body["data"]["stateTag"].as_str().unwrap().to_owned();

    let writer = {
        let (url, offer, alice) = (server.url.clone(), offer.clone(), alice.clone());
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let body = json!({"op": "acquire", "resource": "leader", "holder": "w", "value": "a"});
            pay_post(&url, &body, Some(&paid(&alice, &offer, 2))).await
        })
    };
    let began = std::time::Instant::now();
    let woken = pay_post(
        &server.url,
        &watch(Some(&tag), 10),
        Some(&paid(&alice, &offer, 3)),
    )
    .await;
    assert!(
        began.elapsed() < std::time::Duration::from_secs(3),
        "woken by the write"
    );
    assert_eq!(
        (&woken.body["data"]["changed"], &woken.body["data"]["value"]),
        (&json!(true), &json!("a"))
    );
    assert_eq!(charged(&woken), (json!(true), json!("5000")));
    assert_eq!(writer.await.unwrap().status, 200);

    let tag = woken.body["data"]["stateTag"].as_str().unwrap();
    let quiet = pay_post(
        &server.url,
        &watch(Some(tag), 1),
        Some(&paid(&alice, &offer, 4)),
    )
    .await;
    assert_eq!(quiet.body["data"]["changed"], false);
    assert_eq!(charged(&quiet), (json!(true), json!("5000")));

    let stream = reqwest::Client::new()
        .post(format!("{}/api/v1/lease", server.url))
        .header("accept", "text/event-stream")
        .header("PAYMENT-SIGNATURE", paid(&alice, &offer, 5))
        .json(&watch(None, 20))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 406);
    assert!(stream.headers().get("PAYMENT-RESPONSE").is_none());
}
