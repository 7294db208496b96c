//! A history checker: many concurrent clients issue random acquire/renew/release/get on a few
//! resources with 1 s leases, recording when each call was invoked and when it returned; then
//! the history is checked against the lease rules, using only what real-time order makes certain
//! (client and server read the same clock here):
//! - a new acquisition's token is larger than every token of an acquisition that returned before
//!   it was invoked, and tokens of different holders never repeat;
//! - no two holders overlap: a token is never granted while a lease that was granted (and
//!   returned) before the acquire was invoked is still live and was not released;
//! - nothing succeeds with a superseded token.
//!
//! Against the embedded store by default; `LEASEKIT_TEST_DYNAMODB_ENDPOINT` (moto in CI) serves
//! the same server from that endpoint. `LEASEKIT_HISTORY_OPS` sets the number of operations.

mod support;

use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::history::{Event, assert_consistent, check, now_ms, parse_iso};
use support::*;
use tempfile::TempDir;

const CLIENTS: usize = 16;
const RESOURCES: [&str; 3] = ["r0", "r1", "r2"];

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

async fn client_loop(client: Client, id: usize, ops: usize, history: Arc<Mutex<Vec<Event>>>) {
    let holder = format!("h{id}");
    let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1);
    let mut tokens: HashMap<&'static str, u64> = HashMap::new();
    for _ in 0..ops {
        let resource = RESOURCES[(rng(&mut seed) % RESOURCES.len() as u64) as usize];
        let known = tokens.get(resource).copied();
        let op = match (rng(&mut seed) % 10, known) {
            (0..=4, _) | (_, None) => "acquire",
            (5..=6, Some(_)) => "renew",
            (7..=8, Some(_)) => "release",
            _ => "get",
        };
        let mut body = json!({"op": op, "resource": resource, "tenantId": "history"});
        if op != "get" {
            body["holder"] = json!(holder);
        }
        if matches!(op, "acquire" | "renew") {
            body["ttlSeconds"] = json!(1);
        }
        if matches!(op, "renew" | "release") {
            body["token"] = json!(known);
        }
        let invoked = now_ms();
        let data = &client.data(body).await;
        let returned = now_ms();
        let granted = data["granted"].as_bool().unwrap();
        let token = match op {
            "acquire" => data["fencingToken"].as_u64().filter(|_| granted),
            "get" => None,
            _ => known,
        };
        if op == "acquire" && granted {
            tokens.insert(resource, data["fencingToken"].as_u64().unwrap());
        }
        // A granted release ends the lease; a refused renew or release is how a holder learns it
        // lost it. Either way, forget the token, as a real client would.
        if (op == "release" || op == "renew") && (granted == (op == "release")) {
            tokens.remove(resource);
        }
        let expires_at = data["expiresAt"]
            .as_str()
            .and_then(parse_iso)
            .filter(|_| granted && op != "release");
        history.lock().unwrap().push(Event {
            op,
            resource: resource.to_owned(),
            holder: holder.clone(),
            invoked,
            returned,
            granted: Some(granted),
            token,
            expires_at,
        });
        // A little randomness in pacing, so leases lapse between calls too.
        if rng(&mut seed).is_multiple_of(8) {
            tokio::time::sleep(Duration::from_millis(rng(&mut seed) % 50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_concurrent_histories_follow_the_lease_rules() {
    let total: usize = std::env::var("LEASEKIT_HISTORY_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = TempDir::new().unwrap();
    let endpoint = std::env::var("LEASEKIT_TEST_DYNAMODB_ENDPOINT").ok();
    let prefix = unique_prefix();
    let server = match &endpoint {
        Some(url) => Server::start_with(
            dir.path(),
            &["--dynamodb-endpoint", url, "--table-prefix", &prefix],
        ),
        None => Server::start(dir.path()),
    };
    let history = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let client = server.client(Some(ACME_KEY));

    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            tokio::spawn(client_loop(
                client.clone(),
                id,
                total / CLIENTS,
                Arc::clone(&history),
            ))
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let history = history.lock().unwrap().clone();
    let granted_acquires = history
        .iter()
        .filter(|e| e.op == "acquire" && e.granted == Some(true))
        .count();
    let denied = history
        .iter()
        .filter(|e| e.granted == Some(false) && e.op != "get")
        .count();
    eprintln!(
        "history: {} ops in {:.1} s ({} granted acquires, {} denied mutations), store: {}",
        history.len(),
        started.elapsed().as_secs_f64(),
        granted_acquires,
        denied,
        endpoint.as_deref().unwrap_or("embedded")
    );
    assert!(history.len() >= total - CLIENTS);
    assert!(
        granted_acquires > 50 && denied > 50,
        "the history exercised contention and lapses"
    );
    assert_consistent(&history, "in the history");
}

/// The checker catches what it claims to: histories with a double grant, a token going back,
/// and a superseded token succeeding.
#[test]
fn the_checker_finds_broken_histories() {
    let e = |op, holder: &str, invoked, returned, token, expires_at| Event {
        op,
        resource: "r0".to_owned(),
        holder: holder.into(),
        invoked,
        returned,
        granted: Some(true),
        token: Some(token),
        expires_at,
    };
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 1, Some(1_010)),
            e("acquire", "b", 20, 30, 2, Some(1_030))
        ])
        .iter()
        .any(|v| v.contains("while token 1"))
    );
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 5, Some(20)),
            e("acquire", "b", 50, 60, 4, Some(1_060))
        ])
        .iter()
        .any(|v| v.contains("issued after"))
    );
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 1, Some(20)),
            e("acquire", "b", 50, 60, 2, Some(1_060)),
            e("renew", "a", 70, 80, 1, Some(1_080))
        ])
        .iter()
        .any(|v| v.contains("succeeded with token 1"))
    );
    // And accepts a correct one: lapse, then a new token.
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 1, Some(20)),
            e("acquire", "b", 50, 60, 2, Some(1_060))
        ])
        .is_empty()
    );
}
