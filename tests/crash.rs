//! Crash safety: `leasekit serve` is killed with SIGKILL repeatedly while 8 clients acquire,
//! renew and release with requestIds, and restarted on the same data dir and port. Afterwards:
//! every acknowledged grant is still visible or was superseded (tokens only grew), tokens never
//! repeated, and every acknowledged requestId replays its original answer: the idempotency
//! records survived too.

mod support;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::history::{Event, assert_consistent, now_ms, parse_iso};
use support::*;
use tempfile::TempDir;

const CRASHES: usize = 5;

fn start(dir: &std::path::Path, port: u16) -> Child {
    let mut child = leasekit()
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir)
        .args(["--api-key", &format!("acme:{ACME_KEY}")])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("http://127.0.0.1:"), "restarted: {line:?}");
    child
}

/// An acknowledged mutation: its request and the answer the client saw.
#[derive(Clone)]
struct Acked {
    body: Value,
    data: Value,
}

async fn worker(
    url: String,
    id: usize,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
    history: Arc<Mutex<Vec<Event>>>,
) -> usize {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let holder = format!("w{id}");
    let mut tokens: HashMap<String, u64> = HashMap::new();
    let (mut n, mut errors) = (0u64, 0usize);
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let resource = format!("r{}", n % 4);
        let (op, mut body) = match tokens.get(&resource) {
            Some(t) if n % 3 == 0 => (
                "release",
                json!({"op": "release", "resource": resource, "holder": holder, "token": t}),
            ),
            Some(t) => (
                "renew",
                json!({"op": "renew", "resource": resource, "holder": holder, "token": t, "ttlSeconds": 2}),
            ),
            None => (
                "acquire",
                json!({"op": "acquire", "resource": resource, "holder": holder, "ttlSeconds": 2}),
            ),
        };
        body["tenantId"] = json!("crash");
        body["requestId"] = json!(format!("{holder}-{n}"));
        let used_token = body["token"].as_u64();
        let invoked = now_ms();
        let sent = http
            .post(&url)
            .header("x-api-key", ACME_KEY)
            .json(&body)
            .send()
            .await;
        let answer = match sent {
            Ok(r) if r.status().as_u16() == 200 => r.json::<Value>().await.ok(),
            _ => None,
        };
        let returned = now_ms();
        let event = |granted: Option<bool>, token: Option<u64>, expires_at: Option<i64>| Event {
            op,
            resource: resource.clone(),
            holder: holder.clone(),
            invoked,
            returned,
            granted,
            token,
            expires_at,
        };
        let Some(answer) = answer else {
            // The server is down (or answered 502 while its store was): outcome unknown.
            history.lock().unwrap().push(event(None, used_token, None));
            errors += 1;
            tokens.remove(&resource);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let data = answer["data"].clone();
        let granted = data["granted"].as_bool().unwrap();
        let token = if op == "acquire" {
            data["fencingToken"].as_u64().filter(|_| granted)
        } else {
            used_token
        };
        let expires = data["expiresAt"]
            .as_str()
            .and_then(parse_iso)
            .filter(|_| granted && op != "release");
        history
            .lock()
            .unwrap()
            .push(event(Some(granted), token, expires));
        match (op, granted) {
            ("acquire", true) => {
                tokens.insert(resource.clone(), data["fencingToken"].as_u64().unwrap());
            }
            ("release", true) | ("renew", false) => {
                tokens.remove(&resource);
            }
            _ => {}
        }
        acked.lock().unwrap().push(Acked { body, data });
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_grants_and_records_survive_sigkill() {
    let dir = TempDir::new().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = start(dir.path(), port);
    let url = format!("http://127.0.0.1:{port}/api/v1/lease");
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let history = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..8)
        .map(|id| {
            tokio::spawn(worker(
                url.clone(),
                id,
                stop.clone(),
                acked.clone(),
                history.clone(),
            ))
        })
        .collect();
    for _ in 0..CRASHES {
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.kill().unwrap(); // SIGKILL: no shutdown, no flush
        server.wait().unwrap();
        server = start(dir.path(), port);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut errors = 0;
    for w in workers {
        errors += w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    // The lease rules held across the crashes, for everything acknowledged.
    let history = history.lock().unwrap().clone();
    assert_consistent(&history, "across crashes");
    assert!(
        acked.len() > 100,
        "load went on around the crashes: {} acknowledged",
        acked.len()
    );
    assert!(errors > 0, "some calls met a dead server");

    let client = Client::new(url, Some(ACME_KEY));

    // Acknowledged grants are visible or superseded: the counter never went back, and no token
    // went to two holders (the same holder re-acquiring its live lease keeps its token).
    let mut issued: HashMap<String, HashMap<u64, String>> = HashMap::new();
    for a in acked
        .iter()
        .filter(|a| a.body["op"] == "acquire" && a.data["granted"] == true)
    {
        let resource = a.body["resource"].as_str().unwrap().to_owned();
        let token = a.data["fencingToken"].as_u64().unwrap();
        let holder = a.body["holder"].as_str().unwrap().to_owned();
        if let Some(other) = issued
            .entry(resource.clone())
            .or_default()
            .insert(token, holder.clone())
        {
            assert_eq!(
                other, holder,
                "{resource}: token {token} went to {other} and to {holder} across crashes"
            );
        }
    }
    for (resource, tokens) in &issued {
        let highest = *tokens.keys().max().unwrap();
        let fresh = client.data(json!({"op": "acquire", "resource": resource, "holder": "after", "tenantId": "crash", "ttlSeconds": 1})).await;
        let now = fresh["fencingToken"].as_u64().unwrap();
        if fresh["granted"] == true {
            assert!(now > highest, "{resource}: new token {now} after {highest}");
        } else {
            assert!(
                now >= highest,
                "{resource}: live token {now} below acknowledged {highest}"
            );
        }
    }
    // Every acknowledged requestId replays its original answer after the crashes.
    for a in &acked {
        let replay = client.data(a.body.clone()).await;
        assert_eq!(replay["replayed"], true, "{}", a.body);
        let mut original = a.data.clone();
        original["replayed"] = json!(true);
        assert_eq!(replay, original, "{}", a.body);
    }
    eprintln!(
        "crash: {CRASHES} SIGKILLs, {} acknowledged mutations replayed, {errors} calls met a dead server",
        acked.len()
    );
    server.kill().unwrap();
}
