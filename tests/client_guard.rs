//! The Rust client against `leasekit serve`: a guard keeps a lease past its TTL, reports a loss
//! the moment a renewal is refused, and releases when closed or dropped; a payment callback pays.

mod support;

use leasekit_client::{Client, Error, Lost, PayFn};
use std::sync::Arc;
use std::time::Duration;
use support::proxy::{Mode, Proxy};
use support::*;
use tempfile::TempDir;

/// `holder`'s guard on `resource`, waiting a second in 1 s calls, is refused (`Held`).
async fn refused_after_a_wait_of_a_second(c: &Client, resource: &str, holder: &str) {
    let late = c
        .guard_waiting(
            resource,
            holder,
            Duration::from_secs(5),
            Duration::ZERO,
            1,
            Duration::from_secs(1),
        )
        .await;
    assert!(
        matches!(late, Err(Error::Held { .. })),
        "{:?}",
        late.map(|g| g.fencing_token())
    );
}

fn client(server: &Server) -> Client {
    Client::with_api_key(&server.url, ACME_KEY, "guard-tests").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_keeps_the_lease_past_its_ttl_and_releases_it() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let guard = c
        .guard("deploy:prod", "worker-1", Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(guard.fencing_token(), 1);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(guard.is_held());
    match c
        .guard("deploy:prod", "worker-2", Duration::from_secs(1))
        .await
    {
        Err(Error::Held { holder, .. }) => assert_eq!(holder, "worker-1"),
        other => panic!("expected held, got {:?}", other.map(|g| g.fencing_token())),
    }
    guard.release().await.unwrap();
    let next = c
        .acquire("deploy:prod", "worker-2", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((next.granted, next.fencing_token), (true, Some(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_reports_a_lost_lease() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let mut guard = c
        .guard("job", "worker-1", Duration::from_secs(3))
        .await
        .unwrap();
    // Someone ends the lease behind the guard's back.
    assert!(
        c.release("job", "worker-1", guard.fencing_token())
            .await
            .unwrap()
            .granted
    );
    let lost = tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("noticed within a renewal");
    assert_eq!(lost, Lost::Refused("NO_HOLD".into()));
    assert!(!guard.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_guard_is_lost_with_revoked_and_the_client_lists_and_audits() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let admin = Client::with_api_key(&server.url, ACME_ADMIN_KEY, "guard-tests").unwrap();
    let mut guard = c
        .guard("deploy:prod", "worker-1", Duration::from_secs(3))
        .await
        .unwrap();
    let page = c.list(Some("deploy:"), None, None).await.unwrap();
    assert_eq!(page.leases.len(), 1);
    assert_eq!(page.leases[0].holders[0].holder, "worker-1");
    assert_eq!(page.next_cursor, None);
    match c.revoke("deploy:prod", None, None, "no role").await {
        Err(Error::Refused {
            status: 403, code, ..
        }) => assert_eq!(code, "FORBIDDEN"),
        other => panic!("expected a 403, got {other:?}"),
    }
    let revoked = admin
        .revoke(
            "deploy:prod",
            Some("worker-1"),
            Some(guard.fencing_token()),
            "wedged",
        )
        .await
        .unwrap();
    assert!(revoked.granted);
    assert_eq!(
        revoked.revoked.unwrap()[0].fencing_token,
        guard.fencing_token()
    );
    // Learned at the next renewal (a third of the ttl in), long before the lease would lapse.
    let lost = tokio::time::timeout(Duration::from_millis(2_500), guard.lost())
        .await
        .expect("noticed within a renewal");
    assert_eq!(lost, Lost::Refused("REVOKED".into()));
    let audit = admin
        .audit(Some("deploy:prod"), None, Some(10))
        .await
        .unwrap();
    assert_eq!(audit.entries.len(), 1);
    assert_eq!(audit.entries[0].reason, "wedged");
    assert_eq!(audit.entries[0].ended[0].holder, "worker-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_guard_releases_the_lease() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    drop(
        c.guard("job", "worker-1", Duration::from_secs(60))
            .await
            .unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !c.get("job").await.unwrap().granted,
        "released without waiting for the 60 s TTL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_callback_pays_each_call() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let key = wallet(9);
    let pay: PayFn = Arc::new(move |required: &serde_json::Value| {
        let offer =
            serde_json::from_value(required["accepts"][0].clone()).map_err(|e| e.to_string())?;
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| e.to_string())?;
        let payload = leasekit_core::x402::client::pay(&key, &offer, now_secs(), nonce)
            .map_err(|e| e.to_string())?;
        Ok(leasekit_core::x402::client::header(&payload))
    });
    let c = Client::with_payments(&server.url, pay).unwrap();
    let lease = c
        .acquire("paid", "agent", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!((lease.granted, lease.fencing_token), (true, Some(1)));
    assert_eq!(
        c.get("paid").await.unwrap().holder.as_deref(),
        Some("agent")
    );
}

#[tokio::test]
async fn refusals_and_outages_are_errors_not_panics() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let bad = Client::with_api_key(&server.url, "wrong-key-0123456789", "t").unwrap();
    assert!(matches!(
        bad.get("r").await,
        Err(Error::Refused { status: 401, .. })
    ));
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let nowhere = Client::with_api_key(&format!("http://{closed}"), ACME_KEY, "t").unwrap();
    assert!(matches!(nowhere.get("r").await, Err(Error::Unavailable(_))));
}

/// A guard reaches the service through a proxy that turns bad (`mode`). `lost()` must resolve
/// while the server still has the lease as ours: a `get` sent straight to the server after
/// `lost()` resolved still finds this holder and token, so nobody else held it before. And it
/// resolves within a TTL of the switch, whatever the hanging renewal is doing.
async fn lost_resolves_while_the_server_still_holds_it(mode: Mode) {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let proxy = Proxy::start(&server.url);
    let direct = client(&server);
    let through = Client::with_api_key(&proxy.url, ACME_KEY, "guard-tests").unwrap();
    let ttl = Duration::from_secs(3);
    let mut guard = through.guard("job", "worker-1", ttl).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(guard.is_held());
    proxy.set(mode);
    let switched = std::time::Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .expect("lost() resolves");
    let after = switched.elapsed();
    let now = direct.get("job").await.unwrap();
    assert_eq!(
        (now.holder.as_deref(), now.fencing_token),
        (Some("worker-1"), Some(guard.fencing_token())),
        "{mode:?}: the server let the lease go before lost() resolved ({lost:?} after {after:?})"
    );
    assert!(after < ttl, "{mode:?}: lost() took {after:?}");
    // At the deadline: not before it, and not much after (a loaded CI host wakes late).
    let late = std::time::Instant::now().duration_since(guard.deadline());
    assert!(
        std::time::Instant::now() >= guard.deadline() && late < Duration::from_millis(200),
        "{mode:?}: lost() {late:?} after the deadline"
    );
    assert!(matches!(lost, Lost::Unreachable(_)), "{lost:?}");
    assert!(!guard.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_resolves_at_the_deadline_while_a_renewal_hangs() {
    lost_resolves_while_the_server_still_holds_it(Mode::Silent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_resolves_at_the_deadline_when_answers_come_late() {
    lost_resolves_while_the_server_still_holds_it(Mode::Slow(Duration::from_millis(2_400))).await;
}

/// The first deadline counts from when the acquire was sent, not from when its answer came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acquires_send_time_starts_the_deadline() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let proxy = Proxy::start(&server.url);
    proxy.set(Mode::Slow(Duration::from_millis(1_500)));
    let through = Client::with_api_key(&proxy.url, ACME_KEY, "guard-tests").unwrap();
    let ttl = Duration::from_secs(3);
    let before = std::time::Instant::now();
    let guard = through.guard("job", "worker-1", ttl).await.unwrap();
    let usable = ttl - leasekit_client::safety_margin(ttl);
    let from_before = guard.deadline().duration_since(before);
    assert!(
        from_before >= usable && from_before < usable + Duration::from_millis(50),
        "deadline {from_before:?} after the send, usable {usable:?}"
    );
    assert_eq!(usable, Duration::from_millis(2_720));
}

/// A lead that leaves nothing of the lease is refused before anything is sent.
#[tokio::test]
async fn a_lead_past_the_usable_lease_is_refused() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let c = Client::with_api_key(&format!("http://{closed}"), ACME_KEY, "t").unwrap();
    let got = c
        .guard_with_lead(
            "r",
            "h",
            Duration::from_secs(3),
            Duration::from_millis(2_720),
        )
        .await;
    assert!(matches!(got, Err(Error::Invalid(_))), "{:?}", got.err());
}

/// The client's list of reads (no requestId) is the server's op table's.
#[test]
fn the_clients_reads_are_the_op_tables() {
    let reads: Vec<&str> = leasekit_core::lease::ops::OPS
        .iter()
        .filter(|spec| !spec.writes)
        .map(|spec| spec.op.as_str())
        .collect();
    assert_eq!(leasekit_client::READ_OPS.to_vec(), reads);
}

/// The typed calls for semaphores, sets and check.
#[tokio::test]
async fn the_client_takes_permits_sets_and_checks() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let ttl = Duration::from_secs(30);
    let a = c.acquire_permit("pool", "a", ttl, 2).await.unwrap();
    let b = c.acquire_permit("pool", "b", ttl, 2).await.unwrap();
    assert_eq!(
        (a.fencing_token, b.fencing_token, b.limit),
        (Some(1), Some(2), 2)
    );
    assert_eq!(b.holders.len(), 2);
    assert!(!c.acquire_permit("pool", "c", ttl, 2).await.unwrap().granted);
    assert_eq!(
        c.check("pool", 2, Some("b")).await.unwrap().current,
        Some(true)
    );
    assert_eq!(
        c.check("pool", 2, Some("a")).await.unwrap().current,
        Some(false)
    );
    let set = c.acquire_all(&["x", "y"], "a", ttl).await.unwrap();
    let members = set.leases.unwrap();
    assert!(set.granted && members.iter().all(|m| m.fencing_token == Some(1)));
    let renewed = c.renew_all(&[("x", 1), ("y", 1)], "a", ttl).await.unwrap();
    assert!(renewed.granted);
    assert!(
        c.release_all(&[("x", 1), ("y", 1)], "a")
            .await
            .unwrap()
            .granted
    );
    assert!(!c.get("x").await.unwrap().granted);
    // A guard of a permit under another limit is refused at once, not waited on.
    let refused = c
        .guard_permit("pool", "d", ttl, Duration::ZERO, 3)
        .await
        .err()
        .unwrap();
    assert!(matches!(refused, Error::Invalid(_)), "{refused:?}");
}

/// `guard_waiting` waits in the server's queue: guards are granted in the order they asked, the
/// moment the holder before them releases, each with the next token; a wait that ends is `Held`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_guards_are_granted_in_arrival_order() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let first = c
        .guard("queue", "w0", Duration::from_secs(5))
        .await
        .unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for holder in ["w1", "w2"] {
        let (c, order) = (c.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let guard = c
                .guard_waiting(
                    "queue",
                    holder,
                    Duration::from_secs(5),
                    Duration::ZERO,
                    1,
                    Duration::from_secs(15),
                )
                .await
                .unwrap();
            order.lock().unwrap().push((holder, guard.fencing_token()));
            tokio::time::sleep(Duration::from_millis(100)).await;
            guard.release().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    first.release().await.unwrap();
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [("w1", 2), ("w2", 3)]);
    let _held = c
        .guard("queue", "owner", Duration::from_secs(5))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    refused_after_a_wait_of_a_second(&c, "queue", "late").await;
    assert!(started.elapsed() >= Duration::from_secs(1));
}

/// A server from before waiting, in front of a real one: it refuses any body naming
/// `waitSeconds` as an unknown field (400), as an older server's schema would, and passes every
/// other call through. Counts the refusals.
async fn server_without_waiting(upstream: String) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let refused = Arc::new(AtomicUsize::new(0));
    let counted = refused.clone();
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let (http, upstream, counted) = (http.clone(), upstream.clone(), counted.clone());
            async move {
                if String::from_utf8_lossy(&body).contains("waitSeconds") {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let refusal = r#"{"error":"invalid input at /waitSeconds: unknown property","code":"INVALID_INPUT"}"#;
                    return (StatusCode::BAD_REQUEST, refusal.to_owned());
                }
                let mut forward = http.post(format!("{upstream}{uri}")).body(body.to_vec());
                for name in ["x-api-key", "content-type"] {
                    if let Some(value) = headers.get(name) {
                        forward = forward.header(name, value.as_bytes());
                    }
                }
                let answer = forward.send().await.unwrap();
                let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
                (status, answer.text().await.unwrap())
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, refused)
}

/// `guard_waiting` against a server that does not wait: told so once (a 400 naming
/// waitSeconds), it asks again with backoff, without the field, and gets the lease once it is
/// free, within its wait; a wait that ends first is `Held`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_guards_fall_back_to_asking_again_on_a_server_that_does_not_wait() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let (url, refused) = server_without_waiting(server.url.clone()).await;
    let c = Client::with_api_key(&url, ACME_KEY, "guard-tests").unwrap();
    let owner = c
        .guard("old", "owner", Duration::from_secs(5))
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let c = c.clone();
        async move {
            let started = std::time::Instant::now();
            let guard = c
                .guard_waiting(
                    "old",
                    "late",
                    Duration::from_secs(5),
                    Duration::ZERO,
                    1,
                    Duration::from_secs(10),
                )
                .await;
            (guard, started.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    owner.release().await.unwrap();
    let (guard, took) = waiter.await.unwrap();
    let guard = guard.expect("granted once free");
    assert_eq!(guard.fencing_token(), 2);
    assert!(
        took < Duration::from_secs(4),
        "asked again soon enough: {took:?}"
    );
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "told once, it does not send waitSeconds again"
    );
    refused_after_a_wait_of_a_second(&c, "old", "later").await;
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_over_its_accounts_share_is_sent_again_after_retry_after() {
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(dir.path(), &["--max-waits-per-account", "1"]);
    let c = client(&server);
    c.acquire("held", "owner", Duration::from_secs(60))
        .await
        .unwrap();
    // The account's one wait: a second's, in progress while the client's first try arrives.
    let blocker = c.clone();
    let blocking = tokio::spawn(async move {
        blocker
            .send(
                serde_json::json!({"op": "acquire", "resource": "held", "holder": "w",
                                     "ttlSeconds": 5, "waitSeconds": 1}),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let lease = c
        .acquire_waiting(
            "free",
            "h",
            Duration::from_secs(5),
            1,
            Duration::from_secs(5),
        )
        .await
        .expect("a 429 with Retry-After: 1 is waited out and the call sent again");
    assert!(lease.granted);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "it was not refused first: the share was not taken ({:?})",
        started.elapsed()
    );
    blocking.await.unwrap().unwrap();
}
