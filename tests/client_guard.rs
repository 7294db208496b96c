//! The Rust client against `leasekit serve`: a guard keeps a lease past its TTL, reports a loss
//! the moment a renewal is refused, and releases when closed or dropped; a payment callback pays.

mod support;

use leasekit_client::{Client, Error, Lost, PayFn};
use std::sync::Arc;
use std::time::Duration;
use support::*;
use tempfile::TempDir;

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
        let payload = shared::x402::client::pay(&key, &offer, now_secs(), nonce)
            .map_err(|e| e.to_string())?;
        Ok(shared::x402::client::header(&payload))
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
