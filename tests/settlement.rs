//! Settlement does not depend on the caller or on the process: a paid answer that committed is
//! settled even when its caller disconnects right after the commit, and a payment left open by a
//! killed server is settled (or recorded as expired) by the sweeper when it comes back. Nothing
//! is left `accepted` for good, and nothing that did not commit is charged.

mod support;

use leasekit_core::x402::client::{header, pay};
use leasekit_core::x402::types::PaymentRequirements;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::facilitator::{self, Mode};
use support::*;
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;

async fn offer(url: &str) -> PaymentRequirements {
    let a = post(
        url,
        "/api/v1/lease",
        &json!({"op": "get", "resource": "r"}),
        &[],
    )
    .await;
    a.required.expect("a 402 with PAYMENT-REQUIRED").accepts[0].clone()
}

fn payment(offer: &PaymentRequirements, nonce: u8) -> String {
    payment_valid_for(offer, nonce, offer.max_timeout_seconds)
}

/// A payment whose authorization stays valid for `seconds` from now.
fn payment_valid_for(offer: &PaymentRequirements, nonce: u8, seconds: u64) -> String {
    let signed_at = now_secs() + seconds - offer.max_timeout_seconds;
    header(&pay(&wallet(7), offer, signed_at, [nonce; 32]).unwrap())
}

fn nonce_hex(nonce: u8) -> String {
    format!("0x{}", hex::encode([nonce; 32]))
}

