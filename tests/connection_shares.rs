//! One account cannot starve another of `leasekit serve`'s connections or waits (the attack of
//! 2026-12-05: one account's waiting calls at the connection cap made another account's `get`
//! take 38.8 s, and keyless slow bodies delayed everyone by 5-8 s). Real server, real sockets:
//! each scenario fills the cap as the attack did, then times another caller's call.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{ACME_KEY, GLOBEX_KEY, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn addr(server: &Server) -> String {
    server.url.strip_prefix("http://").unwrap().to_owned()
}

/// A raw POST /api/v1/lease on a connection of its own, written at once; the stream, to read
/// the answer from later.
async fn send(addr: &str, key: Option<&str>, body: &Value) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let body = body.to_string();
    let key = key.map_or(String::new(), |k| format!("X-API-KEY: {k}\r\n"));
    let request = format!(
        "POST /api/v1/lease HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{key}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// Everything the server sends until it closes the connection or `within` passes.
async fn read_all(stream: &mut TcpStream, within: Duration) -> String {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) | Ok(Ok(0) | Err(_)) => return String::from_utf8_lossy(&seen).into_owned(),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// globex's `get`, timed; it must be answered within 10 s at most.
async fn timed_get(server: &Server) -> Duration {
    let globex = server.client(Some(GLOBEX_KEY));
    let started = Instant::now();
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        globex.call(json!({"op": "get", "tenantId": "g", "resource": "x"})),
    )
    .await;
    let (status, answer) = answered.expect("another account's get waited 10 s at the cap");
    assert_eq!(status, 200, "{answer}");
    started.elapsed()
}

