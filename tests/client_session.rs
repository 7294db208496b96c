//! The Rust client's session against `leasekit serve`: one keepalive keeps every hold in it
//! past their TTL, one signal reports the loss of all of them, close (or drop) frees them all.

mod support;

use leasekit_client::{Client, Error, Lost};
use std::time::Duration;
use support::*;
use tempfile::TempDir;

fn client(server: &Server, key: &str) -> Client {
    Client::with_api_key(&server.url, key, "session-tests").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_keepalive_keeps_every_hold_and_close_frees_them_all() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let session = c.session("agent-1", Duration::from_secs(2)).await.unwrap();
    let a = session.acquire("task:a").await.unwrap();
    let b = session.acquire_permit("pool", 3).await.unwrap();
    let set = session.acquire_all(&["x", "y"]).await.unwrap();
    assert_eq!((a, b, set.len()), (1, 1, 2));
    let mut signal = session.signal();
    // Three TTLs later, every hold is still the session's: the keepalive moved them all.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(session.is_held());
    let held = c.get("task:a").await.unwrap();
    assert_eq!(held.holders[0].session.as_deref(), Some(session.id()));
    match c.acquire("x", "agent-2", Duration::from_secs(5)).await {
        Ok(lease) => assert!(!lease.granted, "{lease:?}"),
        Err(e) => panic!("{e}"),
    }
    let state = session.get().await.unwrap().expect("live");
    assert_eq!(state.leases.len(), 4, "{state:?}");
    // Someone else's acquire in it is not the holder's.
    let other = c.acquire("task:b", "agent-2", Duration::from_secs(5)).await;
    assert!(other.unwrap().granted);
    assert!(
        matches!(session.acquire("task:b").await, Err(Error::Held { holder, .. }) if holder == "agent-2")
    );

    session.close().await.unwrap();
    assert_eq!(signal.lost().await, Lost::Released);
    for resource in ["task:a", "x", "y", "pool"] {
        assert!(
            !c.get(resource).await.unwrap().granted,
            "{resource} free at once"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_session_is_one_loss_for_every_task_and_refuses_new_holds() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let admin = client(&server, ACME_ADMIN_KEY);
    let session = c.session("agent-1", Duration::from_secs(3)).await.unwrap();
    let mut tasks = Vec::new();
    for n in 0..3 {
        let token = session.acquire(&format!("job:{n}")).await.unwrap();
        let mut signal = session.signal();
        tasks.push(tokio::spawn(async move { (token, signal.lost().await) }));
    }
    let revoked = admin.revoke_session(session.id(), "wedged").await.unwrap();
    assert_eq!(revoked.revoked.map(|r| r.len()), Some(3));
    // Learned at the next keepalive, a third of the way in: well before the 3 s TTL.
    for task in tasks {
        let (_, lost) = tokio::time::timeout(Duration::from_millis(2_500), task)
            .await
            .expect("every task learns it within a keepalive")
            .unwrap();
        assert_eq!(lost, Lost::Refused("SESSION_EXPIRED".into()));
    }
    assert!(!session.is_held());
    assert!(matches!(
        session.acquire("job:9").await,
        Err(Error::Lost(_))
    ));
    assert!(
        !c.get("job:9").await.unwrap().granted,
        "nothing sent once lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_that_finds_the_session_ended_signals_the_loss_at_once() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let admin = client(&server, ACME_ADMIN_KEY);
    // A long TTL: the keepalive would not notice for 20 s.
    let session = c.session("agent-1", Duration::from_secs(60)).await.unwrap();
    let mut signal = session.signal();
    admin.revoke_session(session.id(), "gone").await.unwrap();
    match session.acquire("job").await {
        Err(Error::Lost(Lost::Refused(rule))) => assert_eq!(rule, "SESSION_EXPIRED"),
        other => panic!("{other:?}"),
    }
    let lost = tokio::time::timeout(Duration::from_millis(100), signal.lost()).await;
    assert_eq!(
        lost.expect("at once"),
        Lost::Refused("SESSION_EXPIRED".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_session_frees_its_holds_and_a_waiting_session_gets_them() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let first = c.session("agent-1", Duration::from_secs(60)).await.unwrap();
    assert_eq!(first.acquire("job").await.unwrap(), 1);
    let second = c.session("agent-2", Duration::from_secs(60)).await.unwrap();
    assert!(
        matches!(second.acquire("job").await, Err(Error::Held { holder, .. }) if holder == "agent-1")
    );
    let waiting = async {
        second
            .acquire_waiting("job", 1, Duration::from_secs(10))
            .await
    };
    let dropping = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(first);
    };
    let (token, ()) = tokio::join!(waiting, dropping);
    assert_eq!(
        token.unwrap(),
        2,
        "granted in the waiting session, not after 60 s"
    );
    let held = c.get("job").await.unwrap();
    assert_eq!(held.holders[0].session.as_deref(), Some(second.id()));
    // A wait that ends ungranted lasts what was asked, fractions included.
    c.acquire("busy", "agent-3", Duration::from_secs(60))
        .await
        .unwrap();
    let began = std::time::Instant::now();
    let busy = second
        .acquire_waiting("busy", 1, Duration::from_millis(1_500))
        .await;
    assert!(matches!(busy, Err(Error::Held { holder, .. }) if holder == "agent-3"));
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(1_500) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    second.close().await.unwrap();
}

#[tokio::test]
async fn a_full_session_is_the_callers_error_not_a_held_resource() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let session = c.session("agent-1", Duration::from_secs(60)).await.unwrap();
    for n in 0..256 {
        session.acquire(&format!("r{n}")).await.unwrap();
    }
    let full = session.acquire("r256").await;
    assert!(
        matches!(&full, Err(Error::Invalid(m)) if m.contains("256")),
        "{full:?}"
    );
    session.close().await.unwrap();
}

/// A session lost because no keepalive answer came back in time is still closed when its owner
/// lets go: the keepalive may have been applied (here: answers come late), keeping the session,
/// and every hold in it, for another TTL (the attack of 2026-12-05).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lost_to_late_answers_is_closed_when_its_owner_lets_go() {
    use support::proxy::{Mode, Proxy};
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let proxy = Proxy::start(&server.url);
    let direct = client(&server, ACME_KEY);
    let through = Client::with_api_key(&proxy.url, ACME_KEY, "session-tests").unwrap();
    let mut session = through
        .session("agent-1", Duration::from_secs(3))
        .await
        .unwrap();
    session.acquire("job").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    proxy.set(Mode::Slow(Duration::from_millis(2_400)));
    let lost = tokio::time::timeout(Duration::from_secs(10), session.lost()).await;
    assert!(matches!(lost, Ok(Lost::Unreachable(_))), "{lost:?}");
    proxy.set(Mode::Pass);
    let id = session.id().to_owned();
    session.close().await.unwrap();
    let get = json_get_session(&direct, &id).await;
    assert_eq!(get, None, "closed, not kept alive by the late keepalive");
    assert!(
        !direct.get("job").await.unwrap().granted,
        "its hold is free"
    );
}

async fn json_get_session(c: &Client, id: &str) -> Option<String> {
    let answer = c
        .send(serde_json::json!({"op": "get", "session": id}))
        .await
        .unwrap();
    answer["data"]["session"]["id"].as_str().map(str::to_owned)
}
