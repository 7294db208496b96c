//! DynamoDB round trips and capacity units per lease path, measured by the SDK interceptor: the
//! figures the storage design promises (docs/adr/0001-lease-storage.md) and BENCHMARKS.md
//! publishes. Counts, not times: a regression fails here.
//!
//! Print the table: `cargo test -p shared --test usage -- --nocapture`

mod common;

use common::{ENDPOINT_VAR, test_store};
use leasekit_core::clock::now_ms;
use leasekit_core::lease::LeaseRequest;
use leasekit_core::provenance::Issuer;
use leasekit_core::service::lease::LeaseService;
use leasekit_core::store::LeaseStore;
use leasekit_core::store::usage::{Usage, measured};
use leasekit_core::tenant::Tenant;
use serde_json::json;

fn req(v: serde_json::Value) -> LeaseRequest {
    serde_json::from_value(v).unwrap()
}

/// The expected cost of one path: round trips, read units, billed write units.
type Cost = (u32, f64, f64);

#[tokio::test]
async fn every_lease_path_costs_what_the_design_says() {
    let s = test_store().await;
    let service = LeaseService::new(
        LeaseStore::new(s.client, &s.tables.leases, &s.tables.requests),
        Issuer::from_seed(&[1; 32]),
    );
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let run = |body: serde_json::Value| {
        let service = service.clone();
        let tenant = tenant.clone();
        async move {
            let (answer, usage) =
                measured(service.execute(&tenant, &req(body), [0; 32], now)).await;
            (answer.expect("store answers").data, usage)
        }
    };
    let acquire = |holder: &str| json!({"op": "acquire", "resource": "r", "holder": holder});
    let with_id = |mut body: serde_json::Value, id: &str| {
        body["requestId"] = json!(id);
        body
    };
    let renew = |token: u64| json!({"op": "renew", "resource": "r", "holder": "a", "token": token});
    let release =
        |token: u64| json!({"op": "release", "resource": "r", "holder": "a", "token": token});
    let cases: [(&str, serde_json::Value, bool, Cost); 13] = [
        ("acquire, free", acquire("a"), true, (1, 0.0, 1.0)),
        (
            "acquire, held by another (denied)",
            acquire("b"),
            false,
            (1, 0.0, 1.0),
        ),
        (
            "re-acquire by the holder",
            acquire("a"),
            true,
            (2, 0.0, 2.0),
        ),
        ("renew", renew(1), true, (1, 0.0, 1.0)),
        (
            "renew, wrong token (denied)",
            renew(9),
            false,
            (1, 0.0, 1.0),
        ),
        (
            "get",
            json!({"op": "get", "resource": "r"}),
            true,
            (1, 1.0, 0.0),
        ),
        ("release", release(1), true, (1, 0.0, 1.0)),
        (
            "acquire with requestId",
            with_id(acquire("a"), "q1"),
            true,
            (2, 4.0, 4.0),
        ),
        (
            "replay of that requestId",
            with_id(acquire("a"), "q1"),
            true,
            (1, 4.0, 0.0),
        ),
        (
            "denied with requestId",
            with_id(acquire("b"), "q2"),
            false,
            (2, 4.0, 1.0),
        ),
        (
            "renew with requestId",
            with_id(renew(2), "q3"),
            true,
            (2, 4.0, 4.0),
        ),
        (
            "release with requestId",
            with_id(release(2), "q4"),
            true,
            (2, 4.0, 4.0),
        ),
        (
            "get with requestId",
            with_id(json!({"op": "get", "resource": "r"}), "q5"),
            false,
            (1, 1.0, 0.0),
        ),
    ];
    let mut table = vec![format!(
        "| {:<34} | {:>11} | {:>10} | {:>11} |",
        "path", "round trips", "read units", "write units"
    )];
    // dynoxide bills capacity by DynamoDB's published rules; moto does not (half a unit per write,
    // nothing for transactions), so against another endpoint only round trips are checked.
    let check_units = std::env::var_os(ENDPOINT_VAR).is_none();
    let mut wrong = Vec::new();
    for (path, body, granted, expected) in cases {
        let (data, usage) = run(body).await;
        assert_eq!(data.granted, granted, "{path}");
        let Usage {
            round_trips,
            read_units,
            ..
        } = usage;
        let measured = (round_trips, read_units, usage.billed_write_units());
        table.push(format!(
            "| {path:<34} | {round_trips:>11} | {read_units:>10} | {:>11} |",
            measured.2
        ));
        let differs = if check_units {
            measured != expected
        } else {
            measured.0 != expected.0
        };
        if differs {
            wrong.push(format!(
                "{path}: measured {measured:?}, the design says {expected:?}"
            ));
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