/// `leasekit serve` with `extra`, where acme's `owner` holds `r` (tenant `a`) for a minute: what
/// the waiting acquires wait for.
async fn serve_held(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::TempDir::new().unwrap();
    let server = Server::start_with(dir.path(), extra);
    // On a connection the server closes once it has answered (`Connection: close`), read to
    // its end: its slot is free before the test's own connections come. (A client's kept-alive
    // connection closes when the client goes, and a loaded server may count it a while longer:
    // at a cap of 4, the 4th waiter then made room by cutting a wait, seen once in CI.)
    let addr = addr(&server);
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let body = json!({"op": "acquire", "tenantId": "a", "resource": "r", "holder": "owner",
                      "ttlSeconds": 60})
    .to_string();
    let request = format!(
        "POST /api/v1/lease HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-API-KEY: {ACME_KEY}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let held = read_all(&mut stream, Duration::from_secs(10)).await;
    assert!(held.contains(r#""granted":true"#), "{held}");
    (dir, server)
}

/// `count` of acme's waiting acquires of `r` (holders w0, w1, ...), each on a connection of
/// its own, sent at once.
async fn waiting(addr: &str, count: usize) -> Vec<TcpStream> {
    let mut waiters = Vec::new();
    for i in 0..count {
        waiters.push(send(addr, Some(ACME_KEY), &waiting_acquire(&format!("w{i}"))).await);
    }
    waiters
}

fn waiting_acquire(holder: &str) -> Value {
    json!({"op": "acquire", "tenantId": "a", "resource": "r", "holder": holder,
           "ttlSeconds": 60, "waitSeconds": 20})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_accounts_waits_at_the_cap_give_way_to_another_accounts_call() {
    // The wait share set out of the way: this is the cap's own fairness.
    let (_dir, server) =
        serve_held(&["--max-connections", "16", "--max-waits-per-account", "64"]).await;
    let addr = addr(&server);
    // 20 waiting calls for a cap of 16: every slot waits, 4 more in the backlog.
    let waiters = waiting(&addr, 20).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let took = timed_get(&server).await;
    assert!(
        took < Duration::from_secs(3),
        "another account's get took {took:?} behind one account's waits"
    );
    // The waits that gave way were answered, as a wait that ended is: not granted, who holds
    // the lease; and their connections closed.
    let mut cut = 0;
    for mut waiter in waiters {
        let answer = read_all(&mut waiter, Duration::from_millis(200)).await;
        if answer.is_empty() {
            continue;
        }
        cut += 1;
        let lower = answer.to_ascii_lowercase();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(lower.contains("connection: close"), "{answer}");
        // What the wait came to is the answer (a grant could be): no "come back" of its own.
        assert!(!lower.contains("retry-after"), "{answer}");
        assert!(answer.contains("\"granted\":false"), "{answer}");
        assert!(answer.contains("\"holder\":\"owner\""), "{answer}");
    }
    assert!(cut >= 1, "no wait gave way");
    assert!(cut <= 8, "{cut} waits ended for one get");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_waits_sent_again_at_once_do_not_hold_the_cap() {
    // One wait at a time for the account: the other callers are refused, and call again 50 ms
    // later on their kept-alive connections, as the attack's 600 did at a cap of 512.
    let (_dir, server) =
        serve_held(&["--max-connections", "8", "--max-waits-per-account", "1"]).await;
    let url = server.client(None).url;
    let waiting = |i| waiting_acquire(&format!("w{i}"));
    let stop = cycling(&url, Some(ACME_KEY), waiting, 48, Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let took = timed_get(&server).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        took < Duration::from_secs(3),
        "another account's get took {took:?} behind one account's refused waits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accounts_waits_beyond_its_share_are_refused_with_429_and_nothing_done() {
    let (_dir, server) = serve_held(&["--max-waits-per-account", "2"]).await;
    let acme = server.client(Some(ACME_KEY));
    let addr = addr(&server);
    let _first = send(&addr, Some(ACME_KEY), &waiting_acquire("w1")).await;
    let _second = send(&addr, Some(ACME_KEY), &waiting_acquire("w2")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A third, under another tenantId of the same account: the share is the account's.
    let mut third = waiting_acquire("w3");
    third["tenantId"] = json!("another");
    third["requestId"] = json!("third-call");
    let mut stream = send(&addr, Some(ACME_KEY), &third).await;
    // What came within 1.5 s (the connection stays open after it).
    let answer = read_all(&mut stream, Duration::from_millis(1_500)).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(answer.contains("\"code\":\"RATE_LIMITED\""), "{answer}");
    assert!(answer.contains("waiting calls"), "{answer}");
    // Nothing was done: the requestId has no answer kept, the same call without a wait runs
    // afresh (and takes the free resource of that tenant).
    third.as_object_mut().unwrap().remove("waitSeconds");
    let fresh = acme.data(third).await;
    assert_eq!(fresh["granted"], true, "{fresh}");
    assert_eq!(fresh["replayed"], false, "{fresh}");
    // A call that does not wait is not counted, and another account has its own share.
    let busy = acme
        .data(json!({"op": "acquire", "tenantId": "a", "resource": "r", "holder": "x"}))
        .await;
    assert_eq!(busy["granted"], false, "{busy}");
    let globex = server.client(Some(GLOBEX_KEY));
    let waited = globex
        .data(
            json!({"op": "acquire", "tenantId": "g", "resource": "r", "holder": "h",
                     "waitSeconds": 1}),
        )
        .await;
    assert_eq!(waited["granted"], true, "{waited}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_slow_bodies_at_the_cap_give_way_to_a_keyed_call() {
    let dir = tempfile::TempDir::new().unwrap();
    let server = Server::start_with(
        dir.path(),
        &["--max-connections", "8", "--body-timeout", "30"],
    );
    let addr = addr(&server);
    // Every slot a request whose body trickles in, a byte every 300 ms, as the attack's 260
    // slow bodies did.
    let mut trickles = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /api/v1/lease HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"op\":"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        trickles.push(tokio::spawn(async move {
            while stream.write_all(b" ").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let took = timed_get(&server).await;
    assert!(
        took < Duration::from_secs(4),
        "a keyed get took {took:?} behind trickling keyless bodies"
    );
    for trickle in trickles {
        trickle.abort();
    }
}

/// `count` callers, each on one kept-alive connection of its own (reconnecting if closed),
/// sending `body` with `key` every `every` until the returned flag is set.
fn cycling(
    url: &str,
    key: Option<&'static str>,
    body: impl Fn(usize) -> Value,
    count: usize,
    every: Duration,
) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for i in 0..count {
        let (url, stop, body) = (url.to_owned(), stop.clone(), body(i).to_string());
        tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut request = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone());
                if let Some(key) = key {
                    request = request.header("x-api-key", key);
                }
                if let Ok(answer) = request.send().await {
                    let _ = answer.bytes().await;
                }
                tokio::time::sleep(every).await;
            }
        });
    }
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_kept_in_use_by_the_biggest_account_still_give_way() {
    // Every slot a keyless connection sending a call every 0.4 s: none was ever quiet for the
    // second eviction once waited for (the attack's round 2: everyone else shut out).
    let (_dir, server) = serve_held(&["--max-connections", "16"]).await;
    let url = server.client(None).url;
    let stop = cycling(
        &url,
        None,
        |_| json!({"op": "get", "tenantId": "a", "resource": "r"}),
        16,
        Duration::from_millis(400),
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let took = timed_get(&server).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(took < Duration::from_secs(3), "a keyed get took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_calling_back_to_back_on_every_slot_still_gives_way() {
    // Every slot one of acme's connections, each sending its next call as soon as the last is
    // answered: none was ever quiet, waiting or slow, so nothing gave way and another account's
    // connection sat in the listen queue for as long as acme kept on (the attack of
    // 2026-12-07). Now one of them closes once its call is answered.
    let (_dir, server) = serve_held(&["--max-connections", "8"]).await;
    let url = server.client(None).url;
    let stop = cycling(
        &url,
        Some(ACME_KEY),
        |_| json!({"op": "get", "tenantId": "a", "resource": "r"}),
        8,
        Duration::ZERO,
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let took = timed_get(&server).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        took < Duration::from_secs(3),
        "a get of another account took {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_gives_way_at_the_cap_until_a_connection_comes() {
    let (_dir, server) =
        serve_held(&["--max-connections", "4", "--max-waits-per-account", "4"]).await;
    let addr = addr(&server);
    let mut waiters = waiting(&addr, 4).await;
    // At the cap with nobody else there: every wait goes on (one used to be cut at once).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for waiter in &mut waiters {
        let answer = read_all(waiter, Duration::from_millis(50)).await;
        assert!(answer.is_empty(), "a wait ended for nobody: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_accounts_wait_is_not_cut_for_the_biggest_accounts_sake() {
    let (_dir, server) = serve_held(&["--max-connections", "16"]).await;
    let addr = addr(&server);
    // acme: two waits. globex: the other 14 connections, each in use every 0.3 s.
    let mut waiters = waiting(&addr, 2).await;
    let url = server.client(None).url;
    let body = |_| json!({"op": "get", "tenantId": "g", "resource": "x"});
    let stop = cycling(&url, Some(GLOBEX_KEY), body, 14, Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // Newcomers: globex, the account with the most, makes room for each.
    for _ in 0..4 {
        let took = timed_get(&server).await;
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for waiter in &mut waiters {
        let answer = read_all(waiter, Duration::from_millis(50)).await;
        assert!(
            answer.is_empty(),
            "acme's wait was cut for globex: {answer}"
        );
    }
}

/// 100 keyless connections, each sending `start` and then a space every 0.3 s, and connecting
/// again when closed, until the flag is set.
fn flood(addr: &str, start: &'static [u8]) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for _ in 0..100 {
        let (addr, stop) = (addr.to_owned(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(mut stream) = TcpStream::connect(&addr).await else {
                    continue;
                };
                if stream.write_all(start).await.is_err() {
                    continue;
                }
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    if stream.write_all(b" ").await.is_err() {
                        break;
                    }
                }
            }
        });
    }
    stop
}

/// A keyed `get` while 100 keyless connections trickle `start` at a cap of 16: with a second to
/// wait before each could give way, the cap took in 16 a second, and a keyed caller queued
/// behind all of them, or had its connect dropped (7-20 s in the attack's round 2).
async fn keyed_get_through_a_flood(start: &'static [u8]) {
    let (_dir, server) = serve_held(&[
        "--max-connections",
        "16",
        "--header-timeout",
        "30",
        "--body-timeout",
        "30",
    ])
    .await;
    let stop = flood(&addr(&server), start);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let took = timed_get(&server).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        took < Duration::from_secs(3),
        "a keyed get took {took:?} behind a keyless flood"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_flood_of_trickling_heads_does_not_shut_out_a_keyed_call() {
    keyed_get_through_a_flood(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nX-Slow:").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_flood_of_trickling_bodies_does_not_shut_out_a_keyed_call() {
    keyed_get_through_a_flood(
        b"POST /api/v1/lease HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    )
    .await;
}

/// Parked watches of four accounts, each at its share of the waits, under a small open-file
/// limit: another account still gets in (the attack of 2026-12-06: each waiting call holds two
/// descriptors, the cap was half the limit, and the server could no longer accept anyone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_watches_at_the_cap_leave_a_descriptor_to_accept_another_account_with() {
    let dir = tempfile::TempDir::new().unwrap();
    let accounts: Vec<(String, String)> = (1..=4)
        .map(|n| (format!("w{n}"), format!("watcher-{n}-key-0123456789")))
        .collect();
    let keys: Vec<String> = accounts
        .iter()
        .map(|(account, key)| format!("{account}:{key}"))
        .collect();
    // Shares big enough that the four fill the connection cap with waits.
    let mut extra: Vec<&str> = vec!["--max-waits-per-account", "40"];
    for key in &keys {
        extra.extend(["--api-key", key.as_str()]);
    }
    let server = Server::start_with_open_files(dir.path(), &extra, 256);
    let addr = addr(&server);
    // The tag of a resource nobody ever held: each watch waits for its first grant.
    let first = server
        .client(Some(ACME_KEY))
        .data(json!({"op": "watch", "tenantId": "a", "resource": "quiet"}))
        .await;
    let tag = first["stateTag"].as_str().unwrap().to_owned();
    let mut parked = Vec::new();
    for (_, key) in &accounts {
        for n in 0..40 {
            let watch = json!({"op": "watch", "tenantId": "a", "resource": format!("quiet-{n}"),
                               "stateTag": tag, "waitSeconds": 20});
            parked.push(send(&addr, Some(key), &watch).await);
        }
    }
    // Time for every one of them to be read and parked (a debug build, on 2 cores).
    tokio::time::sleep(Duration::from_secs(2)).await;
    for _ in 0..5 {
        let took = timed_get(&server).await;
        assert!(
            took < Duration::from_secs(2),
            "another account's get took {took:?}"
        );
    }
    drop(parked);
}

/// Watches are counted apart from waiting acquires: an account's observers at their share
/// leave its campaigns their own (the attack of 2026-12-06: parked watches made the account's
/// campaign and `leasekit elect` fail with 429).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accounts_watches_leave_its_waiting_acquires_their_share() {
    let (_dir, server) = serve_held(&["--max-waits-per-account", "2"]).await;
    let addr = addr(&server);
    let acme = server.client(Some(ACME_KEY));
    let tag = acme
        .data(json!({"op": "watch", "tenantId": "a", "resource": "r"}))
        .await["stateTag"]
        .clone();
    let watch = json!({"op": "watch", "tenantId": "a", "resource": "r", "stateTag": tag,
                       "waitSeconds": 20});
    let _first = send(&addr, Some(ACME_KEY), &watch).await;
    let _second = send(&addr, Some(ACME_KEY), &watch).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut third = send(&addr, Some(ACME_KEY), &watch).await;
    let answer = read_all(&mut third, Duration::from_millis(1_000)).await;
    assert!(
        answer.starts_with("HTTP/1.1 429"),
        "the watches' own share: {answer}"
    );
    // Both waiting acquires of the account still wait (the first one's answer after its wait;
    // which of the two is first in line depends on which the server reads first).
    let _w1 = send(&addr, Some(ACME_KEY), &waiting_acquire("w1")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waited = acme
        .data(
            json!({"op": "acquire", "tenantId": "a", "resource": "r", "holder": "w2",
                     "ttlSeconds": 60, "waitSeconds": 1}),
        )
        .await;
    assert_eq!(waited["granted"], false, "{waited}");
    assert!(
        matches!(waited["queuePosition"].as_u64(), Some(1 | 2)),
        "it waited in line: {waited}"
    );
}