/// The ledger of a stopped server's data dir, one row per payment authorization.
fn ledger(dir: &std::path::Path) -> Vec<Value> {
    let out = leasekit()
        .args(["payments", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "error")
        .output()
        .expect("leasekit payments");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The ledger row of the authorization with `nonce`.
fn row(rows: &[Value], nonce: u8) -> Option<&Value> {
    let nonce = nonce_hex(nonce);
    rows.iter()
        .find(|r| r["authorization"].as_str().unwrap().ends_with(&nonce))
}

/// Wait until `done` holds, for at most `limit`.
async fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done()
}

/// Send a paid acquire over a raw connection, wait `after`, and hang up without reading.
async fn send_and_hang_up(url: &str, resource: &str, payment: &str, after: Duration) {
    let address = url.trim_start_matches("http://");
    let body = json!({"op": "acquire", "resource": resource, "holder": "w"}).to_string();
    let request = format!(
        "POST /api/v1/lease HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         PAYMENT-SIGNATURE: {payment}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(after).await;
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_hangs_up_after_the_commit_is_still_settled() {
    // /settle takes 300 ms, so most hang-ups below land after the commit and before settlement.
    let (facilitator_url, seen) =
        facilitator::start(Mode::SlowSettle(Duration::from_millis(300))).await;
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--facilitator-url",
            &facilitator_url,
            // What hangs up before its work even starts is voided by the sweeper soon after.
            "--settle-grace-seconds",
            "1",
            "--settle-sweep-seconds",
            "1",
        ],
    );
    let offer = offer(&server.url).await;
    let delays_ms = [0u64, 1, 2, 5, 10, 20, 40, 80, 120, 200, 280, 350, 500];
    for (i, delay) in delays_ms.iter().enumerate() {
        let nonce = u8::try_from(i + 1).unwrap();
        let resource = format!("job-{i}");
        send_and_hang_up(
            &server.url,
            &resource,
            &payment(&offer, nonce),
            Duration::from_millis(*delay),
        )
        .await;
    }
    // Which of them committed: the wallet's own paid `get` (other nonces) shows the lease.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut committed = Vec::new();
    for i in 0..delays_ms.len() {
        let nonce = u8::try_from(100 + i).unwrap();
        let body = json!({"op": "get", "resource": format!("job-{i}")});
        let headers = [("PAYMENT-SIGNATURE", payment(&offer, nonce))];
        let a = post(&server.url, "/api/v1/lease", &body, &headers).await;
        assert_eq!(a.status, 200, "{}", a.body);
        committed.push(a.body["data"]["holder"] == "w");
    }
    // Once the server has read a whole request, it carries it out, whenever the caller hangs up.
    assert!(
        committed.iter().all(|c| *c),
        "every request was read whole and committed: {committed:?}"
    );
    // Every committed acquire is settled (the sweeper voids the rest after its 1 s grace).
    let settled_all = eventually(Duration::from_secs(10), || {
        let nonces = seen.settled_nonces();
        (0..delays_ms.len())
            .filter(|i| committed[*i])
            .all(|i| nonces.contains(&nonce_hex(u8::try_from(i + 1).unwrap())))
    })
    .await;
    assert!(settled_all, "settled: {:?}", seen.settled_nonces());
    tokio::time::sleep(Duration::from_secs(3)).await;
    server.stop();
    let rows = ledger(dir.path());
    let nonces = seen.settled_nonces();
    for (i, committed) in committed.iter().enumerate() {
        let nonce = u8::try_from(i + 1).unwrap();
        let settles = nonces.iter().filter(|n| **n == nonce_hex(nonce)).count();
        let status = row(&rows, nonce).map(|r| r["status"].as_str().unwrap().to_owned());
        if *committed {
            assert_eq!(settles, 1, "job-{i}: settled exactly once");
            assert_eq!(status.as_deref(), Some("settled"), "job-{i}: {rows:?}");
        } else {
            // It never committed: never charged; if its payment was taken, it is void.
            assert_eq!(settles, 0, "job-{i}: not charged");
            assert!(
                matches!(status.as_deref(), None | Some("void")),
                "job-{i}: {rows:?}"
            );
        }
    }
    assert!(
        rows.iter().all(|r| r["status"] != "accepted"),
        "nothing left open: {rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_after_the_commit_settles_when_it_comes_back() {
    // This facilitator never finishes a /settle in time: the server is killed while it waits.
    let (stuck_url, stuck) = facilitator::start(Mode::SlowSettle(Duration::from_secs(60))).await;
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(dir.path(), &["--facilitator-url", &stuck_url]);
    let offer = offer(&server.url).await;
    let (lasting, short_lived) = (1u8, 2u8);
    let lasting_payment = payment(&offer, lasting);
    // An authorization valid for 8 s only: it lapses while the server is down.
    let short_payment = payment_valid_for(&offer, short_lived, 8);
    for (resource, payment) in [("a", lasting_payment), ("b", short_payment)] {
        let url = server.url.clone();
        tokio::spawn(async move {
            let body = json!({"op": "acquire", "resource": resource, "holder": "w"});
            let headers = [("PAYMENT-SIGNATURE", payment)];
            // The answer never comes: the server dies first.
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                reqwest::Client::new()
                    .post(format!("{url}/api/v1/lease"))
                    .header(headers[0].0, &headers[0].1)
                    .json(&body)
                    .send(),
            )
            .await;
        });
    }
    // Both committed: their settlements are in flight.
    let in_flight = eventually(Duration::from_secs(10), || {
        stuck.settled_nonces().len() == 2
    })
    .await;
    assert!(
        in_flight,
        "both reached /settle: {:?}",
        stuck.settled_nonces()
    );
    server.kill();
    let rows = ledger(dir.path());
    for nonce in [lasting, short_lived] {
        assert_eq!(
            row(&rows, nonce).unwrap()["status"],
            "accepted",
            "left open by the kill"
        );
    }
    // Let the short authorization lapse, then come back with a working facilitator.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (url, seen) = facilitator::start(Mode::Accepts).await;
    let server = Server::start_with(
        dir.path(),
        &[
            "--facilitator-url",
            &url,
            "--settle-grace-seconds",
            "1",
            "--settle-sweep-seconds",
            "1",
        ],
    );
    let swept = eventually(Duration::from_secs(10), || {
        seen.settled_nonces().contains(&nonce_hex(lasting))
    })
    .await;
    assert!(swept, "the sweeper settled the committed answer");
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.stop();
    let rows = ledger(dir.path());
    let lasting_row = row(&rows, lasting).unwrap();
    assert_eq!(lasting_row["status"], "settled", "{rows:?}");
    assert_eq!(lasting_row["transaction"], format!("0x{}", "ab".repeat(32)));
    assert_eq!(
        row(&rows, short_lived).unwrap()["status"],
        "expired",
        "too late to settle: recorded, not left open: {rows:?}"
    );
    assert!(
        !seen.settled_nonces().contains(&nonce_hex(short_lived)),
        "a lapsed authorization is not sent to /settle"
    );
}
