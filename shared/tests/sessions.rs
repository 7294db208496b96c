//! Sessions' items over the real store (docs/adr/0010), time passed in: a session is found only
//! in its own tenant, kept alive only by its holder while it lives, and once ended never comes
//! back, whoever writes and however the writes race.

mod common;

use common::test_store;
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::lease::session::{Ended, Session, SessionPermit, SessionWrite};
use leasekit_core::store::{SessionStore, SessionWritten};
use leasekit_core::tenant::Tenant;
use std::sync::Arc;

async fn store() -> SessionStore {
    let s = test_store().await;
    SessionStore::new(s.client, &s.tables.leases)
}

fn tenant(name: &str) -> Tenant {
    Tenant::for_key("acme", name).unwrap()
}

fn opened(id: &str, now: Millis) -> Session {
    Session::open(id, "agent-1", 30_000, now)
}

#[tokio::test]
async fn a_session_is_found_in_its_own_tenant_only_with_its_permits() {
    let sessions = store().await;
    let t0 = now_ms();
    let mut session = opened("s-found", t0);
    session
        .permits
        .insert("deploy:prod".into(), SessionPermit { token: 7, limit: 1 });
    session
        .permits
        .insert("gpu-pool".into(), SessionPermit { token: 3, limit: 4 });
    sessions.open(&tenant("t1"), &session).await.unwrap();
    assert_eq!(
        sessions.get(&tenant("t1"), "s-found").await.unwrap(),
        Some(session)
    );
    assert_eq!(
        sessions.get(&tenant("t2"), "s-found").await.unwrap(),
        None,
        "another tenant's"
    );
    assert_eq!(
        sessions.get(&tenant("t1"), "s-unknown").await.unwrap(),
        None
    );
}

#[tokio::test]
async fn only_its_holder_keeps_it_alive_and_only_while_it_lives() {
    let sessions = store().await;
    let t = tenant("t1");
    let t0 = now_ms();
    let session = opened("s-keep", t0);
    sessions.open(&t, &session).await.unwrap();
    let later = t0 + 20_000;
    let write = session.keepalive("agent-1", None, later).unwrap();
    let kept = sessions
        .write(&t, "s-keep", Some("agent-1"), &write, later)
        .await
        .unwrap();
    let SessionWritten::Done(kept) = kept else {
        panic!("kept alive: {kept:?}")
    };
    assert_eq!(kept.expires_at, later + 30_000);
    // Another holder's write is refused by the store itself, whatever the caller decided.
    let refused = sessions
        .write(&t, "s-keep", Some("agent-2"), &write, later)
        .await
        .unwrap();
    assert_eq!(refused, SessionWritten::Refused(Some(kept.clone())));
    // At its expiry it has lapsed: no keepalive, not even its holder's.
    let lapsed = kept.expires_at;
    let late = SessionWrite {
        expires_at: lapsed + 30_000,
        ended: None,
    };
    let refused = sessions
        .write(&t, "s-keep", Some("agent-1"), &late, lapsed)
        .await
        .unwrap();
    assert!(
        matches!(refused, SessionWritten::Refused(Some(_))),
        "{refused:?}"
    );
    // An unknown session: refused, and nothing is made.
    let refused = sessions
        .write(&t, "s-none", Some("agent-1"), &write, later)
        .await
        .unwrap();
    assert_eq!(refused, SessionWritten::Refused(None));
    assert_eq!(sessions.get(&t, "s-none").await.unwrap(), None);
}

#[tokio::test]
async fn a_closed_or_revoked_session_never_comes_back() {
    let sessions = store().await;
    let t = tenant("t1");
    let t0 = now_ms();
    for (id, ended) in [("s-closed", Ended::Closed), ("s-revoked", Ended::Revoked)] {
        let session = opened(id, t0);
        sessions.open(&t, &session).await.unwrap();
        let at = t0 + 1_000;
        let (holder, write) = match ended {
            Ended::Closed => (Some("agent-1"), session.close("agent-1", at).unwrap()),
            Ended::Revoked => (None, session.revoke(at).unwrap()),
        };
        let done = sessions.write(&t, id, holder, &write, at).await.unwrap();
        let SessionWritten::Done(done) = done else {
            panic!("{done:?}")
        };
        assert_eq!((done.ended, done.expires_at), (Some(ended), at));
        // Its holder's keepalive, even one decided before the close, is refused from then on.
        let keep = SessionWrite {
            expires_at: at + 60_000,
            ended: None,
        };
        for now in [at - 500, at, at + 5_000] {
            let refused = sessions
                .write(&t, id, Some("agent-1"), &keep, now)
                .await
                .unwrap();
            assert_eq!(
                refused,
                SessionWritten::Refused(Some(done.clone())),
                "{id} at {now}"
            );
        }
    }
}

/// Sixteen keepalives race one close: once the close is in, the session stays closed (a
/// keepalive written after it would have brought it back).
#[tokio::test]
async fn keepalives_racing_a_close_never_bring_it_back() {
    let sessions = Arc::new(store().await);
    let t = tenant("t1");
    let t0 = now_ms();
    let session = opened("s-race", t0);
    sessions.open(&t, &session).await.unwrap();
    let keepers: Vec<_> = (0..16)
        .map(|i| {
            let (sessions, t, session) = (sessions.clone(), t.clone(), session.clone());
            tokio::spawn(async move {
                let mut kept = 0;
                for round in 0..10 {
                    let now = t0 + 100 + i * 10 + round;
                    let write = session.keepalive("agent-1", None, now).unwrap();
                    let written = sessions
                        .write(&t, "s-race", Some("agent-1"), &write, now)
                        .await
                        .unwrap();
                    if matches!(written, SessionWritten::Done(_)) {
                        kept += 1;
                    }
                }
                kept
            })
        })
        .collect();
    let close_at = t0 + 150;
    let write = session.close("agent-1", close_at).unwrap();
    let closed = sessions
        .write(&t, "s-race", Some("agent-1"), &write, close_at)
        .await
        .unwrap();
    assert!(matches!(closed, SessionWritten::Done(_)), "{closed:?}");
    let mut kept = 0;
    for keeper in keepers {
        kept += keeper.await.unwrap();
    }
    let last = sessions.get(&t, "s-race").await.unwrap().unwrap();
    assert_eq!(
        (last.ended, last.expires_at),
        (Some(Ended::Closed), close_at),
        "{kept} keepalives got in"
    );
}
