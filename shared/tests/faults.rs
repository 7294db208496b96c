//! Store faults, injected by a proxy between the service and DynamoDB (dynoxide): throttling,
//! 500s, dropped connections, slow answers, and the worst case, an answer lost after the write
//! committed. Answers must be right or an error within the time budget, and no retry, the SDK's
//! or the caller's with the same requestId, may apply a mutation twice.

mod common;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use common::service::{self, req};
use leasekit_core::clock::now_ms;
use leasekit_core::service::lease::LeaseError;
use leasekit_core::store::client::{ATTEMPT_TIMEOUT, CALL_TIMEOUT};
use leasekit_core::store::payment_store::{
    Accepted, AuthorizationKey, Consumed, Evidence, Final, Identified, IdentifierKey,
};
use leasekit_core::store::usage::measured;
use leasekit_core::store::{ClaimStore, PaymentLedger, ensure_tables, local_client};
use leasekit_core::tenant::Tenant;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
enum Fault {
    Throttle,
    ServerError,
    /// Headers, then the connection breaks mid-body.
    Drop,
    /// Forward after this delay.
    Slow(Duration),
    /// Forward (the write commits), then hold the answer this long.
    LostAfterCommit(Duration),
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    /// (operation, fault), applied in order to the next matching calls.
    faults: Arc<Mutex<VecDeque<(&'static str, Fault)>>>,
    http: reqwest::Client,
}

impl Proxy {
    fn inject(&self, operation: &'static str, fault: Fault, times: usize) {
        let mut faults = self.faults.lock().unwrap();
        for _ in 0..times {
            faults.push_back((operation, fault));
        }
    }
}

fn aws_error(status: StatusCode, kind: &str) -> Response {
    let body = json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"), "message": "injected"});
    (
        status,
        [("content-type", "application/x-amz-json-1.0")],
        body.to_string(),
    )
        .into_response()
}

async fn forward(State(proxy): State<Proxy>, headers: HeaderMap, body: Bytes) -> Response {
    let operation = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .rsplit('.')
        .next()
        .unwrap_or("")
        .to_owned();
    let fault = {
        let mut faults = proxy.faults.lock().unwrap();
        let at = faults.iter().position(|(op, _)| *op == operation);
        at.and_then(|i| faults.remove(i)).map(|(_, f)| f)
    };
    match fault {
        Some(Fault::Throttle) => {
            return aws_error(
                StatusCode::BAD_REQUEST,
                "ProvisionedThroughputExceededException",
            );
        }
        Some(Fault::ServerError) => {
            return aws_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError");
        }
        Some(Fault::Drop) => {
            return (
                StatusCode::OK,
                [("content-type", "application/x-amz-json-1.0")],
                Body::new(Broken),
            )
                .into_response();
        }
        Some(Fault::Slow(delay)) => tokio::time::sleep(delay).await,
        _ => {}
    }
    let mut request = proxy.http.post(&proxy.upstream).body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let upstream = request.send().await.unwrap();
    let status = StatusCode::from_u16(upstream.status().as_u16()).unwrap();
    let answer = upstream.bytes().await.unwrap();
    if let Some(Fault::LostAfterCommit(delay)) = fault {
        tokio::time::sleep(delay).await;
    }
    (
        status,
        [("content-type", "application/x-amz-json-1.0")],
        answer,
    )
        .into_response()
}

/// A response body that fails at once: the client sees the connection break mid-answer.
struct Broken;

impl http_body::Body for Broken {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        std::task::Poll::Ready(Some(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected",
        ))))
    }
}

struct Fixture {
    proxy: Proxy,
    /// The lease service, its client talking to the proxy.
    leases: service::Fixture,
    claims: ClaimStore,
    ledger: PaymentLedger,
    keys: leasekit_core::store::KeyStore,
}

/// The test store (dynoxide, or moto in CI) behind the fault proxy; the service's client talks
/// to the proxy. On both, because they differ where it matters here: dynoxide honours a
/// transaction's client token on a retry, as DynamoDB does, and moto does not.
async fn fixture() -> Fixture {
    let upstream = common::test_endpoint().await;
    let proxy = Proxy {
        upstream,
        faults: Arc::default(),
        http: reqwest::Client::new(),
    };
    let app = axum::Router::new()
        .fallback(axum::routing::post(forward))
        .with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = local_client(&url);
    let tables = common::fresh_tables();
    ensure_tables(&client, &tables).await.unwrap();
    let claims = ClaimStore::new(client.clone(), &tables.claims);
    let ledger = PaymentLedger::new(client.clone(), &tables);
    let keys = leasekit_core::store::KeyStore::new(client.clone(), &tables.keys);
    // This suite's own issuer (seed 2) and tenant.
    let tenant = Tenant::for_key("acme", "faults").unwrap();
    Fixture {
        claims,
        ledger,
        keys,
        proxy,
        leases: service::Fixture::on(client, tables, 2, tenant),
    }
}

