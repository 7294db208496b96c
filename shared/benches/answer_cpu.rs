//! CPU cost of one lease answer without I/O: the handler's own work (parse, validate, decide,
//! build and serialize the answer) against what signing adds (canonicalize, hash, sign).
//! Prints figures; passes or fails on nothing.
//!
//! Reproduce: `cargo bench -p shared --bench answer_cpu`

use serde_json::{Value, json};
use shared::lease::decide::decide;
use shared::lease::{LeaseAnswer, LeaseRequest, LeaseState};
use shared::provenance::Issuer;
use shared::provenance::answer::{Subject, provenance};
use shared::provenance::jcs::sha256;
use shared::schema::lease_input;
use std::hint::black_box;
use std::time::{Duration, Instant};

const NOW: i64 = 1_795_946_400_000;

/// Median of `rounds` timings of `iters` calls, per call.
fn measure(iters: u32, rounds: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..iters {
        f();
    }
    let mut per_call: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed() / iters
        })
        .collect();
    per_call.sort();
    per_call[rounds / 2]
}

fn handler_work(body: &[u8], state: &LeaseState) -> Value {
    let value: Value = serde_json::from_slice(body).unwrap();
    lease_input().check(&value).unwrap();
    let request: LeaseRequest = serde_json::from_value(value).unwrap();
    let command = request.command().unwrap();
    let answer = match decide(state, &command, NOW) {
        shared::lease::Decision::Write(w) => {
            LeaseAnswer::granted(request.op, &w.effect.apply(state), NOW)
        }
        shared::lease::Decision::Deny(w) => LeaseAnswer::denied(request.op, state, NOW, w),
        shared::lease::Decision::Observe => LeaseAnswer::observed(state, NOW),
    };
    serde_json::to_value(answer).unwrap()
}

fn main() {
    let issuer = Issuer::from_seed(&[5; 32]);
    let state = LeaseState {
        last_token: 41,
        holder: None,
        expires_at: None,
    };
    println!(
        "leasekit answer CPU cost (no I/O), median per call; machine: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<9} {:>14} {:>16} {:>14} {:>8}",
        "op", "handler (µs)", "+ signing (µs)", "total (µs)", "signing"
    );
    for body in [
        json!({"op": "acquire", "resource": "invoice:INV-1009", "holder": "worker-7", "ttlSeconds": 60, "tenantId": "t1", "requestId": "w7-claim-INV-1009"}),
        json!({"op": "renew", "resource": "invoice:INV-1009", "holder": "worker-7", "token": 42, "ttlSeconds": 60, "tenantId": "t1"}),
        json!({"op": "release", "resource": "invoice:INV-1009", "holder": "worker-7", "token": 42, "tenantId": "t1"}),
        json!({"op": "get", "resource": "invoice:INV-1009", "tenantId": "t1"}),
    ] {
        let bytes = serde_json::to_vec(&body).unwrap();
        let op = body["op"].as_str().unwrap().to_owned();
        let data = handler_work(&bytes, &state);
        let handler = measure(2_000, 15, || {
            black_box(handler_work(black_box(&bytes), &state));
        });
        let signing = measure(2_000, 15, || {
            let subject = Subject {
                route: "POST /api/v1/lease",
                op: &op,
                request_sha256: sha256(&body),
            };
            black_box(provenance(&issuer, &subject, black_box(&data), NOW));
        });
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{:<9} {:>14.1} {:>16.1} {:>14.1} {:>7.0}%",
            op,
            us(handler),
            us(signing),
            us(handler + signing),
            100.0 * us(signing) / us(handler + signing)
        );
    }
    let round_trip = store_round_trip();
    println!(
        "one conditional UpdateItem on the embedded store (dynoxide over loopback): {:.1} µs median; on AWS a DynamoDB round trip is milliseconds",
        round_trip.as_secs_f64() * 1e6
    );
}

/// Median time of one guarded acquire (a conditional UpdateItem) against dynoxide on loopback:
/// the I/O every answer waits for, to put the CPU figures above in proportion.
fn store_round_trip() -> Duration {
    use shared::lease::{Effect, Guard, Write};
    use shared::store::{LeaseKey, LeaseStore, Tables, ensure_tables};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(dynoxide::server::serve_on(
            listener,
            dynoxide::Database::memory().unwrap(),
        ));
        let client = shared::store::local_client(&url);
        let tables = Tables::with_prefix("bench-");
        ensure_tables(&client, &tables).await.unwrap();
        let store = LeaseStore::new(client, &tables.leases, &tables.requests);
        let tenant = shared::tenant::Tenant::for_key("bench", "t").unwrap();
        let mut times = Vec::new();
        for i in 0..2_000 {
            let key = LeaseKey::new(&tenant, &format!("r{i}"));
            let write = Write {
                guard: Guard::Vacant,
                effect: Effect::Take {
                    holder: "w".into(),
                    expires_at: NOW + 30_000,
                },
            };
            let start = Instant::now();
            store.apply(&key, &write, NOW).await.unwrap();
            times.push(start.elapsed());
        }
        times.sort();
        times[times.len() / 2]
    })
}
