//! DynamoDB round trips per lease path, counted by the SDK interceptor: the figures the storage
//! design promises (docs/adr/0001-lease-storage.md). Counts, not times: a regression fails here.

mod common;

use common::test_store;
use serde_json::json;
use shared::clock::now_ms;
use shared::lease::LeaseRequest;
use shared::lease::service::LeaseService;
use shared::provenance::Issuer;
use shared::store::LeaseStore;
use shared::store::round_trips::counted;
use shared::tenant::Tenant;

fn req(v: serde_json::Value) -> LeaseRequest {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn every_lease_path_costs_what_the_design_says() {
    let s = test_store().await;
    let service = LeaseService::new(
        LeaseStore::new(s.client, &s.tables.leases, &s.tables.requests),
        Issuer::from_seed(&[1; 32]),
    );
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let trips = |body: serde_json::Value| {
        let service = service.clone();
        let tenant = tenant.clone();
        async move {
            let (answer, n) = counted(service.execute(&tenant, &req(body), [0; 32], now)).await;
            (answer.expect("store answers").data, n)
        }
    };
    let acquire = |holder: &str| json!({"op": "acquire", "resource": "r", "holder": holder});
    let cases = [
        ("acquire, free", acquire("a"), 1, true),
        ("acquire, held by another (denied)", acquire("b"), 1, false),
        ("re-acquire by the holder", acquire("a"), 2, true),
        (
            "renew",
            json!({"op": "renew", "resource": "r", "holder": "a", "token": 1}),
            1,
            true,
        ),
        (
            "renew, wrong token (denied)",
            json!({"op": "renew", "resource": "r", "holder": "a", "token": 9}),
            1,
            false,
        ),
        ("get", json!({"op": "get", "resource": "r"}), 1, true),
        (
            "release",
            json!({"op": "release", "resource": "r", "holder": "a", "token": 1}),
            1,
            true,
        ),
        (
            "acquire with requestId",
            json!({"op": "acquire", "resource": "r", "holder": "a", "requestId": "q1"}),
            2,
            true,
        ),
        (
            "replay of that requestId",
            json!({"op": "acquire", "resource": "r", "holder": "a", "requestId": "q1"}),
            1,
            true,
        ),
        (
            "denied with requestId",
            json!({"op": "acquire", "resource": "r", "holder": "b", "requestId": "q2"}),
            2,
            false,
        ),
        (
            "renew with requestId",
            json!({"op": "renew", "resource": "r", "holder": "a", "token": 2, "requestId": "q3"}),
            2,
            true,
        ),
        (
            "release with requestId",
            json!({"op": "release", "resource": "r", "holder": "a", "token": 2, "requestId": "q4"}),
            2,
            true,
        ),
    ];
    let mut table = Vec::new();
    for (path, body, expected, granted) in cases {
        let (data, n) = trips(body).await;
        assert_eq!(data.granted, granted, "{path}");
        table.push(format!("{path}: {n}"));
        assert_eq!(
            n,
            expected,
            "{path}: {n} round trips, the design says {expected}\n{}",
            table.join("\n")
        );
    }
}