impl Fixture {
    async fn run(
        &self,
        body: serde_json::Value,
    ) -> (
        Result<leasekit_core::lease::LeaseAnswer, LeaseError>,
        u32,
        Duration,
    ) {
        let started = Instant::now();
        let (leases, request) = (&self.leases, req(body));
        let call = leases
            .service
            .execute(&leases.tenant, &request, [0; 32], now_ms());
        let (result, usage) = measured(call).await;
        (result.map(|a| a.data), usage.round_trips, started.elapsed())
    }

    /// `holder` acquires `resource` (no faults pending).
    async fn hold(&self, resource: &str, holder: &str) {
        let (held, _, _) = self
            .run(json!({"op": "acquire", "resource": resource, "holder": holder}))
            .await;
        assert!(held.unwrap().granted, "{holder} holds {resource}");
    }

    async fn counter(&self, resource: &str) -> u64 {
        self.leases.counter(resource).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_retried_and_the_answer_is_right() {
    let f = fixture().await;
    for (i, fault) in [
        Fault::Throttle,
        Fault::ServerError,
        Fault::Drop,
        Fault::Slow(Duration::from_millis(300)),
    ]
    .into_iter()
    .enumerate()
    {
        let resource = format!("r{i}");
        f.proxy.inject("UpdateItem", fault, 1);
        let (answer, trips, _) = f
            .run(json!({"op": "acquire", "resource": resource, "holder": "a"}))
            .await;
        let answer = answer.unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert!(
            answer.granted && answer.fencing_token == Some(1),
            "{fault:?}: {answer:?}"
        );
        let expected_trips = if matches!(fault, Fault::Slow(_)) {
            1
        } else {
            2
        };
        assert_eq!(trips, expected_trips, "{fault:?}: the fault and the retry");
        assert_eq!(f.counter(&resource).await, 1, "{fault:?}: applied once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_keeps_failing_is_an_error_within_the_time_budget() {
    let f = fixture().await;
    f.proxy.inject("UpdateItem", Fault::ServerError, 10);
    let (answer, trips, took) = f
        .run(json!({"op": "acquire", "resource": "r", "holder": "a"}))
        .await;
    assert!(matches!(answer, Err(LeaseError::Store(_))), "{answer:?}");
    assert_eq!(trips, 3, "bounded retries");
    f.proxy.faults.lock().unwrap().clear();
    f.proxy.inject(
        "UpdateItem",
        Fault::Slow(ATTEMPT_TIMEOUT + Duration::from_secs(1)),
        10,
    );
    let (answer, _, took_slow) = f
        .run(json!({"op": "acquire", "resource": "r2", "holder": "a"}))
        .await;
    assert!(matches!(answer, Err(LeaseError::Store(_))), "{answer:?}");
    assert!(
        took < CALL_TIMEOUT && took_slow < CALL_TIMEOUT + Duration::from_millis(500),
        "{took:?} {took_slow:?}"
    );
}

/// The worst case: the write committed, its answer was lost. The SDK's retry, or the caller's
/// with the same requestId, must find what happened instead of applying it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_lost_after_commit_never_applies_twice() {
    let f = fixture().await;
    let lost = Fault::LostAfterCommit(ATTEMPT_TIMEOUT + Duration::from_millis(500));
    // Without requestId: the retried conditional write finds the lease already ours (same token).
    f.proxy.inject("UpdateItem", lost, 1);
    let (answer, _, _) = f
        .run(json!({"op": "acquire", "resource": "plain", "holder": "a"}))
        .await;
    let answer = answer.unwrap();
    assert_eq!((answer.granted, answer.fencing_token), (true, Some(1)));
    assert_eq!(f.counter("plain").await, 1, "the token was issued once");
    // A release whose answer is lost: the retry finds the lease released at its token, its own
    // doing, and says so (it used to answer NO_HOLD, "you hold no live lease", while the lease
    // it had just released was free). So for a renew.
    f.proxy.inject("UpdateItem", lost, 1);
    let (renewed, _, _) = f
        .run(json!({"op": "renew", "resource": "plain", "holder": "a", "token": 1}))
        .await;
    let renewed = renewed.unwrap();
    assert!(renewed.granted, "{renewed:?}");
    f.proxy.inject("UpdateItem", lost, 1);
    let (released, _, _) = f
        .run(json!({"op": "release", "resource": "plain", "holder": "a", "token": 1}))
        .await;
    let released = released.unwrap();
    assert!(
        released.granted && released.witnesses.is_empty(),
        "{released:?}"
    );
    assert_eq!(f.counter("plain").await, 1, "no token was issued by either");

    // With requestId, every attempt's answer lost: a 502 for the caller, who retries later.
    f.proxy.inject("TransactWriteItems", lost, 3);
    let body = json!({"op": "acquire", "resource": "idem", "holder": "a", "requestId": "buy-once"});
    let (answer, _, _) = f.run(body.clone()).await;
    assert!(matches!(answer, Err(LeaseError::Store(_))), "{answer:?}");
    f.proxy.faults.lock().unwrap().clear();
    let (retry, _, _) = f.run(body.clone()).await;
    let retry = retry.unwrap();
    assert!(
        retry.granted && retry.replayed,
        "the caller's retry finds the committed answer: {retry:?}"
    );
    assert_eq!(retry.fencing_token, Some(1));
    assert_eq!(f.counter("idem").await, 1, "applied once");
}

/// A claim whose answer is lost after it committed: the SDK's retry finds this very claim, and
/// the caller is told it won (it used to hear "held, mine", as if it had claimed it before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_answer_was_lost_is_still_won() {
    use leasekit_core::claims::{Outcome, Plan};
    let f = fixture().await;
    let lost = Fault::LostAfterCommit(ATTEMPT_TIMEOUT + Duration::from_millis(500));
    f.proxy.inject("UpdateItem", lost, 1);
    let outcome = f
        .claims
        .claim("acct:acme", "job-1", "worker-1", Plan::Hour, now_ms(), None)
        .await
        .unwrap();
    let Outcome::Acquired(claim) = outcome else {
        panic!("the first attempt won it: {outcome:?}");
    };
    assert_eq!(claim.fencing_token, 1, "claimed once");
    // A later claim by the same holder is the crash-resume signal: held, mine.
    let again = f
        .claims
        .claim("acct:acme", "job-1", "worker-1", Plan::Hour, now_ms(), None)
        .await
        .unwrap();
    assert!(
        matches!(again, Outcome::Held { mine: true, .. }),
        "{again:?}"
    );
}

/// A denial with requestId whose record's put committed but whose answer was lost: the SDK's
/// retry finds this very record, and the answer is the first, not a replay (it used to come
/// back `replayed: true`, which on a paid call voids the payment of a first answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_answer_whose_record_put_was_lost_is_not_a_replay() {
    let f = fixture().await;
    f.hold("busy", "b").await;
    let lost = Fault::LostAfterCommit(ATTEMPT_TIMEOUT + Duration::from_millis(500));
    f.proxy.inject("PutItem", lost, 1);
    let body = json!({"op": "acquire", "resource": "busy", "holder": "a", "requestId": "deny-1"});
    let (denied, _, _) = f.run(body.clone()).await;
    let denied = denied.unwrap();
    assert!(!denied.granted && !denied.replayed, "{denied:?}");
    // The caller's own retry is the replay.
    let (again, _, _) = f.run(body).await;
    let again = again.unwrap();
    assert!(!again.granted && again.replayed, "{again:?}");
}

/// A throttled attempt was certainly not applied: the retry's failed guard is a plain denial,
/// not an unknown outcome (it used to be a 502).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_then_denied_write_is_a_denial() {
    let f = fixture().await;
    f.hold("busy", "b").await;
    f.proxy.inject("UpdateItem", Fault::Throttle, 1);
    let (denied, trips, _) = f
        .run(json!({"op": "acquire", "resource": "busy", "holder": "a"}))
        .await;
    let denied = denied.unwrap_or_else(|e| panic!("a denial, not {e}"));
    assert!(!denied.granted, "{denied:?}");
    assert_eq!(denied.witnesses[0].rule_id, "LEASE_HELD");
    assert_eq!(trips, 2, "the throttle and the retry");
}

