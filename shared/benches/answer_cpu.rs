//! CPU cost of one lease answer without I/O, per op (criterion): the handler's own work (parse,
//! validate, decide, build and serialize the answer), then the same with signing (canonicalize,
//! hash, sign), as every answer is sent. For proportion, one conditional write to the embedded
//! store over loopback: the I/O a local answer waits for. Prints figures; passes or fails on nothing.
//!
//! Reproduce: `cargo bench -p shared --bench answer_cpu`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use leasekit_core::lease::decide::decide;
use leasekit_core::lease::{LeaseAnswer, LeaseRequest, LeaseState};
use leasekit_core::provenance::Issuer;
use leasekit_core::provenance::answer::{Subject, provenance};
use leasekit_core::provenance::jcs::sha256;
use leasekit_core::schema::lease_input;
use serde_json::{Value, json};
use std::hint::black_box;

const NOW: i64 = 1_795_946_400_000;

fn handler_work(body: &[u8], state: &LeaseState) -> Value {
    let value: Value = serde_json::from_slice(body).unwrap();
    lease_input().check(&value).unwrap();
    let request: LeaseRequest = serde_json::from_value(value).unwrap();
    let command = request.command().unwrap();
    let answer = match decide(state, &command, NOW) {
        leasekit_core::lease::Decision::Write(w) => LeaseAnswer::granted(
            request.op,
            &w.effect.apply(state),
            request.holder.as_deref(),
            NOW,
        ),
        leasekit_core::lease::Decision::Deny(w)
        | leasekit_core::lease::Decision::Queue { witnesses: w, .. }
        | leasekit_core::lease::Decision::Refuse { witnesses: w, .. } => {
            LeaseAnswer::denied(request.op, state, request.holder.as_deref(), NOW, w)
        }
        leasekit_core::lease::Decision::Observe => LeaseAnswer::observed(state, None, NOW),
        leasekit_core::lease::Decision::EndedHandoff(h) => {
            LeaseAnswer::ended_handoff(request.op, &h)
        }
    };
    serde_json::to_value(answer).unwrap()
}

fn answers(c: &mut Criterion) {
    let issuer = Issuer::from_seed(&[5; 32]);
    let state = LeaseState::vacant(41);
    let mut group = c.benchmark_group("answer");
    for body in [
        json!({"op": "acquire", "resource": "invoice:INV-1009", "holder": "worker-7", "ttlSeconds": 60, "tenantId": "t1", "requestId": "w7-claim-INV-1009"}),
        json!({"op": "renew", "resource": "invoice:INV-1009", "holder": "worker-7", "token": 42, "ttlSeconds": 60, "tenantId": "t1"}),
        json!({"op": "release", "resource": "invoice:INV-1009", "holder": "worker-7", "token": 42, "tenantId": "t1"}),
        json!({"op": "get", "resource": "invoice:INV-1009", "tenantId": "t1"}),
    ] {
        let bytes = serde_json::to_vec(&body).unwrap();
        let op = body["op"].as_str().unwrap().to_owned();
        group.bench_with_input(BenchmarkId::new("handler", &op), &bytes, |b, bytes| {
            b.iter(|| handler_work(black_box(bytes), &state));
        });
        group.bench_with_input(BenchmarkId::new("signed", &op), &bytes, |b, bytes| {
            b.iter(|| {
                let data = handler_work(black_box(bytes), &state);
                let subject = Subject {
                    route: "POST /api/v1/lease",
                    op: &op,
                    request_sha256: sha256(&body),
                };
                provenance(&issuer, &subject, &data, NOW)
            });
        });
    }
    group.finish();
}

/// One guarded acquire (a conditional UpdateItem) against dynoxide on loopback: the I/O every
/// local answer waits for, to put the CPU figures above in proportion.
fn store_write(c: &mut Criterion) {
    use leasekit_core::lease::{Effect, Guard, Write};
    use leasekit_core::store::{LeaseKey, LeaseStore, Tables, ensure_tables};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(dynoxide::server::serve_on(
            listener,
            dynoxide::Database::memory().unwrap(),
        ));
        let client = leasekit_core::store::local_client(&url);
        let tables = Tables::with_prefix("bench-");
        ensure_tables(&client, &tables).await.unwrap();
        LeaseStore::new(client, &tables.leases, &tables.requests)
    });
    let tenant = leasekit_core::tenant::Tenant::for_key("bench", "t").unwrap();
    let mut i = 0u64;
    c.bench_function(
        "store/conditional UpdateItem, dynoxide in memory over loopback",
        |b| {
            b.iter(|| {
                i += 1;
                let key = LeaseKey::new(&tenant, &format!("r{i}"));
                let write = Write {
                    guard: Guard::Vacant,
                    effect: Effect::Take {
                        holder: "w".into(),
                        expires_at: NOW + 30_000,
                    },
                };
                runtime.block_on(store.apply(&key, &write, NOW)).unwrap()
            });
        },
    );
}

criterion_group!(benches, answers, store_write);
criterion_main!(benches);
