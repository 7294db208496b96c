//! The Rust client's finished work and claim-next against `leasekit serve` (docs/adr/0012): a
//! guard finishes its resource with a result, a later guard is told who finished it
//! (`Error::Finished`), `claim_next` hands out each task of a list once, and the finisher
//! reopens what must be done again.

mod support;

use leasekit_client::{Claim, Client, Error, Lost};
use std::collections::HashSet;
use std::time::Duration;
use support::*;
use tempfile::TempDir;

fn client(server: &Server) -> Client {
    Client::with_api_key(&server.url, ACME_KEY, "work-tests").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_finishes_its_task_and_the_next_is_told_who_did() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let guard = c
        .guard("task:1", "w1", Duration::from_secs(30))
        .await
        .unwrap();
    let token = guard.fencing_token();
    let finished = guard.done(Some("sent INV-1009"), None).await.unwrap();
    let mark = finished.done.expect("the answer carries the mark");
    assert_eq!((mark.holder.as_str(), mark.fencing_token), ("w1", token));
    match c.guard("task:1", "w2", Duration::from_secs(30)).await {
        Err(Error::Finished(done)) => {
            assert_eq!(done.holder, "w1");
            assert_eq!(done.result.as_deref(), Some("sent INV-1009"));
        }
        other => panic!("{:?}", other.map(|g| g.fencing_token())),
    }
    // The finisher reopens it; the next guard's token continues from the counter.
    let reopened = c
        .reopen("task:1", "the invoice bounced", Some(("w1", token)))
        .await
        .unwrap();
    assert!(reopened.granted && reopened.done.is_none());
    let again = c
        .guard("task:1", "w2", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(again.fencing_token(), token + 1);
    again.release().await.unwrap();
}

/// A guard lost before its owner finishes marks nothing: `done` says it was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_after_the_lease_was_revoked_is_lost_and_marks_nothing() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let admin = Client::with_api_key(&server.url, ACME_ADMIN_KEY, "work-tests").unwrap();
    let mut guard = c
        .guard("task:2", "w1", Duration::from_secs(2))
        .await
        .unwrap();
    admin
        .revoke("task:2", Some("w1"), None, "stuck")
        .await
        .unwrap();
    // The next renewal is refused: REVOKED.
    let lost = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .unwrap();
    assert_eq!(lost, Lost::Refused("REVOKED".into()));
    let done = guard.done(Some("too late"), None).await;
    assert!(matches!(done, Err(Error::Lost(_))), "{done:?}");
    let got = c.get("task:2").await.unwrap();
    assert_eq!(got.done, None);
}

/// Eight workers claim from one list of twelve until none is left, finishing each: every task
/// is finished once, by one worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_claim_each_task_of_a_list_once() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let tasks: Vec<String> = (0..12).map(|i| format!("queue:{i:02}")).collect();
    let mut workers = Vec::new();
    for w in 0..8 {
        let (c, tasks) = (client(&server), tasks.clone());
        workers.push(tokio::spawn(async move {
            let names: Vec<&str> = tasks.iter().map(String::as_str).collect();
            let mut mine = Vec::new();
            loop {
                let holder = format!("w{w}");
                match c
                    .claim_next(&names, &holder, Duration::from_secs(30))
                    .await
                    .unwrap()
                {
                    Claim::Won { resource, guard } => {
                        guard.done(Some(&holder), None).await.unwrap();
                        mine.push(resource);
                    }
                    Claim::NoneFree { finished, busy } if busy.is_empty() => {
                        assert_eq!(finished.len(), names.len());
                        return mine;
                    }
                    // Someone is finishing one: ask again.
                    Claim::NoneFree { .. } => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }));
    }
    let mut done = HashSet::new();
    for w in workers {
        for resource in w.await.unwrap() {
            assert!(done.insert(resource.clone()), "{resource} done twice");
        }
    }
    assert_eq!(done.len(), tasks.len());
}

/// A done release the service refuses (a result over 1024 bytes) releases the lease all the
/// same: the owner hears the refusal, and the next holder need not wait out the TTL (the attack
/// of 2026-12-06).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_done_still_releases_the_lease() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let guard = c
        .guard("task:3", "w1", Duration::from_secs(300))
        .await
        .unwrap();
    let refused = guard.done(Some(&"x".repeat(1025)), None).await;
    assert!(
        matches!(refused, Err(Error::Refused { status: 400, .. })),
        "{refused:?}"
    );
    let got = c.get("task:3").await.unwrap();
    assert!(got.holders.is_empty() && got.done.is_none(), "{got:?}");
}