/// The answer to a ledger write, lost after it committed, so that the SDK retries it.
fn lost() -> Fault {
    Fault::LostAfterCommit(ATTEMPT_TIMEOUT + Duration::from_millis(500))
}

fn accepted(now: u64) -> Accepted<'static> {
    Accepted {
        route: "POST /api/v1/lease",
        amount: "5000",
        pay_to: "0x000000000000000000000000000000000000dead",
        now: now as i64,
        valid_before: 4_000_000_000,
        payment: "{}",
        evidence: &Evidence::None,
    }
}

/// A consume whose answer was lost: the SDK's retry finds the item its own first attempt put,
/// and the payer's first use goes through (it used to be refused as "used before", a 402 for a
/// paid acquire). Another call with the same authorization is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consume_whose_answer_was_lost_is_still_this_calls() {
    let f = fixture().await;
    let now = now_ms();
    let key = AuthorizationKey::new("eip155:84532", "0xabc", &[1; 32]);
    f.proxy.inject("PutItem", lost(), 1);
    let first = f.ledger.consume(&key, &accepted(now as u64), None).await;
    assert_eq!(
        first.unwrap(),
        Consumed::Yes,
        "the first use is the payer's"
    );
    let again = f.ledger.consume(&key, &accepted(now as u64), None).await;
    assert_eq!(
        again.unwrap(),
        Consumed::UsedBefore,
        "a second use is refused"
    );

    // Under a payment identifier (a transaction): the same.
    let key = AuthorizationKey::new("eip155:84532", "0xabc", &[2; 32]);
    let named = Identified {
        key: IdentifierKey::new("eip155:84532", "0xabc", "pay_lost_answer_0001"),
        fingerprint: "fp".into(),
    };
    f.proxy.inject("TransactWriteItems", lost(), 1);
    let first = f
        .ledger
        .consume(&key, &accepted(now as u64), Some(&named))
        .await;
    assert_eq!(first.unwrap(), Consumed::Yes, "the first use, under its id");
}

/// A close whose answer was lost: the retry finds its own outcome and says it recorded it (it
/// used to report that another settler had won). A second close is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_whose_answer_was_lost_is_still_this_calls() {
    let f = fixture().await;
    let now = now_ms();
    let key = AuthorizationKey::new("eip155:84532", "0xabc", &[3; 32]);
    let consumed = f.ledger.consume(&key, &accepted(now as u64), None).await;
    assert_eq!(consumed.unwrap(), Consumed::Yes);
    f.proxy.inject("UpdateItem", lost(), 1);
    let settled = Final::Settled {
        transaction: "0xfeed",
    };
    assert!(f.ledger.finish(&key, &settled, now).await.unwrap());
    let void = Final::Void { reason: "late" };
    assert!(!f.ledger.finish(&key, &void, now + 1).await.unwrap());
    let rows = f.ledger.all().await.unwrap();
    let row = rows
        .iter()
        .find(|r| r.authorization == key.as_str())
        .unwrap();
    assert_eq!(row.status.as_str(), "settled");
}

/// A sign-in nonce whose put's answer was lost: the sign-in is this call's; the nonce is still
/// used once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_whose_answer_was_lost_is_still_this_calls() {
    let f = fixture().await;
    let now = now_ms();
    f.proxy.inject("PutItem", lost(), 1);
    assert!(f.ledger.consume_siwx("0xAbC", "n0nce", now).await.unwrap());
    assert!(!f.ledger.consume_siwx("0xabc", "n0nce", now).await.unwrap());
}

/// A free claim counted while its answer was lost is counted once (the SDK's retry of an ADD
/// used to count it twice, and the caller lost one of its free claims).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_claim_whose_count_was_lost_counts_once() {
    let f = fixture().await;
    let now = now_ms();
    f.proxy.inject("UpdateItem", lost(), 1);
    assert_eq!(f.claims.count_free("key:lost", 3, now).await.unwrap(), None);
    assert_eq!(f.claims.count_free("key:lost", 3, now).await.unwrap(), None);
    assert_eq!(f.claims.count_free("key:lost", 3, now).await.unwrap(), None);
    assert!(
        f.claims
            .count_free("key:lost", 3, now)
            .await
            .unwrap()
            .is_some(),
        "three counted, the fourth refused"
    );
}

/// A new API key whose put's answer was lost: the SDK's retry finds this very key, and it is
/// stored, not reported as an id already taken (the key the caller was shown would then have
/// been one it thought was never made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_whose_insert_answer_was_lost_is_still_stored() {
    use leasekit_core::keys::{ApiKey, KeyRecord};
    let f = fixture().await;
    let keys = &f.keys;
    let key = ApiKey::generate().unwrap();
    let record = KeyRecord::new(&key, "acme", now_ms());
    f.proxy.inject("PutItem", lost(), 1);
    assert!(
        keys.insert(&record).await.unwrap(),
        "stored by its first attempt"
    );
    // Another key with the same id is still refused.
    let mut other = record.clone();
    other.hash = [7; 32];
    assert!(!keys.insert(&other).await.unwrap());
}

/// A lease write with its record whose transaction's answer was lost: the SDK's retry is
/// cancelled by the record its own first attempt wrote, and that record is this answer, not a
/// replay (it came back `replayed: true`, which voids a paid call's payment for a first answer).
/// DynamoDB itself would take the retry's client token as the same request; an emulator may not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_was_lost_is_the_first_answer() {
    let f = fixture().await;
    f.proxy.inject("TransactWriteItems", lost(), 1);
    let body = json!({"op": "acquire", "resource": "txn", "holder": "a", "requestId": "txn-1"});
    let (first, _, _) = f.run(body.clone()).await;
    let first = first.unwrap();
    assert!(first.granted && !first.replayed, "{first:?}");
    assert_eq!(first.fencing_token, Some(1));
    let (again, _, _) = f.run(body).await;
    assert!(
        again.unwrap().replayed,
        "the caller's own retry is the replay"
    );
    assert_eq!(f.counter("txn").await, 1, "applied once");
}
